"""The SQL read layer of recall: DuckDB connections, tenant-scoped SQL, the index file cache.

SQL reads go through `TenantReader.select`, which always filters on `tenant = ?`, so no
node, edge, chunk or message of another tenant can come back. Recall's hot path reads its
own per-tenant index instead (recall.tenant_index: one folder per tenant, so an expansion
can only walk the tenant's own nodes); the read API and `memctl sql` read DuckDB.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from raw_store.lake import Lake

if TYPE_CHECKING:  # imported where a connection is made: recall's own index needs none (~90 ms of a cold CLI)
    import duckdb

T = TypeVar("T")

# Known extensions must never be fetched from the network (there is none here):
# the fts extension is loaded from the duckdb-ext-fts wheel's file instead.
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}

_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")
_CHECKED: set[str] = set()  # extension files this process has loaded with DuckDB's signature check (see connect)

# Many ids as ONE string parameter, split in SQL: a Python list parameter costs DuckDB's binding ~80 µs per
# element (it probes each for pandas types), 10x the query itself for a few hundred ids.
IDS = "unnest(string_split(?, chr(31)))"


def id_param(ids: Sequence[str]) -> str:
    """The parameter for IDS: the ids joined by the unit separator (ids are hashes: never hold one)."""
    return "\x1f".join(ids)


class IndexNotBuilt(RuntimeError):
    """The lake has no DuckDB index yet (run build_indexes / materialize the index asset)."""


class IndexFormatOutdated(IndexNotBuilt):
    """The tenant's recall index was written in another format than this code reads (an upgrade of memctl before
    the next `memctl materialize` rebuilds it)."""


def fts_extension_path(version: str | None = None) -> str:
    """Path of fts.duckdb_extension inside the installed duckdb_ext package.

    Raises ImportError when the duckdb-ext-fts wheel for this DuckDB version is not installed.
    """
    import duckdb

    version = version or duckdb.__version__
    spec = importlib.util.find_spec("duckdb_ext")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        hits = sorted(Path(root).glob(f"extensions/v{version}/*/fts.duckdb_extension"))
        if hits:
            return str(hits[0])
    raise ImportError(f"no fts.duckdb_extension for duckdb {version}; pip install 'duckdb=={version}' duckdb-ext-fts")


def lake_sql(lake: Lake) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per lake table (r2g.lake_graph.lake_views) over the files where they lie:
    local files, or on object storage through the lake's fsspec file system registered in DuckDB (no httpfs
    extension: it cannot be downloaded here). Every tenant's rows: for operators, not for a tenant (see
    tenant_sql). The views name the files there are when it opens; reopen after a materialization."""
    import duckdb

    from r2g.lake_graph import lake_views
    from raw_store.lake import listed

    con = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
    if lake.remote:
        lake = listed(lake)  # one listing answers the views' and DuckDB's questions about which files, how big
        con.register_filesystem(lake.root.fs)
    for name, sql in lake_views(lake).items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    return con


def connect(path: Path | str | None, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the fts extension loaded; `path=None` is an in-memory database.

    Read-only connections attach the file to a private in-memory database: DuckDB
    shares one instance per path within a process, so a plain `connect(path)` made
    after an index swap would silently reuse the old file while any old
    connection is still open. Attaching gives each reader the file that is at
    `path` right now, and a reader holding the old file keeps reading it.
    """
    import duckdb

    ext = fts_extension_path()
    if path is None or not read_only:
        # memctl's own connections (they run no user SQL): once DuckDB has checked the extension file's signature
        # in this process, the next loads of that file skip the check (~0.1 s each: a hash of its 24 MB)
        trust = {"allow_unsigned_extensions": True} if ext in _CHECKED else {}
        con = duckdb.connect(str(path) if path is not None else ":memory:", config={**DUCKDB_CONFIG, **trust})
        con.execute(f"LOAD '{ext}'")
        _CHECKED.add(ext)
        return con
    path = Path(path)
    if not path.exists():
        raise IndexNotBuilt(f"no DuckDB index at {path}")
    con = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{_sql_str(str(path))}' AS lake (READ_ONLY)")
    con.execute("USE lake")
    return con


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def tenant_slug(tenant: str) -> str:
    """A stable SQL-identifier- and file-safe name for a tenant (readable prefix + hash)."""
    readable = re.sub(r"[^a-z0-9]+", "_", tenant.lower()).strip("_")[:32]
    digest = hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:10]
    return f"t_{readable}_{digest}" if readable else f"t_{digest}"


def node_docs_table(slug: str) -> str:
    return f"node_docs_{slug}"


def raw_docs_table(slug: str) -> str:
    return f"raw_docs_{slug}"


@dataclass(frozen=True)
class TenantInfo:
    tenant: str
    slug: str
    n_nodes: int
    n_chunks: int
    newest: datetime | None  # newest node time: recency is measured from here, not the wall clock


class TenantReader:
    """Tenant-scoped read access to the index: the one function that runs recall's SQL.

    Contract: every query built here carries `tenant = ?` bound to this reader's
    tenant; table and column names come from code, never from user input.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, tenant: str) -> None:
        if not tenant:
            raise ValueError("tenant is required")
        self.con = con
        self.tenant = tenant
        self._lock = threading.Lock()

    def select(
        self,
        table: str,
        columns: str,
        where: str = "TRUE",
        params: Sequence[Any] = (),
        *,
        column_params: Sequence[Any] = (),
        order: str = "",
        limit: int | None = None,
    ) -> list[tuple]:
        """Rows of `table` for this tenant: SELECT columns FROM table WHERE tenant = ? AND (where)."""
        if not _IDENT.match(table):
            raise ValueError(f"bad table name {table!r}")
        sql = f"SELECT {columns} FROM {table} WHERE tenant = ? AND ({where})"
        if order:
            sql += f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        # A DuckDB connection is not safe for concurrent use from several threads.
        with self._lock:
            return self.con.execute(sql, [*column_params, self.tenant, *params]).fetchall()

    def scoped(
        self, body: str, params: Sequence[Any] = (), *, tables: Sequence[str] = ("nodes", "edges")
    ) -> list[tuple]:
        """Rows of `body`, a SELECT in which each name of `tables` means this tenant's rows of that table.

        The statement run is `WITH t AS (SELECT * FROM t WHERE tenant = ?), … body`: the
        CTEs shadow the tables, so joins, subqueries and window functions in `body`
        see no other tenant's rows. `body` may open with its own `WITH` (not `WITH
        RECURSIVE`); its CTEs follow the tenant ones. `params` bind the `?` of `body`.
        """
        for table in tables:
            if not _IDENT.match(table):
                raise ValueError(f"bad table name {table!r}")
        ctes = ", ".join(f"{t} AS (SELECT * FROM {t} WHERE tenant = ?)" for t in tables)
        body = body.strip()
        head = re.match(r"(?i)with\s+", body)
        if head and re.match(r"(?i)recursive\b", body[head.end() :]):
            raise ValueError("scoped() does not take WITH RECURSIVE")
        sql = f"WITH {ctes}, {body[head.end() :]}" if head else f"WITH {ctes} {body}"
        with self._lock:
            return self.con.execute(sql, [*([self.tenant] * len(tables)), *params]).fetchall()

    def close(self) -> None:
        self.con.close()

    def info(self) -> TenantInfo | None:
        """The tenant's index entry, or None when the index holds nothing of this tenant."""
        rows = self.select("tenants", "tenant, slug, n_nodes, n_chunks, newest")
        return TenantInfo(*rows[0]) if rows else None

    def node_bm25(self, info: TenantInfo, query: str, limit: int) -> list[tuple[str, float]]:
        """(node id, BM25 score) best first from the tenant's node FTS index."""
        return self._bm25(node_docs_table(info.slug), info.n_nodes, query, limit)

    def raw_bm25(self, info: TenantInfo, query: str, limit: int) -> list[tuple[str, float]]:
        """(raw_id, BM25 score) best first from the tenant's raw-passage FTS index."""
        return self._bm25(raw_docs_table(info.slug), info.n_chunks, query, limit)

    def _bm25(self, table: str, n_docs: int, query: str, limit: int) -> list[tuple[str, float]]:
        """Top `limit` (id, BM25) of `table`'s FTS index, best first (equal scores, to 9 decimals, by id):
        DuckDB's match_bm25 formula (k1 1.2, b 0.75, same tokenizer and stemmer) evaluated once over the
        query terms' postings. The match_bm25 macro runs that whole computation again for every row it is
        called on — 2.5–4x slower at 100k docs."""
        if not n_docs or not query.strip():
            return []
        if not _IDENT.match(table):
            raise ValueError(f"bad table name {table!r}")
        fts = f"fts_main_{table}"
        sql = f"""
            WITH tokens AS (SELECT DISTINCT stem(unnest({fts}.tokenize(?)), 'porter') AS t),
            qterms AS (SELECT terms.termid, terms.docid FROM {fts}.terms AS terms
                       JOIN {fts}.dict AS dict ON dict.termid = terms.termid JOIN tokens ON dict.term = tokens.t),
            term_tf AS (SELECT termid, docid, count(*) AS tf FROM qterms GROUP BY docid, termid),
            scores AS (
                SELECT term_tf.docid, sum(
                    log((((SELECT num_docs FROM {fts}.stats) - df) + 0.5) / (df + 0.5) + 1)
                    * ((tf * (1.2 + 1)) / (tf + 1.2 * ((1 - 0.75) + 0.75 * (len / (SELECT avgdl FROM {fts}.stats))))))
                    AS score
                FROM term_tf JOIN {fts}.docs AS docs ON docs.docid = term_tf.docid
                JOIN {fts}.dict AS dict ON dict.termid = term_tf.termid
                GROUP BY term_tf.docid)
            SELECT docs.name AS id, scores.score FROM scores
            JOIN {fts}.docs AS docs ON docs.docid = scores.docid
            JOIN {table} AS t ON t.id = docs.name
            WHERE t.tenant = ?
            ORDER BY round(scores.score, 9) DESC, id LIMIT {int(limit)}"""
        with self._lock:
            return self.con.execute(sql, [query, self.tenant]).fetchall()

    def nodes(self, ids: Sequence[str]) -> dict[str, dict]:
        """Node rows by id (only this tenant's; unknown ids are absent)."""
        if not ids:
            return {}
        cols = [
            "id",
            "type",
            "subtype",
            "title",
            "text",
            "time_start",
            "time_end",
            "first_seen",
            "last_seen",
            "raw_refs",
            "conv_id",
            "msg_id",
            "speaker",
            "status",
            "importance",
            "frequency",
            "sentiment",
        ]
        rows = self.select("nodes", ", ".join(cols), f"id IN (SELECT {IDS})", [id_param(ids)])
        return {r[0]: dict(zip(cols, r)) for r in rows}

    def chunks(self, raw_ids: Sequence[str]) -> dict[str, dict]:
        """raw_chunks rows (id, path, sha256, conv_id, ts) by raw_id, this tenant's only."""
        if not raw_ids:
            return {}
        cols = ["id", "path", "sha256", "conv_id", "ts"]
        rows = self.select("raw_chunks", ", ".join(cols), f"id IN (SELECT {IDS})", [id_param(raw_ids)])
        return {r[0]: dict(zip(cols, r)) for r in rows}

    def messages_in(self, raw_ids: Sequence[str]) -> list[dict]:
        """Messages with a piece in any of the chunks `raw_ids` (conv_id, msg_id, speaker, ts, text, raw_refs)."""
        if not raw_ids:
            return []
        cols = ["conv_id", "msg_id", "seq", "speaker", "ts", "text", "raw_id", "offset", "length", "raw_refs"]
        rows = self.select(
            "messages",
            ", ".join(f'"{c}"' for c in cols),
            # a message split over chunks is found by its other pieces too; the length test first keeps the
            # list lambda off the (many) one-piece messages
            f"raw_id IN (SELECT {IDS}) OR (len(raw_refs) > 1 AND "
            "list_has_any(string_split(?, chr(31)), list_transform(raw_refs, lambda r: r.raw_id)))",
            [id_param(raw_ids), id_param(raw_ids)],
            order="conv_id, seq",
        )
        return [dict(zip(cols, r)) for r in rows]


class FileCache:
    """Objects loaded from index files, kept until their file is replaced (same path, new inode or mtime):
    one loaded version per file, shared by the threads of a serving process."""

    def __init__(self) -> None:
        self._items: dict[Path, tuple[int, int, object]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, load: Callable[[Path], T]) -> T | None:
        """`load(path)`, or the object loaded from this version of the file before; None when it does not exist."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        with self._lock:
            hit = self._items.get(path)
            if hit and hit[:2] == (st.st_ino, st.st_mtime_ns):
                return cast(T, hit[2])  # what `load` made of this path (each path has one loader)
        obj = load(path)
        with self._lock:
            self._items[path] = (st.st_ino, st.st_mtime_ns, obj)
        return obj


def tenant_sql(lake: Lake, tenant: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding only `tenant`'s rows of every tenant-keyed table (nodes, edges, messages,
    raw_chunks, rejects, tombstones, tenants, node_docs, raw_docs), for ad-hoc SQL by or for one tenant.

    The rows are copied out of the index and the index detached; then file access and extension loading
    are switched off and the configuration locked, so no statement can ATTACH the index again or read
    the lake's Parquet: other tenants' data is unreachable, not just filtered. (Memory: one tenant's tables.)
    """
    import duckdb

    if not tenant:
        raise ValueError("tenant is required")
    path = lake.duckdb_path
    if not path.exists():
        raise IndexNotBuilt(f"no DuckDB index at {path}")
    con = duckdb.connect(":memory:", config=DUCKDB_CONFIG)
    con.execute(f"ATTACH '{_sql_str(str(path))}' AS src (READ_ONLY)")
    slugs = {r[0] for r in con.execute("SELECT slug FROM src.main.tenants").fetchall()}
    tables = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE database_name = 'src' AND schema_name = 'main' "
            "AND column_name = 'tenant' ORDER BY 1"
        ).fetchall()
    ]
    for table in tables:
        # per-tenant FTS document tables (…_<slug>) are the index's internals, not the lake's tables
        if not _IDENT.match(table) or any(table.endswith("_" + slug) for slug in slugs):
            continue
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM src.main.{table} WHERE tenant = ?", [tenant])
    con.execute("DETACH src")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


_CONS: dict[Path, tuple[int, int, duckdb.DuckDBPyConnection]] = {}
_CONS_LOCK = threading.Lock()


def tenant_reader(lake: Lake, tenant: str) -> TenantReader:
    """A TenantReader on its own cursor of the lake's current index (raises IndexNotBuilt, ValueError)."""
    if not tenant:
        raise ValueError("tenant is required")
    cur = open_index(lake).cursor()
    # The attached lake is the default catalog per connection, not per database.
    cur.execute("USE lake")
    return TenantReader(cur, tenant)


def open_index(lake: Lake) -> duckdb.DuckDBPyConnection:
    """A shared read-only connection to the lake's current DuckDB index.

    Reopened when the file at lake.duckdb_path changes (a rebuild swapped a new one
    in); the old connection is left open for whoever still holds it.
    Raises IndexNotBuilt when there is no index file.
    """
    path = lake.duckdb_path
    try:
        st = path.stat()
    except FileNotFoundError:
        raise IndexNotBuilt(f"no DuckDB index at {path}; build it first (recall.index.build_indexes)") from None
    with _CONS_LOCK:
        hit = _CONS.get(path)
        if hit and hit[0] == st.st_ino and hit[1] == st.st_mtime_ns:
            return hit[2]
        con = connect(path, read_only=True)
        _CONS[path] = (st.st_ino, st.st_mtime_ns, con)
        return con
