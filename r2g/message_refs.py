"""The messages R2G reads, and where a span of one lies in the raw store.

`read_messages` turns MESSAGES rows into `Msg` records in content order; `span_refs` maps a character span of a
message onto raw_refs items (raw_id, byte offset, byte length) across the chunk pieces the message was cut into.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from r2g.ids import text_sha


@dataclass(frozen=True)
class Msg:
    """One message as R2G reads it: the MESSAGES columns it uses, its chunk pieces, whether it is ASCII."""

    tenant: str
    conv_id: str
    msg_id: str
    seq: int
    speaker: str
    ts: datetime | None
    lang: str
    text: str
    text_sha: str
    pieces: tuple[tuple[str, int, int], ...]  # (raw_id, offset, length) in text order
    ascii: bool  # text.isascii(): char offsets are utf-8 byte offsets


def _pieces(row: Mapping[str, Any]) -> tuple[tuple[str, int, int], ...]:
    refs = row.get("raw_refs") or []
    out = tuple((r["raw_id"], int(r["offset"]), int(r["length"])) for r in refs if r and r.get("raw_id"))
    if out:
        return out
    if row.get("raw_id"):
        length = row.get("length")
        if length is None:
            length = len((row.get("text") or "").encode("utf-8"))
        return ((row["raw_id"], int(row.get("offset") or 0), int(length)),)
    return ()


Ref = tuple[str, int, int]  # (raw_id, offset, length): one raw_refs item, as a tuple until the table is built


def span_refs(msg: Msg, char_start: int, char_end: int) -> list[Ref]:
    """raw_refs of text[char_start:char_end]: the utf-8 byte span mapped onto the message's chunk pieces.

    A message split over several chunks is the concatenation of its pieces, so a
    span may yield one ref per piece it touches. A negative span means the whole message.
    """
    if char_start < 0 or char_end <= char_start:
        return list(msg.pieces)
    if msg.ascii:  # char offsets are byte offsets
        b0, b1 = char_start, char_end
    else:
        b0 = len(msg.text[:char_start].encode("utf-8"))
        b1 = b0 + len(msg.text[char_start:char_end].encode("utf-8"))
    pieces = msg.pieces
    if len(pieces) == 1 and b1 <= pieces[0][2]:  # the common case: one chunk holds the whole message
        rid, off, _ = pieces[0]
        return [(rid, off + b0, b1 - b0)]
    total = sum(n for _, _, n in pieces)
    if total < b1:  # pieces do not cover the text byte for byte: cite what the first piece holds
        rid, off, n = pieces[0]
        lo, hi = min(b0, n), min(b1, n)
        return [(rid, off + lo, hi - lo)] if hi > lo else [(rid, off, n)]
    out, pos = [], 0
    for rid, off, n in pieces:
        lo, hi = max(b0, pos), min(b1, pos + n)
        if hi > lo:
            out.append((rid, off + (lo - pos), hi - lo))
        pos += n
    return out


_MSG_COLUMNS = (
    "tenant",
    "conv_id",
    "msg_id",
    "seq",
    "speaker",
    "ts",
    "lang",
    "text",
    "text_sha",
    "raw_refs",
    "raw_id",
    "offset",
    "length",
)


def read_messages(messages: pa.Table) -> list[Msg]:
    """One Msg per MESSAGES row, sorted by (tenant, conv_id, seq, msg_id, text_sha)."""
    out = []
    # only the columns R2G reads: source_file, caption, … would be converted to Python for nothing
    for row in messages.select([c for c in _MSG_COLUMNS if c in messages.column_names]).to_pylist():
        text = row.get("text") or ""
        out.append(
            Msg(
                tenant=row.get("tenant") or "default",
                conv_id=row.get("conv_id") or "",
                msg_id=row.get("msg_id") or "",
                seq=int(row.get("seq") or 0),
                speaker=row.get("speaker") or "",
                ts=row.get("ts"),
                lang=row.get("lang") or "und",
                text=text,
                text_sha=row.get("text_sha") or text_sha(text),
                pieces=_pieces(row),
                ascii=text.isascii(),
            )
        )
    # content order, not file order, so two equal inputs in any row order give the same tables
    out.sort(key=lambda m: (m.tenant, m.conv_id, m.seq, m.msg_id, m.text_sha))
    return out
