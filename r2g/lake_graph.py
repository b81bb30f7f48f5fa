"""The lake's graph tables, assembled from the partitions' graph parts and two overlays (raw_store.tables).

    lake/parts/<part>/{nodes,edges}.parquet         what R2G made of each inbox file
    lake/r2g/{nodes,edges}[_removed].parquet          the merge overlay: ids seen in several parts merged into
                                                      one row, fact links, ids forget requests removed
    lake/consolidated/{nodes,edges}[_removed].parquet the consolidation overlay over the R2G graph: rows
                                                      versions, PII, ops, topics and rollups changed or made,
                                                      and the edges caps and ops moved out
    lake/consolidated/state.parquet                   tier, category, status, weight, activation, feedback and
                                                      pinned of every node (the columns that move with time)

`read_graph(lake, "r2g")` is the R2G graph (the `r2g_nodes` / `r2g_edges` assets), `read_graph(lake,
"consolidated")` the memory graph (`nodes` / `edges`); `graph_sql` gives the same tables as DuckDB SQL.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from r2g.schema import (
    AUDIT,
    COLD_EDGES,
    COMMUNITIES,
    DOCS,
    EDGES,
    FEEDBACK,
    NODE_STATE,
    NODES,
    OPS_APPLIED,
    OPS_REJECTED,
    PROMOTIONS,
    REVIEW_QUEUE,
    STATE_COLUMNS,
)
from raw_store.frames import as_frame
from raw_store.lake import Lake, conform, is_remote, read_table, write_bytes_atomic
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS, TOMBSTONES
from raw_store.tables import (
    KEY,
    REMOVED,
    Overlay,
    apply_overlay,
    duckdb_type,
    layered_table,
    overlay_sql,
    part_paths,
    read_overlay,
    read_parts,
)

LAYERS = ("r2g", "consolidated")

# The lake's tables by name (the DuckDB view names): the union of the partitions' files, a graph layer, or a file.
UNION_TABLES: dict[str, pa.Schema] = {"messages": MESSAGES, "raw_chunks": RAW_CHUNKS, "rejects": REJECTS}
GRAPH_TABLES: dict[str, tuple[str, str]] = {
    "nodes": ("consolidated", "nodes"),
    "edges": ("consolidated", "edges"),
    "r2g_nodes": ("r2g", "nodes"),
    "r2g_edges": ("r2g", "edges"),
}
FILE_TABLES: dict[str, pa.Schema] = {
    "communities": COMMUNITIES,
    "promotions": PROMOTIONS,
    "review_queue": REVIEW_QUEUE,
    "cold_edges": COLD_EDGES,
    "feedback": FEEDBACK,
    "ops_applied": OPS_APPLIED,
    "ops_rejected": OPS_REJECTED,
    "audit": AUDIT,
    "tombstones": TOMBSTONES,
}


def table_schema(name: str) -> pa.Schema:
    if name in UNION_TABLES:
        return UNION_TABLES[name]
    if name in GRAPH_TABLES:
        return NODES if GRAPH_TABLES[name][1] == "nodes" else EDGES
    return FILE_TABLES[name]


def read_lake_table(lake: Lake, name: str, columns: Sequence[str] | None = None) -> pa.Table:
    """The lake table `name` (a key of UNION_TABLES, GRAPH_TABLES or FILE_TABLES) as Arrow, with `columns`
    (default all); a table never written reads as empty."""
    if name in UNION_TABLES:
        return read_parts(lake, name, UNION_TABLES[name], columns)
    if name in GRAPH_TABLES:
        layer, kind = GRAPH_TABLES[name]
        nodes, edges = read_graph_columns(
            lake, layer, columns if kind == "nodes" else ["id"], columns if kind == "edges" else ["id"]
        )
        return nodes if kind == "nodes" else edges
    table = read_table(lake.table(name), FILE_TABLES[name])
    return table.select(list(columns)) if columns is not None else table


def grouped_counts(lake: Lake, name: str, columns: Sequence[str]) -> pl.DataFrame:
    """(`columns`…, rows): the rows of the lake table `name` (as read_lake_table gives it) counted per distinct
    value of `columns`. A local lake is counted by DuckDB over its Parquet files where they lie (the SQL of the
    DuckDB file's views, raw_chunks as its files hold it), streaming: `memctl materialize` prints these counts after
    every run, and assembling the graph's key columns in Arrow for them took 3.4 s at 100k messages against 1.5 s
    and grew with the lake. A lake on object storage is read and counted in Arrow."""
    if lake.remote:
        table = as_frame(read_lake_table(lake, name, columns))
        return table.group_by(list(columns)).agg(pl.len().cast(pl.Int64).alias("rows"))
    recorded = recorded_graph_counts(lake, name, columns)
    if recorded is not None:
        return recorded
    if name in UNION_TABLES:
        sql = parts_sql(lake, name, UNION_TABLES[name])
    elif name in GRAPH_TABLES:
        sql = graph_sql(lake)[name]
    else:
        path = lake.table(name)
        sql = union_sql([path], FILE_TABLES[name]) if _exists(path) else _empty_select(FILE_TABLES[name])
    cols = ", ".join(f'"{c}"' for c in columns)
    with _key_scan(lake) as con:
        counted = con.sql(f"SELECT {cols}, count(*) AS rows FROM ({sql}) GROUP BY ALL").fetch_arrow_table()
    return as_frame(counted).with_columns(pl.col("rows").cast(pl.Int64))


# The rows of the `nodes` and `edges` views per (tenant, type), as the last index build counted them in the tables it
# held, and the stamp of the files they were read from: grouped_counts' answer while those files are unchanged. Every
# `memctl materialize` prints these counts, and counting them over the views' overlay SQL took 1.7 s at 100k messages
# (the anti joins over every key), growing with the lake. Kept in the cache folder: derived, never part of the lake.
GRAPH_COUNTS_FILE = "graph_counts.json"
_COUNTED = ("tenant", "type")


def graph_files_stamp(lake: Lake) -> str | None:
    """A digest of the path, size, mtime and inode of every file the `nodes` and `edges` views read (_layer_stamp;
    None on object storage, where each would be a request). The lake's files are only ever replaced whole (written
    to a temp file, renamed): the same stamp, the same rows."""
    if lake.remote:
        return None
    return hashlib.sha256(json.dumps(_layer_stamp(lake, "consolidated")).encode()).hexdigest()


def graph_counts(nodes: pa.Table, edges: pa.Table) -> dict[str, list]:
    """The rows of `nodes` and `edges` counted per (tenant, type), as record_graph_counts keeps them."""
    return {
        name: as_frame(table.select(list(_COUNTED)))
        .group_by(list(_COUNTED))
        .agg(pl.len().cast(pl.Int64).alias("rows"))
        .sort(list(_COUNTED), nulls_last=True)
        .rows()
        for name, table in (("nodes", nodes), ("edges", edges))
    }


def record_graph_counts(lake: Lake, stamp: str, counts: dict[str, list]) -> None:
    """Keep graph_counts of the consolidated graph as read_graph_tables gave it from the files of `stamp` (taken
    before they were read)."""
    lake.cache.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(lake.cache / GRAPH_COUNTS_FILE, json.dumps({"stamp": stamp, **counts}).encode("utf-8"))


def recorded_graph_counts(lake: Lake, name: str, columns: Sequence[str]) -> pl.DataFrame | None:
    """grouped_counts(lake, name, columns) from the counts record_graph_counts kept, when `name` is `nodes` or `edges`,
    `columns` are among (tenant, type) and the files are those they were counted from; else None."""
    if name not in ("nodes", "edges") or not columns or not set(columns) <= set(_COUNTED) or lake.remote:
        return None
    try:
        kept = json.loads((lake.cache / GRAPH_COUNTS_FILE).read_bytes())
    except (FileNotFoundError, ValueError):
        return None
    if kept.get("stamp") != graph_files_stamp(lake) or name not in kept:
        return None
    frame = pl.DataFrame(kept[name], schema={"tenant": pl.String, "type": pl.String, "rows": pl.Int64}, orient="row")
    return frame.group_by(list(columns)).agg(pl.col("rows").sum())


def counts_by(counts: pl.DataFrame, column: str) -> dict[str, int]:
    """{value: rows} of one column of grouped_counts' rows, largest first then by value (as
    raw_store.lake.value_counts orders them)."""
    summed = [(str(v), int(n)) for v, n in counts.group_by(column).agg(pl.col("rows").sum()).iter_rows()]
    return dict(sorted(summed, key=lambda vn: (-vn[1], vn[0])))


def layer_dir(lake: Lake, layer: str) -> Any:
    if layer not in LAYERS:
        raise ValueError(f"unknown graph layer {layer!r}")
    return lake.lake / layer


# the consolidated nodes' state columns (NODE_STATE), beside that layer's overlay: consolidation writes it every run
STATE_FILE = "state.parquet"


def state_path(lake: Lake) -> Any:
    return layer_dir(lake, "consolidated") / STATE_FILE


def _frame(table: pa.Table) -> pl.DataFrame:
    return as_frame(table)


def read_parts_graph(
    lake: Lake, node_columns: Sequence[str] | None = None, edge_columns: Sequence[str] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every partition's nodes and edges, concatenated (ids may repeat across partitions)."""
    return (
        _frame(read_parts(lake, "nodes", NODES, node_columns)),
        _frame(read_parts(lake, "edges", EDGES, edge_columns)),
    )


def _project(overlay: Overlay, schema: pa.Schema, columns: Sequence[str] | None) -> Overlay:
    if columns is None:
        return overlay
    return Overlay(overlay.upserts.select(list(columns)), overlay.removed)


def read_graph(
    lake: Lake,
    layer: str = "consolidated",
    node_columns: Sequence[str] | None = None,
    edge_columns: Sequence[str] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The graph of `layer` ("r2g" or "consolidated") as (nodes, edges) frames with the NODES / EDGES columns
    asked for (default all; the key columns tenant and id are always read)."""
    layers = LAYERS[: LAYERS.index(layer) + 1]
    ncols = _with_key(node_columns, NODES)
    ecols = _with_key(edge_columns, EDGES)
    state_cols = [c for c in ncols if c in STATE_COLUMNS]
    nodes, edges = read_parts_graph(lake, ncols, ecols)
    for name in layers:
        folder = layer_dir(lake, name)
        nodes = apply_overlay(nodes, _project(read_overlay(folder, "nodes", NODES), NODES, ncols))
        edges = apply_overlay(edges, _project(read_overlay(folder, "edges", EDGES), EDGES, ecols))
    if layer == "consolidated" and state_cols:
        state = _frame(read_table(state_path(lake), NODE_STATE).select([*KEY, *state_cols]))
        if state.height:
            nodes = nodes.drop(state_cols).join(state, on=list(KEY), how="left", maintain_order="left").select(ncols)
    return nodes, edges


def read_graph_columns(
    lake: Lake, layer: str, node_columns: Sequence[str] | None, edge_columns: Sequence[str] | None
) -> tuple[pa.Table, pa.Table]:
    """The `layer`'s nodes and edges as Arrow tables of exactly the columns asked for (default all), from one
    read_graph: where a step needs both, two read_lake_table calls would assemble the graph's keys twice."""
    nodes, edges = read_graph(lake, layer, node_columns, edge_columns)
    out = []
    for frame, schema, columns in ((nodes, NODES, node_columns), (edges, EDGES, edge_columns)):
        table = conform(frame.to_arrow(), schema)
        out.append(table.select(list(columns)) if columns is not None else table)
    return out[0], out[1]


def read_graph_tables(
    lake: Lake,
    layer: str = "consolidated",
    node_columns: Sequence[str] | None = None,
    edge_columns: Sequence[str] | None = None,
) -> tuple[pa.Table, pa.Table]:
    """read_graph as Arrow tables sorted by (tenant, id), with the full NODES / EDGES schemas, or with only the key
    columns and `node_columns` / `edge_columns` (in the schema's order): only those are read from the partitions,
    and of tables handed over only those are kept, so a step that uses a few columns (the index step: edges' ends,
    type and weight) does not hold the rest (raw_refs, provenance: half the edges' bytes)."""
    nodes_schema, edges_schema = _projected(NODES, node_columns), _projected(EDGES, edge_columns)
    held = _HANDED_OVER.pop((str(lake.root), layer), None)
    if held is not None and held[0] == _layer_stamp(lake, layer):
        return held[1].select(nodes_schema.names), held[2].select(edges_schema.names)
    del held
    folders = [layer_dir(lake, name) for name in LAYERS[: LAYERS.index(layer) + 1]]
    nodes = layered_table(
        read_parts(lake, "nodes", NODES, nodes_schema.names), [read_overlay(f, "nodes", nodes_schema) for f in folders]
    )
    edges = layered_table(
        read_parts(lake, "edges", EDGES, edges_schema.names), [read_overlay(f, "edges", edges_schema) for f in folders]
    )
    state_columns = [c for c in STATE_COLUMNS if c in nodes_schema.names]
    if layer == "consolidated" and state_columns:
        state = read_table(state_path(lake), NODE_STATE)
        if state.num_rows:
            # each node's row of the state table (none: nulls, as read_graph's left join gives)
            at = (
                as_frame(nodes.select(list(KEY)))
                .join(
                    as_frame(state.select(list(KEY))).with_row_index("_s"),
                    on=list(KEY),
                    how="left",
                    maintain_order="left",
                )
                .get_column("_s")
                .to_arrow()
            )
            for name in state_columns:
                i = nodes.schema.get_field_index(name)
                nodes = nodes.set_column(i, NODES.field(name), state.column(name).take(at).cast(NODES.field(name).type))
    return nodes, edges


def _projected(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    """`schema`, or its key columns and `columns` in its order (an unknown name is an error, not a column of nulls)."""
    if columns is None:
        return schema
    wanted = set(_with_key(columns, schema))
    unknown = wanted - set(schema.names)
    if unknown:
        raise KeyError(f"not columns of the graph tables: {sorted(unknown)}")
    return pa.schema([f for f in schema if f.name in wanted])


# (lake root, layer) → (the layer's files' stamp, nodes, edges): tables a step has just written, for the next step
_HANDED_OVER: dict[tuple[str, str], tuple[tuple, pa.Table, pa.Table]] = {}


def hand_over_graph_tables(lake: Lake, layer: str, nodes: pa.Table, edges: pa.Table) -> None:
    """Give the tables a step just wrote as `layer` (what read_graph_tables would assemble from the files: NODES /
    EDGES, sorted by (tenant, id)) to the next read_graph_tables of that layer in this process, which takes them
    once, while the layer's files are unchanged: the lake run's index step then does not assemble again the graph
    consolidation had in hand (~10 s at 100k messages). A step in another process reads the files."""
    if not lake.remote:
        _HANDED_OVER[(str(lake.root), layer)] = (_layer_stamp(lake, layer), nodes, edges)


def _layer_stamp(lake: Lake, layer: str) -> tuple:
    """(path, size, mtime, inode) of every file the graph of `layer` is assembled from (a file rewritten within the
    clock's granularity, at the same size, is still a new inode: every write renames a new file in)."""
    files = [*part_paths(lake, "nodes"), *part_paths(lake, "edges")]
    for name in LAYERS[: LAYERS.index(layer) + 1]:
        folder = layer_dir(lake, name)
        files += [folder / f"{table}{suffix}.parquet" for table in ("nodes", "edges") for suffix in ("", "_removed")]
    if layer == "consolidated":
        files.append(state_path(lake))
    stamp = []
    for f in files:
        try:
            st = f.stat()
            stamp.append((str(f), st.st_size, st.st_mtime_ns, st.st_ino))
        except FileNotFoundError:
            stamp.append((str(f), None, None, None))
    return tuple(stamp)


def _with_key(columns: Sequence[str] | None, schema: pa.Schema) -> list[str]:
    if columns is None:
        return list(schema.names)
    return [*KEY, *[c for c in columns if c not in KEY]]


# DuckDB's share of a lake-wide key scan's memory (the merge overlay's, the counts); past it the scan spills to a
# temporary folder
KEY_SCAN_MEMORY = "1GB"


@contextmanager
def _key_scan(lake: Lake) -> Iterator[duckdb.DuckDBPyConnection]:
    with tempfile.TemporaryDirectory(prefix="memctl-keys-") as spill:
        con = duckdb.connect(config={"memory_limit": KEY_SCAN_MEMORY, "temp_directory": spill})
        try:
            if lake.remote:
                con.register_filesystem(lake.root.fs)
            yield con
        finally:
            con.close()


# ------------------------------------------------------------------------------------------ FTS documents


def content_hash(frame: pl.DataFrame, kind: str) -> pl.Expr:
    """The hash of what a document is made from: a node's title, text and keywords, a chunk's text."""
    cols = ["title", "text", "keywords"] if kind == "node" else ["text"]
    return pl.struct(cols).hash(seed=11).alias("content")


def make_docs(frame: pl.DataFrame, kind: str) -> pa.Table:
    """DOCS rows for `frame` (tenant, id and, for kind "node", title/text/keywords; for "raw", text)."""
    from r2g.tokens import fts_documents, node_doc_text

    if frame.height == 0:
        return DOCS.empty_table()
    frame = frame.with_columns(content_hash(frame, kind))
    memo: dict[str, list[str]] = {}  # jieba once per distinct piece of these texts (r2g.tokens.han_tokens)
    if kind == "node":
        text = frame.select(node_doc_text(pl.col("title"), pl.col("text"), pl.col("keywords"))).to_series()
    else:
        text = frame.get_column("text")
    out = frame.select("tenant", "id", "content").with_columns(fts_documents(text, memo).alias("doc"))
    return conform(out.to_arrow(), DOCS)


def file_docs(nodes: pa.Table, chunks: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The DOCS a file run makes for its own rows (the partition's `docs` and `raw_docs` files): its nodes and raw
    passages that hold Han, whose jieba segmentation is the cost, paid on the file's worker; the lake's index build
    takes them from there while a row's content is unchanged (other documents take microseconds to make).

    Concepts are left to the index build: their titles and keywords are the concept dictionary's bilingual labels,
    the same in every file, so the index makes each once per lake and keeps it in its cache (recall.index.NodeDocs),
    and the run of a file of English messages loads no jieba (1.2–1.6 s a process: a daily append's)."""
    from r2g.tokens import han_in

    node_text = as_frame(nodes.select(["tenant", "id", "type", "title", "text", "keywords"]))
    han = han_in(pl.concat_str("title", "text", pl.col("keywords").list.join(" "), ignore_nulls=True))
    node_docs = make_docs(node_text.filter(han & (pl.col("type") != "Concept").fill_null(True)), "node")
    passages = as_frame(chunks.select(["tenant", "id", "text", "mime"]))
    # passages are chat text; an agent ops file kept whole for its citations is not a passage to search
    is_passage = pl.col("mime").is_null() | pl.col("mime").str.starts_with("text/plain")
    return node_docs, make_docs(passages.filter(is_passage & han_in(pl.col("text"))), "raw")


def part_docs(lake: Lake, kind: str) -> pl.DataFrame:
    """The DOCS rows the partitions hold (`docs` / `raw_docs` files): each file's documents of Chinese rows."""
    return as_frame(read_parts(lake, "docs" if kind == "node" else "raw_docs", DOCS))


def lake_docs(
    lake: Lake, rows: pl.DataFrame, kind: str, cached: pl.DataFrame | None = None, parts: pl.DataFrame | None = None
) -> pl.DataFrame:
    """DOCS of `rows` (the logical table's tenant, id and source columns) plus a `source` column: "parts" where the
    row's content is the one a partition indexed (`docs` / `raw_docs` files), "cache" where it is one of `cached`
    (DOCS rows an earlier build made), "made" for the rest (merged, edited, consolidation-made rows). `parts`: the
    partitions' documents when the caller has read them already (part_docs)."""
    if rows.height == 0:
        return _frame(DOCS.empty_table()).with_columns(pl.lit(None, pl.Utf8).alias("source"))
    rows = rows.with_columns(content_hash(rows, kind))
    stored = (part_docs(lake, kind) if parts is None else parts).with_columns(pl.lit("parts").alias("source"))
    if cached is not None and cached.height:
        stored = pl.concat(
            [stored, cached.select(DOCS.names).with_columns(pl.lit("cache").alias("source"))], how="vertical_relaxed"
        )
    stored = stored.unique(["tenant", "id", "content"], keep="first", maintain_order=True)
    found = rows.select("tenant", "id", "content").join(stored, on=["tenant", "id", "content"], how="inner")
    missing = rows.join(found.select(KEY), on=list(KEY), how="anti")
    made = _frame(make_docs(missing.drop("content"), kind)).with_columns(pl.lit("made").alias("source"))
    return pl.concat([found.select(*DOCS.names, "source"), made.select(*DOCS.names, "source")], how="vertical_relaxed")


# ----------------------------------------------------------------------------------------------- SQL


def _sql_path(path: Any) -> str:
    return "'" + _sql_name(path).replace("'", "''") + "'"


def _sql_name(path: Any) -> str:
    """The file name DuckDB reads (and reports in a `filename` column) for `path`."""
    return str(path) if not is_remote(path) else path.as_uri() if hasattr(path, "as_uri") else str(path)


def _sql_list(paths: Sequence[Any]) -> str:
    return "[" + ", ".join(_sql_path(p) for p in paths) + "]"


def _empty_select(schema: pa.Schema) -> str:
    cols = ", ".join(f'CAST(NULL AS {duckdb_type(f.type)}) AS "{f.name}"' for f in schema)
    return f"SELECT {cols} WHERE false"


def union_sql(paths: Sequence[Any], schema: pa.Schema) -> str:
    """SELECT of the union of Parquet files written with `schema` (an empty SELECT when there are none)."""
    if not paths:
        return _empty_select(schema)
    cols = ", ".join(f'"{c}"' for c in schema.names)
    return f"SELECT {cols} FROM read_parquet({_sql_list(paths)}, union_by_name = true)"


def parts_sql(lake: Lake, name: str, schema: pa.Schema, glob: bool = False) -> str:
    """SELECT of the union of the partitions' `name` files: the files there are now, or with `glob` a pattern
    that also takes in files added later (a view that never needs rebuilding for a new inbox file)."""
    paths = part_paths(lake, name)
    if glob and paths and not is_remote(lake.parts):
        cols = ", ".join(f'"{c}"' for c in schema.names)
        return (
            f"SELECT {cols} FROM read_parquet({_sql_path(lake.parts / '*' / f'{name}.parquet')}, union_by_name = true)"
        )
    return union_sql(paths, schema)


def graph_sql(lake: Lake, glob: bool = False) -> dict[str, str]:
    """{view name: SELECT} for r2g_nodes, r2g_edges, nodes and edges over the lake's files (see parts_sql)."""
    out: dict[str, str] = {}
    bases = {"nodes": parts_sql(lake, "nodes", NODES, glob), "edges": parts_sql(lake, "edges", EDGES, glob)}
    for layer in LAYERS:
        folder = layer_dir(lake, layer)
        for name, schema in (("nodes", NODES), ("edges", EDGES)):
            upserts, removed = folder / f"{name}.parquet", folder / f"{name}_removed.parquet"
            if _exists(upserts) and _exists(removed):
                bases[name] = overlay_sql(bases[name], _sql_path(upserts), _sql_path(removed), schema.names)
            out[f"{'r2g_' if layer == 'r2g' else ''}{name}"] = bases[name]
    state = state_path(lake)
    if _exists(state):
        cols = ", ".join(f's."{c}"' if c in STATE_COLUMNS else f'n."{c}"' for c in NODES.names)
        on = " AND ".join(f'n."{k}" = s."{k}"' for k in KEY)
        out["nodes"] = (
            f"SELECT {cols} FROM ({out['nodes']}) AS n LEFT JOIN read_parquet({_sql_path(state)}) AS s ON {on}"
        )
    return out


def lake_views(lake: Lake, glob: bool = False) -> dict[str, str]:
    """{table name: SELECT} for every lake table (UNION_TABLES, GRAPH_TABLES, FILE_TABLES): what the DuckDB file's
    views, and `memctl sql --parquet`, read (`glob`: see parts_sql)."""
    views = {name: parts_sql(lake, name, schema, glob) for name, schema in UNION_TABLES.items()}
    # a RawChunk stored by two identical inbox files is one blob: one row (the first file's)
    cols = ", ".join(f'"{c}"' for c in RAW_CHUNKS.names)
    views["raw_chunks"] = (
        f"SELECT {cols} FROM ({views['raw_chunks']}) QUALIFY row_number() OVER "
        "(PARTITION BY tenant, id ORDER BY source_file, seq) = 1"
    )
    views.update(graph_sql(lake, glob))
    for name, schema in FILE_TABLES.items():
        path = lake.table(name)
        views[name] = union_sql([path], schema) if _exists(path) else _empty_select(schema)
    return views


def _exists(path: Any) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


__all__ = [
    "LAYERS",
    "REMOVED",
    "counts_by",
    "graph_sql",
    "grouped_counts",
    "layer_dir",
    "read_graph",
    "read_graph_tables",
    "read_parts_graph",
    "union_sql",
]
