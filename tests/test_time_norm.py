"""Table-driven tests of r2g.time_norm: relative and absolute expressions in English and Chinese."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from r2g import time_en
from r2g.time_norm import find_times, resolve
from r2g.time_zh import zh_number

PROPS = fuzz_settings(300)

ANCHOR = datetime(2023, 5, 8, 13, 56)  # a Monday

CASES = [
    # expr, lang, start, end, granularity
    ("today", "en", "2023-05-08", "2023-05-09", "day"),
    ("yesterday", "en", "2023-05-07", "2023-05-08", "day"),
    ("tomorrow", "en", "2023-05-09", "2023-05-10", "day"),
    ("the day before yesterday", "en", "2023-05-06", "2023-05-07", "day"),
    ("yesterday morning", "en", "2023-05-07T06:00", "2023-05-07T12:00", "part_of_day"),
    ("tomorrow evening", "en", "2023-05-09T18:00", "2023-05-09T22:00", "part_of_day"),
    ("last night", "en", "2023-05-07T18:00", "2023-05-08T00:00", "part_of_day"),
    ("tonight", "en", "2023-05-08T18:00", "2023-05-09T00:00", "part_of_day"),
    ("last week", "en", "2023-05-01", "2023-05-08", "week"),
    ("this week", "en", "2023-05-08", "2023-05-15", "week"),
    ("next week", "en", "2023-05-15", "2023-05-22", "week"),
    ("last month", "en", "2023-04-01", "2023-05-01", "month"),
    ("next year", "en", "2024-01-01", "2025-01-01", "year"),
    ("last Saturday", "en", "2023-05-06", "2023-05-07", "day"),
    ("this Friday", "en", "2023-05-12", "2023-05-13", "day"),
    ("next Tuesday", "en", "2023-05-16", "2023-05-17", "day"),
    ("3 days ago", "en", "2023-05-05", "2023-05-06", "day"),
    ("two weeks ago", "en", "2023-04-24", "2023-05-01", "week"),
    ("the weekend", "en", "2023-05-13", "2023-05-15", "week"),
    ("last weekend", "en", "2023-05-06", "2023-05-08", "week"),
    ("May 7, 2023", "en", "2023-05-07", "2023-05-08", "day"),
    ("7 May 2023", "en", "2023-05-07", "2023-05-08", "day"),
    ("2023-05-07", "en", "2023-05-07", "2023-05-08", "day"),
    ("May 2023", "en", "2023-05-01", "2023-06-01", "month"),
    ("on May 20", "en", "2023-05-20", "2023-05-21", "day"),
    ("今天", "zh", "2023-05-08", "2023-05-09", "day"),
    ("昨天", "zh", "2023-05-07", "2023-05-08", "day"),
    ("前天", "zh", "2023-05-06", "2023-05-07", "day"),
    ("明天", "zh", "2023-05-09", "2023-05-10", "day"),
    ("后天", "zh", "2023-05-10", "2023-05-11", "day"),
    ("昨晚", "zh", "2023-05-07T18:00", "2023-05-08T00:00", "part_of_day"),
    ("昨天晚上", "zh", "2023-05-07T18:00", "2023-05-08T00:00", "part_of_day"),
    ("明天下午", "zh", "2023-05-09T12:00", "2023-05-09T18:00", "part_of_day"),
    ("上周", "zh", "2023-05-01", "2023-05-08", "week"),
    ("下周", "zh", "2023-05-15", "2023-05-22", "week"),
    ("这周", "zh", "2023-05-08", "2023-05-15", "week"),
    ("本周", "zh", "2023-05-08", "2023-05-15", "week"),
    ("上周六", "zh", "2023-05-06", "2023-05-07", "day"),
    ("下周五", "zh", "2023-05-19", "2023-05-20", "day"),
    ("上个星期三", "zh", "2023-05-03", "2023-05-04", "day"),
    ("周末", "zh", "2023-05-13", "2023-05-15", "week"),
    ("上周末", "zh", "2023-05-06", "2023-05-08", "week"),
    ("上个月", "zh", "2023-04-01", "2023-05-01", "month"),
    ("下个月", "zh", "2023-06-01", "2023-07-01", "month"),
    ("去年", "zh", "2022-01-01", "2023-01-01", "year"),
    ("3天前", "zh", "2023-05-05", "2023-05-06", "day"),
    ("三天前", "zh", "2023-05-05", "2023-05-06", "day"),
    ("两周前", "zh", "2023-04-24", "2023-05-01", "week"),
    ("2023年5月7日", "zh", "2023-05-07", "2023-05-08", "day"),
    ("5月7号", "zh", "2023-05-07", "2023-05-08", "day"),
    ("五月七日", "zh", "2023-05-07", "2023-05-08", "day"),
    ("2022年12月", "zh", "2022-12-01", "2023-01-01", "month"),
    # --- every expression of the issue text, plus the review's list
    ("yesterday evening", "en", "2023-05-07T18:00", "2023-05-07T22:00", "part_of_day"),
    ("this morning", "en", "2023-05-08T06:00", "2023-05-08T12:00", "part_of_day"),
    ("this weekend", "en", "2023-05-13", "2023-05-15", "week"),
    ("next month", "en", "2023-06-01", "2023-07-01", "month"),
    ("in two days", "en", "2023-05-10", "2023-05-11", "day"),
    ("in 3 weeks", "en", "2023-05-29", "2023-06-05", "week"),
    ("two days later", "en", "2023-05-10", "2023-05-11", "day"),
    ("the day after tomorrow", "en", "2023-05-10", "2023-05-11", "day"),
    ("May 7 2023", "en", "2023-05-07", "2023-05-08", "day"),
    ("May 7th, 2023", "en", "2023-05-07", "2023-05-08", "day"),
    ("7 May", "en", "2023-05-07", "2023-05-08", "day"),
    ("the 7th of May", "en", "2023-05-07", "2023-05-08", "day"),
    ("5/7/2023", "en", "2023-05-07", "2023-05-08", "day"),  # US order: month first
    ("25/12/2022", "en", "2022-12-25", "2022-12-26", "day"),  # only day-first can be valid
    ("2023/5/7", "zh", "2023-05-07", "2023-05-08", "day"),
    ("in 2022", "en", "2022-01-01", "2023-01-01", "year"),
    ("last Saturday night", "en", "2023-05-06T18:00", "2023-05-07T00:00", "part_of_day"),
    ("on Saturday", "en", "2023-05-06", "2023-05-07", "day"),  # bare weekday: the latest one, on or before
    ("大前天", "zh", "2023-05-05", "2023-05-06", "day"),
    ("大后天", "zh", "2023-05-11", "2023-05-12", "day"),
    ("今晚", "zh", "2023-05-08T18:00", "2023-05-09T00:00", "part_of_day"),
    ("今天早上", "zh", "2023-05-08T06:00", "2023-05-08T12:00", "part_of_day"),
    ("早上", "zh", "2023-05-08T06:00", "2023-05-08T12:00", "part_of_day"),  # bare: the message's own day
    ("晚上", "zh", "2023-05-08T18:00", "2023-05-09T00:00", "part_of_day"),
    ("下周三", "zh", "2023-05-17", "2023-05-18", "day"),
    ("周六晚上", "zh", "2023-05-06T18:00", "2023-05-07T00:00", "part_of_day"),
    ("上上周", "zh", "2023-04-24", "2023-05-01", "week"),
    ("这个月", "zh", "2023-05-01", "2023-06-01", "month"),
    ("明年", "zh", "2024-01-01", "2025-01-01", "year"),
    ("2022年", "zh", "2022-01-01", "2023-01-01", "year"),
    ("二〇二二年", "zh", "2022-01-01", "2023-01-01", "year"),
    ("去年五月", "zh", "2022-05-01", "2022-06-01", "month"),
    ("去年5月7号", "zh", "2022-05-07", "2022-05-08", "day"),
    ("今年三月份", "zh", "2023-03-01", "2023-04-01", "month"),
    ("五月", "zh", "2023-05-01", "2023-06-01", "month"),  # a bare month (full-match only): the anchor year's
    ("三天后", "zh", "2023-05-11", "2023-05-12", "day"),
    ("两个月以后", "zh", "2023-07-01", "2023-08-01", "month"),
    ("一年前", "zh", "2022-01-01", "2023-01-01", "year"),
    ("2023年5月7号", "zh", "2023-05-07", "2023-05-08", "day"),
    # --- vague counts: the window of every day/week it could mean, granularity unspecified
    ("a few days ago", "en", "2023-05-03", "2023-05-07", "unspecified"),  # 2–5 days back
    ("a couple of days ago", "en", "2023-05-05", "2023-05-07", "unspecified"),  # 2–3 days back
    ("several weeks ago", "en", "2023-03-20", "2023-04-24", "unspecified"),  # 3–7 weeks back
    ("in a few days", "en", "2023-05-10", "2023-05-14", "unspecified"),
    ("几天前", "zh", "2023-05-03", "2023-05-07", "unspecified"),
    ("前几天", "zh", "2023-05-03", "2023-05-07", "unspecified"),
    ("前两天", "zh", "2023-05-05", "2023-05-07", "unspecified"),
    ("过两天", "zh", "2023-05-10", "2023-05-12", "unspecified"),
    ("好几个月前", "zh", "2022-10-01", "2023-03-01", "unspecified"),
]


@pytest.mark.parametrize("expr,lang,start,end,gran", CASES)
def test_resolve(expr: str, lang: str, start: str, end: str, gran: str) -> None:
    v = resolve(expr, ANCHOR, lang)
    assert v is not None, expr
    assert (v.start, v.end, v.granularity) == (datetime.fromisoformat(start), datetime.fromisoformat(end), gran)
    assert v.text == expr


@pytest.mark.parametrize(
    "expr,lang",
    [("yesterday", "en"), ("last week", "en"), ("昨天", "zh"), ("上周六", "zh"), ("5月7号", "zh"), ("May 7", "en")],
)
def test_relative_needs_anchor(expr: str, lang: str) -> None:
    assert resolve(expr, None, lang) is None


@pytest.mark.parametrize(
    "expr,lang,start",
    [("May 7, 2023", "en", "2023-05-07"), ("2023-05-07", "en", "2023-05-07"), ("2023年5月7日", "zh", "2023-05-07")],
)
def test_absolute_without_anchor(expr: str, lang: str, start: str) -> None:
    v = resolve(expr, None, lang)
    assert v is not None and v.start == datetime.fromisoformat(start)


@pytest.mark.parametrize(
    "expr",
    ["sometimes", "a while", "", "周围", "星期", "recently", "lately", "最近", "an hour ago", "everyday", "maybe"],
)
def test_unresolvable(expr: str) -> None:
    assert resolve(expr, ANCHOR, "zh") is None and resolve(expr, ANCHOR, "en") is None


# Recurring expressions are not one day: granularity "recurring", [start, end) is the occurrence in effect
# at or most recently before the anchor, `period` the ISO-8601 repeat and `iso` an ISO repeating interval.
RECURRING = [
    # expr, lang, start, end, period, iso
    ("on Sundays", "en", "2023-05-07", "2023-05-08", "P1W", "R/2023-05-07/P1W"),
    ("Sundays", "en", "2023-05-07", "2023-05-08", "P1W", "R/2023-05-07/P1W"),
    ("every Sunday", "en", "2023-05-07", "2023-05-08", "P1W", "R/2023-05-07/P1W"),
    ("each Monday", "en", "2023-05-08", "2023-05-09", "P1W", "R/2023-05-08/P1W"),  # today is a Monday
    ("every Friday", "en", "2023-05-05", "2023-05-06", "P1W", "R/2023-05-05/P1W"),  # not the coming one
    ("Sunday mornings", "en", "2023-05-07T06:00", "2023-05-07T12:00", "P1W", "R/2023-05-07T06:00/P1W"),
    ("every day", "en", "2023-05-08", "2023-05-09", "P1D", "R/2023-05-08/P1D"),
    (
        "every night",
        "en",
        "2023-05-07T18:00",
        "2023-05-08T00:00",
        "P1D",
        "R/2023-05-07T18:00/P1D",
    ),  # tonight hasn't begun
    ("every morning", "en", "2023-05-08T06:00", "2023-05-08T12:00", "P1D", "R/2023-05-08T06:00/P1D"),
    ("in the mornings", "en", "2023-05-08T06:00", "2023-05-08T12:00", "P1D", "R/2023-05-08T06:00/P1D"),
    ("every other day", "en", "2023-05-08", "2023-05-09", "P2D", "R/2023-05-08/P2D"),
    ("every two weeks", "en", "2023-05-08", "2023-05-15", "P2W", "R/2023-05-08/P2W"),
    ("every weekend", "en", "2023-05-06", "2023-05-08", "P1W", "R/2023-05-06/P1W"),
    ("on weekends", "en", "2023-05-06", "2023-05-08", "P1W", "R/2023-05-06/P1W"),
    ("every month", "en", "2023-05-01", "2023-06-01", "P1M", "R/2023-05-01/P1M"),
    ("every year", "en", "2023-01-01", "2024-01-01", "P1Y", "R/2023-01-01/P1Y"),
    ("每周日", "zh", "2023-05-07", "2023-05-08", "P1W", "R/2023-05-07/P1W"),
    ("每个星期六晚上", "zh", "2023-05-06T18:00", "2023-05-07T00:00", "P1W", "R/2023-05-06T18:00/P1W"),
    ("每周末", "zh", "2023-05-06", "2023-05-08", "P1W", "R/2023-05-06/P1W"),
    ("每周", "zh", "2023-05-08", "2023-05-15", "P1W", "R/2023-05-08/P1W"),
    ("每天", "zh", "2023-05-08", "2023-05-09", "P1D", "R/2023-05-08/P1D"),
    ("天天", "zh", "2023-05-08", "2023-05-09", "P1D", "R/2023-05-08/P1D"),
    ("每天早上", "zh", "2023-05-08T06:00", "2023-05-08T12:00", "P1D", "R/2023-05-08T06:00/P1D"),
    ("每晚", "zh", "2023-05-07T18:00", "2023-05-08T00:00", "P1D", "R/2023-05-07T18:00/P1D"),
    ("每个月", "zh", "2023-05-01", "2023-06-01", "P1M", "R/2023-05-01/P1M"),
    ("每年", "zh", "2023-01-01", "2024-01-01", "P1Y", "R/2023-01-01/P1Y"),
]


@pytest.mark.parametrize("expr,lang,start,end,period,iso", RECURRING)
def test_recurring(expr: str, lang: str, start: str, end: str, period: str, iso: str) -> None:
    v = resolve(expr, ANCHOR, lang)
    assert v is not None, expr
    assert (v.start, v.end, v.granularity, v.period) == (
        datetime.fromisoformat(start),
        datetime.fromisoformat(end),
        "recurring",
        period,
    )
    assert v.iso == iso and v.text == expr
    assert resolve(expr, None, lang) is None  # relative to the message, like "last Sunday"


def test_find_times_recurring() -> None:
    en = find_times("I go to church on Sundays, every Sunday morning I sing; we hike on weekends.", "en", ANCHOR)
    assert [(t.text, t.value.granularity) for t in en] == [
        ("Sundays", "recurring"),
        ("every Sunday morning", "recurring"),
        ("weekends", "recurring"),
    ]
    zh = find_times("我每周日都去教堂，每天跑步，每晚看书，周日也加班", "zh", ANCHOR)
    assert [(t.text, t.value.granularity) for t in zh] == [
        ("每周日", "recurring"),
        ("每天", "recurring"),
        ("每晚", "recurring"),
        ("周日", "day"),
    ]


def test_find_times_weekday_after_a_word() -> None:
    """A bare weekday right after another word is found (the optional "last/next" must not swallow the space)."""
    found = find_times("We met on Saturday and again on Friday evening.", "en", ANCHOR)
    assert [(t.text, t.value.iso) for t in found] == [
        ("Saturday", "2023-05-06"),
        ("Friday evening", "2023-05-05T18/22"),
    ]


def test_find_times_zh_vague_and_parts() -> None:
    found = find_times("我在北京住过两天，过两天再去。早上好！今天天气不错，下午茶很好喝，晚上去跑步", "zh", ANCHOR)
    assert [t.text for t in found] == ["过两天", "今天", "晚上"]  # not 住过两天, 早上好, 天天 of 今天天气, 下午茶
    assert found[0].value.granularity == "unspecified" and found[0].value.iso == "2023-05-10/2023-05-11"


def test_vague_iso_is_a_span() -> None:
    assert resolve("a few days ago", ANCHOR, "en").iso == "2023-05-03/2023-05-06"
    assert resolve("几天前", ANCHOR, "zh").iso == "2023-05-03/2023-05-06"


def test_iso_labels() -> None:
    assert resolve("yesterday", ANCHOR, "en").iso == "2023-05-07"
    assert resolve("next week", ANCHOR, "en").iso == "2023-W20"
    assert resolve("上个月", ANCHOR, "zh").iso == "2023-04"
    assert resolve("去年", ANCHOR, "zh").iso == "2022"
    assert resolve("昨晚", ANCHOR, "zh").iso == "2023-05-07T18/24"


def test_find_times_zh() -> None:
    found = find_times("我今天不开心，因为昨晚没睡好，上周六和周杰伦去了北京", "zh", ANCHOR)
    assert [t.text for t in found] == ["今天", "昨晚", "上周六"]
    assert found[2].value.start == datetime(2023, 5, 6)


def test_find_times_en_word_boundaries() -> None:
    found = find_times("I went hiking last Saturday; on May 7, 2023 we rested. Todays news.", "en", ANCHOR)
    assert [t.text for t in found] == ["last Saturday", "May 7, 2023"]
    found = find_times("Sent 5/7/2023, not 15/7/20234; a few days ago, recently.", "en", ANCHOR)
    assert [t.text for t in found] == ["5/7/2023", "a few days ago"]


def test_zh_number() -> None:
    assert [zh_number(s) for s in ("十二", "二十三", "两", "2023", "二〇二三", "百")] == [12, 23, 2, 2023, 2023, 100]


# ---------------------------------------------------------------- the English rules' literal prefilter

_TIME_WORDS = (
    "in every each the last next this past coming two a few couple of ago later day days week weeks "
    "weekend weekends month months year years may jan sept 7 7th 2023 05/07/2023 2023-05-07 sunday "
    "sundays saturday morning mornings evening evenings afternoons night tonight today yesterday "
    "tomorrow before after single other , . ١٢ ０７"
).split()


@PROPS
@given(st.lists(st.sampled_from(_TIME_WORDS) | st.text(max_size=6), min_size=1, max_size=9).map(" ".join))
def test_rules_the_prefilter_skips_cannot_match(text: str) -> None:
    """Sound, for any text: a rule left out by en_rules_for has no match in it (so find_times is unchanged)."""
    low = text.lower()
    run = {id(pat) for pat, _ in time_en.en_rules_for(low)}
    for pat, _ in time_en.EN_LOWER:
        if id(pat) not in run:
            assert pat.search(low) is None, pat.pattern


def test_prefilter_has_one_entry_per_rule_and_skips_plain_chat() -> None:
    assert len(time_en.EN_NEEDS) == len(time_en.EN_RULES) == len(time_en.EN_LOWER)
    assert time_en.en_rules_for("thanks, that sounds great!") == []
    assert [p.pattern for p, _ in time_en.en_rules_for("see you on sunday")] == [
        p.pattern for (p, _), needs in zip(time_en.EN_LOWER, time_en.EN_NEEDS) if needs == (time_en._WD_LIT,)
    ]
    found = find_times("Back in 2019, and again two weeks ago on Sunday mornings.", "en", ANCHOR)
    assert [t.text for t in found] == ["in 2019", "two weeks ago", "Sunday mornings"]
