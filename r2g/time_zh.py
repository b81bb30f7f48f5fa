"""Chinese time rules: a table of (regex, resolver) pairs, and Chinese numerals. r2g.time_norm runs them; a change
to what they match or return bumps its RULES_VERSION."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from r2g import time_values as tv
from r2g.time_values import Resolved, Resolver

_ZH_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


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
        return tv.VAGUE[s]
    n = zh_number(s)
    return (n, n) if n is not None else None


_ZN = r"[0-9一二两三四五六七八九十〇零]"
_ZH_WD = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "末": -1}
_ZH_PART_WORDS = "早上|上午|早晨|中午|下午|傍晚|晚上|夜里|夜间|凌晨"
_ZH_PART = rf"(?P<part>{_ZH_PART_WORDS})"
_ZH_DAY = {
    "大前天": -3,
    "前天": -2,
    "昨天": -1,
    "昨日": -1,
    "今天": 0,
    "今日": 0,
    "明天": 1,
    "明日": 1,
    "后天": 2,
    "大后天": 3,
}
_ZH_SHORT = {
    "昨晚": (-1, "晚上"),
    "今晚": (0, "晚上"),
    "明晚": (1, "晚上"),
    "今早": (0, "早上"),
    "明早": (1, "早上"),
    "昨早": (-1, "早上"),
}
_ZH_EVERY_SHORT = {"每晚": "晚上", "每夜": "夜里", "每早": "早上"}
_ZH_UNIT = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}
_ZH_YEAR_OFF = {"前": -2, "去": -1, "今": 0, "本": 0, "明": 1, "后": 2}


def _zh_ymd(m: re.Match, a: datetime | None) -> Resolved | None:
    y = zh_number(m["y"]) if m["y"] else (a.year if a else None)
    mo, d = zh_number(m["m"]), zh_number(m["d"])
    if y is None or mo is None or d is None:
        return None
    dd = tv.safe_date(y, mo, d)
    return tv.day(dd) if dd else None


def _zh_ym(m: re.Match, a: datetime | None) -> Resolved | None:
    y, mo = zh_number(m["y"]), zh_number(m["m"])
    if y is None or mo is None or not 1 <= mo <= 12:
        return None
    return tv.month(y, mo)


def _zh_y(m: re.Match, a: datetime | None) -> Resolved | None:
    y = zh_number(m["y"])
    return tv.year(y) if y and y >= 1000 else None


def _zh_rel_year_md(m: re.Match, a: datetime | None) -> Resolved | None:
    """去年五月 → that month; 去年5月7号 → that day (the year relative to the anchor)."""
    if a is None:
        return None
    y, mo = a.year + _ZH_YEAR_OFF[m["w"]], zh_number(m["m"])
    if mo is None or not 1 <= mo <= 12:
        return None
    if not m["d"]:
        return tv.month(y, mo)
    d = zh_number(m["d"])
    dd = tv.safe_date(y, mo, d) if d is not None else None
    return tv.day(dd) if dd else None


def _zh_month_only(m: re.Match, a: datetime | None) -> Resolved | None:
    mo = zh_number(m["m"])
    return tv.month(a.year, mo) if a and mo and 1 <= mo <= 12 else None


def _zh_day(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    return tv.day_or_part(a.date() + timedelta(days=_ZH_DAY[m["w"]]), m["part"])


def _zh_short(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    off, part = _ZH_SHORT[m["w"]]
    return tv.part_of_day(a.date() + timedelta(days=off), part)


def _zh_part_only(m: re.Match, a: datetime | None) -> Resolved | None:
    """A bare part of day (早上, 晚上) is that part of the message's own day."""
    return tv.part_of_day(a.date(), m["part"]) if a else None


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
        return tv.week(a.date(), off)
    idx = _ZH_WD[wd]
    if idx < 0:
        return tv.weekend(a.date(), off)
    if not m["rel"]:
        return tv.day_or_part(tv.weekday_in(a.date(), idx, ""), m["part"])
    base = a.date() + timedelta(weeks=off)
    return tv.day_or_part(base - timedelta(days=base.weekday()) + timedelta(days=idx), m["part"])


def _zh_month(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.month(a.year, a.month, _zh_rel(m["rel"])) if a else None


def _zh_year(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    return tv.year(a.year + _ZH_YEAR_OFF[m["w"]])


def _zh_ago(m: re.Match, a: datetime | None) -> Resolved | None:
    """N 天前 / N 个月后; 前几天 / 过两天 carry their direction in the `pre` group instead of `dir`."""
    if a is None:
        return None
    pre = m.groupdict().get("pre")
    # 前两天 is "a couple of days ago", not exactly two days
    count = tv.VAGUE.get(m["n"]) if pre else _zh_count(m["n"])
    if count is None:
        return None
    sign = (-1 if pre == "前" else 1) if pre else (-1 if m["dir"] in ("前", "以前", "之前") else 1)
    return tv.shift(a, count, sign, _ZH_UNIT[m["unit"]])


def _zh_every_week(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    wd = m["wd"]
    if not wd:
        return tv.every(a, "week")
    if _ZH_WD[wd] < 0:
        return tv.every(a, "weekend")
    return tv.every_weekday(a, _ZH_WD[wd], m["part"])


def _zh_every_day(m: re.Match, a: datetime | None) -> Resolved | None:
    if a is None:
        return None
    part = m.groupdict().get("part") or _ZH_EVERY_SHORT.get(m.groupdict().get("w") or "")
    return tv.every(a, part) if part else tv.every(a, "day")


def _zh_every_unit(m: re.Match, a: datetime | None) -> Resolved | None:
    return tv.every(a, _ZH_UNIT[m["unit"]]) if a else None


ZH_RULES: list[tuple[re.Pattern, Resolver]] = [
    (re.compile(r"(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})"), tv.iso_date),
    (re.compile(rf"(?:(?P<y>{_ZN}{{4}})年)?(?P<m>{_ZN}{{1,2}})月(?P<d>{_ZN}{{1,3}})[日号]"), _zh_ymd),
    (re.compile(rf"(?P<y>{_ZN}{{4}})年(?P<m>{_ZN}{{1,2}})月(?:份)?"), _zh_ym),
    (re.compile(rf"(?P<y>{_ZN}{{4}})年"), _zh_y),
    (re.compile(rf"(?P<w>前|去|今|明|后)年(?P<m>{_ZN}{{1,2}})月份?(?:(?P<d>{_ZN}{{1,3}})[日号])?"), _zh_rel_year_md),
    (re.compile(r"(?P<w>大前天|前天|昨天|昨日|今天|今日|明天|明日|大后天|后天)" + _ZH_PART + "?"), _zh_day),
    (re.compile(r"(?P<w>昨晚|今晚|明晚|今早|明早|昨早)"), _zh_short),
    (re.compile(_ZH_PART + r"(?![好茶])"), _zh_part_only),  # not the greetings 早上好 / 晚上好, nor 下午茶
    (
        re.compile(r"(?P<rel>上上|下下|上|下|这|本)个?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])?" + _ZH_PART + "?"),
        _zh_week,
    ),
    (re.compile(r"(?P<rel>)(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])" + _ZH_PART + "?"), _zh_week),
    (re.compile(r"(?P<rel>上|下|这|本)个?月"), _zh_month),
    (re.compile(r"(?P<w>前|去|今|明|后)年"), _zh_year),
    (
        re.compile(rf"(?P<n>{_ZN}+|好几|几)个?(?P<unit>天|日|周|星期|礼拜|月|年)(?P<dir>以前|之前|前|以后|之后|后)"),
        _zh_ago,
    ),
    (re.compile(r"(?P<pre>前)(?P<n>好几|几|两|些)个?(?P<unit>天|周|星期|礼拜|月|年)"), _zh_ago),
    # 过两天 "in a couple of days" — but not the aspect particle of 住过两天 ("stayed two days")
    (
        re.compile(
            r"(?:^|(?<=[\s，。！？、,.!?;；：:再等]))(?P<pre>过)(?P<n>好几|几|两|些)个?(?P<unit>天|周|星期|礼拜|月|年)"
        ),
        _zh_ago,
    ),
    # recurring: 每周日, 每个星期六晚上, 每周末, 每周, 每天(早上), 天天, 每晚, 每个月, 每年
    (re.compile(r"每逢?个?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])?" + _ZH_PART + "?"), _zh_every_week),
    (re.compile(r"(?:每天|每日|每一天|(?<![今昨明前后])天天)" + _ZH_PART + "?"), _zh_every_day),
    (re.compile(r"(?P<w>每晚|每夜|每早)"), _zh_every_day),
    (re.compile(r"每一?个?(?P<unit>月|年)"), _zh_every_unit),
]
# Only for full-match resolve (a TIME entity span): a bare 五月 / 5月份 is the anchor year's month.
ZH_RESOLVE_ONLY: list[tuple[re.Pattern, Resolver]] = [
    (re.compile(rf"(?P<m>{_ZN}{{1,2}})月份?"), _zh_month_only),
]
