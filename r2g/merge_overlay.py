"""The merge overlay over the partitions' graph parts (`lake/r2g/`), whole or over the partitions added since.

Ids found in more than one partition → one merged row (r2g.merge); the nodes of forget requests and every edge
touching one → removed; then SAME_AS / SUPPORTS / CONTRADICTS between the Facts of the whole lake (r2g.link) →
added, where no partition edge has the id already.

A run after one that left its **snapshot** (`lake/r2g/steps/`: the linkable Facts, the keys of the merged edges
among the edge upserts (the others are the links it made), and in `merge.json` a hash of each partition's graph
files, of its own files and of the code and forget set) and where partitions were only added redoes only what
they touch, since every step is local:
- merged rows: an id's merged row depends on that id's rows alone, so only the ids with a row in a new partition
  are merged again (all their rows, from every partition);
- removals: with the same forget set, a new partition adds its own rows that touch a forgotten node;
- fact links: a link never leaves its link group and a Fact's linkable row depends on its own row and role edges
  (r2g.link.linkable), so the groups of the Facts a new partition has a node or an edge out of are linked again.
Anything else (a partition changed or gone, another forget set or code, a snapshot not matching the overlay's
files, `full`) runs whole. Both ways give the same bytes (tests/test_merge_overlay.py).

Bounded memory: the lake-wide questions (which ids repeat, the rows of some ids, which edges touch a forgotten
node) are asked of DuckDB over the Parquet parts (it spills past its memory limit); a whole run reads rows one
partition at a time and only those a step needs. Holding every edge's keys (and polars' hash tables over them)
cost 2.2 GB at 100k messages and passed 16 GB at 1M.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from r2g.lake_graph import _key_scan, _project, _sql_list, _sql_name, layer_dir, union_sql
from r2g.link import LINK_GROUP, LINK_NODE_COLUMNS, LINK_TYPES, LINKABLE, LINKABLE_ORDER, linkable, links_of
from r2g.merge import merge_edges, merge_nodes
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame, keep_rows
from raw_store.lake import Lake, conform, file_bytes, local_copies, table_bytes, write_bytes_atomic
from raw_store.tables import KEY, REMOVED, Overlay, apply_overlay, hash_code, part_paths, read_parts

LINK_EDGE_TYPES = ("AGENT", "PATIENT", "LOCATION")
_CODE = ("r2g", "raw_store")  # packages whose source the overlay runs (any edit: a whole run)
_FILES = {  # the snapshot's and the overlay's files: name → schema
    "nodes": NODES,
    "nodes_removed": REMOVED,
    "edges": EDGES,
    "edges_removed": REMOVED,
    "steps/merged_edges": REMOVED,  # (tenant, id) of the merged edge upserts; the other upserts are links
    "steps/linkable": LINKABLE,
}


@dataclass
class MergeRun:
    nodes: Overlay
    edges: Overlay
    links: pa.Table  # the fact links made (EDGES), among the edge upserts
    facts: pl.DataFrame  # the linkable Facts (LINKABLE, in LINKABLE_ORDER)
    parts: dict[str, str]  # partition folder → hash of its graph files
    fingerprint: str
    mode: str  # "full" | "incremental"
    reason: str  # why a run was whole ("" if incremental)
    new_parts: int  # partitions merged in (all of them when whole)
    kept: bool = False  # the last run's overlay and snapshot as they are: the files on disk are this run's


def r2g_overlays(lake: Lake, dropped: set[tuple[str, str]] | frozenset = frozenset(), full: bool = False) -> MergeRun:
    """The merge overlay (see the module doc), from the last run's snapshot where only partitions were added."""
    node_paths, edge_paths = part_paths(lake, "nodes"), part_paths(lake, "edges")
    fingerprint = _fingerprint(dropped)
    # on object storage the parts are fetched once (DuckDB's scans and the row reads would ask again)
    with local_copies(lake, [*node_paths, *edge_paths]) as local:
        nodes, edges = [local(p) for p in node_paths], [local(p) for p in edge_paths]
        parts = _part_hashes(node_paths, nodes, edge_paths, edges)
        before, reason = (None, "a full rebuild was asked") if full else _read_snapshot(lake, fingerprint, parts)
        if before is None:
            run = _whole(lake, nodes, edges, dropped)
            return MergeRun(*run, parts, fingerprint, "full", reason, len(parts))
        new = {p for p in parts if p not in before.parts}
        if not new:  # the partitions of the last run: its overlay and snapshot as they are (a run for hits, a date)
            return MergeRun(
                before.nodes, before.edges, before.links, before.facts, parts, fingerprint, "incremental", "", 0, True
            )
        run = _added(lake, before, nodes, edges, new, dropped)
        return MergeRun(*run, parts, fingerprint, "incremental", "", len(new))


def write_merge_overlay(lake: Lake, run: MergeRun) -> None:
    """The overlay's files, then the snapshot's, then `merge.json` with every file's hash (a run stopped part way
    leaves a snapshot that does not match, and the next run is whole). A `kept` run writes nothing: its snapshot
    was read from those files, checked against merge.json's hashes, with the same partitions and fingerprint (a
    daily run encoded every table again to find the same bytes: ~0.3 s at 100k messages)."""
    if run.kept:
        return
    folder = layer_dir(lake, "r2g")
    tables = {
        "nodes": run.nodes.upserts,
        "nodes_removed": run.nodes.removed,
        "edges": run.edges.upserts,
        "edges_removed": run.edges.removed,
        "steps/merged_edges": as_frame(run.edges.upserts.select(list(KEY)))
        .join(as_frame(run.links.select(list(KEY))), on=KEY, how="anti", maintain_order="left")
        .to_arrow(),
        "steps/linkable": run.facts.to_arrow(),
    }
    hashes = {}
    for name, schema in _FILES.items():
        data = table_bytes(tables[name], schema)
        write_bytes_atomic(folder / f"{name}.parquet", data)
        hashes[name] = _hash(data)
    state = {"fingerprint": run.fingerprint, "parts": run.parts, "files": hashes}
    write_bytes_atomic(folder / "steps" / "merge.json", json.dumps(state, sort_keys=True).encode("utf-8"))


# ------------------------------------------------------------------------------------------------ snapshot


@dataclass
class _Before:
    parts: dict[str, str]
    nodes: Overlay
    edges: Overlay
    links: pa.Table
    facts: pl.DataFrame


def _read_snapshot(lake: Lake, fingerprint: str, parts: dict[str, str]) -> tuple[_Before | None, str]:
    """The last run's snapshot if this run may start from it, else (None, why not)."""
    folder = layer_dir(lake, "r2g")
    try:
        state = json.loads(file_bytes(folder / "steps" / "merge.json"))
    except (FileNotFoundError, ValueError):
        return None, "no snapshot of an earlier run"
    if state.get("fingerprint") != fingerprint:
        return None, "the code or the forget requests changed"
    old = state.get("parts", {})
    if any(parts.get(p) != h for p, h in old.items()):
        return None, "a partition changed or went"
    tables = {}
    for name, schema in _FILES.items():
        try:
            data = file_bytes(folder / f"{name}.parquet")
        except FileNotFoundError:
            return None, "the snapshot is incomplete"
        if _hash(data) != state.get("files", {}).get(name):
            return None, "the snapshot does not match the overlay's files"
        tables[name] = conform(pq.read_table(pa.BufferReader(data)), schema)
    return (
        _Before(
            old,
            Overlay(tables["nodes"], tables["nodes_removed"]),
            Overlay(tables["edges"], tables["edges_removed"]),
            conform(
                keep_rows(as_frame(tables["edges"]), as_frame(tables["steps/merged_edges"]), KEY, hit=False).to_arrow(),
                EDGES,
            ),
            as_frame(tables["steps/linkable"]),
        ),
        "",
    )


def _fingerprint(dropped: set[tuple[str, str]] | frozenset) -> str:
    h = hash_code(hashlib.sha256(), _CODE, ("polars", "pyarrow", "duckdb"))
    for tenant, node in sorted(dropped):
        h.update(f"{tenant}\x1f{node}\x1e".encode())
    return h.hexdigest()


def _part_of(path: Any) -> str:
    return str(path).rstrip("/").rsplit("/", 2)[-2]


def _part_hashes(node_paths: list[Any], nodes: list[Any], edge_paths: list[Any], edges: list[Any]) -> dict[str, str]:
    """Partition folder → a hash of its nodes and edges files' bytes (read from the local copies)."""
    out: dict[str, Any] = {}
    for paths, local in ((node_paths, nodes), (edge_paths, edges)):
        for p, q in zip(paths, local):
            h = out.setdefault(_part_of(p), hashlib.blake2b(digest_size=16))
            h.update(str(p).rsplit("/", 1)[-1].encode())
            h.update(file_bytes(q))
    return {p: h.hexdigest() for p, h in sorted(out.items())}


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# ---------------------------------------------------------------------------------------------- whole run


def _whole(
    lake: Lake, node_paths: list[Any], edge_paths: list[Any], dropped: set[tuple[str, str]] | frozenset
) -> tuple[Overlay, Overlay, pa.Table, pl.DataFrame]:
    gone = _gone(dropped)
    with _key_scan(lake) as con:
        dup_node_keys = _repeated_keys(con, node_paths, NODES)
        dup_edge_keys = _repeated_keys(con, edge_paths, EDGES)
        removed_nodes, removed_edges = _touching(con, node_paths, edge_paths, gone)
    # each part read once: its repeated rows (to merge), and the rows the lake-wide fact links need
    dup_nodes, fact_rows = _rows_with_ids(
        lake, "nodes", NODES, node_paths, dup_node_keys, LINK_NODE_COLUMNS, pc.field("type") == "Fact"
    )
    # the role edges, and the link edges the parts have already (link_facts leaves those links out)
    wanted = pc.field("type").isin([*LINK_EDGE_TYPES, *LINK_TYPES])
    dup_edges, typed = _rows_with_ids(
        lake, "edges", EDGES, edge_paths, dup_edge_keys, ["tenant", "id", "src", "dst", "type"], wanted
    )
    merged_nodes = merge_nodes(dup_nodes).join(gone, on=["tenant", "id"], how="anti")
    merged_edges = merge_edges(dup_edges).join(removed_edges, on=["tenant", "id"], how="anti")
    del dup_nodes, dup_edges
    node_overlay = Overlay(conform(merged_nodes.to_arrow(), NODES), conform(removed_nodes.to_arrow(), REMOVED))
    facts = _linkable_facts(fact_rows, typed, node_overlay, removed_edges)
    del fact_rows
    links = links_of(facts, existing=typed.filter(pl.col("type").is_in(LINK_TYPES)).select(_LINK_KEY))
    return _overlays(merged_nodes, removed_nodes, merged_edges, removed_edges, links, facts)


_LINK_KEY = ["tenant", "src", "type", "dst"]


def _linkable_facts(
    fact_rows: pl.DataFrame, typed: pl.DataFrame, node_overlay: Overlay, removed_edges: pl.DataFrame
) -> pl.DataFrame:
    """r2g.link.linkable over the Facts of `fact_rows` (partition rows, LINK_NODE_COLUMNS) under the node overlay,
    with the role edges of `typed` that the overlay keeps."""
    facts = apply_overlay(fact_rows, _project(node_overlay, NODES, LINK_NODE_COLUMNS))
    facts = facts.filter(pl.col("type") == "Fact").unique(["tenant", "id"], keep="first", maintain_order=True)
    roles = typed.filter(pl.col("type").is_in(LINK_EDGE_TYPES)).join(removed_edges, on=KEY, how="anti")
    return linkable(conform(facts.to_arrow(), NODES), conform(roles.to_arrow(), EDGES))


def _overlays(
    merged_nodes: pl.DataFrame,
    removed_nodes: pl.DataFrame,
    merged_edges: pl.DataFrame,
    removed_edges: pl.DataFrame,
    links: pa.Table,
    facts: pl.DataFrame,
) -> tuple[Overlay, Overlay, pa.Table, pl.DataFrame]:
    by_key = [(k, "ascending") for k in KEY]
    links = conform(links, EDGES).sort_by(by_key)
    upserts = pl.concat([merged_edges, as_frame(links)], how="vertical_relaxed").sort(list(KEY))
    return (
        Overlay(
            conform(merged_nodes.to_arrow(), NODES).sort_by(by_key),
            conform(removed_nodes.to_arrow(), REMOVED).sort_by(by_key),
        ),
        Overlay(conform(upserts.to_arrow(), EDGES), conform(removed_edges.sort(list(KEY)).to_arrow(), REMOVED)),
        links,
        facts,
    )


# ------------------------------------------------------------------------------------ partitions added


def _added(
    lake: Lake,
    before: _Before,
    node_paths: list[Any],
    edge_paths: list[Any],
    new: set[str],
    dropped: set[tuple[str, str]] | frozenset,
) -> tuple[Overlay, Overlay, pa.Table, pl.DataFrame]:
    """The whole run's result from the last run's and the partitions in `new` (see the module doc)."""
    gone = _gone(dropped)
    new_nodes = [p for p in node_paths if _part_of(p) in new]
    new_edges = [p for p in edge_paths if _part_of(p) in new]
    with _key_scan(lake) as con:  # one DuckDB session for every lookup over the parts
        # the ids with a row in a new partition: merged again where they now have more than one row
        node_ids, edge_ids = _ids(con, new_nodes, "id"), _ids(con, new_edges, "id")
        dup_nodes = _rows_of_repeated(con, node_paths, NODES, node_ids)
        dup_edges = _rows_of_repeated(con, edge_paths, EDGES, edge_ids)
        added_nodes, added_edges = _touching(con, new_nodes, new_edges, gone)
        # the Facts whose linkable row or group may change: a node row, or a role or link edge out, in a new part
        touched = pl.concat([node_ids, _ids(con, new_edges, "src", (*LINK_EDGE_TYPES, *LINK_TYPES))]).unique()
        fact_rows = _rows_in(con, node_paths, NODES, LINK_NODE_COLUMNS, touched, "id", ("Fact",))
        typed = _rows_in(con, edge_paths, EDGES, _TYPED, touched, "src", LINK_EDGE_TYPES)
        removed_nodes = _union_keys(before.nodes.removed, added_nodes)
        removed_edges = _union_keys(before.edges.removed, added_edges)
        merged_nodes = pl.concat(
            [
                keep_rows(as_frame(before.nodes.upserts), node_ids, ["id"], hit=False),
                merge_nodes(dup_nodes).join(gone, on=KEY, how="anti"),
            ],
            how="vertical_relaxed",
        )
        merged_edges = pl.concat(
            [
                keep_rows(
                    keep_rows(as_frame(before.edges.upserts), as_frame(before.links.select(list(KEY))), KEY, hit=False),
                    edge_ids,
                    ["id"],
                    hit=False,
                ),
                merge_edges(dup_edges),
            ],
            how="vertical_relaxed",
        )
        merged_edges = keep_rows(merged_edges, removed_edges, KEY, hit=False)
        # the touched Facts' linkable rows, under the overlay's rows of those Facts alone
        mine = Overlay(
            conform(keep_rows(merged_nodes, touched, ["id"], hit=True).to_arrow(), NODES), REMOVED.empty_table()
        )
        redone = _linkable_facts(fact_rows.join(removed_nodes, on=KEY, how="anti"), typed, mine, removed_edges)
        # every Fact of a group a touched Fact was in or is in now is linked again
        was = keep_rows(before.facts, touched, ["id"], hit=True)
        groups = pl.concat([was.select(LINK_GROUP), redone.select(LINK_GROUP)]).unique()
        facts = pl.concat([keep_rows(before.facts, touched, ["id"], hit=False), redone]).sort(
            LINKABLE_ORDER, nulls_last=True
        )
        relinked = keep_rows(facts, groups, LINK_GROUP, hit=True, nulls_equal=True)
        existing = _rows_in(con, edge_paths, EDGES, _LINK_KEY, relinked.select("id").unique(), "src", LINK_TYPES)
    stale = pl.concat([relinked.select(KEY), was.select(KEY)]).rename({"id": "src"})
    links = pl.concat(
        [
            keep_rows(as_frame(before.links), stale, ["tenant", "src"], hit=False),
            as_frame(links_of(relinked, existing=existing)),
        ],
        how="vertical_relaxed",
    )
    return _overlays(merged_nodes, removed_nodes, merged_edges, removed_edges, links.to_arrow(), facts)


_TYPED = ["tenant", "id", "src", "dst", "type"]


def _gone(dropped: set[tuple[str, str]] | frozenset) -> pl.DataFrame:
    return pl.DataFrame(sorted(dropped), schema={"tenant": pl.String, "id": pl.String}, orient="row")


def _union_keys(before: pa.Table, added: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([as_frame(before), added], how="vertical_relaxed").unique(maintain_order=True)


def _ids(con: duckdb.DuckDBPyConnection, paths: Sequence[Any], column: str, types: Sequence[str] = ()) -> pl.DataFrame:
    """The distinct values of `column` in the parts `paths` (of rows whose type is in `types`, if given), as "id"."""
    if not paths:
        return pl.DataFrame(schema={"id": pl.String})
    where = f" WHERE type IN ({_sql_strings(types)})" if types else ""
    sql = f'SELECT DISTINCT "{column}" AS id FROM read_parquet({_sql_list(paths)}, union_by_name = true){where}'
    return con.sql(sql).pl().select(pl.col("id").cast(pl.String)).drop_nulls()


def _sql_strings(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def _rows_in(
    con: duckdb.DuckDBPyConnection,
    paths: Sequence[Any],
    schema: pa.Schema,
    columns: Sequence[str],
    ids: pl.DataFrame,
    column: str,
    types: Sequence[str] = (),
) -> pl.DataFrame:
    """The `columns` of the parts' rows whose `column` is one of `ids` (and type one of `types`, if given)."""
    sub = pa.schema([schema.field(c) for c in columns])
    if not paths or ids.height == 0:
        return as_frame(sub.empty_table())
    con.register("wanted", ids.select("id").to_arrow())
    where = f'"{column}" IN (SELECT id FROM wanted)' + (f" AND type IN ({_sql_strings(types)})" if types else "")
    cols = ", ".join(f'"{c}"' for c in columns)
    try:
        got = con.sql(f"SELECT {cols} FROM ({union_sql(paths, schema)}) WHERE {where}").fetch_arrow_table()
    finally:
        con.unregister("wanted")
    return as_frame(conform(got, sub))


def _rows_of_repeated(
    con: duckdb.DuckDBPyConnection, paths: Sequence[Any], schema: pa.Schema, ids: pl.DataFrame
) -> pl.DataFrame:
    """Every row of the parts whose id is one of `ids` and in more than one row of the parts (_repeated_keys)."""
    rows = _rows_in(con, paths, schema, schema.names, ids, "id")
    return rows.filter(pl.col("id").is_duplicated())


# ------------------------------------------------------------------------------------------ DuckDB


def _keys_sql(paths: Sequence[Any], schema: pa.Schema, columns: Sequence[str]) -> str:
    return union_sql(paths, pa.schema([schema.field(c) for c in columns]))


def _key_frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    return as_frame(conform(con.sql(sql).fetch_arrow_table(), REMOVED))


def _repeated_keys(con: duckdb.DuckDBPyConnection, paths: Sequence[Any], schema: pa.Schema) -> pl.DataFrame:
    """(tenant, id, part) of the rows whose id is in more than one row of the parts, `part` the position in `paths`
    of a part that has such a row."""
    if not paths:
        return pl.DataFrame(schema={"tenant": pl.String, "id": pl.String, "part": pl.UInt32})
    parts = f"SELECT tenant, id, filename FROM read_parquet({_sql_list(paths)}, union_by_name = true, filename = true)"
    found = con.sql(
        f"SELECT DISTINCT tenant, id, filename FROM ({parts}) WHERE id IN "
        f"(SELECT id FROM ({parts}) GROUP BY id HAVING count(*) > 1)"
    ).pl()
    names = pl.DataFrame({"filename": [_sql_name(p) for p in paths]}).with_row_index("part")
    return found.join(names, on="filename").select("tenant", "id", "part").sort("part", "tenant", "id")


def _touching(
    con: duckdb.DuckDBPyConnection, node_paths: Sequence[Any], edge_paths: Sequence[Any], gone: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The (tenant, id) of the parts' nodes in `gone`, and of their edges with an end in `gone`."""
    if gone.height == 0:
        empty = as_frame(REMOVED.empty_table())
        return empty, empty
    con.register("gone", gone.to_arrow())
    nodes = _keys_sql(node_paths, NODES, KEY)
    edges = _keys_sql(edge_paths, EDGES, ["tenant", "id", "src", "dst"])
    return (
        _key_frame(con, f"SELECT DISTINCT n.tenant, n.id FROM ({nodes}) AS n SEMI JOIN gone USING (tenant, id)"),
        _key_frame(
            con,
            f"SELECT DISTINCT e.tenant, e.id FROM ({edges}) AS e WHERE EXISTS "
            "(SELECT 1 FROM gone AS g WHERE g.tenant = e.tenant AND (g.id = e.src OR g.id = e.dst))",
        ),
    )


def _rows_with_ids(
    lake: Lake,
    name: str,
    schema: pa.Schema,
    paths: Sequence[Any],
    keys: pl.DataFrame,
    columns: Sequence[str],
    where: pc.Expression,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """From one read of each partition's `name` table, in partition order: (the whole rows whose (tenant, id) is in
    `keys` (tenant, id, part: which of `paths` has them, _repeated_keys), the `columns` of the rows where `where`
    holds). Each part's rows are looked up by its own ids: one lookup set of every repeated id, rebuilt for each of
    479 parts, was 110 of 180 CPU-s of the merge at 1M messages; and a part is decoded once, not once a question.

    Filtered in Arrow, which copies the rows it keeps: a polars join's gathered strings keep pointing into the
    whole partition's buffers, so the hits of every partition held all of their files (0.3 GB at 100k messages)."""
    wanted_in = {
        int(part): wanted.select(KEY).unique(maintain_order=True)
        for (part,), wanted in keys.group_by("part", maintain_order=True)
    }
    hits, rows = [], []
    for i, path in enumerate(paths):
        table = read_parts(lake, name, schema, paths=[path])
        if not table.num_rows:
            continue
        wanted = wanted_in.get(i)
        if wanted is not None:
            ids = pa.array(wanted.get_column("id").unique().to_list(), pa.string())
            found = as_frame(table.filter(pc.field("id").isin(ids)))
            hits.append(found.join(wanted, on=list(KEY), how="semi", maintain_order="left"))
        rows.append(table.select(list(columns)).filter(where))
    sub = pa.schema([schema.field(c) for c in columns])
    return (
        pl.concat(hits) if hits else as_frame(schema.empty_table()),
        as_frame(pa.concat_tables(rows) if rows else sub.empty_table()),
    )
