"""Golden R2G examples (SPEC §5, seed 004 R2G-7) plus per-rule cases in both languages, on the real models."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pytest

from r2g.nlp import english
from r2g.pipeline import run_partition
from r2g_signature import make_turns

TS = datetime(2023, 5, 8, 13, 56)


def make_messages(
    texts: list[str], speaker: str = "Caroline", ts: datetime | None = TS, conv_id: str = "c1", tenant: str = "t1"
) -> pa.Table:
    """MESSAGES rows for `texts`, each the whole of its own chunk raw_x (offset 0)."""
    return make_turns([(speaker, t, ts) for t in texts], conv_id=conv_id, tenant=tenant, raw_id="raw_x")


class G:
    """Graph view for assertions: nodes by id, typed edge lookups."""

    def __init__(self, text_or_texts, **kw) -> None:
        texts = [text_or_texts] if isinstance(text_or_texts, str) else text_or_texts
        res = run_partition(make_messages(texts, **kw), None)
        self.nodes = {n["id"]: n for n in res.nodes.to_pylist()}
        self.edges = res.edges.to_pylist()

    def of(self, type_: str, **match) -> list[dict]:
        return [n for n in self.nodes.values() if n["type"] == type_ and all(n[k] == v for k, v in match.items())]

    def one(self, type_: str, **match) -> dict:
        found = self.of(type_, **match)
        assert len(found) == 1, (type_, match, [n["title"] for n in self.of(type_)])
        return found[0]

    def targets(self, src: dict, etype: str) -> list[dict | str]:
        return [self.nodes.get(e["dst"], e["dst"]) for e in self.edges if e["src"] == src["id"] and e["type"] == etype]

    def titles(self, src: dict, etype: str) -> set[str]:
        return {t["title"] if isinstance(t, dict) else t for t in self.targets(src, etype)}


@pytest.fixture(scope="module", autouse=True)
def _models():
    english()  # load spaCy once for the module


# ---------------------------------------------------------------- SPEC §5 goldens


def test_golden_xiaoming_plays_soccer_in_park() -> None:
    g = G("小明在公园里踢足球", speaker="用户")
    xm = g.one("Entity", title="小明")
    park = g.one("Entity", title="公园")
    ball = g.one("Entity", title="足球")
    assert (xm["subtype"], park["subtype"], ball["subtype"]) == ("PERSON", "LOC", "OBJECT")
    fact = g.one("Fact", predicate_norm="play_soccer")
    assert fact["negation"] is False
    assert g.targets(fact, "AGENT") == [xm]
    assert g.targets(fact, "PATIENT") == [ball]
    assert g.targets(fact, "LOCATION") == [park]
    assert fact["title"] == "小明 踢足球"
    ep = g.one("Episode")
    assert g.targets(ep, "DERIVED_FROM") == ["raw_x"]
    assert g.targets(fact, "DERIVED_FROM") == [ep]  # the Fact reaches the RawChunk through its Episode
    assert {r["raw_id"] for r in fact["raw_refs"]} == {"raw_x"}
    # the roles say who/what/where; no MENTIONS edge repeats them
    assert g.targets(fact, "MENTIONS") == []


def test_golden_caroline_support_group_yesterday() -> None:
    g = G("Caroline went to an LGBTQ support group yesterday", speaker="Melanie")
    fact = next(f for f in g.of("Fact") if f["predicate_norm"] in ("go", "attend"))
    assert g.titles(fact, "AGENT") == {"Caroline"}
    assert "LGBTQ support group" in g.titles(fact, "PATIENT") | g.titles(fact, "LOCATION")
    (t,) = g.targets(fact, "TIME")
    assert t["subtype"] == "TIME" and t["title"] == "2023-05-07" and t["time_granularity"] == "day"
    assert t["time_start"] == datetime(2023, 5, 7) and t["time_end"] == datetime(2023, 5, 8)
    assert t["time_text"] == "yesterday"
    assert fact["time_start"] == datetime(2023, 5, 7) and fact["time_granularity"] == "day"
    assert fact["time_text"] == "yesterday"


def test_golden_unhappy_because_slept_badly() -> None:
    g = G("我今天不开心，因为昨晚没睡好", speaker="小王")
    unhappy = g.one("Fact", predicate_norm="happy")
    sleep = g.one("Fact", predicate_norm="sleep")
    assert unhappy["negation"] is True and sleep["negation"] is True
    assert g.targets(unhappy, "CAUSED_BY") == [sleep]
    assert g.targets(sleep, "CAUSES") == [unhappy]
    assert g.titles(unhappy, "AGENT") == {"小王"} and g.titles(sleep, "AGENT") == {"小王"}  # 我 → speaker
    assert g.titles(unhappy, "TIME") == {"2023-05-08"}
    assert g.targets(sleep, "TIME")[0]["time_granularity"] == "part_of_day"


def test_golden_preference_answer_in_chinese() -> None:
    g = G("以后优先用中文回答", speaker="小王")
    pref = g.one("Preference")
    assert pref["subtype"] == "instruction" and pref["provenance"] == "r2g.rule.preference.v1"
    ep = g.one("Episode")
    assert g.targets(pref, "DERIVED_FROM") == [ep]
    assert "中文" in g.titles(pref, "MENTIONS")


# ---------------------------------------------------------------- English rules


def test_en_went_hiking_with_mel_last_saturday() -> None:
    g = G("I went hiking with Mel last Saturday.")
    fact = g.one("Fact", predicate_norm="go_hike")
    assert g.titles(fact, "AGENT") == {"Caroline"}  # I → the speaker
    assert g.titles(fact, "TIME") == {"2023-05-06"}
    assert "Mel" in g.titles(fact, "MENTIONS")
    assert g.one("Entity", title="Mel")["subtype"] == "PERSON"


def test_en_negation_dont_like_coffee() -> None:
    g = G("I don't like coffee.")
    fact = g.one("Fact", predicate_norm="like_coffee")
    assert fact["negation"] is True
    assert g.titles(fact, "PATIENT") == {"coffee"}
    assert g.one("Preference")["subtype"] == "dislike"


def test_en_modality_want_to_play_soccer_next_week() -> None:
    g = G("I want to play soccer next week.")
    fact = g.one("Fact", predicate_norm="play_soccer")
    assert fact["modality"] == "want" and fact["negation"] is False
    assert fact["time_granularity"] == "week" and fact["time_start"] == datetime(2023, 5, 15)


def test_en_modal_aux_and_absolute_date() -> None:
    g = G("I'm going to visit Paris on May 20, 2023.")
    fact = g.one("Fact", predicate_norm="visit_paris")
    assert fact["modality"] == "will"
    assert g.one("Entity", title="Paris")["subtype"] == "LOC"
    assert g.titles(fact, "TIME") == {"2023-05-20"}


def test_en_because_links_cause_and_effect() -> None:
    g = G("I was tired because I did not sleep well.")
    tired = g.one("Fact", predicate_norm="tired")
    sleep = g.one("Fact", predicate_norm="sleep")
    assert tired["subtype"] == "state" and sleep["negation"] is True
    assert g.targets(tired, "CAUSED_BY") == [sleep] and g.targets(sleep, "CAUSES") == [tired]


def test_en_so_links_across_sentences() -> None:
    g = G("I did not sleep well. So I am tired today.")
    tired = g.one("Fact", predicate_norm="tired")
    assert [f["predicate_norm"] for f in g.targets(tired, "CAUSED_BY")] == ["sleep"]


def test_en_noun_phrase_normalisation_and_location() -> None:
    g = G("My sister gave me a cup of coffee at the park.")
    fact = g.one("Fact", predicate_norm="give_coffee")
    assert g.titles(fact, "PATIENT") == {"coffee"}
    assert g.titles(fact, "LOCATION") == {"park"}


def test_en_copular_state() -> None:
    g = G("Melanie is happy.")
    fact = g.one("Fact", predicate_norm="happy")
    assert fact["subtype"] == "state" and g.titles(fact, "AGENT") == {"Melanie"}


def test_en_instruction_preference() -> None:
    g = G("From now on, always answer in Chinese.")
    assert g.one("Preference")["subtype"] == "instruction"
    assert g.one("Fact", predicate_norm="answer")


def test_en_prefer_preference() -> None:
    g = G("I prefer tea over coffee.")
    assert g.one("Preference")["subtype"] == "prefer"


# ---------------------------------------------------------------- Chinese rules


def test_zh_modality_location_and_time() -> None:
    g = G("小红明天要去北京", speaker="用户")
    fact = g.one("Fact", predicate_norm="go")
    assert fact["modality"] == "will"
    assert g.titles(fact, "AGENT") == {"小红"}
    assert "北京" in g.titles(fact, "LOCATION") | g.titles(fact, "PATIENT")
    assert g.titles(fact, "TIME") == {"2023-05-09"}
    assert g.one("Entity", title="北京")["subtype"] == "LOC"


def test_zh_serial_verbs_go_hike() -> None:
    g = G("我上周和小李去爬山了", speaker="小王")
    fact = g.one("Fact", predicate_norm="go_hike")
    assert g.titles(fact, "AGENT") == {"小王"}
    assert g.targets(fact, "TIME")[0]["time_granularity"] == "week"
    assert "小李" in g.titles(fact, "MENTIONS")


def test_zh_negation_and_third_person() -> None:
    g = G("他不喜欢喝咖啡", speaker="小王")
    fact = g.one("Fact", predicate_norm="like_drink_coffee")
    assert fact["negation"] is True
    assert g.titles(fact, "PATIENT") == {"咖啡"}
    assert g.titles(fact, "AGENT") == set()  # 他 cannot be resolved without coreference
    assert g.of("Preference") == []  # someone else's taste is not the user's preference


def test_zh_location_and_lexicon_predicate() -> None:
    g = G("我们昨天在图书馆看书", speaker="小王")
    fact = g.one("Fact", predicate_norm="read")
    assert g.titles(fact, "LOCATION") == {"图书馆"}
    assert g.titles(fact, "TIME") == {"2023-05-07"}


def test_zh_because_so_pair() -> None:
    g = G("因为下雨，所以我没去跑步", speaker="小王")
    run = g.one("Fact", predicate_norm="go_run")
    assert run["negation"] is True
    assert [f["predicate_norm"] for f in g.targets(run, "CAUSED_BY")] == ["下雨"]


def test_zh_noun_subject_and_unknown_verb_object() -> None:
    g = G("妈妈在厨房做饭。我想吃苹果", speaker="小王")
    cook = g.one("Fact", predicate_norm="cook")
    assert g.titles(cook, "AGENT") == {"妈妈"} and g.titles(cook, "LOCATION") == {"厨房"}
    eat = g.one("Fact", predicate_norm="eat_苹果")
    assert eat["modality"] == "want" and g.titles(eat, "PATIENT") == {"苹果"}


def test_zh_like_preference_and_instrument() -> None:
    g = G("我喜欢吃苹果。请用英文回答", speaker="小王")
    assert {p["subtype"] for p in g.of("Preference")} == {"like", "instruction"}
    answer = g.one("Fact", predicate_norm="answer")
    assert g.titles(answer, "MANNER") == {"英文"}  # 用 + a language is how, not with what


def test_zh_absolute_date_time() -> None:
    g = G("2023年5月1日我们去了上海", speaker="小王")
    fact = g.one("Fact", predicate_norm="go")
    assert g.titles(fact, "TIME") == {"2023-05-01"} and g.titles(fact, "LOCATION") == {"上海"}


def test_zh_no_have() -> None:
    g = G("我没有钱", speaker="小王")
    fact = g.one("Fact", predicate_norm="have")
    assert fact["negation"] is True and g.titles(fact, "PATIENT") == {"钱"}


# ---------------------------------------------------------------- episodes


def test_episode_fields() -> None:
    g = G("I went hiking with Mel last Saturday. It was great!")
    ep = g.one("Episode")
    assert ep["title"].startswith("Caroline: I went hiking")
    assert {"hike", "mel", "great"} <= set(ep["keywords"])
    assert ep["speaker"] == "Caroline" and ep["msg_id"] == "m0" and ep["conv_id"] == "c1"
    assert ep["time_start"] == TS and ep["time_granularity"] == "minute"
    assert (ep["tier"], ep["category"], ep["status"], ep["frequency"]) == ("short", "episode", "active", 1)
    assert ep["provenance"] == "r2g.rule.episode.v1" and 0.0 <= ep["importance"] <= 1.0
    assert "Mel" in ep["entities"] and "Caroline" in g.titles(ep, "MENTIONS")


def test_episode_summary_is_not_the_raw_text_of_a_long_message() -> None:
    long = " ".join(f"Sentence number {i} talks about topic {i} in some detail." for i in range(20))
    ep = G(long).one("Episode")
    assert len(ep["text"]) <= 200 and ep["text"] != long
    assert "topic" in ep["keywords"]


def test_one_sentence_summary_is_the_sentence() -> None:
    assert G("小明在公园里踢足球").one("Episode")["text"] == "小明在公园里踢足球"


def test_reader_notes_make_no_facts() -> None:
    """Media placeholders become bracketed notes in the readers (raw_store.formats.whatsapp and the export
    formats) so that no Fact is made of "image omitted" or "Bild weggelassen" (issue 19)."""
    notes = [
        "[image]",
        "[media]",
        "[sticker 👍]",
        "[document: Wanderkarte.pdf • 2 Seiten]",
        "[deleted message]",
        "[voice message]",
        "[attachment: trail-map.png]",
        "[photo]",
        "[poll: Which trail?]",
        "[图片]",
        "[unsent message]",
        "[audio/video call]",
        "[link preview: Beijing weather]",
        "[contact card]",
        "[GIF]",
        "[share: https://example.org/trails/xiangshan]",
        "[file: report.pdf]",
        "[link]",
        "[voice]",
    ]
    g = G(notes)
    assert g.of("Fact") == [] and g.of("Preference") == []
