"""Arrow tables as polars DataFrames, with the type they have."""
from __future__ import annotations

from typing import cast

import polars as pl
import pyarrow as pa


def as_frame(table: pa.Table) -> pl.DataFrame:
    """`pl.from_arrow(table)`: polars types any Arrow input as `DataFrame | Series`, a Table always gives a DataFrame."""
    return cast(pl.DataFrame, pl.from_arrow(table))
