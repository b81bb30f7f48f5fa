"""Suite-wide hooks.

The default run (pyproject addopts) spreads the modules over two pytest-xdist workers with `--dist loadfile`: a
module runs whole on one worker, so its module-scoped lake is built once and its tests keep their order. A worker
takes the next module when it is free, in collection order; the modules that take longest are collected first so
that none of them starts last and runs alone at the end (`--no-loadscope-reorder` keeps this order instead of
xdist's most-tests-first). The order within a module never changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.session_lakes import session_lake

# Longest first: the modules' `pytest --durations=0` seconds summed, measured 2026-11-26 on this 2-core machine
# while it was shared (load 5-9), default run (-n 2): object_store 349, reliability 182, scale 156, postgres_storage
# 156, dirty_lake 136, ui 105, forget 97, recall_index 75, dirty 64, scenario 59, consolidation_golden 57,
# bench_ingest 56, e2e 55, recall_output 50, r2g_locomo 48, index 47; every other module under 40 but incremental
# (77, most of it the first build it shares with dirty_lake: listed after it, so that it copies that build instead
# of waiting for it on the other worker). A module not listed runs after these, in its usual order.
LONGEST_FIRST = (
    "test_object_store.py",
    "test_reliability.py",
    "test_scale.py",
    "test_postgres_storage.py",
    "test_dirty_lake.py",
    "test_ui.py",
    "test_forget.py",
    "test_recall_index.py",
    "test_dirty.py",
    "test_scenario.py",
    "test_consolidation_golden.py",
    "test_bench_ingest.py",
    "test_e2e.py",
    "test_recall_output.py",
    "test_r2g_locomo.py",
    "test_index.py",
    "test_incremental.py",
)


# RAM-backed temp folders for the tests' lakes, unless $TMPDIR names another place. Dagster's SQLite instance commits
# (and syncs) once per event; on this machine's disk those syncs were a third of a small `memctl materialize`'s wall
# time (two builds, interleaved: 72 and 64 s on /tmp, 52 and 35 s on /dev/shm; test_incremental side by side:
# 199 → 149 s). A SIGKILL test loses no page cache, so nothing a test proves depends on the syncs reaching a disk.
# The lakes are small (a whole run's temp folders take ~0.3 GB, and pytest keeps the last three runs'); a small
# /dev/shm (a container's 64 MB default) is left alone.
SHM = Path("/dev/shm")
SHM_FREE_BYTES = 4 << 30


def pytest_configure(config: pytest.Config) -> None:
    if (
        "TMPDIR" not in os.environ
        and SHM.is_dir()
        and os.access(SHM, os.W_OK)
        and shutil.disk_usage(SHM).free >= SHM_FREE_BYTES
    ):
        os.environ["TMPDIR"] = str(SHM)  # pytest's tmp_path_factory, the xdist workers and every subprocess
        tempfile.tempdir = None  # gettempdir() caches its answer: ask again


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each module's own order is kept


ROOT = Path(__file__).resolve().parent.parent


def _build_sample_lake(folder: Path) -> None:
    shutil.copytree(ROOT / "data" / "inbox", folder / "data" / "inbox")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMCTL_", "DAGSTER_"))}
    env.update(MEMCTL_DATA=str(folder / "data"), MEMCTL_CACHE_DIR=str(folder / "unused_cache"))
    out = subprocess.run(
        [sys.executable, "-m", "assets.cli", "materialize", "--quiet"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


@pytest.fixture(scope="session")
def sample_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data folder of data/inbox built by `memctl materialize` with the default settings (no MEMCTL_* or
    DAGSTER_* variables: the default executor, the SQLite instance in its dagster_home), once per test run, for the
    modules whose reference is exactly this build (test_object_store, test_postgres_storage, test_ui). Read it, or
    copy it to change it. $MEMCTL_CACHE_DIR names ../unused_cache, which a lake in a local folder must leave alone
    (test_object_store)."""
    return session_lake(tmp_path_factory, "sample", _build_sample_lake) / "data"
