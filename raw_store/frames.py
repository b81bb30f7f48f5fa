"""Arrow tables as polars DataFrames, with the type they have."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import polars as pl
import pyarrow as pa


def as_frame(table: pa.Table) -> pl.DataFrame:
    """`pl.from_arrow(table)`: polars types any Arrow input as `DataFrame | Series`, a Table always gives a DataFrame."""
    return cast(pl.DataFrame, pl.from_arrow(table))


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
