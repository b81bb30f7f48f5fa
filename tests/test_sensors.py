"""Inbox and lake sensors: partitions and run requests for new/changed files only."""

from pathlib import Path

import dagster as dg
import pytest

from assets.sensors import inbox_sensor, lake_sensor
from raw_store.lake import Lake, scan_inbox, stale_partitions, write_manifest


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lake:
    monkeypatch.setenv("MEMCTL_DATA", str(tmp_path))
    (tmp_path / "inbox" / "alice").mkdir(parents=True)
    (tmp_path / "inbox" / "alice" / "a.txt").write_text("Ann: hello\n", "utf-8")
    (tmp_path / "inbox" / "bob.jsonl").write_text(
        '{"conv_id": "c", "speaker": "B", "ts": "2024-01-01", "text": "hi"}\n'
    )
    return Lake(tmp_path)


def _evaluate(sensor, instance: dg.DagsterInstance) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance) as ctx:
        return sensor(ctx)


def test_new_files_become_partitions_and_runs_keyed_by_content(lake: Lake) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        result = _evaluate(inbox_sensor, instance)
        assert [r.partition_key for r in result.run_requests] == ["alice/a.txt", "bob.jsonl"]
        sha = stale_partitions(lake, scan_inbox(lake.inbox))["alice/a.txt"]
        assert result.run_requests[0].run_key == f"alice/a.txt@{sha}"
        (add,) = result.dynamic_partitions_requests
        assert add.partitions_def_name == "inbox_files" and sorted(add.partition_keys) == ["alice/a.txt", "bob.jsonl"]


def test_processed_files_are_not_requested_again_until_they_change(lake: Lake) -> None:
    for key, sha in stale_partitions(lake, scan_inbox(lake.inbox)).items():
        write_manifest(lake.part_dir(key), {"source_sha256": sha, "graph_sha256": sha})
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("inbox_files", ["alice/a.txt", "bob.jsonl"])
        result = _evaluate(inbox_sensor, instance)
        assert result.run_requests == [] and result.dynamic_partitions_requests == []
        (lake.inbox / "alice" / "a.txt").write_text("Ann: hello again\n", "utf-8")
        changed = _evaluate(inbox_sensor, instance)
        assert [r.partition_key for r in changed.run_requests] == ["alice/a.txt"]


def test_lake_sensor_waits_for_partitions_then_keys_on_their_fingerprint(lake: Lake) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        assert isinstance(_evaluate(lake_sensor, instance), dg.SkipReason)
        for key, sha in stale_partitions(lake, scan_inbox(lake.inbox)).items():
            write_manifest(lake.part_dir(key), {"source_sha256": sha, "graph_sha256": sha})
        first = _evaluate(lake_sensor, instance).run_requests[0].run_key
        assert first == _evaluate(lake_sensor, instance).run_requests[0].run_key
        (lake.inbox / "carol.txt").write_text("C: new\n", "utf-8")
        sha = stale_partitions(lake, scan_inbox(lake.inbox))["carol.txt"]
        write_manifest(lake.part_dir("carol.txt"), {"source_sha256": sha, "graph_sha256": sha})
        assert _evaluate(lake_sensor, instance).run_requests[0].run_key != first


def test_lake_sensor_skips_when_the_lake_was_built_from_these_partitions(lake: Lake) -> None:
    from raw_store.lake import lake_fingerprint, write_lake_state

    for key, sha in stale_partitions(lake, scan_inbox(lake.inbox)).items():
        write_manifest(lake.part_dir(key), {"source_sha256": sha, "graph_sha256": sha})
    lake.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    lake.duckdb_path.write_bytes(b"")
    write_lake_state(lake, lake_fingerprint(lake))
    with dg.DagsterInstance.ephemeral() as instance:
        assert isinstance(_evaluate(lake_sensor, instance), dg.SkipReason)


def _built(lake: Lake) -> None:
    """The state `memctl materialize` leaves: every partition complete, an index, the lake state written."""
    from raw_store.lake import lake_fingerprints, write_lake_state

    for key, sha in stale_partitions(lake, scan_inbox(lake.inbox)).items():
        write_manifest(lake.part_dir(key), {"source_sha256": sha, "graph_sha256": sha})
    lake.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    lake.duckdb_path.write_bytes(b"")
    write_lake_state(lake, *lake_fingerprints(lake))


def test_recall_hits_after_materialize_start_no_lake_run(lake: Lake) -> None:
    """The README's first command ends in `memctl recall`, which logs its hits: `memctl ui` must still open on an
    up-to-date lake with no run. Hits wait for the next materialize (or the daily consolidation)."""
    from raw_store.lake import lake_is_current
    from recall.hits import log_hits

    _built(lake)
    log_hits(lake, "alice", ["n_1", "n_2"], "hello")
    assert not lake_is_current(lake)  # `memctl materialize` folds them in
    with dg.DagsterInstance.ephemeral() as instance:
        for _ in range(2):  # two ticks
            assert isinstance(_evaluate(lake_sensor, instance), dg.SkipReason)
            assert _evaluate(inbox_sensor, instance).run_requests == []
        (lake.inbox / "carol.txt").write_text("C: new\n", "utf-8")  # new input still rebuilds
        sha = stale_partitions(lake, scan_inbox(lake.inbox))["carol.txt"]
        write_manifest(lake.part_dir("carol.txt"), {"source_sha256": sha, "graph_sha256": sha})
        assert len(_evaluate(lake_sensor, instance).run_requests) == 1


def test_a_state_from_before_the_hit_free_fingerprint_still_counts(lake: Lake) -> None:
    from raw_store.lake import lake_fingerprint, write_lake_state

    _built(lake)
    write_lake_state(lake, lake_fingerprint(lake))  # an older build recorded only the full fingerprint
    with dg.DagsterInstance.ephemeral() as instance:
        assert isinstance(_evaluate(lake_sensor, instance), dg.SkipReason)


def test_a_relative_settings_file_is_the_same_setting_in_the_ui_processes(
    lake: Lake, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`MEMCTL_CONSOLIDATION=settings.json memctl materialize` in one folder, then `memctl ui`, whose daemon and
    code server run in the project folder: the sensor must find the same file and the same fingerprint."""
    from assets.ui import ui_command

    here, project = tmp_path_factory.mktemp("here"), tmp_path_factory.mktemp("project")
    (here / "settings.json").write_text('{"tiers": {"short_days": 5}}', "utf-8")
    monkeypatch.chdir(here)
    monkeypatch.setenv("MEMCTL_CONSOLIDATION", "settings.json")
    _built(lake)
    _, env = ui_command(project, "127.0.0.1", 3000)
    assert env["MEMCTL_CONSOLIDATION"] == str(here / "settings.json")
    monkeypatch.chdir(project)
    monkeypatch.setenv("MEMCTL_CONSOLIDATION", env["MEMCTL_CONSOLIDATION"])
    with dg.DagsterInstance.ephemeral() as instance:
        assert isinstance(_evaluate(lake_sensor, instance), dg.SkipReason)
        (here / "settings.json").write_text('{"tiers": {"short_days": 6}}', "utf-8")  # a changed setting
        assert len(_evaluate(lake_sensor, instance).run_requests) == 1


def test_the_ui_runs_dg_of_this_venv_declared_active(monkeypatch: pytest.MonkeyPatch) -> None:
    """dg warns (twice) when $VIRTUAL_ENV does not name the project's .venv, as with `.venv/bin/memctl ui`."""
    import sys

    from assets.ui import ui_command

    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    project = Path(__file__).resolve().parent.parent
    cmd, env = ui_command(project, "127.0.0.1", 3000)
    if Path(cmd[0]).name == "dg":
        assert Path(cmd[0]).parent == Path(sys.executable).parent
        assert Path(env["VIRTUAL_ENV"]).resolve() == Path(sys.prefix).resolve()
        assert not (project / ".venv").exists() or (project / ".venv").resolve() == Path(sys.prefix).resolve()
    else:  # memctl runs outside the project's venv: plain `dagster dev` with this interpreter, no venv check
        assert cmd[:4] == [sys.executable, "-m", "dagster", "dev"]
