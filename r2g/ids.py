"""Deterministic ids: a hash of the natural key, so re-runs never duplicate a node or an edge."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

ID_SCHEME = "ids.v2"  # part of r2g.pipeline.graph_version: a new scheme re-derives every graph part


def stable_id(prefix: str, *parts: str | None) -> str:
    """`prefix_` + the first 24 hex chars of sha256 over the parts, each length-prefixed.

    `len:part` framing keeps the key injective whatever the parts hold (user text may
    contain any separator), so ("a", "bc") and ("ab", "c") never share an id; None
    ("~") stays distinct from "" ("0:"). Node ids use prefix "n", edge ids "e".
    """
    framed = []
    for p in parts:
        if p is None:
            framed.append("~")
        else:
            p = str(p)
            framed.append(f"{len(p)}:{p}")
    key = "".join(framed)
    return f"{prefix}_{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:24]}"


DUCKDB_MIN_ROWS = 4096  # fewer rows are hashed in Python: a DuckDB connection and query cost ~11 ms, ~4,500 ids


def stable_ids(prefix: str, parts: pl.DataFrame) -> pl.Series:
    """stable_id(prefix, *row) of every row of `parts` (String columns, in key order; a constant part is a literal
    column). From DUCKDB_MIN_ROWS rows on, in DuckDB: its sha256 over the same framing, whose lengths its length()
    counts in code points as Python's len() does; the hot paths' many ids (a review row per decayed fact: hundreds of
    thousands on a large lake) are ~3x faster than hashlib in a Python loop. A String column is valid UTF-8: no lone
    surrogates."""
    import polars as pl

    if not parts.width:
        raise ValueError("stable_ids needs at least one part")
    if parts.height < DUCKDB_MIN_ROWS:
        return pl.Series("id", [stable_id(prefix, *row) for row in parts.iter_rows()], dtype=pl.String)
    import duckdb

    framed = " || ".join(
        f"CASE WHEN p{i} IS NULL THEN '~' ELSE CAST(length(p{i}) AS VARCHAR) || ':' || p{i} END"
        for i in range(parts.width)
    )
    table = parts.select(pl.col(c).cast(pl.String).alias(f"p{i}") for i, c in enumerate(parts.columns)).to_arrow()
    with duckdb.connect() as con:
        con.register("parts", table)
        # (a projection of one scan: DuckDB keeps the rows' order, preserve_insertion_order being its default)
        ids = con.execute(f"SELECT ? || left(sha256({framed}), 24) AS id FROM parts", [f"{prefix}_"]).pl()
    return ids.get_column("id").cast(pl.String)


def edge_id(tenant: str | None, src: str, type: str, dst: str) -> str:
    """Id of the edge (tenant, src, type, dst): one edge per typed pair, however often it is derived."""
    return stable_id("e", tenant, src, type, dst)


def edge_ids(keys: list[tuple[str, str, str, str]]) -> list[str]:
    """edge_id of many (tenant, src, type, dst) keys: stable_id's framing inlined for build_graph's hot path."""
    sha = hashlib.sha256
    return [
        f"e_{sha(f'{len(t)}:{t}{len(s)}:{s}{len(y)}:{y}{len(d)}:{d}'.encode('utf-8', 'surrogatepass')).hexdigest()[:24]}"
        for t, s, y, d in keys
    ]


def text_sha(text: str) -> str:
    """sha256 hex of the utf-8 text: the NLP cache key (same as messages.text_sha)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
