"""Input-format readers: raw chat-log bytes → `Message`s and coded `Reject`s.

Formats (detected from content; the extension only breaks ties):
  canonical_jsonl    one JSON object per line {tenant?, conv_id?, msg_id?, speaker, role?, ts, text}
  transcript         `Speaker: text` lines, optional `[timestamp] ` prefix, indented lines continue
  locomo_json        LoCoMo samples: conversation.session_N turn lists + session_N_date_time
  sillytavern_jsonl  SillyTavern / Luker chat: a header object line, then {name, is_user, send_date, mes}
  chatgpt_json       ChatGPT export conversations.json: conversations holding a message tree
  whatsapp           WhatsApp "Export chat" text, iOS `[date, time] Name: text` or Android `date, time - Name: text`
  qq                 QQ message-manager text export: header block, then `date time nick(QQ)` + text lines

Contract: `read_bytes` never raises on bad input. Every input record ends up in
exactly one message or one reject (or the whole file is one line-0 reject); every
message has non-empty text; same bytes → same result. What an input record is, per
format (anything else is consumed, neither message nor reject):
  canonical_jsonl, sillytavern_jsonl  every non-blank line, except SillyTavern's header (first non-blank line)
  transcript   a `Speaker: text` line with its indented continuation lines, or a stray line
  whatsapp     a dated line with its undated continuation lines (system lines are role "system" messages),
               or a stray line before the first dated line
  qq           a `date time nick(QQ)` line with its text lines, or a stray text line; the banner,
               `====` rules and `消息分组:` / `消息对象:` lines are header
  locomo_json  every turn of every session
  chatgpt_json every message node on each conversation's current branch (current_node up to the root)
               with visible, non-empty text — the root (message null), hidden and empty nodes
               (e.g. the blank system prompt) are not messages of the chat, and other branches
               (regenerated answers, edits) are not the conversation; a malformed conversation is one reject
A recognised file that yields no record at all (a header only) is one E_NO_MESSAGES reject, never nothing.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Callable

from raw_store import errors as E
from raw_store.routing import as_path, source_file_for, tenant_for
from raw_store.timeparse import parse_ts

FORMATS = ("canonical_jsonl", "transcript", "locomo_json", "sillytavern_jsonl", "chatgpt_json", "whatsapp", "qq")
UNKNOWN = "unknown"
MAX_MESSAGE_BYTES = 1 << 20

_BOM = b"\xef\xbb\xbf"
_SAMPLE_LINES = 50
_BINARY_SAMPLE = 1 << 16
# C0 controls other than tab, LF, VT, FF, CR and ESC (ANSI colours appear in terminal logs)
_CONTROL_BYTES = frozenset(range(0x20)) - {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B}
_ASSISTANT_NAMES = frozenset({"assistant", "bot", "ai"})
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "bot": "assistant", "ai": "assistant",
          "model": "assistant", "system": "system", "other": "other"}

_TRANSCRIPT_LINE = re.compile(
    r"^(?:\[(?P<ts>[^\]\n]{0,80})\]\s*)?(?P<speaker>[^:：\[\]{}<>\n]{1,80}?)\s*[:：](?P<text>.*)$", re.S)
_URLISH = re.compile(r"https?|www\.|://|\.(?:com|org|net|io)\b", re.I)
_LETTER = re.compile(r"[^\W\d_]")
_SESSION_KEY = re.compile(r"^session_(\d+)$")

# (1-based line number, byte offset in the file, line bytes without CR/LF, the line decoded or None)
_Lines = list[tuple[int, int, bytes, str | None]]


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
    line: int          # 1-based line / record number; 0 = the whole file
    byte_offset: int   # offset of the rejected bytes in the file (0 for whole-file rejects and records
                       # re-serialised from inside a JSON document)
    reason: str        # raw_store.errors code
    detail: str
    raw: bytes
    format: str


@dataclass
class ReadResult:
    format: str
    messages: list[Message]
    rejects: list[Reject]


# -- paths ---------------------------------------------------------------------------------------

def default_conv_id(source_file: str, tenant: str) -> str:
    """The file's path relative to its tenant folder, without extension ("alice/chats/day1.txt" → "chats/day1")."""
    rel = PurePosixPath(source_file)
    if len(rel.parts) >= 2 and rel.parts[0] == tenant:
        rel = PurePosixPath(*rel.parts[1:])
    conv = rel.with_suffix("").as_posix() if rel.suffix and rel.stem else rel.as_posix()
    return conv if conv not in ("", ".") else "conv"


# -- detection -----------------------------------------------------------------------------------

_NOT_JSON = object()


def _strip_bom(data: bytes) -> tuple[bytes, int]:
    return (data[len(_BOM):], len(_BOM)) if data.startswith(_BOM) else (data, 0)


def _is_binary(data: bytes) -> bool:
    head = data[:_BINARY_SAMPLE]
    if b"\x00" in data:
        return True
    controls = sum(1 for b in head if b in _CONTROL_BYTES)
    return controls * 20 > len(head)   # more than 5% control bytes


def _transcript_match(line: str) -> re.Match | None:
    """A `Speaker: text` line with a plausible speaker (letters, ≤ 6 words, ≤ 64 chars, no URL)."""
    if not line or line[0].isspace():
        return None
    m = _TRANSCRIPT_LINE.match(line)
    if m is None:
        return None
    speaker = m.group("speaker").strip()
    if not (1 <= len(speaker) <= 64) or len(speaker.split()) > 6:
        return None
    if _URLISH.search(speaker) or not _LETTER.search(speaker) or m.group("text").startswith("//"):
        return None
    return m


def _looks_locomo(doc: object) -> bool:
    if isinstance(doc, dict):
        return isinstance(doc.get("conversation"), dict)
    return isinstance(doc, list) and any(isinstance(s, dict) and "conversation" in s for s in doc)


def _looks_chatgpt(doc: object) -> bool:
    if isinstance(doc, dict):
        return isinstance(doc.get("mapping"), dict)
    return isinstance(doc, list) and any(isinstance(c, dict) and "mapping" in c for c in doc)


def _json_dicts(lines: list[str]) -> list[dict]:
    dicts = []
    for ln in lines:
        try:
            obj = json.loads(ln)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            dicts.append(obj)
    return dicts


def _detect(text: str, name: str) -> tuple[str, object]:
    """(format, parsed JSON document or _NOT_JSON) for decoded `text`."""
    stripped = text.lstrip()
    suffix = PurePosixPath(name).suffix.lower()
    doc: object = _NOT_JSON
    if stripped[:1] in ("[", "{"):
        try:
            doc = json.loads(stripped)
        except (ValueError, RecursionError):
            doc = _NOT_JSON
        if doc is not _NOT_JSON:
            if _looks_locomo(doc):
                return "locomo_json", doc
            if _looks_chatgpt(doc):
                return "chatgpt_json", _NOT_JSON
            if isinstance(doc, dict) and ("text" in doc or "speaker" in doc):
                return "canonical_jsonl", _NOT_JSON
    lines = [ln for ln in (x.rstrip("\r") for x in text.split("\n")) if ln.strip() and not ln[0].isspace()]
    sample = lines[:_SAMPLE_LINES]
    n = len(sample)
    json_lines = [ln for ln in sample if ln.lstrip().startswith("{")]
    dicts = _json_dicts(json_lines)
    canonical = sum(1 for d in dicts if "text" in d or "speaker" in d)
    tavern = sum(1 for d in dicts if "mes" in d or _is_tavern_header(d))
    transcript = sum(1 for ln in sample if _transcript_match(ln))
    if n and json_lines and (2 * len(json_lines) >= n or (suffix == ".jsonl" and len(json_lines) >= transcript)):
        if tavern > canonical:
            return "sillytavern_jsonl", _NOT_JSON
        # a JSONL of some other shape (e.g. another app's export) is not ours to half-accept
        if canonical > 0 or not dicts:
            return "canonical_jsonl", _NOT_JSON
    qq_heads = sum(1 for ln in sample if _QQ_HEAD.match(ln.strip()))
    qq_banner = any(_QQ_BANNER.match(ln.strip()) for ln in sample)
    qq_fields = any(_QQ_FIELD.match(ln.strip()) for ln in sample)
    # each QQ message is a header line plus at least one text line
    if qq_banner or (qq_heads and (qq_fields or 3 * qq_heads >= n)):
        return "qq", _NOT_JSON
    # WhatsApp messages may span many undated lines, but an export always starts with a dated line
    whatsapp = sum(1 for ln in sample if _whatsapp_prefix(ln))
    if whatsapp and (2 * whatsapp >= n or (_whatsapp_prefix(sample[0]) and 4 * whatsapp >= n)):
        return "whatsapp", _NOT_JSON
    if n and transcript and 2 * transcript >= n:
        return "transcript", _NOT_JSON
    # truncated/garbled JSON documents: keep their format so the reject says E_JSON_PARSE
    if doc is _NOT_JSON and stripped[:1] in ("[", "{"):
        if '"conversation"' in text and re.search(r'"session_\d+"', text):
            return "locomo_json", _NOT_JSON
        if '"mapping"' in text and any(k in text for k in ('"current_node"', '"children"', '"message"', '"parent"')):
            return "chatgpt_json", _NOT_JSON
    return UNKNOWN, _NOT_JSON


def detect_format(data: bytes, name: str) -> str:
    """The chat-log format of `data` from its content (extension of `name` only a tie-breaker); "unknown" if none fits."""
    body, _ = _strip_bom(data)
    if not body.strip() or _is_binary(body):
        return UNKNOWN
    return _detect(body.decode("utf-8", errors="replace"), name)[0]


# -- reading -------------------------------------------------------------------------------------

class _Builder:
    """Collects messages and rejects of one file, numbering seq per conv_id."""

    def __init__(self, source_file: str, tenant: str, fmt: str) -> None:
        self.source_file, self.tenant, self.format = source_file, tenant, fmt
        self.messages: list[Message] = []
        self.rejects: list[Reject] = []
        self._seq: dict[tuple[str, str], int] = {}

    def message(self, *, tenant: str, conv_id: str, msg_id: str, speaker: str, role: str,
                ts: datetime | None, text: str, caption: str | None, line: int) -> None:
        key = (tenant, conv_id)
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        self.messages.append(Message(tenant, conv_id, msg_id, seq, speaker, role, ts, text, caption,
                                     self.source_file, line, self.format))

    def record(self, p: _Pending, raw: bytes, *, conv_id: str, speaker: str, role: str,
               stamp: Callable[[], datetime | None], text: str) -> None:
        """A finished multi-line record (`raw`: its bytes): a message, or a reject when `stamp()` raises
        ValueError or the text is empty or too large."""
        try:
            ts = stamp()
        except ValueError as exc:
            self.reject(p.line, p.offset, E.E_TS_PARSE, str(exc)[:200], raw)
            return
        problem = _text_problem(text)
        if problem:
            self.reject(p.line, p.offset, problem[0], problem[1], raw)
            return
        self.message(tenant=self.tenant, conv_id=conv_id, msg_id=f"L{p.line}", speaker=speaker, role=role,
                     ts=ts, text=text, caption=None, line=p.line)

    def reject(self, line: int, byte_offset: int, reason: str, detail: str, raw: bytes) -> None:
        self.rejects.append(Reject(self.tenant, self.source_file, line, byte_offset, reason, detail, raw, self.format))

    def result(self) -> ReadResult:
        return ReadResult(self.format, self.messages, self.rejects)


def _whole_file(data: bytes, source_file: str, tenant: str, fmt: str, reason: str, detail: str) -> ReadResult:
    b = _Builder(source_file, tenant, fmt)
    b.reject(0, 0, reason, detail, data)
    return b.result()


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lines(data: bytes, base: int) -> list[tuple[int, int, bytes]]:
    """(1-based line number, byte offset in the original file, line bytes without CR/LF)."""
    out, pos = [], 0
    for i, raw in enumerate(data.split(b"\n"), start=1):
        content = raw[:-1] if raw.endswith(b"\r") else raw
        out.append((i, base + pos, content))
        pos += len(raw) + 1
    return out


def read_bytes(data: bytes, source_file: str, tenant: str) -> ReadResult:
    """Read one chat log. Never raises on bad input: problems become coded rejects (see module doc)."""
    body, base = _strip_bom(data)
    if not body.strip():
        return _whole_file(data, source_file, tenant, UNKNOWN, E.E_READ_EMPTY, "empty or whitespace-only file")
    if _is_binary(body):
        return _whole_file(data, source_file, tenant, UNKNOWN, E.E_READ_BINARY, "NUL or control bytes: not a text file")
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        text, utf8_error = None, exc
    fmt, doc = _detect(text if text is not None else body.decode("utf-8", errors="replace"), source_file)
    if text is None and fmt not in _LINE_READERS:
        return _whole_file(data, source_file, tenant, fmt, E.E_READ_UTF8, f"invalid UTF-8: {utf8_error}")
    if fmt == UNKNOWN:
        return _whole_file(data, source_file, tenant, fmt, E.E_FORMAT_UNKNOWN,
                           "content matches none of the chat-log formats read here: " + ", ".join(FORMATS))
    if fmt == "locomo_json":
        return _read_locomo(data, text, doc, source_file, tenant)
    if fmt == "chatgpt_json":
        return _read_chatgpt(data, body, base, text or "", source_file, tenant)

    lines = _lines(body, base)
    decoded: list[tuple[int, int, bytes, str | None]] = []
    bad = nonblank = 0
    for no, off, raw in lines:
        try:
            s: str | None = raw.decode("utf-8")
        except UnicodeDecodeError:
            s = None
            bad += 1
        if s is None or s.strip():
            nonblank += 1
        decoded.append((no, off, raw, s))
    # mostly undecodable: the file is in another encoding, not a few damaged lines
    if 2 * bad > nonblank:
        return _whole_file(data, source_file, tenant, fmt, E.E_READ_UTF8,
                           f"invalid UTF-8 on {bad} of {nonblank} lines")
    result = _LINE_READERS[fmt](decoded, source_file, tenant, default_conv_id(source_file, tenant))
    if not result.messages and not result.rejects:
        # a file never vanishes silently: e.g. a SillyTavern header or a QQ banner with no message after it
        return _whole_file(data, source_file, tenant, fmt, E.E_NO_MESSAGES, "the file holds no message records")
    return result


def read_file(path: Path, inbox: Path) -> ReadResult:
    """Read an inbox file; source_file is its posix path relative to the inbox, tenant its first folder."""
    return read_bytes(as_path(path).read_bytes(), source_file_for(path, inbox), tenant_for(path, inbox))


# -- canonical JSONL -----------------------------------------------------------------------------

def _id_field(value: object) -> str | None:
    """A string/integer id as text; None when absent or not an id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip() and _encodable(value):
        return value
    return None


def _read_jsonl(lines: list[tuple[int, int, bytes, str | None]], source_file: str, tenant: str,
                default_conv: str) -> ReadResult:
    b = _Builder(source_file, tenant, "canonical_jsonl")
    for no, off, raw, s in lines:
        if s is None:
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
            continue
        if not s.strip():
            continue
        try:
            rec = json.loads(s)
        except (ValueError, RecursionError) as exc:
            b.reject(no, off, E.E_JSON_PARSE, str(exc)[:200], raw)
            continue
        problem = _jsonl_problem(rec)
        if problem:
            b.reject(no, off, problem[0], problem[1], raw)
            continue
        try:
            ts = parse_ts(rec["ts"])
        except ValueError as exc:
            b.reject(no, off, E.E_TS_PARSE, str(exc)[:200], raw)
            continue
        if ts is None:
            b.reject(no, off, E.E_TS_MISSING, "ts is empty", raw)
            continue
        role = rec.get("role")
        role = _ROLES.get(role.strip().lower(), "other") if isinstance(role, str) and role.strip() else "user"
        b.message(tenant=(rec.get("tenant") or "").strip() or tenant, conv_id=_id_field(rec.get("conv_id")) or default_conv,
                  msg_id=_id_field(rec.get("msg_id")) or str(no), speaker=rec["speaker"].strip(), role=role,
                  ts=ts, text=rec["text"], caption=None, line=no)
    return b.result()


def _jsonl_problem(rec: object) -> tuple[str, str] | None:
    """(code, detail) when a parsed JSONL record is not a usable message (timestamps checked apart)."""
    if not isinstance(rec, dict):
        return E.E_JSON_SHAPE, f"a line must be a JSON object, not {type(rec).__name__}"
    speaker, text = rec.get("speaker"), rec.get("text")
    if not isinstance(speaker, str) or not speaker.strip() or not _encodable(speaker):
        return E.E_JSON_SHAPE, "speaker must be a non-empty string"
    if "text" not in rec or (text is not None and not isinstance(text, str)) or (text and not _encodable(text)):
        return E.E_JSON_SHAPE, "text must be a string"
    tenant = rec.get("tenant")
    if tenant is not None and (not isinstance(tenant, str) or not _encodable(tenant)):
        return E.E_JSON_SHAPE, "tenant must be a string"
    for key in ("conv_id", "msg_id"):
        if rec.get(key) is not None and _id_field(rec[key]) is None:
            return E.E_JSON_SHAPE, f"{key} must be a non-empty string or integer"
    if rec.get("role") is not None and not isinstance(rec["role"], str):
        return E.E_JSON_SHAPE, "role must be a string"
    if not text or not text.strip():
        return E.E_TEXT_EMPTY, "text is empty"
    if len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
        return E.E_MSG_TOO_LARGE, f"text above {MAX_MESSAGE_BYTES} bytes"
    if rec.get("ts") is None or (isinstance(rec["ts"], str) and not rec["ts"].strip()):
        return E.E_TS_MISSING, "ts is missing"
    return None


# -- transcripts ---------------------------------------------------------------------------------

def _role_of_speaker(speaker: str) -> str:
    return "assistant" if speaker.lower() in _ASSISTANT_NAMES else "user"


def _read_transcript(lines: list[tuple[int, int, bytes, str | None]], source_file: str, tenant: str,
                     conv: str) -> ReadResult:
    b = _Builder(source_file, tenant, "transcript")
    # the message being built: its first line, offset, speaker, ts, text parts and raw line bytes
    pending: dict | None = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        text = "\n".join(part for part in p["parts"] if part)
        raw = b"\n".join(p["raw"])
        if not text:
            b.reject(p["line"], p["offset"], E.E_TEXT_EMPTY, "no text after the speaker", raw)
        elif len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
            b.reject(p["line"], p["offset"], E.E_MSG_TOO_LARGE, f"text above {MAX_MESSAGE_BYTES} bytes", raw)
        else:
            b.message(tenant=tenant, conv_id=conv, msg_id=f"L{p['line']}", speaker=p["speaker"],
                      role=_role_of_speaker(p["speaker"]), ts=p["ts"], text=text, caption=None, line=p["line"])

    for no, off, raw, s in lines:
        if s is None:
            flush()
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
            continue
        if not s.strip():
            continue
        if s[0].isspace():
            if pending is not None:
                pending["parts"].append(s.strip())
                pending["raw"].append(raw)
            else:
                b.reject(no, off, E.E_LINE_PARSE, "continuation line without a message to continue", raw)
            continue
        flush()
        m = _transcript_match(s)
        if m is None:
            b.reject(no, off, E.E_LINE_PARSE, "line is not `Speaker: text`", raw)
            continue
        stamp = m.group("ts")
        try:
            ts = parse_ts(stamp)
        except ValueError as exc:
            b.reject(no, off, E.E_TS_PARSE, str(exc)[:200], raw)
            continue
        if stamp is not None and ts is None:
            b.reject(no, off, E.E_TS_PARSE, "empty timestamp brackets", raw)
            continue
        pending = {"line": no, "offset": off, "speaker": m.group("speaker").strip(), "ts": ts,
                   "parts": [m.group("text").strip()], "raw": [raw]}
    flush()
    return b.result()


# -- LoCoMo --------------------------------------------------------------------------------------

def _dump(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _read_locomo(data: bytes, text: str | None, doc: object, source_file: str, tenant: str) -> ReadResult:
    b = _Builder(source_file, tenant, "locomo_json")
    if doc is _NOT_JSON:
        try:
            doc = json.loads((text or "").lstrip())
        except (ValueError, RecursionError) as exc:
            b.reject(0, 0, E.E_JSON_PARSE, str(exc)[:200], data)
            return b.result()
    samples = doc if isinstance(doc, list) else [doc]
    default_conv = default_conv_id(source_file, tenant)
    turn_no = 0
    for i, sample in enumerate(samples):
        conv = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conv, dict):
            b.reject(0, 0, E.E_JSON_SHAPE, f"sample {i} has no conversation object", _dump(sample))
            continue
        conv_id = _id_field(sample.get("sample_id")) or f"{default_conv}#{i}"
        sessions = sorted((int(m.group(1)), k) for k in conv
                          if (m := _SESSION_KEY.match(k)) and isinstance(conv[k], list))
        for n, key in sessions:
            stamp = conv.get(f"{key}_date_time")
            try:
                ts, ts_error = parse_ts(stamp), None
            except ValueError as exc:
                ts, ts_error = None, str(exc)[:200]
            for turn in conv[key]:
                turn_no += 1
                problem = ts_error and (E.E_TS_PARSE, f"{key}_date_time: {ts_error}")
                problem = problem or _locomo_turn_problem(turn)
                if problem:
                    b.reject(turn_no, 0, problem[0], f"{key}: {problem[1]}", _dump(turn))
                    continue
                utterance = (turn.get("text") or "").strip()
                caption = turn.get("blip_caption")
                caption = caption.strip() if isinstance(caption, str) and caption.strip() else None
                if caption:
                    utterance = f"{utterance} [image: {caption}]" if utterance else f"[image: {caption}]"
                b.message(tenant=tenant, conv_id=conv_id,
                          msg_id=_id_field(turn.get("dia_id")) or f"D{n}:{turn_no}",
                          speaker=turn["speaker"].strip(), role="user", ts=ts, text=utterance,
                          caption=caption, line=turn_no)
    if not b.messages and not b.rejects:
        # a file never vanishes silently: no turns at all is itself a reject
        b.reject(0, 0, E.E_JSON_SHAPE, "no session_N turn lists in any sample", data)
    return b.result()


def _locomo_turn_problem(turn: object) -> tuple[str, str] | None:
    if not isinstance(turn, dict):
        return E.E_JSON_SHAPE, "turn is not an object"
    speaker, text, caption = turn.get("speaker"), turn.get("text"), turn.get("blip_caption")
    if not isinstance(speaker, str) or not speaker.strip() or not _encodable(speaker):
        return E.E_JSON_SHAPE, "turn speaker must be a non-empty string"
    if (text is not None and not isinstance(text, str)) or (caption is not None and not isinstance(caption, str)):
        return E.E_JSON_SHAPE, "turn text / blip_caption must be strings"
    if not _encodable(text or "") or not _encodable(caption or "") or not _encodable(str(turn.get("dia_id", ""))):
        return E.E_JSON_SHAPE, "turn holds unpaired surrogates"
    if not (text or "").strip() and not (caption or "").strip():
        return E.E_TEXT_EMPTY, "turn has no text"
    if len((text or "").encode("utf-8")) + len((caption or "").encode("utf-8")) > MAX_MESSAGE_BYTES:
        return E.E_MSG_TOO_LARGE, f"turn text above {MAX_MESSAGE_BYTES} bytes"
    return None


# -- multi-line records (WhatsApp, QQ) -----------------------------------------------------------

@dataclass
class _Pending:
    """A record being read: its first (head) line and the continuation lines after it, with their raw bytes."""
    line: int
    offset: int
    head: re.Match
    lines: list[str]
    raw: list[bytes]
    offsets: list[int]

    @classmethod
    def start(cls, line: int, offset: int, head: re.Match, raw: bytes) -> _Pending:
        return cls(line, offset, head, [], [raw], [offset])

    def add(self, text: str, raw: bytes, offset: int) -> None:
        self.lines.append(text)
        self.raw.append(raw)
        self.offsets.append(offset)

    def trimmed(self) -> tuple[list[str], bytes]:
        """The continuation lines without trailing blank ones, and the file's bytes of head + those lines."""
        n = len(self.lines)
        while n and not self.lines[n - 1].strip():
            n -= 1
        # the gap to the next line's offset is the line's terminator: 2 bytes is CRLF, 1 is LF
        ends = [b"\r\n" if self.offsets[k + 1] - self.offsets[k] - len(self.raw[k]) == 2 else b"\n" for k in range(n)]
        return self.lines[:n], b"".join(r + e for r, e in zip(self.raw, ends)) + self.raw[n]


def _text_problem(text: str) -> tuple[str, str] | None:
    if not text.strip():
        return E.E_TEXT_EMPTY, "message has no text"
    if len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
        return E.E_MSG_TOO_LARGE, f"text above {MAX_MESSAGE_BYTES} bytes"
    return None


# -- SillyTavern / Luker -------------------------------------------------------------------------

_TAVERN_HEADER_KEYS = ("user_name", "character_name", "create_date", "chat_metadata")


def _is_tavern_header(obj: object) -> bool:
    """SillyTavern's first line: chat metadata (user_name, character_name, create_date, chat_metadata), no `mes`."""
    return isinstance(obj, dict) and "mes" not in obj and any(k in obj for k in _TAVERN_HEADER_KEYS)


def _read_sillytavern(lines: _Lines, source_file: str, tenant: str, conv: str) -> ReadResult:
    """One message per line after the header; swipes (alternative replies) are ignored, the text is `mes`.

    conv_id is the file's path: the header's character_name repeats across chats and
    its ids differ between app versions, while the path names this chat file.
    """
    b = _Builder(source_file, tenant, "sillytavern_jsonl")
    first = True
    for no, off, raw, s in lines:
        if s is not None and not s.strip():
            continue
        is_first, first = first, False
        if s is None:
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
            continue
        try:
            rec = json.loads(s)
        except (ValueError, RecursionError) as exc:
            b.reject(no, off, E.E_JSON_PARSE, str(exc)[:200], raw)
            continue
        if is_first and _is_tavern_header(rec):
            continue   # chat metadata, not a message: consumed, not an input record
        problem = _tavern_problem(rec)
        if problem:
            b.reject(no, off, problem[0], problem[1], raw)
            continue
        try:
            ts = parse_ts(rec.get("send_date"))
        except ValueError as exc:
            b.reject(no, off, E.E_TS_PARSE, f"send_date: {str(exc)[:200]}", raw)
            continue
        b.message(tenant=tenant, conv_id=conv, msg_id=f"L{no}", speaker=rec["name"].strip(), role=_tavern_role(rec),
                  ts=ts, text=rec["mes"].strip(), caption=None, line=no)
    return b.result()


def _tavern_problem(rec: object) -> tuple[str, str] | None:
    if not isinstance(rec, dict):
        return E.E_JSON_SHAPE, f"a line must be a JSON object, not {type(rec).__name__}"
    if _is_tavern_header(rec):
        return E.E_JSON_SHAPE, "a chat header object after the first line"
    name, mes = rec.get("name"), rec.get("mes")
    if not isinstance(name, str) or not name.strip() or not _encodable(name):
        return E.E_JSON_SHAPE, "name must be a non-empty string"
    if not isinstance(mes, str) or not _encodable(mes):
        return E.E_JSON_SHAPE, "mes must be a string"
    for key in ("is_user", "is_system"):
        if rec.get(key) is not None and not isinstance(rec[key], bool):
            return E.E_JSON_SHAPE, f"{key} must be a boolean"
    return _text_problem(mes)


def _tavern_role(rec: dict) -> str:
    """system for hidden (is_system) and narrator messages, else user / assistant by is_user."""
    extra = rec.get("extra") if isinstance(rec.get("extra"), dict) else {}
    if rec.get("is_system") or extra.get("type") == "narrator":
        return "system"
    return "user" if rec.get("is_user") else "assistant"


# -- ChatGPT export ------------------------------------------------------------------------------

_JSON_WS = " \t\n\r"
_CHATGPT_ROLES = {"user": "user", "assistant": "assistant", "system": "system"}   # tool and others → "other"
_PART_NOTES = {"image_asset_pointer": "[image]", "audio_asset_pointer": "[audio]",
               "video_container_asset_pointer": "[video]"}


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _JSON_WS:
        i += 1
    return i


def _json_items(text: str) -> tuple[list[tuple[int, int, object]], str | None]:
    """The items of a top-level JSON array (or one top-level object) as (start, end, value) character spans.

    Items are decoded one by one, so a truncated or damaged array still yields the
    items before the damage; the second value says why decoding stopped (None: it didn't).
    """
    decoder = json.JSONDecoder()
    items: list[tuple[int, int, object]] = []
    i = _skip_ws(text, 0)
    lone = text.startswith("{", i)
    if not lone:
        if not text.startswith("[", i):
            return items, "not a JSON array of conversations"
        i = _skip_ws(text, i + 1)
        if text.startswith("]", i):
            return items, None if _skip_ws(text, i + 1) == len(text) else "extra data after the array"
    while True:
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError) as exc:
            return items, str(exc)[:200]
        items.append((i, end, value))
        j = _skip_ws(text, end)
        if lone:
            return items, None if j == len(text) else "extra data after the conversation"
        if text.startswith(",", j):
            i = _skip_ws(text, j + 1)
        elif text.startswith("]", j):
            return items, None if _skip_ws(text, j + 1) == len(text) else "extra data after the array"
        else:
            return items, "expected ',' or ']' after a conversation"


class _ByteOffsets:
    """UTF-8 byte offsets of increasing character positions in `text`, computed incrementally."""

    def __init__(self, text: str) -> None:
        self.text, self.char, self.byte = text, 0, 0

    def __call__(self, pos: int) -> int:
        if pos < self.char:
            self.char = self.byte = 0
        self.byte += len(self.text[self.char:pos].encode("utf-8"))
        self.char = pos
        return self.byte


def _read_chatgpt(data: bytes, body: bytes, base: int, text: str, source_file: str, tenant: str) -> ReadResult:
    """Each conversation's current branch (current_node → parent → … → root, reversed) as its turns.

    `line` is the record number in the file; a malformed conversation and a damaged
    tail are one reject each, with their original bytes. A message whose create_time
    is null keeps ts None: the export does not know it, and we do not guess.
    """
    b = _Builder(source_file, tenant, "chatgpt_json")
    items, stop = _json_items(text)
    if not items:
        b.reject(0, 0, E.E_JSON_PARSE, stop or "no conversation in the array", data)
        return b.result()
    at = _ByteOffsets(text)
    default_conv = default_conv_id(source_file, tenant)
    record = 0
    for i, (start, end, conv) in enumerate(items):
        raw_start, raw_end = at(start), at(end)
        branch = _chatgpt_branch(conv)
        if isinstance(branch, str):
            record += 1
            b.reject(record, base + raw_start, E.E_JSON_SHAPE, f"conversation {i}: {branch}", body[raw_start:raw_end])
            continue
        conv_id = _id_field(conv.get("conversation_id")) or _id_field(conv.get("id")) or f"{default_conv}#{i}"
        for node_id, node in branch:
            if node.get("message") is None:
                continue   # the root: a placeholder node, not a message
            record += 1
            _chatgpt_node(b, record, node_id, node, conv_id, tenant)
    if stop is not None:
        tail = at(items[-1][1])
        b.reject(record + 1, base + tail, E.E_JSON_PARSE, f"after conversation {len(items) - 1}: {stop}", body[tail:])
    if not b.messages and not b.rejects:
        b.reject(0, 0, E.E_NO_MESSAGES, "no visible message on any conversation's current branch", data)
    return b.result()


def _chatgpt_branch(conv: object) -> list[tuple[str, dict]] | str:
    """The (node id, node) pairs from the root to current_node, or why the conversation is malformed."""
    if not isinstance(conv, dict):
        return "not a JSON object"
    mapping, current = conv.get("mapping"), conv.get("current_node")
    if not isinstance(mapping, dict):
        return "mapping must be an object"
    if not isinstance(current, str) or current not in mapping:
        return "current_node is missing or not in mapping"
    path: list[tuple[str, dict]] = []
    seen: set[str] = set()
    node_id: object = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            return "parent links form a cycle"
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            return "a node on the current branch is not an object"
        path.append((node_id, node))
        node_id = node.get("parent")
    if node_id is not None and not isinstance(node_id, str):
        return "parent must be a node id or null"
    # a parent id absent from mapping ends the branch as the root does
    return path[::-1]


def _chatgpt_node(b: _Builder, record: int, node_id: str, node: dict, conv_id: str, tenant: str) -> None:
    """One message node of the current branch → a message, a reject, or nothing (hidden / no visible text)."""
    msg = node["message"]
    problem = _chatgpt_message_problem(node_id, msg)
    if problem:
        b.reject(record, 0, problem[0], problem[1], _dump(node))
        return
    meta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
    if meta.get("is_visually_hidden_from_conversation") is True:
        return
    text = _chatgpt_text(msg["content"])
    if not text:
        return
    problem = (E.E_JSON_SHAPE, "text holds unpaired surrogates") if not _encodable(text) else _text_problem(text)
    if problem:
        b.reject(record, 0, problem[0], problem[1], _dump(node))
        return
    try:
        ts = parse_ts(msg.get("create_time"))
    except ValueError as exc:
        b.reject(record, 0, E.E_TS_PARSE, f"create_time: {str(exc)[:200]}", _dump(node))
        return
    role, name = msg["author"]["role"].strip(), msg["author"].get("name")
    b.message(tenant=tenant, conv_id=conv_id, msg_id=node_id, speaker=name.strip() if name and name.strip() else role,
              role=_CHATGPT_ROLES.get(role, "other"), ts=ts, text=text, caption=None, line=record)


def _chatgpt_message_problem(node_id: str, msg: object) -> tuple[str, str] | None:
    if not isinstance(msg, dict):
        return E.E_JSON_SHAPE, "message must be an object or null"
    if _id_field(node_id) is None:
        return E.E_JSON_SHAPE, "node id must be a non-empty string"
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str) or not role.strip() or not _encodable(role):
        return E.E_JSON_SHAPE, "author.role must be a non-empty string"
    name = author.get("name")
    if name is not None and (not isinstance(name, str) or not _encodable(name)):
        return E.E_JSON_SHAPE, "author.name must be a string or null"
    content = msg.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("content_type"), str):
        return E.E_JSON_SHAPE, "content must be an object with a content_type"
    parts = content.get("parts")
    if parts is not None and (not isinstance(parts, list) or not all(isinstance(p, (str, dict)) for p in parts)):
        return E.E_JSON_SHAPE, "content.parts must be a list of strings and objects"
    for key in ("text", "result"):
        if content.get(key) is not None and not isinstance(content[key], str):
            return E.E_JSON_SHAPE, f"content.{key} must be a string"
    return None


def _chatgpt_text(content: dict) -> str:
    """The visible text of a message: its string parts (attachments noted, e.g. "[image]"), else its text / result.

    Content without either (model reasoning, user profiles, …) has no text and is not a turn.
    """
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = [p if isinstance(p, str) else _part_note(p) for p in parts]
        return "\n".join(p for p in pieces if p.strip()).strip()
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return content[key].strip()
    return ""


def _part_note(part: dict) -> str:
    """A non-text part of a multimodal message: its transcription when it has one, else a marker."""
    if isinstance(part.get("text"), str) and part["text"].strip():
        return part["text"]
    kind = part.get("content_type")
    return _PART_NOTES.get(kind, "[attachment]") if isinstance(kind, str) else "[attachment]"


# -- WhatsApp ------------------------------------------------------------------------------------

_WA_MARKS = "\u200e\u200f"   # left-to-right / right-to-left marks: iOS puts them before generated text
_WA_DATE = r"(?P<a>\d{1,2})(?P<sep>[/.\-])(?P<b>\d{1,2})[/.\-](?P<y>\d{4}|\d{2})"
_WA_TIME = r"(?P<time>\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?\s?[Mm]\.?)?)"
# iOS "[15/06/2023, 20:04:12] Name: text"; Android "15/06/2023, 20:04 - Name: text" (also ISO dates in some locales)
_WA_IOS = re.compile(rf"^[{_WA_MARKS}]?\[{_WA_DATE},?\s+{_WA_TIME}\]\s?(?P<rest>.*)$", re.S)
_WA_ANDROID = re.compile(
    rf"^[{_WA_MARKS}]?(?:{_WA_DATE}|(?P<iso>\d{{4}}-\d{{1,2}}-\d{{1,2}})),?\s+{_WA_TIME}\s[-–]\s(?P<rest>.*)$", re.S)
_WA_NAME = re.compile(r"^(?P<name>[^:\n]{1,80}?):(?:\s|$)(?P<text>.*)$", re.S)
# iOS writes group events as "GroupName: ‎<event>"; the mark plus one of these phrases tells them from messages
_WA_SYSTEM = re.compile(
    r"end-to-end encrypted|created (?:group|this group)|\b(?:added|removed|left)\b|joined using this group's invite"
    r"|changed (?:the subject|this group's icon|the group description|their phone number|the group settings)"
    r"|deleted this group's icon|security code|now an admin|disappearing messages"
    r"|端到端加密|创建了群组|创建了此群组|添加了|移除了|退出了|已退出|加入了|更改了", re.I)


def _whatsapp_prefix(line: str) -> re.Match | None:
    return _WA_IOS.match(line) or _WA_ANDROID.match(line)


def _wa_dayfirst(heads: list[re.Match]) -> bool:
    """Whether the file's numeric dates are day/month — decided once per file so every line reads alike.

    A first number above 12 → D/M; else a second number above 12 → M/D; else the
    locale's style: US "6/15/23" (slashes, 2-digit year) is M/D, "15/06/2023",
    "[15/06/2023, …]" and "15.06.23" are D/M.
    """
    numeric = [m for m in heads if m.group("a") is not None]
    if any(int(m.group("a")) > 12 for m in numeric):
        return True
    if any(int(m.group("b")) > 12 for m in numeric):
        return False
    return not numeric or not (numeric[0].group("sep") == "/" and len(numeric[0].group("y")) == 2)


def _wa_ts(head: re.Match, dayfirst: bool) -> datetime | None:
    if head.group("a") is None:
        return parse_ts(f"{head.group('iso')} {head.group('time')}")
    return parse_ts(f"{head.group('a')}/{head.group('b')}/{head.group('y')}, {head.group('time')}", dayfirst=dayfirst)


def _wa_name(candidate: str) -> str | None:
    """A sender name, or None when the text before ':' is not one (an Android system line with a colon)."""
    name = candidate.strip().strip(_WA_MARKS).strip().lstrip("~").strip()   # "~ Alice": not in the address book
    if not name or len(name) > 64 or len(name.split()) > 6 or any(q in name for q in '"“”'):
        return None
    return name


def _wa_split(rest: str) -> tuple[str | None, str]:
    """(sender, text) of a dated line after its date; sender None for a system line."""
    m = _WA_NAME.match(rest)
    name = _wa_name(m.group("name")) if m else None
    if m is None or name is None:
        return None, rest   # Android system lines have no `Name:` ("Bob added Carol")
    text = m.group("text")
    marked = text[:1] != "" and text[0] in _WA_MARKS
    if marked and not text.lstrip(_WA_MARKS).startswith("<attached:") and _WA_SYSTEM.search(text):
        return None, text
    return name, text


def _read_whatsapp(lines: _Lines, source_file: str, tenant: str, conv: str) -> ReadResult:
    """A dated line starts a message; undated lines (not indented, blank ones kept inside) continue it.

    System lines (encryption notice, group events) are kept as role "system" messages
    from speaker "system": they are dated records of the export and so are conserved.
    """
    b = _Builder(source_file, tenant, "whatsapp")
    matched = [(no, off, raw, s, _whatsapp_prefix(s) if s is not None else None) for no, off, raw, s in lines]
    dayfirst = _wa_dayfirst([m for *_, m in matched if m is not None])
    pending: _Pending | None = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        more, raw = p.trimmed()
        sender, first = _wa_split(p.head.group("rest"))
        text = "\n".join([first, *more]).strip().lstrip(_WA_MARKS).strip()
        b.record(p, raw, conv_id=conv, speaker=sender or "system", role="user" if sender else "system",
                 stamp=lambda: _wa_ts(p.head, dayfirst), text=text)

    for no, off, raw, s, head in matched:
        if s is None:
            flush()
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
        elif head is not None:
            flush()
            pending = _Pending.start(no, off, head, raw)
        elif pending is not None:
            pending.add(s, raw, off)
        elif s.strip():
            b.reject(no, off, E.E_LINE_PARSE, "text without a dated line before it", raw)
    flush()
    return b.result()


# -- QQ ------------------------------------------------------------------------------------------

_QQ_BANNER = re.compile(r"^消息记录[（(]此消息记录为文本格式，?不支持重新导入[）)]$")
_QQ_RULE = re.compile(r"^={16,}$")
_QQ_FIELD = re.compile(r"^(?P<key>消息分组|消息对象)[:：](?P<value>.*)$")
_QQ_HEAD = re.compile(r"^(?P<date>\d{4}-\d{1,2}-\d{1,2})\s+(?P<time>\d{1,2}:\d{2}:\d{2})\s+(?P<nick>.*?)\s*"
                      r"(?:\((?P<qq>\d{4,12})\)|<(?P<mail>[^<>\s@]+@[^<>\s]+)>)$")
_QQ_SYSTEM_ID = "10000"   # QQ's own account: "系统消息(10000)"


def _read_qq(lines: _Lines, source_file: str, tenant: str, default_conv: str) -> ReadResult:
    """`date time nick(QQ)` or `date time nick<mail>` starts a message, its text on the lines below.

    The banner, `====` rules and `消息分组:` / `消息对象:` lines are header (consumed); a
    `消息对象:` line names the conversation of the messages after it (an export of all
    chats holds one block per contact or group). Blank lines inside a message's text
    are kept; a message ends at the next message or header line.
    """
    b = _Builder(source_file, tenant, "qq")
    conv = default_conv
    pending: _Pending | None = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        more, raw = p.trimmed()
        nick = p.head.group("nick").strip()
        if not nick:
            b.reject(p.line, p.offset, E.E_LINE_PARSE, "message header without a nickname", raw)
            return
        b.record(p, raw, conv_id=conv, speaker=nick, role="system" if p.head.group("qq") == _QQ_SYSTEM_ID else "user",
                 stamp=lambda: parse_ts(f"{p.head.group('date')} {p.head.group('time')}"), text="\n".join(more).strip())

    for no, off, raw, s in lines:
        if s is None:
            flush()
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
            continue
        line = s.strip()
        field = _QQ_FIELD.match(line)
        if field or _QQ_BANNER.match(line) or _QQ_RULE.match(line):
            flush()
            if field and field.group("key") == "消息对象":
                conv = field.group("value").strip() or default_conv
            continue
        head = _QQ_HEAD.match(line)
        if head:
            flush()
            pending = _Pending.start(no, off, head, raw)
        elif pending is not None:
            pending.add(s, raw, off)
        elif line:
            b.reject(no, off, E.E_LINE_PARSE, "text line outside any message", raw)
    flush()
    return b.result()


_LINE_READERS: dict[str, Callable[[_Lines, str, str, str], ReadResult]] = {
    "canonical_jsonl": _read_jsonl,
    "transcript": _read_transcript,
    "sillytavern_jsonl": _read_sillytavern,
    "whatsapp": _read_whatsapp,
    "qq": _read_qq,
}
