"""Timestamps as chat logs write them, parsed to naive datetimes (UTC when the value carried a zone).

Contract of `parse_ts`: None / "" → None; a recognised value → naive datetime;
a value that is present but matches no known form → ValueError (the readers turn
that into an `E_TS_PARSE` reject, never a guess).
"""

from __future__ import annotations

import datetime as dt
import math
import re

_EPOCH = dt.datetime(1970, 1, 1)

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}

_CLOCK = r"(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?\s*(?P<ap>[ap]\.?\s?m\.?)?"

_PATTERNS = [
    # LoCoMo: "1:56 pm on 8 May, 2023"
    re.compile(rf"^{_CLOCK}\s+on\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{{4}})$", re.I),
    # "May 8, 2023 1:56 pm", "May 8 2023", "May 8th, 2023 at 13:56"
    re.compile(
        rf"^(?P<mon>[a-z]+)\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})"
        rf"(?:,?\s+(?:at\s+)?{_CLOCK})?$",
        re.I,
    ),
    # "8 May 2023", "8 May, 2023 13:56"
    re.compile(
        rf"^(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{{4}})"
        rf"(?:,?\s+(?:at\s+)?{_CLOCK})?$",
        re.I,
    ),
    # "2024/01/02 10:00", "2024-1-2 10:00:00", "2024.01.02"
    re.compile(rf"^(?P<y>\d{{4}})[-/.](?P<m>\d{{1,2}})[-/.](?P<d>\d{{1,2}})(?:[ T]+{_CLOCK})?$", re.I),
]

# WhatsApp-style "1/2/24, 10:00:00 AM" / "02.01.2024, 10:00" / "15-06-2023 20:04": the caller says which
# number is the day (a WhatsApp reader decides once per file); unsaid, month first unless the first exceeds 12.
_NUMERIC_DMY = re.compile(rf"^(?P<a>\d{{1,2}})[/.\-](?P<b>\d{{1,2}})[/.\-](?P<y>\d{{2}}|\d{{4}}),?\s+{_CLOCK}$", re.I)

# SillyTavern's humanized dates: "2023-6-15 @20h 4m 12s 345ms", "2023-06-15@20h04m12s"
_HUMANIZED = re.compile(
    r"^(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\s*@\s*(?P<h>\d{1,2})h\s*(?P<mi>\d{1,2})m"
    r"(?:\s*(?P<s>\d{1,2})s)?(?:\s*(?P<ms>\d{1,3})\s*ms)?$",
    re.I,
)

_EPOCH_STR = re.compile(r"^-?\d+(?:\.\d+)?$")


def _clock(m: re.Match) -> tuple[int, int, int]:
    if m.group("h") is None:
        return 0, 0, 0
    h, mi, s = int(m.group("h")), int(m.group("mi")), int(m.group("s") or 0)
    ap = (m.group("ap") or "").lower().replace(".", "").replace(" ", "")
    if ap:
        if not 1 <= h <= 12:
            raise ValueError(f"hour {h} with {ap}")
        h = h % 12 + (12 if ap == "pm" else 0)
    return h, mi, s


def _from_epoch(x: float) -> dt.datetime:
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"not a finite epoch: {x}")
    # Seconds until year ~5138, then milliseconds, then microseconds: chat exports use all three.
    if abs(x) >= 1e14:
        x = x / 1e6
    elif abs(x) >= 1e11:
        x = x / 1e3
    try:
        return _EPOCH + dt.timedelta(microseconds=round(x * 1e6))
    except OverflowError as exc:
        raise ValueError(f"epoch out of range: {x}") from exc


def _naive_utc(d: dt.datetime) -> dt.datetime:
    if d.tzinfo is None:
        return d
    return d.astimezone(dt.UTC).replace(tzinfo=None)


def _parse_str(s: str, dayfirst: bool | None) -> dt.datetime:
    if _EPOCH_STR.match(s):
        return _from_epoch(float(s))
    iso = s[:-1] + "+00:00" if s[-1:] in "Zz" else s
    try:
        return _naive_utc(dt.datetime.fromisoformat(iso))
    except ValueError:
        pass
    for pat in _PATTERNS:
        m = pat.match(s)
        if m is None:
            continue
        if "mon" in pat.groupindex:
            month = _MONTHS.get(m.group("mon").lower())
            if month is None:
                continue
        else:
            month = int(m.group("m"))
        return dt.datetime(int(m.group("y")), month, int(m.group("d")), *_clock(m))
    m = _NUMERIC_DMY.match(s)
    if m:
        a, b, y = int(m.group("a")), int(m.group("b")), int(m.group("y"))
        if y < 100:
            y += 2000
        day_first = a > 12 if dayfirst is None else dayfirst
        month, day = (b, a) if day_first else (a, b)
        return dt.datetime(y, month, day, *_clock(m))
    m = _HUMANIZED.match(s)
    if m:
        ms = int(m.group("ms") or 0)
        return dt.datetime(
            int(m.group("y")),
            int(m.group("m")),
            int(m.group("d")),
            int(m.group("h")),
            int(m.group("mi")),
            int(m.group("s") or 0),
            ms * 1000,
        )
    raise ValueError(f"unrecognised timestamp: {s[:80]!r}")


def parse_ts(value: object, *, dayfirst: bool | None = None) -> dt.datetime | None:
    """Parse a chat-log timestamp to a naive datetime (zone-aware values converted to UTC).

    Accepts ISO 8601, "YYYY/MM/DD hh:mm", epoch s/ms/us (numbers or digit strings),
    LoCoMo "1:56 pm on 8 May, 2023", "May 8, 2023 1:56 pm" (also "8:04pm"), "8 May 2023",
    WhatsApp "1/2/24, 10:00 AM" / "15.06.23, 20:04", SillyTavern "2023-6-15 @20h 4m 12s 345ms".
    `dayfirst` orders the numeric WhatsApp form (True: D/M, False: M/D, None: M/D unless
    the first number exceeds 12). None or blank → None; anything else → ValueError.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, dt.datetime):
        return _naive_utc(value)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, (int, float)):
        try:
            return _from_epoch(float(value))
        except OverflowError as exc:
            raise ValueError("epoch out of range") from exc
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        try:
            return _parse_str(s, dayfirst)
        except (OverflowError, ArithmeticError) as exc:
            raise ValueError(f"timestamp out of range: {s[:80]!r}") from exc
    raise ValueError(f"not a timestamp: {type(value).__name__}")
