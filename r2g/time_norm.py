"""Time normalisation: relative and absolute time expressions → ISO interval + granularity.

Both languages share one shape: a table of (regex, resolver) rules. `resolve`
full-matches one expression (e.g. an NER DATE span); `find_times` scans a text
for every expression the rules know. Relative expressions need the message
timestamp as anchor; without one only absolute dates resolve. Weeks start on
Monday; intervals are [start, end) in naive wall-clock time, like the message ts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Callable

GRANULARITIES = ("day", "week", "month", "year", "part_of_day", "minute", "unspecified")


@dataclass(frozen=True)
class TimeValue:
    """A resolved time: [start, end) with its granularity and the original expression."""

    start: datetime
    end: datetime
    granularity: str
    text: str

    @property
    def iso(self) -> str:
        """ISO-8601 label at the value's granularity: 2023-05-07, 2023-W18, 2023-05, 2023, 2023-05-07T18."""
        s = self.start
        if self.granularity == "year":
            return f"{s.year:04d}"
        if self.granularity == "month":
            return f"{s.year:04d}-{s.month:02d}"
        if self.granularity == "week":
            y, w, _ = s.isocalendar()
            if (self.end - self.start).days == 7:
                return f"{y:04d}-W{w:02d}"
            # a weekend or other multi-day span: name it by its first and last day
            last = (self.end - timedelta(days=1)).date()
            return f"{s.date().isoformat()}/{last.isoformat()}"
        if self.granularity == "part_of_day":
            return f"{s.date().isoformat()}T{s.hour:02d}/{_end_hour(self):02d}"
        if self.granularity == "minute":
            return s.strftime("%Y-%m-%dT%H:%M")
        return s.date().isoformat()


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


# ---------------------------------------------------------------- numbers

_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
           "a few": 3, "few": 3}
_ZH_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def _en_num(s: str) -> int | None:
    s = s.lower().strip()
    if s.isdigit():
        return int(s)
    return _EN_NUM.get(s)


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


# ---------------------------------------------------------------- English rules

_MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
_MONTHS.update({k[:3]: v for k, v in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WEEKDAYS = {d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_MON = r"(?P<mon>january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_WD = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
_PART_EN = r"(?P<part>morning|afternoon|evening|night)"
_NUM_EN = r"(?P<n>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a )?couple of|(?:a )?few)"
_REL = {"last": -1, "past": -1, "previous": -1, "this": 0, "current": 0, "next": 1, "coming": 1, "following": 1}

def _g(m: re.Match, name: str) -> str | None:
    """Group `name` lower-cased (English rules match case-insensitively); None/"" stay falsy."""
    v = m[name]
    return v.lower() if v else v


Resolver = Callable[[re.Match, "datetime | None"], "tuple[datetime, datetime, str] | None"]


def _en_mdy(m: re.Match, a: datetime | None):
    d = _safe_date(int(m["y"]), _MONTHS[_g(m, "mon")], int(m["d"]))
    return _day(d) if d else None


def _en_md(m: re.Match, a: datetime | None):
    if a is None:
        return None
    d = _safe_date(a.year, _MONTHS[_g(m, "mon")], int(m["d"]))
    return _day(d) if d else None


def _iso(m: re.Match, a: datetime | None):
    d = _safe_date(int(m["y"]), int(m["m"]), int(m["d"]))
    return _day(d) if d else None


def _en_my(m: re.Match, a: datetime | None):
    return _month(int(m["y"]), _MONTHS[_g(m, "mon")])


def _en_month_only(m: re.Match, a: datetime | None):
    return _month(a.year, _MONTHS[_g(m, "mon")]) if a else None


def _year_only(m: re.Match, a: datetime | None):
    return _year(int(m["y"]))


def _en_deictic(m: re.Match, a: datetime | None):
    if a is None:
        return None
    word = " ".join(_g(m, "w").split())
    word = word[4:] if word.startswith("the ") else word
    d = a.date()
    if word == "tonight":
        return _part(d, "night")
    if word == "last night":
        return _part(d - timedelta(days=1), "night")
    shift = {"today": 0, "yesterday": -1, "tomorrow": 1, "this": 0,
             "day before yesterday": -2, "day after tomorrow": 2}[word]
    return _day_or_part(d + timedelta(days=shift), _g(m, "part"))


def _en_rel_unit(m: re.Match, a: datetime | None):
    if a is None:
        return None
    off = _REL[_g(m, "rel")]
    unit = _g(m, "unit")
    if unit == "week":
        return _week(a.date(), off)
    if unit == "weekend":
        return _weekend(a.date(), off)
    if unit == "month":
        return _month(a.year, a.month, off)
    return _year(a.year + off)


def _en_weekend(m: re.Match, a: datetime | None):
    return _weekend(a.date(), 0) if a else None


def _en_weekday(m: re.Match, a: datetime | None):
    if a is None:
        return None
    rel = _g(m, "rel") or ""
    rel = {"last": "last", "past": "last", "previous": "last", "this": "this", "coming": "next", "next": "next"}.get(rel, "")
    d = _weekday_in(a.date(), _WEEKDAYS[_g(m, "wd")], rel)
    return _day_or_part(d, _g(m, "part"))


def _en_ago(m: re.Match, a: datetime | None):
    if a is None:
        return None
    n = _en_num(m["n"])
    if n is None:
        return None
    return _shift(a, n * (-1 if _g(m, "dir") == "ago" else 1), _g(m, "unit"))


def _en_in_n(m: re.Match, a: datetime | None):
    if a is None:
        return None
    n = _en_num(m["n"])
    return _shift(a, n, _g(m, "unit")) if n is not None else None


def _shift(a: datetime, n: int, unit: str):
    d = a.date()
    if unit == "day":
        return _day(d + timedelta(days=n))
    if unit == "week":
        return _week(d + timedelta(weeks=n))
    if unit == "month":
        return _month(a.year, a.month, n)
    return _year(a.year + n)


def _c(p: str) -> re.Pattern:
    return re.compile(p, re.IGNORECASE)


EN_RULES: list[tuple[re.Pattern, Resolver]] = [
    (_c(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), _iso),
    (_c(_MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})"), _en_mdy),
    (_c(r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON + r",?\s+(?P<y>\d{4})"), _en_mdy),
    (_c(_MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?"), _en_md),
    (_c(r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON), _en_md),
    (_c(_MON + r",?\s+(?P<y>\d{4})"), _en_my),
    (_c(r"(?P<w>(?:the\s+)?day before yesterday|(?:the\s+)?day after tomorrow|today|yesterday|tomorrow)(?:\s+" + _PART_EN + r")?"), _en_deictic),
    (_c(r"(?P<w>this)\s+" + _PART_EN), _en_deictic),
    (_c(r"(?P<w>tonight|last night)(?P<part>)"), _en_deictic),
    (_c(r"(?:the\s+)?(?P<rel>last|past|previous|this|current|next|coming|following)\s+(?P<unit>weekend|week|month|year)"), _en_rel_unit),
    (_c(r"(?:the\s+)?(?P<rel>last|past|previous|this|next|coming)?\s*" + _WD + r"(?:\s+" + _PART_EN + r")?"), _en_weekday),
    (_c(r"(?:the\s+|this\s+)?weekend"), _en_weekend),
    (_c(_NUM_EN + r"\s+(?P<unit>day|week|month|year)s?\s+(?P<dir>ago|later)"), _en_ago),
    (_c(r"in\s+" + _NUM_EN + r"\s+(?P<unit>day|week|month|year)s?"), _en_in_n),
    (_c(r"in\s+(?P<y>(?:19|20)\d{2})"), _year_only),
]
# Only for full-match resolve (an NER DATE span): a bare month name or "in May" is too ambiguous to scan for.
_EN_RESOLVE_ONLY: list[tuple[re.Pattern, Resolver]] = [
    (_c(r"(?:in\s+)?" + _MON), _en_month_only),
    (_c(r"(?P<y>(?:19|20)\d{2})"), _year_only),
]

# ---------------------------------------------------------------- Chinese rules

_ZN = r"[0-9一二两三四五六七八九十〇零]"
_ZH_WD = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}
_ZH_PART = r"(?P<part>早上|上午|早晨|中午|下午|傍晚|晚上|夜里|夜间|凌晨)"
_ZH_DAY = {"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "今天": 0, "今日": 0, "明天": 1, "明日": 1,
           "后天": 2, "大后天": 3}
_ZH_SHORT = {"昨晚": (-1, "晚上"), "今晚": (0, "晚上"), "明晚": (1, "晚上"), "今早": (0, "早上"), "明早": (1, "早上"),
             "昨早": (-1, "早上")}


def _zh_ymd(m: re.Match, a: datetime | None):
    y = zh_number(m["y"]) if m["y"] else (a.year if a else None)
    mo, d = zh_number(m["m"]), zh_number(m["d"])
    if y is None or mo is None or d is None:
        return None
    dd = _safe_date(y, mo, d)
    return _day(dd) if dd else None


def _zh_ym(m: re.Match, a: datetime | None):
    y, mo = zh_number(m["y"]), zh_number(m["m"])
    if y is None or mo is None or not 1 <= mo <= 12:
        return None
    return _month(y, mo)


def _zh_y(m: re.Match, a: datetime | None):
    y = zh_number(m["y"])
    return _year(y) if y and y >= 1000 else None


def _zh_day(m: re.Match, a: datetime | None):
    if a is None:
        return None
    return _day_or_part(a.date() + timedelta(days=_ZH_DAY[m["w"]]), m["part"])


def _zh_short(m: re.Match, a: datetime | None):
    if a is None:
        return None
    off, part = _ZH_SHORT[m["w"]]
    return _part(a.date() + timedelta(days=off), part)


def _zh_rel(s: str | None) -> int:
    if not s:
        return 0
    if s.startswith("上上"):
        return -2
    if s.startswith("下下"):
        return 2
    return {"上": -1, "下": 1, "这": 0, "本": 0, "今": 0}[s[0]]


def _zh_week(m: re.Match, a: datetime | None):
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


def _zh_month(m: re.Match, a: datetime | None):
    return _month(a.year, a.month, _zh_rel(m["rel"])) if a else None


def _zh_year(m: re.Match, a: datetime | None):
    if a is None:
        return None
    return _year(a.year + {"前": -2, "去": -1, "今": 0, "本": 0, "明": 1, "后": 2}[m["w"]])


def _zh_ago(m: re.Match, a: datetime | None):
    if a is None:
        return None
    n = zh_number(m["n"])
    if n is None:
        return None
    unit = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}[m["unit"]]
    return _shift(a, -n if m["dir"] in ("前", "以前", "之前") else n, unit)


ZH_RULES: list[tuple[re.Pattern, Resolver]] = [
    (re.compile(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), _iso),
    (re.compile(rf"(?:(?P<y>{_ZN}{{4}})年)?(?P<m>{_ZN}{{1,2}})月(?P<d>{_ZN}{{1,3}})[日号]"), _zh_ymd),
    (re.compile(rf"(?P<y>{_ZN}{{4}})年(?P<m>{_ZN}{{1,2}})月(?:份)?"), _zh_ym),
    (re.compile(rf"(?P<y>{_ZN}{{4}})年"), _zh_y),
    (re.compile(r"(?P<w>大前天|前天|昨天|昨日|今天|今日|明天|明日|大后天|后天)" + _ZH_PART + "?"), _zh_day),
    (re.compile(r"(?P<w>昨晚|今晚|明晚|今早|明早|昨早)"), _zh_short),
    (re.compile(r"(?P<rel>上上|下下|上|下|这|本)个?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])?" + _ZH_PART + "?"), _zh_week),
    (re.compile(r"(?P<rel>)(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])" + _ZH_PART + "?"), _zh_week),
    (re.compile(r"(?P<rel>上|下|这|本)个?月"), _zh_month),
    (re.compile(r"(?P<w>前|去|今|明|后)年"), _zh_year),
    (re.compile(rf"(?P<n>{_ZN}+|几)个?(?P<unit>天|日|周|星期|礼拜|月|年)(?P<dir>以前|之前|前|以后|之后|后)"), _zh_ago),
]


def _rules(lang: str) -> list[tuple[re.Pattern, Resolver]]:
    return ZH_RULES if lang == "zh" else EN_RULES


_EN_STRIP = re.compile(r"^(?:on|in|at|during|by|since|from|until|the)\s+", re.IGNORECASE)


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
    for lg in ((lang, "en" if lang == "zh" else "zh")):
        cand = e if lg == "zh" else _EN_STRIP.sub("", e.lower()).strip()
        if lg != "zh":
            cand = _EN_STRIP.sub("", cand).strip()  # "on the weekend"
        rules = _rules(lg) + (_EN_RESOLVE_ONLY if lg != "zh" else [])
        for pat, fn in rules:
            m = pat.fullmatch(cand)
            if m:
                r = fn(m, anchor)
                if r is not None:
                    return TimeValue(r[0], r[1], r[2], raw)
    return None


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
        for pat, fn in _rules(lg):
            for m in pat.finditer(text):
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
        out.append(TimeMention(s, e, surface, TimeValue(r[0], r[1], r[2], surface) if r else None))
    out.sort(key=lambda t: t.start)
    return out
