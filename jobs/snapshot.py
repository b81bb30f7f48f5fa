"""The consolidation run in the lake: its result under lake/consolidated, its snapshot under lake/consolidated/steps.

The result is an overlay over the R2G graph it was made from (`nodes`/`edges` upserts and removals) and the nodes'
state columns (`state.parquet`). The snapshot's stage graph is kept as what it adds to that result (a clean
tenant's R2G rows are the same next time, so both overlays apply to them as they did): the stage rows the time
steps dropped, and a patch of the state columns they changed; the small side tables whole. snapshot.json, naming
the fingerprint, is written last and removed first: a run that stops halfway (its result overlay written, its
stage not) leaves no snapshot, and the next is full.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from jobs.consolidate import GraphStage, concat
from jobs.dirty import (
    INPUT_HASHES,
    ROLLUP_GROUPS,
    VERSION_SCHEMAS,
    DirtyRun,
    Snapshot,
    by_key,
    made_by_rollup,
    version_tables,
)
from jobs.schema import COLD_EDGES, COMMUNITIES, OPS_APPLIED, OPS_REJECTED, REVIEW_QUEUE
from jobs.version_groups import VersionReuse
from r2g.lake_graph import STATE_FILE
from r2g.schema import EDGES, NODE_STATE, NODES, STATE_COLUMNS
from raw_store.lake import file_bytes, read_table, write_bytes_atomic, write_table
from raw_store.tables import (
    Overlay,
    layered_table,
    parquet_rows,
    patched,
    read_overlay,
    stage_and_final_overlays,
    write_overlay,
)

STEPS = "steps"  # the snapshot's folder, under the result's (lake/consolidated)
_VERSION_FILES = ("version_groups", "version_places", "version_edges")  # the review rows: the side table's

_SIDE = {
    "communities": COMMUNITIES,
    "version_review": REVIEW_QUEUE,
    "deleted_links": COLD_EDGES,
    "ops_applied": OPS_APPLIED,
    "ops_rejected": OPS_REJECTED,
}


def drop_snapshot(folder: Any) -> None:
    """Remove the snapshot's marker (before the run's tables are rewritten)."""
    marker = folder / "snapshot.json"
    if marker.exists():
        marker.unlink()


def write_consolidated(folder: Any, run: DirtyRun, r2g_keys: dict[str, pa.Table]) -> dict[str, tuple[int, int]]:
    """Write `run` under `folder` (lake/consolidated): its result as an overlay over R2G and the node state, then its
    snapshot under folder/steps (the stage as an overlay and a patch over that result, write_stage; the rest,
    write_snapshot). Returns {"nodes"/"edges": (rows the result's overlay upserts, rows it removes)}.

    `r2g_keys` {"nodes", "edges"}: the R2G graph's (tenant, id) columns, in its row order. Both overlays come from one
    hashing of R2G and the stage (raw_store.tables.stage_and_final_overlays; R2G's row hashes are the run's
    `input_hashes`), a table at a time: the keys, the run's hashes and the snapshot's stage table are let go as each
    table is written, so a caller that hands them over does not hold two copies of the graph."""
    overlay_rows = {}
    hashes = list(run.input_hashes or (None, None))  # R2G's row hashes, from the dirty set
    run.input_hashes = None
    for name, schema, ignore in (("nodes", NODES, STATE_COLUMNS), ("edges", EDGES, ())):
        if name == "edges" and (kept := edge_overlays_kept(folder, run)) is not None:
            del r2g_keys[name], hashes[0]
            run.snapshot.release(name)
            overlay_rows[name] = kept
            continue
        to_stage, stage_patch, to_result = stage_and_final_overlays(
            r2g_keys.pop(name),
            getattr(run.snapshot.stage, name),
            getattr(run.result, name),
            schema,
            ignore=ignore,
            base_hashes=hashes.pop(0),
        )
        write_overlay(folder, name, to_result, schema)
        write_stage(folder / STEPS, name, to_stage, schema, stage_patch)
        run.snapshot.release(name)
        overlay_rows[name] = (to_result.upserts.num_rows, to_result.removed.num_rows)
        del to_stage, stage_patch, to_result
    write_table(run.result.nodes.select(NODE_STATE.names), folder / STATE_FILE, NODE_STATE)
    write_snapshot(folder / STEPS, run)
    return overlay_rows


def edge_overlays_kept(folder: Any, run: DirtyRun) -> tuple[int, int] | None:
    """The rows the result's edge overlay upserts and removes, when both edge overlays under `folder` are already
    this run's, else None. They are when the run reused the last run's stage (no tenant's R2G rows changed: the
    daily run) and neither run dropped an edge from it: the result's overlay is then the diff of the same R2G edges
    and the same stage edges, and the stage's is empty both times (it holds the rows the result dropped; an edge
    has no state columns). Hashing the stage's and R2G's edges again to write the same files was ~1 s of a daily run
    at 100k messages. A run that caps or forgets an edge, or follows one that did, writes them (write_consolidated);
    the snapshot read at the run's start vouched for the files (its marker is written after them)."""
    if not run.stage_reused or run.result.edges.num_rows != run.snapshot.stage.edges.num_rows:
        return None
    try:
        if parquet_rows(folder / STEPS / "edges.parquet") or parquet_rows(folder / STEPS / "edges_removed.parquet"):
            return None
        return parquet_rows(folder / "edges.parquet"), parquet_rows(folder / "edges_removed.parquet")
    except FileNotFoundError:
        return None


def write_stage(folder: Any, name: str, overlay: Overlay, schema: pa.Schema, patch: pa.Table | None = None) -> None:
    """The stage graph's `name` table ("nodes", "edges") of a run's snapshot: `overlay` over the run's result overlay
    (the folder above, lake/consolidated), and for the nodes the `patch` of their state columns (both from
    raw_store.tables.stage_and_final_overlays; for the nodes the patch is required). Written on every run, also
    when no tenant was redone: the result they lie over moves with `as_of`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_overlay(folder, name, overlay, schema)
    if name == "nodes":
        assert patch is not None, "the stage's nodes are an overlay and a patch of their state columns"
        write_table(patch, folder / "nodes_state.parquet", NODE_STATE)


def write_snapshot(folder: Any, run: DirtyRun) -> None:
    """The rest of `run`'s snapshot under `folder` (its stage graph's tables go first, through write_stage), then
    the marker naming its fingerprint."""
    snapshot = run.snapshot
    stage = snapshot.stage
    folder.mkdir(parents=True, exist_ok=True)
    if not run.stage_reused:
        for name, schema in _SIDE.items():
            write_table(getattr(stage, name), folder / f"{name}.parquet", schema)
        write_table(snapshot.inputs, folder / "inputs.parquet", INPUT_HASHES)
        write_table(snapshot.rollup_groups, folder / "rollup_groups.parquet", ROLLUP_GROUPS)
        for name, table, schema in zip(_VERSION_FILES, version_tables(snapshot.versions), VERSION_SCHEMAS):
            write_table(table, folder / f"{name}.parquet", schema)
    # the fingerprint only: a lake re-run after a crash must end with the same bytes as one never interrupted
    write_bytes_atomic(folder / "snapshot.json", json.dumps({"fingerprint": snapshot.fingerprint}).encode())


def read_snapshot(folder: Any, r2g_nodes: pa.Table, r2g_edges: pa.Table) -> Snapshot | None:
    """The snapshot under `folder` (None when there is none); its stage is read when first asked for, over the
    R2G graph of this run (right for the tenants whose input hash is unchanged: the only ones it is used for) and
    the last run's result overlay in the folder above (write_stage). The loader holds the graph until it hands it to
    the gather, which lets each column go once gathered where no one else holds it (a daily run at 1M: 13.7 GB)."""
    marker, result = folder / "snapshot.json", folder.parent
    files = [
        marker,
        *(result / f"{n}.parquet" for n in ("nodes", "nodes_removed", "edges", "edges_removed")),
        *(
            folder / f"{n}.parquet"
            for n in (
                "inputs",
                "rollup_groups",
                *_VERSION_FILES,
                "nodes",
                "nodes_removed",
                "nodes_state",
                "edges",
                "edges_removed",
                *_SIDE,
            )
        ),
    ]
    if not all(f.exists() for f in files):
        return None

    def layers(name: str, schema: pa.Schema) -> list[Overlay]:
        return [read_overlay(result, name, schema), read_overlay(folder, name, schema)]

    graph = [r2g_nodes, r2g_edges]  # handed on at the load: each column let go as gathered (see the docstring)
    del r2g_nodes, r2g_edges

    def load() -> GraphStage:
        nodes = patched(
            layered_table(graph.pop(0), layers("nodes", NODES)), read_table(folder / "nodes_state.parquet", NODE_STATE)
        )
        edges = layered_table(graph.pop(0), layers("edges", EDGES))
        side = {name: read_table(folder / f"{name}.parquet", schema) for name, schema in _SIDE.items()}
        return GraphStage(nodes=nodes, edges=edges, **side)

    def load_rollups() -> tuple[pa.Table, pa.Table]:
        # rollup rows are never R2G's: the two overlays' upserts hold them all (the stage's: those the result dropped)
        nodes, edges = (
            by_key(concat([made_by_rollup(o.upserts) for o in layers(name, schema)], schema))
            for name, schema in (("nodes", NODES), ("edges", EDGES))
        )
        return patched(nodes, read_table(folder / "nodes_state.parquet", NODE_STATE)), edges

    return Snapshot(
        json.loads(file_bytes(marker))["fingerprint"],
        read_table(folder / "inputs.parquet", INPUT_HASHES),
        read_table(folder / "rollup_groups.parquet", ROLLUP_GROUPS),
        VersionReuse(
            *(
                read_table(folder / f"{name}.parquet", schema)
                for name, schema in zip((*_VERSION_FILES, "version_review"), VERSION_SCHEMAS)
            )
        ),
        load=load,
        load_rollups=load_rollups,
    )
