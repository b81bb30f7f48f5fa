"""assets/instance.py, the Dagster instance data/dagster_home/dagster.yaml names: Dagster's SQLite files and tables,
engines kept per SQLite file; runs from several processes at once all land in it, and a copied or relocated
instance folder is its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import dagster as dg
import pytest

from assets import instance as instance_module
from assets.instance import _HOME_FILES, OPEN_SHARDS, MemctlInstance, SqliteEventLog, SqliteRuns
from assets.run import prepare_dagster_home
from raw_store.lake import Lake

ROOT = Path(__file__).resolve().parent.parent

# a two-asset job, materialized `runs` times against $DAGSTER_HOME (run by this module in subprocesses too)
JOB = """
import sys
import dagster as dg

@dg.asset
def a() -> int:
    return 1

@dg.asset
def b(a: int) -> int:
    return a + 1

# the values in memory: with the default fs_io_manager, processes sharing a DAGSTER_HOME share storage/a, and one could
# read the other's half-written pickle (EOFError, seen once); what is tested is the runs and events in the instance
with dg.DagsterInstance.get() as instance:
    for _ in range(int(sys.argv[1])):
        assert dg.materialize([a, b], instance=instance, resources={"io_manager": dg.mem_io_manager}).success
"""


PROCESSES, RUNS = 2, 2


@dg.asset(name="a")
def _a() -> int:
    return 1


@dg.asset(name="b")
def _b(a: int) -> int:
    return a + 1


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A lake's DAGSTER_HOME as memctl prepares it (the template copied in), then PROCESSES processes at once
    materializing RUNS times each into it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DAGSTER_HOME", raising=False)
        path = prepare_dagster_home(Lake(tmp_path_factory.mktemp("instance") / "data"))  # sets $DAGSTER_HOME
        # the instance exists before its workers start, as under `memctl materialize` (Dagster's creation of a new
        # SQLite run storage is not safe against itself in several processes)
        dg.DagsterInstance.get().dispose()
        procs = [_materialize(path, RUNS) for _ in range(PROCESSES)]
        assert [p.wait(timeout=600) for p in procs] == [0] * PROCESSES
        yield path


def _materialize(home: Path, runs: int) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-c", JOB, str(runs)], cwd=ROOT, env=env)


def test_the_template_instance_keeps_dagsters_sqlite_files(home: Path) -> None:
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance, MemctlInstance)
        assert isinstance(instance.event_log_storage, SqliteEventLog)
        assert isinstance(instance.run_storage, SqliteRuns)
        run_ids = [r.dagster_run.run_id for r in instance.get_run_records()]
        # every connection of the event log runs with synchronous=NORMAL (1); Dagster's default is FULL (2)
        with instance.event_log_storage.index_connection() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    # where Dagster's own SQLite storage puts them
    assert (home / "history" / "runs.db").is_file() and (home / "history" / "runs" / "index.db").is_file()
    assert all((home / "history" / "runs" / f"{run_id}.db").is_file() for run_id in run_ids)


def test_runs_from_several_processes_at_once_all_land(home: Path) -> None:
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_run_records()
        assert len(runs) == PROCESSES * RUNS
        assert {r.dagster_run.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        # the index shard holds every run's materializations, each run shard its own events
        assert len(instance.fetch_materializations(dg.AssetKey("b"), limit=100).records) == PROCESSES * RUNS
        for r in runs:
            assert instance.get_records_for_run(r.dagster_run.run_id).records
        # one engine per shard read, the run shards' bounded
        shards = instance.event_log_storage._engines  # type: ignore[attr-defined]
        assert "index" in shards and len(shards) <= OPEN_SHARDS + 1


def test_a_copied_instance_folder_is_its_own(home: Path, tmp_path: Path) -> None:
    """The storage's folder comes from where the dagster.yaml was read, not from $DAGSTER_HOME or the first copy."""
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    with dg.DagsterInstance.from_config(str(copy)) as instance:  # $DAGSTER_HOME names the original
        assert instance.event_log_storage._base_dir == str(copy / "history" / "runs")  # type: ignore[attr-defined]
        assert len(instance.get_run_records()) == PROCESSES * RUNS
    with dg.DagsterInstance.from_config(str(copy)) as copied:
        assert dg.materialize([_a, _b], instance=copied).success
    with dg.DagsterInstance.from_config(str(home)) as original, dg.DagsterInstance.from_config(str(copy)) as copied:
        assert len(original.get_run_records()) == PROCESSES * RUNS
        assert len(copied.get_run_records()) == PROCESSES * RUNS + 1


def _schema(path: Path) -> tuple[list[tuple], list[tuple], str]:
    """(the schema's objects, the alembic version rows, the journal mode) of one SQLite file."""
    import sqlite3

    with closing(sqlite3.connect(path)) as c:
        objects = c.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        return (
            objects,
            c.execute("SELECT * FROM alembic_version").fetchall(),
            c.execute("PRAGMA journal_mode").fetchone()[0],
        )


def test_new_sqlite_files_copied_from_the_blank_ones_are_dagsters_own(tmp_path: Path) -> None:
    """A new instance folder and each run's shard are copies of files made once per process by Dagster's own code;
    they must be what Dagster makes in place: the same tables and indexes, the same alembic stamp, WAL mode, and
    the same permissions (SQLite's 0666 less the umask, not a temp file's 0600)."""
    from dagster._core.storage.sqlite_storage import DagsterSqliteStorage

    dagster = DagsterSqliteStorage(str(tmp_path / "dagster"))  # Dagster's storage, no copies
    # a process's first new instance folder is made in place (no blank for one folder); the next ones are copies
    MemctlInstance.from_config(str(_home(tmp_path / "first"))).dispose()
    with dg.DagsterInstance.from_config(str(_home(tmp_path / "ours"))) as ours:
        assert dg.materialize([_a, _b], instance=ours).success
        run_id = ours.get_run_records()[0].dagster_run.run_id
    # Dagster creates the same run's shard in its folder
    with dagster.event_log_storage.run_connection(run_id):  # type: ignore[attr-defined]
        pass
    dagster.dispose()
    umask = os.umask(0)
    os.umask(umask)
    files = ["history/runs.db", "history/runs/index.db", "schedules/schedules.db", f"history/runs/{run_id}.db"]
    for name in files:
        mine, made = tmp_path / "ours" / name, tmp_path / "dagster" / name
        assert _schema(mine) == _schema(made), name
        assert _schema(mine)[2] == "wal"
        assert mine.stat().st_mode & 0o777 == made.stat().st_mode & 0o777 == 0o666 & ~umask, name
    assert not list((tmp_path / "ours").rglob(".blank-*")), "no temp file left behind"
    assert set(instance_module._BLANK_HOME) == set(_HOME_FILES), "the second folder was copied from the blanks"


def _home(path: Path) -> Path:
    """An instance folder with memctl's dagster.yaml (the instance class), nothing else in it yet."""
    path.mkdir(parents=True)
    shutil.copy(ROOT / "data" / "dagster_home" / "dagster.yaml", path / "dagster.yaml")
    return path


def test_a_file_system_without_hard_links_leaves_the_new_files_to_dagster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where os.link fails (some network and FUSE file systems), Dagster creates the files itself, as before."""

    def no_links(src: str, dst: str) -> None:
        raise PermissionError(1, "Operation not permitted", dst)

    monkeypatch.setattr(os, "link", no_links)
    with dg.DagsterInstance.from_config(str(_home(tmp_path / "home"))) as instance:
        assert dg.materialize([_a, _b], instance=instance).success
        run_id = instance.get_run_records()[0].dagster_run.run_id
        assert instance.get_records_for_run(run_id).records
    assert (tmp_path / "home" / "history" / "runs" / f"{run_id}.db").is_file()
    assert not list((tmp_path / "home").rglob(".blank-*")), "no temp file left behind"
