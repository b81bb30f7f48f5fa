"""The merge overlay (r2g.merge_overlay) from the last run's snapshot equals the whole run, byte for byte.

Lakes of random graph parts: every node and edge row in one to three partitions (copies differing where the merge
combines them: mentions, first_seen, raw_refs, weight), so ids repeat across partitions and across old and new
ones; Facts with role and link edges, so the lake-wide fact links change with a new partition. Partition folders
have random names: a new one sorts anywhere among the old.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from r2g.ids import edge_id
from r2g.lake_graph import layer_dir
from r2g.link import LINK_TYPES
from r2g.merge_overlay import MergeRun, r2g_overlays, write_merge_overlay
from r2g.schema import EDGES, NODES
from raw_store.lake import Lake, write_manifest, write_table
from raw_store.tables import REMOVED
from tests.consolidation_graphs import random_graph
from tests.fuzzing import fuzz_settings


def _parts(seed: int, count: int) -> list[tuple[pa.Table, pa.Table]]:
    """`count` graph parts over one random graph, each row in one to three of them."""
    r = random.Random(seed)
    g = random_graph(seed, episodes=30, time_span_days=6)
    node_rows, edge_rows = g.nodes.to_pylist(), g.edges.to_pylist()
    # Facts told again later (a new id, the same roles): link groups of several Facts, in old and new parts
    roles = [e for e in edge_rows if e["type"] in ("AGENT", "PATIENT", "LOCATION")]
    for fact in [n for n in node_rows if n["type"] == "Fact" and r.random() < 0.6]:
        again = {**fact, "id": fact["id"] + ":again", "negation": r.random() < 0.3}
        for key in ("time_start", "first_seen"):
            if again[key] is not None:
                again[key] += timedelta(hours=r.randint(-60, 60))
        node_rows.append(again)
        for e in roles:
            if e["src"] == fact["id"]:
                edge_rows.append(
                    {**e, "src": again["id"], "id": edge_id(e["tenant"], again["id"], e["type"], e["dst"])}
                )
    nodes: list[list[dict]] = [[] for _ in range(count)]
    edges: list[list[dict]] = [[] for _ in range(count)]
    for row in node_rows:
        for k, i in enumerate(r.sample(range(count), min(count, r.choice([1, 1, 2, 3])))):
            copy = dict(row)
            if k and row["type"] != "Episode":  # a later mention: other counts, dates and lines
                copy["mentions"] = r.randint(1, 5)
                if row["first_seen"] is not None and r.random() < 0.5:
                    copy["first_seen"] = row["first_seen"] - timedelta(hours=r.randint(1, 48))
                copy["raw_refs"] = [*(row["raw_refs"] or []), {"raw_id": f"raw_{i}", "offset": k, "length": 9}]
            nodes[i].append(copy)
    for row in edge_rows:
        if row["type"] in LINK_TYPES and r.random() < 0.7:  # most links left for the lake-wide step to make
            continue
        for k, i in enumerate(r.sample(range(count), min(count, r.choice([1, 1, 1, 2])))):
            edges[i].append({**row, "weight": row["weight"] if not k else r.random()})
    return [
        (pa.Table.from_pylist(n, schema=NODES), pa.Table.from_pylist(e, schema=EDGES)) for n, e in zip(nodes, edges)
    ]


def _write_part(lake: Lake, name: str, part: tuple[pa.Table, pa.Table]) -> None:
    folder = lake.parts / name
    write_table(part[0], folder / "nodes.parquet", NODES)
    write_table(part[1], folder / "edges.parquet", EDGES)
    write_manifest(folder, {"partition_key": name})


def _assert_same(got: MergeRun, want: MergeRun) -> None:
    for name in ("nodes", "edges"):
        for side in ("upserts", "removed"):
            a, b = getattr(getattr(got, name), side), getattr(getattr(want, name), side)
            assert a.equals(b), f"{name}.{side}: {a.num_rows} rows against {b.num_rows}"
    assert got.links.equals(want.links)
    assert got.facts.equals(want.facts)


def _dropped(parts: list[tuple[pa.Table, pa.Table]], seed: int) -> set[tuple[str, str]]:
    rows = [(t, i) for p in parts for t, i in zip(p[0].column("tenant").to_pylist(), p[0].column("id").to_pylist())]
    return set(random.Random(seed).sample(sorted(set(rows)), 3))


@fuzz_settings(6)
@example(seed=1, old=3, new=2)
@given(seed=st.integers(0, 10_000), old=st.integers(1, 4), new=st.integers(1, 3))
def test_partitions_added_since_the_snapshot_give_the_whole_runs_overlay(tmp_path_factory, seed, old, new) -> None:
    lake = Lake(tmp_path_factory.mktemp("merge") / "lake")
    parts = _parts(seed, old + new)
    names = [f"p_{random.Random(seed + k).getrandbits(40):010x}" for k in range(old + new)]
    dropped = _dropped(parts, seed)
    for name, part in zip(names[:old], parts[:old]):
        _write_part(lake, name, part)
    first = r2g_overlays(lake, dropped)
    assert first.mode == "full" and first.reason == "no snapshot of an earlier run"
    write_merge_overlay(lake, first)

    for name, part in zip(names[old:], parts[old:]):
        _write_part(lake, name, part)
    got = r2g_overlays(lake, dropped)
    assert (got.mode, got.new_parts) == ("incremental", new)
    whole = r2g_overlays(lake, dropped, full=True)
    assert whole.mode == "full"
    _assert_same(got, whole)

    write_merge_overlay(lake, got)
    again = r2g_overlays(lake, dropped)  # nothing new: the same overlay
    assert (again.mode, again.new_parts, again.kept) == ("incremental", 0, True)
    _assert_same(again, whole)
    assert not got.kept and not whole.kept


def test_a_run_with_nothing_new_keeps_the_overlay_files_as_they_are(tmp_path, monkeypatch) -> None:
    """Its overlay is the snapshot read from those files, so it encodes nothing; written all the same, they would
    be the same bytes."""
    from r2g import merge_overlay

    lake, _ = _snapshotted(tmp_path)
    folder = layer_dir(lake, "r2g")
    files = sorted(folder.rglob("*.parquet")) + [folder / "steps" / "merge.json"]
    before = {f: f.read_bytes() for f in files}
    run = r2g_overlays(lake)
    assert run.kept
    with monkeypatch.context() as m:
        m.setattr(merge_overlay, "table_bytes", lambda *a: pytest.fail("a kept run encoded a table"))
        write_merge_overlay(lake, run)
    assert {f: f.read_bytes() for f in files} == before
    write_merge_overlay(lake, dataclasses.replace(run, kept=False))  # what writing them all gives
    assert {f: f.read_bytes() for f in files} == before
    assert r2g_overlays(lake).kept  # and the next run may keep them again


def test_the_random_parts_make_merged_rows_links_and_removals(tmp_path) -> None:
    """The lakes above are not vacuous: the whole run over them merges nodes and edges, links Facts and removes."""
    lake = Lake(tmp_path / "lake")
    parts = _parts(1, 5)
    for k, part in enumerate(parts):
        _write_part(lake, f"p_{k}", part)
    run = r2g_overlays(lake, _dropped(parts, 1))
    assert run.nodes.upserts.num_rows > 20 and run.nodes.removed.num_rows == 3 and run.edges.removed.num_rows
    assert run.links.num_rows > 5 and run.facts.height > 20
    assert run.edges.upserts.num_rows > run.links.num_rows  # merged edges besides the links


def _snapshotted(tmp_path: Path) -> tuple[Lake, list[tuple[pa.Table, pa.Table]]]:
    lake = Lake(tmp_path / "lake")
    parts = _parts(3, 4)
    for k, part in enumerate(parts[:3]):
        _write_part(lake, f"p_{k}", part)
    write_merge_overlay(lake, r2g_overlays(lake))
    return lake, parts


def _changed_part(lake: Lake, parts: list) -> set:
    _write_part(lake, "p_1", (parts[1][0].slice(1), parts[1][1]))
    return set()


def _gone_part(lake: Lake, parts: list) -> set:
    for f in (lake.parts / "p_2").iterdir():
        f.unlink()
    (lake.parts / "p_2").rmdir()
    return set()


def _other_forget_set(lake: Lake, parts: list) -> set:
    return {(parts[0][0].column("tenant")[0].as_py(), parts[0][0].column("id")[0].as_py())}


def _tampered_snapshot(lake: Lake, parts: list) -> set:
    write_table(REMOVED.empty_table(), layer_dir(lake, "r2g") / "steps" / "merged_edges.parquet", REMOVED)
    return set()


def _overlay_without_snapshot(lake: Lake, parts: list) -> set:
    (layer_dir(lake, "r2g") / "steps" / "merge.json").unlink()
    return set()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_changed_part, "a partition changed or went"),
        (_gone_part, "a partition changed or went"),
        (_other_forget_set, "the code or the forget requests changed"),
        (_tampered_snapshot, "the snapshot does not match the overlay's files"),
        (_overlay_without_snapshot, "no snapshot of an earlier run"),
    ],
)
def test_anything_but_added_partitions_runs_whole(tmp_path, change, reason) -> None:
    lake, parts = _snapshotted(tmp_path)
    _write_part(lake, "p_3", parts[3])  # an added partition as well: the run still may not start from the snapshot
    dropped = change(lake, parts)
    got = r2g_overlays(lake, dropped)
    assert (got.mode, got.reason) == ("full", reason)
    _assert_same(got, r2g_overlays(lake, dropped, full=True))
