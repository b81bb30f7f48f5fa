"""line_txt: LINE "Export chat history" text — a header, date lines, then `HH:MM<TAB>Name<TAB>text` lines.

  [LINE] Chat history with Alice          (or "… in <group>", "[LINE] Aliceとのトーク履歴", "[LINE] 与Alice的聊天记录")
  Saved on: 2023/06/11 21:04              (or "保存日時：…", "保存日期：…")

  Sun, 06/11/2023                         (or "2023/06/11(Sun)", "2023/6/11(日)", "2023/6/11周日", "2023.06.11 Sunday")
  20:04<TAB>Alice<TAB>Hi!
  20:05<TAB>Bob<TAB>"first line
  second line"                            (a multi-line message is quoted; "" inside is one quote)
  20:06<TAB><TAB>Bob joined the group.    (a system line has an empty name field, or none at all)

Times may read "下午08:04" / "午後8:04" / "08:04PM". A message's date is the last date line
above it (none above: ts None — the export does not say). System lines, and the notices
LINE writes under a member's name ("Alice unsent a message."), are role "system".
"""

from __future__ import annotations

import re
from datetime import datetime

from raw_store import errors as E
from raw_store.formats.base import LINES, Format, Pending, ReadResult, Sample, Source

NAME = "line_txt"
RECORD = (
    "a message line (`HH:MM<TAB>Name<TAB>text`, or a system line without a name) with its continuation "
    "lines, or a stray line before the first message; the title, `Saved on:` and date lines are header"
)
TITLE = re.compile(r"^\[LINE\]")
SAVED = re.compile(r"^(?:Saved on|保存日時|保存日期|儲存日期|保存時間)\s*[:：]")
_DATES = (
    re.compile(r"^(?:[A-Za-z]{3,9},\s*)?(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})$"),
    re.compile(r"^(?P<y>\d{4})/(?P<m>\d{1,2})/(?P<d>\d{1,2})\s*(?:[（(][^）)]{1,12}[）)]|周.|星期.|\([A-Za-z]{3}\))?$"),
    re.compile(r"^(?P<y>\d{4})\.(?P<m>\d{1,2})\.(?P<d>\d{1,2})(?:\s+[A-Za-z]+day)?$"),
)
_TIME = r"(?P<time>(?:上午|下午|午前|午後)?\s?\d{1,2}:\d{2}(?:\s?[AaPp][Mm])?)"
MESSAGE = re.compile(rf"^{_TIME}\t(?P<name>[^\t]*)\t(?P<text>.*)$", re.S)
SYSTEM = re.compile(rf"^{_TIME}\t(?P<text>[^\t]*)$", re.S)
_CLOCK = re.compile(r"^(?P<pre>上午|下午|午前|午後)?\s?(?P<h>\d{1,2}):(?P<mi>\d{2})\s?(?P<ap>[AaPp][Mm])?$")
# notices LINE writes under a member's name
_NOTICES = re.compile(
    r"unsent a message|joined the group|left the group|added .+ to the group|"
    r"撤回了一条消息|已收回訊息|送信を取り消しました|已加入该群|已加入群組|已退群|已離開群組|"
    r"がグループに参加しました|がグループを退会しました|をグループに追加しました"
)


def date_line(line: str) -> re.Match | None:
    s = line.strip()
    for pattern in _DATES:
        m = pattern.match(s)
        if m:
            return m
    return None


def message_line(line: str) -> re.Match | None:
    return MESSAGE.match(line) or SYSTEM.match(line)


def sniff(s: Sample) -> bool:
    if s.lines and TITLE.match(s.lines[0]):
        return True
    messages = sum(1 for ln in s.lines if MESSAGE.match(ln))
    return messages > 0 and any(date_line(ln) for ln in s.lines) and 2 * messages >= len(s.lines)


def _day(m: re.Match) -> datetime | None:
    try:
        return datetime(int(m.group("y")), int(m.group("m")), int(m.group("d")))
    except ValueError:
        return None


def _stamp(day: datetime | None, clock: str) -> datetime | None:
    """The day of the last date line at `clock`; ValueError for an impossible time or date line."""
    m = _CLOCK.match(clock.strip())
    if m is None:
        raise ValueError(f"unrecognised time: {clock!r}")
    h, mi = int(m.group("h")), int(m.group("mi"))
    pm = m.group("pre") in ("下午", "午後") or (m.group("ap") or "").lower() == "pm"
    if m.group("pre") or m.group("ap"):
        if not 0 <= h <= 12:
            raise ValueError(f"hour {h} in a 12-hour time")
        h = h % 12 + (12 if pm else 0)
    if h > 23 or mi > 59:
        raise ValueError(f"impossible time: {clock!r}")
    if day is None:
        return None
    return day.replace(hour=h, minute=mi)


def _unquote(text: str) -> str:
    """A multi-line message as LINE quotes it ("…", "" for a quote) without its quoting."""
    if "\n" in text and len(text) >= 2 and text.startswith('"') and text.endswith('"'):
        return text[1:-1].replace('""', '"')
    return text


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    conv = src.default_conv
    day: datetime | None = None
    bad_day: str | None = None  # a date line that names no real day: its messages are E_TS_PARSE
    pending: Pending | None = None
    pending_day: tuple[datetime | None, str | None] = (None, None)

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        more, raw = p.trimmed(src.data)
        named = "name" in p.match.groupdict() and p.match.group("name").strip()
        text = _unquote("\n".join([p.match.group("text"), *more]).strip())
        system = not named or _NOTICES.search(text) is not None
        at, broken = pending_day

        def stamp() -> datetime | None:
            if broken is not None:
                raise ValueError(f"date line {broken!r} names no day")
            return _stamp(at, p.match.group("time"))

        b.record(
            p,
            raw,
            conv_id=conv,
            speaker="system" if system else p.match.group("name").strip(),
            role="system" if system else "user",
            stamp=stamp,
            text=text,
        )

    for ln in src.lines:
        if ln.text is None:
            flush()
            b.reject(ln.no, ln.offset, E.E_READ_UTF8, "invalid bytes in line", ln.raw)
            continue
        if ln.no <= 3 and (TITLE.match(ln.text) or SAVED.match(ln.text)):
            flush()
            continue
        dated = date_line(ln.text)
        head = message_line(ln.text) if dated is None else None
        if dated is not None:
            flush()
            day, bad_day = _day(dated), None
            if day is None:
                bad_day = ln.text.strip()
        elif head is not None:
            flush()
            pending, pending_day = Pending(ln, head), (day, bad_day)
        elif pending is not None:
            pending.add(ln)
        elif ln.text.strip():
            b.reject(ln.no, ln.offset, E.E_LINE_PARSE, "text before the first message", ln.raw)
    flush()
    return b.result()


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
