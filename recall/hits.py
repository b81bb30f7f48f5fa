"""The recall hit log: which memories a user-facing recall returned, for consolidation's access feedback.

`memctl recall` and the search_memories tool append one JSON line per returned memory to
`$MEMCTL_DATA/feedback/hits/<tenant folder>/<YYYY-MM-DD>.jsonl` (O_APPEND writes of one short
line each, so concurrent recalls never interleave a line). jobs.feedback reads the logs back; the
anti-abuse rules (cooldown, daily cap) are applied there, not here. Library calls of recall()
log nothing unless asked.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from raw_store.cas import tenant_dir
from raw_store.lake import Lake

def hits_dir(lake: Lake) -> Path:
    return lake.feedback / "hits"


def log_hits(lake: Lake, tenant: str, node_ids: Iterable[str], query: str, at: datetime | None = None) -> int:
    """Append a hit per node id (RawChunk passages excluded: only graph memories gain weight). Returns lines written."""
    at = at or datetime.now(timezone.utc).replace(tzinfo=None)
    ids = [i for i in dict.fromkeys(node_ids) if i and not i.startswith("raw_")]
    if not ids:
        return 0
    folder = hits_dir(lake) / tenant_dir(tenant)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{at:%Y-%m-%d}.jsonl"
    stamp = at.isoformat(timespec="seconds")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for node_id in ids:
            line = json.dumps({"tenant": tenant, "node_id": node_id, "at": stamp, "query": query[:200]},
                              ensure_ascii=False) + "\n"
            os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return len(ids)
