"""Consolidation assets: the R2G graph → the maintained graph (`nodes`, `edges`) and its side tables, plus the
daily schedule that re-runs it as of each day (decay and promotion move with time, not only with input)."""

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial

import dagster as dg
import pyarrow as pa

from assets.lake import _check
from assets.metadata import (
    KEYS,
    RunChanges,
    bar_chart_svg,
    degree_chart_svg,
    degrees,
    key_change,
    row_keys,
    svg_markdown,
    table_metadata,
    tier_flow_svg,
    write_keys,
)
from assets.resources import LakeResource
from assets.sensors import LAKE_JOB
from jobs.checks import one_active_per_chain, tiers_monotone
from jobs.consolidate import ConsolidationConfig, ConsolidationResult, Previous, concat, default_as_of
from jobs.dirty import consolidate_dirty
from jobs.feedback import read_hits
from jobs.forget import ForgetRules, load_requests
from jobs.inbox import OPS_FORMAT
from jobs.integrity import orphan_edges, unresolved_raw_refs
from jobs.ops import read_batch
from jobs.schema import COLD_EDGES, COMMUNITIES, FEEDBACK, OPS_APPLIED, OPS_REJECTED, PROMOTIONS, REVIEW_QUEUE
from jobs.snapshot import STEPS, drop_snapshot, read_snapshot, write_consolidated
from r2g.lake_graph import hand_over_graph_tables, layer_dir, read_graph_tables, read_lake_table, state_path
from r2g.schema import NODE_STATE
from raw_store.cas import RawStore
from raw_store.lake import (
    PART_MANIFEST,
    Lake,
    part_dirs,
    read_manifest,
    read_parquet,
    read_table,
    value_counts,
    write_table,
)
from raw_store.schema import RAW_CHUNKS
from raw_store.tables import read_parts

# up to this many edges in the consolidated graph, its checks run beside the writes of its files (~2 s of a 100k
# lake's append on 2 cores); at 1M messages (~15M edges) their working sets would add to the overlays' peak
CHECKS_BESIDE_MAX_EDGES = 5_000_000
_SIDE = {
    "communities": COMMUNITIES,
    "promotions": PROMOTIONS,
    "review_queue": REVIEW_QUEUE,
    "cold_edges": COLD_EDGES,
    "feedback": FEEDBACK,
    "ops_applied": OPS_APPLIED,
    "ops_rejected": OPS_REJECTED,
}
_DESCRIPTIONS = {
    "nodes": "The memory graph's nodes: R2G's, agent-made, topic Concepts and rollups, each with its tier, "
    "category, weight and status as of the run.",
    "edges": "The memory graph's typed, weighted edges after versioning, topics, rollups and degree caps.",
    "communities": "Leiden topics over entity co-occurrence: members, label, modularity, the Concept standing for each.",
    "promotions": "Every tier / category / status change: node, from, to, reason, as of when.",
    "review_queue": "Near-tie contradictions and decayed facts waiting for a person (or an agent) to decide.",
    "cold_edges": "Edges moved out of the hot graph (degree caps, deleted links): kept, never lost.",
    "feedback": "Recall hits and inbox feedback (pin, upvote, downvote, …) that move memory weights.",
    "ops_applied": "Agent write-ops applied (create_memory, link_memories, seed 001 ops), with what they made.",
    "ops_rejected": "Agent write-ops refused, with the seed's error code (BAD_ARGS, NOT_FOUND, …).",
}


def run_changes(lake: Lake, nodes: pa.Table, edges: pa.Table, messages: int, forget_requests: int) -> RunChanges:
    """This build vs the previous one, by (tenant, id) and raw_refs: the previous build's keys are kept as hashes in
    lake/consolidated/keys.parquet (a few bytes a row). A file counts as ingested when its partition manifest
    changed after that file was written."""
    keys_path = layer_dir(lake, "consolidated") / "keys.parquet"
    built = keys_path.stat().st_mtime if keys_path.exists() else None
    previous = read_table(keys_path, KEYS) if built is not None else None
    current = pa.concat_tables([row_keys(nodes, "n"), row_keys(edges, "e")])
    manifests = [(read_manifest(d), (d / PART_MANIFEST).stat().st_mtime) for d in part_dirs(lake)]
    fresh = [m for m, mtime in manifests if built is None or mtime > built]
    changes = RunChanges(
        files=len(manifests),
        files_ingested=len(fresh),
        messages=messages,
        messages_ingested=sum(m.get("messages") or 0 for m in fresh),
        nodes=key_change(previous, current, "n"),
        edges=key_change(previous, current, "e"),
        forget_requests=forget_requests,
        messages_forgotten=sum(m.get("forgotten") or 0 for m, _ in manifests),
    )
    write_keys(current, keys_path)
    return changes


def ops_batches(lake: Lake, at: datetime) -> list:
    """Every agent ops file of the inbox, parsed from its bytes in the CAS (the RawChunk its memories cite)."""
    store, batches = RawStore(lake.root), []
    for d in part_dirs(lake):
        manifest = read_manifest(d)
        if manifest.get("format") != OPS_FORMAT:
            continue
        for chunk in read_table(d / "raw_chunks.parquet", RAW_CHUNKS).to_pylist():
            data = store.read(chunk["tenant"], chunk["path"], chunk["sha256"])
            batches.append(read_batch(data, chunk["source_file"], chunk["tenant"], at))
    return batches


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            name,
            group_name="consolidation",
            kinds={"parquet"},
            owners=["team:memory"],
            description=_DESCRIPTIONS[name],
            deps=["r2g_nodes", "r2g_edges", "messages", "raw_chunks"],
        )
        for name in ("nodes", "edges", *_SIDE)
    ],
    check_specs=[
        dg.AssetCheckSpec(
            "no_orphan_edges",
            asset="edges",
            blocking=True,
            description="Every edge endpoint is a node (or a RawChunk for DERIVED_FROM).",
        ),
        dg.AssetCheckSpec(
            "raw_refs_resolve",
            asset="nodes",
            blocking=True,
            description="Every node raw_ref lies inside a stored RawChunk.",
        ),
        dg.AssetCheckSpec(
            "one_active_per_chain",
            asset="edges",
            blocking=True,
            description="Each fact version chain has exactly one ACTIVE_OF, on its newest version.",
        ),
        dg.AssetCheckSpec(
            "tiers_monotone",
            asset="promotions",
            blocking=True,
            description="Tiers only move up with age unless a promotion's reason says otherwise.",
        ),
    ],
)
def consolidation(
    context: dg.AssetExecutionContext, lake: LakeResource
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """Versions, topics, rollups, PII flags, tiers and decay, degree caps and agent ops over the R2G graph,
    as of the configured date (default: the newest message)."""
    lk = lake.get()
    messages = read_lake_table(lk, "messages", ["ts"])
    feedback = concat([read_parts(lk, "feedback", FEEDBACK), read_hits(lk)], FEEDBACK)
    folder = layer_dir(lk, "consolidated")
    # the node state and the promotions are read by the time step that uses each, not held through the graph steps
    # (0.4 + 0.5 GB as Arrow at 1M messages): nothing writes them before this run's own tables are written
    previous = Previous(
        communities=read_table(lk.table("communities"), COMMUNITIES) if lk.table("communities").exists() else None,
        read=partial(_previous_table, lk),
    )
    promoted = lk.table("promotions")
    as_of = lake.as_of_datetime() or default_as_of(
        messages, read_parquet(promoted, ["at"]) if promoted.exists() else None
    )
    requests = load_requests(lk)
    r2g_nodes, r2g_edges = read_graph_tables(lk, "r2g")
    steps = folder / STEPS
    # the overlays over R2G need its keys alone (its row hashes come with the run); the graph itself and the snapshot
    # read over it are handed to consolidate_dirty, no reference kept here: its version step frees the R2G edges as
    # it copies them (unless clean tenants' stage needs the graph), and both are gone by the time steps
    r2g_keys = {"nodes": r2g_nodes.select(["tenant", "id"]), "edges": r2g_edges.select(["tenant", "id"])}
    handed = [r2g_nodes, r2g_edges, None if lake.full_rebuild else read_snapshot(steps, r2g_nodes, r2g_edges)]
    del r2g_nodes, r2g_edges
    run = consolidate_dirty(
        handed.pop(0),
        handed.pop(0),
        feedback=feedback,
        ops=ops_batches(lk, as_of),
        previous=previous,
        as_of=as_of,
        forget=ForgetRules(requests),
        config=ConsolidationConfig.from_env(),
        snapshot=handed.pop(),
    )
    result = run.result
    drop_snapshot(steps)  # until this run's tables are all written (a crash before: the next run is full)
    # what changed since the last build, and the checks, read the result alone: on the other core (one after the
    # other) while the overlays and tables are written, on a graph small enough that their working sets beside the
    # overlays' (1-2 GB each at 1M messages) cannot matter; after the writes on a bigger one
    changes_of: Callable[[], RunChanges] = partial(
        run_changes, lk, result.nodes, result.edges, messages.num_rows, len(requests)
    )
    checks_of: Callable[[], list[dg.AssetCheckResult]] = partial(_checks, lk, result)
    if result.edges.num_rows <= CHECKS_BESIDE_MAX_EDGES:
        checking = ThreadPoolExecutor(1, thread_name_prefix="memctl-checks")
        changes_of, checks_of = checking.submit(changes_of).result, checking.submit(checks_of).result
        checking.shutdown(wait=False)  # its thread runs the two, then ends
    # promotions accumulate: written first, so a crash before the graph re-derives the same rows (deduplicated)
    tables = {
        "promotions": result.promotions,
        "communities": result.communities,
        "review_queue": result.review_queue,
        "cold_edges": result.cold_edges,
        "feedback": feedback,
        "ops_applied": result.ops_applied,
        "ops_rejected": result.ops_rejected,
    }
    for name, table in tables.items():
        write_table(table, lk.table(name), _SIDE[name])
    # the result, an overlay over R2G, and the snapshot's stage over it; a table at a time, each let go once written
    overlay_rows = write_consolidated(folder, run, r2g_keys)
    hand_over_graph_tables(lk, "consolidated", result.nodes, result.edges)  # the index step's input, in hand
    context.log.info(
        f"consolidation as of {as_of:%Y-%m-%d %H:%M}, {run.mode}"
        f"{f' ({run.reason})' if run.reason else ''}: {run.dirty_tenants} of {run.tenants} tenants "
        f"redone ({run.dirty_nodes} nodes, {run.dirty_edges} edges); {result.stats}"
    )
    node_types, edge_types = value_counts(result.nodes, "type"), value_counts(result.edges, "type")
    changes = changes_of()
    yield dg.MaterializeResult(
        asset_key="nodes",
        metadata={
            **table_metadata(result.nodes, ["type", "tier", "category", "weight", "title"]),
            "node_types_chart": svg_markdown(bar_chart_svg(node_types, "Node types", "nodes"), "node types"),
            "by_type": dg.MetadataValue.json(node_types),
            "by_tier": dg.MetadataValue.json(value_counts(result.nodes, "tier")),
            "by_status": dg.MetadataValue.json(value_counts(result.nodes, "status")),
            **changes.metadata(),
            **run.metadata(),
            "overlay_rows": overlay_rows["nodes"][0],
            "as_of": as_of.isoformat(),
        },
    )
    yield dg.MaterializeResult(
        asset_key="edges",
        metadata={
            **table_metadata(result.edges, ["type", "src", "dst", "weight"]),
            "edge_types_chart": svg_markdown(bar_chart_svg(edge_types, "Edge types", "edges"), "edge types"),
            "degree_chart": svg_markdown(degree_chart_svg(degrees(result.nodes, result.edges)), "degree distribution"),
            "by_type": dg.MetadataValue.json(edge_types),
            "overlay_rows": overlay_rows["edges"][0],
            "removed_from_r2g": overlay_rows["edges"][1],
        },
    )
    charts = {
        "promotions": {
            "tier_flow_chart": svg_markdown(
                tier_flow_svg(result.promotions, value_counts(result.nodes, "tier")), "tier flow"
            )
        }
    }
    for name in _SIDE:
        yield dg.MaterializeResult(asset_key=name, metadata={**table_metadata(tables[name]), **charts.get(name, {})})
    yield from checks_of()


def _previous_table(lake: Lake, name: str) -> pa.Table | None:
    """The last run's node state (`nodes`: not widened to NODES, ~0.5 GB of nulls at 1M messages) or `promotions`,
    None before the first run."""
    path, schema = (state_path(lake), NODE_STATE) if name == "nodes" else (lake.table(name), PROMOTIONS)
    return read_table(path, schema) if path.exists() else None


def _checks(lake: Lake, result: ConsolidationResult) -> list[dg.AssetCheckResult]:
    """The consolidation's blocking checks over its result."""
    chunks = read_lake_table(lake, "raw_chunks", ["tenant", "id", "len_bytes"])
    return [
        _check("no_orphan_edges", orphan_edges(result.nodes, result.edges, chunks), asset="edges"),
        _check("raw_refs_resolve", unresolved_raw_refs(result.nodes, chunks), asset="nodes"),
        _check("one_active_per_chain", one_active_per_chain(result.nodes, result.edges), asset="edges"),
        _check("tiers_monotone", tiers_monotone(result.nodes, result.promotions), asset="promotions"),
    ]


@dg.schedule(
    job_name=LAKE_JOB,
    cron_schedule="0 3 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Daily consolidation: decay, promotion and topics as of the day, even with no new input.",
)
def daily_consolidation(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = context.scheduled_execution_time.date().isoformat()
    return dg.RunRequest(
        run_key=f"consolidate@{day}",
        run_config={"resources": {"lake": {"config": {"as_of": day}}}},
        tags={"memctl/as_of": day},
    )
