"""Time normalisation: relative and absolute time expressions → ISO interval + granularity.

Both languages share one shape: a table of (regex, resolver) rules. `resolve`
full-matches one expression (e.g. an NER DATE span); `find_times` scans a text
for every expression the rules know. Relative expressions need the message
timestamp as anchor; without one only absolute dates resolve. Weeks start on
Monday; intervals are [start, end) in naive wall-clock time, like the message ts.

Granularities beyond the exact ones (day, week, month, year, part_of_day):

- ``unspecified`` — a vague count ("a few days ago", 几天前, 前几天): the window of
  every day/week/… the count could mean (few = 2–5, a couple = 2–3, several = 3–7),
  labelled ``first/last`` by `TimeValue.iso`.
- ``recurring`` — a habit ("on Sundays", "every day", "Sunday mornings", 每周日,
  每天, 每晚): it is not one day, so the value says so. [start, end) is the
  occurrence in effect at, or most recently before, the anchor (never one in the
  future, so a fact's time never lies ahead of the message that states it);
  `TimeValue.period` holds the ISO-8601 repeat duration (P1D, P1W, P2W, P1M, P1Y)
  and `iso` is an ISO-8601 repeating interval, ``R/2023-05-07/P1W``. Like other
  relative expressions it needs the anchor.

Unresolvable on purpose: "recently", "sometimes", 最近 — no rule matches them.
Bump RULES_VERSION whenever what `find_times` finds or `resolve` returns changes
(the Chinese NLP pipeline stores find_times spans as TIME entities).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

RULES_VERSION = "time_norm.v2"
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

def _day(d: date) -> tuple[datetime, datetime, str]:
    s = datetime.combine(d, time())
    return s, s + timedelta(days=1), "day"


def _week(d: date, offset: int = 0) -> tuple[datetime, datetime, str]:
    monday = d - timedelta(days=d.weekday()) + timedelta(weeks=offset)
    s = datetime.combine(monday, time())
    return s, s + timedelta(days=7), "week"


def _weekend(d: date, offset: int = 0) -> tuple[datetime, datetime, str]:
    saturday = d - timedelta(days=d.weekday()) + timedelta(weeks=offset, days=5)
    s = datetime.combine(saturday, time())
    return s, s + timedelta(days=2), "week"


def _month(y: int, m: int, offset: int = 0) -> tuple[datetime, datetime, str]:
    idx = y * 12 + (m - 1) + offset
    y, m = divmod(idx, 12)
    s = datetime(y, m + 1, 1)
    ny, nm = divmod(idx + 1, 12)
    return s, datetime(ny, nm + 1, 1), "month"


def _year(y: int) -> tuple[datetime, datetime, str]:
    return datetime(y, 1, 1), datetime(y + 1, 1, 1), "year"


# part-of-day windows, in hours [start, end)
_PARTS = {
    "morning": (6, 12), "afternoon": (12, 18), "evening": (18, 22), "night": (18, 24), "noon": (11, 13),
    "早上": (6, 12), "上午": (6, 12), "早晨": (6, 12), "中午": (11, 13), "下午": (12, 18), "傍晚": (17, 19),
    "晚上": (18, 24), "夜里": (18, 24), "夜间": (18, 24), "凌晨": (0, 6),
}


def _part(d: date, part: str) -> tuple[datetime, datetime, str]:
    h0, h1 = _PARTS[part]
    base = datetime.combine(d, time())
    return base + timedelta(hours=h0), base + timedelta(hours=h1), "part_of_day"


def _day_or_part(d: date, part: str | None) -> tuple[datetime, datetime, str]:
    return _part(d, part) if part else _day(d)


def _weekday_in(d: date, weekday: int, rel: str) -> date:
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


def _safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


# A resolver's result: (start, end, granularity), plus the period for a recurring value.
Interval = tuple[datetime, datetime, str]
Resolved = Interval | tuple[datetime, datetime, str, str]


def _unit_at(a: datetime, n: int, unit: str) -> Interval:
    """The day/week/month/year n units away from the anchor's own."""
    d = a.date()
    if unit == "day":
        return _day(d + timedelta(days=n))
    if unit == "week":
        return _week(d + timedelta(weeks=n))
    if unit == "month":
        return _month(a.year, a.month, n)
    return _year(a.year + n)


def _shift(a: datetime, count: tuple[int, int], sign: int, unit: str) -> Interval:
    """`count` (lo, hi) units before (sign -1) or after (sign 1) the anchor; a vague count spans every unit it could mean."""
    lo, hi = count
    if lo == hi:
        return _unit_at(a, sign * lo, unit)
    near, far = _unit_at(a, sign * lo, unit), _unit_at(a, sign * hi, unit)
    first, last = (far, near) if sign < 0 else (near, far)
    return first[0], last[1], "unspecified"


# ---------------------------------------------------------------- recurring values

def _latest(a: datetime, occurrence: Callable[[int], Interval]) -> Interval:
    """The occurrence in effect at or most recently before the anchor; occurrence(k) is the k-th one from the anchor's period."""
    occ = occurrence(0)
    return occ if occ[0] <= a else occurrence(-1)


def _recurring(occ: Interval, period: str) -> tuple[datetime, datetime, str, str]:
    return occ[0], occ[1], "recurring", period


def _every_weekday(a: datetime, weekday: int, part: str | None, n: int = 1) -> tuple[datetime, datetime, str, str]:
    d = a.date()
    this = d - timedelta(days=d.weekday()) + timedelta(days=weekday)
    return _recurring(_latest(a, lambda k: _day_or_part(this + timedelta(weeks=k), part)), f"P{n}W")


def _every(a: datetime, unit: str, n: int = 1) -> tuple[datetime, datetime, str, str]:
    """Every n-th day/week/weekend/month/year, or every morning/afternoon/evening/night (a part of each day)."""
    d = a.date()
    if unit in _PARTS:
        return _recurring(_latest(a, lambda k: _part(d + timedelta(days=k), unit)), f"P{n}D")
    if unit == "weekend":
        return _recurring(_latest(a, lambda k: _weekend(d, k)), f"P{n}W")
    return _recurring(_unit_at(a, 0, unit), f"P{n}{unit[0].upper()}")


# ---------------------------------------------------------------- numbers

_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
# vague counts → the (lo, hi) range they can mean
_VAGUE = {"couple": (2, 3), "few": (2, 5), "several": (3, 7), "几": (2, 5), "好几": (3, 7), "两": (2, 3), "些": (2, 5)}
_ZH_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def _en_num(s: str) -> int | None:
    s = s.lower().strip()
    if s.isdigit():
        return int(s)
    return _EN_NUM.get(s)


def _en_count(s: str) -> tuple[int, int] | None:
    """An English count as a (lo, hi) range: "3" → (3, 3), "a few" → (2, 5), "a couple of" → (2, 3)."""
    words = s.lower().split()
    if len(words) > 1 and words[0] == "a":
        words = words[1:]
    if len(words) > 1 and words[-1] == "of":
        words = words[:-1]
    w = " ".join(words)
    if w in _VAGUE:
        return _VAGUE[w]
    n = _en_num(w)
    return (n, n) if n is not None else None


def zh_number(s: str) -> int | None:
    """Arabic or Chinese numeral below 10000 (十二 → 12, 二十三 → 23, 2023 → 2023, 二〇二三 → 2023)."""
    if not s:
        return None
    if s.isdigit():
        return int(s)
    if all(c in _ZH_DIGIT for c in s) and len(s) > 1:  # digit-by-digit years: 二〇二三
        return int("".join(str(_ZH_DIGIT[c]) for c in s))
    total, cur = 0, 0
    units = {"十": 10, "百": 100, "千": 1000}
    for c in s:
        if c in _ZH_DIGIT:
            cur = _ZH_DIGIT[c]
        elif c in units:
            total += (cur or 1) * units[c]
            cur = 0
        else:
            return None
    return total + cur


def _zh_count(s: str) -> tuple[int, int] | None:
    """A Chinese count as a (lo, hi) range: 三 → (3, 3), 几 → (2, 5), 好几 → (3, 7)."""
    if s in ("几", "好几"):
        return _VAGUE[s]
    n = zh_number(s)
    return (n, n) if n is not None else None


# ---------------------------------------------------------------- English rules

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
_MONTHS.update({k[:3]: v for k, v in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WEEKDAYS = {d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_MON = (r"(?P<mon>january|february|march|april|may|june|july|august|september|october|november|december"
        r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?")
_WD = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_PART_EN = r"(?P<part>morning|afternoon|evening|night)"
_NUM_EN = (r"(?P<n>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
           r"|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several)")
_REL = {"last": -1, "past": -1, "previous": -1, "this": 0, "current": 0, "next": 1, "coming": 1, "following": 1}

def _g(m: re.Match, name: str) -> str | None:
    """Group `name` lower-cased (English rules match case-insensitively); None/"" stay falsy; absent group → None."""
    v = m.groupdict().get(name)
    return v.lower() if v else v


def _group(m: re.Match, name: str) -> str:
    """Group `name` lower-cased, of a group that takes part in every match of the rule."""
    return m[name].lower()


Resolver = Callable[[re.Match, "datetime | None"], "Resolved | None"]  # None: needs an anchor, or no such date


def _en_mdy(m: re.Match, a: datetime | None) -> Resolved | None:
    d = _safe_date(int(m["y"]), _MONTHS[_group(m, "mon")], int(m["d"]))
    return _day(d) if d else None


def _en_md(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    d = _safe_date(a.year, _MONTHS[_group(m, "mon")], int(m["d"]))
    return _day(d) if d else None


def _iso(m: re.Match, a: datetime | None) -> Resolved | None:
    d = _safe_date(int(m["y"]), int(m["m"]), int(m["d"]))
    return _day(d) if d else None


def _en_my(m: re.Match, a: datetime | None) -> Resolved | None:
    return _month(int(m["y"]), _MONTHS[_group(m, "mon")])


def _en_month_only(m: re.Match, a: datetime | None) -> Resolved | None:
    return _month(a.year, _MONTHS[_group(m, "mon")]) if a else None


def _year_only(m: re.Match, a: datetime | None) -> Resolved | None:
    return _year(int(m["y"]))


def _en_deictic(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    word = " ".join(_group(m, "w").split())
    word = word[4:] if word.startswith("the ") else word
    d = a.date()
    if word == "tonight":
        return _part(d, "night")
    if word == "last night":
        return _part(d - timedelta(days=1), "night")
    shift = {"today": 0, "yesterday": -1, "tomorrow": 1, "this": 0,
             "day before yesterday": -2, "day after tomorrow": 2}[word]
    return _day_or_part(d + timedelta(days=shift), _g(m, "part"))


def _en_rel_unit(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    off = _REL[_group(m, "rel")]
    unit = _group(m, "unit")
    if unit == "weekend":
        return _weekend(a.date(), off)
    return _unit_at(a, off, unit)


def _en_weekend(m: re.Match, a: datetime | None) -> Resolved | None:
    return _weekend(a.date(), 0) if a else None


def _en_weekday(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    rel = _g(m, "rel") or ""
    rel = {"last": "last", "past": "last", "previous": "last", "this": "this", "coming": "next", "next": "next"}.get(rel, "")
    d = _weekday_in(a.date(), _WEEKDAYS[_group(m, "wd")], rel)
    return _day_or_part(d, _g(m, "part"))


def _en_ago(m: re.Match, a: datetime | None) -> Resolved | None:
    """N units ago / later; "in N units" has no `dir` group and means later."""
    if a is None:
        return None
    count = _en_count(m["n"])
    if count is None:
        return None
    return _shift(a, count, -1 if _g(m, "dir") == "ago" else 1, _group(m, "unit"))


def _us_mdy(m: re.Match, a: datetime | None) -> Resolved | None:
    mo, dd = int(m["m"]), int(m["d"])
    if mo > 12 >= dd:  # 25/12/2022 can only be day-first
        mo, dd = dd, mo
    d = _safe_date(int(m["y"]), mo, dd)
    return _day(d) if d else None


def _en_every_weekday(m: re.Match, a: datetime | None) -> Resolved | None:
    return _every_weekday(a, _WEEKDAYS[_group(m, "wd")], _g(m, "part")) if a else None


def _en_every(m: re.Match, a: datetime | None) -> Resolved | None:
    """every [other | N] day/week/weekend/month/year/morning/…; plural "weekends", "in the mornings"."""
    if a is None:
        return None
    n = _g(m, "n")
    step = 1 if not n else 2 if n in ("other", "second") else _en_num(n)
    return _every(a, _group(m, "unit"), step) if step else None


def _c(p: str) -> re.Pattern:
    return re.compile(p, re.IGNORECASE)


_EN_UNIT = r"(?P<unit>day|week|month|year)"
EN_RULES: list[tuple[re.Pattern, Resolver]] = [
    (_c(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), _iso),
    (_c(r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})"), _us_mdy),  # US order: 5/7/2023 is May 7
    (_c(_MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})"), _en_mdy),
    (_c(r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON + r",?\s+(?P<y>\d{4})"), _en_mdy),
    (_c(_MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?"), _en_md),
    (_c(r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON), _en_md),
    (_c(_MON + r",?\s+(?P<y>\d{4})"), _en_my),
    (_c(r"(?P<w>(?:the\s+)?day before yesterday|(?:the\s+)?day after tomorrow|today|yesterday|tomorrow)(?:\s+"
        + _PART_EN + r")?"), _en_deictic),
    (_c(r"(?P<w>this)\s+" + _PART_EN), _en_deictic),
    (_c(r"(?P<w>tonight|last night)(?P<part>)"), _en_deictic),
    (_c(r"(?:the\s+)?(?P<rel>last|past|previous|this|current|next|coming|following)\s+(?P<unit>weekend|week|month|year)"), _en_rel_unit),
    (_c(r"(?:(?:the\s+)?(?P<rel>last|past|previous|this|next|coming)\s+)?" + _WD + r"(?:\s+" + _PART_EN + r")?"), _en_weekday),
    (_c(r"(?:the\s+|this\s+)?weekend"), _en_weekend),
    (_c(_NUM_EN + r"\s+" + _EN_UNIT + r"s?\s+(?P<dir>ago|later)"), _en_ago),
    (_c(r"in\s+" + _NUM_EN + r"\s+" + _EN_UNIT + r"s?"), _en_ago),
    (_c(r"in\s+(?P<y>(?:19|20)\d{2})"), _year_only),
    # recurring: every Sunday, on Sundays, Sunday mornings, every (other | 2) day(s), weekends, in the mornings
    (_c(r"(?:every|each)\s+(?:single\s+)?" + _WD + r"(?:\s+" + _PART_EN + r")?"), _en_every_weekday),
    (_c(_WD + r"s"), _en_every_weekday),
    (_c(_WD + r"s?\s+" + _PART_EN + r"s"), _en_every_weekday),
    (_c(r"(?:every|each)\s+(?:single\s+)?(?P<unit>day|week|weekend|month|year|morning|afternoon|evening|night)"), _en_every),
    (_c(r"every\s+(?P<n>other|second|\d+|two|three|four|five|six|seven|eight|nine|ten)\s+"
        r"(?P<unit>day|week|weekend|month|year)s?"), _en_every),
    (_c(r"(?P<unit>weekend)s"), _en_every),
    (_c(r"in\s+the\s+(?P<unit>morning|afternoon|evening)s"), _en_every),
]
# Only for full-match resolve (an NER DATE span): a bare month name or "in May" is too ambiguous to scan for.
_EN_RESOLVE_ONLY: list[tuple[re.Pattern, Resolver]] = [
    (_c(r"(?:in\s+)?" + _MON), _en_month_only),
    (_c(r"(?P<y>(?:19|20)\d{2})"), _year_only),
]

# ---------------------------------------------------------------- Chinese rules

_ZN = r"[0-9一二两三四五六七八九十〇零]"
_ZH_WD = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}
_ZH_PART_WORDS = "早上|上午|早晨|中午|下午|傍晚|晚上|夜里|夜间|凌晨"
_ZH_PART = rf"(?P<part>{_ZH_PART_WORDS})"
_ZH_DAY = {"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "今天": 0, "今日": 0, "明天": 1, "明日": 1,
           "后天": 2, "大后天": 3}
_ZH_SHORT = {"昨晚": (-1, "晚上"), "今晚": (0, "晚上"), "明晚": (1, "晚上"), "今早": (0, "早上"), "明早": (1, "早上"),
             "昨早": (-1, "早上")}
_ZH_EVERY_SHORT = {"每晚": "晚上", "每夜": "夜里", "每早": "早上"}
_ZH_UNIT = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}
_ZH_YEAR_OFF = {"前": -2, "去": -1, "今": 0, "本": 0, "明": 1, "后": 2}


def _zh_ymd(m: re.Match, a: datetime | None) -> Resolved | None:
    y = zh_number(m["y"]) if m["y"] else (a.year if a else None)
    mo, d = zh_number(m["m"]), zh_number(m["d"])
    if y is None or mo is None or d is None:
        return None
    dd = _safe_date(y, mo, d)
    return _day(dd) if dd else None


def _zh_ym(m: re.Match, a: datetime | None) -> Resolved | None:
    y, mo = zh_number(m["y"]), zh_number(m["m"])
    if y is None or mo is None or not 1 <= mo <= 12:
        return None
    return _month(y, mo)


def _zh_y(m: re.Match, a: datetime | None) -> Resolved | None:
    y = zh_number(m["y"])
    return _year(y) if y and y >= 1000 else None


def _zh_rel_year_md(m: re.Match, a: datetime | None) -> Resolved | None:
    """去年五月 → that month; 去年5月7号 → that day (the year relative to the anchor)."""
    if a is None:
        return None
    y, mo = a.year + _ZH_YEAR_OFF[m["w"]], zh_number(m["m"])
    if mo is None or not 1 <= mo <= 12:
        return None
    if not m["d"]:
        return _month(y, mo)
    d = zh_number(m["d"])
    dd = _safe_date(y, mo, d) if d is not None else None
    return _day(dd) if dd else None


def _zh_month_only(m: re.Match, a: datetime | None) -> Resolved | None:
    mo = zh_number(m["m"])
    return _month(a.year, mo) if a and mo and 1 <= mo <= 12 else None


def _zh_day(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    return _day_or_part(a.date() + timedelta(days=_ZH_DAY[m["w"]]), m["part"])


def _zh_short(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    off, part = _ZH_SHORT[m["w"]]
    return _part(a.date() + timedelta(days=off), part)


def _zh_part_only(m: re.Match, a: datetime | None) -> Resolved | None:
    """A bare part of day (早上, 晚上) is that part of the message's own day."""
    return _part(a.date(), m["part"]) if a else None


def _zh_rel(s: str | None) -> int:
    if not s:
        return 0
    if s.startswith("上上"):
        return -2
    if s.startswith("下下"):
        return 2
    return {"上": -1, "下": 1, "这": 0, "本": 0, "今": 0}[s[0]]


def _zh_week(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    off = _zh_rel(m["rel"])
    wd = m["wd"]
    if not wd:
        return _week(a.date(), off)
    idx = _ZH_WD[wd]
    if idx < 0:
        return _weekend(a.date(), off)
    if not m["rel"]:
        return _day_or_part(_weekday_in(a.date(), idx, ""), m["part"])
    base = a.date() + timedelta(weeks=off)
    return _day_or_part(base - timedelta(days=base.weekday()) + timedelta(days=idx), m["part"])


def _zh_month(m: re.Match, a: datetime | None) -> Resolved | None:
    return _month(a.year, a.month, _zh_rel(m["rel"])) if a else None


def _zh_year(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    return _year(a.year + _ZH_YEAR_OFF[m["w"]])


def _zh_ago(m: re.Match, a: datetime | None) -> Resolved | None:
    """N 天前 / N 个月后; 前几天 / 过两天 carry their direction in the `pre` group instead of `dir`."""
    if a is None:
        return None
    pre = m.groupdict().get("pre")
    # 前两天 is "a couple of days ago", not exactly two days
    count = _VAGUE.get(m["n"]) if pre else _zh_count(m["n"])
    if count is None:
        return None
    sign = (-1 if pre == "前" else 1) if pre else (-1 if m["dir"] in ("前", "以前", "之前") else 1)
    return _shift(a, count, sign, _ZH_UNIT[m["unit"]])


def _zh_every_week(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    wd = m["wd"]
    if not wd:
        return _every(a, "week")
    if _ZH_WD[wd] < 0:
        return _every(a, "weekend")
    return _every_weekday(a, _ZH_WD[wd], m["part"])


def _zh_every_day(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    part = m.groupdict().get("part") or _ZH_EVERY_SHORT.get(m.groupdict().get("w") or "")
    return _every(a, part) if part else _every(a, "day")


def _zh_every_unit(m: re.Match, a: datetime | None) -> Resolved | None:
    return _every(a, _ZH_UNIT[m["unit"]]) if a else None


ZH_RULES: list[tuple[re.Pattern, Resolver]] = [
    (re.compile(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), _iso),
    (re.compile(rf"(?:(?P<y>{_ZN}{{4}})年)?(?P<m>{_ZN}{{1,2}})月(?P<d>{_ZN}{{1,3}})[日号]"), _zh_ymd),
    (re.compile(rf"(?P<y>{_ZN}{{4}})年(?P<m>{_ZN}{{1,2}})月(?:份)?"), _zh_ym),
    (re.compile(rf"(?P<y>{_ZN}{{4}})年"), _zh_y),
    (re.compile(rf"(?P<w>前|去|今|明|后)年(?P<m>{_ZN}{{1,2}})月份?(?:(?P<d>{_ZN}{{1,3}})[日号])?"), _zh_rel_year_md),
    (re.compile(r"(?P<w>大前天|前天|昨天|昨日|今天|今日|明天|明日|大后天|后天)" + _ZH_PART + "?"), _zh_day),
    (re.compile(r"(?P<w>昨晚|今晚|明晚|今早|明早|昨早)"), _zh_short),
    (re.compile(_ZH_PART + r"(?![好茶])"), _zh_part_only),  # not the greetings 早上好 / 晚上好, nor 下午茶
    (re.compile(r"(?P<rel>上上|下下|上|下|这|本)个?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])?" + _ZH_PART + "?"), _zh_week),
    (re.compile(r"(?P<rel>)(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])" + _ZH_PART + "?"), _zh_week),
    (re.compile(r"(?P<rel>上|下|这|本)个?月"), _zh_month),
    (re.compile(r"(?P<w>前|去|今|明|后)年"), _zh_year),
    (re.compile(rf"(?P<n>{_ZN}+|好几|几)个?(?P<unit>天|日|周|星期|礼拜|月|年)(?P<dir>以前|之前|前|以后|之后|后)"), _zh_ago),
    (re.compile(r"(?P<pre>前)(?P<n>好几|几|两|些)个?(?P<unit>天|周|星期|礼拜|月|年)"), _zh_ago),
    # 过两天 "in a couple of days" — but not the aspect particle of 住过两天 ("stayed two days")
    (re.compile(r"(?:^|(?<=[\s，。！？、,.!?;；：:再等]))(?P<pre>过)(?P<n>好几|几|两|些)个?(?P<unit>天|周|星期|礼拜|月|年)"), _zh_ago),
    # recurring: 每周日, 每个星期六晚上, 每周末, 每周, 每天(早上), 天天, 每晚, 每个月, 每年
    (re.compile(r"每逢?个?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])?" + _ZH_PART + "?"), _zh_every_week),
    (re.compile(r"(?:每天|每日|每一天|(?<![今昨明前后])天天)" + _ZH_PART + "?"), _zh_every_day),
    (re.compile(r"(?P<w>每晚|每夜|每早)"), _zh_every_day),
    (re.compile(r"每一?个?(?P<unit>月|年)"), _zh_every_unit),
]
# Only for full-match resolve (a TIME entity span): a bare 五月 / 5月份 is the anchor year's month.
_ZH_RESOLVE_ONLY: list[tuple[re.Pattern, Resolver]] = [
    (re.compile(rf"(?P<m>{_ZN}{{1,2}})月份?"), _zh_month_only),
]


def _rules(lang: str) -> list[tuple[re.Pattern, Resolver]]:
    return ZH_RULES if lang == "zh" else EN_RULES


def _any_rule(rules: list[tuple[re.Pattern, Resolver]]) -> re.Pattern:
    """One pattern matching wherever any rule does (groups made non-capturing): a prefilter, so the
    common message with no time expression costs one regex search instead of one per rule."""
    body = "|".join("(?:" + re.sub(r"\(\?P<\w+>", "(?:", p.pattern) + ")" for p, _ in rules)
    return re.compile(body, rules[0][0].flags)


_ANY = {"en": _any_rule(EN_RULES), "zh": _any_rule(ZH_RULES)}
# The English rules without IGNORECASE, for scanning lower-cased text: Python's re skips ahead on a literal
# first character only when case-sensitive, so this is about 3x faster and finds the same spans.
_EN_LOWER = [(re.compile(p.pattern, p.flags & ~re.IGNORECASE), fn) for p, fn in EN_RULES]

# What each English rule cannot match without, in the lower-cased text: one literal of every group
# (_DIGIT: any \d). A rule whose literals are absent is not run — in chat most rules have none, and a
# substring test is far cheaper than a regex scan. Kept in step with EN_RULES by tests/test_time_norm.py.
_DIGIT = "\\d"
_MONTH_LIT = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WD_LIT = tuple(_WEEKDAYS)
_UNIT_LIT = ("day", "week", "month", "year")
_PART_LIT = ("morning", "afternoon", "evening", "night")
_EN_NEEDS: list[tuple[tuple[str, ...], ...]] = [
    ((_DIGIT,),),                                   # 2023-05-07
    ((_DIGIT,),),                                   # 5/7/2023
    ((_DIGIT,), _MONTH_LIT),                        # May 7th, 2023
    ((_DIGIT,), _MONTH_LIT),                        # 7th of May 2023
    ((_DIGIT,), _MONTH_LIT),                        # May 7
    ((_DIGIT,), _MONTH_LIT),                        # 7 May
    ((_DIGIT,), _MONTH_LIT),                        # May 2023
    (("today", "yesterday", "tomorrow"),),          # (the day before) yesterday (evening)
    (("this",), _PART_LIT),                         # this morning
    (("tonight", "last night"),),
    (("week", "month", "year"),),                   # last week, next month (weekend holds week)
    (_WD_LIT,),                                     # (last) Saturday (night)
    (("weekend",),),
    (("ago", "later"), _UNIT_LIT),                  # two weeks ago
    (("in",), _UNIT_LIT),                           # in two days
    (("in",), (_DIGIT,)),                           # in 2019
    (("every", "each"), _WD_LIT),                   # every Sunday
    (_WD_LIT,),                                     # Sundays
    (_WD_LIT, _PART_LIT),                           # Sunday mornings
    (("every", "each"), _UNIT_LIT + _PART_LIT),     # every day, each morning
    (("every",), _UNIT_LIT),                        # every other week
    (("weekends",),),
    (("in",), ("mornings", "afternoons", "evenings")),
]
_EN_LITERALS = tuple(dict.fromkeys(lit for needs in _EN_NEEDS for group in needs for lit in group if lit != _DIGIT))
_HAS_DIGIT = re.compile(r"\d")


def _en_rules_for(low: str) -> list[tuple[re.Pattern, Resolver]]:
    """The lower-case English rules that can match somewhere in `low` (see _EN_NEEDS)."""
    present = {lit for lit in _EN_LITERALS if lit in low}
    if _HAS_DIGIT.search(low):
        present.add(_DIGIT)
    if not present:
        return []
    return [rule for rule, needs in zip(_EN_LOWER, _EN_NEEDS) if all(not present.isdisjoint(g) for g in needs)]


def _value(r: Resolved, text: str) -> TimeValue:
    return TimeValue(r[0], r[1], r[2], text, r[3] if len(r) > 3 else None)


_EN_STRIP = re.compile(r"^(?:on|in|at|during|by|since|from|until|over|the)\s+", re.IGNORECASE)


def _candidates(e: str, lg: str) -> list[str]:
    """The forms of an expression tried against `lg`'s rules: as is, then with up to two leading prepositions off
    ("in two days" is a rule of its own; "on the weekend" → "weekend")."""
    if lg == "zh":
        return [e]
    out = [e.lower()]
    for _ in range(2):
        nxt = _EN_STRIP.sub("", out[-1]).strip()
        if nxt == out[-1]:
            break
        out.append(nxt)
    return out


def resolve(expr: str, anchor: datetime | None, lang: str) -> TimeValue | None:
    """The TimeValue of one whole time expression, or None when no rule resolves it.

    `anchor` (the message ts) resolves relative expressions; None → absolute only.
    Chinese rules also apply to an English-tagged message and vice versa, since
    mixed-language messages carry both.
    """
    raw = expr.strip()
    e = raw.strip(" ,.;!?，。；！？")
    if not e:
        return None
    for fn, m in _full_matches(e, lang):
        r = fn(m, anchor)
        if r is not None:
            return _value(r, raw)
    return None


@lru_cache(maxsize=1 << 14)
def _full_matches(e: str, lang: str) -> tuple[tuple[Resolver, re.Match], ...]:
    """Every (resolver, match) of the rules matching all of `e`, in the order resolve tries them. It does not
    depend on the anchor, and the same expressions (today, 昨天, last week) recur in message after message."""
    out = []
    for lg in ((lang, "en" if lang == "zh" else "zh")):
        rules = _rules(lg) + (_ZH_RESOLVE_ONLY if lg == "zh" else _EN_RESOLVE_ONLY)
        for cand in _candidates(e, lg):
            for pat, fn in rules:
                m = pat.fullmatch(cand)
                if m:
                    out.append((fn, m))
    return tuple(out)


_BOUNDARY = re.compile(r"\w")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_OR_DIGIT = re.compile(r"[A-Za-z0-9]")


def find_times(text: str, lang: str, anchor: datetime | None) -> list[TimeMention]:
    """Every time expression the rules recognise in `text`, longest-first and non-overlapping, in text order.

    English matches must sit on word boundaries; Chinese matches need none.
    Mentions that need an anchor are returned with value None when anchor is None.
    """
    cands: list[tuple[int, int, Resolver, re.Match]] = []
    # a language's rules only run when the text has its script (mixed messages get both)
    langs = [lg for lg, script in (("zh", _HAN), ("en", _LATIN_OR_DIGIT)) if script.search(text)]
    for lg in langs:
        subject, rules = text, _rules(lg)
        if lg == "en" and len(low := text.lower()) == len(text):   # same offsets (a few characters lower-case to two)
            subject, rules = low, _en_rules_for(low)
            if not rules:
                continue
        elif not _ANY[lg].search(subject):
            continue
        for pat, fn in rules:
            for m in pat.finditer(subject):
                s, e = m.span()
                if s == e:
                    continue
                if lg == "en" and ((s > 0 and _BOUNDARY.match(text[s - 1])) or (e < len(text) and _BOUNDARY.match(text[e]))):
                    continue
                cands.append((s, e, fn, m))
    cands.sort(key=lambda c: (c[0] - c[1], c[0]))  # longest first, then leftmost
    taken: list[tuple[int, int]] = []
    out: list[TimeMention] = []
    for s, e, fn, m in cands:
        if any(s < te and ts < e for ts, te in taken):
            continue
        taken.append((s, e))
        r = fn(m, anchor)
        surface = text[s:e]
        out.append(TimeMention(s, e, surface, _value(r, surface) if r else None))
    out.sort(key=lambda t: t.start)
    return out
