"""Citations: raw_refs of a node → verified excerpts of the original messages.

An excerpt is only ever cut from bytes the raw store has sha-verified; a blob
that is corrupt, missing or forgotten yields no citation rather than an
unverified one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from raw_store.errors import BlobCorrupt, BlobForgotten, BlobMissing


@dataclass(frozen=True)
class Citation:
    raw_id: str
    conv_id: str | None
    msg_id: str | None
    speaker: str | None
    ts: str | None  # ISO-8601
    excerpt: str  # the whole original message (its piece in the chunk), byte-exact
    offset: int  # byte offset of the excerpt in the chunk
    length: int  # byte length of the excerpt
    verified: bool
    highlight: tuple[int, int] | None = None  # [start, end) characters of the node's own span in the excerpt

    def to_json(self) -> dict:
        return asdict(self)


WINDOW_CHARS = 160  # a printed citation: this many characters around the cited span (the JSON keeps the whole line)
_LINE_BREAKS = re.compile(r"[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` safe for one terminal line: line breaks and tabs (a QQ export's raw \\r) become a space, every other
    C0/C1 control (ESC, backspace, …) its visible stand-in (U+FFFD), so nothing moves the cursor."""
    return _CONTROLS.sub("\ufffd", _LINE_BREAKS.sub(" ", text))


def excerpt_window(
    excerpt: str, highlight: tuple[int, int] | None = None, words: Iterable[str] = (), width: int = WINDOW_CHARS
) -> str:
    """At most `width` characters of `excerpt` (plus "…" marks where it was cut), made printable.

    The window is centred on `highlight` (the node's own span; a span longer than the window shows its
    start), else on the first of `words` found in the excerpt (case-insensitive), else it is the start."""
    if width < 1:
        raise ValueError("width must be 1 or more")
    if len(excerpt) <= width:
        return printable(excerpt)
    lo, hi = highlight if highlight is not None and 0 <= highlight[0] < highlight[1] <= len(excerpt) else (0, 0)
    if hi - lo >= len(excerpt) or (lo, hi) == (0, 0):  # the whole line, or no span: look for the words
        low = excerpt.lower()
        found = [(i, i + len(w)) for w in words if w and (i := low.find(w.lower())) >= 0]
        lo, hi = min(found) if found else (0, 0)
    start = max(0, min(lo - (width - min(hi - lo, width)) // 2, len(excerpt) - width))
    end = start + width
    return ("…" if start > 0 else "") + printable(excerpt[start:end]) + ("…" if end < len(excerpt) else "")


class RawRef(NamedTuple):
    """A span of a RawChunk: (raw_id, byte offset, byte length). A tuple: recall makes hundreds per query."""

    raw_id: str
    offset: int
    length: int


class RowReader(Protocol):
    """The tenant-scoped rows a Citer reads: recall.store.TenantReader or recall.tenant_index.TenantIndex."""

    tenant: str

    def chunks(self, raw_ids: Sequence[str]) -> dict[str, dict]: ...

    def messages_in(self, raw_ids: Sequence[str]) -> list[dict]: ...


class BlobReader(Protocol):
    def read(self, tenant: str, path: str, sha256: str) -> bytes: ...


def as_refs(raw_refs: Iterable[dict | RawRef] | None) -> list[RawRef]:
    """RawRefs from a raw_refs column value (list of {raw_id, offset, length}); malformed entries dropped."""
    out = []
    for r in raw_refs or []:
        if isinstance(r, RawRef):
            out.append(r)
        elif r and r.get("raw_id") and r.get("offset") is not None and r.get("length") is not None:
            out.append(RawRef(r["raw_id"], int(r["offset"]), int(r["length"])))
    return out


def refs_column(col: pa.ChunkedArray | pa.Array) -> list[list[RawRef]]:
    """as_refs of every value of a raw_refs column (list<struct<raw_id, offset, length>>), without making a
    dict per entry first."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(arr) == 0:
        return []
    counts = [n or 0 for n in pc.list_value_length(arr).to_pylist()]  # (fill_null would import pandas)
    flat = pc.list_flatten(arr)
    valid = flat.is_valid().to_pylist() if flat.null_count else [True] * len(flat)
    ids = flat.field("raw_id").to_pylist()
    offsets = flat.field("offset").to_pylist()
    lengths = flat.field("length").to_pylist()
    out, i = [], 0
    for n in counts:
        row = []
        for j in range(i, i + n):
            if valid[j] and ids[j] and offsets[j] is not None and lengths[j] is not None:
                row.append(RawRef(ids[j], offsets[j], lengths[j]))
        out.append(row)
        i += n
    return out


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


class Citer:
    """Resolves raw_refs to Citations for one tenant within one recall call.

    Blobs are read once per call through the raw store's verified `read`
    (sha-checked) and sliced here; chunk and message rows come through the
    tenant-scoped reader, so a ref into another tenant's chunk resolves to nothing.
    """

    def __init__(self, reader: RowReader, store: BlobReader) -> None:
        self.reader = reader
        self.store = store
        self._chunks: dict[str, dict | None] = {}
        self._messages: dict[str, list[dict]] = {}
        self._texts: set[str] = set()  # the chunks whose messages were read with their text
        self._blobs: dict[str, bytes | None] = {}
        self.failures: list[dict] = []

    def prefetch(self, refs: Iterable[RawRef], texts: bool = False) -> None:
        """Load chunk and message rows for all refs' chunks in two queries. `texts`: with the messages' text,
        which citing never reads; recall's index reads it apart, for the raw fallback's chunks alone."""
        wanted = {r.raw_id for r in refs}
        ids = sorted(wanted - set(self._chunks))
        by_piece = hasattr(self.reader, "message_pieces")  # recall's index keeps each message's piece per chunk
        if by_piece and texts and wanted - self._texts:
            read = sorted(wanted - self._texts)
            self._texts.update(read)
            self._messages.update(self.reader.message_pieces(read, text=True))  # type: ignore[attr-defined]
        if not ids:
            return
        found = self.reader.chunks(ids)
        for i in ids:
            self._chunks[i] = found.get(i)
            self._messages.setdefault(i, [])
        if by_piece:
            if fresh := [i for i in ids if i not in self._texts]:
                self._messages.update(self.reader.message_pieces(fresh, text=False))  # type: ignore[attr-defined]
            return
        self._texts.update(ids)
        for m in self.reader.messages_in(ids):
            pieces = as_refs(m["raw_refs"]) or ([RawRef(m["raw_id"], m["offset"], m["length"])] if m["raw_id"] else [])
            for p in pieces:
                if p.raw_id in self._messages:
                    self._messages[p.raw_id].append({**m, "piece": p})

    def message_at(self, ref: RawRef) -> dict | None:
        """The message whose piece in ref.raw_id contains ref.offset."""
        self.prefetch([ref])
        for m in self._messages.get(ref.raw_id, []):
            p = m["piece"]
            if p.offset <= ref.offset < p.offset + max(p.length, 1):
                return m
        return None

    def message_key(self, ref: RawRef) -> tuple[str, str] | None:
        """(conv_id, msg_id) of the message holding `ref`, or None."""
        m = self.message_at(ref)
        return (m["conv_id"], m["msg_id"]) if m is not None else None

    def messages_of(self, raw_id: str) -> list[dict]:
        """The chunk's messages, with their text."""
        self.prefetch([RawRef(raw_id, 0, 0)], texts=True)
        return self._messages.get(raw_id, [])

    def _blob(self, raw_id: str) -> bytes | None:
        if raw_id in self._blobs:
            return self._blobs[raw_id]
        chunk = self._chunks.get(raw_id)
        data = None
        if chunk is not None:
            try:
                data = self.store.read(self.reader.tenant, chunk["path"], chunk["sha256"])
            except (BlobCorrupt, BlobMissing, BlobForgotten, PermissionError, ValueError) as e:
                self.failures.append({"raw_id": raw_id, "error": type(e).__name__, "detail": str(e)})
        self._blobs[raw_id] = data
        return data

    def cite(self, ref: RawRef) -> Citation | None:
        """A verified Citation for `ref`, or None when its chunk is not this tenant's or its blob fails.

        The excerpt is the whole message piece holding the ref (the original line), so a
        node that refers to a word or clause still cites the line it was said in; the
        node's own span is kept as `highlight`. A ref outside any message cites itself.
        """
        self.prefetch([ref])
        data = self._blob(ref.raw_id)
        if data is None or ref.offset < 0 or ref.length < 0 or ref.offset + ref.length > len(data):
            return None
        m = self.message_at(ref)
        piece = m["piece"] if m is not None else ref
        if piece.offset + piece.length > len(data) or ref.offset + ref.length > piece.offset + piece.length:
            piece = ref
        raw = data[piece.offset : piece.offset + piece.length]
        excerpt = raw.decode("utf-8", errors="replace")
        start = len(raw[: ref.offset - piece.offset].decode("utf-8", errors="replace"))
        end = start + len(data[ref.offset : ref.offset + ref.length].decode("utf-8", errors="replace"))
        chunk = self._chunks[ref.raw_id] or {}
        return Citation(
            raw_id=ref.raw_id,
            conv_id=(m or {}).get("conv_id") or chunk.get("conv_id"),
            msg_id=(m or {}).get("msg_id"),
            speaker=(m or {}).get("speaker"),
            ts=_iso((m or {}).get("ts") or chunk.get("ts")),
            excerpt=excerpt,
            offset=piece.offset,
            length=piece.length,
            verified=True,
            highlight=(start, end),
        )

    def cite_all(self, refs: list[RawRef], cap: int, prefer: set[tuple[str, str]] | None = None) -> list[Citation]:
        """Up to `cap` citations for `refs`, one per message; failed refs are skipped.

        Order: refs into messages in `prefer` first, then ref order.
        """
        self.prefetch(refs)
        if prefer:
            refs = sorted(refs, key=lambda r: self.message_key(r) not in prefer)
        out: list[Citation] = []
        seen: set[tuple] = set()
        for ref in refs:
            if len(out) >= cap:
                break
            c = self.cite(ref)
            if c is None:
                continue
            key = (c.conv_id, c.msg_id) if c.msg_id else (c.raw_id, c.offset)
            if key in seen:
                continue
            seen.add(key)
            out.append(c)
        return out
