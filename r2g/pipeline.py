"""One inbox file's messages → annotations (through the NLP cache) → graph tables.

The Dagster assets run the two steps separately (annotations are stored per
partition); `run_partition` runs both for library callers and the benchmarks.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from r2g.extract import build_graph
from r2g.ids import text_sha
from r2g.nlp import AnnotateStats, Annotation, NlpCache, annotate
from r2g.schema import ANNOTATIONS


@dataclass
class GraphResult:
    nodes: pa.Table      # r2g.schema.NODES
    edges: pa.Table      # r2g.schema.EDGES
    stats: AnnotateStats


def annotate_messages(messages: pa.Table, cache: NlpCache | None) -> tuple[dict[str, Annotation], AnnotateStats]:
    """{text_sha: Annotation} for the messages' distinct texts (cache hits are not re-annotated)."""
    if messages.num_rows == 0:
        return {}, AnnotateStats(hits=0, misses=0)
    texts = [t or "" for t in messages.column("text").to_pylist()]
    langs = [lg or "und" for lg in messages.column("lang").to_pylist()]
    shas = messages.column("text_sha").to_pylist()
    anns, stats = annotate(texts, langs, cache)
    return {sha or text_sha(text): ann for sha, text, ann in zip(shas, texts, anns)}, stats


def annotations_table(annotations: dict[str, Annotation]) -> pa.Table:
    """The ANNOTATIONS table of `annotations`, sorted by text_sha (deterministic bytes)."""
    shas = sorted(annotations)
    return pa.table({"text_sha": shas, "lang": [annotations[s].lang for s in shas],
                     "annotation": [annotations[s].to_json() for s in shas]}, schema=ANNOTATIONS)


def annotations_from_table(table: pa.Table) -> dict[str, Annotation]:
    return {sha: Annotation.from_json(js) for sha, js in
            zip(table.column("text_sha").to_pylist(), table.column("annotation").to_pylist())}


def run_partition(messages: pa.Table, cache: NlpCache | None) -> GraphResult:
    """Annotate the partition's messages (through `cache` when given) and build its graph tables."""
    annotations, stats = annotate_messages(messages, cache)
    nodes, edges = build_graph(messages, annotations)
    return GraphResult(nodes, edges, stats)
