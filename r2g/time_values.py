"""What time rules resolve to: `TimeValue` / `TimeMention`, and the day, week, month, part-of-day and recurring
intervals the English and Chinese rules (r2g.time_en, r2g.time_zh) build them from.

Weeks start on Monday; intervals are [start, end) in naive wall-clock time, like the message ts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

GRANULARITIES = ("day", "week", "month", "year", "part_of_day", "minute", "unspecified", "recurring")


@dataclass(frozen=True)
class TimeValue:
    """A resolved time: [start, end) with its granularity and the original expression."""

    start: datetime
    end: datetime
    granularity: str
    text: str
    period: str | None = None  # ISO-8601 repeat duration of a `recurring` value (P1D, P1W, …); None otherwise

    @property
    def iso(self) -> str:
        """ISO-8601 label at the value's granularity: 2023-05-07, 2023-W18, 2023-05, 2023, 2023-05-07T18/24,
        2023-05-03/2023-05-06 (multi-day span), R/2023-05-07/P1W (recurring)."""
        s = self.start
        if self.granularity == "recurring":
            first = s.date().isoformat() if s.time() == time() else s.strftime("%Y-%m-%dT%H:%M")
            return f"R/{first}/{self.period or 'P1D'}"
        if self.granularity == "unspecified" and self.end - s > timedelta(days=1):
            return _span_label(self)
        if self.granularity == "year":
            return f"{s.year:04d}"
        if self.granularity == "month":
            return f"{s.year:04d}-{s.month:02d}"
        if self.granularity == "week":
            y, w, _ = s.isocalendar()
            if (self.end - self.start).days == 7:
                return f"{y:04d}-W{w:02d}"
            return _span_label(self)  # a weekend or other multi-day span
        if self.granularity == "part_of_day":
            return f"{s.date().isoformat()}T{s.hour:02d}/{_end_hour(self):02d}"
        if self.granularity == "minute":
            return s.strftime("%Y-%m-%dT%H:%M")
        return s.date().isoformat()


def _span_label(v: TimeValue) -> str:
    """A multi-day span named by its first and last day: 2023-05-13/2023-05-14."""
    last = (v.end - timedelta(days=1)).date()
    return f"{v.start.date().isoformat()}/{last.isoformat()}"


def _end_hour(v: TimeValue) -> int:
    return 24 if v.end.date() > v.start.date() else v.end.hour


@dataclass(frozen=True)
class TimeMention:
    """A time expression found in a text: char span [start, end), surface text and its value (None if unresolved)."""

    start: int
    end: int
    text: str
    value: TimeValue | None


# ---------------------------------------------------------------- interval helpers


def day(d: date) -> tuple[datetime, datetime, str]:
    s = datetime.combine(d, time())
    return s, s + timedelta(days=1), "day"


def week(d: date, offset: int = 0) -> tuple[datetime, datetime, str]:
    monday = d - timedelta(days=d.weekday()) + timedelta(weeks=offset)
    s = datetime.combine(monday, time())
    return s, s + timedelta(days=7), "week"


def weekend(d: date, offset: int = 0) -> tuple[datetime, datetime, str]:
    saturday = d - timedelta(days=d.weekday()) + timedelta(weeks=offset, days=5)
    s = datetime.combine(saturday, time())
    return s, s + timedelta(days=2), "week"


def month(y: int, m: int, offset: int = 0) -> tuple[datetime, datetime, str]:
    idx = y * 12 + (m - 1) + offset
    y, m = divmod(idx, 12)
    s = datetime(y, m + 1, 1)
    ny, nm = divmod(idx + 1, 12)
    return s, datetime(ny, nm + 1, 1), "month"


def year(y: int) -> tuple[datetime, datetime, str]:
    return datetime(y, 1, 1), datetime(y + 1, 1, 1), "year"


# part-of-day windows, in hours [start, end)
PARTS = {
    "morning": (6, 12),
    "afternoon": (12, 18),
    "evening": (18, 22),
    "night": (18, 24),
    "noon": (11, 13),
    "早上": (6, 12),
    "上午": (6, 12),
    "早晨": (6, 12),
    "中午": (11, 13),
    "下午": (12, 18),
    "傍晚": (17, 19),
    "晚上": (18, 24),
    "夜里": (18, 24),
    "夜间": (18, 24),
    "凌晨": (0, 6),
}


def part_of_day(d: date, part: str) -> tuple[datetime, datetime, str]:
    h0, h1 = PARTS[part]
    base = datetime.combine(d, time())
    return base + timedelta(hours=h0), base + timedelta(hours=h1), "part_of_day"


def day_or_part(d: date, part: str | None) -> tuple[datetime, datetime, str]:
    return part_of_day(d, part) if part else day(d)


def weekday_in(d: date, weekday: int, rel: str) -> date:
    """The `weekday` (0=Mon) meant by `rel` (last/this/next/bare) as seen from day d.

    last: the most recent such day strictly before d; this: that day of d's week;
    next: that day of the following week; bare: the most recent one on or before d
    (chat logs mostly narrate the past).
    """
    if rel == "last":
        delta = (d.weekday() - weekday) % 7 or 7
        return d - timedelta(days=delta)
    if rel == "this":
        return d - timedelta(days=d.weekday()) + timedelta(days=weekday)
    if rel == "next":
        return d - timedelta(days=d.weekday()) + timedelta(weeks=1, days=weekday)
    return d - timedelta(days=(d.weekday() - weekday) % 7)


def safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


# A resolver's result: (start, end, granularity), plus the period for a recurring value.
Interval = tuple[datetime, datetime, str]
Resolved = Interval | tuple[datetime, datetime, str, str]
Resolver = Callable[[re.Match, "datetime | None"], "Resolved | None"]  # None: needs an anchor, or no such date


def unit_at(a: datetime, n: int, unit: str) -> Interval:
    """The day/week/month/year n units away from the anchor's own."""
    d = a.date()
    if unit == "day":
        return day(d + timedelta(days=n))
    if unit == "week":
        return week(d + timedelta(weeks=n))
    if unit == "month":
        return month(a.year, a.month, n)
    return year(a.year + n)


def shift(a: datetime, count: tuple[int, int], sign: int, unit: str) -> Interval:
    """`count` (lo, hi) units before (sign -1) or after (sign 1) the anchor; a vague count spans every unit it could mean."""
    lo, hi = count
    if lo == hi:
        return unit_at(a, sign * lo, unit)
    near, far = unit_at(a, sign * lo, unit), unit_at(a, sign * hi, unit)
    first, last = (far, near) if sign < 0 else (near, far)
    return first[0], last[1], "unspecified"


# ---------------------------------------------------------------- recurring values


def _latest(a: datetime, occurrence: Callable[[int], Interval]) -> Interval:
    """The occurrence in effect at or most recently before the anchor; occurrence(k) is the k-th one from the anchor's period."""
    occ = occurrence(0)
    return occ if occ[0] <= a else occurrence(-1)


def _recurring(occ: Interval, period: str) -> tuple[datetime, datetime, str, str]:
    return occ[0], occ[1], "recurring", period


def every_weekday(a: datetime, weekday: int, part: str | None, n: int = 1) -> tuple[datetime, datetime, str, str]:
    d = a.date()
    this = d - timedelta(days=d.weekday()) + timedelta(days=weekday)
    return _recurring(_latest(a, lambda k: day_or_part(this + timedelta(weeks=k), part)), f"P{n}W")


def every(a: datetime, unit: str, n: int = 1) -> tuple[datetime, datetime, str, str]:
    """Every n-th day/week/weekend/month/year, or every morning/afternoon/evening/night (a part of each day)."""
    d = a.date()
    if unit in PARTS:
        return _recurring(_latest(a, lambda k: part_of_day(d + timedelta(days=k), unit)), f"P{n}D")
    if unit == "weekend":
        return _recurring(_latest(a, lambda k: weekend(d, k)), f"P{n}W")
    return _recurring(unit_at(a, 0, unit), f"P{n}{unit[0].upper()}")


def iso_date(m: re.Match, a: datetime | None) -> Resolved | None:
    """yyyy-mm-dd (or / or . between): a resolver both languages share."""
    d = safe_date(int(m["y"]), int(m["m"]), int(m["d"]))
    return day(d) if d else None


# vague counts → the (lo, hi) range they can mean (both languages)
VAGUE = {"couple": (2, 3), "few": (2, 5), "several": (3, 7), "几": (2, 5), "好几": (3, 7), "两": (2, 3), "些": (2, 5)}
