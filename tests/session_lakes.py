"""Lakes built once per test run and shared by the modules (and the xdist workers) that start from the same build."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def session_lake(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `build(folder)` fills, built once per test run under the name `name` and shared by the xdist
    workers: a file lock in the run's temp folder (above the workers' popen-gw* folders) makes the other worker wait
    for the build, then use it. Treat it as read-only: copy it to change it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "session_lakes" / name
    folder.parent.mkdir(exist_ok=True)
    with open(folder.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder.parent / f"{name}.done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder.parent / f"{name}.done").touch()
    return folder
