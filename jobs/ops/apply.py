"""Applying an ops batch (apply_ops): each op all-or-nothing, in order, a failing op an OPS_REJECTED row with its
code, never aborting the batch; re-applying a batch writes nothing new."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from jobs.ops.graph import _Graph, _Plan
from jobs.ops.parse import Op, _reject_row
from jobs.ops.refs import _Resolver
from jobs.ops.schema import (
    _DEFINES_REF,
    BAD_ARGS,
    CHILD_HAS_PARENT,
    CHILD_NOT_FOUND,
    DEFAULT_CONFIG,
    INVERSE,
    LINK_RELATIONS,
    MEMORY_TYPES,
    NOT_FOUND,
    OP_FAILED,
    SYMMETRIC,
    OpsConfig,
    _naive,
    _Reject,
    check_args,
    edge_type_for,
    parse_when,
    provenance,
)
from r2g.ids import edge_id
from r2g.schema import COLD_EDGES, EDGES, NODES, OPS_APPLIED, OPS_REJECTED
from r2g.time_norm import find_times
from r2g.time_norm import resolve as resolve_time
from raw_store.lake import conform
from raw_store.text import detect_lang


@dataclass(frozen=True)
class OpsResult:
    nodes: pa.Table  # NODES: input nodes with created / edited / archived rows
    edges: pa.Table  # EDGES: input edges with created rows, minus the ones moved to cold_edges
    applied: pa.Table  # OPS_APPLIED
    rejected: pa.Table  # OPS_REJECTED (apply-time rejects; parse_ops returns the parse-time ones)
    cold_edges: pa.Table  # COLD_EDGES: the input cold edges plus the edges link_delete moved out


def _time_of(expr: str, anchor: datetime, lang: str) -> tuple[datetime | None, datetime | None, str | None]:
    """(start, end, granularity) of a time attribute: a time expression (r2g.time_norm, relative to the
    op's time) or an ISO-8601 date-time; unresolved → (None, None, None), the text kept in time_text."""
    v = resolve_time(expr, anchor, lang)
    if v is not None:
        return v.start, v.end, v.granularity
    try:
        dt = parse_when(expr)
        return dt, dt + timedelta(minutes=1), "minute"
    except (ValueError, OverflowError):
        pass
    found = find_times(expr, lang, anchor)
    if found and (v := found[0].value) is not None:  # a mention's rule may find no such date (31 February)
        return v.start, v.end, v.granularity
    return None, None, None


def _edge_type(relation: str) -> str:
    """edge_type_for of a relation check_args accepted."""
    type_ = edge_type_for(relation)
    if type_ is None:
        raise _Reject(BAD_ARGS, f"relation {relation!r} names no edge type")
    return type_


class _Batch(_Resolver):
    """One batch being applied: the rows an op writes, and one method per op name (run dispatches on it)."""

    # -- rows --
    def anchor(self, op: Op) -> datetime:
        return op.ts or self.at

    def new_node(self, op: Op, node_id: str, type_: str, fields: Mapping[str, Any], title: str | None = None) -> dict:
        f = dict(fields)
        text = f.pop("text", None)
        title = title or f.pop("title", None) or (text or "").strip()
        f.pop("title", None)
        t = self.anchor(op)
        row: dict[str, Any] = {c: None for c in NODES.names}
        row.update(
            {
                "id": node_id,
                "tenant": op.tenant,
                "type": type_,
                "title": title[: self.cfg.title_max_chars],
                "text": text if text is not None else title,
                "keywords": [],
                "entities": [],
                "aliases": [],
                "importance": self.cfg.memory_importance,
                "confidence": self.cfg.confidence,
                "frequency": 1,
                "first_seen": t,
                "last_seen": t,
                "status": "active",
                "raw_refs": [op.raw_ref] if op.raw_ref else [],
                "provenance": provenance(op.name),
            }
        )
        row["lang"] = detect_lang(f"{row['title']} {row['text']}")
        self.set_fields(op, row, f)
        return row

    def set_fields(self, op: Op, row: dict, fields: Mapping[str, Any]) -> None:
        for k, v in fields.items():
            if k in ("time_start", "time_end"):
                v = _naive(parse_when(v))
            elif k == "title":
                v = v[: self.cfg.title_max_chars]
            row[k] = list(v) if isinstance(v, list) else v
        if row.get("time_start") is not None and row.get("time_granularity") is None:
            row["time_granularity"] = "unspecified"

    def new_edge(self, op: Op, src: str, type_: str, dst: str, weight: float) -> dict:
        row: dict[str, Any] = {c: None for c in EDGES.names}
        row.update(
            {
                "id": edge_id(op.tenant, src, type_, dst),
                "tenant": op.tenant,
                "src": src,
                "dst": dst,
                "type": type_,
                "weight": weight,
                "confidence": self.cfg.confidence,
                "valid_since": self.anchor(op),
                "raw_refs": [op.raw_ref] if op.raw_ref else [],
                "provenance": provenance(op.name),
            }
        )
        return row

    def link_edges(self, op: Op, plan: _Plan, src: str, dst: str, type_: str, direction: str, weight: float) -> None:
        """Plan the edges of one link; an edge that already exists is kept as it is (upsert by id)."""
        if src == dst:
            raise _Reject(BAD_ARGS, "a memory cannot be linked to itself")
        pairs = []
        if direction in ("outgoing", "bidirectional"):
            pairs.append((src, type_, dst))
        if direction in ("incoming", "bidirectional"):
            pairs.append((dst, INVERSE.get(type_, type_), src))
        for s, t, d in pairs:
            row = self.g.edge(op.tenant, edge_id(op.tenant, s, t, d))
            if row is None and self.replaying:
                row = {"id": edge_id(op.tenant, s, t, d)}
            elif row is None:
                row = self.new_edge(op, s, t, d, weight)
                plan.edges.append(row)
            if row["id"] not in plan.target_ids:
                plan.target_ids.append(row["id"])

    # -- ops --
    def create_memory(self, op: Op, plan: _Plan) -> None:
        a = op.args
        type_, subtype = MEMORY_TYPES[a["memory_type"]]
        parts = [a["subject"].strip(), a["topic"].strip(), (a.get("object") or "").strip()]
        title = " ".join(p for p in parts if p)
        attrs = dict(sorted((a.get("attributes") or {}).items()))
        text = title + "".join(f"; {k}: {v}" for k, v in attrs.items())
        nid = self.node_id(op)
        row = self.g.node(op.tenant, nid)
        if row is None:
            row = self.new_node(op, nid, type_, {"text": text, "subtype": subtype}, title=title)
            row.update(
                {
                    "importance": a.get("importance", self.cfg.memory_importance),
                    "keywords": list(dict.fromkeys(p for p in parts if p)),
                    "entities": [parts[0]],
                    "predicate_norm": parts[1],
                }
            )
            when = next((attrs[k] for k in ("时间", "time", "when") if attrs.get(k, "").strip()), None)
            if when is not None:
                start, end, gran = _time_of(when, self.anchor(op), row["lang"])
                row.update({"time_text": when, "time_start": start, "time_end": end, "time_granularity": gran})
            plan.nodes.append(row)
        plan.target_ids.append(nid)
        # the subject and object, when the tenant knows them as Entities, fill the AGENT / PATIENT roles
        known = self.g.entities(op.tenant, exclude=self.batch_nodes)  # the same on a re-run
        for part, role in ((parts[0], "AGENT"), (parts[2], "PATIENT")):
            ent = known.get(part.casefold()) if part else None
            if ent is not None:
                self.link_edges(op, plan, nid, ent, role, "outgoing", self.cfg.confidence)
        plan.result, plan.ref_node = {"id": nid, "edges": plan.target_ids[1:]}, nid

    def link_memories(self, op: Op, plan: _Plan) -> None:
        a = op.args
        src, how_src = self.memory(op, a["source_memory_description"])
        dst, how_dst = self.memory(op, a["target_memory_description"])
        type_ = LINK_RELATIONS[a["relation_type"]]
        direction = "bidirectional" if type_ in INVERSE or type_ in SYMMETRIC else "outgoing"
        self.link_edges(op, plan, src, dst, type_, direction, a.get("importance", self.cfg.link_importance))
        plan.result = {"source": src, "target": dst, "found_by": [how_src, how_dst], "edges": list(plan.target_ids)}

    def _links(self, op: Op, plan: _Plan, src: str, links: list[Mapping[str, Any]]) -> None:
        ends = []
        for link in links:  # every target must resolve before any edge is planned: all-or-nothing
            if "targetRef" in link:
                dst = self.target(op, link["targetRef"], ref_key=True)
            else:
                dst = self.target(op, link["targetNodeId"])
            ends.append((dst, _edge_type(link["relation"]), link.get("direction", self.cfg.link_direction)))
        for dst, type_, direction in ends:
            self.link_edges(op, plan, src, dst, type_, direction, self.cfg.link_importance)

    def create(self, op: Op, plan: _Plan) -> None:
        a = op.args
        nid = self.node_id(op)
        row = self.g.node(op.tenant, nid)
        if row is None:
            row = self.new_node(op, nid, a["type"], a.get("fields") or {}, title=a.get("title"))
            plan.nodes.append(row)
            self.g.node_rows[(op.tenant, nid)] = row  # visible to its own links; dropped if the op fails
        try:
            plan.target_ids.append(nid)
            self._links(op, plan, nid, a.get("links") or [])
        finally:
            if plan.nodes:
                del self.g.node_rows[(op.tenant, nid)]
        plan.result, plan.ref_node = {"id": nid, "edges": plan.target_ids[1:]}, nid

    def edit(self, op: Op, plan: _Plan) -> None:
        a = op.args
        nid = self.target(op, a["nodeId"])
        row = dict(self.g.existing(op.tenant, nid))
        fields = dict(a.get("setFields") or {})
        if "title" in a:
            fields["title"] = a["title"]
        self.set_fields(op, row, fields)
        for f in a.get("clearFields") or ():
            row[f] = [] if f in ("keywords", "entities", "aliases") else None
        plan.nodes.append(row)
        plan.target_ids.append(nid)
        plan.result = {"id": nid, "set": sorted(fields), "cleared": sorted(a.get("clearFields") or ())}

    def delete(self, op: Op, plan: _Plan) -> None:
        nid = self.target(op, op.args["nodeId"], archived_ok=True)  # archiving again is a no-op
        row = dict(self.g.existing(op.tenant, nid))
        if row.get("status") != "archived":
            row["status"] = "archived"
            plan.nodes.append(row)
        plan.target_ids.append(nid)
        plan.result = {"id": nid, "status": "archived"}

    def link_upsert(self, op: Op, plan: _Plan) -> None:
        a = op.args
        src = self.target(op, a["sourceRef"], ref_key=True) if "sourceRef" in a else self.target(op, a["sourceNodeId"])
        self._links(op, plan, src, a["links"])
        plan.result = {"applied": len(plan.target_ids), "edges": list(plan.target_ids)}

    def link_delete(self, op: Op, plan: _Plan) -> None:
        a = op.args
        src, dst = self.target(op, a["sourceNodeId"]), self.target(op, a["targetNodeId"])
        type_ = _edge_type(a["relation"].lower())
        direction = a.get("direction", self.cfg.link_direction)
        keys = []
        if direction in ("outgoing", "bidirectional"):
            keys.append(edge_id(op.tenant, src, type_, dst))
        if direction in ("incoming", "bidirectional"):
            keys.append(edge_id(op.tenant, dst, INVERSE.get(type_, type_), src))
        reason = f"{provenance(op.name)} batch={self.batch_id} op={op.index}"
        for eid in keys:
            row = self.g.edge(op.tenant, eid)
            if row is not None:
                plan.cold.append((row, reason, self.at))
                plan.target_ids.append(eid)
            elif (op.tenant, eid) in self.g.cold_ids:  # moved out already (this batch, applied before)
                plan.target_ids.append(eid)
        if not plan.target_ids:
            raise _Reject(NOT_FOUND, f"no {type_} link between {src!r} and {dst!r}")
        plan.result = {"removed": len(plan.target_ids), "edges": list(plan.target_ids)}

    def compact(self, op: Op, plan: _Plan) -> None:
        a = op.args
        pid = self.node_id(op)
        children = [self.target(op, c, code=CHILD_NOT_FOUND) for c in a["childIds"]]
        if len(set(children)) != len(children):
            raise _Reject(BAD_ARGS, "childIds name the same node twice")
        for c in [] if self.replaying else children:
            for p in sorted(self.g.parents.get((op.tenant, c), ())):
                prow = self.visible_live(op.tenant, p)
                if p != pid and prow is not None and prow["type"] == a["type"]:
                    raise _Reject(CHILD_HAS_PARENT, f"{c!r} already has the {a['type']} rollup parent {p!r}")
        if self.g.node(op.tenant, pid) is None:
            rows = [self.g.existing(op.tenant, c) for c in children]
            fields = {"subtype": "rollup", "text": a["summary"], **(a.get("fields") or {})}
            row = self.new_node(op, pid, a["type"], fields)
            starts = [r["time_start"] for r in rows if r.get("time_start") is not None]
            ends = [r.get("time_end") or r["time_start"] for r in rows if r.get("time_start") is not None]
            if starts and row.get("time_start") is None:
                row.update({"time_start": min(starts), "time_end": max(ends), "time_granularity": "unspecified"})
            refs = {json.dumps(r, sort_keys=True, default=str): r for x in rows for r in (x.get("raw_refs") or ())}
            row["raw_refs"] = row["raw_refs"] + [refs[k] for k in sorted(refs)]
            plan.nodes.append(row)
        plan.target_ids.append(pid)
        for c in children:
            self.link_edges(op, plan, pid, c, "SEMANTIC_CONTAINS", "outgoing", 1.0)
        plan.result, plan.ref_node = {"rollupNodeId": pid, "children": children, "edges": plan.target_ids[1:]}, pid

    def run(self, op: Op) -> _Plan:
        if op.ref is not None and (op.tenant, op.ref) in self.refs:
            raise _Reject(BAD_ARGS, f"ref {op.ref!r} is already defined at line {self.refs[(op.tenant, op.ref)][1]}")
        problem = check_args(op.name, op.args)
        if problem is not None:
            raise _Reject(BAD_ARGS, problem)
        plan = _Plan()
        self.replaying = op.name in _DEFINES_REF and self.g.node(op.tenant, self.node_id(op)) is not None
        try:
            getattr(self, op.name)(op, plan)
        finally:
            self.replaying = False
        return plan


def apply_ops(
    nodes: pa.Table,
    edges: pa.Table,
    ops: Iterable[Op],
    batch_id: str,
    at: datetime,
    resolve: Callable[[str, str], str | None] | None,
    *,
    cold_edges: pa.Table | None = None,
    config: OpsConfig = DEFAULT_CONFIG,
) -> OpsResult:
    """Apply a batch's ops in order to nodes/edges (any tenants mixed); see the module docstring.

    `at` (naive UTC) is when the batch is applied: OPS_APPLIED.at, COLD_EDGES.capped_at, and the time
    of new rows whose op carries no `ts`. `resolve(tenant, text)` → node id finds a link_memories
    description in the lake (the pipeline wires recall); an id of another tenant is ignored.
    Pass the current COLD_EDGES as `cold_edges` so a re-applied link_delete finds its edge there.
    Output tables are conformed and sorted by (tenant, id) / (tenant, op_index).
    """
    ops = list(ops)
    at = _naive(at)
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    cold = conform(cold_edges, COLD_EDGES) if cold_edges is not None else COLD_EDGES.empty_table()
    graph = _Graph(nodes, edges, cold, {op.tenant for op in ops})
    batch = _Batch(graph, batch_id, at, resolve, config)
    batch.batch_nodes = {(op.tenant, batch.node_id(op)) for op in ops if op.name in _DEFINES_REF}
    applied, rejected = [], []
    for op in ops:
        try:
            plan = batch.run(op)
        except _Reject as r:
            rejected.append(_reject_row(op.tenant, batch_id, op.index, op.name, r.code, r.message, op.raw))
            continue
        except Exception as e:  # noqa: BLE001 — a planning bug rejects this op (nothing was written), never the batch
            rejected.append(
                _reject_row(op.tenant, batch_id, op.index, op.name, OP_FAILED, f"{type(e).__name__}: {e}", op.raw)
            )
            continue
        graph.commit(plan)
        if op.ref is not None:
            batch.refs[(op.tenant, op.ref)] = (plan.ref_node, op.index)
        if plan.ref_node is not None:
            batch.made.add((op.tenant, plan.ref_node))
            batch.created.setdefault(op.tenant, []).append((op.index, plan.ref_node))
        applied.append(
            {
                "tenant": op.tenant,
                "batch_id": batch_id,
                "op_index": op.index,
                "op": op.name,
                "ref": op.ref,
                "target_ids": plan.target_ids,
                "result": json.dumps(plan.result, ensure_ascii=False, sort_keys=True),
                "at": at,
            }
        )
    nodes_out, edges_out, cold_out = graph.tables()
    key = lambda r: (r["tenant"], r["op_index"])  # noqa: E731
    return OpsResult(
        nodes=nodes_out,
        edges=edges_out,
        applied=pa.Table.from_pylist(sorted(applied, key=key), schema=OPS_APPLIED),
        rejected=pa.Table.from_pylist(sorted(rejected, key=key), schema=OPS_REJECTED),
        cold_edges=cold_out,
    )
