"""The consolidation's blocking checks on the graph it wrote: every fact version chain has one ACTIVE_OF, on its
newest version (jobs.versions), and tiers only move up unless a promotion says why (jobs.tiers)."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pyarrow as pa

from jobs.integrity import CheckOutcome
from jobs.tiers import TIERS, TierConfig
from raw_store.frames import as_frame, of_types


def one_active_per_chain(nodes: pa.Table, edges: pa.Table) -> CheckOutcome:
    """Every version chain has exactly one ACTIVE_OF edge, to its newest version.

    A chain is a connected piece of one tenant's Facts/Preferences over VERSION_NEXT, CONTRADICTS,
    SUPPORTS and SAME_AS edges holding at least one VERSION_NEXT or CONTRADICTS edge (pieces of mere
    repeats are not chains); its ACTIVE_OF target must have no outgoing VERSION_NEXT. A stray ACTIVE_OF
    into no chain is its own one-node chain and passes. `checked` counts chains.
    Vectorised: pieces are igraph's connected components; only a failing piece replays the union-find
    that names it (its `chain` in the examples is that union-find's root, as it always was).
    """
    # only the edges and nodes of the types read below reach polars (a frame of every edge's ends was +0.8 GB at 1M)
    e = as_frame(of_types(edges.select(["tenant", "src", "dst", "type"]), [*_CHAIN_LINKS, "ACTIVE_OF"]))
    versioned = as_frame(of_types(nodes.select(["tenant", "id", "type"]), ["Fact", "Preference"]))
    versioned = versioned.select("tenant", "id").unique()
    links = (
        e.filter(pl.col("type").is_in(_CHAIN_LINKS))
        .join(versioned, left_on=["tenant", "src"], right_on=["tenant", "id"], how="semi", nulls_equal=True)
        .join(versioned, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi", nulls_equal=True)
    )  # in no order: the pieces do not depend on it (a failing piece's links are sorted for its examples)
    ends = pl.concat([links.select("tenant", pl.col(end).alias("id")) for end in ("src", "dst")])
    vertex = ends.unique(maintain_order=True).with_row_index("_v")
    a = links.join(
        vertex, left_on=["tenant", "src"], right_on=["tenant", "id"], maintain_order="left", nulls_equal=True
    ).get_column("_v")
    b = links.join(
        vertex, left_on=["tenant", "dst"], right_on=["tenant", "id"], maintain_order="left", nulls_equal=True
    ).get_column("_v")
    import igraph  # on first use: with matplotlib installed, igraph imports it (~1 s)

    g = igraph.Graph(n=vertex.height, edges=list(zip(a.to_list(), b.to_list())))
    vertex = vertex.with_columns(
        pl.Series("_piece", g.connected_components().membership, dtype=pl.Int64).cast(pl.String)
    )
    piece = vertex.select("tenant", "id", "_piece")
    marked = (
        links.filter(pl.col("type").is_in(["VERSION_NEXT", "CONTRADICTS"]))
        .select("tenant", pl.col("src").alias("id"))
        .join(piece, on=["tenant", "id"], nulls_equal=True)
        .select("_piece")
    )
    has_next = links.filter(pl.col("type") == "VERSION_NEXT").select("tenant", pl.col("src").alias("id")).unique()
    # an ACTIVE_OF target outside every piece is a piece of its own, named by the target ("=" keeps names apart)
    active = (
        e.filter(pl.col("type") == "ACTIVE_OF")
        .sort(["tenant", "src", "dst"])
        .with_row_index("_a")
        .join(
            piece,
            left_on=["tenant", "dst"],
            right_on=["tenant", "id"],
            how="left",
            maintain_order="left",
            nulls_equal=True,
        )
        .with_columns(
            pl.coalesce(
                "_piece", pl.concat_str(pl.lit("="), pl.col("tenant").fill_null(""), pl.lit("\x00"), "dst")
            ).alias("_piece")
        )
        .join(
            has_next.with_columns(pl.lit(True).alias("_superseded")),
            left_on=["tenant", "dst"],
            right_on=["tenant", "id"],
            how="left",
            maintain_order="left",
            nulls_equal=True,
        )
    )
    counts = (
        pl.concat(
            [
                marked.with_columns(pl.lit(0, dtype=pl.UInt32).alias("_n")),
                active.group_by("_piece").agg(pl.len().alias("_n")),
            ]
        )
        .group_by("_piece")
        .agg(pl.col("_n").sum())
    )
    superseded = active.filter(pl.col("_superseded").fill_null(False))
    wrong = counts.filter(pl.col("_n") != 1)
    failures = superseded.height + wrong.height
    examples: list[dict] = []
    if failures:
        examples = _chain_examples(links, active, superseded, wrong, piece)
    return CheckOutcome(passed=failures == 0, checked=counts.height, failures=failures, examples=examples)


_CHAIN_LINKS = ["VERSION_NEXT", "CONTRADICTS", "SUPPORTS", "SAME_AS"]


def _chain_examples(
    links: pl.DataFrame, active: pl.DataFrame, superseded: pl.DataFrame, wrong: pl.DataFrame, piece: pl.DataFrame
) -> list[dict]:
    """The first five failures, as the union-find check reported them: superseded targets in ACTIVE_OF order, then
    pieces by their root. Replays the union-find over the failing pieces' links only (pieces never interact)."""
    bad_pieces = set(wrong.get_column("_piece").to_list()) | set(superseded.get_column("_piece").to_list())
    mine = links.join(
        piece.filter(pl.col("_piece").is_in(sorted(bad_pieces))),
        left_on=["tenant", "src"],
        right_on=["tenant", "id"],
        how="semi",
        nulls_equal=True,
    ).sort(["tenant", "src", "dst", "type"])  # the union-find's roots depend on the order of its unions
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for tenant, s, d, _ in mine.iter_rows():
        parent[find((tenant, s))] = find((tenant, d))

    def root(tenant: str, dst: str) -> tuple[str, str]:
        return find((tenant, dst)) if (tenant, dst) in parent else (tenant, dst)

    bad = [
        {"tenant": t, "chain": root(t, d)[1], "problem": "ACTIVE_OF to a superseded version", "active": [d]}
        for t, d in superseded.select("tenant", "dst").iter_rows()
    ]
    roots: dict[tuple[str, str], list[str]] = {}
    for _p, t, d in (
        active.filter(pl.col("_piece").is_in(sorted(bad_pieces))).select("_piece", "tenant", "dst").iter_rows()
    ):
        roots.setdefault(root(t, d), []).append(d)
    named: dict[int, tuple[str, str]] = {}
    for p, t, i in (
        piece.filter(pl.col("_piece").is_in(sorted(bad_pieces))).select("_piece", "tenant", "id").iter_rows()
    ):
        named.setdefault(p, find((t, i)))
    for p, t, d in active.select("_piece", "tenant", "dst").iter_rows():
        named.setdefault(p, (t, d))  # a target outside every piece: its own
    wrong_roots = sorted(named[p] for p in wrong.get_column("_piece").to_list())
    for r in wrong_roots:
        got = roots.get(r, [])
        bad.append({"tenant": r[0], "chain": r[1], "problem": f"{len(got)} ACTIVE_OF edges", "active": got})
    return bad[:5]


def tiers_monotone(nodes: pa.Table, promotions: pa.Table, config: TierConfig | None = None) -> CheckOutcome:
    """Tiers only move up: a promotions row going back (long → mid …) names a demotion reason ("downvote");
    each node's history chains (a row's from_tier is the previous row's to_tier) and ends at the node's tier."""
    config = config or TierConfig()
    cols = ["tenant", "node_id", "from_tier", "to_tier", "reason", "at"]
    p = as_frame(promotions.select(cols)).with_row_index("_row")
    rank = {t: i for i, t in enumerate(TIERS)}
    to_rank = pl.col("to_tier").replace_strict(rank, default=None, return_dtype=pl.Int64)
    from_rank = pl.col("from_tier").replace_strict(rank, default=None, return_dtype=pl.Int64)
    unknown = to_rank.is_null() | (pl.col("from_tier").is_not_null() & from_rank.is_null())
    excused = pl.lit(False)
    for word in config.demotion_reasons:
        excused = excused | pl.col("reason").fill_null("").str.contains(word, literal=True)
    demoted = ~unknown & pl.col("from_tier").is_not_null() & (to_rank < from_rank) & ~excused
    per_row = p.filter(unknown | demoted).select(
        *cols,
        pl.when(unknown).then(pl.lit("unknown_tier")).otherwise(pl.lit("demoted_without_reason")).alias("problem"),
    )
    # each node's history in time order (undated first, ties in table order), keys in order of first appearance
    key = ["tenant", "node_id"]
    hist = p.with_columns(
        pl.col("_row").min().over(key).alias("_first"), pl.col("at").fill_null(datetime.min).alias("_at")
    ).sort(["_first", "_at", "_row"])
    # sorted so, a node's rows are consecutive and `_first` names the node: the row before is the node's previous
    # one where `_first` repeats (shift and int_range `.over(key)` on the id strings took 10.6 s at 1M messages)
    same = (pl.col("_first") == pl.col("_first").shift(1)).fill_null(False)
    broken = hist.filter(same & pl.col("from_tier").ne_missing(pl.col("to_tier").shift(1))).select(
        *cols, pl.lit("broken_chain").alias("problem")
    )
    last = hist.filter((pl.col("_first") != pl.col("_first").shift(-1)).fill_null(True)).select(
        *key, pl.col("to_tier").alias("last_to_tier")
    )
    n = as_frame(nodes.select(["tenant", "id", "tier"]))
    ended = (
        n.join(last, left_on=["tenant", "id"], right_on=key, how="inner", maintain_order="left", nulls_equal=True)
        .filter(pl.col("last_to_tier").ne_missing(pl.col("tier")))
        .select(
            "tenant",
            pl.col("id").alias("node_id"),
            "tier",
            "last_to_tier",
            pl.lit("tier_not_last_promotion").alias("problem"),
        )
    )
    failures = per_row.height + broken.height + ended.height
    examples = (per_row.head(5).to_dicts() + broken.head(5).to_dicts() + ended.head(5).to_dicts())[:5]
    return CheckOutcome(passed=failures == 0, checked=p.height + nodes.num_rows, failures=failures, examples=examples)
