"""Materialization metadata: PNG charts (size, determinism, empty tables), the "what changed" summary, and the
asset definitions a person reads in the UI (one-line description, kinds, owners)."""

from __future__ import annotations

import base64
import re
import struct

import dagster as dg
import pyarrow as pa
import pytest

from assets.definitions import defs
from assets.metadata import (
    RunChanges,
    TableChange,
    bar_chart_png,
    degree_chart_png,
    degrees,
    png_markdown,
    table_change,
    tier_flow_png,
    tier_flows,
)


def _size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


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
        lambda: bar_chart_png({"Entity": 61, "Fact": 41, "Episode": 30}, "Node types", "nodes"),
        lambda: bar_chart_png({}, "Rejects by reason", "records", empty="no rejects"),
        lambda: bar_chart_png({f"T{i:02d}": i for i in range(1, 30)}, "Edge types", "edges"),
        lambda: degree_chart_png({0: 2, 1: 5, 2: 40, 18: 1}),
        lambda: degree_chart_png({}),
        lambda: tier_flow_png(
            _promotions([(None, "short"), ("short", "mid"), ("mid", "long"), ("short", "long")]),
            {"short": 1, "mid": 1, "long": 2},
        ),
        lambda: tier_flow_png(_promotions([]), {}),
    ],
)
def test_charts_are_600x300_pngs_and_deterministic(draw) -> None:
    png = draw()
    assert _size(png) == (600, 300)
    assert draw() == png  # same table, same bytes: no timestamp, no version stamp
    assert b"Software" not in png and b"matplotlib" not in png


def test_a_cjk_label_does_not_draw_as_boxes() -> None:
    assert bar_chart_png({"小明": 3, "Ann": 2}, "t", "x") == bar_chart_png({"??": 3, "Ann": 2}, "t", "x")


def test_png_markdown_is_an_inline_data_uri_image() -> None:
    md = png_markdown(b"\x89PNG\r\n\x1a\nxyz", "node types", caption="all tenants")
    assert isinstance(md, dg.MarkdownMetadataValue)
    data = re.fullmatch(r"!\[node types\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)\n\nall tenants", md.md_str)
    assert data and base64.b64decode(data.group(1)) == b"\x89PNG\r\n\x1a\nxyz"


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
