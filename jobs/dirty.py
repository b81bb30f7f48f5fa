"""Consolidation over a dirty set: redo the date-free steps only for the tenants whose input changed.

    graph steps (ops → versions → topics → rollups → PII)   per tenant: a function of that tenant's R2G rows, its
                                                             ops batches and its previous communities alone
    time steps (tiers → caps → forget)                        a vectorised sweep over every node: `as_of` moves
                                                             them all

A run keeps a `Snapshot`: a hash of each tenant's R2G input rows and the graph steps' output. The next run hashes
its input the same way; a tenant whose hash is unchanged keeps the snapshot's rows byte for byte, the others (new,
changed or gone tenants) run the graph steps on their own rows, and the time steps sweep the spliced graph. Forget
requests need no rule of their own: R2G drops what they name (the tenant's hash changes) and the time steps drop
the consolidated nodes they name. The result equals `consolidate()` on the same input and previous state
(tests/test_dirty.py).

A full run instead when the snapshot is missing or was made by another configuration, code version or set of
agent ops batches (their `at` included), or when a changed tenant has ops batches (an op's free-text target is
resolved against its whole tenant's graph). `DirtyRun.mode` and `.reason` say which ran and why.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from jobs.consolidate import (
    ConsolidationConfig,
    ConsolidationResult,
    GraphStage,
    Previous,
    concat,
    graph_steps,
    time_steps,
)
from jobs.forget import ForgetRules
from jobs.ops import OpsBatch
from jobs.schema import COLD_EDGES, COMMUNITIES, OPS_APPLIED, OPS_REJECTED, REVIEW_QUEUE
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame
from raw_store.lake import conform, read_table, write_bytes_atomic, write_table
from raw_store.tables import apply_overlay, diff_overlay, read_overlay, write_overlay

# (tenant, rows, h) per tenant and table: rows and an order-sensitive sum of row hashes (see tenant_hashes)
INPUT_HASHES = pa.schema([("tenant", pa.string()), ("table", pa.string()), ("rows", pa.int64()),
                          ("h", pa.uint64())])
_CODE = ("jobs", "r2g", "raw_store")   # packages whose source the graph steps run (any edit: a full run)


@dataclass
class Snapshot:
    """What the last run's graph steps consumed (`inputs`: INPUT_HASHES) and made (`stage`, or `load` to read it
    when first needed: a run whose every tenant is dirty never reads it), and under which configuration, code and
    ops batches (`fingerprint`)."""
    fingerprint: str
    inputs: pa.Table
    held: GraphStage | None = None
    load: Callable[[], GraphStage] | None = None

    @property
    def stage(self) -> GraphStage:
        if self.held is None:
            assert self.load is not None, "a snapshot holds its stage or can load it"
            self.held = self.load()
        return self.held


@dataclass
class DirtyRun:
    result: ConsolidationResult
    snapshot: Snapshot       # this run's, for the next
    mode: str                # "incremental" | "full"
    reason: str              # why a full run ("" for an incremental one)
    tenants: int             # tenants in the input
    dirty_tenants: int       # tenants whose graph steps ran
    dirty_nodes: int         # input node rows of those tenants
    dirty_edges: int         # input edge rows of those tenants

    def metadata(self) -> dict:
        return {"consolidation_mode": self.mode, "full_reason": self.reason, "tenants": self.tenants,
                "dirty_tenants": self.dirty_tenants, "dirty_nodes": self.dirty_nodes, "dirty_edges": self.dirty_edges}


def consolidate_dirty(nodes: pa.Table, edges: pa.Table, *, feedback: pa.Table, ops: Sequence[OpsBatch],
                      previous: Previous, as_of: datetime, snapshot: Snapshot | None,
                      forget: ForgetRules | None = None, config: ConsolidationConfig | None = None) -> DirtyRun:
    """consolidate() of the same arguments, with the graph steps redone only for the tenants whose R2G rows
    changed since `snapshot` (see the module doc); falls back to a full run where that would not be exact."""
    cfg = config or ConsolidationConfig()
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    fingerprint = run_fingerprint(cfg, ops)
    inputs = tenant_hashes(nodes, edges)
    tenants = _tenants(inputs)
    reason, dirty = _why_full(snapshot, fingerprint, previous), tenants
    if not reason and snapshot is not None:
        dirty = changed_tenants(snapshot.inputs, inputs)
        if dirty & {b.tenant for b in ops}:
            reason = "a tenant with agent ops changed"
    if reason or snapshot is None:
        stage = graph_steps(nodes, edges, ops=ops, previous_communities=previous.communities, config=cfg)
        dirty = tenants
    else:
        part = graph_steps(of_tenants(nodes, dirty), of_tenants(edges, dirty), ops=[],
                           previous_communities=_of_tenants_or_none(previous.communities, dirty), config=cfg)
        stage = splice(snapshot.stage, part, dirty)
    result = time_steps(stage, feedback=feedback, previous=previous, as_of=as_of, forget=forget, config=cfg)
    counts = {t: r for t, r in _rows_by_tenant(inputs).items() if t in dirty}
    return DirtyRun(result=result, snapshot=Snapshot(fingerprint, inputs, stage),
                    mode="full" if reason or snapshot is None else "incremental",
                    reason=reason, tenants=len(tenants), dirty_tenants=len(dirty & tenants),
                    dirty_nodes=sum(n for n, _ in counts.values()), dirty_edges=sum(e for _, e in counts.values()))


def _why_full(snapshot: Snapshot | None, fingerprint: str, previous: Previous) -> str:
    if snapshot is None:
        return "no snapshot of the last run"
    if snapshot.fingerprint != fingerprint:
        return "configuration, code or ops batches changed"
    if previous.communities is None:
        return "no previous communities"
    return ""


def run_fingerprint(config: ConsolidationConfig, ops: Sequence[OpsBatch]) -> str:
    """What the graph steps' output depends on besides each tenant's rows: the configuration, the source of the
    code they run, the library versions (Leiden, hashing) and the ops batches with their times."""
    h = hashlib.sha256(repr(config).encode())
    for lib in ("polars", "pyarrow", "igraph"):
        h.update(f"{lib}={version(lib)}".encode())
    root = Path(__file__).resolve().parent.parent
    for package in _CODE:
        for path in sorted((root / package).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    for b in sorted(ops, key=lambda b: (b.tenant, b.source_file, b.batch_id)):
        h.update(f"{b.tenant}\x1f{b.source_file}\x1f{b.batch_id}\x1f{b.at.isoformat()}".encode())
    return h.hexdigest()


def tenant_hashes(nodes: pa.Table, edges: pa.Table) -> pa.Table:
    """INPUT_HASHES of the nodes and edges: per tenant the row count and the sum of a hash of (row, its position
    among the tenant's rows), so any changed, added, removed or moved row changes the tenant's hash."""
    parts = []
    for name, table in (("nodes", nodes), ("edges", edges)):
        f = as_frame(table)
        row = pl.struct(f.columns).hash(seed=7)
        rows = f.select("tenant", row.alias("_h")).with_columns(pl.int_range(pl.len()).over("tenant").alias("_i"))
        parts.append(rows.group_by("tenant").agg(
            pl.lit(name).alias("table"), pl.len().cast(pl.Int64).alias("rows"),
            # 40-bit terms: a tenant of < 2^24 rows sums without overflow
            (pl.struct("_h", "_i").hash(seed=11) // (1 << 24)).sum().cast(pl.UInt64).alias("h")))
    out = pl.concat(parts).sort(["tenant", "table"], nulls_last=True)
    return conform(out.to_arrow(), INPUT_HASHES)


def changed_tenants(before: pa.Table, after: pa.Table) -> set[str | None]:
    """Tenants whose INPUT_HASHES rows differ between two runs (new and gone tenants included)."""
    def by_tenant(table: pa.Table) -> dict[str | None, set[tuple]]:
        out: dict[str | None, set[tuple]] = {}
        for r in table.to_pylist():
            out.setdefault(r["tenant"], set()).add((r["table"], r["rows"], r["h"]))
        return out
    a, b = by_tenant(before), by_tenant(after)
    return {t for t in a.keys() | b.keys() if a.get(t) != b.get(t)}


def _tenants(inputs: pa.Table) -> set[str | None]:
    return set(inputs.column("tenant").to_pylist())


def _rows_by_tenant(inputs: pa.Table) -> dict[str | None, tuple[int, int]]:
    out: dict[str | None, tuple[int, int]] = {}
    for r in inputs.to_pylist():
        n, e = out.get(r["tenant"], (0, 0))
        out[r["tenant"]] = (n + r["rows"], e) if r["table"] == "nodes" else (n, e + r["rows"])
    return out


def _mask(table: pa.Table, tenants: set[str | None]) -> pl.Series:
    named = sorted(t for t in tenants if t is not None)
    col = as_frame(table.select(["tenant"])).get_column("tenant")
    hit = col.is_in(named)
    return (hit | col.is_null()) if None in tenants else hit.fill_null(False)


def of_tenants(table: pa.Table, tenants: set[str | None], keep: bool = True) -> pa.Table:
    """The rows of `table` whose tenant is (keep) or is not (not keep) in `tenants`, in table order."""
    mask = _mask(table, tenants)
    return table.filter((mask if keep else ~mask).to_arrow())


def _of_tenants_or_none(table: pa.Table | None, tenants: set[str | None]) -> pa.Table | None:
    return None if table is None else of_tenants(table, tenants)


def splice(before: GraphStage, part: GraphStage, dirty: set[str | None]) -> GraphStage:
    """The graph stage of every tenant: `before`'s rows of the clean tenants, `part`'s of the dirty ones. Agent
    ops never belong to a dirty tenant here (else a full run), so their tables are `before`'s."""
    def both(name: str, schema: pa.Schema) -> pa.Table:
        return concat([of_tenants(getattr(before, name), dirty, keep=False), getattr(part, name)], schema)

    communities = as_frame(both("communities", COMMUNITIES)).with_row_index("_row").sort(
        ["tenant", "level", "id"], nulls_last=True, maintain_order=True).get_column("_row")
    return GraphStage(nodes=both("nodes", NODES), edges=both("edges", EDGES),
                      communities=both("communities", COMMUNITIES).take(communities.to_arrow()),
                      version_review=both("version_review", REVIEW_QUEUE),
                      deleted_links=conform(before.deleted_links, COLD_EDGES),
                      ops_applied=conform(before.ops_applied, OPS_APPLIED),
                      ops_rejected=conform(before.ops_rejected, OPS_REJECTED))


# -- the snapshot in the lake: lake/consolidated/steps/ -------------------------------------------------------------
# The stage graph is kept as an overlay over the R2G graph it was made from (a clean tenant's R2G rows are the same
# next time, so the overlay applies to them as it did); the small side tables whole. snapshot.json, naming the
# fingerprint, is written last and removed first: a run that stops halfway leaves no snapshot, and the next is full.
_SIDE = {"communities": COMMUNITIES, "version_review": REVIEW_QUEUE, "deleted_links": COLD_EDGES,
         "ops_applied": OPS_APPLIED, "ops_rejected": OPS_REJECTED}


def drop_snapshot(folder: Any) -> None:
    """Remove the snapshot's marker (before the run's tables are rewritten)."""
    marker = folder / "snapshot.json"
    if marker.exists():
        marker.unlink()


def write_snapshot(folder: Any, run: DirtyRun, r2g_nodes: pa.Table, r2g_edges: pa.Table) -> None:
    """`run`'s snapshot under `folder`, its stage graph as an overlay over the R2G graph it was made from; the
    marker also says how that run went (DirtyRun.metadata)."""
    snapshot = run.snapshot
    stage = snapshot.stage
    folder.mkdir(parents=True, exist_ok=True)
    write_overlay(folder, "nodes", diff_overlay(as_frame(r2g_nodes), as_frame(stage.nodes), NODES), NODES)
    write_overlay(folder, "edges", diff_overlay(as_frame(r2g_edges), as_frame(stage.edges), EDGES), EDGES)
    for name, schema in _SIDE.items():
        write_table(getattr(stage, name), folder / f"{name}.parquet", schema)
    write_table(snapshot.inputs, folder / "inputs.parquet", INPUT_HASHES)
    write_bytes_atomic(folder / "snapshot.json",
                       json.dumps({"fingerprint": snapshot.fingerprint, "run": run.metadata()}, indent=1).encode())


def read_snapshot(folder: Any, r2g_nodes: pa.Table, r2g_edges: pa.Table) -> Snapshot | None:
    """The snapshot under `folder` (None when there is none); its stage is read when first asked for, over the
    R2G graph of this run (right for the tenants whose input hash is unchanged: the only ones it is used for)."""
    marker = folder / "snapshot.json"
    if not marker.exists():
        return None

    def load() -> GraphStage:
        nodes = apply_overlay(as_frame(r2g_nodes), read_overlay(folder, "nodes", NODES))
        edges = apply_overlay(as_frame(r2g_edges), read_overlay(folder, "edges", EDGES))
        side = {name: read_table(folder / f"{name}.parquet", schema) for name, schema in _SIDE.items()}
        return GraphStage(nodes=conform(nodes.to_arrow(), NODES), edges=conform(edges.to_arrow(), EDGES), **side)

    return Snapshot(json.loads(marker.read_text())["fingerprint"], read_table(folder / "inputs.parquet", INPUT_HASHES),
                    load=load)
