"""whatsapp: WhatsApp "Export chat" text, iOS `[date, time] Name: text` or Android `date, time - Name: text`.

System lines become role "system" messages from speaker "system": the encryption notice
and group events are dated records of the export, so they are conserved, but they are
nobody's words. Which lines are system, most reliable cue first:
  1. Android: no `Name:` after the date ("Leon hat Mia hinzugefügt") — any language;
  2. iOS: the text starts with a left-to-right mark and reads as an event or notice in one
     of the covered languages (raw_store.formats.whatsapp_phrases);
  3. iOS groups: a "sender" whose every line is marked, one of them an event or notice, is
     the group itself (`GroupName: ‎…`): all its marked lines are system, whatever the language.
Media placeholders ("image omitted", "Bild weggelassen", "<Media omitted>", …) and deleted
notices stay their sender's messages, with the text replaced by a bracketed note ("[image]",
"[document: Plan.pdf]", "[deleted message]") as chatgpt_json notes attachments: R2G finds
no fact in a note, while recall still shows who sent a photo when.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime

from raw_store import errors as E
from raw_store.formats import whatsapp_phrases as P
from raw_store.formats.base import LINES, Format, Pending, ReadResult, Sample, Source
from raw_store.timeparse import parse_ts

NAME = "whatsapp"
RECORD = "a dated line with its undated continuation lines, or a stray line before the first dated line"
MARKS = "\u200e\u200f"  # left-to-right / right-to-left marks: iOS puts them before generated text
_DATE = r"(?P<a>\d{1,2})(?P<sep>[/.\-])(?P<b>\d{1,2})[/.\-](?P<y>\d{4}|\d{2})"
_TIME = r"(?P<time>\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?\s?[Mm]\.?)?)"
# iOS "[15/06/2023, 20:04:12] Name: text"; Android "15/06/2023, 20:04 - Name: text" (also ISO dates in some locales)
_IOS = re.compile(rf"^[{MARKS}]?\[{_DATE},?\s+{_TIME}\]\s?(?P<rest>.*)$", re.S)
_ANDROID = re.compile(
    rf"^[{MARKS}]?(?:{_DATE}|(?P<iso>\d{{4}}-\d{{1,2}}-\d{{1,2}})),?\s+{_TIME}\s[-–]\s(?P<rest>.*)$", re.S
)
_NAME = re.compile(r"^(?P<name>[^:\n]{1,80}?):(?:\s|$)(?P<text>.*)$", re.S)


def dated_line(line: str) -> re.Match | None:
    return _IOS.match(line) or _ANDROID.match(line)


def sniff(s: Sample) -> bool:
    # messages may span many undated lines, but an export always starts with a dated line
    n = len(s.lines)
    dated = sum(1 for ln in s.lines if dated_line(ln))
    return bool(dated) and (2 * dated >= n or (dated_line(s.lines[0]) is not None and 4 * dated >= n))


def _dayfirst(heads: list[re.Match]) -> bool:
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


def _ts(head: re.Match, dayfirst: bool) -> datetime | None:
    if head.group("a") is None:
        return parse_ts(f"{head.group('iso')} {head.group('time')}")
    return parse_ts(f"{head.group('a')}/{head.group('b')}/{head.group('y')}, {head.group('time')}", dayfirst=dayfirst)


def _name(candidate: str) -> str | None:
    """A sender name, or None when the text before ':' is not one (an Android system line with a colon)."""
    name = candidate.strip().strip(MARKS).strip().lstrip("~").strip()  # "~ Alice": not in the address book
    if not name or len(name) > 64 or len(name.split()) > 6 or any(q in name for q in '"“”„«»'):
        return None
    return name


def _split(rest: str) -> tuple[str | None, str]:
    """(sender, text) of a dated line after its date; sender None when there is no `Name:` (Android system)."""
    m = _NAME.match(rest)
    name = _name(m.group("name")) if m else None
    return (None, rest) if m is None or name is None else (name, m.group("text"))


def _marked(text: str) -> bool:
    return text[:1] != "" and text[0] in MARKS


def _generated(text: str) -> bool:
    """Marked text that is an attachment, a media placeholder or a deleted notice: a sender's own message."""
    bare = text.lstrip(MARKS)
    return bare.startswith("<attached:") or P.media_note(bare.split("\n", 1)[0]) is not None


def _group_senders(firsts: list[tuple[str | None, str]]) -> set[str]:
    """iOS groups write events as `GroupName: ‎…`: a sender whose every line is marked, and one of them an event,
    is the group itself (a person who only sent photos has only placeholders: not an event)."""
    marked_only: dict[str, bool] = defaultdict(lambda: True)
    evented: set[str] = set()
    for sender, text in firsts:
        if sender is None:
            continue
        marked_only[sender] &= _marked(text)
        if _marked(text) and not _generated(text) and P.is_event(text.lstrip(MARKS)):
            evented.add(sender)
    return {s for s in evented if marked_only[s]}


def _classify(sender: str | None, text: str, group: set[str]) -> tuple[str, str, str]:
    """(speaker, role, text) of a record whose first line (after the date) is `sender: text`."""
    bare = text.lstrip(MARKS)
    if sender is None:
        return "system", "system", bare
    first, _, more = bare.partition("\n")
    note = None if bare.startswith("<attached:") else P.media_note(first)
    if note is not None:
        return sender, "user", f"{note}\n{more}" if more.strip() else note
    if _marked(text) and (sender in group or P.is_event(bare)):
        return "system", "system", bare
    if P.is_encryption_notice(first):  # older iOS exports write the notice unmarked, as the contact's line
        return "system", "system", bare
    return sender, "user", bare


def read(src: Source) -> ReadResult:
    """A dated line starts a message; undated lines (not indented, blank ones kept inside) continue it."""
    b = src.builder(NAME)
    conv = src.default_conv
    matched = [(ln, dated_line(ln.text) if ln.text is not None else None) for ln in src.lines]
    heads = [m for _, m in matched if m is not None]
    dayfirst = _dayfirst(heads)
    splits = {ln.no: _split(m.group("rest")) for ln, m in matched if m is not None}  # (sender, first line)
    group = _group_senders(list(splits.values()))
    pending: Pending | None = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        more, raw = p.trimmed(src.data)
        sender, first = splits[p.line]
        speaker, role, text = _classify(sender, "\n".join([first, *more]), group)
        b.record(
            p,
            raw,
            conv_id=conv,
            speaker=speaker,
            role=role,
            stamp=lambda: _ts(p.match, dayfirst),
            text=text.strip().lstrip(MARKS).strip(),
        )

    for ln, head in matched:
        if ln.text is None:
            flush()
            b.reject(ln.no, ln.offset, E.E_READ_UTF8, "invalid UTF-8 in line", ln.raw)
        elif head is not None:
            flush()
            pending = Pending(ln, head)
        elif pending is not None:
            pending.add(ln)
        elif ln.text.strip():
            b.reject(ln.no, ln.offset, E.E_LINE_PARSE, "text without a dated line before it", ln.raw)
    flush()
    return b.result()


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
