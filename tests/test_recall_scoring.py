"""recall.scoring and recall.graph_csr.personalized_pagerank: the batch definitions equal the row-by-row ones."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import igraph
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from r2g.time_values import TimeValue
from recall.candidates import NO_CONTENT_WORDS, has_content, matched_line, with_content
from recall.config import RecallConfig
from recall.diversify import mmr_tokens
from recall.engine import Filters, RecallResult
from recall.graph_csr import personalized_pagerank
from recall.query import EN_STOPWORDS, QueryAnalysis
from recall.scoring import NodeBatch, node_time, node_weight, passes, query_boost, recency, recency_of, scores, weight

T0 = datetime(2023, 5, 1, 12, 0)


def _rows(n: int, seed: int) -> dict[str, dict]:
    r = random.Random(seed)
    maybe = lambda v: v if r.random() < 0.7 else None  # noqa: E731
    rows = {}
    for i in range(n):

        def t():
            return maybe(
                T0
                + timedelta(days=r.randint(-400, 400), seconds=r.randint(0, 86399), microseconds=r.randint(0, 999999))
            )

        rows[f"n{i:03d}"] = {
            "id": f"n{i:03d}",
            "type": r.choice(["Episode", "Fact", "Entity", "Concept", "Preference", "Task"]),
            "subtype": r.choice([None, "turn", "rollup", "PERSON"]),
            "title": maybe(f"title {i}"),
            "text": maybe("x"),
            "conv_id": maybe("c1"),
            "msg_id": maybe(f"m{i}"),
            "time_start": t(),
            "time_end": t(),
            "first_seen": t(),
            "last_seen": t(),
            "importance": maybe(r.choice([0.0, 0.3, 0.5, 1.2, -0.1])),
            "frequency": maybe(r.choice([0, 1, 2, 7, 30])),
            "sentiment": maybe(r.choice([-0.8, 0.0, 0.4, 2.0])),
            "raw_refs": [{"raw_id": "raw_a", "offset": i, "length": 3}] if r.random() < 0.8 else None,
        }
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_batch_scores_equal_the_row_by_row_definitions_bit_for_bit(seed: int) -> None:
    r = random.Random(seed)
    rows = _rows(300, seed)
    ids = list(rows)
    b = NodeBatch.from_rows(rows, ids)
    cfg = RecallConfig(weight_emotion=r.choice([0.0, 0.2]))
    newest = r.choice([None, T0 + timedelta(days=30)])
    filters = Filters.make(
        types=r.choice([None, ["Episode", "Fact"]]),
        time_range=r.choice(
            [None, (T0 - timedelta(days=50), None), (T0 - timedelta(days=90), T0 + timedelta(days=10))]
        ),
        as_of=r.choice([None, T0 + timedelta(days=100)]),
    )
    times = tuple(
        TimeValue(start=T0 - timedelta(days=d), end=T0 - timedelta(days=d - 7), granularity="week", text="last week")
        for d in r.sample(range(0, 300), 2)
    )
    analysis = QueryAnalysis(("x",), False, r.choice([None, "preference", "when"]), r.choice([(), times]), ())
    seeds = {i: r.random() for i in r.sample(ids, 40)}
    graph = {i: r.random() for i in r.sample(ids, 100)}
    vec = r.choice([None, {i: r.random() for i in r.sample(ids, 30)}])

    rec = recency(b, newest, cfg)
    w = weight(b, rec, cfg)
    bm25 = np.array([seeds.get(i, 0.0) for i in ids])
    g = np.array([graph.get(i, 0.0) for i in ids])
    sim = np.array([vec.get(i, 0.0) for i in ids]) if vec else np.zeros(len(ids))
    got = scores(b, bm25, sim, g, w, analysis, cfg).tolist()
    keep = passes(b, filters).tolist()
    for k, nid in enumerate(ids):
        row = rows[nid]
        want_rec = recency_of(node_time(row), newest, cfg.tau_days.get(row["type"], cfg.default_tau_days))
        want_w = node_weight(row["importance"], row["frequency"], want_rec, row["sentiment"], cfg)
        want = (
            (
                cfg.lambda_bm25 * seeds.get(nid, 0.0)
                + cfg.lambda_vector * (vec or {}).get(nid, 0.0)
                + cfg.lambda_graph * graph.get(nid, 0.0)
                + cfg.lambda_weight * want_w
            )
            * cfg.type_prior.get(f"{row['type']}/{row['subtype']}", cfg.type_prior.get(row["type"], 1.0))
            * query_boost(row, analysis, cfg)
        )
        assert (rec[k], w[k], got[k], keep[k]) == (want_rec, want_w, want, filters.node(row)), nid


def test_personalized_pagerank_equals_igraph_prpack() -> None:
    r = random.Random(3)
    for _ in range(150):
        n = r.randint(1, 60)
        edges = [(s, t) for s, t in ((r.randrange(n), r.randrange(n)) for _ in range(r.randint(0, 3 * n))) if s != t]
        w = [r.choice([0.3, 0.5, 0.8, 0.95, 1.0]) * r.choice([0.6, 0.8, 1.0]) for _ in edges]
        reset = [r.random() if r.random() < 0.3 else 0.0 for _ in range(n)]  # isolated seeds: dangling vertices
        reset[0] += 0.1
        want = igraph.Graph(n=n, edges=edges).personalized_pagerank(
            directed=False, damping=0.85, reset=reset, weights=w if edges else None
        )
        got = personalized_pagerank(n, [s for s, _ in edges], [t for _, t in edges], w, reset, damping=0.85)
        assert np.abs(got - np.array(want)).max() < 1e-12


@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["Fact", "Episode", "Entity", "RawChunk"]), st.booleans()),
        max_size=40,
    ),
    st.integers(1, 12),
)
def test_content_is_tested_only_where_it_is_read(rows: list[tuple[bool, str, bool]], pool: int) -> None:
    """candidates.with_content keeps what the full filter keeps wherever recall reads it: the first `pool` (MMR) and
    every turn-level BM25 match (citations), in order; it never calls has_content past that."""
    ranked = [
        (
            RecallResult(
                node_id=f"n{i}",
                type=kind,
                title="plans for the pottery class" if good else "alright",
                text="",
                score=1.0 - i / 100,
                breakdown={"bm25": 0.5 if bm25 else 0.0},
                citations=[],
                evidence=[],
            ),
            [],
        )
        for i, (good, kind, bm25) in enumerate(rows)
    ]
    cards = {"n3"}
    full = [pair for pair in ranked if has_content(pair[0])]
    kept, dropped = with_content(ranked, pool, cards)
    assert kept[:pool] == full[:pool]
    matched = [r.node_id for r, _ in full if matched_line(r, cards)]
    assert [r.node_id for r, _ in kept if matched_line(r, cards)] == matched
    assert set(dropped) <= {r.node_id for r, _ in ranked if not has_content(r)}
    assert [pair for pair in kept if pair not in full] == []


def _content_by_segmenting(title: str) -> bool:
    """has_content's definition: a search token of the title that is neither a stop word nor a no-content word."""
    return any(w not in NO_CONTENT_WORDS and w not in EN_STOPWORDS for w in mmr_tokens(title.lower()))


def _titled(title: str) -> RecallResult:
    return RecallResult("n", "Fact", title, "", 1.0, {"bm25": 0.0}, [], [])


_TITLE_PARTS = [
    *"是有帮好的了我你和嗯哦在小明踢足球天气真冷朵龙",
    "哈哈",
    "可以",
    "助手",
    "好的",
    "没有",
    *"ab19+#&.%-_，。！ ",
]


@settings(deadline=None)  # the first example loads the segmenter's word table
@given(st.lists(st.sampled_from(_TITLE_PARTS), max_size=12))
def test_a_chinese_title_is_judged_as_segmenting_it_would(parts: list[str]) -> None:
    """has_content's shortcut for Chinese titles (no jieba where the answer is certain) agrees with segmenting."""
    title = "".join(parts)
    assert has_content(_titled(title)) == _content_by_segmenting(title), title


def test_chinese_titles_of_the_dev_set_are_judged_as_segmenting_would() -> None:
    path = Path(__file__).resolve().parents[2] / "shared" / "eval" / "zh_dev.json"
    if not path.exists():
        pytest.skip(f"{path} not here")
    texts = [
        str(t["text"])
        for sample in json.loads(path.read_text("utf-8"))
        for key, turns in sample["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for t in turns
    ]
    titles = [*texts, *(w for t in texts for w in t.split("，")[:2])]
    assert len(titles) > 1000
    assert [has_content(_titled(t)) for t in titles] == [_content_by_segmenting(t) for t in titles]
    assert not has_content(_titled("好的，嗯嗯")) and has_content(_titled("小明 踢 足球"))
