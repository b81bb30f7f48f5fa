"""The recall hit log: which memories a user-facing recall returned, for consolidation's access feedback.

`memctl recall` and the search_memories tool append one JSON line per returned memory to
`$MEMCTL_DATA/feedback/hits/<tenant folder>/<YYYY-MM-DD>.jsonl` (O_APPEND writes of one short
line each, so concurrent recalls never interleave a line). jobs.feedback reads the logs back; the
anti-abuse rules (cooldown, daily cap) are applied there, not here. Library calls of recall()
log nothing unless asked.

Object storage has no append: for a lake there, each machine appends to its own local copy of the
day's log (under the lake's local cache, with a file lock) and uploads it whole as
`feedback/hits/<tenant folder>/<YYYY-MM-DD>.<host>.jsonl`, one object per machine and day.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from raw_store.cas import tenant_dir
from raw_store.lake import Lake


def _host() -> str:
    """This machine's name as a file-name part (the per-machine hit log of a lake on object storage)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", os.environ.get("MEMCTL_HOST") or socket.gethostname()).strip("-") or "host"


def hits_dir(lake: Lake) -> Path:
    return lake.feedback / "hits"


def log_hits(lake: Lake, tenant: str, node_ids: Iterable[str], query: str, at: datetime | None = None) -> int:
    """Append a hit per node id (RawChunk passages excluded: only graph memories gain weight). Returns lines written."""
    at = at or datetime.now(UTC).replace(tzinfo=None)
    ids = [i for i in dict.fromkeys(node_ids) if i and not i.startswith("raw_")]
    if not ids:
        return 0
    stamp = at.isoformat(timespec="seconds")
    lines = [
        json.dumps({"tenant": tenant, "node_id": node_id, "at": stamp, "query": query[:200]}, ensure_ascii=False) + "\n"
        for node_id in ids
    ]
    if not lake.remote:
        folder = hits_dir(lake) / tenant_dir(tenant)
        folder.mkdir(parents=True, exist_ok=True)
        _append(folder / f"{at:%Y-%m-%d}.jsonl", lines)
        return len(ids)
    name = f"{at:%Y-%m-%d}.{_host()}.jsonl"
    local = lake.local / "feedback" / "hits" / tenant_dir(tenant) / name
    local.parent.mkdir(parents=True, exist_ok=True)
    with open(local.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # append + upload as one step: the upload always has every line
        _append(local, lines)
        (hits_dir(lake) / tenant_dir(tenant) / name).write_bytes(local.read_bytes())
    return len(ids)


def _append(path: Path, lines: list[str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for line in lines:
            os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
