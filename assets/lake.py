"""Lake-wide tables. None is a copy: messages, raw_chunks and rejects are the union of the file partitions'
files, and the R2G graph is their graph parts under the merge overlay (raw_store.tables, r2g.lake_graph)."""

import json
from collections.abc import Iterator

import dagster as dg
import polars as pl
import pyarrow.compute as pc

from assets.ingest import file_chunks, file_graph
from assets.metadata import RED, bar_chart_svg, svg_markdown, table_metadata
from assets.resources import LakeResource
from jobs.forget import ForgetRules, collect, load_requests, tombstones
from jobs.integrity import CheckOutcome, forgotten_stay_forgotten, lake_conservation, unresolved_raw_refs, verify_store
from jobs.schema import AUDIT
from r2g.lake_graph import counts_by, grouped_counts, read_graph_columns, read_lake_table
from r2g.merge_overlay import r2g_overlays, write_merge_overlay
from r2g.schema import EDGES, NODES
from raw_store.lake import lake_fingerprint, value_counts, write_table
from raw_store.schema import TOMBSTONES
from raw_store.tables import part_rows

VERIFY_SAMPLE = 256
# lake-wide copies an earlier layout wrote (before 2026-11-25): the tables are now read where they lie
LEGACY_COPIES = ("raw_chunks", "messages", "rejects", "nodes", "edges", "r2g_nodes", "r2g_edges")


def _check(name: str, outcome: CheckOutcome, asset: str | None = None) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=name,
        passed=outcome.passed,
        asset_key=asset,
        metadata={
            "summary": outcome.summary,
            "checked": outcome.checked,
            "failures": outcome.failures,
            "examples": dg.MetadataValue.json(json.loads(json.dumps(outcome.examples, default=str))),
        },
    )


def _type_counts(counts: pl.DataFrame) -> dict:
    """Row count and rows by type of a table, from grouped_counts' rows of its type column."""
    return {
        "dagster/row_count": int(counts.get_column("rows").sum()),
        "type": dg.MetadataValue.json(counts_by(counts, "type")),
    }


@dg.asset(
    group_name="lake",
    deps=[file_chunks],
    kinds={"parquet"},
    owners=["team:memory"],
    check_specs=[
        dg.AssetCheckSpec(
            "raw_store_verified",
            asset="raw_chunks",
            description=f"A sample of {VERIFY_SAMPLE} stored blobs re-hash to their "
            "sha256; corrupt ones are quarantined and their files "
            "re-ingested on the next run.",
        )
    ],
)
def raw_chunks(lake: LakeResource) -> dg.MaterializeResult:
    """Manifest of every RawChunk in the zstd CAS (id, sha256, path, conversation, offsets): the union of the
    file partitions' manifests, one row per chunk."""
    lk = lake.get()
    table = read_lake_table(lk, "raw_chunks", ["id", "tenant", "conv_id", "len_bytes", "stored_bytes", "path"])
    # a different sample each time the lake changes, the same one on a re-run of the same lake
    verified = verify_store(lk, sample=VERIFY_SAMPLE, seed=int(lake_fingerprint(lk)[:8], 16))
    report = verified.report
    return dg.MaterializeResult(
        metadata={
            **table_metadata(table, ["id", "tenant", "conv_id", "len_bytes", "path"]),
            "stored_bytes": sum(table.column("stored_bytes").to_pylist()),
            "raw_bytes": sum(table.column("len_bytes").to_pylist()),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name="raw_store_verified",
                passed=report.ok,
                metadata={
                    "summary": verified.summary,
                    "checked": report.checked,
                    "stored": report.total,
                    "corrupt": dg.MetadataValue.json(report.corrupt[:20]),
                    "reingest": dg.MetadataValue.json(verified.invalidated),
                },
            )
        ],
    )


@dg.asset(
    group_name="lake",
    deps=[file_chunks, raw_chunks],
    kinds={"parquet"},
    owners=["team:memory"],
    check_specs=[
        dg.AssetCheckSpec(
            "raw_refs_resolve",
            asset="messages",
            blocking=True,
            description="Every message points inside a stored RawChunk.",
        )
    ],
)
def messages(lake: LakeResource) -> dg.MaterializeResult:
    """Every accepted chat message with speaker, time, language and its (raw_id, offset, length): the union of the
    file partitions' messages."""
    lk = lake.get()
    table = read_lake_table(
        lk, "messages", ["tenant", "conv_id", "msg_id", "speaker", "ts", "lang", "text", "raw_refs"]
    )
    outcome = unresolved_raw_refs(table, read_lake_table(lk, "raw_chunks", ["tenant", "id", "len_bytes"]))
    return dg.MaterializeResult(
        metadata={
            **table_metadata(table, ["tenant", "conv_id", "msg_id", "speaker", "ts", "text"]),
            "by_lang": dg.MetadataValue.json(value_counts(table, "lang")),
        },
        check_results=[_check("raw_refs_resolve", outcome)],
    )


@dg.asset(
    group_name="lake",
    deps=[file_chunks, messages],
    kinds={"parquet"},
    owners=["team:memory"],
    check_specs=[
        dg.AssetCheckSpec(
            "conservation",
            asset="rejects",
            blocking=True,
            description="Lake-wide: the records every file read = messages + "
            "rejects rows (the merge drops and duplicates nothing).",
        )
    ],
)
def rejects(lake: LakeResource) -> dg.MaterializeResult:
    """Input that could not be read, with a coded reason and the CAS id of its bytes (nothing is lost)."""
    lk = lake.get()
    table = read_lake_table(lk, "rejects")
    outcome = lake_conservation(lk, part_rows(lk, "messages"), table)  # the footers' counts: no column read
    by_reason = value_counts(table, "reason")
    chart = bar_chart_svg(
        by_reason, "Rejects by reason", "rejected records", colour=RED, empty="no rejects: every input record was read"
    )
    return dg.MaterializeResult(
        metadata={
            **table_metadata(table, ["source_file", "line", "reason", "detail"]),
            "rejects_chart": svg_markdown(chart, "rejects by reason"),
            "by_reason": dg.MetadataValue.json(by_reason),
        },
        check_results=[_check("conservation", outcome)],
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "r2g_nodes",
            group_name="lake",
            deps=[file_graph, raw_chunks],
            kinds={"parquet"},
            owners=["team:memory"],
            description="R2G's nodes (Episode, Entity, Fact, Preference, …) merged across files, before consolidation.",
        ),
        dg.AssetSpec(
            "r2g_edges",
            group_name="lake",
            deps=[file_graph, raw_chunks],
            kinds={"parquet"},
            owners=["team:memory"],
            description="R2G's typed edges merged across files, with SAME_AS / SUPPORTS / CONTRADICTS "
            "between Facts of the whole lake.",
        ),
    ],
)
def graph_tables(lake: LakeResource) -> Iterator[dg.MaterializeResult]:
    """The merge overlay over the files' graph parts: ids seen in several files merged into one row (Entities and
    repeated Facts aggregated), nodes of node/topic forget requests and every edge touching them removed, and
    SAME_AS / SUPPORTS / CONTRADICTS between the Facts of the whole lake added. Where files were only added since
    the last run, only what they touch is redone (r2g.merge_overlay; metadata `merge_mode`, `merge_reason`)."""
    lk = lake.get()
    run = r2g_overlays(lk, ForgetRules(load_requests(lk)).node_ids, full=lake.full_rebuild)
    write_merge_overlay(lk, run)
    nodes, edges = run.nodes, run.edges
    for name in LEGACY_COPIES:
        if lk.table(name).exists():
            lk.table(name).unlink()
    # counted by DuckDB over the files (as `memctl stats`), not assembled in Arrow: 0.8 s against 2.7 s at 100k messages
    node_types, edge_types = (grouped_counts(lk, name, ["type"]) for name in ("r2g_nodes", "r2g_edges"))
    yield dg.MaterializeResult(
        asset_key="r2g_nodes",
        metadata={
            **_type_counts(node_types),
            "merged": nodes.upserts.num_rows,
            "removed": nodes.removed.num_rows,
            "merge_mode": run.mode,
            "merge_reason": run.reason,
            "new_partitions": run.new_parts,
        },
    )
    yield dg.MaterializeResult(
        asset_key="r2g_edges",
        metadata={
            **_type_counts(edge_types),
            "merged_or_linked": edges.upserts.num_rows,
            "removed": edges.removed.num_rows,
        },
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "audit",
            group_name="lake",
            deps=["nodes", "edges", "messages", "raw_chunks", "rejects"],
            kinds={"parquet"},
            owners=["team:memory"],
            description="One row per forget request: the node ids, edges, index entries and raw blobs it "
            "removed (the deletion proof).",
        ),
        dg.AssetSpec(
            "tombstones",
            group_name="lake",
            deps=["audit"],
            kinds={"parquet"},
            owners=["team:memory"],
            description="One row per raw blob deleted by forgetting: when and why (the blob is gone).",
        ),
    ],
    check_specs=[
        dg.AssetCheckSpec(
            "forgotten_stay_forgotten",
            asset="audit",
            blocking=True,
            description="No node a node or topic request removed is back, no edge points at one, and no other removed node "
            "is back citing a blob its request deleted.",
        )
    ],
)
def forgetting(lake: LakeResource) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """Carry out the forget requests after the lake is rebuilt without what they cover: delete the raw blobs
    nothing cites any more (tombstoned), purge the NLP cache, and write the audit rows."""
    lk = lake.get()
    requests = load_requests(lk)
    audit = collect(lk, requests)
    write_table(audit, lk.table("audit"), AUDIT)
    tombs = tombstones(lk)
    write_table(tombs, lk.table("tombstones"), TOMBSTONES)
    # no audit row names a node (nothing was ever forgotten): nothing to look for, so the graph is not read
    named = pc.sum(pc.list_value_length(audit.column("nodes"))).as_py() or 0
    node_cols, edge_cols = ["tenant", "id", "raw_refs"], ["tenant", "id", "src", "dst"]
    graph = (
        read_graph_columns(lk, "consolidated", node_cols, edge_cols)
        if named
        else (NODES.empty_table().select(node_cols), EDGES.empty_table().select(edge_cols))
    )
    outcome = forgotten_stay_forgotten(audit, *graph, named=ForgetRules(requests).node_ids)
    yield dg.MaterializeResult(
        asset_key="audit",
        metadata={
            **table_metadata(audit, ["request_id", "tenant", "scope", "value", "messages", "edges"]),
            "requests": len(requests),
        },
    )
    yield dg.MaterializeResult(asset_key="tombstones", metadata=table_metadata(tombs, ["raw_id", "tenant", "reason"]))
    yield _check("forgotten_stay_forgotten", outcome, asset="audit")
