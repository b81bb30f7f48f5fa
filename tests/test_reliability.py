"""Crash safety, determinism and concurrency of `memctl materialize`, through the real CLI in subprocesses.

- SIGKILL at random points, many times, then a clean run: the raw store never holds a partial blob,
  every table and index on disk is always whole (old or new), and the lake converges to the same bytes
  as an uninterrupted run.
- The same inbox gives byte-identical Parquet tables whatever the data directory, the order the files
  were written in, the time zone and the hash seed (the SIGKILL test's lake differs from the reference in all four).
- Recall and `memctl sql` keep answering while a materialization rebuilds the indexes.
- `memctl verify` finds a corrupted blob, quarantines it, and the next materialization repairs it.

The default suite injects three kills, one in each third of a run (early, middle, late; the point inside its third
is random); `-m soak` runs the long variant (40 kills over the same thirds' fortieths).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from raw_store.cas import RawStore
from raw_store.lake import Lake
from recall.engine import recall
from recall.store import connect
from recall.tenant_index import open_tenant_index, recall_dir

ROOT = Path(__file__).resolve().parent.parent
KILLS = 3  # one per third of a run: early (imports, ingest), middle (graph), late (consolidation, indexes)
SOAK_KILLS = 40
MESSY = {
    "messy/half_good.jsonl": (
        b'{"conv_id": "c1", "speaker": "Ann", "ts": "2024-01-02 10:00:00", "text": "The backup server is in Oslo."}\n'
        b'{"conv_id": "c1", "speaker": "Bob", "ts": "2024-01-02 10:01:00", "text": "broken line\n'
    ),
    "messy/crlf_bom.txt": "\ufeffAnn: first line\r\nBob: 第二行\r\n\r\n".encode(),
}


def _inbox_files() -> dict[str, bytes]:
    files = {
        p.relative_to(ROOT / "data" / "inbox").as_posix(): p.read_bytes()
        for p in sorted((ROOT / "data" / "inbox").rglob("*"))
        if p.is_file()
    }
    return {**files, **MESSY}


def _make_root(root: Path, order: list[str]) -> Path:
    files = _inbox_files()
    for rel in order:
        path = root / "inbox" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[rel])
    return root


def _env(root: Path, tz: str, hash_seed: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMCTL_DATA", "DAGSTER_HOME")}
    env.update(MEMCTL_DATA=str(root), DAGSTER_HOME=str(root / "dagster_home"), TZ=tz, PYTHONHASHSEED=hash_seed)
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "assets.cli", *args]


def _materialize(root: Path, env: dict[str, str]) -> subprocess.Popen:
    # own session, so a kill takes the NLP worker processes down with it
    return subprocess.Popen(
        _cmd("materialize", "--quiet"),
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_run(proc: subprocess.Popen) -> None:
    """SIGKILL the run's session and every process it started (also one that left the session), then reap it. The
    wait is bounded: a process that outlived the kill and holds the pipes fails the test instead of hanging it."""
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    os.killpg(proc.pid, signal.SIGKILL)
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    proc.communicate(timeout=120)


def _verify(root: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    """`memctl verify` on the data folder `root`, within 5 minutes."""
    return subprocess.run(
        _cmd("--data", str(root), "verify", *flags), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def lake_fingerprint(root: Path) -> dict[str, str]:
    """sha256 of every Parquet table and manifest in the lake, and of every blob in the raw store. Recall's index
    (lake/recall/: its versions' names depend on how many builds ran) is compared by index_contents instead."""
    lake = root / "lake"
    out = {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.rglob("*"))
        if p.suffix in (".parquet", ".json")
        and not p.name.startswith(".")
        # these and recall/ are the index's (node_docs.parquet: its cache of segmented documents)
        and p.name not in ("_state.json", "_fts.json", "tenants.parquet", "node_docs.parquet")
        and not p.relative_to(lake).as_posix().startswith("recall/")
    }
    out.update(
        {
            p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "raw").rglob("*.blob.zst"))
        }
    )
    return out


def index_contents(root: Path) -> dict:
    """What the indexes answer (their files' bytes may differ run to run; their contents must not)."""
    con = connect(root / "lake" / "memory.duckdb", read_only=True)
    try:
        docs = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'node_docs_%' "
                "OR table_name LIKE 'raw_docs_%' ORDER BY 1"
            ).fetchall()
        ]
        out = {
            t: con.execute(f"SELECT md5(string_agg(x::VARCHAR, '|' ORDER BY x::VARCHAR)) FROM {t} x").fetchone()[0]
            for t in ("nodes", "edges", "messages", "raw_chunks", "rejects", "tenants", *docs)
        }
    finally:
        con.close()
    for tenant in _index_tenants(root):
        out[f"recall:{tenant}"] = open_tenant_index(root / "lake", tenant).contents()
    return out


def _index_tenants(root: Path) -> list[str]:
    """The tenants recall's index holds (each version's manifest names its tenant)."""
    out = []
    for current in sorted(recall_dir(root / "lake").glob("*/CURRENT")) if recall_dir(root / "lake").is_dir() else ():
        out.append(json.loads((current.parent / current.read_text("utf-8").strip()).read_text("utf-8"))["tenant"])
    return out


def assert_whole(root: Path) -> None:
    """What any reader may see at any moment: only whole blobs, whole Parquet files, a whole index."""
    assert RawStore(root).verify().ok
    for p in (root / "lake").rglob("*.parquet"):
        if not p.name.startswith("."):
            pq.read_table(p)  # raises on a truncated file
    for p in (root / "lake").rglob("manifest.json"):
        json.loads(p.read_text("utf-8"))
    if (root / "lake" / "memory.duckdb").exists():
        con = connect(root / "lake" / "memory.duckdb", read_only=True)
        try:
            con.execute("SELECT count(*) FROM nodes").fetchone()
        finally:
            con.close()
    for tenant in _index_tenants(root):
        open_tenant_index(root / "lake", tenant).graph()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """An uninterrupted run: files written in sorted order, UTC, hash seed 0. Returns (root, seconds)."""
    root = _make_root(tmp_path_factory.mktemp("reference") / "data", sorted(_inbox_files()))
    t0 = time.monotonic()
    proc = _materialize(root, _env(root, "UTC", "0"))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    return root, time.monotonic() - t0


def _crash_and_converge(reference: tuple[Path, float], root: Path, kills: int, seed: int) -> dict:
    ref_root, seconds = reference
    rng = random.Random(seed)
    env = _env(root, "America/New_York", "12345")
    injected = completed = 0
    while injected < kills:
        proc = _materialize(root, env)
        # kill number i lands at a random point of the i-th of `kills` equal slices of a run, so a few kills still
        # cover the whole run from its start to its last writes
        start, end = 0.3, seconds * 1.05
        try:
            proc.communicate(timeout=start + (end - start) * (injected + rng.random()) / kills)
            completed += 1
            assert proc.returncode == 0
            # a run finished before its kill: start the next one from nothing, so kills keep landing mid-run
            for sub in ("lake", "raw", "cache", "dagster_home"):
                shutil.rmtree(root / sub, ignore_errors=True)
        except subprocess.TimeoutExpired:
            _kill_run(proc)
            injected += 1
        assert_whole(root)
    proc = _materialize(root, env)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    verify = _verify(root, env, "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    report = json.loads(verify.stdout)
    assert report["corrupt"] == []
    # partial writes of the killed runs were never blobs or tables; verify sweeps them up
    assert not [p for p in root.rglob("*.tmp") if "dagster_home" not in p.parts]
    assert lake_fingerprint(root) == lake_fingerprint(ref_root)
    assert index_contents(root) == index_contents(ref_root)
    return {"kills": injected, "completed_early": completed, "swept": len(report["partial"])}


def test_sigkill_at_random_points_converges_to_the_uninterrupted_lake(reference, tmp_path: Path) -> None:
    """Also the determinism claim: files written in another order (reversed), in another data folder, another time
    zone and another hash seed than the reference, and the lake is the same bytes (_crash_and_converge compares
    every table, blob and index content). It had a test of its own, one more build on another order, zone and
    seed; its assertions are here (issue 18: the suite's time)."""
    root = _make_root(tmp_path / "elsewhere" / "data", sorted(_inbox_files(), reverse=True))
    figures = _crash_and_converge(reference, root, KILLS, seed=20261123)
    assert figures["kills"] == KILLS
    fp = lake_fingerprint(root)
    assert any(k.startswith("lake/parts/") for k in fp)
    assert {"lake/r2g/nodes.parquet", "lake/consolidated/state.parquet"} <= set(fp)


@pytest.mark.soak
@pytest.mark.timeout(3600)  # 40 kills, then the converging run: past the suite's per-test limit (pyproject)
def test_soak_sigkill(reference, tmp_path: Path) -> None:
    root = _make_root(tmp_path / "data", sorted(_inbox_files(), reverse=True))
    figures = _crash_and_converge(reference, root, SOAK_KILLS, seed=7)
    print(f"soak: {figures}")


def test_recall_and_sql_keep_answering_while_indexes_are_rebuilt(reference, tmp_path: Path) -> None:
    ref_root, _ = reference
    root = tmp_path / "data"
    shutil.copytree(ref_root, root, ignore=shutil.ignore_patterns("dagster_home"))
    (root / "inbox" / "demo" / "more.txt").write_text("Ann: The lighthouse in Bergen reopened today.\n", "utf-8")
    lake = Lake(root)
    index = lake.duckdb_path
    inode = index.stat().st_ino
    errors: list[str] = []
    answered = {"recall": 0, "sql": 0, "after_swap": 0}
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            try:
                hits = recall("football park", "demo", k=5, lake=lake)
                assert hits and hits[0].citations, "no cited answer"
                answered["recall"] += 1
                sql = subprocess.run(
                    _cmd("--data", str(root), "sql", "SELECT count(*) AS n FROM nodes", "--json"),
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert sql.returncode == 0, sql.stderr
                assert json.loads(sql.stdout)[0]["n"] > 0
                answered["sql"] += 1
                if index.stat().st_ino != inode:
                    answered["after_swap"] += 1
            except Exception as exc:  # noqa: BLE001 — every failure a user would see is collected
                errors.append(f"{type(exc).__name__}: {exc}")

    reader = threading.Thread(target=ask)
    reader.start()
    # a full build swaps every index (an incremental one may keep the DuckDB file: its views read the lake as it is)
    proc = _materialize(root, {**_env(root, "UTC", "0"), "MEMCTL_FULL": "1"})
    _, err = proc.communicate(timeout=600)
    time.sleep(1.0)
    done.set()
    reader.join(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert errors == []
    assert index.stat().st_ino != inode  # the index really was swapped under the readers
    assert answered["recall"] >= 3 and answered["sql"] >= 3 and answered["after_swap"] >= 1
    assert recall("lighthouse Bergen", "demo", k=3, lake=lake)[0].citations


def test_verify_quarantines_a_corrupt_blob_and_the_next_run_repairs_it(reference, tmp_path: Path) -> None:
    ref_root, _ = reference
    root = tmp_path / "data"
    shutil.copytree(ref_root, root, ignore=shutil.ignore_patterns("dagster_home"))
    blob = sorted((root / "raw").rglob("*.blob.zst"))[0]
    good = blob.read_bytes()
    blob.write_bytes(good[:-3] + bytes(b ^ 0xFF for b in good[-3:]))
    env = _env(root, "UTC", "0")
    out = _verify(root, env)
    assert out.returncode == 1 and "corrupt" in out.stdout and "re-ingests" in out.stdout
    rel = blob.relative_to(root).as_posix()
    assert not blob.exists() and (root / "quarantine" / rel).exists()
    again = _verify(root, env)
    assert again.returncode == 0
    proc = _materialize(root, env)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    assert blob.read_bytes() == good
    assert lake_fingerprint(root) == lake_fingerprint(ref_root)
