"""One inbox file's messages → annotations (through the NLP cache) → graph tables.

The Dagster assets run the two steps separately (annotations are stored per
partition); `run_partition` runs both for library callers and the benchmarks.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa

from r2g.extract import build_graph
from r2g.ids import ID_SCHEME, text_sha
from r2g import link, time_norm
from r2g.concepts import load_concepts
from r2g.link import with_fact_links
from r2g.rules import RULES
from r2g.nlp import AnnotateStats, Annotation, NlpCache, annotate, paused_gc
from r2g.schema import ANNOTATIONS


@lru_cache(maxsize=1)
def graph_version() -> str:
    """Version of everything that turns annotations into graph rows: the rule ids (a changed rule is a
    new id), the fact-link rules, the topic dictionary, the time rules and the id scheme. A partition
    built under another version has its graph rebuilt from its stored annotations — NLP is not re-run
    (raw_store.lake.outdated_stages)."""
    ids = sorted(RULES) + [link.SAME_AS, link.SUPPORT, time_norm.RULES_VERSION, ID_SCHEME]
    key = "|".join(ids) + "|concepts=" + load_concepts().version
    return "r2g." + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


@dataclass
class GraphResult:
    nodes: pa.Table      # r2g.schema.NODES
    edges: pa.Table      # r2g.schema.EDGES
    stats: AnnotateStats


def annotate_messages(messages: pa.Table, cache: NlpCache | None,
                      workers: int | None = None) -> tuple[dict[str, Annotation], AnnotateStats]:
    """{text_sha: Annotation} for the messages' distinct texts (cache hits are not re-annotated).

    `workers`: annotate processes (r2g.nlp.annotate; default r2g.nlp.default_workers()).
    """
    if messages.num_rows == 0:
        return {}, AnnotateStats(hits=0, misses=0)
    texts = [t or "" for t in messages.column("text").to_pylist()]
    langs = [lg or "und" for lg in messages.column("lang").to_pylist()]
    shas = messages.column("text_sha").to_pylist()
    anns, stats = annotate(texts, langs, cache, workers=workers)
    return {sha or text_sha(text): ann for sha, text, ann in zip(shas, texts, anns)}, stats


def annotations_table(annotations: dict[str, Annotation]) -> pa.Table:
    """The ANNOTATIONS table of `annotations`, sorted by text_sha (deterministic bytes)."""
    shas = sorted(annotations)
    return pa.table({"text_sha": shas, "lang": [annotations[s].lang for s in shas],
                     "annotation": [annotations[s].to_json() for s in shas]}, schema=ANNOTATIONS)


def annotations_from_table(table: pa.Table) -> dict[str, Annotation]:
    return {sha: Annotation.from_json(js) for sha, js in
            zip(table.column("text_sha").to_pylist(), table.column("annotation").to_pylist())}


def partition_graph(messages: pa.Table, annotations: dict[str, Annotation]) -> tuple[pa.Table, pa.Table]:
    """R2G of one partition: build_graph, then its Facts linked (the lake-wide graph_tables asset links
    across partitions the same way)."""
    with paused_gc():
        nodes, edges = build_graph(messages, annotations)
        return nodes, with_fact_links(nodes, edges)


def run_partition(messages: pa.Table, cache: NlpCache | None, workers: int | None = None) -> GraphResult:
    """Annotate the partition's messages (through `cache` when given) and build its linked graph tables."""
    annotations, stats = annotate_messages(messages, cache, workers)
    nodes, edges = partition_graph(messages, annotations)
    return GraphResult(nodes, edges, stats)
