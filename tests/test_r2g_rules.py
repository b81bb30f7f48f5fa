"""Unit tests of single R2G rules: coreference, tasks, importance, topic blocks, fact links, re-derivation."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from r2g import rules as R
from r2g.link import canonical_predicate
from r2g.pipeline import run_partition
from r2g.rules import episode
from r2g_signature import make_turns
from raw_store.lake import InboxFile, Lake, outdated_stages, write_manifest

ROOT = Path(__file__).resolve().parent.parent
TS = datetime(2023, 5, 8, 13, 56)
PROPS = fuzz_settings(200)


@pytest.mark.parametrize(
    "names,speakers,expected",
    [
        (["Mel"], ["Caroline", "Melanie"], {"mel": "Melanie"}),  # speaker wins
        (["Mel", "Melanie", "Melissa"], ["Caroline"], {}),  # ambiguous: left alone
        (["Caroline Smith"], ["Caroline", "Melanie"], {"caroline smith": "Caroline"}),
        (["Jo"], ["Joanna"], {}),  # two letters is no evidence
        (["Mel"], ["Mel", "Melanie"], {}),  # two speakers are two people
        (["小明"], ["王小明", "小红"], {"小明": "王小明"}),
        (["明明", "小明"], [], {"明明": "小明"}),
        (["明明"], ["王小明", "李明"], {}),  # fits two names
        (["Paris"], ["Caroline"], {}),
    ],
)
def test_name_variants(names, speakers, expected) -> None:
    assert R.name_variants(names, speakers) == expected


def _graph(turns):
    res = run_partition(make_turns([(s, t, TS) for s, t in turns]), None)
    return res.nodes.to_pylist(), res.edges.to_pylist()


def test_pronouns_resolve_only_with_one_candidate() -> None:
    nodes, edges = _graph([("Melanie", "Anna and Jon baked a cake."), ("Caroline", "She cut it with a knife.")])
    cut = next(n for n in nodes if n["type"] == "Fact" and n["predicate_norm"].startswith("cut"))
    assert not [e for e in edges if e["src"] == cut["id"] and e["type"] == "AGENT"]  # Anna or Jon: unknown
    nodes, edges = _graph([("Melanie", "Anna baked a cake."), ("Caroline", "She cut it with a knife.")])
    by_id = {n["id"]: n for n in nodes}
    cut = next(n for n in nodes if n["type"] == "Fact" and n["predicate_norm"].startswith("cut"))
    agent = [by_id[e["dst"]]["title"] for e in edges if e["src"] == cut["id"] and e["type"] == "AGENT"]
    assert agent == ["Anna"]


@pytest.mark.parametrize(
    "text,task",
    [
        ("I need to renew my passport.", "todo"),
        ("I plan to visit Rome next year.", "plan"),
        ("I'll call the bank tomorrow.", "plan"),
        ("I'll be fine.", None),  # "will" without a future date is no plan
        ("I don't need to go.", None),  # negated
        ("Anna needs to call her mom.", None),  # someone else's
        ("Don't forget to water the plants!", "reminder"),
        ("明天要去医院复查", "plan"),
        ("我必须交房租", "todo"),
        ("别忘了带钥匙", "reminder"),
        ("我昨天去了医院", None),
    ],
)
def test_task_rule(text, task) -> None:
    nodes, _ = _graph([("Caroline" if text.isascii() else "小红", text)])
    tasks = [n["subtype"] for n in nodes if n["type"] == "Task"]
    assert tasks == ([task] if task else [])


def test_importance_ranks_preferences_and_life_events_over_small_talk() -> None:
    def imp(kind, text, lang="en"):
        return R.importance(kind, text, lang, text.lower().strip(".!").split())

    small = imp("Episode", "Thanks!")
    plain = imp("Episode", "We watched a movie at home tonight.")
    life = imp("Episode", "We got married in June and moved to a new house.")
    pref = imp("Preference", "I prefer short answers.")
    assert small < plain < life and plain < pref
    assert imp("Episode", "哈哈", "zh") < imp("Episode", "我们下个月结婚", "zh")
    assert all(0.0 <= v <= 1.0 for v in (small, plain, life, pref))


def test_long_text_splits_into_topic_block_episodes() -> None:
    garden = (
        "I started a vegetable garden this spring. The tomatoes are growing fast in the garden. I water the "
        "garden every morning. The garden soil needed more compost. My garden beds are made of cedar. Slugs "
        "ate some lettuce in the garden. "
    )
    work = (
        "At work my manager offered me a promotion. The new job means leading a team of five engineers. "
        "I negotiated my salary with the manager. The promotion starts in July. My team ships software "
        "releases every week. I am nervous about managing the team. The manager wants weekly reports from "
        "the team. My salary goes up with the promotion."
    )
    text = garden + work
    nodes, edges = _graph([("Caroline", text)])
    blocks = sorted((n for n in nodes if n["type"] == "Episode"), key=lambda n: n["id"])
    assert len(blocks) >= 2 and all(n["subtype"] == "block" for n in blocks)
    assert any("garden" in n["keywords"] and "promotion" not in n["keywords"] for n in blocks)
    assert any("promotion" in n["keywords"] and "garden" not in n["keywords"] for n in blocks)
    ids = {n["id"] for n in blocks}
    nxt = [e for e in edges if e["type"] == "TEMPORAL_NEXT"]
    assert len(nxt) == len(blocks) - 1 and all(e["src"] in ids and e["dst"] in ids for e in nxt)
    # raw_refs of the blocks tile the message's bytes
    spans = sorted((r["offset"], r["length"]) for n in blocks for r in n["raw_refs"])
    assert spans[0][0] == 0 and sum(n for _, n in spans) == len(text.encode())


def test_short_turn_is_one_episode() -> None:
    assert len([n for n in _graph([("A", "Just one line.")])[0] if n["type"] == "Episode"]) == 1


@pytest.mark.parametrize(
    "pred,canon",
    [
        ("hate_jazz", ("like_jazz", True)),
        ("love", ("like", False)),
        ("like_drink_tea", ("like_drink_tea", False)),
        ("go_hike", ("go_hike", False)),
        ("disagree", ("agree", True)),
    ],
)
def test_canonical_predicate_folds_antonyms(pred, canon) -> None:
    assert canonical_predicate(pred) == canon


def test_light_verbs_without_object_are_not_linked() -> None:
    _, edges = _graph([("Caroline", "I was tired."), ("Caroline", "I went there."), ("Caroline", "I went there too.")])
    assert not [e for e in edges if e["type"] in ("SUPPORTS", "CONTRADICTS")]


def test_facts_at_different_places_are_not_linked() -> None:
    """support.v2: the LOCATION is part of the claim; living in Berlin does not support living in Paris."""
    nodes, edges = _graph(
        [
            ("Caroline", "I live in Paris."),
            ("Caroline", "I live in Berlin now."),
            ("Caroline", "I don't live in Paris anymore."),
            ("Caroline", "I went to the gym last Monday."),
            ("Caroline", "I went to the gym yesterday."),
        ]
    )
    title = {n["id"]: n["title"] for n in nodes}
    place = {e["src"]: title[e["dst"]] for e in edges if e["type"] == "LOCATION"}
    links = sorted(
        (e["type"], place[e["src"]], place[e["dst"]])
        for e in edges
        if e["type"] in ("SUPPORTS", "CONTRADICTS", "SAME_AS")
    )
    # "go" is a light verb, linked because the place pins it down
    assert links == [("CONTRADICTS", "Paris", "Paris"), ("SUPPORTS", "gym", "gym")]


@pytest.mark.parametrize(
    "text,location",
    [
        ("I'm working on a new project.", None),
        ("I'm in a good mood today.", None),
        ("Life is hard in this world.", None),
        ("That is on my list.", None),
        ("I posted the photos on Instagram.", None),
        ("I was at the gym this morning.", "gym"),
        ("I relaxed on the beach.", "beach"),
        ("I volunteer at the homeless shelter.", "homeless shelter"),
        ("She works at Google.", "Google"),
        ("I went to an LGBTQ support group.", "LGBTQ support group"),  # motion verb: the destination
        ("I met him at the concert.", "concert"),
        ("I grew up in Lisbon.", "Lisbon"),
    ],
)
def test_location_needs_place_evidence(text, location) -> None:
    """location.v2: at/in/on/to + a place (entity label, proper noun, place noun, motion destination)."""
    nodes, edges = _graph([("Caroline", text)])
    title = {n["id"]: n["title"] for n in nodes}
    assert [title[e["dst"]] for e in edges if e["type"] == "LOCATION"] == ([location] if location else [])


def test_outdated_stages_tell_which_stage_to_rerun(tmp_path) -> None:
    lake = Lake(tmp_path)
    files = {k: InboxFile(k, tmp_path / k, f"sha{k}", 1) for k in ("a", "b", "c", "d")}
    base = {"graph_sha256": None, "nlp_version": "nlp1", "graph_version": "g1"}
    write_manifest(lake.part_dir("a"), {**base, "graph_sha256": "shaa"})
    write_manifest(lake.part_dir("b"), {**base, "graph_sha256": "shab", "graph_version": "g0"})
    write_manifest(lake.part_dir("c"), {**base, "graph_sha256": "shac", "nlp_version": "nlp0"})
    write_manifest(lake.part_dir("d"), {**base, "graph_sha256": "old-bytes"})  # stale: re-runs whole elsewhere
    assert outdated_stages(lake, files, "nlp1", "g1") == {"b": "graph", "c": "annotations"}


@PROPS
@given(
    st.lists(
        st.sampled_from(
            [
                "my",
                "name",
                "is",
                "I'm",
                "im",
                "called",
                "call",
                "me",
                "birthday",
                "我叫",
                "名字",
                "生日",
                "Name",
                "CALL",
                "x",
            ]
        )
        | st.text(max_size=5),
        max_size=6,
    ).map(" ".join)
)
def test_name_cue_words_cover_every_name_cue(text: str) -> None:
    """importance() runs _NAME_CUES only where one of _NAME_CUE_WORDS occurs: every match holds one of them."""
    low = text.lower()
    if episode._NAME_CUES.search(low):
        assert any(w in low for w in episode._NAME_CUE_WORDS)


def test_english_stop_words_are_spacys_and_load_without_importing_spacy() -> None:
    """A graph re-derived from stored annotations (or a forget request's rebuild) reads the stop words without
    spaCy's package import (~2.5 s): the same set as spaCy's own module, and spaCy still not imported after."""
    code = (
        "import sys\nfrom r2g.rules.common import _en_stop_words\n"
        "words = _en_stop_words()\nprint(len(words), 'spacy' in sys.modules, ' '.join(sorted(words)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    n, imported, words = out.rstrip("\n").split(" ", 2)
    from spacy.lang.en.stop_words import STOP_WORDS

    assert imported == "False"
    assert set(words.split(" ")) == set(STOP_WORDS) and int(n) == len(STOP_WORDS) > 300
