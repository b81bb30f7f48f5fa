"""The lake's logical tables, assembled from the files that hold them: part files and overlays.

No lake-wide table is a copy. Every inbox file's partition keeps its own Parquet files
(`lake/parts/<part>/<table>.parquet`: messages, raw_chunks, rejects, nodes, edges, …), and a
lake-wide table is read as one of:

- a **union** of the parts' files (messages, raw_chunks, rejects, feedback, forgotten);
- a **layered** table: a base (the union, or another layered table) under an **overlay** of rows
  that replace or add rows by key, and a list of keys it removes. The R2G graph is the parts'
  nodes and edges under the merge overlay (`lake/r2g/`: ids seen in several parts merged into one
  row, fact links added, forgotten ids removed); the consolidated graph is the R2G graph under the
  consolidation overlay (`lake/consolidated/`), with a narrow `state` table whose columns
  (tier, weight, status, …) replace the base's for every node it lists.

So a new inbox file adds its own files and rewrites only the overlays, which hold what changed.
The same assembly is written twice, once in polars (for the Python steps) and once in SQL (for the
DuckDB views), and `tests/test_tables.py` holds them equal.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from raw_store import frames
from raw_store.frames import as_frame, columns_of, keep_rows, per_column, sort_stable, take_columns, take_rows
from raw_store.lake import Lake, conform, is_remote, part_dirs, read_object, read_parquet, write_table

KEY = ("tenant", "id")

REMOVED = pa.schema([("tenant", pa.string()), ("id", pa.string())])


def part_paths(lake: Lake, name: str) -> list[Any]:
    """The `<name>.parquet` file of every complete partition that has one, in partition order."""
    out = []
    for d in part_dirs(lake):
        p = d / f"{name}.parquet"
        if is_remote(p) or Path(p).exists():
            out.append(p)
    return out


def read_parts(
    lake: Lake, name: str, schema: pa.Schema, columns: Sequence[str] | None = None, paths: Sequence[Any] | None = None
) -> pa.Table:
    """The union of the partitions' `name` tables (conformed to `schema`, then `columns` selected), in
    partition order; an empty table of the schema when there is none."""
    cols = list(columns) if columns is not None else schema.names
    sub = pa.schema([schema.field(c) for c in cols])
    got = _each_file(
        lambda p: _CACHE.read(p, schema, cols), list(paths if paths is not None else part_paths(lake, name))
    )
    tables = [conform(t, sub) for t in got if t is not None and t.num_rows]
    return pa.concat_tables(tables) if tables else sub.empty_table()


def _each_file(read: Callable[[Any], pa.Table | None], paths: list[Any]) -> list[pa.Table | None]:
    """[read(p) for p in paths], a file per core at once (frames.COLUMN_WORKERS), in order. Arrow decodes a file's
    columns on its own threads, but a lake's parts are many small files, and between them one core idled: the
    R2G graph of 48 parts read in 1.9 s against 2.3 s one file after another (on object storage the GETs overlap
    too). Its own pool, not per_column's: a column task may read parts."""
    if frames.COLUMN_WORKERS < 2 or len(paths) < 2:
        return [read(p) for p in paths]
    return list(frames.thread_pool("read").map(read, paths))


def parquet_rows(path: Any) -> int:
    """The rows of a Parquet file (local or on object storage), from its footer: no column is read.
    FileNotFoundError if there is none."""
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(pa.BufferReader(read_object(path)) if is_remote(path) else path).metadata.num_rows)


def part_rows(lake: Lake, name: str) -> int:
    """The rows of the partitions' `name` tables, from their Parquet footers: no column is read."""
    total = 0
    for p in part_paths(lake, name):
        try:
            total += parquet_rows(p)
        except FileNotFoundError:
            continue
    return total


class _ReadCache:
    """Whole partition files read this process, kept while they are unchanged (path, size, mtime) and fit a byte
    budget ($MEMCTL_READ_CACHE_MB, default 128; 0 turns it off): a notebook or a small lake reads the same parts
    again and again. Projected reads of a file not cached are read as asked and not kept.

    The default was 1024 while the lake run read the graph parts in each of its steps; consolidation now hands its
    graph to the index step (r2g.lake_graph.hand_over_graph_tables), and on a 1 % append at 100k messages a 1 GiB
    cache saved no CPU (80 vs 82 CPU-s) but raised the run's peak RSS from 4.4 to 5.1 GB."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[tuple, pa.Table]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # read_parts reads files on several threads at once

    @staticmethod
    def _budget() -> int:
        raw = os.environ.get("MEMCTL_READ_CACHE_MB", "").strip()
        return (int(raw) if raw.isdigit() else 128) << 20

    def read(self, path: Any, schema: pa.Schema, columns: list[str]) -> pa.Table | None:
        if is_remote(path):
            return _read_remote(path, columns)
        try:
            st = path.stat()
        except (FileNotFoundError, OSError):
            return None
        stamp = (st.st_size, getattr(st, "st_mtime_ns", None) or st.st_mtime)
        key = str(path)
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1].select(columns)
        whole = set(columns) >= set(schema.names) or st.st_size * 8 < self._budget() // 64
        try:
            t = read_parquet(path, columns=None if whole else [c for c in columns if c in _names(path)])
        except FileNotFoundError:
            return None
        t = conform(t, schema) if whole else t
        if whole:
            self._keep(key, stamp, t)
        return t.select([c for c in columns if c in t.column_names])

    def _keep(self, key: str, stamp: tuple, table: pa.Table) -> None:
        budget = self._budget()
        if table.nbytes > budget // 4:
            return
        with self._lock:
            self._keep_locked(key, stamp, table, budget)

    def _keep_locked(self, key: str, stamp: tuple, table: pa.Table, budget: int) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[1].nbytes
        while self._items and self._bytes + table.nbytes > budget:
            # the newest goes first: a scan over more files than fit keeps a stable first part cached, where
            # least-recently-used eviction would miss on every file of every scan
            _, (_, dropped) = self._items.popitem()
            self._bytes -= dropped.nbytes
        self._items[key] = (stamp, table)
        self._bytes += table.nbytes


_CACHE = _ReadCache()


def _names(path: Any) -> set[str]:
    import pyarrow.parquet as pq

    return set(pq.read_schema(path).names)


def _read_remote(path: Any, columns: list[str]) -> pa.Table | None:
    """`columns` (those the file has) of a part file on object storage, not kept: one GET of the whole object, where
    a HEAD for the cache stamp, a ranged read of the schema and then the GET cost four round trips or more."""
    import pyarrow.parquet as pq

    try:
        f = pq.ParquetFile(pa.BufferReader(read_object(path)))
    except FileNotFoundError:
        return None
    names = set(f.schema_arrow.names)
    return f.read(columns=[c for c in columns if c in names])


# Not a path inside the inbox (no inbox file's partition key starts with ".."), so never an inbox file's partition.
IMPORT_KEY = "../import"


def write_import(lake: Lake, tables: dict[str, tuple[pa.Table, pa.Schema]], key: str = "") -> Any:
    """Write tables built elsewhere (messages, raw_chunks, rejects, nodes, edges, … by name) as one complete
    partition of the lake, `key`: they are then the lake's rows of those tables, like an inbox file's. For
    benchmarks and tests that build a graph without the inbox, and for imports. Returns the partition folder."""
    from raw_store.lake import read_manifest, write_manifest

    key = IMPORT_KEY + (f"/{key}" if key else "")
    part = lake.part_dir(key)
    for name, (table, schema) in tables.items():
        write_table(table, part / f"{name}.parquet", schema)
    write_manifest(part, {**read_manifest(part), "partition_key": key, "import": sorted(tables)})
    return part


@dataclass(frozen=True)
class Overlay:
    """Rows replacing or adding base rows by key, and keys removed from the base (`REMOVED`)."""

    upserts: pa.Table
    removed: pa.Table

    @classmethod
    def empty(cls, schema: pa.Schema) -> Overlay:
        return cls(schema.empty_table(), REMOVED.empty_table())


def apply_overlay(base: pl.DataFrame, overlay: Overlay, key: Sequence[str] = KEY) -> pl.DataFrame:
    """`base` without the rows whose key the overlay upserts or removes, plus the upserts (base order first)."""
    key = list(key)
    gone = pl.concat([as_frame(overlay.upserts.select(key)), as_frame(overlay.removed.select(key))])
    kept = keep_rows(base, gone, key, hit=False, nulls_equal=True) if gone.height else base
    if not overlay.upserts.num_rows:
        return kept
    return pl.concat([kept, as_frame(overlay.upserts).select(base.columns)], how="vertical_relaxed")


def layered_table(base: pa.Table, overlays: Sequence[Overlay], key: Sequence[str] = KEY) -> pa.Table:
    """`base` under `overlays` applied in turn (as apply_overlay does; keys unique after the first), sorted by
    `key`. Worked out on the key columns alone and then gathered in one take from base and upserts, so the wide
    rows are copied once: assembling the graph through polars frames (convert, filter, concat, sort, convert
    back) held four to five copies and peaked at ~4.6x the graph's size."""
    key = list(key)
    tables = [base, *(conform(o.upserts, base.schema) for o in overlays)]
    alive = as_frame(base.select(key)).with_row_index("_r").with_columns(pl.lit(0, pl.UInt32).alias("_t"))
    for i, o in enumerate(overlays, 1):
        gone = pl.concat([as_frame(o.upserts.select(key)), as_frame(o.removed.select(key))])
        if gone.height:
            alive = alive.join(gone, on=key, how="anti", nulls_equal=True)
        upserts = as_frame(o.upserts.select(key)).with_row_index("_r").with_columns(pl.lit(i, pl.UInt32).alias("_t"))
        alive = pl.concat([alive, upserts.select(alive.columns)])
    offsets = np.cumsum([0, *(t.num_rows for t in tables[:-1])], dtype=np.uint64)
    order = sort_stable(alive, key)
    rows = pa.array(order.get_column("_r").to_numpy().astype(np.uint64) + offsets[order.get_column("_t").to_numpy()])
    del alive, order
    schema, columns = base.schema, columns_of(pa.concat_tables(tables))
    del base, tables
    # gathered a column per core at once, each source column let go once taken: where the caller passed its only
    # reference to `base` (read_graph_tables), the graph is held ~1x, not 2x (12 GB against ~8 at 1M messages)
    return take_columns(columns, rows, schema)


def overlay_sql(base_sql: str, upserts: str, removed: str, columns: Sequence[str], key: Sequence[str] = KEY) -> str:
    """The SQL of `apply_overlay`: `base_sql` (a SELECT) under the overlay held by the Parquet files `upserts`
    and `removed` (paths already SQL-quoted)."""
    cols = ", ".join(f'"{c}"' for c in columns)
    on = " AND ".join(f'g."{k}" IS NOT DISTINCT FROM b."{k}"' for k in key)
    keys = ", ".join(f'"{k}"' for k in key)
    return (
        f"SELECT {cols} FROM ({base_sql}) AS b WHERE NOT EXISTS ("
        f"SELECT 1 FROM (SELECT {keys} FROM read_parquet({upserts}) UNION ALL "
        f"SELECT {keys} FROM read_parquet({removed})) AS g WHERE {on}) "
        f"UNION ALL SELECT {cols} FROM read_parquet({upserts})"
    )


def diff_overlay(
    base: pa.Table | pl.DataFrame,
    target: pa.Table | pl.DataFrame,
    schema: pa.Schema,
    key: Sequence[str] = KEY,
    ignore: Sequence[str] = (),
) -> Overlay:
    """The overlay that turns `base` into `target` (both with unique keys): target rows that are new or differ
    in a column outside `ignore`, and the base keys target lacks. Rows equal outside `ignore` are not
    upserted, so an unchanged row keeps coming from the base, byte for byte."""
    base, target = (t.to_arrow() if isinstance(t, pl.DataFrame) else t for t in (base, target))
    key = list(key)
    compared = [c for c in schema.names if c not in ignore and c not in key]
    b, t = _row_hashes(base, key, compared), _row_hashes(target, key, compared)
    changed = t.join(b, on=_KEY_HASHES, how="left", suffix="_b").filter(_differs(1)).get_column("_r")
    return Overlay(_taken(target, changed, schema, key), _removed(base, b, t, key))


def stage_and_final_overlays(
    base: pa.Table,
    stage: pa.Table,
    final: pa.Table,
    schema: pa.Schema,
    key: Sequence[str] = KEY,
    ignore: Sequence[str] = (),
    base_hashes: pl.DataFrame | None = None,
) -> tuple[Overlay, pa.Table, Overlay]:
    """(`to_stage`, `patch`, `to_final`): `to_final` is diff_overlay(base, final, schema, key, ignore), and `to_stage`
    and `patch` give `stage` back over it: patched(layered_table(base, [to_final, to_stage]), patch) is the stage.
    `final` must be `stage` with rows dropped and only `ignore` columns changed (consolidation: the time steps set the
    nodes' state columns and drop capped or forgotten rows of the graph stage, nothing else).

    The stage is kept as what it adds to the final overlay, not as a second overlay over `base`: the two held the same
    rows (the result's changed rows are the stage's), ~150 bytes a message twice. `to_stage` upserts the stage rows
    `final` dropped and removes nothing; the patch holds the key and `ignore` columns of the stage rows whose `ignore`
    columns differ from those the layers give them (the final's where to_final upserts the row, else the base's: fact
    versions set valid_since on most Facts, which as whole rows were three quarters of the stage's bytes).
    `base` and `stage` are hashed once (`base` not at all when the caller hashed it already: `base_hashes`, its
    row_hashes), `final` only on the rows to_final upserts. The caller vouches for that contract; tests/test_dirty.py
    holds the three to it on random graphs. With `base_hashes`, `base` may hold its key columns alone (all that is
    read of it then)."""
    key = list(key)
    b = base_hashes if base_hashes is not None else row_hashes(base, schema, key, ignore)
    assert b.height == base.num_rows, "base_hashes are row_hashes(base, schema, key, ignore)"
    s = row_hashes(stage, schema, key, ignore)
    joined = s.join(b, on=_KEY_HASHES, how="left", suffix="_b")
    differs = joined.filter(_differs(1)).select(*_KEY_HASHES, "_r", "_h1")
    # the rows whose state only changed, over the base (those dropped by `final` come back whole: to_stage)
    over_base = joined.filter(_differs(2) & ~_differs(1)).select(*_KEY_HASHES, "_r")
    del joined
    f = _key_frame(final, key)
    to_final = Overlay(
        _taken(final, f.join(differs, on=_KEY_HASHES, how="semi").get_column("_r"), schema, key),
        _removed(base, b, f, key),
    )
    dropped = s.join(f, on=_KEY_HASHES, how="anti")
    del s
    to_stage = Overlay(_taken(stage, dropped.get_column("_r"), schema, key), REMOVED.empty_table())
    upserted = row_hashes(to_final.upserts, schema, key, ignore).select(*_KEY_HASHES, pl.col("_h1").alias("_f1"))
    over_final = differs.join(upserted, on=_KEY_HASHES).filter(pl.col("_h1") != pl.col("_f1"))
    # a row `final` dropped comes back whole through to_stage: only the base's rows need leaving out of the patch
    rows = pl.concat([over_base.join(dropped, on=_KEY_HASHES, how="anti"), over_final.select(over_base.columns)])
    patch = _taken(stage.select([*key, *ignore]), rows.get_column("_r"), patch_schema(schema, key, ignore), key)
    return to_stage, patch, to_final


def patch_schema(schema: pa.Schema, key: Sequence[str], columns: Sequence[str]) -> pa.Schema:
    """The schema of a patch of `schema`'s `columns` (stage_and_final_overlays): the key, then those columns."""
    return pa.schema([schema.field(c) for c in [*key, *columns]])


def patched(table: pa.Table, patch: pa.Table, key: Sequence[str] = KEY) -> pa.Table:
    """`table` with the non-key columns of `patch` (unique keys) set on the rows whose key it holds; rows it does not
    hold keep theirs."""
    key = list(key)
    if not patch.num_rows:
        return table
    at = (
        as_frame(table.select(key))
        .join(as_frame(patch.select(key)).with_row_index("_p"), on=key, how="left", maintain_order="left")
        .get_column("_p")
        .to_arrow()
    )
    hit = pc.is_valid(at)
    for name in patch.column_names:
        if name not in key:
            i = table.schema.get_field_index(name)
            column = pc.if_else(hit, patch.column(name).take(at), table.column(name))
            table = table.set_column(i, table.schema.field(i), column.cast(table.schema.field(i).type))
    return table


# Rows are matched on two 64-bit hashes of their key (the strings are never joined: a left join of the edges' string
# keys took ~0.5 GB at 100k messages); 128 bits leave a collision among millions of keys at ~1e-26, well below the
# 64-bit row hashes the comparison itself trusts. The two are one Int128 column, `_k` (key128): polars joins it 2-2.5x
# faster than the pair of UInt64 columns at 100k messages (1.8M edges), ~20-25 % at 1M, where building the Int128 of
# 17M keys costs about what the joins save.
_KEY_HASHES = ["_k"]


def key128(high: pl.Expr, low: pl.Expr) -> pl.Expr:
    """Two UInt64 hashes as one Int128: `high` (read as signed) times 2^64 plus `low`, which spans exactly the Int128
    range, so distinct pairs give distinct values."""
    return high.reinterpret(signed=True).cast(pl.Int128) * pl.lit(1 << 64, dtype=pl.Int128) + low.cast(pl.Int128)


def row_hashes(
    table: pa.Table, schema: pa.Schema, key: Sequence[str] = KEY, ignore: Sequence[str] = ()
) -> pl.DataFrame:
    """(_k, _r, _h0, _h1) of every row of `table`: a 128-bit hash of its key, its row number, a hash of its columns
    outside `ignore` and one of those in it (what stage_and_final_overlays compares). One column is taken to polars
    at a time, so hashing a table never holds a second copy of it."""
    key = list(key)
    kept = [c for c in schema.names if c not in ignore and c not in key]
    return _row_hashes(table, key, kept, [c for c in schema.names if c in ignore and c not in key])


def _key_frame(table: pa.Table, key: list[str]) -> pl.DataFrame:
    """(_k, _r): the key hash of every row of `table` (two 64-bit hashes as the high, signed, and low halves of one
    Int128: distinct pairs give distinct values) and its row number."""
    keys = as_frame(table.select(key)).select(pl.struct(key).alias("_key"))
    return keys.select(
        key128(pl.col("_key").hash(seed=101), pl.col("_key").hash(seed=202)).alias("_k"),
        pl.int_range(table.num_rows, dtype=pl.UInt32).alias("_r"),
    )


def _taken(table: pa.Table, rows: pl.Series, schema: pa.Schema, key: list[str]) -> pa.Table:
    return _sorted(conform(take_rows(table, rows.sort().to_arrow()), schema), key)


def _removed(base: pa.Table, b: pl.DataFrame, other: pl.DataFrame, key: list[str]) -> pa.Table:
    """The keys of the `base` rows (hashed in `b`) whose key `other` lacks."""
    rows = b.join(other, on=_KEY_HASHES, how="anti").get_column("_r")
    return _sorted(conform(take_rows(base.select(key), rows.sort().to_arrow()), REMOVED), key)


def _differs(groups: int) -> pl.Expr:
    """A row of a left join of two `_row_hashes` frames (the right one's hashes suffixed _b) that is new on the
    left or whose first `groups` hashes differ."""
    new = pl.col("_h0_b").is_null()
    return pl.any_horizontal(new, *(pl.col(f"_h{i}") != pl.col(f"_h{i}_b") for i in range(groups)))


def xor_hash(table: pa.Table, columns: Sequence[tuple[str, int]]) -> pl.Series:
    """One 64-bit hash a row of `table`: the (column, seed) pairs' own hashes xor-ed, much cheaper than hashing a
    struct of them; the table is taken to polars a few columns at a time, one per core (no copy of the whole)."""
    out = pl.zeros(table.num_rows, pl.UInt64, eager=True)

    def column_hash(item: tuple[str, int]) -> pl.Series:
        name, seed = item
        return as_frame(table.select([name])).get_column(name).hash(seed=seed)

    step = frames.COLUMN_WORKERS  # as many at once as run at once: each is a 64-bit column (125 MB at 1M edges)
    for at in range(0, len(columns), step):
        for h in per_column(column_hash, columns[at : at + step]):
            out = out ^ h
    return out


def _row_hashes(table: pa.Table, key: list[str], *groups: Sequence[str]) -> pl.DataFrame:
    """(_k, _r, _h0, _h1, …): _key_frame, and per group of columns their xor_hash (the k-th column hashed, counting
    across the groups, with seed 7 + k)."""
    seeds = iter(range(7, 7 + sum(len(g) for g in groups)))
    hashes = [xor_hash(table, [(name, next(seeds)) for name in columns]) for columns in groups]
    return _key_frame(table, key).with_columns(h.alias(f"_h{i}") for i, h in enumerate(hashes))


def _sorted(table: pa.Table, key: Sequence[str]) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in key]) if table.num_rows else table


def write_overlay(folder: Any, name: str, overlay: Overlay, schema: pa.Schema) -> None:
    """`<folder>/<name>.parquet` (the upserts) and `<folder>/<name>_removed.parquet`, each written atomically."""
    write_table(overlay.upserts, folder / f"{name}.parquet", schema)
    write_table(overlay.removed, folder / f"{name}_removed.parquet", REMOVED)


def read_overlay(folder: Any, name: str, schema: pa.Schema) -> Overlay:
    from raw_store.lake import read_table

    return Overlay(
        read_table(folder / f"{name}.parquet", schema), read_table(folder / f"{name}_removed.parquet", REMOVED)
    )


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB type of an Arrow type of the lake's schemas (for typed empty SELECTs)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return duckdb_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f'"{f.name}" {duckdb_type(f.type)}' for f in t) + ")"
    raise TypeError(f"no DuckDB type for {t}")


def hash_code(h: Any, packages: Sequence[str], libraries: Sequence[str] = ()) -> Any:
    """`h` (a hashlib object) updated with the versions of `libraries` and the source of every module of the
    repository's `packages`: what a snapshot of a step's output depends on besides its input. Returns `h`."""
    from importlib.metadata import version

    for lib in libraries:
        h.update(f"{lib}={version(lib)}".encode())
    root = Path(__file__).resolve().parent.parent
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h
