"""Arrow tables as polars DataFrames, with the type they have."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S", pl.Series, pl.DataFrame)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _column_workers() -> int:
    """$MEMCTL_COLUMN_WORKERS, else one per core (at most 4)."""
    raw = os.environ.get("MEMCTL_COLUMN_WORKERS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return min(4, usable_cores())


# Arrow's take and polars' hash of one column run on one core; a lake-wide sweep over a table's columns (assembling
# the graph, sorting the stage, hashing rows) keeps one column per core busy instead
COLUMN_WORKERS = _column_workers()
_POOLS: dict[str, tuple[int, ThreadPoolExecutor]] = {}  # name → (the pid it was made in: a forked child makes its own)


def thread_pool(name: str) -> ThreadPoolExecutor:
    """This process's pool `name` of COLUMN_WORKERS threads (`memctl-<name>`), kept for the life of the process."""
    held = _POOLS.get(name)
    if held is None or held[0] != os.getpid():
        held = _POOLS[name] = (os.getpid(), ThreadPoolExecutor(COLUMN_WORKERS, thread_name_prefix=f"memctl-{name}"))
    return held[1]


def per_column(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """[fn(item) for item in items], up to COLUMN_WORKERS at once (fn must release the GIL to gain: Arrow and polars
    kernels do), results in order. At most that many items are in flight: `items` may hand out columns it lets go of
    (a table's, removed as they are taken), so a sweep holds a few columns twice, never the table. `fn` must not call
    per_column itself (its tasks would wait on a pool they fill)."""
    if COLUMN_WORKERS < 2:
        return [fn(item) for item in items]
    pool = thread_pool("column")
    out: list[R] = []
    running: deque[Future[R]] = deque()
    it = iter(items)
    while True:
        if len(running) >= COLUMN_WORKERS:  # a slot first, then the next item: never more than that many handed out
            out.append(running.popleft().result())
        item = next(it, _END)
        if item is _END:
            break
        running.append(pool.submit(fn, cast(T, item)))
        del item  # the pool's task holds the column now, and only until it is done
    out.extend(f.result() for f in running)
    return out


_END = object()


def columns_of(table: pa.Table) -> Iterator[list[pa.ChunkedArray]]:
    """`table`'s columns in order, each removed from the caller's table as it is handed out, in a one-item list the
    consumer empties (take_columns pops it): where the caller gave its only reference (`columns_of(t)` then `del t`),
    a column is freed once the consumer lets go of it. A column yielded bare would stay referenced by this
    generator's frame, and by the pool task's arguments, for as long as the consumer works on it."""
    while table.num_columns:
        box = [table.column(0)]
        table = table.remove_column(0)
        yield box


def take_columns(
    columns: Iterable[pa.ChunkedArray] | Iterable[list[pa.ChunkedArray]], rows: pa.Array, schema: pa.Schema
) -> pa.Table:
    """The table of `columns` (`schema`) taken at `rows`, a column per core at once (per_column). Given
    columns_of(t) of a table no one else holds, each column is let go once taken: the table is held ~1x, not 2x.

    A column of many chunks (a union of partitions, a spliced stage, a history with new rows): Arrow's take over it
    first concatenates the chunks, a copy of the whole column however few rows are taken (ten rows of a 286 MB
    string column: 0.48 s and +285 MB), and holds that copy, the chunks and the result at once. Here rows in
    ascending order (a subset kept) are taken chunk by chunk; other rows (a sort) from the chunks concatenated
    here, the chunks let go first: 2x the column at its peak, not 3x (859 → 573 MB for that column)."""
    at = _row_numbers(rows)
    ascending = len(at) < 2 or bool((at[1:] >= at[:-1]).all())

    def take(box: list[pa.ChunkedArray]) -> pa.Array | pa.ChunkedArray:
        column: pa.Array | pa.ChunkedArray = box.pop()
        if isinstance(column, pa.ChunkedArray) and column.num_chunks > 1:
            if ascending:
                return _take_ascending(column, at)
            column = pa.concat_arrays(column.chunks)  # the chunked column (if no one else holds it) freed here
        return column.take(rows)

    boxes = (c if isinstance(c, list) else [c] for c in columns)
    return pa.Table.from_arrays(per_column(take, boxes), schema=schema)


def take_rows(table: pa.Table, rows: pa.Array) -> pa.Table:
    """`table.take(rows)` (the same rows, schema and one chunk a column), as take_columns takes them: a few rows of a
    table of many chunks without a copy of its columns."""
    return take_columns(table.columns, rows, table.schema)


def _row_numbers(rows: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row numbers (an integer Arrow array without nulls) as int64 numpy, read from the buffer: numpy's own
    conversion of an Arrow array imports pandas (~0.5 s)."""
    if isinstance(rows, pa.ChunkedArray):
        rows = rows.combine_chunks()
    rows = rows.cast(pa.int64())
    return np.frombuffer(rows.buffers()[1], np.int64, count=len(rows), offset=rows.offset * 8)


def _int64_array(values: np.ndarray) -> pa.Array:
    a = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(a), [None, pa.py_buffer(a)])


def _take_ascending(column: pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    """column.take(at) for ascending `at`: each chunk's own rows taken from it, the pieces joined in order."""
    bounds = np.cumsum([0, *(len(c) for c in column.chunks)])
    cuts = np.searchsorted(at, bounds)  # the rows of chunk i are at[cuts[i]:cuts[i + 1]]
    pieces = [
        chunk.take(_int64_array(at[lo:hi] - start))
        for chunk, start, lo, hi in zip(column.chunks, bounds, cuts, cuts[1:])
        if hi > lo
    ]
    return pa.concat_arrays(pieces) if pieces else column.chunk(0).slice(0, 0)


def as_frame(table: pa.Table) -> pl.DataFrame:
    """`pl.from_arrow(table)`: polars types any Arrow input as `DataFrame | Series`, a Table always gives a DataFrame."""
    return cast(pl.DataFrame, pl.from_arrow(table))


def of_types(table: pa.Table, types: Iterable[str]) -> pa.Table:
    """The rows of `table` whose `type` is one of `types`, in table order, picked in Arrow: a step that reads a few
    edge types takes only their rows to polars, which copies id strings out of Arrow (42 bytes each)."""
    value_set = pa.array(sorted(types), table.schema.field("type").type)
    return table.filter(pc.is_in(table.column("type"), value_set=value_set))


SLICE_ROWS = 1 << 20


def sliced(table: pa.Table, fn: Callable[[pl.DataFrame], S]) -> S:
    """`fn` (a hash of key columns per row, or narrow rows: integer codes) over `table` taken to polars SLICE_ROWS
    rows at a time, the pieces concatenated in one chunk: polars copies id strings out of Arrow (42 bytes each), and a
    frame of every edge's ends at 1M messages (17M edges) was +2-3 GB where their hashes are 8-16 bytes a row."""
    parts = [fn(as_frame(table.slice(start, SLICE_ROWS))) for start in range(0, table.num_rows, SLICE_ROWS)]
    if not parts:
        return fn(as_frame(table.schema.empty_table()))
    return pl.concat(parts, rechunk=True)


def keep_rows(
    frame: pl.DataFrame, keys: pl.DataFrame, on: Sequence[str], *, hit: bool, nulls_equal: bool = False
) -> pl.DataFrame:
    """The rows of `frame`, in order, whose `on` columns are (`hit`) or are not (a semi / anti join) a row of
    `keys`: found on those columns alone, then one filter. A semi or anti join of a wide frame gathers every
    column, nested raw_refs included (7x the time of this on a 100k-message lake's graph; 7.3 of the 18.3 s of a
    merge run with nothing new at 1M)."""
    on = list(on)
    rows = (
        frame.select(on)
        .with_row_index("_row")
        .join(keys.select(on), on=on, how="semi", nulls_equal=nulls_equal)
        .get_column("_row")
    )
    if not rows.len():  # none matched: the frame as it is (no copy), or none of it
        return frame.clear() if hit else frame
    return frame.filter(pl.repeat(not hit, frame.height, eager=True, dtype=pl.Boolean).scatter(rows, hit))


def sort_stable(frame: pl.DataFrame, keys: list[str], nulls_last: bool = False) -> pl.DataFrame:
    """`frame.sort(keys, maintain_order=True, nulls_last=…)` as stable sorts by one column at a time, the last key
    first: the same rows in the same order, at about half the CPU on string keys (polars' multi-column sort is
    its slow path: 1.08 vs 0.58 CPU-s for 1.7M (tenant, id) pairs)."""
    for key in reversed(keys):
        frame = frame.sort(key, maintain_order=True, nulls_last=nulls_last)
    return frame


def in_place(order: pa.Array | pl.Series) -> bool:
    """Whether the row numbers `order` (a sort's, or a filter's of all rows) leave every row where it is: taking a
    table by them would only copy it."""
    s = order if isinstance(order, pl.Series) else cast(pl.Series, pl.from_arrow(order))
    rows = pl.int_range(s.len(), eager=True, dtype=cast(pl.datatypes.IntegerType, s.dtype))  # row numbers' own type
    return bool((s == rows).all())


def sorted_by(frame: pl.DataFrame, keys: list[str]) -> bool:
    """Whether the rows of `frame` are in ascending order of `keys` (strings, integers or times; ties allowed, nulls
    last): then a stable sort by them would leave every row where it is. One pass of comparisons with the row before,
    against a sort's O(n log n) on strings (Arrow's is single-threaded: 5.3 s for the 17M edge keys of a 1M-message
    lake)."""
    if frame.height < 2:
        return True
    out_of_order, tie = pl.lit(False), pl.lit(True)
    for key in keys:
        now, before = pl.col(key), pl.col(key).shift(1)
        # at the first key where a row differs from the one before, it must not be smaller (a null is the largest)
        smaller = (now.is_not_null() & before.is_null()) | (now < before).fill_null(False)
        out_of_order = out_of_order | (tie & smaller)
        tie = tie & now.eq_missing(before)
    first = pl.int_range(pl.len()) == 0  # the first row has no row before it
    return not frame.select((out_of_order & ~first).any()).item()


def key_order(table: pa.Table, keys: list[str]) -> pa.Array | None:
    """The row numbers that sort `table` by `keys` (ascending, nulls last, ties in table order), or None when it is in
    that order already (sorted_by: then there is nothing to sort or copy). Polars' stable sort on all cores: Arrow's
    string sort is single-threaded (~15 % of a 100k-message consolidation when it sorted the graph)."""
    frame = as_frame(table.select(keys))
    if sorted_by(frame, keys):
        return None
    return sort_stable(frame.with_row_index("_row"), keys, nulls_last=True).get_column("_row").to_arrow()
