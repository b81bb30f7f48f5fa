"""Arrow tables as polars DataFrames, with the type they have."""

from __future__ import annotations

from typing import cast

import polars as pl
import pyarrow as pa


def as_frame(table: pa.Table) -> pl.DataFrame:
    """`pl.from_arrow(table)`: polars types any Arrow input as `DataFrame | Series`, a Table always gives a DataFrame."""
    return cast(pl.DataFrame, pl.from_arrow(table))


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
