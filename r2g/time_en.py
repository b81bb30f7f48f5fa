"""English time rules: a table of (regex, resolver) pairs over lower-cased text, and the literal prefilter that
skips the rules a text cannot match. r2g.time_norm runs them; a change to what they match or return bumps its
RULES_VERSION."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from r2g import time_values as tv
from r2g.time_values import Resolved, Resolver

_EN_NUM = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}


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
    if w in tv.VAGUE:
        return tv.VAGUE[w]
    n = _en_num(w)
    return (n, n) if n is not None else None


_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ]
    )
}
_MONTHS.update({k[:3]: v for k, v in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WEEKDAYS = {d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_MON = (
    r"(?P<mon>january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_WD = r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_PART_EN = r"(?P<part>morning|afternoon|evening|night)"
_NUM_EN = (
    r"(?P<n>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several)"
)
_REL = {"last": -1, "past": -1, "previous": -1, "this": 0, "current": 0, "next": 1, "coming": 1, "following": 1}


def _g(m: re.Match, name: str) -> str | None:
    """Group `name` lower-cased (English rules match case-insensitively); None/"" stay falsy; absent group → None."""
    v = m.groupdict().get(name)
    return v.lower() if v else v


def _group(m: re.Match, name: str) -> str:
    """Group `name` lower-cased, of a group that takes part in every match of the rule."""
    return m[name].lower()


def _en_mdy(m: re.Match, a: datetime | None) -> Resolved | None:
    d = tv.safe_date(int(m["y"]), _MONTHS[_group(m, "mon")], int(m["d"]))
    return tv.day(d) if d else None


def _en_md(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    d = tv.safe_date(a.year, _MONTHS[_group(m, "mon")], int(m["d"]))
    return tv.day(d) if d else None


def _en_my(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.month(int(m["y"]), _MONTHS[_group(m, "mon")])


def _en_month_only(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.month(a.year, _MONTHS[_group(m, "mon")]) if a else None


def _year_only(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.year(int(m["y"]))


def _en_deictic(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    word = " ".join(_group(m, "w").split())
    word = word[4:] if word.startswith("the ") else word
    d = a.date()
    if word == "tonight":
        return tv.part_of_day(d, "night")
    if word == "last night":
        return tv.part_of_day(d - timedelta(days=1), "night")
    shift = {
        "today": 0,
        "yesterday": -1,
        "tomorrow": 1,
        "this": 0,
        "day before yesterday": -2,
        "day after tomorrow": 2,
    }[word]
    return tv.day_or_part(d + timedelta(days=shift), _g(m, "part"))


def _en_rel_unit(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    off = _REL[_group(m, "rel")]
    unit = _group(m, "unit")
    if unit == "weekend":
        return tv.weekend(a.date(), off)
    return tv.unit_at(a, off, unit)


def _en_weekend(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.weekend(a.date(), 0) if a else None


def _en_weekday(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    rel = _g(m, "rel") or ""
    rel = {"last": "last", "past": "last", "previous": "last", "this": "this", "coming": "next", "next": "next"}.get(
        rel, ""
    )
    d = tv.weekday_in(a.date(), _WEEKDAYS[_group(m, "wd")], rel)
    return tv.day_or_part(d, _g(m, "part"))


def _en_ago(m: re.Match, a: datetime | None) -> Resolved | None:
    """N units ago / later; "in N units" has no `dir` group and means later."""
    if a is None:
        return None
    count = _en_count(m["n"])
    if count is None:
        return None
    return tv.shift(a, count, -1 if _g(m, "dir") == "ago" else 1, _group(m, "unit"))


def _us_mdy(m: re.Match, a: datetime | None) -> Resolved | None:
    mo, dd = int(m["m"]), int(m["d"])
    if mo > 12 >= dd:  # 25/12/2022 can only be day-first
        mo, dd = dd, mo
    d = tv.safe_date(int(m["y"]), mo, dd)
    return tv.day(d) if d else None


def _en_every_weekday(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.every_weekday(a, _WEEKDAYS[_group(m, "wd")], _g(m, "part")) if a else None


def _en_every(m: re.Match, a: datetime | None) -> Resolved | None:
    """every [other | N] day/week/weekend/month/year/morning/…; plural "weekends", "in the mornings"."""
    if a is None:
        return None
    n = _g(m, "n")
    step = 1 if not n else 2 if n in ("other", "second") else _en_num(n)
    return tv.every(a, _group(m, "unit"), step) if step else None


def _c(p: str) -> re.Pattern:
    return re.compile(p, re.IGNORECASE)


_EN_UNIT = r"(?P<unit>day|week|month|year)"
EN_RULES: list[tuple[re.Pattern, Resolver]] = [
    (_c(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), tv.iso_date),
    (_c(r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})"), _us_mdy),  # US order: 5/7/2023 is May 7
    (_c(_MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})"), _en_mdy),
    (_c(r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON + r",?\s+(?P<y>\d{4})"), _en_mdy),
    (_c(_MON + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?"), _en_md),
    (_c(r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON), _en_md),
    (_c(_MON + r",?\s+(?P<y>\d{4})"), _en_my),
    (
        _c(
            r"(?P<w>(?:the\s+)?day before yesterday|(?:the\s+)?day after tomorrow|today|yesterday|tomorrow)(?:\s+"
            + _PART_EN
            + r")?"
        ),
        _en_deictic,
    ),
    (_c(r"(?P<w>this)\s+" + _PART_EN), _en_deictic),
    (_c(r"(?P<w>tonight|last night)(?P<part>)"), _en_deictic),
    (
        _c(
            r"(?:the\s+)?(?P<rel>last|past|previous|this|current|next|coming|following)\s+(?P<unit>weekend|week|month|year)"
        ),
        _en_rel_unit,
    ),
    (
        _c(r"(?:(?:the\s+)?(?P<rel>last|past|previous|this|next|coming)\s+)?" + _WD + r"(?:\s+" + _PART_EN + r")?"),
        _en_weekday,
    ),
    (_c(r"(?:the\s+|this\s+)?weekend"), _en_weekend),
    (_c(_NUM_EN + r"\s+" + _EN_UNIT + r"s?\s+(?P<dir>ago|later)"), _en_ago),
    (_c(r"in\s+" + _NUM_EN + r"\s+" + _EN_UNIT + r"s?"), _en_ago),
    (_c(r"in\s+(?P<y>(?:19|20)\d{2})"), _year_only),
    # recurring: every Sunday, on Sundays, Sunday mornings, every (other | 2) day(s), weekends, in the mornings
    (_c(r"(?:every|each)\s+(?:single\s+)?" + _WD + r"(?:\s+" + _PART_EN + r")?"), _en_every_weekday),
    (_c(_WD + r"s"), _en_every_weekday),
    (_c(_WD + r"s?\s+" + _PART_EN + r"s"), _en_every_weekday),
    (
        _c(r"(?:every|each)\s+(?:single\s+)?(?P<unit>day|week|weekend|month|year|morning|afternoon|evening|night)"),
        _en_every,
    ),
    (
        _c(
            r"every\s+(?P<n>other|second|\d+|two|three|four|five|six|seven|eight|nine|ten)\s+"
            r"(?P<unit>day|week|weekend|month|year)s?"
        ),
        _en_every,
    ),
    (_c(r"(?P<unit>weekend)s"), _en_every),
    (_c(r"in\s+the\s+(?P<unit>morning|afternoon|evening)s"), _en_every),
]
# Only for full-match resolve (an NER DATE span): a bare month name or "in May" is too ambiguous to scan for.
EN_RESOLVE_ONLY: list[tuple[re.Pattern, Resolver]] = [
    (_c(r"(?:in\s+)?" + _MON), _en_month_only),
    (_c(r"(?P<y>(?:19|20)\d{2})"), _year_only),
]


# The English rules without IGNORECASE, for scanning lower-cased text: Python's re skips ahead on a literal
# first character only when case-sensitive, so this is about 3x faster and finds the same spans.
EN_LOWER = [(re.compile(p.pattern, p.flags & ~re.IGNORECASE), fn) for p, fn in EN_RULES]

# What each English rule cannot match without, in the lower-cased text: one literal of every group
# (_DIGIT: any \d). A rule whose literals are absent is not run — in chat most rules have none, and a
# substring test is far cheaper than a regex scan. Kept in step with EN_RULES by tests/test_time_norm.py.
_DIGIT = "\\d"
_MONTH_LIT = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WD_LIT = tuple(_WEEKDAYS)
_UNIT_LIT = ("day", "week", "month", "year")
_PART_LIT = ("morning", "afternoon", "evening", "night")
EN_NEEDS: list[tuple[tuple[str, ...], ...]] = [
    ((_DIGIT,),),  # 2023-05-07
    ((_DIGIT,),),  # 5/7/2023
    ((_DIGIT,), _MONTH_LIT),  # May 7th, 2023
    ((_DIGIT,), _MONTH_LIT),  # 7th of May 2023
    ((_DIGIT,), _MONTH_LIT),  # May 7
    ((_DIGIT,), _MONTH_LIT),  # 7 May
    ((_DIGIT,), _MONTH_LIT),  # May 2023
    (("today", "yesterday", "tomorrow"),),  # (the day before) yesterday (evening)
    (("this",), _PART_LIT),  # this morning
    (("tonight", "last night"),),
    (("week", "month", "year"),),  # last week, next month (weekend holds week)
    (_WD_LIT,),  # (last) Saturday (night)
    (("weekend",),),
    (("ago", "later"), _UNIT_LIT),  # two weeks ago
    (("in",), _UNIT_LIT),  # in two days
    (("in",), (_DIGIT,)),  # in 2019
    (("every", "each"), _WD_LIT),  # every Sunday
    (_WD_LIT,),  # Sundays
    (_WD_LIT, _PART_LIT),  # Sunday mornings
    (("every", "each"), _UNIT_LIT + _PART_LIT),  # every day, each morning
    (("every",), _UNIT_LIT),  # every other week
    (("weekends",),),
    (("in",), ("mornings", "afternoons", "evenings")),
]
_EN_LITERALS = tuple(dict.fromkeys(lit for needs in EN_NEEDS for group in needs for lit in group if lit != _DIGIT))
_HAS_DIGIT = re.compile(r"\d")


def en_rules_for(low: str) -> list[tuple[re.Pattern, Resolver]]:
    """The lower-case English rules that can match somewhere in `low` (see EN_NEEDS)."""
    present = {lit for lit in _EN_LITERALS if lit in low}
    if _HAS_DIGIT.search(low):
        present.add(_DIGIT)
    if not present:
        return []
    return [rule for rule, needs in zip(EN_LOWER, EN_NEEDS) if all(not present.isdisjoint(g) for g in needs)]
