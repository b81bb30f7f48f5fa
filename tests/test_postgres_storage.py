"""Multi-host setting: Dagster run and event storage on PostgreSQL (docs/scaling.md, section 2).

A throwaway PostgreSQL cluster on loopback (initdb into a temp dir, trust auth, free port) holds the Dagster
instance described by the `dagster.yaml` in docs/scaling.md — the document's own block, only the port changed.
The real CLI materializes the sample inbox on the dask executor with 2 workers: the worker processes write their
file runs' events into the shared instance through the instance reference they are sent, as workers on other
machines would, and the CLI's own process writes the lake-wide run's (the path an in-process build takes for every
run; a second lake built in-process proved nothing more, for a sixth of this module's time). Checked with
queries on the server and through the Dagster instance API: the runs, the inbox's dynamic partitions, the
materializations and the asset check results are in PostgreSQL and not in SQLite; the lake is the same bytes
as with the default SQLite instance; a second `memctl materialize` reads that state back and runs nothing.

Needs PostgreSQL's server binaries (Debian: apt-get install postgresql; /usr/lib/postgresql/<v>/bin) and
dagster-postgres (`pip install -e '.[scale]'`): missing ones fail in CI, skip elsewhere. As root the server
runs as the `postgres` system user, which postgres requires.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from assets.run import WORKER_TAG
from raw_store.lake import scan_inbox
from tests.test_reliability import lake_fingerprint

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data" / "inbox"
PG_USER = "postgres"  # the cluster's superuser; trust auth, so the password is never checked
PG_PASSWORD = "unused"
LAKES = {"dask": {"MEMCTL_EXECUTOR": "dask", "MEMCTL_WORKERS": "2"}}  # lake → executor env


def _missing(what: str) -> None:
    """A missing prerequisite fails in CI and skips elsewhere (as tests/test_ui.py does)."""
    if os.environ.get("CI"):
        pytest.fail(what)
    pytest.skip(what)


def _pg_bindir() -> Path | None:
    """The newest installed PostgreSQL's server binaries (Debian keeps them off PATH), else initdb on PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", Path(p).parent.parent.name)] or [0],
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    port: int

    def env(self, db: str) -> dict[str, str]:
        """The DAGSTER_PG_* variables the docs' dagster.yaml reads."""
        return {
            "DAGSTER_PG_USERNAME": PG_USER,
            "DAGSTER_PG_PASSWORD": PG_PASSWORD,
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_DB": db,
        }

    def query(self, db: str, sql: str, *params) -> list[tuple]:
        import psycopg2

        con = psycopg2.connect(
            host="127.0.0.1", port=self.port, user=PG_USER, password=PG_PASSWORD, dbname=db, connect_timeout=10
        )
        try:
            with con.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            con.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 with one database per lake; always stopped and removed."""
    bindir = _pg_bindir()
    if bindir is None:
        _missing("no PostgreSQL server binaries (apt-get install -y postgresql)")
    try:
        import dagster_postgres  # noqa: F401
        import psycopg2
    except ImportError as e:
        _missing(f"{e.name} is not installed (pip install -e '.[scale]')")
    as_root = os.geteuid() == 0
    if as_root and not shutil.which("runuser"):
        _missing("running as root without runuser: postgres refuses to run as root")

    # not under pytest's tmp_path: as root that is a 0700 folder the postgres user cannot enter
    base = Path(tempfile.mkdtemp(prefix="memctl-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    if as_root:
        for p in (base, sock):
            shutil.chown(p, user="postgres", group="postgres")

    def pg(tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(bindir / tool), *args]
        if as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, cwd=base, capture_output=True, text=True, timeout=120)
        assert not check or out.returncode == 0, f"{tool} failed:\n{out.stdout}\n{out.stderr}"
        return out

    started = False
    try:
        pg("initdb", "-D", str(data), "-U", PG_USER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
        for _attempt in range(3):  # the free port may be taken between probing it and the server binding it
            port = _free_port()
            with open(data / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
                conf.write(
                    f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{sock}'\n"
                    # a throwaway cluster: durability buys nothing here
                    "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                )
            out = pg("pg_ctl", "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60", "start", check=False)
            if out.returncode == 0:
                started = True
                break
        assert started, (base / "server.log").read_text(errors="replace")
        srv = Server(port)
        con = psycopg2.connect(
            host="127.0.0.1", port=port, user=PG_USER, password=PG_PASSWORD, dbname="postgres", connect_timeout=10
        )
        try:
            con.autocommit = True
            with con.cursor() as cur:
                for lake in LAKES:
                    cur.execute(f"CREATE DATABASE memctl_{lake}")
        finally:
            con.close()
        yield srv
    finally:
        if started:
            pg("pg_ctl", "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop", check=False)
        shutil.rmtree(base, ignore_errors=True)


def docs_dagster_yaml(port: int) -> str:
    """The multi-host dagster.yaml of docs/scaling.md section 2, on this server's port."""
    doc = (ROOT / "docs" / "scaling.md").read_text("utf-8")
    section = doc.split("## 2.", 1)[1].split("\n## 3.", 1)[0]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "postgres_db:" in block and block.count("port: 5432") == 1, block
    return block.replace("port: 5432", f"port: {port}")


def _cli_env(root: Path, home: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCTL_", "DAGSTER_HOME", "DAGSTER_PG_"))}
    env.update(MEMCTL_DATA=str(root), **extra)
    if home is not None:
        env["DAGSTER_HOME"] = str(home)
    return env


def _materialize(root: Path, home: Path | None, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "assets.cli", "materialize", "--quiet"],
        cwd=ROOT,
        env=_cli_env(root, home, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"{out}\n{err}"
    return out


@dataclass
class PgLake:
    name: str
    root: Path
    home: Path  # DAGSTER_HOME, outside the lake, with the docs' dagster.yaml
    db: str
    cli_pid: int  # the `memctl materialize` process of the first run


@dataclass
class Built:
    server: Server
    ref: Path  # the same inbox on the default SQLite instance
    lakes: dict[str, PgLake]
    keys: list[str]  # the inbox's partition keys
    yaml: str
    rerun_out: dict[str, str]  # stdout of the second materialize per lake
    runs_before: dict[str, int]  # run rows after the first materialize


def _run_counts(server: Server, lakes: dict[str, PgLake]) -> dict[str, int]:
    return {n: server.query(lk.db, "SELECT count(*) FROM runs")[0][0] for n, lk in lakes.items()}


@pytest.fixture(scope="module")
def built(server: Server, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Built:
    base = tmp_path_factory.mktemp("pg_storage")
    yaml = docs_dagster_yaml(server.port)
    lakes: dict[str, PgLake] = {}
    for name in LAKES:
        root = base / name
        shutil.copytree(SAMPLES, root / "inbox")
        home = base / f"{name}_dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text(yaml, "utf-8")
        lakes[name] = PgLake(name, root, home, f"memctl_{name}", 0)

    # both at once (separate lakes, separate instances, the dask run on its own LocalCluster); the same inbox on the
    # default SQLite instance is the session's sample lake (built meanwhile if no other module has built it yet)
    procs = {}
    for name, lk in lakes.items():
        procs[name] = _materialize(lk.root, lk.home, **server.env(lk.db), **LAKES[name])
        lk.cli_pid = procs[name].pid
    ref = request.getfixturevalue("sample_lake")
    for proc in procs.values():
        _wait(proc)

    runs_before = _run_counts(server, lakes)
    # again, on the same lakes: nothing changed, so nothing may run
    again = {name: _materialize(lk.root, lk.home, **server.env(lk.db), **LAKES[name]) for name, lk in lakes.items()}
    rerun_out = {name: _wait(proc) for name, proc in again.items()}
    return Built(server, ref, lakes, sorted(scan_inbox(SAMPLES)), yaml, rerun_out, runs_before)


@pytest.fixture
def instance_of(built: Built, monkeypatch: pytest.MonkeyPatch):
    """dg.DagsterInstance.get() as memctl gets it: DAGSTER_HOME and the DAGSTER_PG_* variables of one lake."""

    def get(lake: PgLake) -> dg.DagsterInstance:
        monkeypatch.setenv("DAGSTER_HOME", str(lake.home))
        for k, v in built.server.env(lake.db).items():
            monkeypatch.setenv(k, v)
        return dg.DagsterInstance.get()

    return get


def _lake_asset_keys() -> set[str]:
    from assets.definitions import defs

    graph = defs.resolve_asset_graph()
    return {k.to_user_string() for k in dg.AssetSelection.groups("lake", "consolidation", "indexes").resolve(graph)}


def _check_keys() -> set[dg.AssetCheckKey]:
    from assets.definitions import defs

    return set(defs.resolve_asset_graph().asset_check_keys)


@pytest.mark.parametrize("lake", list(LAKES))
def test_runs_are_in_postgres_and_not_in_sqlite(built: Built, lake: str, instance_of) -> None:
    lk = built.lakes[lake]
    # one run per inbox file, one lake-wide run, all finished
    statuses = dict(built.server.query(lk.db, "SELECT status, count(*) FROM runs GROUP BY status"))
    assert statuses == {"SUCCESS": len(built.keys) + 1}
    # no SQLite run, event or schedule storage next to the dagster.yaml (history/runs.db, history/runs/*.db, ...)
    assert sorted(p.relative_to(lk.home).as_posix() for p in lk.home.rglob("*.db")) == []
    assert (built.ref / "dagster_home" / "history" / "runs.db").exists()  # what the default instance writes
    # memctl kept the user's dagster.yaml
    assert (lk.home / "dagster.yaml").read_text("utf-8") == built.yaml

    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    with instance_of(lk) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert len(instance.get_run_records()) == len(built.keys) + 1


def test_dask_workers_write_their_runs_into_postgres(built: Built) -> None:
    lk = built.lakes["dask"]
    tags = [v for (v,) in built.server.query(lk.db, "SELECT value FROM run_tags WHERE key = %s", WORKER_TAG)]
    assert len(tags) == len(built.keys), tags  # every file run was executed, and recorded, by a worker
    pids = {int(t.split(" pid=")[1]) for t in tags}
    assert lk.cli_pid not in pids and all(p > 0 for p in pids)
    # the file runs' step events come from the worker processes, through the instance reference
    n = built.server.query(
        lk.db,
        """SELECT count(*) FROM event_logs e JOIN run_tags t ON t.run_id = e.run_id
                                     WHERE t.key = %s AND e.dagster_event_type = 'STEP_SUCCESS'""",
        WORKER_TAG,
    )[0][0]
    assert n == 3 * len(built.keys)  # file_chunks, file_annotations, file_graph per file
    # and the lake-wide run ran in the CLI's process (no worker tag), its step events written from there
    (lake_run,) = built.server.query(
        lk.db, "SELECT run_id FROM runs WHERE run_id NOT IN (SELECT run_id FROM run_tags WHERE key = %s)", WORKER_TAG
    )
    steps = built.server.query(
        lk.db, "SELECT count(*) FROM event_logs WHERE run_id = %s AND dagster_event_type = 'STEP_SUCCESS'", lake_run[0]
    )
    assert steps[0][0] > 0


@pytest.mark.parametrize("lake", list(LAKES))
def test_partitions_materializations_and_checks_are_in_postgres(built: Built, lake: str, instance_of) -> None:
    lk = built.lakes[lake]
    rows = built.server.query(
        lk.db, "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = %s", "inbox_files"
    )
    assert sorted(p for (p,) in rows) == built.keys

    # materializations: every lake-wide asset once, every per-file asset once per file
    mats = dict(
        built.server.query(
            lk.db,
            """SELECT asset_key, count(*) FROM event_logs
                                             WHERE dagster_event_type = 'ASSET_MATERIALIZATION' GROUP BY asset_key""",
        )
    )
    lake_assets = _lake_asset_keys()
    assert {"nodes", "edges", "messages", "memory_duckdb"} <= lake_assets
    for key in lake_assets:
        assert mats.get(f'["{key}"]') == 1, (key, mats)
    for key in ("file_chunks", "file_annotations", "file_graph"):
        assert mats.get(f'["{key}"]') == len(built.keys), (key, mats)

    # asset check results: every check of the definitions ran and passed (the per-file one once per file)
    checks = built.server.query(
        lk.db,
        """SELECT asset_key, check_name, execution_status, count(*)
                                          FROM asset_check_executions GROUP BY 1, 2, 3""",
    )
    expected = {
        (
            f'["{k.asset_key.to_user_string()}"]',
            k.name,
            "SUCCEEDED",
            len(built.keys) if k.asset_key.to_user_string() == "file_chunks" else 1,
        )
        for k in _check_keys()
    }
    assert set(checks) == expected

    # the same through the Dagster instance memctl and the UI open
    with instance_of(lk) as instance:
        assert sorted(instance.get_dynamic_partitions("inbox_files")) == built.keys
        for key in ("file_chunks", "file_graph"):
            assert instance.get_materialized_partitions(dg.AssetKey(key)) == set(built.keys)
        run_ids = {r.dagster_run.run_id for r in instance.get_run_records()}
        for key in ("nodes", "edges"):
            records = instance.fetch_materializations(dg.AssetKey(key), limit=10).records
            assert len(records) == 1 and records[0].run_id in run_ids
        for check in _check_keys():
            record = instance.get_latest_asset_check_evaluation_record(check)
            assert record is not None and record.run_id in run_ids, check
            assert record.event.dagster_event.event_specific_data.passed, check


@pytest.mark.parametrize("lake", list(LAKES))
def test_the_lake_matches_the_sqlite_instance_run(built: Built, lake: str) -> None:
    fingerprint = lake_fingerprint(built.lakes[lake].root)
    assert sum(p.startswith("lake/parts/") for p in fingerprint) >= len(built.keys)
    assert fingerprint == lake_fingerprint(built.ref)


@pytest.mark.parametrize("lake", list(LAKES))
def test_a_second_materialize_reads_the_state_back_and_runs_nothing(built: Built, lake: str) -> None:
    out = built.rerun_out[lake]
    assert f"inbox files: {len(built.keys)}  ingested now: 0  lake rebuilt: no (up to date)" in out, out
    assert _run_counts(built.server, built.lakes)[lake] == built.runs_before[lake] == len(built.keys) + 1
    lk = built.lakes[lake]
    assert built.server.query(lk.db, "SELECT count(*) FROM dynamic_partitions") == [(len(built.keys),)]
