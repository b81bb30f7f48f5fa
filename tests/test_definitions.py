"""The Dagster Definitions: asset graph snapshot, jobs, sensors, checks — and `dg check defs`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg

from assets.definitions import defs

ROOT = Path(__file__).resolve().parent.parent


def _keys(specs) -> set[str]:
    return {k.to_user_string() for k in specs}


def test_asset_graph_snapshot() -> None:
    graph = defs.resolve_asset_graph()
    assert _keys(graph.get_all_asset_keys()) == {
        "file_chunks",
        "file_annotations",
        "file_graph",
        "raw_chunks",
        "messages",
        "rejects",
        "r2g_nodes",
        "r2g_edges",
        "nodes",
        "edges",
        "communities",
        "promotions",
        "review_queue",
        "cold_edges",
        "feedback",
        "ops_applied",
        "ops_rejected",
        "audit",
        "tombstones",
        "memory_duckdb",
        "graph_index",
    }
    deps = {k.to_user_string(): _keys(graph.get(k).parent_keys) for k in graph.get_all_asset_keys()}
    assert deps["file_annotations"] == {"file_chunks"}
    assert deps["file_graph"] == {"file_annotations"}
    assert {"file_graph", "raw_chunks"} <= deps["r2g_nodes"]
    assert {"r2g_nodes", "r2g_edges", "messages"} <= deps["nodes"] == deps["promotions"]
    assert {"nodes", "edges", "audit", "tombstones"} <= deps["memory_duckdb"]
    assert {"nodes", "edges", "messages", "raw_chunks", "rejects"} <= deps["audit"]


def test_file_assets_are_dynamically_partitioned_and_lake_assets_are_not() -> None:
    graph = defs.resolve_asset_graph()
    for key in ("file_chunks", "file_annotations", "file_graph"):
        pdef = graph.get(dg.AssetKey(key)).partitions_def
        assert isinstance(pdef, dg.DynamicPartitionsDefinition) and pdef.name == "inbox_files"
    for key in ("nodes", "edges", "memory_duckdb"):
        assert graph.get(dg.AssetKey(key)).partitions_def is None


def test_every_asset_has_a_description_group_and_owner() -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.description, key
        assert node.group_name in {"ingest", "lake", "consolidation", "indexes"}, key
        assert node.owners == ["team:memory"], key


def test_blocking_checks_declared() -> None:
    checks = {(c.asset_key.to_user_string(), c.name): c for a in defs.assets for c in a.check_specs}
    assert {
        ("file_chunks", "conservation"),
        ("edges", "no_orphan_edges"),
        ("nodes", "raw_refs_resolve"),
        ("messages", "raw_refs_resolve"),
    } <= set(checks)
    # a corrupt blob is quarantined and its file re-ingested next run: report it, do not stop the lake
    advisory = {("raw_chunks", "raw_store_verified")}
    assert advisory <= set(checks)
    assert all(c.blocking == (key not in advisory) for key, c in checks.items())


def test_jobs_and_sensors() -> None:
    assert defs.resolve_job_def("ingest_file").partitions_def.name == "inbox_files"
    assert defs.resolve_job_def("build_lake") is not None
    assert {s.name for s in defs.sensors} == {"inbox_sensor", "lake_sensor"}
    [schedule] = defs.schedules
    assert schedule.name == "daily_consolidation" and schedule.job_name == "build_lake"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_the_daily_schedule_consolidates_as_of_its_day() -> None:
    import datetime as dt

    from assets.consolidation import daily_consolidation

    context = dg.build_schedule_context(scheduled_execution_time=dt.datetime(2026, 11, 23, 3, 0, tzinfo=dt.UTC))
    request = daily_consolidation(context)
    assert request.run_key == "consolidate@2026-11-23"
    assert request.run_config == {"resources": {"lake": {"config": {"as_of": "2026-11-23"}}}}


def test_dg_check_defs_passes(tmp_path: Path) -> None:
    dg_bin = shutil.which("dg") or str(Path(sys.executable).with_name("dg"))
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "MEMCTL_DATA": str(tmp_path / "data")}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    out = subprocess.run([dg_bin, "check", "defs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
