"""Materialization metadata: SVG charts (size, determinism, empty tables, what they draw), the "what changed" summary, and the
asset definitions a person reads in the UI (one-line description, kinds, owners)."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from unittest.mock import patch

import dagster as dg
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import raw_store.frames
from assets.definitions import defs
from assets.metadata import (
    BLUE,
    KEYS,
    RunChanges,
    TableChange,
    bar_chart_svg,
    degree_chart_svg,
    degrees,
    key_change,
    row_keys,
    svg_markdown,
    table_change,
    tier_flow_svg,
    tier_flows,
)

SVG = "{http://www.w3.org/2000/svg}"


def _svg(svg: str) -> ET.Element:
    """The chart's root element; parsing it proves the text is well-formed XML."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def _texts(svg: str) -> list[str]:
    return [t.text or "" for t in _svg(svg).iter(f"{SVG}text")]


def _promotions(moves: list[tuple[str | None, str | None]]) -> pa.Table:
    return pa.table(
        {
            "from_tier": pa.array([a for a, _ in moves], pa.string()),
            "to_tier": pa.array([b for _, b in moves], pa.string()),
        }
    )


@pytest.mark.parametrize(
    "draw",
    [
        lambda: bar_chart_svg({"Entity": 61, "Fact": 41, "Episode": 30}, "Node types", "nodes"),
        lambda: bar_chart_svg({}, "Rejects by reason", "records", empty="no rejects"),
        lambda: bar_chart_svg({f"T{i:02d}": i for i in range(1, 30)}, "Edge types", "edges"),
        lambda: degree_chart_svg({0: 2, 1: 5, 2: 40, 18: 1}),
        lambda: degree_chart_svg({}),
        lambda: tier_flow_svg(
            _promotions([(None, "short"), ("short", "mid"), ("mid", "long"), ("short", "long")]),
            {"short": 1, "mid": 1, "long": 2},
        ),
        lambda: tier_flow_svg(_promotions([]), {}),
    ],
)
def test_charts_are_600x300_svgs_and_deterministic(draw) -> None:
    svg = draw()
    root = _svg(svg)
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("600", "300", "0 0 600 300")
    assert draw() == svg  # same figures, same bytes


def test_bars_are_sorted_labelled_and_scaled() -> None:
    svg = bar_chart_svg({"Fact": 41, "Entity": 61, "Episode": 30}, "Node types", "nodes")
    texts = _texts(svg)
    assert texts[0] == "Node types — 132 in all"
    labels = [t for t in texts if t in ("Entity", "Fact", "Episode")]
    assert labels == ["Entity", "Fact", "Episode"]  # largest on top
    assert {"61", "41", "30", "nodes"} <= set(texts)
    widths = [float(r.get("width")) for r in _svg(svg).iter(f"{SVG}rect") if r.get("fill") == BLUE]
    assert len(widths) == 3 and widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(61 / 30, rel=0.01)


def test_bars_past_the_limit_are_one_other_bar_and_labels_are_escaped() -> None:
    texts = _texts(bar_chart_svg({f"T{i:02d}": i for i in range(1, 30)}, "Edge types", "edges"))
    assert "other" in texts and "T29" in texts and "T01" not in texts
    assert str(sum(range(1, 19))) in texts  # T01..T18 under "other"
    svg = bar_chart_svg({"<b>&x": 2, "小明": 3}, "t", "x")
    assert "小明" in _texts(svg) and "<b>&x" in _texts(svg)  # the browser draws CJK; markup is text
    assert _texts(bar_chart_svg({}, "Rejects", "records", empty="no rejects")) == ["Rejects", "no rejects"]


def test_degree_chart_is_log_log_over_whole_decades() -> None:
    svg = degree_chart_svg({0: 2, 1: 5, 2: 40, 18: 1})
    texts = _texts(svg)
    assert texts[0] == "Degree distribution: 48 nodes, max degree 18, 2 without edges"
    assert {"1", "10", "100"} <= set(texts)
    (line,) = _svg(svg).iter(f"{SVG}polyline")
    points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert len(points) == 3 and points[0][0] < points[1][0] < points[2][0]
    assert points[1][1] < points[0][1] < points[2][1]  # 40 nodes highest, 1 lowest (y grows downwards)
    assert _texts(degree_chart_svg({})) == [
        "Degree distribution: 0 nodes, max degree 0, 0 without edges",
        "no edges yet",
    ]


def test_tier_flow_draws_each_tier_and_each_move() -> None:
    moves = [(None, "short"), (None, "short"), ("short", "mid"), ("mid", "long"), ("short", "long"), ("long", "mid")]
    texts = _texts(tier_flow_svg(_promotions(moves), {"short": 1, "mid": 1, "long": 2}))
    assert {"short", "mid", "long", "1 nodes now", "2 nodes now", "+2 new", "+0 new"} <= set(texts)
    assert texts[-1] == "other moves:  short → long: 1"


def test_svg_markdown_is_an_inline_data_uri_image() -> None:
    md = svg_markdown("<svg/>", "node types", caption="all tenants")
    assert isinstance(md, dg.MarkdownMetadataValue)
    data = re.fullmatch(r"!\[node types\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)\n\nall tenants", md.md_str)
    assert data and base64.b64decode(data.group(1)) == b"<svg/>"


def test_tier_flows_count_tier_changes_in_tier_order() -> None:
    table = _promotions(
        [("mid", "long"), (None, "short"), ("short", "mid"), (None, "short"), ("mid", "mid"), ("long", "mid")]
    )
    assert list(tier_flows(table).items()) == [
        (("new", "short"), 2),
        (("short", "mid"), 1),
        (("mid", "long"), 1),
        (("long", "mid"), 1),
    ]


def test_degrees_count_node_ends_only() -> None:
    nodes = pa.table({"id": ["a", "b", "c", "d"]})
    edges = pa.table({"src": ["a", "a", "b"], "dst": ["b", "c", "raw_1"]})  # b → a RawChunk: b's edge, not a node
    assert degrees(nodes, edges) == {0: 1, 1: 1, 2: 2}
    assert degrees(nodes, edges.slice(0, 0)) == {0: 4}


def _graph(rows: list[tuple[str, int]]) -> pa.Table:
    refs = pa.list_(pa.struct([("raw_id", pa.string())]))
    return pa.table(
        {
            "tenant": ["t"] * len(rows),
            "id": [i for i, _ in rows],
            "raw_refs": pa.array([[{"raw_id": f"r{k}"} for k in range(n)] for _, n in rows], refs),
        }
    )


def test_table_change_added_merged_removed() -> None:
    before = _graph([("a", 1), ("b", 1), ("c", 2)])
    now = _graph([("a", 1), ("b", 3), ("d", 1)])  # b gained evidence, c gone, d new
    assert table_change(before, now) == TableChange(total=3, added=1, merged=1, removed=1)
    assert table_change(None, now) == TableChange(total=3, added=3, merged=0, removed=0)
    assert table_change(now, now) == TableChange(total=3, added=0, merged=0, removed=0)


def test_run_changes_summary() -> None:
    changes = RunChanges(
        files=3,
        files_ingested=1,
        messages=25,
        messages_ingested=7,
        nodes=TableChange(161, 12, 3, 0),
        edges=TableChange(383, 20, 0, 2),
        forget_requests=1,
        messages_forgotten=4,
    )
    meta = changes.metadata()
    text = meta["what_changed"].md_str
    assert "files ingested: **1** of 3" in text and "**4** messages held back by 1 forget request\n" in text
    assert "| nodes | 161 | +12 | 3 | 0 |" in text and "| edges | 383 | +20 | 0 | −2 |" in text
    assert meta["nodes_added"] == 12 and meta["edges_removed"] == 2


def test_every_asset_has_a_one_line_description_kinds_and_owners() -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        first = node.description.strip().splitlines()[0]
        assert 20 <= len(first) <= 200, (key, first)
        assert node.kinds, key
        assert node.owners == ["team:memory"], key


def _key_change_by_join(previous: pa.Table | None, current: pa.Table, kind: str) -> TableChange:
    """key_change's meaning spelled out in polars: the `kind` rows grouped by hash (largest refs), fully joined."""
    import polars as pl

    now = pl.from_arrow(current).filter(pl.col("kind") == kind)
    if previous is None or previous.num_rows == 0:
        return TableChange(now.height, now.height, 0, 0)
    before = pl.from_arrow(previous).filter(pl.col("kind") == kind)
    now, before = (t.group_by("h").agg(pl.col("refs").max()) for t in (now, before))
    joined = now.join(before, on="h", how="full", suffix="_before", coalesce=True)
    return TableChange(
        now.height,
        joined.filter(pl.col("refs_before").is_null()).height,
        joined.filter(pl.col("refs") > pl.col("refs_before")).height,
        joined.filter(pl.col("refs").is_null()).height,
    )


_KEY_ROWS = st.lists(st.tuples(st.sampled_from(["n", "e"]), st.integers(0, 40), st.integers(0, 5)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(before=_KEY_ROWS, now=_KEY_ROWS, first_run=st.booleans(), sort_before=st.booleans(), sort_now=st.booleans())
def test_key_change_counts_as_a_join_of_the_grouped_hashes(before, now, first_run, sort_before, sort_now) -> None:
    """Colliding hashes (small range), rows of both kinds mixed, a previous file sorted or not: the sorted merge
    counts what a full join of the hashes grouped by their largest refs counts."""

    def keys(rows: list, ordered: bool) -> pa.Table:
        rows = sorted(rows, key=lambda r: (r[0], r[1])) if ordered else rows
        return pa.table(
            {"kind": [r[0] for r in rows], "h": [r[1] for r in rows], "refs": [r[2] for r in rows]}, schema=KEYS
        )

    previous = None if first_run else keys(before, sort_before)
    current = keys(now, sort_now)
    for kind in ("n", "e"):
        assert key_change(previous, current, kind) == _key_change_by_join(previous, current, kind)


def test_row_keys_hash_the_key_as_earlier_builds_did_and_count_each_rows_raw_refs() -> None:
    """A previous build's keys.parquet stays comparable: h is the (tenant, id) struct hash as written before, and refs
    each row's raw_refs count (a null list counts 0); a table without raw_refs counts 0 everywhere."""
    import polars as pl

    from r2g.schema import EDGES

    ref = {"raw_id": "raw_1", "offset": 0, "length": 1}
    rows = [
        {"tenant": "t", "id": "e1", "raw_refs": [ref, ref]},
        {"tenant": "t", "id": "e2", "raw_refs": []},
        {"tenant": None, "id": "e3", "raw_refs": None},
        {"tenant": "u", "id": "e1", "raw_refs": [ref]},
    ]
    table = pa.concat_tables(
        [pa.Table.from_pylist(rows[:2], schema=EDGES), pa.Table.from_pylist(rows[2:], schema=EDGES)]
    )
    expected = (
        pl.from_arrow(table.select(["tenant", "id", "raw_refs"]))
        .select(
            pl.lit("e").alias("kind"),
            (pl.struct("tenant", "id").hash(seed=7) // (1 << 32)).cast(pl.UInt32).alias("h"),
            pl.col("raw_refs").list.len().fill_null(0).cast(pl.Int32).alias("refs"),
        )
        .sort("h")
    )
    assert row_keys(table, "e").to_pylist() == expected.to_dicts()
    bare = row_keys(table.select(["tenant", "id"]), "n")
    assert bare.column("refs").to_pylist() == [0] * 4 and bare.column("kind").to_pylist() == ["n"] * 4


@settings(max_examples=150, deadline=None)
@given(
    ids=st.sets(st.sampled_from("abcdefgh"), max_size=8),
    ends=st.lists(st.tuples(st.sampled_from("abcdefghxy"), st.sampled_from("abcdefghxy")), max_size=30),
)
def test_degrees_are_the_edge_ends_counted_per_node(ids: set, ends: list) -> None:
    """x, y: ends that are no node (RawChunks); self-loops count twice."""
    count = {i: sum((s == i) + (d == i) for s, d in ends) for i in ids}
    want: dict[int, int] = {}
    for k in count.values():
        want[k] = want.get(k, 0) + 1
    edges = pa.table(
        {"src": [s for s, _ in ends], "dst": [d for _, d in ends]},
        schema=pa.schema([("src", pa.string()), ("dst", pa.string())]),
    )
    nodes = pa.table({"id": pa.array(sorted(ids), pa.string())})
    assert degrees(nodes, edges) == dict(sorted(want.items()))
    with patch.object(raw_store.frames, "SLICE_ROWS", 3):  # the ids and ends hashed a few rows at a time
        assert degrees(nodes, edges) == dict(sorted(want.items()))
