"""Query analysis: keywords, intent, stated times, names; and how recall uses them."""

from __future__ import annotations

from datetime import datetime

import pytest

from recall import RecallConfig, recall
from recall.query import analyze
from recall_fixtures import puppy_lake

ANCHOR = datetime(2023, 8, 1, 12, 0)


@pytest.mark.parametrize(
    "query, intent",
    [
        ("When did Ann adopt Biscuit?", "when"),
        ("What day was the agility contest?", "when"),
        ("小明什么时候去的公园？", "when"),
        ("Who won the contest?", "who"),
        ("谁赢了比赛", "who"),
        ("Where does Ann hike?", "where"),
        ("小明在哪里踢足球？", "where"),
        ("Why did Biscuit chew the boots?", "why"),
        ("为什么他不开心", "why"),
        ("What does Ann like to eat?", "preference"),
        ("小明喜欢什么运动", "preference"),
        ("Biscuit agility contest", None),
    ],
)
def test_intent(query, intent):
    assert analyze(query).intent == intent


def test_stated_times_resolve_against_the_anchor():
    (t,) = analyze("What did Ann do in May 2023?", ANCHOR).times
    assert (t.start, t.end, t.granularity) == (datetime(2023, 5, 1), datetime(2023, 6, 1), "month")
    (t,) = analyze("What happened last week?", ANCHOR).times
    assert t.start == datetime(2023, 7, 24) and t.end == datetime(2023, 7, 31)
    (t,) = analyze("她上周做了什么？", ANCHOR).times
    assert t.start == datetime(2023, 7, 24)
    (t,) = analyze("去年五月发生了什么", ANCHOR).times
    assert t.start == datetime(2022, 5, 1)
    assert analyze("When did Mel go camping?", ANCHOR).times == ()
    assert analyze("What happened last week?", None).times == ()  # relative needs an anchor


def test_names_and_keywords():
    a = analyze("Did Caroline Smith meet Mel's friend at the Pride parade?")
    assert a.names == ("Caroline Smith", "Mel", "Pride")
    assert "caroline" in a.keywords and "the" not in a.keywords
    assert analyze("What did they do?").names == ()
    assert analyze("error 0x00000709 again").code_like


def test_a_named_entity_seeds_recall_and_the_trace_says_so(tmp_path):
    lake = puppy_lake(tmp_path)
    trace: list = []
    recall("Tell me about Biscuit", "t", k=10, lake=lake, trace=trace)
    stage = next(t for t in trace if t["stage"] == "analyze")
    assert stage["detail"]["names"] == ["Biscuit"] and stage["detail"]["entities"] == ["ent_biscuit"]
    seeds = next(t for t in trace if t["stage"] == "seeds")
    assert "ent_biscuit" in [i for i, _ in seeds["detail"]["top"]]


def test_a_stated_time_lifts_what_happened_then(tmp_path):
    lake = puppy_lake(tmp_path)
    ids = lambda rs: [r.node_id for r in rs]  # noqa: E731
    plain = ids(recall("Biscuit puppy", "t", k=10, lake=lake))
    july = ids(recall("Biscuit puppy in July 2023", "t", k=10, lake=lake))
    may = ids(recall("Biscuit puppy in May 2023", "t", k=10, lake=lake))
    assert july.index("ep_j1") < may.index("ep_j1")
    assert may.index("ep_m1") < july.index("ep_m1")
    off = ids(recall("Biscuit puppy in July 2023", "t", k=10, lake=lake, config=RecallConfig(time_match_boost=0.0)))
    assert off.index("ep_j1") >= july.index("ep_j1") and plain
