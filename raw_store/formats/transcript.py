"""transcript: `Speaker: text` lines, optional `[timestamp] ` prefix, indented lines continue the message."""

from __future__ import annotations

import re

from raw_store import errors as E
from raw_store.formats.base import LINES, MAX_MESSAGE_BYTES, Format, ReadResult, Sample, Source
from raw_store.timeparse import parse_ts

NAME = "transcript"
RECORD = "a `Speaker: text` line with its indented continuation lines, or a stray line"
_ASSISTANT_NAMES = frozenset({"assistant", "bot", "ai"})
_LINE = re.compile(r"^(?:\[(?P<ts>[^\]\n]{0,80})\]\s*)?(?P<speaker>[^:：\[\]{}<>\n]{1,80}?)\s*[:：](?P<text>.*)$", re.S)
_URLISH = re.compile(r"https?|www\.|://|\.(?:com|org|net|io)\b", re.I)
_LETTER = re.compile(r"[^\W\d_]")


def speaker_line(line: str) -> re.Match | None:
    """A `Speaker: text` line with a plausible speaker (letters, ≤ 6 words, ≤ 64 chars, no URL)."""
    if not line or line[0].isspace():
        return None
    m = _LINE.match(line)
    if m is None:
        return None
    speaker = m.group("speaker").strip()
    if not (1 <= len(speaker) <= 64) or len(speaker.split()) > 6:
        return None
    if _URLISH.search(speaker) or not _LETTER.search(speaker) or m.group("text").startswith("//"):
        return None
    return m


def sniff(s: Sample) -> bool:
    n = len(s.lines)
    return bool(n) and 2 * sum(1 for ln in s.lines if speaker_line(ln)) >= n


def role_of_speaker(speaker: str) -> str:
    return "assistant" if speaker.lower() in _ASSISTANT_NAMES else "user"


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    conv = src.default_conv
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
            b.message(
                conv_id=conv,
                msg_id=f"L{p['line']}",
                speaker=p["speaker"],
                role=role_of_speaker(p["speaker"]),
                ts=p["ts"],
                text=text,
                line=p["line"],
            )

    for no, off, raw, s in src.lines:
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
        m = speaker_line(s)
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
        pending = {
            "line": no,
            "offset": off,
            "speaker": m.group("speaker").strip(),
            "ts": ts,
            "parts": [m.group("text").strip()],
            "raw": [raw],
        }
    flush()
    return b.result()


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
