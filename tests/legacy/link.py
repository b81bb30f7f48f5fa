# Frozen reference: r2g/link.py as of commit 9d258c2, before vectorisation. The golden harness
# (bench/consolidation_golden.py) and the differential tests compare the library against it; not library code.
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
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from r2g.ids import edge_id
from r2g.partition_graph import edge_weight
from r2g.schema import EDGES
from raw_store.lake import conform

SAME_AS = "r2g.rule.same_as.v2"
SUPPORT = "r2g.rule.support.v2"  # SUPPORTS and CONTRADICTS
CONF = {SAME_AS: 0.6, SUPPORT: 0.5}
SAME_EVENT_WINDOW = timedelta(days=1)

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


def _role_table(edges: pl.DataFrame, etype: str, name: str) -> pl.DataFrame:
    """src → one dst per fact (the smallest id, deterministic) for a role edge type."""
    return (
        edges.filter(pl.col("type") == etype).group_by("src").agg(pl.col("dst").min().alias(name)).rename({"src": "id"})
    )


def link_facts(nodes: pa.Table, edges: pa.Table) -> pa.Table:
    """New SAME_AS / SUPPORTS / CONTRADICTS edges (r2g.schema.EDGES, sorted by id) between the Facts of `nodes`."""
    n = pl.from_arrow(
        nodes.select(
            [
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
        )
    )
    facts = n.filter((pl.col("type") == "Fact") & pl.col("predicate_norm").is_not_null())
    if facts.height == 0:
        return EDGES.empty_table()
    e = pl.from_arrow(edges.select(["src", "dst", "type"]))
    facts = (
        facts.join(_role_table(e, "AGENT", "agent"), on="id", how="inner")
        .join(_role_table(e, "PATIENT", "patient"), on="id", how="left")
        .join(_role_table(e, "LOCATION", "location"), on="id", how="left")
        .with_columns(
            pl.col("patient").fill_null(""),
            pl.col("location").fill_null(""),
            pl.col("modality").fill_null(""),
            pl.col("negation").fill_null(False),
            pl.coalesce("time_start", "first_seen").alias("t"),
        )
    )
    facts = facts.sort(["tenant", "agent", "t", "id"], nulls_last=True)
    # raw_refs stay in Arrow: converting every fact's refs to Python cost more than the linking itself
    refs = facts.get_column("raw_refs").to_arrow()
    rows = facts.drop("raw_refs").with_row_index("_row").to_dicts()
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        canon, flip = canonical_predicate(r["predicate_norm"])
        if not r["patient"] and not r["location"] and "_" not in canon and canon in LIGHT_VERBS:
            continue
        r["polarity"] = r["negation"] != flip
        groups.setdefault((r["tenant"], r["agent"], canon, r["patient"], r["modality"]), []).append(r)
    out: dict[str, dict] = {}

    def add(src: dict, etype: str, dst: dict, rule: str) -> None:
        eid = edge_id(src["tenant"], src["id"], etype, dst["id"])
        out[eid] = {
            "id": eid,
            "tenant": src["tenant"],
            "src": src["id"],
            "dst": dst["id"],
            "type": etype,
            "weight": edge_weight(CONF[rule]),
            "confidence": CONF[rule],
            "valid_since": src["t"],
            "valid_until": None,
            "_row": src["_row"],
            "provenance": rule,
        }

    def latest(last: dict[tuple[bool, str | None], tuple[int, dict]], polarity: bool, location: str) -> dict | None:
        """The most recent earlier fact of `polarity` whose place agrees with `location`."""
        keys = [(polarity, location), (polarity, "")] if location else [(polarity, None)]
        found = [last[k] for k in keys if k in last]
        return max(found, key=lambda x: x[0])[1] if found else None

    for members in groups.values():
        # (polarity, place) → (position, fact); (polarity, None) → the latest of that polarity at any place
        last: dict[tuple[bool, str | None], tuple[int, dict]] = {}
        for k, r in enumerate(members):
            prev_same, prev_other = (
                latest(last, r["polarity"], r["location"]),
                latest(last, not r["polarity"], r["location"]),
            )
            if prev_same is not None:
                close = (
                    r["t"] is not None
                    and prev_same["t"] is not None
                    and abs(r["t"] - prev_same["t"]) <= SAME_EVENT_WINDOW
                )
                if close and r["subtype"] == "event" and prev_same["subtype"] == "event":
                    add(r, "SAME_AS", prev_same, SAME_AS)
                else:
                    add(r, "SUPPORTS", prev_same, SUPPORT)
            if prev_other is not None:
                add(r, "CONTRADICTS", prev_other, SUPPORT)
            last[(r["polarity"], r["location"])] = last[(r["polarity"], None)] = (k, r)
    linked = [out[k] for k in sorted(out)]
    src_refs = refs.take(pa.array([r.pop("_row") for r in linked], type=pa.int64())).cast(EDGES.field("raw_refs").type)
    src_refs = pc.if_else(src_refs.is_null(), pa.scalar([], type=src_refs.type), src_refs)  # a null list → []
    table = pa.Table.from_pylist(linked, schema=EDGES.remove(EDGES.get_field_index("raw_refs")))
    table = table.add_column(EDGES.get_field_index("raw_refs"), EDGES.field("raw_refs"), src_refs)
    return conform(table, EDGES)


def with_fact_links(nodes: pa.Table, edges: pa.Table) -> pa.Table:
    """`edges` plus the fact links, one row per id, sorted by id (links replace stale links of the same id)."""
    edges = conform(edges, EDGES)
    stale = pc.is_in(edges.column("provenance"), value_set=pa.array([SAME_AS, SUPPORT]))
    base = edges.filter(pc.invert(stale)) if pc.any(stale).as_py() else edges
    merged = pa.concat_tables([base, link_facts(nodes, base)])
    if pc.count_distinct(merged.column("id")).as_py() < merged.num_rows:  # repeated ids: the first row wins
        merged = conform(pl.from_arrow(merged).unique("id", keep="first", maintain_order=True).to_arrow(), EDGES)
    return merged.take(pc.sort_indices(merged.column("id")))
