"""The lake's logical tables (raw_store.tables, r2g.lake_graph): overlays, their SQL twin, imports, docs."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from r2g.lake_graph import lake_docs, lake_views, layer_dir, read_graph, read_graph_tables, read_lake_table
from r2g.schema import EDGES, NODE_STATE, NODES
from raw_store import frames, tables
from raw_store.frames import (
    columns_of,
    keep_rows,
    key_order,
    per_column,
    sort_stable,
    sorted_by,
    take_columns,
    take_rows,
)
from raw_store.lake import Lake, write_table
from raw_store.tables import (
    REMOVED,
    Overlay,
    apply_overlay,
    diff_overlay,
    key128,
    layered_table,
    part_paths,
    read_overlay,
    read_parts,
    row_hashes,
    write_import,
    write_overlay,
)

ROOT = Path(__file__).resolve().parent.parent

SMALL = pa.schema([("tenant", pa.string()), ("id", pa.string()), ("v", pa.int64()), ("tag", pa.string())])

rows = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b"]), st.text("xyz", min_size=1, max_size=3)),
    st.tuples(st.integers(0, 3), st.sampled_from([None, "p", "q"])),
    max_size=12,
)


def _frame(d: dict) -> pl.DataFrame:
    return pl.DataFrame(
        [{"tenant": t, "id": i, "v": v, "tag": g} for (t, i), (v, g) in sorted(d.items())],
        schema={"tenant": pl.String, "id": pl.String, "v": pl.Int64, "tag": pl.String},
    )


@settings(max_examples=60, deadline=None)
@given(rows, rows)
def test_an_overlay_turns_the_base_into_the_target(base: dict, target: dict) -> None:
    b, t = _frame(base), _frame(target)
    overlay = diff_overlay(b, t, SMALL)
    got = apply_overlay(b, overlay).sort("tenant", "id")
    assert got.equals(t.sort("tenant", "id"))
    # only what changed is in the overlay: unchanged rows keep coming from the base
    same = {k for k in base.keys() & target.keys() if base[k] == target[k]}
    upserted = set(zip(overlay.upserts.column("tenant").to_pylist(), overlay.upserts.column("id").to_pylist()))
    assert not (same & upserted)
    assert (
        set(zip(overlay.removed.column("tenant").to_pylist(), overlay.removed.column("id").to_pylist()))
        == base.keys() - target.keys()
    )


@settings(max_examples=60, deadline=None)
@given(rows, rows)
def test_diff_overlay_takes_arrow_tables_as_it_takes_frames(base: dict, target: dict) -> None:
    b, t = _frame(base), _frame(target)
    frames, tables = diff_overlay(b, t, SMALL), diff_overlay(b.to_arrow(), t.to_arrow(), SMALL)
    assert frames.upserts.equals(tables.upserts) and frames.removed.equals(tables.removed)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.text("xyz", min_size=1, max_size=3), st.integers(0, 3)), max_size=14
    ),
    rows,
    rows,
    rows,
)
def test_layered_table_is_the_overlays_applied_in_turn_then_sorted(
    parts: list, first: dict, second: dict, removed: dict
) -> None:
    # a base with repeated keys (as the partitions' union has), one overlay that makes the keys unique (as the
    # merge overlay does: it upserts every repeated key), then one that upserts and removes some keys
    base = pl.DataFrame(
        [{"tenant": t, "id": i, "v": v, "tag": None} for t, i, v in parts],
        schema={"tenant": pl.String, "id": pl.String, "v": pl.Int64, "tag": pl.String},
    )
    repeated = base.filter(pl.struct("tenant", "id").is_duplicated()).unique(
        ["tenant", "id"], keep="first", maintain_order=True
    )
    one = Overlay(
        pa.concat_tables([conform_small(repeated), conform_small(_frame(first))])
        .group_by(["tenant", "id"], use_threads=False)
        .aggregate([("v", "max"), ("tag", "max")])
        .rename_columns(["tenant", "id", "v", "tag"])
        .select(SMALL.names)
        .cast(SMALL),
        REMOVED.empty_table(),
    )
    gone = sorted(set(removed) - set(second))
    two = Overlay(
        conform_small(_frame(second)), pa.Table.from_pylist([{"tenant": t, "id": i} for t, i in gone], REMOVED)
    )
    want = apply_overlay(apply_overlay(base, one), two).sort("tenant", "id")
    got = layered_table(base.to_arrow().cast(SMALL), [one, two])
    assert pl.from_arrow(got).equals(want)


_PAIR = st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["x", "y", None]))


@settings(max_examples=150, deadline=None)
@given(st.lists(_PAIR, max_size=15), st.lists(_PAIR, max_size=6), st.booleans(), st.booleans())
def test_keep_rows_is_a_semi_or_anti_join_in_row_order(rows: list, keys: list, hit: bool, nulls_equal: bool) -> None:
    schema = {"t": pl.String, "id": pl.String}
    frame = pl.DataFrame(rows, schema=schema, orient="row").with_row_index("payload")
    wanted = pl.DataFrame(keys, schema=schema, orient="row")
    how = "semi" if hit else "anti"
    want = frame.join(wanted, on=["t", "id"], how=how, nulls_equal=nulls_equal, maintain_order="left")
    assert keep_rows(frame, wanted, ["t", "id"], hit=hit, nulls_equal=nulls_equal).equals(want)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["x", "y", "xy", None])), max_size=20),
    st.booleans(),
)
def test_sort_stable_is_polars_stable_multi_column_sort(pairs: list, nulls_last: bool) -> None:
    frame = pl.DataFrame(pairs, schema={"tenant": pl.String, "id": pl.String}, orient="row").with_row_index("_row")
    want = frame.sort(["tenant", "id"], maintain_order=True, nulls_last=nulls_last)
    assert sort_stable(frame, ["tenant", "id"], nulls_last=nulls_last).equals(want)


_KEY_ROW = st.tuples(
    st.sampled_from(["a", "b", "é", "", None]),
    st.sampled_from(["x", "y", "xy", "Z", None]),
    st.integers(-2, 2) | st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEY_ROW, max_size=12), st.booleans(), st.integers(1, 3))
def test_sorted_by_says_whether_arrows_stable_sort_would_leave_the_rows_in_place(
    rows: list, presort: bool, width: int
) -> None:
    """Random rows (nulls, ties, non-ASCII strings, integers), half of them sorted first by polars: sorted_by agrees
    with Arrow's stable sort (its default: nulls at the end) leaving every row where it is, on the first `width` keys."""
    keys = ["tenant", "id", "n"][:width]
    frame = pl.DataFrame(rows, schema={"tenant": pl.String, "id": pl.String, "n": pl.Int64}, orient="row")
    if presort:
        frame = frame.sort(keys, maintain_order=True, nulls_last=True)
    order = pc.sort_indices(frame.to_arrow(), sort_keys=[(k, "ascending") for k in keys])
    assert sorted_by(frame, keys) == (order.to_pylist() == list(range(frame.height)))


@settings(max_examples=200, deadline=None)
@given(st.lists(_KEY_ROW, max_size=12), st.booleans(), st.integers(1, 3))
def test_key_order_is_arrows_stable_sort_or_none_when_in_order(rows: list, presort: bool, width: int) -> None:
    keys = ["tenant", "id", "n"][:width]
    frame = pl.DataFrame(rows, schema={"tenant": pl.String, "id": pl.String, "n": pl.Int64}, orient="row")
    if presort:
        frame = frame.sort(keys, maintain_order=True, nulls_last=True)
    table = frame.to_arrow()
    arrow = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys]).to_pylist()
    got = key_order(table, keys)
    assert (list(range(table.num_rows)) if got is None else got.to_pylist()) == arrow
    assert (got is None) == sorted_by(frame, keys)


_CELL = st.one_of(st.none(), st.text("ab€", max_size=3))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_CELL, _CELL, st.integers(-3, 3) | st.none()), max_size=15), st.data(), st.integers(1, 3))
def test_take_columns_is_arrows_take_a_column_per_worker(rows: list, data: st.DataObject, workers: int) -> None:
    """Any table (strings with nulls and non-ASCII, integers, a list column) in any chunks (a union of parts), any
    row numbers (repeats, any order): the columns taken a few at a time are Table.take's, in the schema's column
    order, for 1 to 3 workers, handed over by columns_of or as the table's own columns."""
    schema = pa.schema(
        [("tenant", pa.string()), ("id", pa.string()), ("n", pa.int64()), ("refs", pa.list_(pa.int64()))]
    )
    whole = pa.Table.from_pylist(
        [{"tenant": t, "id": i, "n": n, "refs": None if n is None else [n] * abs(n)} for t, i, n in rows], schema
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    table = pa.concat_tables([whole.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, len(rows)])])
    picks = data.draw(st.lists(st.integers(0, max(0, len(rows) - 1)), max_size=20)) if rows else []
    old = frames.COLUMN_WORKERS
    frames.COLUMN_WORKERS = workers
    try:
        # any order (a sort: the chunks concatenated first) and ascending (a subset: taken chunk by chunk)
        for at in (pa.array(picks, pa.int64()), pa.array(sorted(picks), pa.uint32())):
            expected = whole.take(at)
            assert take_columns(columns_of(table), at, schema).equals(expected)
            assert take_columns(table.columns, at, schema).equals(expected)
            got = take_rows(table, at)
            assert got.equals(expected) and all(c.num_chunks == 1 for c in got.columns)
    finally:
        frames.COLUMN_WORKERS = old
    assert table.num_columns == 4  # columns_of removed columns from its own reference, not the caller's table


def test_take_columns_holds_a_chunked_column_twice_not_three_times() -> None:
    """A column of many chunks handed over by columns_of is concatenated and its chunks let go before it is taken:
    the allocations peak at ~2x the column (Arrow's take over the chunks concatenates them and holds both: 3x).
    Measured in a fresh process, whose Arrow pool has allocated nothing else (max_memory cannot be reset)."""
    code = """
import numpy as np, pyarrow as pa
from raw_store.frames import columns_of, take_columns
rng = np.random.default_rng(0)
ids = [[f"n_{x:024x}" for x in rng.integers(0, 2**62, 20_000)] for _ in range(20)]
order = rng.permutation(400_000)
flat = [x for chunk in ids for x in chunk]
expected = [flat[k] for k in order]
pool = pa.default_memory_pool()
start = pool.bytes_allocated()
table = pa.table({"id": pa.chunked_array([pa.array(chunk, pa.string()) for chunk in ids])})
size, rows = table.nbytes, pa.array(order, pa.int32())
columns = columns_of(table)
del table
got = take_columns(columns, rows, pa.schema([("id", pa.string())]))
assert got.column("id").to_pylist() == expected
print(size, pool.max_memory() - start)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    size, peak = map(int, out.stdout.split())
    assert peak < 2.5 * size, (peak, size)


def test_per_column_keeps_the_order_and_at_most_its_workers_in_flight(monkeypatch) -> None:
    """Results come back in the items' order however long each takes, and no more items are taken from the iterator
    than workers can run: a sweep over columns_of(table) holds only that many columns twice."""
    monkeypatch.setattr(frames, "COLUMN_WORKERS", 3)
    lock, running, peak, handed = threading.Lock(), [0], [0], []

    def items():
        for i in range(12):
            with lock:  # taken from the iterator only when a slot is free: never more than 3 handed out and not done
                handed.append(i)
                assert len(handed) - sum(1 for _ in done) <= 3
            yield i

    done: list[int] = []

    def work(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02 * ((7 * i) % 5))  # finish out of order
        with lock:
            running[0] -= 1
            done.append(i)
        return i * i

    assert per_column(work, items()) == [i * i for i in range(12)]
    assert 2 <= peak[0] <= 3  # (on any machine: the pool has 3 threads however many cores there are)
    monkeypatch.setattr(frames, "COLUMN_WORKERS", 1)
    assert per_column(work, iter(range(4))) == [0, 1, 4, 9]


def test_read_parts_reads_the_files_side_by_side_and_keeps_partition_order(tmp_path, monkeypatch) -> None:
    """A lake's parts are read a file per worker at once, and the union is the files' rows in partition order, as
    one read after another gives, projected or whole, cached or not (the cache is shared by the reading threads)."""
    lake = Lake(tmp_path)
    for k in range(7):  # partition keys that do not sort as written
        nodes = pa.Table.from_pylist([_node("t", f"n{k}-{i}", f"title {k} {i}") for i in range(k % 3 + 1)], NODES)
        write_import(lake, {"nodes": (nodes, NODES)}, key=f"{(5 * k) % 7}")
    paths = part_paths(lake, "nodes")
    one_by_one = pa.concat_tables([read_parts(lake, "nodes", NODES, paths=[p]) for p in paths])
    threads: set[str] = set()
    real = tables._CACHE.read

    def spy(path, schema, columns):
        threads.add(threading.current_thread().name)
        time.sleep(0.02)  # each read long enough for the other worker to take the next file
        return real(path, schema, columns)

    monkeypatch.setattr(frames, "COLUMN_WORKERS", 2)
    monkeypatch.setattr(frames, "_POOLS", {})  # a read pool of the 2 workers set above
    monkeypatch.setattr(tables._CACHE, "read", spy)
    for budget in ("0", "128"):  # not kept, then kept and read again from the cache
        monkeypatch.setenv("MEMCTL_READ_CACHE_MB", budget)
        for _ in range(2):
            assert read_parts(lake, "nodes", NODES).equals(one_by_one)
            assert read_parts(lake, "nodes", NODES, ["id", "title"]).equals(one_by_one.select(["id", "title"]))
    assert [r["id"] for r in one_by_one.select(["id"]).to_pylist()] == [
        r["id"] for p in paths for r in pq.read_table(p, columns=["id"]).to_pylist()
    ]
    assert len({n for n in threads if n.startswith("memctl-read")}) == 2
    threads.clear()
    monkeypatch.setattr(frames, "COLUMN_WORKERS", 1)
    assert read_parts(lake, "nodes", NODES).equals(one_by_one)
    assert threads == {threading.current_thread().name}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_CELL, _CELL, st.integers(-3, 3) | st.none(), _CELL), max_size=12), st.integers(1, 3))
def test_row_hashes_are_the_columns_hashes_xored_with_a_seed_each(rows: list, workers: int) -> None:
    """row_hashes hashes columns a few at a time on several threads; each group's hash is still the xor of every
    column's polars hash with seed 7 + its place among the hashed columns (what earlier runs' snapshots hold)."""
    table = pa.Table.from_pylist([dict(zip(SMALL.names, r)) for r in rows], SMALL)
    old = frames.COLUMN_WORKERS
    frames.COLUMN_WORKERS = workers
    try:
        got = row_hashes(table, SMALL, ignore=["tag"])
    finally:
        frames.COLUMN_WORKERS = old
    f = pl.DataFrame(table)
    want0 = f.get_column("v").hash(seed=7)
    want1 = f.get_column("tag").hash(seed=8)
    assert got.get_column("_h0").equals(want0.alias("_h0"))
    assert got.get_column("_h1").equals(want1.alias("_h1"))
    assert got.get_column("_r").to_list() == list(range(len(rows)))


def conform_small(frame: pl.DataFrame) -> pa.Table:
    return frame.to_arrow().cast(SMALL)


def test_ignored_columns_do_not_make_an_upsert() -> None:
    b = _frame({("a", "x"): (1, "p")})
    t = _frame({("a", "x"): (1, "q")})
    assert diff_overlay(b, t, SMALL, ignore=["tag"]).upserts.num_rows == 0
    assert diff_overlay(b, t, SMALL).upserts.num_rows == 1


def _node(tenant: str, nid: str, title: str, **kw) -> dict:
    return {
        "tenant": tenant,
        "id": nid,
        "type": kw.pop("type", "Episode"),
        "title": title,
        "text": title,
        "keywords": [title],
        "first_seen": datetime(2024, 1, 1),
        **kw,
    }


def _edge(tenant: str, src: str, dst: str, etype: str = "MENTIONS") -> dict:
    return {"tenant": tenant, "id": f"e_{src}_{etype}_{dst}", "src": src, "dst": dst, "type": etype, "weight": 0.5}


def _layered_lake(root) -> Lake:
    """Two partitions, an R2G overlay (a merged row, a removed node and edge, a link) and a consolidation overlay
    with a state table."""
    lake = Lake(root)
    write_import(
        lake,
        {
            "nodes": (
                pa.Table.from_pylist(
                    [
                        _node("t", "n1", "hiking"),
                        _node("t", "n2", "chess"),
                        _node("t", "e1", "Ann", type="Entity", mentions=1),
                    ],
                    NODES,
                ),
                NODES,
            ),
            "edges": (pa.Table.from_pylist([_edge("t", "n1", "e1"), _edge("t", "n2", "e1")], EDGES), EDGES),
        },
        key="one",
    )
    write_import(
        lake,
        {
            "nodes": (
                pa.Table.from_pylist(
                    [
                        _node("t", "n3", "running"),
                        _node("t", "e1", "Ann", type="Entity", mentions=2),
                        _node("u", "n1", "other tenant"),
                    ],
                    NODES,
                ),
                NODES,
            ),
            "edges": (pa.Table.from_pylist([_edge("t", "n3", "e1")], EDGES), EDGES),
        },
        key="two",
    )
    r2g = layer_dir(lake, "r2g")
    write_overlay(
        r2g,
        "nodes",
        Overlay(
            pa.Table.from_pylist([_node("t", "e1", "Ann", type="Entity", mentions=3)], NODES),
            pa.Table.from_pylist([{"tenant": "t", "id": "n2"}], REMOVED),
        ),
        NODES,
    )
    write_overlay(
        r2g,
        "edges",
        Overlay(
            pa.Table.from_pylist([_edge("t", "n1", "n3", "SUPPORTS")], EDGES),
            pa.Table.from_pylist([{"tenant": "t", "id": "e_n2_MENTIONS_e1"}], REMOVED),
        ),
        EDGES,
    )
    cons = layer_dir(lake, "consolidated")
    write_overlay(
        cons,
        "nodes",
        Overlay(
            pa.Table.from_pylist([_node("t", "c1", "topic", type="Concept", tier="long")], NODES), REMOVED.empty_table()
        ),
        NODES,
    )
    write_overlay(
        cons,
        "edges",
        Overlay(
            pa.Table.from_pylist([_edge("t", "n1", "c1", "ABOUT")], EDGES),
            pa.Table.from_pylist([{"tenant": "t", "id": "e_n1_SUPPORTS_n3"}], REMOVED),
        ),
        EDGES,
    )
    state = [
        {"tenant": t, "id": i, "tier": "mid", "status": "active", "weight": 0.5}
        for t, i in (("t", "n1"), ("t", "n3"), ("t", "e1"), ("t", "c1"), ("u", "n1"))
    ]
    write_table(pa.Table.from_pylist(state, NODE_STATE), cons / "state.parquet", NODE_STATE)
    return lake


def test_layers_read_as_the_overlays_say(tmp_path) -> None:
    lake = _layered_lake(tmp_path)
    n, e = read_graph(lake, "r2g")
    assert sorted(zip(n["tenant"], n["id"])) == [("t", "e1"), ("t", "n1"), ("t", "n3"), ("u", "n1")]
    assert n.filter(pl.col("id") == "e1")["mentions"].to_list() == [3]  # one merged row, not three
    assert sorted(e["id"]) == ["e_n1_MENTIONS_e1", "e_n1_SUPPORTS_n3", "e_n3_MENTIONS_e1"]
    n, e = read_graph(lake, "consolidated")
    assert sorted(n["id"]) == ["c1", "e1", "n1", "n1", "n3"]
    assert set(n["tier"]) == {"mid"}  # the state table wins
    assert sorted(e["id"]) == ["e_n1_ABOUT_c1", "e_n1_MENTIONS_e1", "e_n3_MENTIONS_e1"]
    only, _ = read_graph(lake, "consolidated", node_columns=["title"])
    assert only.columns == ["tenant", "id", "title"]
    # the whole tables, as the lake-wide steps read them: the same rows, sorted by (tenant, id)
    for layer in ("r2g", "consolidated"):
        nodes, edges = read_graph(lake, layer)
        got_nodes, got_edges = read_graph_tables(lake, layer)
        assert pl.from_arrow(got_nodes).equals(nodes.sort("tenant", "id").cast(dict(pl.from_arrow(got_nodes).schema)))
        assert pl.from_arrow(got_edges).equals(edges.sort("tenant", "id").cast(dict(pl.from_arrow(got_edges).schema)))


def test_graph_tables_read_with_some_columns_are_those_columns_of_the_whole_read(tmp_path) -> None:
    """A projected read (the index step's) gives the key columns and the asked ones, in schema order, with the
    values of the whole read: overlays and the consolidated state table applied to the columns read, from the
    files and from tables handed over alike; a name that is no column is an error, not a column of nulls."""
    from r2g import lake_graph

    lake = _layered_lake(tmp_path)
    for layer in ("r2g", "consolidated"):
        nodes, edges = read_graph_tables(lake, layer)
        node_cols, edge_cols = ["tier", "title", "mentions"], ["weight", "src"]
        want_nodes = nodes.select([c for c in NODES.names if c in {"tenant", "id", *node_cols}])
        want_edges = edges.select([c for c in EDGES.names if c in {"tenant", "id", *edge_cols}])
        got_nodes, got_edges = read_graph_tables(lake, layer, node_cols, edge_cols)
        assert got_nodes.equals(want_nodes) and got_edges.equals(want_edges)
        assert set(got_nodes.column("tier").to_pylist()) == ({"mid"} if layer == "consolidated" else {None})
        lake_graph.hand_over_graph_tables(lake, layer, nodes, edges)
        handed_nodes, handed_edges = read_graph_tables(lake, layer, node_cols, edge_cols)
        assert handed_nodes.equals(want_nodes) and handed_edges.equals(want_edges)
        assert not lake_graph._HANDED_OVER  # taken once, though only some columns were kept
    with pytest.raises(KeyError, match="titel"):
        read_graph_tables(lake, "r2g", ["titel"])


def test_the_duckdb_views_equal_the_polars_tables(tmp_path) -> None:
    lake = _layered_lake(tmp_path)
    con = duckdb.connect()
    for name, sql in lake_views(lake).items():
        got = pl.from_arrow(con.execute(sql).fetch_arrow_table())
        want = pl.from_arrow(read_lake_table(lake, name))
        keys = [c for c in ("tenant", "id", "node_id", "source_file", "line") if c in want.columns]
        got = got.cast(dict(want.schema))  # DuckDB names the UTC zone "Etc/UTC"
        assert got.sort(keys).equals(want.sort(keys)), name


def test_an_empty_lake_reads_empty_tables(tmp_path) -> None:
    lake = Lake(tmp_path)
    con = duckdb.connect()
    for name, sql in lake_views(lake).items():
        assert con.execute(f"SELECT count(*) FROM ({sql})").fetchone() == (0,), name
        assert read_lake_table(lake, name).num_rows == 0, name


def test_an_import_is_one_partition_that_no_inbox_file_can_own(tmp_path) -> None:
    lake = Lake(tmp_path)
    part = write_import(lake, {"nodes": (pa.Table.from_pylist([_node("t", "n1", "x")], NODES), NODES)}, key="bench")
    assert part_paths(lake, "nodes") == [part / "nodes.parquet"]
    assert read_overlay(layer_dir(lake, "r2g"), "nodes", NODES).upserts.num_rows == 0


def test_docs_are_reused_while_the_text_is_the_same(tmp_path, monkeypatch) -> None:
    from r2g import lake_graph
    from r2g.lake_graph import make_docs
    from r2g.schema import DOCS
    from r2g.tokens import node_doc

    lake = Lake(tmp_path)
    rows = pl.DataFrame([_node("t", "n1", "小明踢足球"), _node("t", "n2", "hiking")]).select(
        "tenant", "id", "title", "text", "keywords"
    )
    write_import(lake, {"docs": (make_docs(rows, "node"), DOCS)})
    made: list[int] = []
    real = lake_graph.make_docs
    monkeypatch.setattr(lake_graph, "make_docs", lambda f, k: made.append(f.height) or real(f, k))
    changed = rows.with_columns(pl.when(pl.col("id") == "n2").then(pl.lit("sailing")).otherwise("title").alias("title"))
    docs = lake_docs(lake, changed, "node").sort("id")
    assert made == [1]  # only the row whose text changed is segmented again
    assert docs["doc"].to_list()[0] == node_doc("小明踢足球", "小明踢足球", ["小明踢足球"])
    assert docs["doc"].to_list()[1].startswith("sailing")


def test_the_consolidated_graph_handed_to_the_index_step_is_the_one_its_files_give(tmp_path, monkeypatch) -> None:
    """The lake run's consolidation step hands its tables to the index step (same process) instead of the index
    step assembling them again from the partitions and overlays: on the sample inbox, what it handed over equals a
    fresh read of the files, and a hand-over whose files changed since is not taken."""
    import shutil
    from pathlib import Path

    from assets import consolidation
    from assets.run import ExecutorConfig, materialize
    from r2g import lake_graph

    shutil.copytree(Path(__file__).resolve().parent.parent / "data" / "inbox", tmp_path / "inbox")
    handed: list = []
    real = lake_graph.hand_over_graph_tables
    monkeypatch.setattr(
        consolidation,
        "hand_over_graph_tables",
        lambda lake, layer, n, e: handed.append((layer, n, e)) or real(lake, layer, n, e),
    )
    lake = Lake(tmp_path)
    assert materialize(lake, progress=False, executor=ExecutorConfig(kind="in_process")).ok
    assert [h[0] for h in handed] == ["consolidated"]
    assert not lake_graph._HANDED_OVER  # the index step took it
    nodes, edges = lake_graph.read_graph_tables(lake, "consolidated")
    assert handed[0][1].num_rows > 50 and handed[0][2].num_rows > 50
    assert handed[0][1].equals(nodes) and handed[0][2].equals(edges)

    stale = nodes.slice(0, 1)
    lake_graph.hand_over_graph_tables(lake, "consolidated", stale, edges)
    state = lake_graph.state_path(lake)
    state.write_bytes(state.read_bytes())  # the same bytes, written again: another stamp
    assert lake_graph.read_graph_tables(lake, "consolidated")[0].equals(nodes)


BOUNDARY_HALVES = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 63) + 1, (1 << 64) - 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 64) - 1)), max_size=30))
def test_key128_keeps_distinct_hash_pairs_distinct(pairs) -> None:
    """The overlays join on one Int128 made of two 64-bit key hashes: it must be exactly as discriminating as the
    pair, at the range's edges too (a high half past 2^63 is negative when read as signed)."""
    pairs = [*pairs, *((h, low) for h in BOUNDARY_HALVES for low in BOUNDARY_HALVES)]
    frame = pl.DataFrame(
        {"h": [h for h, _ in pairs], "l": [low for _, low in pairs]}, schema={"h": pl.UInt64, "l": pl.UInt64}
    )
    keys = frame.select(key128(pl.col("h"), pl.col("l")).alias("k")).get_column("k").to_list()
    assert len(set(keys)) == len(set(pairs))
    # and the value is the pair's own: high (as signed) * 2^64 + low
    assert keys == [(h - (1 << 64) if h >= 1 << 63 else h) * (1 << 64) + low for h, low in pairs]
