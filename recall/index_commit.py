"""Writing a tenant's recall index version durably (recall.index_build): files written under temp names, fsynced and
renamed into place, the manifest and CURRENT committed, older versions removed, one writer at a time (LOCK)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path

# Only the current version is kept: a reader maps a version's files when it opens it and keeps them after they are
# removed; one that was still opening the version a writer removed gets FileNotFoundError and opens CURRENT again
# (tenant_index.open_version). Keeping the version before would hold two bases after every compaction.
KEEP_VERSIONS = 1


def generation(manifest: dict | None) -> int:
    return int(manifest["name"][1:7]) if manifest else 0


def commit_version(folder: Path, gen: int, manifest: dict) -> str:
    """Write manifest m<gen>.json, point CURRENT at it (each atomically), then drop what no kept version uses."""
    name = f"m{gen:06d}.json"
    write_atomic(folder / name, json.dumps(manifest, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    write_atomic(folder / "CURRENT", name.encode("utf-8"))
    kept = sorted((p for p in folder.glob("m*.json") if p.stem[1:].isdigit()), reverse=True)[:KEEP_VERSIONS]
    used = {s for p in kept for s in json.loads(p.read_text("utf-8"))["segments"]}
    for p in folder.iterdir():
        if (p.suffix == ".json" and p.name.startswith("m") and p not in kept) or (
            p.is_dir() and p.name.startswith("s") and p.name[1:].isdigit() and p.name not in used
        ):
            if p.is_dir():
                # meta.json first: a reader opening this segment meanwhile then knows it is removed, not damaged
                (p / "meta.json").unlink(missing_ok=True)
                shutil.rmtree(p)
            else:
                p.unlink()
    fsync_dir(folder)
    return name


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class locked:
    """An exclusive lock on the tenant folder's LOCK file: one writer at a time."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "LOCK"

    def __enter__(self) -> None:
        self.f = open(self.path, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def clean_temp(folder: Path) -> None:
    """Remove what a killed writer left (temp names start with '.'); called under the lock."""
    for p in folder.iterdir():
        if p.name.startswith("."):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
