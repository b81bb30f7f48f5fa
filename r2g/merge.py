"""merge_graph: the lake-wide union of per-partition node and edge tables.

Same id → one row. Entities, Concepts and the fingerprint-deduplicated Facts,
Preferences and Tasks combine (mentions and frequency summed, aliases unioned,
first_seen min, last_seen max, raw_refs unioned and capped); Episodes keep their
smallest row under a total order; an edge keeps its
highest-weight row. The result does not depend on the order of the inputs.
"""
from __future__ import annotations

from datetime import datetime
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from r2g.extract import concept_importance, entity_importance
from r2g.schema import EDGES, NODES
from raw_store.lake import conform

MERGED_REF_CAP = 20


def _order_key(row: dict) -> str:
    """A total order on rows (their repr with sorted keys): picks one row deterministically among equals."""
    return repr(sorted(row.items()))


def _seen_key(row: dict) -> tuple:
    fs = row.get("first_seen")
    return (fs is None, fs or datetime.min, _order_key(row))


COUNTED_TYPES = ("Entity", "Concept", "Fact", "Preference", "Task")


def _merge_counted(rows: list[dict]) -> dict:
    """One node seen in several partitions: the earliest sighting, with counts summed and sightings unioned."""
    rows = sorted(rows, key=_seen_key)
    out = dict(rows[0])  # the earliest sighting names the node
    if rows[0].get("mentions") is not None:
        out["mentions"] = sum(r.get("mentions") or 0 for r in rows)
    out["frequency"] = sum(r.get("frequency") or 0 for r in rows)
    out["aliases"] = sorted({a for r in rows for a in (r.get("aliases") or [])})
    out["keywords"] = list(dict.fromkeys(k for r in rows for k in (r.get("keywords") or [])))
    firsts = [r["first_seen"] for r in rows if r.get("first_seen") is not None]
    lasts = [r["last_seen"] for r in rows if r.get("last_seen") is not None]
    out["first_seen"] = min(firsts) if firsts else None
    out["last_seen"] = max(lasts) if lasts else None
    refs = sorted({(x["raw_id"], x["offset"], x["length"]) for r in rows for x in (r.get("raw_refs") or [])})
    out["raw_refs"] = [{"raw_id": a, "offset": b, "length": c} for a, b, c in refs[:MERGED_REF_CAP]]
    out["confidence"] = max((r.get("confidence") or 0.0) for r in rows)
    if out["type"] == "Entity":
        out["importance"] = entity_importance(out["mentions"])
    elif out["type"] == "Concept":
        out["importance"] = concept_importance(out["mentions"])
    else:
        out["importance"] = max((r.get("importance") or 0.0) for r in rows)
    return out


def _dedup(tables: Sequence[pa.Table], schema: pa.Schema, resolve) -> pa.Table:
    parts = [conform(t, schema) for t in tables if t is not None and t.num_rows]
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables(parts)
    counts = pc.value_counts(table.column("id"))
    dup_ids = pa.array([v["values"] for v in counts.to_pylist() if v["counts"] > 1], type=pa.string())
    if len(dup_ids):
        mask = pc.is_in(table.column("id"), value_set=dup_ids)
        single = table.filter(pc.invert(mask))
        groups: dict[str, list[dict]] = {}
        for row in table.filter(mask).to_pylist():
            groups.setdefault(row["id"], []).append(row)
        merged = pa.Table.from_pylist([resolve(rows) for rows in groups.values()], schema=schema)
        table = pa.concat_tables([single, merged])
    return table.take(pc.sort_indices(table, sort_keys=[("id", "ascending")]))


def _resolve_node(rows: list[dict]) -> dict:
    if rows[0].get("type") in COUNTED_TYPES:
        return _merge_counted(rows)
    return min(rows, key=_order_key)


def _resolve_edge(rows: list[dict]) -> dict:
    return min(rows, key=lambda r: (-(r.get("weight") or 0.0), _order_key(r)))


def merge_graph(node_tables: Sequence[pa.Table], edge_tables: Sequence[pa.Table]) -> tuple[pa.Table, pa.Table]:
    """Union partitions into one (nodes, edges) pair, one row per id, sorted by id; input order does not matter."""
    return _dedup(node_tables, NODES, _resolve_node), _dedup(edge_tables, EDGES, _resolve_edge)
