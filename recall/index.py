"""Index builders: the DuckDB database (views over the lake + per-tenant FTS) and recall's per-tenant index.

Recall's own index (recall.index_build: BM25 postings, node rows, citation rows and the graph as CSR arrays,
base + delta segments per tenant) is brought up to the lake's tables incrementally on every build. The
DuckDB file, for SQL, is rebuilt only when due (its views read the lake's files as they are). Both are
swapped in atomically (build at a temp path, then os.replace or a pointer swap), so a reader sees either
the old index or the new one, never a half-built one; a reader that already holds the old files keeps
reading them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from r2g.lake_graph import (
    content_hash,
    graph_counts,
    graph_files_stamp,
    lake_docs,
    lake_views,
    part_docs,
    read_graph_tables,
    read_lake_table,
    record_graph_counts,
)
from r2g.schema import (
    AUDIT,
    COLD_EDGES,
    COMMUNITIES,
    DOCS,
    EDGES,
    FEEDBACK,
    NODES,
    OPS_APPLIED,
    OPS_REJECTED,
    PROMOTIONS,
    REVIEW_QUEUE,
)
from r2g.tokens import HAN_CLASS
from r2g.tokens import node_doc as node_doc  # re-exported: the document of a node
from raw_store.frames import as_frame
from raw_store.lake import (
    Lake,
    fsync_dir,
    index_is_current,
    local_copies,
    read_lake_state,
    read_table,
    write_bytes_atomic,
    write_index_state,
    write_table,
)
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS, TOMBSTONES, TS
from recall import vectors
from recall.fts_tokens import PYTHON_IGNORE, STEMMER
from recall.postings import STOPWORDS, build_postings, fill_fts, shared_postings
from recall.store import _sql_str, connect, node_docs_table, raw_docs_table, tenant_slug

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import duckdb

# Lake tables the DuckDB file has a view of (recall reads these).
TABLES: dict[str, pa.Schema] = {
    "nodes": NODES,
    "edges": EDGES,
    "raw_chunks": RAW_CHUNKS,
    "messages": MESSAGES,
    "rejects": REJECTS,
    "tombstones": TOMBSTONES,
}

# Lake tables of jobs/ that the DuckDB file carries for SQL (recall reads only TABLES).
SQL_TABLES: dict[str, pa.Schema] = {
    "audit": AUDIT,
    "communities": COMMUNITIES,
    "promotions": PROMOTIONS,
    "review_queue": REVIEW_QUEUE,
    "cold_edges": COLD_EDGES,
    "feedback": FEEDBACK,
    "ops_applied": OPS_APPLIED,
    "ops_rejected": OPS_REJECTED,
}

# The default FTS ignore pattern '(\.|[^a-z])+' would delete every Han character, digit and
# accented or non-Latin letter; documents are already jieba-segmented, so only what is not a
# letter or digit in any script is dropped here.
FTS_IGNORE = PYTHON_IGNORE  # r"(\.|[^\p{L}\p{N}])+": recall.postings tokenizes with it in Python

# The DuckDB file is rebuilt (its full-text indexes refreshed) when the nodes it indexed and the lake's nodes differ by
# more than this share, at a full build (`memctl materialize --full`, the daily schedule), or when its views change;
# else it is left as it is: its views read the lake's files as they are, and recall keeps its own index.
FTS_STALE_SHARE = 0.2

# The DuckDB file's storage format: 1.2 is the first that compresses strings with zstd (DuckDB 1.2+ opens the file).
DUCKDB_STORAGE_VERSION = "v1.2.0"

TENANTS = pa.schema(
    [("tenant", pa.string()), ("slug", pa.string()), ("n_nodes", pa.int64()), ("n_chunks", pa.int64()), ("newest", TS)]
)

# Nodes in these states are out of recall (forgetting removes rows; this guards stale ones).
INACTIVE_STATUS = ("forgotten", "deleted")

# The node columns the DuckDB file's documents, the tenants table and the vectors are made from.
_NODE_FRAME = ("tenant", "id", "type", "status", "title", "text", "keywords", "first_seen", "time_start", "last_seen")


def build_indexes(lake: Lake, extra_tables: Mapping[str, pa.Schema] | None = None, full: bool = False) -> dict:
    """Bring recall's per-tenant index up to the lake's tables, write the tenants table, and rebuild the DuckDB file
    when due.

    The DuckDB file holds a view per lake table over the Parquet files where they lie (r2g.lake_graph.lake_views;
    on object storage, where DuckDB cannot reach the bucket by itself, copies), the `tenants` view, and the
    per-tenant BM25 indexes over node and raw-passage documents. `extra_tables` ({name: schema}) names the
    consolidation tables of jobs/ to expose too. `full`: compact recall's index into new bases and rebuild the
    DuckDB file. Returns stats: {"tables": {name: rows} (when the DuckDB file was rebuilt), "tenants": n,
    "node_docs": n, "raw_docs": n, "graphs": {tenant: {"vertices", "edges", "mode", "reason", "segments",
    "seconds"}}, "rebuilt": bool, "seconds": s}.
    """
    t0 = time.perf_counter()
    lake.index_dir.mkdir(parents=True, exist_ok=True)
    names = [*TABLES, *(extra_tables or {})]
    stamp = graph_files_stamp(lake)  # before the files are read: one changed meanwhile makes the counts unused
    from recall.index_build import EDGE_COLUMNS, NODE_COLUMNS

    # the columns the indexes are made of, not the whole graph (the edges' raw_refs and provenance are half of it)
    node_table, edge_table = read_graph_tables(lake, "consolidated", (*NODE_COLUMNS, *_NODE_FRAME), EDGE_COLUMNS)
    counted = graph_counts(node_table, edge_table) if stamp is not None else None  # kept for a local lake only
    nodes = as_frame(node_table.select(list(_NODE_FRAME)))
    newest = dict(nodes.group_by("tenant").agg(pl.coalesce("time_start", "last_seen", "first_seen").max()).iter_rows())
    nodes = nodes.filter(_active(pl.col("status")))
    docs = NodeDocs(lake, nodes)  # segmented once, for recall's index and the DuckDB file alike
    tables = {
        "nodes": node_table,
        "edges": edge_table,
        "raw_chunks": read_lake_table(lake, "raw_chunks"),
        "messages": read_lake_table(lake, "messages"),
    }
    raw = RawDocs(lake, as_frame(tables["raw_chunks"].select(["tenant", "id", "text", "mime"])))
    # the rows of the DuckDB file's `nodes` and `edges` views are these tables' (read_graph_tables assembles what
    # the views' SQL reads): counted here, not by scanning the views (1.8 s at 100k messages, the overlays' anti
    # joins over every key)
    rows = {"nodes": node_table.num_rows, "edges": edge_table.num_rows}
    del node_table, edge_table  # held by `tables` only: the recall index build frees them once it has used them
    tenants = _tenants(lake, nodes)
    plan = _duckdb_plan(lake, names, nodes, tenants, full)
    # a base segment's postings are the DuckDB file's FTS index's when both are built; kept only then (the digest
    # and the kept arrays cost an append whose DuckDB file is not due)
    with shared_postings() if plan["due"] else nullcontext():
        graphs = _write_recall_indexes(lake, tables, full, docs, raw)
        vectors = _write_vectors(lake, nodes, tenants)
        stats = _write_duckdb(lake, plan, names, nodes, tenants, newest, docs, raw, rows)
    docs.save()
    if stamp is not None and counted is not None:
        record_graph_counts(lake, stamp, counted)  # what `memctl materialize` prints next, without scanning the views
    stats["graphs"] = graphs
    if vectors:
        stats["vectors"] = vectors
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return stats


def ensure_index(lake: Lake) -> bool:
    """A lake on object storage: (re)build this machine's index cache from the lake's Parquet tables when it
    is missing or was built from other tables than the lake's current ones (another machine materialized
    since). Returns True when it built. A local lake's indexes are built with its tables, by materialize."""
    if not lake.remote:
        return False
    state = read_lake_state(lake)
    if state is None or index_is_current(lake, state):
        return False  # tables never built (nothing to index yet), or the cache is theirs already
    build_indexes(lake, SQL_TABLES)
    write_index_state(lake, state)
    return True


class NodeDocs:
    """The nodes' FTS documents, made on demand for the rows an index writes (a delta's changed nodes, a base's
    all, the DuckDB file's all when it is rebuilt) and each made once per build: the partitions' documents and the
    ones earlier builds made (`node_docs.parquet` in the index folder) are reused while a node's content is
    unchanged. The cache keeps the documents holding Han that no partition has (consolidation's rollups and
    topics, merged and edited rows): jieba's segmentation is what costs, other documents take microseconds."""

    def __init__(self, lake: Lake, nodes: pl.DataFrame) -> None:
        self.lake = lake
        self.nodes = nodes.select("tenant", "id", "title", "text", "keywords")
        path = _node_docs_cache_path(lake)
        self.cached = as_frame(read_table(path, DOCS)) if path.exists() else None
        self.made_any = False  # whether this build made a document (then the cache is rewritten)
        self.all: pl.DataFrame | None = None
        self._parts: pl.DataFrame | None = None

    def parts(self) -> pl.DataFrame:
        """The partitions' documents, read once per build."""
        if self._parts is None:
            self._parts = part_docs(self.lake, "node")
        return self._parts

    def of(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Documents (tenant, id, doc) of `rows` (tenant, id, …), which must be among the nodes."""
        if self.all is not None:
            return self.all.join(rows.select("tenant", "id"), on=["tenant", "id"], how="semi")
        docs = lake_docs(
            self.lake,
            self.nodes.join(rows.select("tenant", "id"), on=["tenant", "id"], how="semi"),
            "node",
            self.cached,
            self.parts(),
        )
        made = docs.filter(pl.col("source") == "made")
        if made.height:
            self.made_any = True
            self.cached = (
                made.select(DOCS.names)
                if self.cached is None
                else pl.concat([self.cached, made.select(DOCS.names)], how="vertical_relaxed")
            )
        return docs.select("tenant", "id", "doc")

    def every(self) -> pl.DataFrame:
        if self.all is None:
            self.all = self.of(self.nodes)
        return self.all

    def save(self) -> None:
        """Write the cache when this build made documents: the ones holding Han that no partition has, of the nodes
        as they are now (a build that made none leaves it: a stale entry's content hash matches no node)."""
        if not self.made_any or self.cached is None:
            return
        current = self.nodes.with_columns(content_hash(self.nodes, "node")).select("tenant", "id", "content")
        parts = self.parts().select("tenant", "id", "content")
        keep = (
            self.cached.unique(["tenant", "id", "content"], keep="first")
            .join(current, on=["tenant", "id", "content"], how="semi")
            .join(parts, on=["tenant", "id", "content"], how="anti")
            .filter(pl.col("doc").str.contains(HAN_CLASS))
        )
        write_table(keep.sort("tenant", "id").to_arrow(), _node_docs_cache_path(self.lake), DOCS)


def _node_docs_cache_path(lake: Lake) -> Path:
    return lake.index_dir / "node_docs.parquet"


def _tenants(lake: Lake, nodes: pl.DataFrame) -> list[str]:
    seen = set(nodes.get_column("tenant").drop_nulls().unique().to_list())
    for name in ("raw_chunks", "messages"):
        seen.update(t for t in read_lake_table(lake, name, ["tenant"]).column("tenant").unique().to_pylist() if t)
    return sorted(seen)


class RawDocs:
    """The raw passages' FTS documents (lake_docs "raw": the partitions' `raw_docs`, made only for a chunk no
    partition segmented), for recall's index and the DuckDB file alike; the partitions' are read once per build.
    Passages are chat text: an agent ops file kept whole for its citations is not one."""

    def __init__(self, lake: Lake, chunks: pl.DataFrame) -> None:
        self.lake = lake
        # one row per chunk: the raw store is content-addressed, so two conversations whose chunk bytes are the same
        # share a RawChunk id and the table holds it once per conversation (the same text: one document)
        self.passages = (
            chunks.filter(pl.col("mime").is_null() | pl.col("mime").str.starts_with("text/plain"))
            .select("tenant", "id", "text")
            .unique(subset=["tenant", "id"], keep="first", maintain_order=True)
        )
        self.done = pl.DataFrame(schema={"tenant": pl.String, "id": pl.String, "doc": pl.String})
        self._parts: pl.DataFrame | None = None

    def of(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Documents (tenant, id, doc) of the passages among `rows` (tenant, id, …), each made at most once per
        build: a delta asks only for its changed chunks, a rebuilt DuckDB file for all."""
        keys = rows.select("tenant", "id")
        missing = self.passages.join(keys, on=["tenant", "id"], how="semi").join(
            self.done.select("tenant", "id"), on=["tenant", "id"], how="anti"
        )
        if missing.height:
            if self._parts is None:
                self._parts = part_docs(self.lake, "raw")
            made = lake_docs(self.lake, missing, "raw", parts=self._parts).select("tenant", "id", "doc")
            self.done = pl.concat([self.done, made], how="vertical_relaxed")
        return self.done.join(keys, on=["tenant", "id"], how="semi")


def _active(status: pl.Expr) -> pl.Expr:
    return status.is_null() | ~status.is_in(INACTIVE_STATUS)


def _duckdb_plan(lake: Lake, names: list[str], nodes: pl.DataFrame, tenants: list[str], full: bool) -> dict:
    """Whether the DuckDB file is due for a rebuild — asked for (`full`), missing, its views' files changed, its
    tenants changed, or its FTS indexes' node counts drifted past FTS_STALE_SHARE — with what its state file
    records: {"due", "signature", "counts", "previous"}."""
    counts = dict(nodes.group_by("tenant").len().iter_rows())
    views = lake_views(lake, glob=not lake.remote)
    # what the views read, wherever the lake lies (the same lake in another folder has the same state file)
    signature = hashlib.sha256(
        json.dumps({n: views[n].replace(str(lake.root), "<lake>") for n in names}, sort_keys=True).encode()
    ).hexdigest()
    previous = _read_json(_fts_state_path(lake))
    fts = previous.get("docs", {})
    stale = sum(abs(counts.get(t, 0) - fts.get(t, 0)) for t in set(counts) | set(fts))
    due = (
        full
        or lake.remote
        or not lake.duckdb_path.exists()
        or previous.get("signature") != signature
        or set(fts) != set(tenants)
        or stale > FTS_STALE_SHARE * max(1, sum(counts.values()))
    )
    return {"due": due, "views": views, "signature": signature, "counts": counts, "previous": previous}


def _write_duckdb(
    lake: Lake,
    plan: dict,
    names: list[str],
    nodes: pl.DataFrame,
    tenants: list[str],
    newest: dict,
    docs: NodeDocs,
    raw: RawDocs,
    rows: Mapping[str, int],
) -> dict:
    """The tenants table, then — when `plan` says it is due — the DuckDB file (views + full-text indexes), built in
    memory and copied into a temp file that is swapped in. `rows`: the row counts of tables known already."""
    counts = plan["counts"]
    chunks = raw.passages
    chunk_counts = dict(chunks.group_by("tenant").len().iter_rows())
    table = pa.table(
        {
            "tenant": tenants,
            "slug": [tenant_slug(t) for t in tenants],
            "n_nodes": [counts.get(t, 0) for t in tenants],
            "n_chunks": [chunk_counts.get(t, 0) for t in tenants],
            "newest": [newest.get(t) for t in tenants],
        },
        schema=TENANTS,
    )
    write_table(table, _tenants_path(lake), TENANTS)
    previous, views, due = plan["previous"], plan["views"], plan["due"]
    stats = {
        "tables": {},
        "tenants": len(tenants),
        "node_docs": previous.get("node_docs", 0),
        "raw_docs": previous.get("raw_docs", 0),
        "rebuilt": due,
    }
    if not due:
        return stats
    fd, tmp_name = tempfile.mkstemp(prefix=".memory.", suffix=".duckdb.tmp", dir=lake.index_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.unlink()  # DuckDB refuses to open an empty file as a database
    try:
        con = connect(None, read_only=False)
        try:
            stats.update(_fill(con, lake, names, views, nodes, docs, raw, tenants, rows))
            # Strings compressed with zstd (storage format 1.2, DuckDB's first with it): the documents and the
            # FTS index's ids are most of the file, and DuckDB's own choice for them (FSST) keeps them ~5x larger
            con.execute(f"ATTACH '{_sql_str(str(tmp))}' AS dst (STORAGE_VERSION '{DUCKDB_STORAGE_VERSION}')")
            con.execute("SET force_compression = 'zstd'")
            con.execute("COPY FROM DATABASE memory TO dst")
            con.execute("DETACH dst")
        finally:
            con.close()
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, lake.duckdb_path)
        fsync_dir(lake.index_dir)
    finally:
        for leftover in (tmp, Path(str(tmp) + ".wal")):
            leftover.unlink(missing_ok=True)
    write_bytes_atomic(
        _fts_state_path(lake),
        json.dumps(
            {
                "signature": plan["signature"],
                "docs": counts,
                "node_docs": stats["node_docs"],
                "raw_docs": stats["raw_docs"],
            },
            sort_keys=True,
        ).encode(),
    )
    return stats


def _fill(
    con: duckdb.DuckDBPyConnection,
    lake: Lake,
    names: list[str],
    views: dict[str, str],
    nodes: pl.DataFrame,
    node_docs: NodeDocs,
    raw_docs: RawDocs,
    tenants: list[str],
    rows: Mapping[str, int],
) -> dict:
    """Views of the lake tables (copies on object storage, which DuckDB cannot reach by itself), the tenants view,
    and per tenant the BM25 indexes over node and raw-passage documents. `rows`: the counts of tables known already
    (the others are counted)."""
    if lake.remote:  # for a file the SQL names that _local_copies did not fetch
        con.register_filesystem(lake.root.fs)
    kind = "TABLE" if lake.remote else "VIEW"
    counts = {}
    with _local_copies(lake, [views[n] for n in names]) as local:
        for name in names:
            con.execute(f"CREATE {kind} {name} AS {local(views[name])}")
            if name in rows:
                counts[name] = rows[name]
                continue
            row = con.execute(f"SELECT count(*) FROM {name}").fetchone()
            assert row is not None  # count(*) is one row
            counts[name] = row[0]
    con.execute(f"CREATE {kind} tenants AS SELECT * FROM read_parquet('{_sql_str(str(_tenants_path(lake)))}')")

    docs = nodes.select("tenant", "id", "type").join(node_docs.every(), on=["tenant", "id"])
    raw = raw_docs.of(raw_docs.passages)
    for tenant in tenants:
        slug = tenant_slug(tenant)
        _per_tenant_fts(con, docs.filter(pl.col("tenant") == tenant).sort("id"), node_docs_table(slug))
        _per_tenant_fts(con, raw.filter(pl.col("tenant") == tenant).sort("id"), raw_docs_table(slug))
    return {"tables": counts, "node_docs": docs.height, "raw_docs": raw.height}


@contextmanager
def _local_copies(lake: Lake, sqls: list[str]) -> Iterator[Callable[[str], str]]:
    """A function that points SQL over the lake's files at local copies of them (raw_store.lake.local_copies: on
    object storage the objects the `sqls` name, fetched once each, all at once). A local lake: the SQL as it is."""
    if not lake.remote:
        yield lambda sql: sql
        return
    root = str(lake.root).rstrip("/") + "/"
    files = re.compile(re.escape(root) + r"([^']+)(?=')")
    rels = sorted({m for sql in sqls for m in files.findall(sql)})
    # a missing one stays as it is: DuckDB reports it as it would in the bucket
    with local_copies(lake, [lake.root.joinpath(*rel.split("/")) for rel in rels]) as local:
        yield lambda sql: files.sub(lambda m: str(local(m.group(0))), sql)


def _tenants_path(lake: Lake) -> Path:
    return lake.index_dir / "tenants.parquet"


def _fts_state_path(lake: Lake) -> Path:
    return lake.index_dir / "_fts.json"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def _per_tenant_fts(con: duckdb.DuckDBPyConnection, docs: pl.DataFrame, table: str) -> int:
    """Index one tenant's documents (id, doc, …; in `table`) for BM25; its statistics (IDF, avgdl) stay per tenant.

    DuckDB's create_fts_index runs over the table while it is still empty (the index's schema, macros and stop
    words), and its tables are filled from recall.postings.build_postings' arrays (recall.postings.fill_fts): the
    same tokenizer, stemmer and stop words, built in chunks of bounded memory, and within build_indexes the arrays
    recall's own base segments were built from. create_fts_index over a whole tenant's documents held over ten times
    their text and does not spill (the index step's 11 GB at 1M messages), and did that work a second time."""
    con.register("_src", docs.to_arrow())
    con.execute(f"CREATE TABLE {table} AS SELECT * FROM _src LIMIT 0")
    if docs.height:
        con.execute(
            f"PRAGMA create_fts_index('{table}', 'id', 'doc', stemmer='{STEMMER}', stopwords='{STOPWORDS}', "
            f"ignore='{FTS_IGNORE}', overwrite=1)"
        )
    con.execute(f"INSERT INTO {table} SELECT * FROM _src")
    con.unregister("_src")
    if docs.height:
        postings, _ = build_postings(docs.get_column("doc").to_list(), FTS_IGNORE)
        fill_fts(con, f"fts_main_{table}", docs.get_column("id").to_arrow(), postings)
    return docs.height


def _write_vectors(lake: Lake, nodes: pl.DataFrame, tenants: list[str]) -> dict:
    """Stage B's vector file per tenant for the nodes of vectors.VECTOR_TYPES, by the embedder $MEMCTL_VECTORS
    names (none when unset: vectors.build_spec). With none, or when it cannot run (the static tables missing: a
    warning in the log and "off" in the stats), stale files are removed and recall runs without stage B."""
    spec = vectors.build_spec()
    why = vectors.unavailable(spec) if spec else "no embedder ($MEMCTL_VECTORS unset or off)"
    if why:
        if spec:
            log.warning("recall index: vectors OFF, embedder %r unavailable: %s", spec, why)
        vectors.remove_vectors(lake, keep=set())
        return {"embedder": spec, "off": why}
    if vectors.VECTOR_TYPES is not None:
        nodes = nodes.filter(pl.col("type").is_in(sorted(vectors.VECTOR_TYPES)))
    stats, keep = {}, set()
    for tenant in tenants:
        mine = nodes.filter(pl.col("tenant") == tenant).sort("id")
        slug = tenant_slug(tenant)
        stats[tenant] = vectors.write_vectors(
            lake,
            slug,
            mine.get_column("id").to_list(),
            [vectors.node_text(t, x, k) for t, x, k in mine.select("title", "text", "keywords").iter_rows()],
            spec,
        )
        keep.add(slug)
    vectors.remove_vectors(lake, keep)
    return {"embedder": spec, "nodes": stats}


def _write_recall_indexes(lake: Lake, tables: dict[str, pa.Table], full: bool, docs: NodeDocs, raw: RawDocs) -> dict:
    """Recall's per-tenant index (recall.index_build) from the tables just read (emptied: build_recall_indexes takes
    them out); {tenant: {"vertices", "edges", "mode", "reason", "segments", "seconds"}}. The igraph pickles of
    earlier versions (lake.graph_dir) are removed: nothing reads them."""
    import shutil

    from recall.index_build import build_recall_indexes

    stats = build_recall_indexes(
        lake.index_dir, tables, compact=full, docs=lambda rows, kind: docs.of(rows) if kind == "node" else raw.of(rows)
    )
    shutil.rmtree(lake.graph_dir, ignore_errors=True)
    return {
        t: {
            "vertices": s["nodes"],
            "edges": s["half_edges"] // 2,
            "mode": s["mode"],
            "reason": s["reason"],
            "segments": s["segments"],
            "seconds": s["seconds"],
        }
        for t, s in stats.items()
    }
