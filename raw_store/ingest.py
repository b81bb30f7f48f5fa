"""One chat-log file → RawChunks in the CAS plus its `messages`, `raw_chunks` and `rejects` tables.

Deterministic: the same bytes and source_file give identical tables (every time
column is content-derived, never the wall clock), and identical blobs, stored once.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from raw_store import schema
from raw_store.cas import RawStore
from raw_store.chunker import Chunk, chunk_conversation
from raw_store.lake import file_bytes
from raw_store.readers import Message, ReadResult, Reject, read_bytes
from raw_store.routing import as_path, source_file_for, tenant_for
from raw_store.text import detect_lang

MIME = "text/plain; charset=utf-8"


class Forget(Protocol):
    """Forget requests as ingest filters (jobs.forget.ForgetRules): the id of the request covering a record."""

    def message(self, m: Message) -> str | None: ...

    def reject(self, r: Reject) -> str | None: ...


@dataclass
class IngestResult:
    format: str
    source_file: str
    source_sha256: str
    messages: pa.Table  # schema.MESSAGES, sorted by (tenant, conv_id, seq)
    raw_chunks: pa.Table  # schema.RAW_CHUNKS, sorted by (tenant, conv_id, seq)
    rejects: pa.Table  # schema.REJECTS, sorted by (line, byte_offset)
    n_input: int  # messages read + rejected records (for the conservation check)
    forgotten: pa.Table = field(default_factory=schema.FORGOTTEN.empty_table)  # dropped by a forget request
    routed: int = 0  # records of a non-chat file (agent ops, feedback) that went to their own tables


def ingest_file(path: Path, inbox: Path, store: RawStore, forget: Forget | None = None) -> IngestResult:
    """Ingest one inbox file; tenant from its first folder, source_file relative to the inbox."""
    return ingest_bytes(file_bytes(as_path(path)), source_file_for(path, inbox), tenant_for(path, inbox), store, forget)


def ingest_bytes(
    data: bytes, source_file: str, tenant: str, store: RawStore, forget: Forget | None = None
) -> IngestResult:
    """Read, chunk and store one file's bytes; rejected bytes are stored too (undated), never lost.

    Records a `forget` request covers are dropped before anything is stored (they are counted in
    n_input and listed in `forgotten` by request id and text hash, never by text)."""
    read = read_bytes(data, source_file, tenant)
    n_input = len(read.messages) + len(read.rejects)
    forgotten_rows = _forget(read, forget) if forget else []
    message_rows, chunk_rows = _chunk_and_store(read, store)
    reject_rows = _reject_rows(read, store)
    return IngestResult(
        format=read.format,
        source_file=source_file,
        source_sha256=hashlib.sha256(data).hexdigest(),
        messages=_table(message_rows, schema.MESSAGES, ["tenant", "conv_id", "seq"]),
        raw_chunks=_table(chunk_rows, schema.RAW_CHUNKS, ["tenant", "conv_id", "seq"]),
        rejects=_table(reject_rows, schema.REJECTS, ["line", "byte_offset"]),
        n_input=n_input,
        forgotten=_table(forgotten_rows, schema.FORGOTTEN, ["line", "request_id"]),
    )


def ingest_records(
    data: bytes,
    source_file: str,
    tenant: str,
    store: RawStore,
    fmt: str,
    accepted: int,
    rejects: list[Reject],
    mime: str | None = None,
) -> IngestResult:
    """A non-chat inbox file (agent ops, feedback) whose `accepted` records go to their own tables: its rejects
    are stored like any input's; with `mime`, the whole file is kept as one RawChunk, which its records cite."""
    chunk_rows = []
    if mime is not None:
        ref = store.put(tenant, data, day=None)
        chunk_rows.append(
            {
                "id": ref.raw_id,
                "sha256": ref.sha256,
                "tenant": tenant,
                "conv_id": f"{fmt}:{source_file}",
                "seq": 0,
                "path": ref.path,
                "len_bytes": ref.len_bytes,
                "stored_bytes": ref.stored_bytes,
                "mime": mime,
                "created_at": None,
                "ts": None,
                "ts_end": None,
                "speaker": [],
                "role": [],
                "lang": None,
                "source_file": source_file,
                "n_messages": 0,
                "offsets": [],
                "text": data.decode("utf-8", errors="replace"),
            }
        )
    read = ReadResult(fmt, [], list(rejects))
    return IngestResult(
        format=fmt,
        source_file=source_file,
        source_sha256=hashlib.sha256(data).hexdigest(),
        messages=schema.MESSAGES.empty_table(),
        raw_chunks=_table(chunk_rows, schema.RAW_CHUNKS, ["tenant", "conv_id", "seq"]),
        rejects=_table(_reject_rows(read, store), schema.REJECTS, ["line", "byte_offset"]),
        n_input=accepted + len(rejects),
        routed=accepted,
    )


def _forget(read: ReadResult, forget: Forget) -> list[dict]:
    """Drop (in place) the messages and rejects a forget request covers; their rows for the `forgotten` table."""
    rows: list[dict] = []

    def kept(records: list, covering: Callable[[Any], str | None], text_sha: Callable[[Any], str | None]) -> list:
        out = []
        for rec in records:
            rid = covering(rec)
            if rid is None:
                out.append(rec)
            else:
                rows.append(
                    {
                        "tenant": rec.tenant,
                        "source_file": rec.source_file,
                        "line": rec.line,
                        "request_id": rid,
                        "text_sha": text_sha(rec),
                    }
                )
        return out

    read.messages[:] = kept(read.messages, forget.message, lambda m: hashlib.sha256(m.text.encode("utf-8")).hexdigest())
    read.rejects[:] = kept(read.rejects, forget.reject, lambda r: None)
    return rows


def _table(rows: list[dict], sch: pa.Schema, keys: list[str]) -> pa.Table:
    # Python's sort is stable: rows equal on the keys keep their (deterministic) reading order
    rows = sorted(rows, key=lambda r: tuple(r[k] for k in keys))
    return pa.Table.from_pylist(rows, schema=sch)


def _conversations(messages: list[Message]) -> dict[tuple[str, str], list[Message]]:
    convs: dict[tuple[str, str], list[Message]] = {}
    for m in messages:
        convs.setdefault((m.tenant, m.conv_id), []).append(m)
    return convs


def _chunk_and_store(read: ReadResult, store: RawStore) -> tuple[list[dict], list[dict]]:
    message_rows: list[dict] = []
    chunk_rows: list[dict] = []
    for (tenant, _), msgs in _conversations(read.messages).items():
        msgs.sort(key=lambda m: m.seq)
        refs: list[list[dict]] = [[] for _ in msgs]
        langs = [detect_lang(m.text) for m in msgs]
        for chunk in chunk_conversation(msgs):
            row = _chunk_row(chunk, msgs, langs, tenant, read.format, store)
            chunk_rows.append(row)
            for piece in chunk.pieces:
                refs[piece.msg_index].append({"raw_id": row["id"], "offset": piece.offset, "length": piece.length})
        for m, lang, mrefs in zip(msgs, langs, refs):
            first = mrefs[0]
            message_rows.append(
                {
                    "tenant": m.tenant,
                    "conv_id": m.conv_id,
                    "msg_id": m.msg_id,
                    "seq": m.seq,
                    "speaker": m.speaker,
                    "role": m.role,
                    "ts": m.ts,
                    "lang": lang,
                    "text": m.text,
                    "caption": m.caption,
                    "text_sha": hashlib.sha256(m.text.encode("utf-8")).hexdigest(),
                    "raw_id": first["raw_id"],
                    "offset": first["offset"],
                    "length": first["length"],
                    "raw_refs": mrefs,
                    "source_file": m.source_file,
                    "line": m.line,
                    "format": m.format,
                }
            )
    return message_rows, chunk_rows


def _chunk_row(chunk: Chunk, msgs: list[Message], langs: list[str], tenant: str, fmt: str, store: RawStore) -> dict:
    """Store one chunk (dated by its first timestamp) and describe it as a `raw_chunks` row."""
    indices = list(dict.fromkeys(p.msg_index for p in chunk.pieces))
    members = [msgs[i] for i in indices]
    stamps: list[datetime] = [m.ts for m in members if m.ts is not None]
    first_ts = stamps[0] if stamps else None
    ref = store.put(tenant, chunk.body, day=first_ts.date() if first_ts else None)
    lang_counts = Counter(langs[i] for i in indices)
    top = max(lang_counts.values())
    return {
        "id": ref.raw_id,
        "sha256": ref.sha256,
        "tenant": tenant,
        "conv_id": chunk.conv_id,
        "seq": chunk.seq,
        "path": ref.path,
        "len_bytes": ref.len_bytes,
        "stored_bytes": ref.stored_bytes,
        "mime": MIME,
        "created_at": first_ts,
        "ts": first_ts,
        "ts_end": stamps[-1] if stamps else None,
        "speaker": list(dict.fromkeys(m.speaker for m in members)),
        "role": list(dict.fromkeys(m.role for m in members)),
        "lang": min(lang for lang, n in lang_counts.items() if n == top),
        "source_file": members[0].source_file,
        "n_messages": len(chunk.pieces),
        "offsets": [p.offset for p in chunk.pieces],
        "text": chunk.body.decode("utf-8"),
    }


def _reject_rows(read: ReadResult, store: RawStore) -> list[dict]:
    rows = []
    for r in read.rejects:
        ref = store.put(r.tenant, r.raw, day=None)
        rows.append(
            {
                "tenant": r.tenant,
                "source_file": r.source_file,
                "line": r.line,
                "byte_offset": r.byte_offset,
                "reason": r.reason,
                "detail": r.detail,
                "raw_id": ref.raw_id,
                "raw_path": ref.path,
                "length": len(r.raw),
                "format": r.format,
            }
        )
    return rows
