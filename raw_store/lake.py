"""Where things live under $MEMCTL_DATA, and the one way tables are written.

    $MEMCTL_DATA/                 (default ./data)
      inbox/<tenant>/<file>       chat logs dropped by users
      raw/<tenant>/YYYY/MM/DD/<sha[:2]>/raw_<sha>.blob.zst   the CAS
      lake/<table>.parquet        lake-wide tables (raw_chunks, messages, nodes, edges, rejects, …)
      lake/parts/<part>/…         per-inbox-file partition outputs
      lake/memory.duckdb          SQL + FTS index (rebuilt, swapped in atomically)
      lake/graph/<tenant>.pkl     igraph index per tenant
      cache/nlp.sqlite            NLP annotations keyed by text hash + pipeline version
      dagster_home/               Dagster instance (runs show in the lineage UI)

$MEMCTL_DATA may be an fsspec URL (`s3://bucket/prefix`, options in $MEMCTL_STORAGE_OPTIONS as JSON).
The durable lake — inbox, raw store, Parquet tables, partitions, forget requests, feedback — then
lives in object storage, addressed as a `upath.UPath`; what must be a local file (the DuckDB and
igraph indexes, the NLP cache, the Dagster instance) lives in a local cache folder, `Lake.local`
($MEMCTL_CACHE_DIR/<lake hash>, default ~/.cache/memctl/<lake hash>) and is rebuilt from the
tables when it is missing or older than them.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

# the inbox layout lives below the lake and the readers; re-exported here, the lake's paths
from raw_store.routing import as_path as as_path
from raw_store.routing import is_remote as is_remote
from raw_store.routing import source_file_for as source_file_for
from raw_store.routing import tenant_for as tenant_for


def data_root() -> Path:
    """The data directory: $MEMCTL_DATA, else ./data."""
    return lake_root(os.environ.get("MEMCTL_DATA") or "data")


def lake_root(location: str | os.PathLike) -> Any:
    """The data directory at `location`: a local `Path`, or for a URL with another scheme than
    file:// (s3://bucket/prefix, gs://…, memory://…) an fsspec-backed `upath.UPath` carrying the
    $MEMCTL_STORAGE_OPTIONS (JSON, e.g. {"endpoint_url": …}; credentials come from the usual
    environment of the backend, e.g. AWS_*)."""
    s = str(location)
    if "://" in s and not s.startswith("file://"):
        from upath import UPath

        # No listing cache: the inbox sensor and long-lived readers must see objects other machines wrote.
        return UPath(s.rstrip("/"), **{"use_listings_cache": False, **storage_options()})
    return Path(s.removeprefix("file://")).resolve()


def storage_options() -> dict:
    raw = os.environ.get("MEMCTL_STORAGE_OPTIONS", "").strip()
    try:
        opts = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise ValueError(f"$MEMCTL_STORAGE_OPTIONS is not JSON: {exc}") from exc
    if not isinstance(opts, dict):
        raise ValueError("$MEMCTL_STORAGE_OPTIONS must be a JSON object")
    return opts


def local_cache_for(root: Any) -> Path:
    """The local folder of a lake on object storage: $MEMCTL_CACHE_DIR (else ~/.cache/memctl) / lake hash."""
    base = os.environ.get("MEMCTL_CACHE_DIR", "").strip()
    base_dir = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memctl"
    return (base_dir / ("lake_" + hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16])).resolve()


@dataclass(frozen=True)
class Lake:
    root: Any  # Path, or a UPath on object storage

    @classmethod
    def from_env(cls) -> Lake:
        return cls(data_root())

    @classmethod
    def at(cls, location: str | os.PathLike) -> Lake:
        return cls(lake_root(location))

    @property
    def remote(self) -> bool:
        return is_remote(self.root)

    @property
    def local(self) -> Path:
        """Where this machine keeps the lake's local files: the root itself, or its cache folder when remote."""
        return local_cache_for(self.root) if self.remote else self.root

    @property
    def inbox(self) -> Any:
        return self.root / "inbox"

    @property
    def raw(self) -> Any:
        return self.root / "raw"

    @property
    def lake(self) -> Any:
        return self.root / "lake"

    @property
    def parts(self) -> Any:
        return self.lake / "parts"

    @property
    def index_dir(self) -> Path:
        """The indexes' folder (always local: DuckDB and igraph open files): lake/, or the cache's lake/."""
        return self.local / "lake" if self.remote else self.lake

    @property
    def duckdb_path(self) -> Path:
        return self.index_dir / "memory.duckdb"

    @property
    def graph_dir(self) -> Path:
        return self.index_dir / "graph"

    @property
    def cache(self) -> Path:
        return self.local / "cache"

    @property
    def feedback(self) -> Any:
        return self.root / "feedback"

    @property
    def dagster_home(self) -> Path:
        return self.local / "dagster_home"

    def table(self, name: str) -> Any:
        return self.lake / f"{name}.parquet"

    def part_dir(self, partition_key: str) -> Any:
        return self.parts / part_id(partition_key)


def part_id(partition_key: str) -> str:
    """A filesystem-safe, stable folder name for an inbox-file partition."""
    return "p_" + hashlib.sha256(partition_key.encode("utf-8")).hexdigest()[:20]


def fsync_dir(path: Path) -> None:
    if is_remote(path):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> bool:
    """Write `data` to `path` via temp + fsync + rename. Returns False (and leaves
    the file, and its mtime, untouched) when the file already holds exactly these bytes.
    On object storage one PUT replaces an object whole (never partly), so it is the rename."""
    if is_remote(path):
        # one GET: asking for the size first was a HEAD, and for a new object (most writes) s3fs then lists the
        # prefix to tell a missing object from a folder; an object rewritten with other bytes is read whole, at
        # most the size of the upload that follows
        try:
            if read_object(path) == data:
                return False
        except FileNotFoundError:
            pass
        path.write_bytes(data)
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)
    return True


def table_bytes(table: pa.Table, schema: pa.Schema) -> bytes:
    """Serialise a table to Parquet bytes deterministically (same rows → same bytes)."""
    import pyarrow.parquet as pq  # not at the top: `memctl recall` reads no Parquet (see read_parquet)

    table = conform(table, schema)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", write_statistics=True, store_schema=True)
    return buf.getvalue()


def write_table(table: pa.Table, path: Path, schema: pa.Schema) -> bool:
    """Atomically write `table` (cast to `schema`) as Parquet; no-op if bytes are unchanged."""
    return write_bytes_atomic(path, table_bytes(table, schema))


def read_table(path: Path, schema: pa.Schema) -> pa.Table:
    """Read a Parquet table written with `schema`; a missing file reads as empty."""
    try:
        return conform(read_parquet(path), schema)
    except FileNotFoundError:
        return schema.empty_table()


def read_parquet(path: Any, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file as it is (local or on object storage: fetched whole, one GET); FileNotFoundError if none."""
    import pyarrow.parquet as pq  # loads Arrow's dataset, Acero and S3 libraries: 0.1 s of a cold `memctl recall`

    if is_remote(path):
        return pq.read_table(pa.BufferReader(read_object(path)), columns=columns)
    if not Path(path).exists():
        raise FileNotFoundError(path)
    # one file: ParquetFile, not read_table's dataset discovery (~20 % of reading a lake's many small parts)
    return pq.ParquetFile(path).read(columns=columns)


def read_object(path: Any) -> bytes:
    """The bytes of an object on object storage in one GET (UPath.read_bytes asks for its size first: a HEAD and
    a GET, each a round trip); FileNotFoundError if there is none."""
    return bytes(path.fs.cat_file(path.path, **_one_get(path.fs)))


def file_bytes(path: Any) -> bytes:
    """The bytes of a file of the lake or its inbox: on object storage one GET (read_object), else the local
    file's. UPath.read_bytes/read_text/open first ask for the object's size (a HEAD), and a miss lists the prefix
    too; FileNotFoundError if there is none."""
    return read_object(path) if is_remote(path) else Path(path).read_bytes()


def read_objects(paths: Sequence[Any]) -> dict[str, bytes]:
    """{str(path): bytes} of objects on one file system, fetched concurrently, one GET each; missing ones left out."""
    if not paths:
        return {}
    fs = paths[0].fs
    by_key = {p.path: str(p) for p in paths}
    got = fs.cat(list(by_key), on_error="omit", **_one_get(fs))
    return {by_key[k]: bytes(v) for k, v in got.items() if not isinstance(v, BaseException)}


def _one_get(fs: Any) -> dict:
    """cat_file's keywords for a whole object in one request. s3fs first asks for the object's size (a HEAD) to
    split one over its block size (50 MB) into concurrent ranged GETs; the lake's objects are parts and tables of
    a few MB, and the HEADs were a third of a small lake's requests."""
    cat_file = getattr(fs, "_cat_file", None)  # async file systems only
    return {"max_concurrency": 1} if cat_file and "max_concurrency" in inspect.signature(cat_file).parameters else {}


@contextmanager
def local_copies(lake: Lake, paths: Sequence[Any]) -> Iterator[Callable[[Any], Any]]:
    """A function from a lake path to a local copy of it, while the context lasts: on object storage the objects
    of `paths` are fetched once each, all at once, into a temp folder in the lake's local cache (DuckDB reading the
    bucket through fsspec asked for each file's size, footer and column chunks apart, a round trip each); a path
    not among them, or missing, maps to itself. A local lake: every path maps to itself."""
    if not lake.remote or not paths:
        yield lambda path: path
        return
    lake.index_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".lake.", dir=lake.index_dir) as tmp:
        root = str(lake.root).rstrip("/") + "/"
        local: dict[str, Path] = {}
        for name, data in read_objects(list(paths)).items():
            local[name] = Path(tmp, *name[len(root) :].split("/")) if name.startswith(root) else Path(tmp, name)
            local[name].parent.mkdir(parents=True, exist_ok=True)
            local[name].write_bytes(data)
        yield lambda path: local.get(str(path), path)


def listed(lake: Lake) -> Lake:
    """The same lake seen through a file system of its own that lists the lake's tables (`lake/`) once, in a few
    LIST requests, and answers every later "is it there, how big" from that listing: a reader's snapshot of the
    tables, for as long as it holds this Lake. DuckDB reading Parquet in a bucket through fsspec asks each object's
    size before each read, a HEAD a file a query: a count over two tables of the three-file sample lake was 628
    HEADs of its 668 requests. A local lake is itself. (The lake's own file system keeps no listing cache: the
    inbox sensor and long-lived readers must see what other machines wrote.)"""
    if not lake.remote:
        return lake
    from upath import UPath

    options = {**lake.root.storage_options, "use_listings_cache": True, "listings_expiry_time": None}
    root = UPath(str(lake.root), **options, skip_instance_cache=True)  # its own instance: the cache is this Lake's
    root.fs.find((root / "lake").path)  # fills the listing cache of every folder under it
    return Lake(root)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast `table`'s columns to `schema` (missing nullable columns become nulls)."""
    cols = []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            # a cast to the same type still rebuilds nested columns (raw_refs): skip it
            cols.append(col if col.type == field.type else col.cast(field.type))
        else:
            cols.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(cols, schema=schema)


# --------------------------------------------------------------------------- inbox and partitions


@dataclass(frozen=True)
class InboxFile:
    key: str  # partition key: the path relative to the inbox (posix)
    path: Path
    sha256: str
    size: int


def file_sha256(path: Path) -> str:
    if is_remote(path):
        return hashlib.sha256(read_object(path)).hexdigest()  # one GET (the file is read whole to ingest it)
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Dagster refuses these substrings in partition keys; such files get a hashed key.
_BAD_KEY_PARTS = ("...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0")


def partition_key_for(rel: str) -> str:
    if any(s in rel for s in _BAD_KEY_PARTS):
        return "file-" + hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return rel


def scan_inbox(inbox: Path) -> dict[str, InboxFile]:
    """Every regular file under the inbox (hidden files and temp files skipped), keyed by partition key."""
    out: dict[str, InboxFile] = {}
    for rel, path, size in files_under(inbox):
        if any(p.startswith(".") for p in rel.split("/")) or rel.endswith((".tmp", ".part")):
            continue
        key = partition_key_for(rel)
        out[key] = InboxFile(key=key, path=path, sha256=file_sha256(path), size=size)
    return out


def files_under(folder: Any) -> list[tuple[str, Any, int]]:
    """(posix path relative to `folder`, path, size) of every regular file below it, sorted; [] if no folder.
    On object storage one listing call (no request per object)."""
    if is_remote(folder):
        try:
            found = folder.fs.find(folder.path, detail=True)
        except FileNotFoundError:
            return []
        base = folder.path.rstrip("/") + "/"
        out = [
            (name[len(base) :], folder.joinpath(*name[len(base) :].split("/")), int(info.get("size") or 0))
            for name, info in found.items()
            if info.get("type") == "file" and name.startswith(base)
        ]
        return sorted(out, key=lambda t: t[0])
    if not folder.is_dir():
        return []
    return [(p.relative_to(folder).as_posix(), p, p.stat().st_size) for p in sorted(folder.rglob("*")) if p.is_file()]


def resolve_partition(inbox: Path, key: str) -> InboxFile | None:
    """The inbox file behind a partition key (None when it has gone)."""
    direct = inbox / key
    if direct.is_file() and partition_key_for(key) == key:
        return InboxFile(key=key, path=direct, sha256=file_sha256(direct), size=direct.stat().st_size)
    return scan_inbox(inbox).get(key)


PART_MANIFEST = "manifest.json"


def read_manifest(part_dir: Path) -> dict:
    """A partition's manifest (what was last ingested from which source bytes), {} if none."""
    try:
        return json.loads(file_bytes(part_dir / PART_MANIFEST).decode("utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def write_manifest(part_dir: Path, manifest: dict) -> None:
    write_bytes_atomic(
        part_dir / PART_MANIFEST, json.dumps(manifest, sort_keys=True, ensure_ascii=False, indent=1).encode("utf-8")
    )


def part_dirs(lake: Lake) -> list[Path]:
    """Partition folders in a stable order (by folder name, so file order never matters)."""
    if is_remote(lake.parts):
        # one flat listing of the prefix (paginated): a glob of */manifest.json lists every part folder apart,
        # a round trip each, and the lake run asks for the partitions many times
        base = lake.parts.path.rstrip("/") + "/"
        try:
            found = lake.parts.fs.find(base)
        except FileNotFoundError:
            return []
        rels = (n[len(base) :] for n in found if n.startswith(base))
        return [
            lake.parts / d
            for d in sorted({r.split("/")[0] for r in rels if r.count("/") == 1 and r.endswith("/" + PART_MANIFEST)})
        ]
    if not lake.parts.is_dir():
        return []
    return sorted(p for p in lake.parts.iterdir() if p.is_dir() and (p / PART_MANIFEST).exists())


def collect_parts(lake: Lake, name: str, schema: pa.Schema) -> list[pa.Table]:
    """The `name` table of every partition (missing ones skipped)."""
    out = []
    for d in part_dirs(lake):
        try:
            out.append(conform(read_parquet(d / f"{name}.parquet"), schema))
        except FileNotFoundError:
            continue
    return out


def union_sorted(
    tables: list[pa.Table], schema: pa.Schema, sort_keys: list[str], unique: list[str] | None = None
) -> pa.Table:
    """Concatenate partition tables into one lake-wide table with a deterministic row order.

    `unique`: keep one row per value of these columns (the first after sorting), e.g. a
    RawChunk shared by two identical inbox files is one blob and one manifest row.
    """
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables([conform(t, schema) for t in tables])
    table = table.sort_by([(k, "ascending") for k in sort_keys])
    if unique and table.num_rows:
        from raw_store.frames import as_frame  # polars loads only when rows are deduplicated

        table = as_frame(table).unique(subset=unique, keep="first", maintain_order=True).to_arrow()
        table = conform(table, schema)
    return table


CONSOLIDATION_ENV = ("MEMCTL_AS_OF", "MEMCTL_REDACT_PII", "MEMCTL_CONSOLIDATION")
INDEX_ENV = ("MEMCTL_VECTORS",)  # changes only the indexes (the embedder of stage B's vector files)


def lake_fingerprints(lake: Lake) -> tuple[str, str]:
    """(fingerprint, fingerprint without hits) in one pass. The fingerprint hashes every complete partition's
    (key, source sha), the consolidation settings ($MEMCTL_AS_OF, $MEMCTL_REDACT_PII, the content of the
    $MEMCTL_CONSOLIDATION file), the index settings ($MEMCTL_VECTORS) and the recall hits logged since
    (feedback/): it changes iff the lake-wide tables or indexes must. Without hits it changes iff the inputs do
    (what the lake sensor rebuilds for; hits wait for the next materialize or the daily consolidation).

    Path-independent: the settings file counts by its content, so a relative $MEMCTL_CONSOLIDATION and the same
    file named absolutely (`memctl ui` starts Dagster in the project folder) give the same fingerprint."""
    full, without_hits = hashlib.sha256(), hashlib.sha256()

    def update(text: str, hits: bool = False) -> None:
        full.update(text.encode())
        if not hits:
            without_hits.update(text.encode())

    for name in CONSOLIDATION_ENV + INDEX_ENV:
        value = os.environ.get(name, "").strip()
        if name == "MEMCTL_CONSOLIDATION" and value:
            value = (
                f"sha256:{hashlib.sha256(Path(value).read_bytes()).hexdigest()}"
                if Path(value).is_file()
                else f"missing:{Path(value).resolve()}"
            )
        update(f"{name}={value}\n")
    for rel, _, size in files_under(lake.feedback):
        if rel.endswith(".jsonl"):
            update(f"{rel}\x1f{size}\n", hits=True)
    for d in part_dirs(lake):
        m = read_manifest(d)
        update(f"{d.name}\x1f{m.get('source_sha256')}\x1f{m.get('graph_sha256')}\x1f{m.get('graph_version')}\n")
    return full.hexdigest(), without_hits.hexdigest()


def lake_fingerprint(lake: Lake, hits: bool = True) -> str:
    """lake_fingerprints(lake)'s fingerprint, or with `hits=False` the one without the recall hits."""
    return lake_fingerprints(lake)[0 if hits else 1]


def _state_path(lake: Lake) -> Any:
    return lake.lake / "_state.json"


def _index_state_path(lake: Lake) -> Path:
    """The local index cache's own stamp (a lake on object storage; for a local lake it is _state.json)."""
    return lake.index_dir / "_state.json"


def read_lake_state(lake: Lake, hits: bool = True) -> str | None:
    """The fingerprint the lake-wide tables were last built from (None: never built); `hits=False`: the one
    without the recall hits (None also for a state written before it was recorded)."""
    return _read_fingerprint(_state_path(lake), "fingerprint" if hits else "without_hits")


def _read_fingerprint(path: Any, key: str = "fingerprint") -> str | None:
    try:
        return json.loads(file_bytes(path).decode("utf-8")).get(key)
    except (FileNotFoundError, ValueError, AttributeError):
        return None


def write_lake_state(lake: Lake, fingerprint: str, without_hits: str | None = None) -> None:
    """Record which partition set the lake-wide tables and indexes were last built from (both fingerprints of
    lake_fingerprints, taken before the build)."""
    data = json.dumps({"fingerprint": fingerprint, "without_hits": without_hits}).encode("utf-8")
    if lake.remote:
        write_bytes_atomic(_index_state_path(lake), data)  # this machine's index cache is that build's
    write_bytes_atomic(_state_path(lake), data)


def write_index_state(lake: Lake, fingerprint: str) -> None:
    """Record that this machine's index cache was built from the tables of `fingerprint` (remote lakes)."""
    write_bytes_atomic(_index_state_path(lake), json.dumps({"fingerprint": fingerprint}).encode("utf-8"))


def index_is_current(lake: Lake, state: str | None = None) -> bool:
    """True when the indexes this process would open were built from the lake's current tables.
    `state`: read_lake_state(lake) when the caller has it already (one GET less on object storage)."""
    if not lake.duckdb_path.exists():
        return False
    if not lake.remote:
        return True
    state = read_lake_state(lake) if state is None else state
    return state is not None and _read_fingerprint(_index_state_path(lake)) == state


def lake_is_current(lake: Lake, hits: bool = True) -> bool:
    """True when the lake-wide tables and indexes were built from the current set of partitions and settings,
    and (`hits`) the recall hits logged so far."""
    state = read_lake_state(lake)
    if state is None or not index_is_current(lake, state):
        return False
    recorded = None if hits else read_lake_state(lake, hits=False)
    if recorded is None:  # or a state from before the second fingerprint was recorded: the full one decides
        return state == lake_fingerprint(lake)
    return recorded == lake_fingerprint(lake, hits=False)


def value_counts(table: pa.Table, column: str) -> dict[str, int]:
    """{value: rows} of one column, largest first then by value (for metadata and `memctl stats`)."""
    if column not in table.column_names or table.num_rows == 0:
        return {}
    counts = table.column(column).value_counts().to_pylist()
    return {str(d["values"]): int(d["counts"]) for d in sorted(counts, key=lambda d: (-d["counts"], str(d["values"])))}


def stale_partitions(lake: Lake, files: dict[str, InboxFile], forget_version: str = "") -> dict[str, str]:
    """{partition key: sha256} of the inbox `files` whose graph part is missing, built from other bytes,
    filed under another tenant (a loose file after $MEMCTL_TENANT changed) or under another set of forget
    requests (`forget_version`, jobs.forget.forget_version)."""
    out = {}
    for key, f in files.items():
        m = read_manifest(lake.part_dir(key))
        if (
            m.get("graph_sha256") != f.sha256
            or m.get("tenant", "") not in ("", tenant_for(f.path, lake.inbox))
            or m.get("forget_version", "") != forget_version
        ):
            out[key] = f.sha256
    return out


def outdated_stages(lake: Lake, files: dict[str, InboxFile], nlp_version: str, graph_version: str) -> dict[str, str]:
    """{partition key: first stage to re-run} for partitions whose bytes are current but whose derived parts
    were built by other code: "annotations" (NLP pipeline changed: re-annotate, then rebuild the graph) or
    "graph" (only the R2G rules changed: rebuild the graph from the stored annotations, no NLP).
    Partitions in stale_partitions are left out — they re-run whole."""
    out: dict[str, str] = {}
    for key, f in files.items():
        m = read_manifest(lake.part_dir(key))
        if m.get("graph_sha256") != f.sha256:
            continue
        if m.get("nlp_version") != nlp_version:
            out[key] = "annotations"
        elif m.get("graph_version") != graph_version:
            out[key] = "graph"
    return out
