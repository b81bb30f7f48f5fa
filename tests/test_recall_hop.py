"""recall.hop: the second evidence line of a multi-hop question, reached through the session or the first line's words."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from raw_store.lake import Lake
from recall import RecallConfig, ranked_turns, recall
from recall.hop import feedback_terms
from recall_fixtures import LakeBuilder

T0 = datetime(2023, 6, 1, 9, 0)
OFF = replace(RecallConfig(), prf_weight=0.0, session_weight=0.0, speaker_boost=0.0)


def _lake(root) -> Lake:
    """John asks about his ankle; the reply (next turn) names the book he read while it healed, with no word of the
    question. Elsewhere, a line about Dune shares only "Dune" with the first line, and filler turns share "ankle"."""
    b = LakeBuilder(root)
    turns = [
        ("D1:1", "John", "I hurt my ankle last season and needed physical therapy."),
        ("D1:2", "John", "Rereading The Alchemist kept me going, it was so inspiring."),
        ("D2:1", "John", "My knee brace arrived, the knee feels fine."),
        ("D2:2", "Tim", "John, I'm reading Dune, a novel by Frank Herbert."),
        ("D2:3", "John", "Dune is the best, Herbert built an amazing world."),
        ("D2:4", "Tim", "An injury report came in at work today."),
    ]
    for i in range(8):  # more turns, so BM25's idf is not degenerate
        turns.append((f"D3:{i + 1}", "Tim", f"Filler line number {i} about groceries and errands."))
    refs = b.conversation("u", "c1", turns, start=T0)
    prev = None
    for n, (msg_id, speaker, text) in enumerate(turns):
        t = T0 + timedelta(minutes=n)
        nid = f"ep_{msg_id}"
        b.node(
            "u",
            nid,
            "Episode",
            f"{speaker}: {text[:30]}",
            text,
            (),
            (refs[msg_id],),
            t,
            conv_id="c1",
            msg_id=msg_id,
            first_seen=t,
            last_seen=t,
            speaker=speaker,
        )
        if prev is not None and prev.split(":")[0] == nid.split(":")[0]:  # the next turn of the same session
            b.edge("u", prev, nid, "TEMPORAL_NEXT", 0.3)
        prev = nid
    return b.write()


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    return _lake(tmp_path_factory.mktemp("hop"))


def _turns(lake: Lake, q: str, cfg: RecallConfig, k: int = 3, depth: int = 1) -> list[str]:
    return [m for _, m in ranked_turns(recall(q, "u", k=k, lake=lake, config=cfg, expand_depth=depth))]


def test_feedback_terms_skip_query_words_labels_and_light_verbs():
    words = feedback_terms(
        ["John: rereading The Alchemist", "Alchemist (OBJECT)", "cities be great"], ["cities"], 5, frozenset({"be"})
    )
    assert words[0] == "alchemist"  # in two of the texts
    assert "object" not in words and "be" not in words and "cities" not in words
    assert "city" not in feedback_terms(["a new city"], ["cities"], 5, frozenset())  # the query's word again


def test_session_neighbour_brings_the_reply(lake):
    q = "How did John cope with his ankle injury?"
    # without expansion (PPR over TEMPORAL_NEXT brings it too, at a graph score), the seeds alone
    off = _turns(lake, q, OFF, k=5, depth=0)
    assert off[:2] == ["D1:1", "D2:4"]  # the reply D1:2 shares only the speaker's name with the question
    got = _turns(lake, q, replace(OFF, session_weight=0.9, session_top=1), k=5, depth=0)
    assert got[:2] == ["D1:1", "D1:2"]


def test_prf_brings_the_line_that_shares_only_the_first_lines_words(lake):
    q = "What novel is Tim reading?"
    assert "D2:3" not in _turns(lake, q, OFF, k=1)
    got = _turns(lake, q, replace(OFF, prf_weight=1.0, prf_docs=1), k=3)
    assert got[0] == "D2:2" and "D2:3" in got


def test_names_speaker_by_name_first_name_or_chinese_given_name():
    from recall.scoring import names_speaker

    assert names_speaker("what books has john read?", "john")
    assert names_speaker("where did caroline go?", "caroline smith")
    assert not names_speaker("what did johnny say?", "john")
    assert names_speaker("子昂拿到的实习是哪里的？", "唐子昂")
    assert not names_speaker("姐夫认为蓝屏多半是什么引起的？", "唐子昂")


def test_the_named_speakers_line_ranks_first_by_default(lake):
    # "Dune" is in Tim's line and in John's; John's is the answer to a question about John
    q = "What does John think of Dune?"
    assert _turns(lake, q, OFF, k=2, depth=0)[0] == "D2:2"
    assert _turns(lake, q, RecallConfig(), k=2, depth=0)[0] == "D2:3"


def test_defaults_keep_what_cross_validation_chose():
    cfg = RecallConfig()
    assert (cfg.session_weight, cfg.session_top, cfg.speaker_boost, cfg.prf_weight) == (0.6, 5, 0.5, 0.0)
