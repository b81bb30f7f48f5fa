"""The graph an ops batch writes to: the op tenants' nodes and edges indexed by (tenant, id), what one op would
write (_Plan), and the output tables once the batch has run."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from r2g.schema import COLD_EDGES, EDGES, NODES
from raw_store.lake import conform

_LIVE = (None, "active", "open")


class _Graph:
    """The op tenants' nodes and edges, indexed by (tenant, id); rows are copied out only when an op touches them."""

    def __init__(self, nodes: pa.Table, edges: pa.Table, cold: pa.Table, tenants: set[str]) -> None:
        keep = pa.array(sorted(tenants), pa.string())
        n_mask = pc.fill_null(pc.is_in(nodes.column("tenant"), keep), False)
        e_mask = pc.fill_null(pc.is_in(edges.column("tenant"), keep), False)
        self.other_nodes, self.mine_nodes = nodes.filter(pc.invert(n_mask)), nodes.filter(n_mask)
        self.other_edges, self.mine_edges = edges.filter(pc.invert(e_mask)), edges.filter(e_mask)
        self.node_pos = {
            k: i
            for i, k in enumerate(
                zip(self.mine_nodes.column("tenant").to_pylist(), self.mine_nodes.column("id").to_pylist())
            )
        }
        self.edge_pos = {
            k: i
            for i, k in enumerate(
                zip(self.mine_edges.column("tenant").to_pylist(), self.mine_edges.column("id").to_pylist())
            )
        }
        self.cold_in = cold
        self.cold_ids = set(zip(cold.column("tenant").to_pylist(), cold.column("id").to_pylist()))
        self.node_rows: dict[tuple[str, str], dict] = {}  # changed or new
        self.edge_rows: dict[tuple[str, str], dict] = {}  # new
        self.edges_gone: set[tuple[str, str]] = set()  # moved to cold by this batch
        self.cold_new: list[dict] = []
        self.parents: dict[tuple[str, str], set[str]] = {}  # (tenant, child) → rollup parents
        sc = self.mine_edges.filter(pc.equal(self.mine_edges.column("type"), "SEMANTIC_CONTAINS"))
        for t, s, d in zip(sc.column("tenant").to_pylist(), sc.column("src").to_pylist(), sc.column("dst").to_pylist()):
            self.parents.setdefault((t, d), set()).add(s)
        self._entities: dict[str, dict[str, str]] = {}

    def node(self, tenant: str, nid: str) -> dict | None:
        key = (tenant, nid)
        if key in self.node_rows:
            return self.node_rows[key]
        i = self.node_pos.get(key)
        return None if i is None else self.mine_nodes.slice(i, 1).to_pylist()[0]

    def existing(self, tenant: str, nid: str) -> dict:
        """The row of a node a target check found (KeyError if there is none)."""
        row = self.node(tenant, nid)
        if row is None:
            raise KeyError(nid)
        return row

    def live(self, tenant: str, nid: str) -> dict | None:
        row = self.node(tenant, nid)
        return row if row is not None and row.get("status") in _LIVE else None

    def edge(self, tenant: str, eid: str) -> dict | None:
        key = (tenant, eid)
        if key in self.edges_gone:
            return None
        if key in self.edge_rows:
            return self.edge_rows[key]
        i = self.edge_pos.get(key)
        return None if i is None else self.mine_edges.slice(i, 1).to_pylist()[0]

    def entities(self, tenant: str, exclude: set[tuple[str, str]]) -> dict[str, str]:
        """casefolded title / alias → id of the tenant's live Entity nodes in the input, but those in
        `exclude` (the smallest id on a clash)."""
        if tenant not in self._entities:
            t = self.mine_nodes
            mask = pc.and_(pc.equal(t.column("tenant"), tenant), pc.equal(t.column("type"), "Entity"))
            index: dict[str, str] = {}
            for r in t.filter(pc.fill_null(mask, False)).select(["id", "title", "aliases", "status"]).to_pylist():
                if r["status"] not in _LIVE or (tenant, r["id"]) in exclude:
                    continue
                for name in [r["title"], *(r["aliases"] or [])]:
                    if name and (name.casefold() not in index or r["id"] < index[name.casefold()]):
                        index[name.casefold()] = r["id"]
            self._entities[tenant] = index
        return self._entities[tenant]

    def commit(self, plan: _Plan) -> None:
        for row in plan.nodes:
            self.node_rows[(row["tenant"], row["id"])] = row
        for row in plan.edges:
            key = (row["tenant"], row["id"])
            self.edges_gone.discard(key)
            self.edge_rows[key] = row
            if row["type"] == "SEMANTIC_CONTAINS":
                self.parents.setdefault((row["tenant"], row["dst"]), set()).add(row["src"])
        for row, reason, at in plan.cold:
            key = (row["tenant"], row["id"])
            self.edges_gone.add(key)
            self.edge_rows.pop(key, None)
            if key not in self.cold_ids:
                self.cold_ids.add(key)
                self.cold_new.append({**row, "reason": reason, "capped_at": at})
            if row["type"] == "SEMANTIC_CONTAINS":
                self.parents.get((row["tenant"], row["dst"]), set()).discard(row["src"])

    def tables(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        changed = {self.node_pos[k] for k in self.node_rows if k in self.node_pos}
        kept = self.mine_nodes.filter(pa.array([i not in changed for i in range(self.mine_nodes.num_rows)], pa.bool_()))
        nodes = pa.concat_tables(
            [
                conform(self.other_nodes, NODES),
                conform(kept, NODES),
                pa.Table.from_pylist(list(self.node_rows.values()), schema=NODES),
            ]
        )
        dropped = {self.edge_pos[k] for k in (self.edges_gone | set(self.edge_rows)) if k in self.edge_pos}
        kept_e = self.mine_edges.filter(
            pa.array([i not in dropped for i in range(self.mine_edges.num_rows)], pa.bool_())
        )
        edges = pa.concat_tables(
            [
                conform(self.other_edges, EDGES),
                conform(kept_e, EDGES),
                pa.Table.from_pylist(list(self.edge_rows.values()), schema=EDGES),
            ]
        )
        cold = pa.concat_tables(
            [conform(self.cold_in, COLD_EDGES), pa.Table.from_pylist(self.cold_new, schema=COLD_EDGES)]
        )
        return _sorted(nodes, ["tenant", "id"]), _sorted(edges, ["tenant", "id"]), _sorted(cold, ["tenant", "id"])


def _sorted(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys]))


@dataclass
class _Plan:
    """What one op would write; committed only when the whole op succeeds."""

    nodes: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    cold: list[tuple[dict, str, datetime]] = field(default_factory=list)
    target_ids: list[str] = field(default_factory=list)
    result: dict = field(default_factory=dict)
    ref_node: str | None = None
