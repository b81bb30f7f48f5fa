"""Fact ↔ Fact links over a whole graph (seed 004 R2G-3, R2G-5): SAME_AS, SUPPORTS, CONTRADICTS.

Runs on the merged lake tables, so it links facts across turns, files and
conversations of one tenant. Facts are grouped by (tenant, subject = AGENT,
canonical predicate, PATIENT, modality); the canonical predicate folds antonyms
onto one verb with a polarity flip (hate → like, negated), so "I love hiking" /
"I hate hiking" / "I don't like hiking" land in one group.

Within a group, in time order, each fact links to the most recent earlier fact
whose LOCATION agrees (the same place, or either fact names none: v2, where v1
linked "I live in Paris" to "I live in Berlin"):
- same polarity, an event, within ±1 day → SAME_AS (one event told twice);
- same polarity otherwise → SUPPORTS (the claim repeated later);
- opposite polarity → CONTRADICTS (issue-5 consolidation turns these into versions).
Linking only to the nearest earlier fact keeps the edge count linear in the facts.

Group-local: a link never leaves its group, so the links out of the Facts of any set of groups are a function
of those Facts and their AGENT / PATIENT / LOCATION edges alone (`link_group_keys`, `link_input`; tested in
tests/test_consolidation_contracts.py::test_link_facts_of_some_groups_are_the_full_runs_links_of_those_groups).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from r2g.ids import stable_ids
from r2g.partition_graph import edge_weight
from r2g.schema import EDGES
from raw_store.frames import as_frame
from raw_store.lake import conform
from raw_store.schema import RAW_REFS, TS

SAME_AS = "r2g.rule.same_as.v2"
SUPPORT = "r2g.rule.support.v2"  # SUPPORTS and CONTRADICTS
CONF = {SAME_AS: 0.6, SUPPORT: 0.5}
SAME_EVENT_WINDOW = timedelta(days=1)
LINK_TYPES = ("SAME_AS", "SUPPORTS", "CONTRADICTS")  # the edge types link_facts makes

# antonym → (canonical verb, polarity flip); both languages' predicate_norms are English-ish lemmas
ANTONYMS: dict[str, tuple[str, bool]] = {
    "hate": ("like", True),
    "dislike": ("like", True),
    "detest": ("like", True),
    "loathe": ("like", True),
    "love": ("like", False),
    "enjoy": ("like", False),
    "adore": ("like", False),
    "disagree": ("agree", True),
    "forget": ("remember", True),
    "lose": ("win", True),
    "reject": ("accept", True),
    "refuse": ("accept", True),
    "stop": ("start", True),
    "quit": ("start", True),
    "sad": ("happy", True),
    "unhappy": ("happy", True),
    "upset": ("happy", True),
    "讨厌": ("like", True),
    "喜欢": ("like", False),
    "爱": ("like", False),
}
# predicates too generic to link when nothing else (object, place, second verb) pins them down
LIGHT_VERBS = frozenset(
    """
be have do go get make say tell think know see come take want let mean feel look try need use give put keep
seem call ask talk guess hope wish thank 是 有 去 说 做 想 看 来 要 觉得 知道
""".split()
)


def canonical_predicate(predicate_norm: str) -> tuple[str, bool]:
    """(canonical predicate, flipped polarity?) — the first verb of predicate_norm folded through ANTONYMS."""
    head, _, rest = predicate_norm.partition("_")
    canon, flip = ANTONYMS.get(head, (head, False))
    return (f"{canon}_{rest}" if rest else canon), flip


LINK_GROUP = ["tenant", "agent", "canon", "patient", "modality"]
# the columns of a Fact's row that linkable reads
LINK_NODE_COLUMNS = [
    "id",
    "tenant",
    "type",
    "subtype",
    "predicate_norm",
    "negation",
    "modality",
    "time_start",
    "first_seen",
    "raw_refs",
]
LINKABLE_ORDER = ["tenant", "agent", "t", "id"]
# a linkable Fact: what the links read of it (its group, place, polarity, time, subtype and raw_refs)
LINKABLE = pa.schema(
    [
        ("tenant", pa.string()),
        ("id", pa.string()),
        ("agent", pa.string()),
        ("canon", pa.string()),
        ("patient", pa.string()),
        ("modality", pa.string()),
        ("location", pa.string()),
        ("polarity", pa.bool_()),
        ("t", TS),
        ("subtype", pa.string()),
        ("raw_refs", RAW_REFS),
    ]
)


def linkable(nodes: pa.Table, edges: pa.Table) -> pl.DataFrame:
    """The Facts link_facts links (LINKABLE), each with its group (LINK_GROUP), location, polarity and time t, in
    the order the links are made (LINKABLE_ORDER: tenant, agent, t, id; undated last). A row depends on its Fact's
    row and that Fact's AGENT / PATIENT / LOCATION edges alone."""
    facts = as_frame(nodes.select(LINK_NODE_COLUMNS).filter(pc.field("type") == "Fact")).filter(
        pl.col("predicate_norm").is_not_null()
    )
    e = as_frame(edges.select(["src", "dst", "type"])).filter(pl.col("type").is_in(["AGENT", "PATIENT", "LOCATION"]))
    # each role's smallest dst per fact (keyed by id alone, as ever), in one pass over the role edges
    roles = (
        e.group_by("src")
        .agg(
            *(
                pl.col("dst").filter(pl.col("type") == t).min().alias(name)
                for t, name in (("AGENT", "agent"), ("PATIENT", "patient"), ("LOCATION", "location"))
            )
        )
        .rename({"src": "id"})
    )
    facts = facts.join(roles.filter(pl.col("agent").is_not_null()), on="id", how="inner").with_columns(
        pl.col("patient").fill_null(""),
        pl.col("location").fill_null(""),
        pl.col("modality").fill_null(""),
        pl.col("negation").fill_null(False),
        pl.coalesce("time_start", "first_seen").alias("t"),
    )
    facts = facts.sort(LINKABLE_ORDER, nulls_last=True)
    predicates = facts.get_column("predicate_norm").unique()
    folded = [canonical_predicate(v) for v in predicates.to_list()]
    canon = pl.DataFrame(
        {"predicate_norm": predicates, "canon": [c for c, _ in folded], "_flip": [f for _, f in folded]},
        schema={"predicate_norm": pl.String, "canon": pl.String, "_flip": pl.Boolean},
    )
    facts = facts.join(canon, on="predicate_norm", how="left", maintain_order="left")
    light = (
        (pl.col("patient") == "")
        & (pl.col("location") == "")
        & ~pl.col("canon").str.contains("_", literal=True)
        & pl.col("canon").is_in(sorted(LIGHT_VERBS))
    )
    facts = facts.filter(~light).with_columns((pl.col("negation") != pl.col("_flip")).alias("polarity"))
    return facts.select(LINKABLE.names)


def link_group_keys(nodes: pa.Table, edges: pa.Table) -> pa.Table:
    """(tenant, id, agent, canon, patient, modality): the link group of every Fact link_facts links.

    Contract (tests/test_consolidation_contracts.py): link_facts over link_input(nodes, edges, G) — the Facts of
    the groups G and their AGENT / PATIENT / LOCATION edges — gives exactly the full run's links out of those Facts
    (a link never leaves its group)."""
    return linkable(nodes, edges).select("tenant", "id", *LINK_GROUP[1:]).to_arrow()


def link_input(nodes: pa.Table, edges: pa.Table, keys: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The rows link_facts needs for the groups in `keys` (rows of link_group_keys): those Facts and their role
    edges (AGENT, PATIENT, LOCATION)."""
    ids = as_frame(keys.select(["id"])).unique()
    n = as_frame(nodes.select(["id"])).with_row_index("_row").join(ids, on="id", how="semi")
    e = (
        as_frame(edges.select(["src", "type"]))
        .with_row_index("_row")
        .filter(pl.col("type").is_in(["AGENT", "PATIENT", "LOCATION"]))
        .join(ids, left_on="src", right_on="id", how="semi")
    )
    return nodes.take(n.get_column("_row").to_arrow()), edges.take(e.get_column("_row").to_arrow())


def _latest(pos: pl.Expr, mask: pl.Expr, over: list[str]) -> pl.Expr:
    """Per row, the largest earlier `pos` of its window where `mask` holds (null: none)."""
    return pl.when(mask).then(pos).otherwise(None).forward_fill().shift(1).over(over)


def link_facts(nodes: pa.Table, edges: pa.Table, existing: pl.DataFrame | None = None) -> pa.Table:
    """New SAME_AS / SUPPORTS / CONTRADICTS edges (r2g.schema.EDGES, sorted by id) between the Facts of `nodes`.

    Vectorised: within each group, "the most recent earlier fact of a polarity whose place agrees" is a
    forward-filled position over the group (any place, or the same place, or no place). `existing` (tenant, src,
    type, dst): edges already there, left out before their ids are hashed (the lake-wide merge re-derives every
    link the files made; an edge id is a hash of that key, so this equals dropping their ids afterwards)."""
    return links_of(linkable(nodes, edges), existing)


def links_of(facts: pl.DataFrame, existing: pl.DataFrame | None = None) -> pa.Table:
    """link_facts over `facts`, rows of `linkable` in its order: whole link groups (a link never leaves its group,
    so the links of any set of whole groups are the full run's links out of their Facts)."""
    if facts.height == 0:
        return EDGES.empty_table()
    pos = pl.int_range(pl.len()).over(LINK_GROUP)
    facts = facts.with_row_index("_row").with_columns(
        pos.alias("_pos"), pl.col("_row").min().over(LINK_GROUP).alias("_group_at")
    )
    located = pl.col("location") != ""
    latest = {}
    for q in (True, False):
        pol = pl.col("polarity") == q
        anywhere = _latest(pl.col("_pos"), pol, LINK_GROUP)
        here = _latest(pl.col("_pos"), pol, [*LINK_GROUP, "location"])
        nowhere = _latest(pl.col("_pos"), pol & ~located, LINK_GROUP)
        latest[q] = pl.when(located).then(pl.max_horizontal(here, nowhere)).otherwise(anywhere)
    facts = facts.with_columns(
        pl.when(pl.col("polarity")).then(latest[True]).otherwise(latest[False]).alias("_same"),
        pl.when(pl.col("polarity")).then(latest[False]).otherwise(latest[True]).alias("_other"),
    )
    earlier = facts.select(
        *LINK_GROUP,
        "_pos",
        pl.col("id").alias("_dst"),
        pl.col("t").alias("_t_dst"),
        pl.col("subtype").alias("_subtype_dst"),
    )
    same = (
        facts.filter(pl.col("_same").is_not_null())
        .join(earlier, left_on=[*LINK_GROUP, "_same"], right_on=[*LINK_GROUP, "_pos"], nulls_equal=True)
        .with_columns(pl.lit(0).alias("_kind"))
    )
    close = ((pl.col("t") - pl.col("_t_dst")).abs() <= SAME_EVENT_WINDOW).fill_null(False)
    events = (pl.col("subtype") == "event").fill_null(False) & (pl.col("_subtype_dst") == "event").fill_null(False)
    same = same.with_columns(
        pl.when(close & events).then(pl.lit("SAME_AS")).otherwise(pl.lit("SUPPORTS")).alias("_type")
    )
    other = (
        facts.filter(pl.col("_other").is_not_null())
        .join(earlier, left_on=[*LINK_GROUP, "_other"], right_on=[*LINK_GROUP, "_pos"], nulls_equal=True)
        .with_columns(pl.lit(1).alias("_kind"), pl.lit("CONTRADICTS").alias("_type"))
    )
    cols = ["tenant", "id", "_dst", "_type", "_kind", "t", "raw_refs", "_group_at", "_pos"]
    links = pl.concat([same.select(cols), other.select(cols)])
    if links.height == 0:
        return EDGES.empty_table()
    rule = pl.when(pl.col("_type") == "SAME_AS").then(pl.lit(SAME_AS)).otherwise(pl.lit(SUPPORT))
    conf = pl.when(pl.col("_type") == "SAME_AS").then(pl.lit(CONF[SAME_AS])).otherwise(pl.lit(CONF[SUPPORT]))
    weight = (
        pl.when(pl.col("_type") == "SAME_AS")
        .then(pl.lit(edge_weight(CONF[SAME_AS])))
        .otherwise(pl.lit(edge_weight(CONF[SUPPORT])))
    )
    # one row per id (per (tenant, src, type, dst): the id is its hash), the last made (groups in order of first
    # appearance, facts in time order)
    links = links.sort(["_group_at", "_pos", "_kind"]).unique(
        subset=["tenant", "id", "_type", "_dst"], keep="last", maintain_order=True
    )
    if existing is not None:
        links = links.join(
            existing.select(
                "tenant", pl.col("src").alias("id"), pl.col("type").alias("_type"), pl.col("dst").alias("_dst")
            ),
            on=["tenant", "id", "_type", "_dst"],
            how="anti",
        )
    if links.height == 0:
        return EDGES.empty_table()
    links = links.with_columns(stable_ids("e", links.select("tenant", "id", "_type", "_dst")).alias("_eid")).sort(
        "_eid"
    )
    table = links.select(
        pl.col("_eid").alias("id"),
        "tenant",
        pl.col("id").alias("src"),
        pl.col("_dst").alias("dst"),
        pl.col("_type").alias("type"),
        weight.alias("weight"),
        conf.alias("confidence"),
        pl.col("t").alias("valid_since"),
        pl.lit(None, dtype=pl.Datetime("us")).alias("valid_until"),
        pl.col("raw_refs").fill_null(
            pl.lit([], dtype=pl.List(pl.Struct({"raw_id": pl.String, "offset": pl.Int64, "length": pl.Int64})))
        ),
        rule.alias("provenance"),
    ).to_arrow()
    return conform(table, EDGES)


def with_fact_links(nodes: pa.Table, edges: pa.Table) -> pa.Table:
    """`edges` plus the fact links, one row per id, sorted by id (links replace stale links of the same id)."""
    edges = conform(edges, EDGES)
    stale = pc.is_in(edges.column("provenance"), value_set=pa.array([SAME_AS, SUPPORT]))
    base = edges.filter(pc.invert(stale)) if pc.any(stale).as_py() else edges
    merged = pa.concat_tables([base, link_facts(nodes, base)])
    if pc.count_distinct(merged.column("id")).as_py() < merged.num_rows:  # repeated ids: the first row wins
        merged = conform(as_frame(merged).unique("id", keep="first", maintain_order=True).to_arrow(), EDGES)
    return merged.take(pc.sort_indices(merged.column("id")))
