"""Lake-wide tables: the union of every file partition, deduplicated and deterministically ordered."""

import json

import dagster as dg

from assets.ingest import file_chunks, file_graph
from assets.metadata import RED, bar_chart_png, png_markdown, table_metadata
from assets.resources import LakeResource
from jobs.forget import ForgetRules, collect, load_requests, tombstones
from jobs.integrity import (forgotten_stay_forgotten, lake_conservation, orphan_edges, unresolved_raw_refs,
                            verify_store)
from jobs.schema import AUDIT
from r2g.link import with_fact_links
from r2g.merge import merge_graph
from r2g.schema import EDGES, NODES
from raw_store.lake import collect_parts, lake_fingerprint, read_table, union_sorted, value_counts, write_table
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS, TOMBSTONES

VERIFY_SAMPLE = 256


def _check(name: str, outcome, asset: str | None = None) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(check_name=name, passed=outcome.passed, asset_key=asset,
                               metadata={"summary": outcome.summary, "checked": outcome.checked,
                                         "failures": outcome.failures,
                                         "examples": dg.MetadataValue.json(
                                             json.loads(json.dumps(outcome.examples, default=str)))})


@dg.asset(group_name="lake", deps=[file_chunks], kinds={"parquet"}, owners=["team:memory"],
          check_specs=[dg.AssetCheckSpec("raw_store_verified", asset="raw_chunks",
                                         description=f"A sample of {VERIFY_SAMPLE} stored blobs re-hash to their "
                                                     "sha256; corrupt ones are quarantined and their files "
                                                     "re-ingested on the next run.")])
def raw_chunks(lake: LakeResource) -> dg.MaterializeResult:
    """Manifest of every RawChunk in the zstd CAS (id, sha256, path, conversation, offsets)."""
    lk = lake.get()
    table = union_sorted(collect_parts(lk, "raw_chunks", RAW_CHUNKS), RAW_CHUNKS,
                         ["tenant", "id", "source_file", "seq"], unique=["tenant", "id"])
    write_table(table, lk.table("raw_chunks"), RAW_CHUNKS)
    # a different sample each time the lake changes, the same one on a re-run of the same lake
    verified = verify_store(lk, sample=VERIFY_SAMPLE, seed=int(lake_fingerprint(lk)[:8], 16))
    report = verified.report
    return dg.MaterializeResult(
        metadata={**table_metadata(table, ["id", "tenant", "conv_id", "len_bytes", "path"]),
                  "stored_bytes": sum(table.column("stored_bytes").to_pylist()),
                  "raw_bytes": sum(table.column("len_bytes").to_pylist())},
        check_results=[dg.AssetCheckResult(
            check_name="raw_store_verified", passed=report.ok,
            metadata={"summary": verified.summary, "checked": report.checked, "stored": report.total,
                      "corrupt": dg.MetadataValue.json(report.corrupt[:20]),
                      "reingest": dg.MetadataValue.json(verified.invalidated)})])


@dg.asset(group_name="lake", deps=[file_chunks, raw_chunks], kinds={"parquet"}, owners=["team:memory"],
          check_specs=[dg.AssetCheckSpec("raw_refs_resolve", asset="messages", blocking=True,
                                         description="Every message points inside a stored RawChunk.")])
def messages(lake: LakeResource) -> dg.MaterializeResult:
    """Every accepted chat message with speaker, time, language and its (raw_id, offset, length)."""
    lk = lake.get()
    table = union_sorted(collect_parts(lk, "messages", MESSAGES), MESSAGES,
                         ["tenant", "conv_id", "source_file", "seq"])
    write_table(table, lk.table("messages"), MESSAGES)
    outcome = unresolved_raw_refs(table, read_table(lk.table("raw_chunks"), RAW_CHUNKS))
    return dg.MaterializeResult(
        metadata={**table_metadata(table, ["tenant", "conv_id", "msg_id", "speaker", "ts", "text"]),
                  "by_lang": dg.MetadataValue.json(value_counts(table, "lang"))},
        check_results=[_check("raw_refs_resolve", outcome)])


@dg.asset(group_name="lake", deps=[file_chunks, messages], kinds={"parquet"}, owners=["team:memory"],
          check_specs=[dg.AssetCheckSpec("conservation", asset="rejects", blocking=True,
                                         description="Lake-wide: the records every file read = messages + "
                                                     "rejects rows (the merge drops and duplicates nothing).")])
def rejects(lake: LakeResource) -> dg.MaterializeResult:
    """Input that could not be read, with a coded reason and the CAS id of its bytes (nothing is lost)."""
    lk = lake.get()
    table = union_sorted(collect_parts(lk, "rejects", REJECTS), REJECTS,
                         ["tenant", "source_file", "line", "byte_offset"])
    write_table(table, lk.table("rejects"), REJECTS)
    outcome = lake_conservation(lk, read_table(lk.table("messages"), MESSAGES), read_table(lk.table("rejects"), REJECTS))
    by_reason = value_counts(table, "reason")
    chart = bar_chart_png(by_reason, "Rejects by reason", "rejected records", colour=RED,
                          empty="no rejects: every input record was read")
    return dg.MaterializeResult(metadata={**table_metadata(table, ["source_file", "line", "reason", "detail"]),
                                          "rejects_chart": png_markdown(chart, "rejects by reason"),
                                          "by_reason": dg.MetadataValue.json(by_reason)},
                                check_results=[_check("conservation", outcome)])


@dg.multi_asset(
    specs=[
        dg.AssetSpec("r2g_nodes", group_name="lake", deps=[file_graph, raw_chunks], kinds={"parquet"},
                     owners=["team:memory"],
                     description="R2G's nodes (Episode, Entity, Fact, Preference, …) merged across files, before "
                                 "consolidation."),
        dg.AssetSpec("r2g_edges", group_name="lake", deps=[file_graph, raw_chunks], kinds={"parquet"},
                     owners=["team:memory"],
                     description="R2G's typed edges merged across files, with SAME_AS / SUPPORTS / CONTRADICTS "
                                 "between Facts of the whole lake."),
    ],
)
def graph_tables(lake: LakeResource):
    """Merge every file's graph part (one row per node/edge id, Entities and repeated Facts aggregated across
    files), then link Facts across the whole lake: SAME_AS, SUPPORTS, CONTRADICTS."""
    lk = lake.get()
    nodes, edges = merge_graph(collect_parts(lk, "nodes", NODES), collect_parts(lk, "edges", EDGES))
    # node / topic forget requests: those nodes and every edge touching them are not merged back
    nodes, edges = ForgetRules(load_requests(lk)).drop_nodes(nodes, edges)
    edges = with_fact_links(nodes, edges)  # SAME_AS / SUPPORTS / CONTRADICTS across files and conversations
    write_table(nodes, lk.table("r2g_nodes"), NODES)
    write_table(edges, lk.table("r2g_edges"), EDGES)
    yield dg.MaterializeResult(asset_key="r2g_nodes", metadata={
        **table_metadata(nodes, ["type", "subtype", "title", "text"]),
        "by_type": dg.MetadataValue.json(value_counts(nodes, "type"))})
    yield dg.MaterializeResult(asset_key="r2g_edges", metadata={
        **table_metadata(edges, ["type", "src", "dst", "weight"]),
        "by_type": dg.MetadataValue.json(value_counts(edges, "type"))})


@dg.multi_asset(
    specs=[
        dg.AssetSpec("audit", group_name="lake", deps=["nodes", "edges", "messages", "raw_chunks", "rejects"],
                     kinds={"parquet"}, owners=["team:memory"],
                     description="One row per forget request: the node ids, edges, index entries and raw blobs it "
                                 "removed (the deletion proof)."),
        dg.AssetSpec("tombstones", group_name="lake", deps=["audit"], kinds={"parquet"}, owners=["team:memory"],
                     description="One row per raw blob deleted by forgetting: when and why (the blob is gone)."),
    ],
    check_specs=[dg.AssetCheckSpec("forgotten_stay_forgotten", asset="audit", blocking=True,
                                   description="No node a forget request removed is back, and no edge "
                                               "points at a forgotten node.")],
)
def forgetting(lake: LakeResource):
    """Carry out the forget requests after the lake is rebuilt without what they cover: delete the raw blobs
    nothing cites any more (tombstoned), purge the NLP cache, and write the audit rows."""
    lk = lake.get()
    requests = load_requests(lk)
    audit = collect(lk, requests)
    write_table(audit, lk.table("audit"), AUDIT)
    tombs = tombstones(lk)
    write_table(tombs, lk.table("tombstones"), TOMBSTONES)
    outcome = forgotten_stay_forgotten(audit, read_table(lk.table("nodes"), NODES),
                                       read_table(lk.table("edges"), EDGES))
    yield dg.MaterializeResult(asset_key="audit", metadata={
        **table_metadata(audit, ["request_id", "tenant", "scope", "value", "messages", "edges"]),
        "requests": len(requests)})
    yield dg.MaterializeResult(asset_key="tombstones", metadata=table_metadata(tombs, ["raw_id", "tenant", "reason"]))
    yield _check("forgotten_stay_forgotten", outcome, asset="audit")
