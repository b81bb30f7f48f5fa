"""A rollup parent built from its children (jobs.rollup, SPEC §8): the parent Episode row — extractive summary,
top keywords/entities, time span, raw_refs unioned and capped, importance/confidence max, frequency summed — and
its SEMANTIC_CONTAINS edges, with the deterministic parent id (see jobs.rollup's module doc for each field)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import polars as pl

from jobs.integrity import PY_WHITESPACE
from r2g.ids import stable_id, stable_ids
from r2g.merge import MERGED_REF_CAP
from r2g.rules import TITLE_MAX_CHARS, clip

if TYPE_CHECKING:
    from jobs.rollup import RollupConfig

# v2: a parent's title is the start of its summary (v1's "time · crazy · pokemon" keyword lists read as no memory)
PROVENANCE = "jobs.rollup.compact.v2"


ID_SCHEME = "jobs.rollup.compact.v1"  # parent ids: the same children make the same parent whatever the title rule


ROLLUP_SUBTYPE = "rollup"


SEMANTIC_CONTAINS = "SEMANTIC_CONTAINS"


EPISODE = "Episode"


def _top_items(kids: pl.DataFrame, col: str, n: int) -> pl.DataFrame:
    """(gid, col): per group, the n items found in the most children (each child counts once), ties by first
    appearance (children in timeline order, items in list order) — _top, vectorised."""
    items = (
        kids.select("gid", "pos", pl.col(col).alias("_item"))
        .filter(pl.col("_item").list.len() > 0)
        .explode("_item")
        .filter(pl.col("_item").is_not_null() & (pl.col("_item") != ""))
        .unique(subset=["gid", "pos", "_item"], keep="first", maintain_order=True)
        .with_row_index("_at")
    )
    return (
        items.group_by(["gid", "_item"])
        .agg(pl.len().alias("_n"), pl.col("_at").min())
        .sort(["gid", "_n", "_at"], descending=[False, True, False])
        .group_by("gid", maintain_order=True)
        .agg(pl.col("_item").head(n).alias(col))
    )


def build_parents(
    groups: pl.DataFrame, episodes: pl.DataFrame, config: RollupConfig
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The parent rows (NODES columns of _OUT_COLS) and SEMANTIC_CONTAINS edges of `groups` (gid, tenant, parent,
    id: child ids in timeline order), from their children's rows (see the module doc for each field)."""
    kids = (
        groups.with_columns(pl.int_ranges(pl.col("id").list.len()).alias("pos"))
        .explode("id", "pos")
        .join(episodes, on=["tenant", "id"], how="left", maintain_order="left")
    )
    start = pl.coalesce("time_start", "first_seen")
    agg = kids.group_by("gid", maintain_order=True).agg(
        pl.col("tenant").first(),
        pl.col("parent").first().alias("id"),
        pl.col("id").alias("_kids"),
        start.min().alias("time_start"),
        pl.coalesce("time_end", "time_start", "last_seen", "first_seen").max().alias("time_end"),
        pl.col("first_seen").min(),
        pl.col("last_seen").max(),
        pl.col("importance").fill_null(0.0).max(),
        pl.col("confidence").fill_null(0.0).max(),
        pl.when(pl.col("frequency").fill_null(0) == 0)
        .then(1)
        .otherwise("frequency")
        .sum()
        .cast(pl.Int64)
        .alias("frequency"),
        pl.when(pl.col("conv_id").n_unique() == 1).then(pl.col("conv_id").first()).alias("conv_id"),
        pl.when(pl.col("speaker").n_unique() == 1).then(pl.col("speaker").first()).alias("speaker"),
        # the summary's inputs: text (else title), importance, in timeline order
        pl.coalesce(
            pl.when(pl.col("text") != "").then("text"), pl.when(pl.col("title") != "").then("title"), pl.lit("")
        ).alias("_texts"),
        pl.col("importance").fill_null(0.0).alias("_imps"),
    )
    best = (
        kids.sort(["gid", pl.col("importance").fill_null(0.0), "pos"], descending=[False, True, False])
        .group_by("gid", maintain_order=True)
        .agg(pl.col("title").first().alias("_best"))
    )
    lang = (
        kids.filter(pl.col("lang").is_not_null() & (pl.col("lang") != ""))
        .group_by(["gid", "lang"])
        .len()
        .sort(["gid", "len", "lang"], descending=[False, True, False])
        .group_by("gid", maintain_order=True)
        .agg(pl.col("lang").first())
    )
    agg = (
        agg.join(_top_items(kids, "keywords", config.max_keywords), on="gid", how="left", maintain_order="left")
        .join(_top_items(kids, "entities", config.max_entities), on="gid", how="left", maintain_order="left")
        .join(best, on="gid", how="left", maintain_order="left")
        .join(lang, on="gid", how="left", maintain_order="left")
        .join(_capped_refs(kids), on="gid", how="left", maintain_order="left")
    )
    summary = _summaries(agg, config.text_max_chars)
    parents = agg.join(summary, on="gid", how="left", maintain_order="left").with_columns(
        pl.lit(EPISODE).alias("type"),
        pl.lit(ROLLUP_SUBTYPE).alias("subtype"),
        clip_expr(
            pl.when(pl.col("text") != "").then("text").otherwise(pl.col("_best").fill_null("")), TITLE_MAX_CHARS
        ).alias("title"),
        pl.col("keywords").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.when(pl.col("entities").list.len() > 0).then("entities").alias("entities"),
        pl.lit("active").alias("status"),
        pl.lit(PROVENANCE).alias("provenance"),
    )
    contains = groups.select("tenant", pl.col("parent").alias("src"), pl.col("id").alias("dst")).explode("dst")
    ids = stable_ids("e", contains.select("tenant", "src", pl.lit(SEMANTIC_CONTAINS).alias("type"), "dst"))
    return parents, contains.with_columns(ids)


def _summaries(agg: pl.DataFrame, max_chars: int) -> pl.DataFrame:
    """(gid, text): each parent's extractive summary (_summary). Where every distinct sentence of the children fits
    in max_chars the greedy takes them all: that is polars; the other groups run _summary in Python."""
    kids = (
        agg.select("gid", pl.col("_texts").alias("_t"), "_imps")
        .with_columns(pl.int_ranges(pl.col("_t").list.len()).alias("pos"))
        .explode("_t", "_imps", "pos")
    )
    distinct = kids.select(pl.col("_t").unique())
    distinct = distinct.with_columns(sentences_of(distinct.get_column("_t")).alias("_s"))
    cands = (
        kids.join(distinct, on="_t", how="left")
        .with_columns(pl.int_ranges(pl.col("_s").list.len()).alias("j"))
        .explode("_s", "j")
        .filter(pl.col("_s").is_not_null())
        .sort(["gid", "j", "_imps", "pos"], descending=[False, False, True, False])
        .unique(subset=["gid", "_s"], keep="first", maintain_order=True)
    )
    size = cands.group_by("gid").agg((pl.col("_s").str.len_chars().sum() + pl.len() - 1).alias("_size"))
    fits = size.filter(pl.col("_size") <= max_chars).select("gid")
    easy = (
        cands.join(fits, on="gid", how="semi")
        .sort(["gid", "pos", "j"])
        .group_by("gid", maintain_order=True)
        .agg(pl.col("_s").str.join(" ").alias("text"))
    )
    hard = agg.join(fits, on="gid", how="anti").join(cands.select("gid").unique(), on="gid", how="semi")
    texts = [_summary(t, i, max_chars) for t, i in hard.select("_texts", "_imps").iter_rows()]
    rest = hard.select("gid", pl.Series("text", texts, dtype=pl.String))
    # a group whose children hold no sentence at all: the empty summary
    return (
        pl.concat([easy, rest])
        .join(agg.select("gid"), on="gid", how="right")
        .select("gid", pl.col("text").fill_null(""))
    )


def clip_expr(s: pl.Expr, n: int) -> pl.Expr:
    """r2g.rules.clip, vectorised: whitespace collapsed (Python's set), cut to n chars with an ellipsis."""
    collapsed = s.str.replace_all(_WS + "+", " ").str.strip_chars(PY_WHITESPACE)
    return (
        pl.when(collapsed.str.len_chars() <= n)
        .then(collapsed)
        .otherwise(pl.concat_str(collapsed.str.slice(0, n - 1).str.strip_chars_end(PY_WHITESPACE), pl.lit("…")))
    )


def _capped_refs(kids: pl.DataFrame) -> pl.DataFrame:
    """(gid, raw_refs): _refs, vectorised — each child's distinct refs sorted, taken round-robin over the children
    (rank, then child) until MERGED_REF_CAP distinct refs, then sorted; none → null."""
    refs = (
        kids.select("gid", "pos", "raw_refs")
        .filter(pl.col("raw_refs").list.len() > 0)
        .explode("raw_refs")
        .unnest("raw_refs")
        .unique(subset=["gid", "pos", "raw_id", "offset", "length"])
        .sort(["gid", "pos", "raw_id", "offset", "length"])
        .with_columns(pl.int_range(pl.len()).over(["gid", "pos"]).alias("_rank"))
        .sort(["gid", "_rank", "pos"])
        .unique(subset=["gid", "raw_id", "offset", "length"], keep="first", maintain_order=True)
        .with_columns(pl.int_range(pl.len()).over("gid").alias("_n"))
        .filter(pl.col("_n") < MERGED_REF_CAP)
        .sort(["gid", "raw_id", "offset", "length"])
    )
    return refs.group_by("gid", maintain_order=True).agg(pl.struct("raw_id", "offset", "length").alias("raw_refs"))


def parent_id(tenant: str, child_ids: Iterable[str]) -> str:
    return stable_id("n", tenant, ID_SCHEME, *sorted(child_ids))


# a sentence ends after 。！？!?；; or a newline, or after a "." followed by whitespace or the end of the text
_SENTENCE_BREAK = re.compile(r"(?<=[。！？!?；;\n])|(?<=\.)(?=\s|\Z)")


# the same rule for polars (Rust regex): mark each break with a NUL, split there; Python's whitespace set, not \s
_WS = "[" + PY_WHITESPACE + "]"


def sentences_of(texts: pl.Series) -> pl.Series:
    """_sentences of every text, vectorised (a text holding a NUL falls back to Python)."""
    marked = (
        texts.str.replace_all(r"([。！？!?；;\n])", "${1}\x00")
        .str.replace_all(r"\.(" + _WS + ")", ".\x00${1}")
        .str.replace(r"\.$", ".\x00")
    )
    pieces = (
        marked.str.split("\x00")
        .list.eval(pl.element().str.replace_all(_WS + "+", " ").str.strip_chars(PY_WHITESPACE))
        .list.eval(pl.element().filter(pl.element() != ""))
    )
    nul = texts.str.contains("\x00", literal=True).fill_null(False)
    if nul.any():
        fixed = [_sentences(t) if has else None for t, has in zip(texts.to_list(), nul.to_list())]
        pieces = pl.select(
            pl.when(pl.lit(nul)).then(pl.lit(pl.Series(fixed, dtype=pl.List(pl.String)))).otherwise(pl.lit(pieces))
        ).to_series()
    return pieces


def _sentences(text: str) -> list[str]:
    """The sentences of `text`, whitespace-collapsed, empty ones dropped."""
    return [s for s in (" ".join(p.split()) for p in _SENTENCE_BREAK.split(text)) if s]


def _summary(
    texts: list[str], importances: list[float], max_chars: int, cache: dict[str, list[str]] | None = None
) -> str:
    """Extractive: every child's first sentence (most important children first), then second sentences, …,
    while they fit in max_chars; duplicates skipped; printed in timeline order. `texts` (each child's text, else
    title) and `importances` (null as 0) are in timeline order; `cache` keeps each text's sentences."""
    cands = []
    for i, (text, imp) in enumerate(zip(texts, importances)):
        split = cache.get(text) if cache is not None else None
        if split is None:
            split = _sentences(text)
            if cache is not None:
                cache[text] = split
        for j, s in enumerate(split):
            cands.append((j, -imp, i, s))
    chosen: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    used = 0
    for j, _, i, s in sorted(cands):
        if s in seen:
            continue
        if used + len(s) + (1 if chosen else 0) > max_chars:
            if not chosen:
                chosen.append((i, j, clip(s, max_chars)))
                break
            continue
        chosen.append((i, j, s))
        seen.add(s)
        used += len(s) + (1 if len(chosen) > 1 else 0)
    return " ".join(s for _, _, s in sorted(chosen))
