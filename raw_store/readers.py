"""Input-format readers: raw chat-log bytes → `Message`s and coded `Reject`s.

Formats (detected from content; the extension only breaks ties):
  canonical_jsonl  one JSON object per line {tenant?, conv_id?, msg_id?, speaker, role?, ts, text}
  transcript       `Speaker: text` lines, optional `[timestamp] ` or WhatsApp `date, time - ` prefix,
                   indented lines continue the previous message
  locomo_json      LoCoMo samples: conversation.session_N turn lists + session_N_date_time

Contract: `read_bytes` never raises on bad input. Every non-blank line of a line
format ends up in exactly one message or one reject (or the whole file is one
line-0 reject); every message has non-empty text.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

from raw_store import errors as E
from raw_store.lake import DEFAULT_TENANT
from raw_store.timeparse import parse_ts

FORMATS = ("canonical_jsonl", "transcript", "locomo_json")
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

_TS_WHATSAPP = r"\d{1,2}[/.]\d{1,2}[/.]\d{2,4},?\s+\d{1,2}:\d{2}(?::\d{2})?(?:\s?[APap]\.?[Mm]\.?)?"
_TRANSCRIPT_LINE = re.compile(
    r"^(?:\[(?P<ts>[^\]\n]{0,80})\]\s*|(?P<wts>" + _TS_WHATSAPP + r")\s+[-–]\s+)?"
    r"(?P<speaker>[^:：\[\]{}<>\n]{1,80}?)\s*[:：](?P<text>.*)$",
    re.S,
)
_URLISH = re.compile(r"https?|www\.|://|\.(?:com|org|net|io)\b", re.I)
_LETTER = re.compile(r"[^\W\d_]")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


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
    byte_offset: int   # offset of the rejected bytes in the file (0 for whole-file and JSON-record rejects)
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

def tenant_for(path: Path, inbox: Path) -> str:
    """The first folder under the inbox (inbox/<tenant>/...), else DEFAULT_TENANT."""
    rel = _relative(path, inbox)
    parts = rel.parts if rel is not None else ()
    return parts[0] if len(parts) >= 2 else DEFAULT_TENANT


def _relative(path: Path, inbox: Path) -> PurePosixPath | None:
    for p, base in ((Path(path), Path(inbox)), (Path(path).resolve(), Path(inbox).resolve())):
        try:
            return PurePosixPath(p.relative_to(base).as_posix())
        except ValueError:
            continue
    return None


def source_file_for(path: Path, inbox: Path) -> str:
    """The file's posix path relative to the inbox (its bare name when outside the inbox)."""
    rel = _relative(path, inbox)
    return rel.as_posix() if rel is not None else Path(path).name


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
            if isinstance(doc, dict) and ("text" in doc or "speaker" in doc):
                return "canonical_jsonl", _NOT_JSON
    lines = [ln for ln in (x.rstrip("\r") for x in text.split("\n")) if ln.strip() and not ln[0].isspace()]
    sample = lines[:_SAMPLE_LINES]
    n = len(sample)
    json_lines = [ln for ln in sample if ln.lstrip().startswith("{")]
    dicts = []
    for ln in json_lines:
        try:
            obj = json.loads(ln)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            dicts.append(obj)
    canonical = sum(1 for d in dicts if "text" in d or "speaker" in d)
    transcript = sum(1 for ln in sample if _transcript_match(ln))
    # a JSONL of some other shape (e.g. another app's export) is not ours to half-accept
    jsonl_ok = canonical > 0 or not dicts
    if n and json_lines and jsonl_ok and (2 * len(json_lines) >= n or (suffix == ".jsonl" and len(json_lines) >= transcript)):
        return "canonical_jsonl", _NOT_JSON
    if n and transcript and 2 * transcript >= n:
        return "transcript", _NOT_JSON
    # truncated/garbled LoCoMo JSON: keep it as that format so the reject says E_JSON_PARSE
    if doc is _NOT_JSON and stripped[:1] in ("[", "{") and '"conversation"' in text and re.search(r'"session_\d+"', text):
        return "locomo_json", _NOT_JSON
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
    if text is None and fmt not in ("canonical_jsonl", "transcript"):
        return _whole_file(data, source_file, tenant, fmt, E.E_READ_UTF8, f"invalid UTF-8: {utf8_error}")
    if fmt == UNKNOWN:
        return _whole_file(data, source_file, tenant, fmt, E.E_FORMAT_UNKNOWN,
                           "content matches none of " + ", ".join(FORMATS))
    if fmt == "locomo_json":
        return _read_locomo(data, text, doc, source_file, tenant)

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
    conv = default_conv_id(source_file, tenant)
    if fmt == "canonical_jsonl":
        return _read_jsonl(decoded, source_file, tenant, conv)
    return _read_transcript(decoded, source_file, tenant, conv)


def read_file(path: Path, inbox: Path) -> ReadResult:
    """Read an inbox file; source_file is its posix path relative to the inbox, tenant its first folder."""
    return read_bytes(Path(path).read_bytes(), source_file_for(path, inbox), tenant_for(path, inbox))


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
        stamp = m.group("ts") if m.group("ts") is not None else m.group("wts")
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
