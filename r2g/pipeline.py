"""One inbox file's messages → annotations (through the NLP cache) → graph tables.

The Dagster assets run the two steps separately (annotations are stored per
partition); `run_partition` runs both for library callers and the benchmarks.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from r2g import link, time_norm
from r2g.concepts import load_concepts
from r2g.extract import build_graph
from r2g.ids import ID_SCHEME, text_sha
from r2g.link import with_fact_links
from r2g.nlp import PIPELINE_VERSION, AnnotateStats, Annotation, annotate, paused_gc
from r2g.nlp_cache import NlpCache
from r2g.rules import RULES
from r2g.schema import ANNOTATIONS
from raw_store.lake import read_parquet


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
    nodes: pa.Table  # r2g.schema.NODES
    edges: pa.Table  # r2g.schema.EDGES
    stats: AnnotateStats


def annotate_messages(
    messages: pa.Table, cache: NlpCache | PartAnnotations | None, workers: int | None = None
) -> tuple[dict[str, Annotation], AnnotateStats]:
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
    return pa.table(
        {
            "text_sha": shas,
            "lang": [annotations[s].lang for s in shas],
            "annotation": [annotations[s].to_json() for s in shas],
        },
        schema=ANNOTATIONS,
    )


def _wal(con: sqlite3.Connection, wait: float = 60.0) -> None:
    """Put the cache in WAL mode (kept in the file: set once). The switch takes no busy handler: two processes
    opening a new cache at once (a fresh lake's first file runs on a cluster's workers) had one fail with "database
    is locked"; it tries again until `wait` seconds have passed."""
    deadline = time.monotonic() + wait
    while True:
        try:
            if con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class PartAnnotations:
    """The NLP cache of a lake, without a second copy of any annotation: annotations live in the partitions'
    `annotations.parquet` files, and an sqlite index (`cache/nlp.sqlite`) maps a text's sha256 to the partition
    that holds its annotation under the current PIPELINE_VERSION. A text seen before in any file, or in an earlier
    version of the same file, is read back from there and never re-annotated.

    `annotate` calls `get_many` / `put_many` (r2g.nlp.annotate's cache protocol); `put_many` does nothing, because an
    annotation is only findable once its partition file is written: the caller then calls `record`. An index row
    that points at a partition that no longer holds the text is a miss (the text is annotated again). The index holds
    hashes and partition names only, never text; `forget` drops the rows of forgotten texts all the same.
    """

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS seen (sha BLOB PRIMARY KEY, part TEXT NOT NULL) WITHOUT ROWID"
    )

    def __init__(self, index: Path, parts: Any) -> None:
        self.index, self.parts = Path(index), parts
        self.index.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect()
        try:
            _wal(con)
            with con:
                if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'annotations'").fetchone():
                    con.execute("DROP TABLE annotations")  # the pre-2026-11-25 cache held whole annotations
                con.executescript(self._SCHEMA)
                row = con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
                if row is None or row[0] != PIPELINE_VERSION:  # another NLP pipeline: nothing indexed is valid
                    con.execute("DELETE FROM seen")
                    con.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", [PIPELINE_VERSION])
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.index, timeout=60.0)
        con.execute("PRAGMA busy_timeout=60000")
        return con

    def get_many(self, shas: Sequence[str]) -> dict[str, Annotation]:
        """The annotations of the given text shas that some partition holds (missing ones are absent)."""
        wanted = list(dict.fromkeys(s for s in shas if s))
        where: dict[str, list[str]] = {}
        con = self._connect()
        try:
            for k in range(0, len(wanted), 500):  # sqlite's bound-parameter limit
                part = wanted[k : k + 500]
                q = f"SELECT sha, part FROM seen WHERE sha IN ({','.join('?' * len(part))})"
                for sha, pid in con.execute(q, [bytes.fromhex(x) for x in part]):
                    where.setdefault(pid, []).append(sha.hex())
        finally:
            con.close()
        out: dict[str, Annotation] = {}
        for pid, found in sorted(where.items()):
            try:
                table = read_parquet(self.parts / pid / "annotations.parquet", columns=["text_sha", "annotation"])
            except FileNotFoundError:
                continue
            hit = table.filter(pc.is_in(table.column("text_sha"), value_set=pa.array(found, pa.string())))
            for sha, js in zip(hit.column("text_sha").to_pylist(), hit.column("annotation").to_pylist()):
                out[sha] = Annotation.from_json(js)
        return out

    def put_many(self, items: Mapping[str, Annotation]) -> None:
        """Nothing: an annotation is found once its partition file is written and `record`ed."""

    def record(self, part: str, shas: Iterable[str]) -> None:
        """Index the text shas whose annotations partition folder `part` now holds."""
        rows = sorted((bytes.fromhex(s), part) for s in set(shas) if s)
        con = self._connect()
        try:
            with con:
                con.executemany("INSERT OR REPLACE INTO seen (sha, part) VALUES (?, ?)", rows)
        finally:
            con.close()

    def drop(self, shas: Iterable[str]) -> None:
        """Forget the index rows of these text shas (forgotten texts)."""
        rows = [(bytes.fromhex(s),) for s in set(shas) if s]
        con = self._connect()
        try:
            with con:
                con.executemany("DELETE FROM seen WHERE sha = ?", rows)
        finally:
            con.close()


def annotations_from_table(table: pa.Table) -> dict[str, Annotation]:
    return {
        sha: Annotation.from_json(js)
        for sha, js in zip(table.column("text_sha").to_pylist(), table.column("annotation").to_pylist())
    }


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
