"""What an inbox file is, and its ingest: a chat log (raw_store readers), an agent ops batch (jobs.ops) or a
feedback file (jobs.feedback). Ops and feedback records go to their own tables, not to `messages`; an ops
file's bytes are kept whole as one RawChunk, which the memories it creates cite."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from jobs.feedback import looks_like_feedback, parse_feedback
from jobs.forget import ForgetRules
from jobs.ops import looks_like_ops, parse_ops
from r2g.schema import FEEDBACK
from raw_store.cas import RawStore
from raw_store.ingest import IngestResult, ingest_bytes, ingest_records
from raw_store.lake import as_path, file_bytes, source_file_for, tenant_for

OPS_FORMAT = "agent_ops"
OPS_MIME = "application/x-ndjson; memctl=agent_ops"
_SNIFF = 1 << 16


def ingest_inbox_file(
    path: Path, inbox: Path, store: RawStore, forget: ForgetRules | None = None
) -> tuple[IngestResult, pa.Table]:
    """(the file's ingest tables, its FEEDBACK rows — empty unless it is a feedback file)."""
    data = file_bytes(as_path(path))
    source_file, tenant = source_file_for(path, inbox), tenant_for(path, inbox)
    # sniff the head only: both detectors look at the first non-blank lines, and a chat log may be 50 MB
    head = data[:_SNIFF]
    if len(data) > _SNIFF:
        head = head[: head.rfind(b"\n") + 1] or head  # no half line at the end of the sample
    if looks_like_ops(head.decode("utf-8", errors="replace").splitlines()):
        ops, bad = parse_ops(data, source_file, tenant)
        # every line is an op record: applied or rejected at consolidation (ops_applied / ops_rejected)
        return ingest_records(
            data, source_file, tenant, store, OPS_FORMAT, len(ops) + len(bad), [], mime=OPS_MIME
        ), FEEDBACK.empty_table()
    if looks_like_feedback(head):
        rows, rejects = parse_feedback(data, source_file, tenant)
        return ingest_records(data, source_file, tenant, store, "feedback_jsonl", rows.num_rows, rejects), rows
    return ingest_bytes(data, source_file, tenant, store, forget), FEEDBACK.empty_table()
