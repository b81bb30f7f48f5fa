"""Access feedback as a table: recall hits (recall.hits logs) and explicit feedback records from the inbox.

An inbox feedback file is JSONL, one record per line:
  {"feedback": "pin" | "unpin" | "upvote" | "downvote" | "boost", "node_id": "n_…", "at": "2024-05-01T10:00:00"}
(`at` optional: the record then counts at the file's newest stamped record, or not at all when none has
one — a feedback event needs a time for the cooldown and daily cap). Such a file goes to the `feedback`
table instead of the chat readers; a line that is not a valid record is a coded reject, like any input.
The anti-abuse rules (2 h cooldown, +1.0 a day) belong to jobs.tiers, which reads this table.
"""

from __future__ import annotations

import json

import pyarrow as pa

from r2g.schema import FEEDBACK
from raw_store import errors as E
from raw_store.cas import tenant_dir
from raw_store.lake import Lake
from raw_store.readers import Reject
from raw_store.timeparse import parse_ts
from recall.hits import hits_dir

KINDS = ("pin", "unpin", "upvote", "downvote", "boost")
FORMAT = "feedback_jsonl"
_SAMPLE = 20


def looks_like_feedback(data: bytes) -> bool:
    """True when most of the first non-blank lines are JSON objects with a `feedback` kind and a `node_id`."""
    lines = [ln for ln in data.lstrip(b"\xef\xbb\xbf").splitlines() if ln.strip()][:_SAMPLE]
    hits = 0
    for ln in lines:
        try:
            obj = json.loads(ln)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and "feedback" in obj and "node_id" in obj:
            hits += 1
    return bool(lines) and 2 * hits > len(lines)


def parse_feedback(data: bytes, source_file: str, tenant: str) -> tuple[pa.Table, list[Reject]]:
    """FEEDBACK rows of an inbox feedback file, and a coded reject for every line that is not a valid record."""
    rows, rejects = [], []
    offset = 0
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    base = len(data) - len(body)
    for no, raw in enumerate(body.split(b"\n"), start=1):
        at_offset, offset = base + offset, offset + len(raw) + 1
        line = raw.rstrip(b"\r")
        if not line.strip():
            continue
        problem, row = _record(line, source_file, tenant, no)
        if problem:
            rejects.append(Reject(tenant, source_file, no, at_offset, problem[0], problem[1], line, FORMAT))
        else:
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=FEEDBACK), rejects


def _record(line: bytes, source_file: str, tenant: str, no: int) -> tuple[tuple[str, str] | None, dict | None]:
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return (E.E_READ_UTF8, "invalid UTF-8 in line"), None
    except (ValueError, RecursionError) as exc:
        return (E.E_JSON_PARSE, str(exc)[:200]), None
    if not isinstance(obj, dict):
        return (E.E_JSON_SHAPE, "a feedback line must be a JSON object"), None
    kind, node_id = obj.get("feedback"), obj.get("node_id")
    if kind not in KINDS:
        return (E.E_JSON_SHAPE, f"feedback must be one of {', '.join(KINDS)}"), None
    if not isinstance(node_id, str) or not node_id.strip():
        return (E.E_JSON_SHAPE, "node_id must be a non-empty string"), None
    try:
        at = parse_ts(obj.get("at"))
    except ValueError as exc:
        return (E.E_TS_PARSE, str(exc)[:200]), None
    if at is None:
        return (E.E_TS_MISSING, "a feedback record needs `at`"), None
    return None, {
        "tenant": tenant,
        "node_id": node_id.strip(),
        "kind": kind,
        "at": at,
        "source": "inbox",
        "source_file": source_file,
        "line": no,
        "query": None,
    }


def read_hits(lake: Lake) -> pa.Table:
    """FEEDBACK rows (kind "hit") of every recall hit log; unreadable lines are skipped (a log is best effort)."""
    rows = []
    base = hits_dir(lake)
    for path in sorted(base.glob("*/*.jsonl"), key=lambda p: p.parts) if base.is_dir() else ():
        for no, line in enumerate(path.read_bytes().split(b"\n"), start=1):
            try:
                obj = json.loads(line)
                at = parse_ts(obj["at"])
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
            if not isinstance(obj, dict) or at is None or path.parent.name != tenant_dir(str(obj.get("tenant"))):
                continue
            rows.append(
                {
                    "tenant": obj["tenant"],
                    "node_id": str(obj.get("node_id")),
                    "kind": "hit",
                    "at": at,
                    "source": "recall",
                    "source_file": path.relative_to(lake.root).as_posix(),
                    "line": no,
                    "query": obj.get("query"),
                }
            )
    return pa.Table.from_pylist(rows, schema=FEEDBACK)
