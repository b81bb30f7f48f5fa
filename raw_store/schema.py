"""Arrow schemas of the tables the raw layer writes: raw_chunks, messages, rejects, tombstones.

Declared once here; every writer and reader (Parquet, DuckDB, tests) uses them.
Timestamps are naive wall-clock times as the chat log gave them (chat exports
rarely carry a zone), at microsecond precision.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us")

RAW_REF = pa.struct(
    [
        ("raw_id", pa.string()),
        ("offset", pa.int64()),  # byte offset into the decompressed chunk
        ("length", pa.int64()),  # byte length
    ]
)
RAW_REFS = pa.list_(RAW_REF)

RAW_CHUNKS = pa.schema(
    [
        ("id", pa.string()),  # raw_<sha256 prefix>
        ("sha256", pa.string()),
        ("tenant", pa.string()),
        ("conv_id", pa.string()),
        ("seq", pa.int64()),  # chunk index within the conversation in its source file
        ("path", pa.string()),  # relative to $MEMCTL_DATA
        ("len_bytes", pa.int64()),  # decompressed size
        ("stored_bytes", pa.int64()),  # compressed size on disk
        ("mime", pa.string()),
        ("created_at", TS),  # = ts of its first message (content-derived, so re-runs are identical)
        ("ts", TS),  # first message ts
        ("ts_end", TS),  # last message ts
        ("speaker", pa.list_(pa.string())),  # distinct speakers of its turns, in order (SPEC §4 manifest)
        ("role", pa.list_(pa.string())),  # distinct roles of its turns, in order
        ("lang", pa.string()),  # dominant language of its messages
        ("source_file", pa.string()),  # path relative to the inbox
        ("n_messages", pa.int64()),
        ("offsets", pa.list_(pa.int64())),  # byte offset of each message text in the chunk
        ("text", pa.string()),  # decompressed chunk text, for passage-level FTS (raw fallback)
    ]
)

MESSAGES = pa.schema(
    [
        ("tenant", pa.string()),
        ("conv_id", pa.string()),
        ("msg_id", pa.string()),
        ("seq", pa.int64()),  # order of the message within its conversation in the file
        ("speaker", pa.string()),
        ("role", pa.string()),  # user | assistant | system | other
        ("ts", TS),
        ("lang", pa.string()),  # en | zh | und
        ("text", pa.string()),  # utterance (+ " [image: caption]" when an image was shared)
        ("caption", pa.string()),  # image caption text when the turn shared an image
        ("text_sha", pa.string()),  # sha256 of text: the NLP cache key
        ("raw_id", pa.string()),  # first piece of the message in the raw store
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("raw_refs", RAW_REFS),  # all pieces (an oversized message spans several chunks)
        ("source_file", pa.string()),
        ("line", pa.int64()),  # 1-based line (or record number) in the source file
        ("format", pa.string()),  # reader that produced it
    ]
)

REJECTS = pa.schema(
    [
        ("tenant", pa.string()),
        ("source_file", pa.string()),
        ("line", pa.int64()),  # 1-based line / record number, 0 for the whole file
        ("byte_offset", pa.int64()),
        ("reason", pa.string()),  # coded: raw_store.errors
        ("detail", pa.string()),
        ("raw_id", pa.string()),  # CAS id of the rejected bytes (kept, never lost)
        ("raw_path", pa.string()),
        ("length", pa.int64()),
        ("format", pa.string()),
    ]
)

TOMBSTONES = pa.schema(
    [
        ("raw_id", pa.string()),
        ("tenant", pa.string()),
        ("path", pa.string()),
        ("sha256", pa.string()),
        ("deleted_at", pa.timestamp("us", tz="UTC")),
        ("reason", pa.string()),
    ]
)

# What ingest dropped because a forget request covers it (jobs/forget.py): the request and the text's
# hash, so caches can be purged and the audit can count — never the text itself.
FORGOTTEN = pa.schema(
    [
        ("tenant", pa.string()),
        ("source_file", pa.string()),
        ("line", pa.int64()),
        ("request_id", pa.string()),
        ("text_sha", pa.string()),  # null for a dropped reject
    ]
)
