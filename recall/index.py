"""Index builders: the DuckDB database (tables + per-tenant FTS) and recall's per-tenant index.

The DuckDB file is rebuilt whole from the lake's Parquet tables; recall's own index
(recall.index_build: BM25 postings, node rows, citation rows and the graph as CSR arrays,
base + delta segments per tenant) is brought up to the tables incrementally. Both are
swapped in atomically (build at a temp path, then os.replace), so a reader sees either
the old index or the new one, never a half-built one; a reader that already holds the
old files keeps reading them.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from r2g.schema import EDGES, NODES
from r2g.tokens import segment_for_fts
from jobs.schema import (AUDIT, COLD_EDGES, COMMUNITIES, FEEDBACK, OPS_APPLIED, OPS_REJECTED, PROMOTIONS,
                         REVIEW_QUEUE)
from raw_store.lake import Lake, fsync_dir, index_is_current, read_lake_state, read_table, write_index_state
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS, TOMBSTONES
from recall import vectors
from recall.store import connect, node_docs_table, raw_docs_table, tenant_slug

# Tables copied into the DuckDB file (copies, not views over Parquet paths: the lake may move).
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
    "audit": AUDIT, "communities": COMMUNITIES, "promotions": PROMOTIONS, "review_queue": REVIEW_QUEUE,
    "cold_edges": COLD_EDGES, "feedback": FEEDBACK, "ops_applied": OPS_APPLIED, "ops_rejected": OPS_REJECTED}

# The default FTS ignore pattern '(\.|[^a-z])+' would delete every Han character, digit and
# accented or non-Latin letter; documents are already jieba-segmented, so only what is not a
# letter or digit in any script is dropped here.
FTS_IGNORE = r"(\.|[^\p{L}\p{N}])+"

# Nodes in these states are out of recall (forgetting removes rows; this guards stale ones).
INACTIVE_STATUS = ("forgotten", "deleted")


def node_doc(title: str | None, text: str | None, keywords: list[str] | None) -> str:
    """The FTS document of a node: segmented title + text + keywords."""
    return segment_for_fts(" ".join([title or "", text or "", " ".join(keywords or [])]))


def build_indexes(lake: Lake, extra_tables: Mapping[str, pa.Schema] | None = None) -> dict:
    """Rebuild lake.duckdb_path and update recall's per-tenant index from the lake's Parquet tables.

    `extra_tables` ({name: schema}) are copied into the DuckDB file too, for SQL (the consolidation
    tables of jobs/; recall itself reads only TABLES). Returns stats: {"tables": {name: rows},
    "tenants": n, "node_docs": n, "raw_docs": n, "graphs": {tenant: {"vertices", "edges"}}, "seconds": s}.
    A missing Parquet file loads as an empty table with its schema.
    """
    t0 = time.perf_counter()
    lake.index_dir.mkdir(parents=True, exist_ok=True)
    tables = {name: read_table(lake.table(name), schema) for name, schema in {**TABLES, **(extra_tables or {})}.items()}
    tenants = _tenants(tables)
    graphs = _write_recall_indexes(lake, tables)
    vectors = _write_vectors(lake, tables["nodes"], tenants)
    stats = _write_duckdb(lake, tables, tenants)
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
        return False   # tables never built (nothing to index yet), or the cache is theirs already
    build_indexes(lake, SQL_TABLES)
    write_index_state(lake, state)
    return True


def _tenants(tables: dict[str, pa.Table]) -> list[str]:
    seen: set[str] = set()
    for name in ("nodes", "raw_chunks", "messages", "edges"):
        seen.update(t for t in tables[name].column("tenant").unique().to_pylist() if t)
    return sorted(seen)


def _active_nodes(nodes: pa.Table) -> pa.Table:
    status = nodes.column("status")
    keep = pc.or_(pc.is_null(status), pc.invert(pc.is_in(status, pa.array(INACTIVE_STATUS))))
    return nodes.filter(keep)


def _write_duckdb(lake: Lake, tables: dict[str, pa.Table], tenants: list[str]) -> dict:
    fd, tmp_name = tempfile.mkstemp(prefix=".memory.", suffix=".duckdb.tmp", dir=lake.index_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.unlink()  # DuckDB refuses to open an empty file as a database
    try:
        con = connect(tmp, read_only=False)
        try:
            stats = _fill(con, tables, tenants)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, lake.duckdb_path)
        fsync_dir(lake.index_dir)
    finally:
        for leftover in (tmp, Path(str(tmp) + ".wal")):
            leftover.unlink(missing_ok=True)
    return stats


def _fill(con, tables: dict[str, pa.Table], tenants: list[str]) -> dict:
    counts = {}
    for name, table in tables.items():
        con.register("_src", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _src")
        con.unregister("_src")
        counts[name] = table.num_rows

    nodes = _active_nodes(tables["nodes"]).select(["tenant", "id", "type", "title", "text", "keywords"])
    docs = pa.table({
        "tenant": nodes.column("tenant"),
        "id": nodes.column("id"),
        "type": nodes.column("type"),
        "doc": pa.array([node_doc(t, x, k) for t, x, k in zip(nodes.column("title").to_pylist(),
                                                             nodes.column("text").to_pylist(),
                                                             nodes.column("keywords").to_pylist())], pa.string()),
    })
    con.register("_src", docs)
    con.execute("CREATE TABLE node_docs AS SELECT * FROM _src")
    con.unregister("_src")

    chunks = tables["raw_chunks"]
    # passages are chat text; an agent ops file kept whole for its citations is not a passage to search
    mime = chunks.column("mime")
    chunks = chunks.filter(pc.or_kleene(pc.is_null(mime), pc.starts_with(mime, "text/plain")))
    raw = pa.table({
        "tenant": chunks.column("tenant"),
        "id": chunks.column("id"),
        "doc": pa.array([segment_for_fts(t or "") for t in chunks.column("text").to_pylist()], pa.string()),
    })
    con.register("_src", raw)
    con.execute("CREATE TABLE raw_docs AS SELECT * FROM _src")
    con.unregister("_src")

    con.execute("CREATE TABLE tenants(tenant VARCHAR PRIMARY KEY, slug VARCHAR, n_nodes BIGINT, "
                "n_chunks BIGINT, newest TIMESTAMP)")
    for tenant in tenants:
        slug = tenant_slug(tenant)
        n_nodes = _per_tenant_fts(con, "node_docs", node_docs_table(slug), tenant, "tenant, id, type, doc")
        n_chunks = _per_tenant_fts(con, "raw_docs", raw_docs_table(slug), tenant, "tenant, id, doc")
        newest = con.execute(
            "SELECT max(coalesce(time_start, last_seen, first_seen)) FROM nodes WHERE tenant = ?", [tenant]
        ).fetchone()[0]
        con.execute("INSERT INTO tenants VALUES (?, ?, ?, ?, ?)", [tenant, slug, n_nodes, n_chunks, newest])
    return {"tables": counts, "tenants": len(tenants), "node_docs": docs.num_rows, "raw_docs": raw.num_rows}


def _per_tenant_fts(con, source: str, table: str, tenant: str, columns: str) -> int:
    """Copy one tenant's docs into `table` and index it; BM25 statistics (IDF, avgdl) stay per tenant."""
    con.execute(f"CREATE TABLE {table} AS SELECT {columns} FROM {source} WHERE tenant = ? ORDER BY id", [tenant])
    n = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    if n:
        con.execute(f"PRAGMA create_fts_index('{table}', 'id', 'doc', stemmer='porter', stopwords='english', "
                    f"ignore='{FTS_IGNORE}', overwrite=1)")
    return n


def _write_vectors(lake: Lake, nodes: pa.Table, tenants: list[str]) -> dict:
    """Stage B's vector file per tenant when $MEMCTL_VECTORS names an embedder (else stale files are removed)."""
    spec = vectors.embedder_spec()
    if not spec:
        vectors.remove_vectors(lake, keep=set())
        return {}
    rows = _active_nodes(nodes).select(["tenant", "id", "title", "text", "keywords"]).to_pylist()
    by_tenant: dict[str, list[dict]] = {t: [] for t in tenants}
    for r in rows:
        by_tenant.setdefault(r["tenant"], []).append(r)
    stats, keep = {}, set()
    for tenant in tenants:
        mine = sorted(by_tenant[tenant], key=lambda r: r["id"])
        slug = tenant_slug(tenant)
        stats[tenant] = vectors.write_vectors(lake, slug, [r["id"] for r in mine],
                                              [vectors.node_text(r["title"], r["text"], r["keywords"]) for r in mine],
                                              spec)
        keep.add(slug)
    vectors.remove_vectors(lake, keep)
    return {"embedder": spec, "nodes": stats}


def _write_recall_indexes(lake: Lake, tables: dict[str, pa.Table]) -> dict:
    """Recall's per-tenant index (recall.index_build), from the tables just read; {tenant: {"vertices", "edges",
    "mode", …}}. The igraph pickles of earlier versions (lake.graph_dir) are removed: nothing reads them now."""
    import shutil

    from recall.index_build import build_recall_indexes

    stats = build_recall_indexes(lake.index_dir, {n: tables[n] for n in ("nodes", "edges", "raw_chunks", "messages")})
    shutil.rmtree(lake.graph_dir, ignore_errors=True)
    return {t: {"vertices": s["nodes"], "edges": s["half_edges"] // 2, "mode": s["mode"], "seconds": s["seconds"]}
            for t, s in stats.items()}
