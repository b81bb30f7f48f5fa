"""What every format reader shares: the records it yields, the one protocol it follows, and small helpers.

A format is a `Format`: a name, a kind (LINES: the reader gets the file's lines with their
byte offsets; DOCUMENT: it gets one UTF-8 JSON document), a sentence saying what one input
record is, a `sniff(Sample) -> bool` that recognises the content, and a `read(Source) ->
ReadResult` that never raises on bad input. Registration (which formats, in which order
they are tried) lives apart, in `raw_store.formats.registry`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import PurePosixPath
from typing import NamedTuple

from raw_store import errors as E

UNKNOWN = "unknown"
MAX_MESSAGE_BYTES = 1 << 20
LINES, DOCUMENT = "lines", "document"
NOT_JSON = object()  # Sample.doc / Source.doc when the text is not one JSON value
ROLES = ("user", "assistant", "system", "other")

_SAMPLE_LINES = 50
_CR = re.compile(r"\r\n?")
_JSON_OPENING = re.compile(r'[\[{]\s*["{\[\]}]')


@dataclass
class Message:
    tenant: str
    conv_id: str
    msg_id: str
    seq: int
    speaker: str
    role: str
    ts: datetime | None
    text: str
    caption: str | None
    source_file: str
    line: int
    format: str


@dataclass
class Reject:
    tenant: str
    source_file: str
    line: int  # 1-based line / record number; 0 = the whole file
    byte_offset: int  # offset of the rejected bytes in the file (0 for whole-file rejects and records
    # re-serialised from inside a JSON document)
    reason: str  # raw_store.errors code
    detail: str
    raw: bytes
    format: str


@dataclass
class ReadResult:
    format: str
    messages: list[Message]
    rejects: list[Reject]


class Line(NamedTuple):
    """One line of a file: 1-based number, byte offset in the file, its bytes without the line
    terminator, and the line decoded (None when its bytes are not valid in the file's encoding)."""

    no: int
    offset: int
    raw: bytes
    text: str | None


@dataclass
class Source:
    """One file as a reader gets it: the bytes as given, and the decoded body its kind needs."""

    data: bytes
    source_file: str
    tenant: str
    codec: str = "utf-8"
    text: str = ""  # DOCUMENT readers: the body decoded (always UTF-8)
    doc: object = NOT_JSON  # DOCUMENT readers: the JSON value when detection parsed it
    offset: int = 0  # where the body starts in `data` (after a byte-order mark)
    lines: list[Line] = field(default_factory=list)  # LINES readers: the body's lines

    @property
    def body(self) -> bytes:
        return self.data[self.offset :]

    @property
    def default_conv(self) -> str:
        return default_conv_id(self.source_file, self.tenant)

    def builder(self, fmt: str) -> Builder:
        return Builder(self.source_file, self.tenant, fmt)


class Sample:
    """What detection looks at, computed once per file: the text (undecodable bytes replaced),
    the JSON value when the whole text is one, and the first non-blank, non-indented lines."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name
        self.suffix = PurePosixPath(name).suffix.lower()
        stripped = text.lstrip()
        self.doc: object = NOT_JSON
        if stripped[:1] in ("[", "{"):
            try:
                self.doc = json.loads(stripped)
            except (ValueError, RecursionError):
                self.doc = NOT_JSON
        lines = (x.rstrip("\r") for x in text.split("\n"))
        self.lines = [ln for ln in lines if ln.strip() and not ln[0].isspace()][:_SAMPLE_LINES]
        self.document = self._is_document(stripped)

    def _is_document(self, stripped: str) -> bool:
        """One JSON document (parsed or damaged) rather than JSON lines or text: an array, an object spread
        over several lines, or text that opens like one (`[` or `{`, then `"`, `{`, `[`) whose first line is
        not a JSON value of its own. "[2024-01-02 10:00] Bob: hi" opens with `[` but is a transcript."""
        if self.doc is not NOT_JSON:
            return isinstance(self.doc, list) or "\n" in stripped.rstrip()
        opening = _JSON_OPENING.match(stripped)
        if opening is None:
            return False
        if stripped[:1] == "{" and sum(1 for ln in self.lines if ln.startswith("{")) >= 2:
            return False  # several top-level objects: JSON lines, some of them broken
        first = stripped.split("\n", 1)[0].strip()
        try:
            json.loads(first)
        except (ValueError, RecursionError):
            return True
        return False

    @cached_property
    def json_lines(self) -> list[str]:
        return [ln for ln in self.lines if ln.lstrip().startswith("{")]

    @cached_property
    def json_dicts(self) -> list[dict]:
        dicts = []
        for ln in self.json_lines:
            try:
                obj = json.loads(ln)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                dicts.append(obj)
        return dicts


@dataclass(frozen=True)
class Format:
    """One input format: how it is recognised, what a record is, and how it is read."""

    name: str
    kind: str  # LINES or DOCUMENT
    record: str  # what one input record is (conservation counts these)
    sniff: Callable[[Sample], bool]
    read: Callable[[Source], ReadResult]


# -- building results ----------------------------------------------------------------------------


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR as LF: a message's text never holds a raw CR (a terminal would overwrite the line)."""
    return _CR.sub("\n", text) if "\r" in text else text


class Builder:
    """Collects messages and rejects of one file, numbering seq per (tenant, conv_id) in the order given; a msg_id
    repeated within a conversation gets its record's line appended, so (tenant, conv_id, msg_id) stays unique."""

    def __init__(self, source_file: str, tenant: str, fmt: str) -> None:
        self.source_file, self.tenant, self.format = source_file, tenant, fmt
        self.messages: list[Message] = []
        self.rejects: list[Reject] = []
        self._seq: dict[tuple[str, str], int] = {}
        self._ids: set[tuple[str, str, str]] = set()

    def message(
        self,
        *,
        conv_id: str,
        msg_id: str,
        speaker: str,
        role: str,
        ts: datetime | None,
        text: str,
        line: int,
        caption: str | None = None,
        tenant: str | None = None,
    ) -> None:
        tenant = tenant or self.tenant
        key = (tenant, conv_id)
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        if (tenant, conv_id, msg_id) in self._ids:  # an export that repeats an id: each message keeps its own
            msg_id = f"{msg_id}#L{line}"
        self._ids.add((tenant, conv_id, msg_id))
        self.messages.append(
            Message(
                tenant,
                conv_id,
                msg_id,
                seq,
                speaker,
                role,
                ts,
                normalize_newlines(text),
                caption,
                self.source_file,
                line,
                self.format,
            )
        )

    def record(
        self,
        p: Pending,
        raw: bytes,
        *,
        conv_id: str,
        speaker: str,
        role: str,
        stamp: Callable[[], datetime | None],
        text: str,
    ) -> None:
        """A finished multi-line record (`raw`: its bytes): a message, or a reject when `stamp()` raises
        ValueError or the text is empty or too large."""
        try:
            ts = stamp()
        except ValueError as exc:
            self.reject(p.line, p.offset, E.E_TS_PARSE, str(exc)[:200], raw)
            return
        problem = text_problem(text)
        if problem:
            self.reject(p.line, p.offset, problem[0], problem[1], raw)
            return
        self.message(conv_id=conv_id, msg_id=f"L{p.line}", speaker=speaker, role=role, ts=ts, text=text, line=p.line)

    def reject(self, line: int, byte_offset: int, reason: str, detail: str, raw: bytes) -> None:
        self.rejects.append(Reject(self.tenant, self.source_file, line, byte_offset, reason, detail, raw, self.format))

    def result(self) -> ReadResult:
        return ReadResult(self.format, self.messages, self.rejects)


def whole_file(data: bytes, source_file: str, tenant: str, fmt: str, reason: str, detail: str) -> ReadResult:
    """The whole file as one line-0 reject."""
    b = Builder(source_file, tenant, fmt)
    b.reject(0, 0, reason, detail, data)
    return b.result()


@dataclass
class Pending:
    """A multi-line record being read: its first (head) line, the match that recognised it, and the lines after."""

    head: Line
    match: re.Match
    more: list[Line] = field(default_factory=list)

    @property
    def line(self) -> int:
        return self.head.no

    @property
    def offset(self) -> int:
        return self.head.offset

    def add(self, line: Line) -> None:
        self.more.append(line)

    def trimmed(self, data: bytes) -> tuple[list[str], bytes]:
        """The continuation lines without trailing blank ones, and the file's bytes from the head to the last
        of them (exactly as the file holds them, whatever its encoding and line terminators)."""
        n = len(self.more)
        while n and not (self.more[n - 1].text or "").strip():
            n -= 1
        last = self.more[n - 1] if n else self.head
        return [ln.text or "" for ln in self.more[:n]], data[self.head.offset : last.offset + len(last.raw)]


# -- small checks ---------------------------------------------------------------------------------


def text_problem(text: str) -> tuple[str, str] | None:
    if not text.strip():
        return E.E_TEXT_EMPTY, "message has no text"
    if len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        return E.E_MSG_TOO_LARGE, f"text above {MAX_MESSAGE_BYTES} bytes"
    return None


def encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def id_field(value: object) -> str | None:
    """A string/integer id as text; None when absent or not an id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip() and encodable(value):
        return value
    return None


def dump(obj: object) -> bytes:
    """A record from inside a JSON document, re-serialised as the bytes of its reject."""
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


def default_conv_id(source_file: str, tenant: str) -> str:
    """The file's path relative to its tenant folder, without extension ("alice/chats/day1.txt" → "chats/day1")."""
    rel = PurePosixPath(source_file)
    if len(rel.parts) >= 2 and rel.parts[0] == tenant:
        rel = PurePosixPath(*rel.parts[1:])
    conv = rel.with_suffix("").as_posix() if rel.suffix and rel.stem else rel.as_posix()
    return conv if conv not in ("", ".") else "conv"
