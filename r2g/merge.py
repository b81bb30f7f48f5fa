"""merge_graph: the lake-wide union of per-partition node and edge tables, vectorised in polars.

Same id → one row. Entities, Concepts and the fingerprint-deduplicated Facts,
Preferences and Tasks combine (mentions and frequency summed, aliases unioned,
first_seen min, last_seen max, raw_refs unioned and capped); Episodes keep their
smallest row under a total order; an edge keeps its highest-weight row. The result
does not depend on the order of the inputs.

The total order on rows is: first_seen (counted types only; undated last), then every
column in schema order (ascending, nulls last) — so two partitions holding the same id
always resolve to the same row.

`merge_overlay` gives the same result as the lake stores it (raw_store.tables): only the ids
that occur in more than one input row, merged, since every other id is its partition's row.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pyarrow as pa

from r2g.partition_graph import concept_importance, entity_importance
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame
from raw_store.lake import conform

MERGED_REF_CAP = 20
COUNTED_TYPES = ("Entity", "Concept", "Fact", "Preference", "Task")

_NODE_ORDER = [c for c in NODES.names]
_EDGE_ORDER = [c for c in EDGES.names]
_SUMMED = ("mentions", "frequency")
_AGGREGATED = (
    "mentions",
    "frequency",
    "aliases",
    "keywords",
    "first_seen",
    "last_seen",
    "raw_refs",
    "confidence",
    "importance",
)


def _frame(tables: Sequence[pa.Table | pl.DataFrame | None], schema: pa.Schema) -> pl.DataFrame:
    parts = [
        as_frame(conform(t, schema)) if isinstance(t, pa.Table) else t
        for t in tables
        if t is not None and (t.num_rows if isinstance(t, pa.Table) else t.height)
    ]
    if not parts:
        return as_frame(schema.empty_table())
    return pl.concat(parts, how="vertical_relaxed") if len(parts) > 1 else parts[0]


def duplicated(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows whose id occurs more than once."""
    return frame.filter(pl.col("id").is_duplicated())


def merge_nodes(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per id of `rows` (NODES columns), merged as the module doc says; sorted by id."""
    if rows.height == 0:
        return rows
    counted = pl.col("type").is_in(COUNTED_TYPES)
    ordered = rows.sort(
        ["id", pl.col("first_seen").is_null(), "first_seen", *_NODE_ORDER], nulls_last=True, maintain_order=True
    )
    plain = ordered.filter(~counted).unique("id", keep="first", maintain_order=True)
    many = ordered.filter(counted)
    if many.height == 0:
        return plain.sort("id")
    first = many.unique("id", keep="first", maintain_order=True)
    refs = (
        many.select("id", "raw_refs")
        .explode("raw_refs")
        .drop_nulls("raw_refs")
        .unique()
        .sort(
            "id",
            pl.col("raw_refs").struct.field("raw_id"),
            pl.col("raw_refs").struct.field("offset"),
            pl.col("raw_refs").struct.field("length"),
        )
        .group_by("id", maintain_order=True)
        .agg(pl.col("raw_refs").head(MERGED_REF_CAP))
    )
    agg = many.group_by("id", maintain_order=True).agg(
        pl.col("mentions").fill_null(0).sum().alias("_mentions"),
        pl.col("frequency").fill_null(0).sum().alias("frequency"),
        pl.col("aliases")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .drop_nulls()
        .unique()
        .sort()
        .alias("aliases"),
        pl.col("keywords")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .drop_nulls()
        .unique(maintain_order=True)
        .alias("keywords"),
        pl.col("first_seen").min(),
        pl.col("last_seen").max(),
        pl.col("confidence").fill_null(0.0).max(),
        pl.col("importance").fill_null(0.0).max().alias("_importance"),
    )
    merged = (
        first.drop(*_AGGREGATED)
        .join(agg, on="id", how="left", maintain_order="left")
        .join(refs, on="id", how="left", maintain_order="left")
        .join(first.select("id", pl.col("mentions").alias("_first_mentions")), on="id", maintain_order="left")
    )
    mentions = pl.when(pl.col("_first_mentions").is_null()).then(None).otherwise(pl.col("_mentions"))
    merged = merged.with_columns(
        mentions.alias("mentions"), pl.col("raw_refs").fill_null(pl.lit([], dtype=merged.schema["raw_refs"]))
    )
    merged = merged.with_columns(
        pl.when(pl.col("type") == "Entity")
        .then(pl.col("mentions").map_elements(entity_importance, return_dtype=pl.Float64))
        .when(pl.col("type") == "Concept")
        .then(pl.col("mentions").map_elements(concept_importance, return_dtype=pl.Float64))
        .otherwise(pl.col("_importance"))
        .alias("importance")
    )
    merged = merged.select(plain.columns)
    return pl.concat([plain, merged], how="vertical_relaxed").sort("id")


def merge_edges(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per id of `rows` (EDGES columns): the highest weight, then the total order; sorted by id."""
    if rows.height == 0:
        return rows
    return rows.sort(
        ["id", pl.col("weight").fill_null(0.0), *_EDGE_ORDER],
        descending=[False, True] + [False] * len(_EDGE_ORDER),
        nulls_last=True,
        maintain_order=True,
    ).unique("id", keep="first", maintain_order=True)


def merge_graph(node_tables: Sequence[pa.Table], edge_tables: Sequence[pa.Table]) -> tuple[pa.Table, pa.Table]:
    """Union partitions into one (nodes, edges) pair, one row per id, sorted by id; input order does not matter."""
    nodes, edges = _frame(node_tables, NODES), _frame(edge_tables, EDGES)
    node_dups, edge_dups = duplicated(nodes), duplicated(edges)
    nodes = pl.concat([nodes.filter(~pl.col("id").is_duplicated()), merge_nodes(node_dups)], how="vertical_relaxed")
    edges = pl.concat([edges.filter(~pl.col("id").is_duplicated()), merge_edges(edge_dups)], how="vertical_relaxed")
    return conform(nodes.sort("id").to_arrow(), NODES), conform(edges.sort("id").to_arrow(), EDGES)
