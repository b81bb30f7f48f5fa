"""Table-driven tests of r2g.time_norm: relative and absolute expressions in English and Chinese."""
from __future__ import annotations

from datetime import datetime

import pytest

from r2g.time_norm import find_times, resolve, zh_number

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
]


@pytest.mark.parametrize("expr,lang,start,end,gran", CASES)
def test_resolve(expr: str, lang: str, start: str, end: str, gran: str) -> None:
    v = resolve(expr, ANCHOR, lang)
    assert v is not None, expr
    assert (v.start, v.end, v.granularity) == (datetime.fromisoformat(start), datetime.fromisoformat(end), gran)
    assert v.text == expr


@pytest.mark.parametrize("expr,lang", [("yesterday", "en"), ("last week", "en"), ("昨天", "zh"), ("上周六", "zh"),
                                       ("5月7号", "zh"), ("May 7", "en")])
def test_relative_needs_anchor(expr: str, lang: str) -> None:
    assert resolve(expr, None, lang) is None


@pytest.mark.parametrize("expr,lang,start", [("May 7, 2023", "en", "2023-05-07"), ("2023-05-07", "en", "2023-05-07"),
                                             ("2023年5月7日", "zh", "2023-05-07")])
def test_absolute_without_anchor(expr: str, lang: str, start: str) -> None:
    v = resolve(expr, None, lang)
    assert v is not None and v.start == datetime.fromisoformat(start)


@pytest.mark.parametrize("expr", ["every day", "sometimes", "a while", "", "周围", "星期"])
def test_unresolvable(expr: str) -> None:
    assert resolve(expr, ANCHOR, "zh") is None and resolve(expr, ANCHOR, "en") is None


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


def test_zh_number() -> None:
    assert [zh_number(s) for s in ("十二", "二十三", "两", "2023", "二〇二三", "百")] == [12, 23, 2, 2023, 2023, 100]
