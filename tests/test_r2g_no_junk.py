"""R2G makes no node a person would not call a memory (issue 17): r2g.rule.fact.en.v2, r2g.rule.fact.zh.v2 and
r2g.rule.entity.speaker.v2 on the lines that made "[Fact] be", "[Fact] alright", "[Fact] compost bin do", "[Fact] 小明 帮",
"[Entity] 我会优先" and "[Entity] assistant"."""

from __future__ import annotations

from datetime import datetime

import pytest

from r2g import rules as R
from r2g.pipeline import run_partition
from r2g.rules.zh import _zh_glued
from r2g_signature import make_turns

TS = datetime(2024, 3, 2, 18, 30)


def _graph(turns: list[tuple[str, str]]) -> tuple[list[dict], list[dict]]:
    res = run_partition(make_turns([(s, t, TS) for s, t in turns]), None)
    return res.nodes.to_pylist(), res.edges.to_pylist()


def _facts(nodes: list[dict]) -> list[str]:
    return sorted(n["predicate_norm"] for n in nodes if n["type"] == "Fact")


def _entities(nodes: list[dict]) -> list[str]:
    return sorted(n["title"] for n in nodes if n["type"] == "Entity")


def _draft(predicate: str, roles: tuple[str, ...] = (), subtype: str = "event", bare: bool = True) -> R.FactDraft:
    who = R.EntityRef("PERSON", "Tomas")
    return R.FactDraft(
        index=0,
        predicate_norm=predicate,
        subtype=subtype,
        negation=False,
        modality=None,
        start=0,
        end=1,
        title=predicate,
        keywords=[],
        provenance=R.FACT_EN,
        roles=[R.Role(t, who, R.FACT_EN) for t in roles],
        bare=bare,
    )


@pytest.mark.parametrize(
    ("predicate", "roles", "subtype", "bare", "kept"),
    [
        ("do", ("AGENT",), "event", True, False),  # "The compost bin is done"
        ("do", ("AGENT",), "event", False, False),  # "I did it": an empty verb needs a participant
        ("be", (), "event", False, False),
        ("alright", (), "state", True, False),
        ("ok", ("AGENT",), "state", False, False),  # "I am ok"
        ("go", ("AGENT",), "event", True, False),  # "Where did you go?"
        ("go", ("AGENT", "LOCATION"), "event", False, True),  # "I went to the gym"
        ("have", ("AGENT",), "event", False, True),  # "I've had them for three years"
        ("get", ("AGENT", "PATIENT"), "event", False, True),  # "my tomatoes got aphids"
        ("powerful", (), "state", True, True),  # "it was so powerful": how a thing felt
        ("rain", (), "event", True, True),  # "It rained"
        ("be_counselor", ("AGENT",), "event", False, True),  # two words say something
    ],
)
def test_fact_en_v2_keeps_only_facts_with_something_to_remember(predicate, roles, subtype, bare, kept) -> None:
    assert R.is_memory_fact(_draft(predicate, roles, subtype, bare)) is kept


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("The compost bin is done, Luis cut all the boards.", ["cut_board"]),
        ("Alright.", []),
        ("I am ok.", []),
        ("Wow, that's great! What happened there?", []),
        ("It was so powerful.", ["powerful"]),
        ("It rained, so we stayed home.", ["rain", "stay"]),
        ("Where did you go?", []),
        ("I've had them for three years.", ["have"]),
    ],
)
def test_english_clauses_without_a_memory_make_no_fact(text: str, facts: list[str]) -> None:
    nodes, _ = _graph([("Tomas", text)])
    assert _facts(nodes) == facts
    assert all(n["provenance"] == R.FACT_EN == "r2g.rule.fact.en.v2" for n in nodes if n["type"] == "Fact")


def test_a_glued_pronoun_and_modal_is_no_entity() -> None:
    nodes, edges = _graph([("小明", "好的，以后我会优先用中文回答你。")])
    assert "我会优先" not in _entities(nodes)
    answer = next(n for n in nodes if n["type"] == "Fact" and n["predicate_norm"] == "answer")
    agents = {e["dst"] for e in edges if e["src"] == answer["id"] and e["type"] == "AGENT"}
    assert [n["title"] for n in nodes if n["id"] in agents] == ["小明"]  # 我 is the speaker
    assert answer["modality"] == "will"  # 会


def test_a_time_word_glued_to_a_modal_is_no_subject() -> None:
    nodes, edges = _graph([("妈妈", "小明在公园里踢足球，晚饭前会回来。")])
    assert not [t for t in _entities(nodes) if "晚饭" in t]
    back = next(n for n in nodes if n["type"] == "Fact" and n["predicate_norm"] == "回来")
    agents = {e["dst"] for e in edges if e["src"] == back["id"] and e["type"] == "AGENT"}
    assert [n["title"] for n in nodes if n["id"] in agents] == ["小明"]  # the subject of the clause before


def test_a_bare_light_verb_makes_no_chinese_fact_and_the_colon_ends_a_clause() -> None:
    nodes, _ = _graph([("小明", "帮我记一下：下周三下午三点在学校图书馆和小红讨论数学作业。")])
    assert _facts(nodes) == ["讨论_数学作业"]  # v1: "help" (小明 帮) only


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("我会", ("我", "会")),
        ("前会", ("前", "会")),
        ("她要", ("她", "要")),
        ("晚会", None),
        ("聚会", None),
        ("机会", None),
        ("会", None),
    ],
)
def test_glued_tokens(word: str, parts) -> None:
    assert _zh_glued(word) == parts


@pytest.mark.parametrize("role", ["assistant", "user", "System", "助手"])
def test_a_chat_role_label_is_no_entity(role: str) -> None:
    nodes, _ = _graph([("Anna", "I went hiking with my sister."), (role, "That sounds great! Did you take photos?")])
    assert role not in _entities(nodes) and role.lower() not in {t.lower() for t in _entities(nodes)}
    assert "Anna" in _entities(nodes)
    assert R.ENTITY_SPEAKER == "r2g.rule.entity.speaker.v2"


def test_you_addressing_a_role_label_is_no_one() -> None:
    nodes, _ = _graph([("user", "Can you help me plan a trip?"), ("assistant", "Sure, where would you like to go?")])
    assert not {"user", "assistant"} & set(_entities(nodes))
