"""Per-inbox-file assets: chunks → NLP annotations → graph part (one dynamic partition per file)."""

import dagster as dg

from assets.metadata import table_metadata
from assets.resources import LakeResource
from jobs.forget import ForgetRules, forget_version, load_requests
from jobs.inbox import ingest_inbox_file
from jobs.integrity import conservation
from jobs.schema import FEEDBACK
from r2g.extract import build_graph
from r2g.lake_graph import file_docs
from r2g.nlp import PIPELINE_VERSION, shutdown_workers
from r2g.pipeline import PartAnnotations, annotate_messages, annotations_from_table, annotations_table, graph_version
from r2g.schema import ANNOTATIONS, DOCS, EDGES, NODES
from raw_store.cas import RawStore
from raw_store.lake import (
    read_manifest,
    read_table,
    resolve_partition,
    tenant_for,
    value_counts,
    write_manifest,
    write_table,
)
from raw_store.schema import FORGOTTEN, MESSAGES, RAW_CHUNKS, REJECTS

INBOX_FILES = "inbox_files"  # the dynamic partitions' name (the definition's own `name` is typed optional)
inbox_files = dg.DynamicPartitionsDefinition(name=INBOX_FILES)


@dg.asset(
    partitions_def=inbox_files,
    group_name="ingest",
    kinds={"python", "zstd", "parquet"},
    owners=["team:memory"],
    check_specs=[
        dg.AssetCheckSpec(
            "conservation",
            asset="file_chunks",
            blocking=True,
            description="Every input record is a message with text or a reject whose bytes "
            "are kept in the CAS (read back from disk).",
        )
    ],
)
def file_chunks(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """One inbox chat log cut into zstd RawChunks in the CAS, with its messages and rejects."""
    lk = lake.get()
    source = resolve_partition(lk.inbox, context.partition_key)
    if source is None:
        raise dg.Failure(f"inbox file for partition {context.partition_key!r} is gone")
    store = RawStore(lk.root)
    requests = load_requests(lk)
    res, feedback = ingest_inbox_file(source.path, lk.inbox, store, ForgetRules(requests))
    part = lk.part_dir(context.partition_key)
    write_table(feedback, part / "feedback.parquet", FEEDBACK)
    write_table(res.messages, part / "messages.parquet", MESSAGES)
    write_table(res.raw_chunks, part / "raw_chunks.parquet", RAW_CHUNKS)
    write_table(res.rejects, part / "rejects.parquet", REJECTS)
    write_table(res.forgotten, part / "forgotten.parquet", FORGOTTEN)
    previous = read_manifest(part)
    write_manifest(
        part,
        {
            "partition_key": context.partition_key,
            "source_file": res.source_file,
            "source_sha256": res.source_sha256,
            "format": res.format,
            "n_input": res.n_input,
            "tenant": tenant_for(source.path, lk.inbox),
            "forgotten": res.forgotten.num_rows,
            "forget_version": forget_version(requests),
            "routed": res.routed,
            "messages": res.messages.num_rows,
            "rejects": res.rejects.num_rows,
            # the graph part stays valid only if it was built from these same bytes
            "graph_sha256": previous.get("graph_sha256")
            if previous.get("source_sha256") == res.source_sha256
            else None,
        },
    )
    # checked on what landed on disk, not on what was meant to
    check = conservation(
        res.n_input,
        read_table(part / "messages.parquet", MESSAGES),
        read_table(part / "rejects.parquet", REJECTS),
        store,
        forgotten=res.forgotten.num_rows,
        routed=res.routed,
    )
    return dg.MaterializeResult(
        metadata={
            **table_metadata(res.messages, ["conv_id", "msg_id", "speaker", "ts", "lang", "text"]),
            "format": res.format,
            "chunks": res.raw_chunks.num_rows,
            "rejects": res.rejects.num_rows,
            "forgotten": res.forgotten.num_rows,
            "routed_records": res.routed,
            "rejects_by_reason": dg.MetadataValue.json(value_counts(res.rejects, "reason")),
            "source_sha256": res.source_sha256,
        },
        check_results=[
            dg.AssetCheckResult(
                check_name="conservation",
                passed=check.passed,
                metadata={"summary": check.summary, "input": res.n_input},
            )
        ],
    )


@dg.asset(
    partitions_def=inbox_files,
    group_name="ingest",
    deps=[file_chunks],
    kinds={"python", "spacy"},
    owners=["team:memory"],
    code_version=PIPELINE_VERSION,
)
def file_annotations(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """spaCy/jieba annotations of the file's messages; unchanged texts come from the NLP cache."""
    lk = lake.get()
    part = lk.part_dir(context.partition_key)
    messages = read_table(part / "messages.parquet", MESSAGES)
    cache = PartAnnotations(lk.cache / "nlp.sqlite", lk.parts)
    try:
        annotations, stats = annotate_messages(messages, cache, workers=lake.nlp_workers or None)
    finally:
        # a pool of annotate processes (lake.nlp_workers) is let go before the graph step and the lake run: each
        # holds the models, ~0.5 GB (a next file big enough for one starts it again: ~3 s, its workers in parallel)
        shutdown_workers()
    table = annotations_table(annotations)
    write_table(table, part / "annotations.parquet", ANNOTATIONS)
    cache.record(part.name, table.column("text_sha").to_pylist())
    write_manifest(part, {**read_manifest(part), "nlp_version": PIPELINE_VERSION})
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": table.num_rows,
            "cache_hits": stats.hits,
            "cache_misses": stats.misses,
            "nlp_processes": stats.processes,
            "pipeline_version": PIPELINE_VERSION,
            "langs": dg.MetadataValue.json(value_counts(table, "lang")),
        }
    )


@dg.asset(
    partitions_def=inbox_files,
    group_name="ingest",
    deps=[file_annotations],
    kinds={"python", "parquet"},
    owners=["team:memory"],
    code_version=graph_version(),
)
def file_graph(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """R2G over the file: Episode/Entity/Fact/Preference/Task/Concept nodes and their edges, with raw_refs."""
    lk = lake.get()
    part = lk.part_dir(context.partition_key)
    messages = read_table(part / "messages.parquet", MESSAGES)
    annotations = annotations_from_table(read_table(part / "annotations.parquet", ANNOTATIONS))
    nodes, edges = build_graph(messages, annotations)
    write_table(nodes, part / "nodes.parquet", NODES)
    write_table(edges, part / "edges.parquet", EDGES)
    node_docs, raw_docs = file_docs(nodes, read_table(part / "raw_chunks.parquet", RAW_CHUNKS))
    write_table(node_docs, part / "docs.parquet", DOCS)
    write_table(raw_docs, part / "raw_docs.parquet", DOCS)
    manifest = read_manifest(part)
    write_manifest(
        part,
        {
            **manifest,
            "graph_sha256": manifest.get("source_sha256"),
            "graph_version": graph_version(),
            "nodes": nodes.num_rows,
            "edges": edges.num_rows,
        },
    )
    return dg.MaterializeResult(
        metadata={
            **table_metadata(nodes, ["type", "subtype", "title", "text"]),
            "edges": edges.num_rows,
            "node_types": dg.MetadataValue.json(value_counts(nodes, "type")),
            "edge_types": dg.MetadataValue.json(value_counts(edges, "type")),
        }
    )
