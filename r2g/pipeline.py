"""run_partition: one inbox file's messages → annotated → graph tables."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from r2g.extract import build_graph
from r2g.ids import text_sha
from r2g.nlp import AnnotateStats, NlpCache, annotate


@dataclass
class GraphResult:
    nodes: pa.Table      # r2g.schema.NODES
    edges: pa.Table      # r2g.schema.EDGES
    stats: AnnotateStats


def run_partition(messages: pa.Table, cache: NlpCache | None) -> GraphResult:
    """Annotate the partition's messages (through `cache` when given) and build its graph tables."""
    texts = [t or "" for t in messages.column("text").to_pylist()] if messages.num_rows else []
    langs = messages.column("lang").to_pylist() if messages.num_rows else []
    shas = messages.column("text_sha").to_pylist() if "text_sha" in messages.column_names else [None] * len(texts)
    anns, stats = annotate(texts, [lg or "und" for lg in langs], cache)
    by_sha = {}
    for sha, text, ann in zip(shas, texts, anns):
        by_sha[sha or text_sha(text)] = ann
    nodes, edges = build_graph(messages, by_sha)
    return GraphResult(nodes, edges, stats)
