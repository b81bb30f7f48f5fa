"""r2g.nlp: annotation shape, the jieba-backed Chinese pipeline, and the sqlite cache."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from r2g import nlp
from r2g.nlp import Annotation, NlpCache, annotate, chinese, english, text_sha, zh_segment


@pytest.fixture(scope="module")
def en():
    return english()  # loaded once; lru_cache keeps it for the whole session


def test_english_annotation_shape(en) -> None:
    (a,), _ = annotate(["Caroline went to an LGBTQ support group yesterday."], ["en"])
    assert a.lang == "en"
    n = len(a.tokens)
    assert all(len(x) == n for x in (a.idx, a.lemma, a.pos, a.tag, a.dep, a.head))
    assert a.lemma[a.tokens.index("went")] == "go"
    assert (7, 8, "DATE") in a.ents
    assert a.sents == [(0, n)]


def test_annotation_json_round_trip() -> None:
    (a,), _ = annotate(["I went hiking with Mel last Saturday.", ], ["en"])
    b = Annotation.from_json(a.to_json())
    assert b == a
    assert all(isinstance(e, tuple) for e in b.ents) and all(isinstance(s, tuple) for s in b.sents)
    (z,), _ = annotate(["小明在公园里踢足球"], ["zh"])
    assert Annotation.from_json(z.to_json()) == z


def test_token_offsets_point_into_text() -> None:
    text = "我用 Python 写代码。\n今天很好!"
    (a,), _ = annotate([text], ["zh"])
    for tok, i in zip(a.tokens, a.idx):
        assert text[i:i + len(tok)] == tok


def test_jieba_verb_object_split() -> None:
    assert zh_segment("小明在公园里踢足球") == [("小明", "nr"), ("在", "p"), ("公园", "n"), ("里", "f"),
                                             ("踢", "v"), ("足球", "n")]
    words = [w for w, _ in zh_segment("他不喜欢喝咖啡")]
    assert words[-2:] == ["喝", "咖啡"]
    # 和 glued to a name is split off; a two-char compound like 开心 is left alone
    assert ("小李", "nr") in zh_segment("我上周和小李去爬山了")
    assert [w for w, _ in zh_segment("我很开心")][-1] == "开心"


def test_chinese_pipeline_tags_entities_and_sentences() -> None:
    doc = chinese()("小红明天要去北京。我今天不开心，因为昨晚没睡好")
    assert [t.tag_ for t in doc][:2] == ["nr", "t"]
    assert doc[0].pos_ == "PROPN"
    ents = {(e.text, e.label_) for e in doc.ents}
    assert {("小红", "PERSON"), ("明天", "TIME"), ("北京", "LOC"), ("今天", "TIME"), ("昨晚", "TIME")} <= ents
    sents = [s.text for s in doc.sents]
    assert sents == ["小红明天要去北京。", "我今天不开心，因为昨晚没睡好"]  # ，does not end a sentence


def test_regex_time_span_becomes_one_entity() -> None:
    doc = chinese()("我们5月7号见面")
    assert ("5月7号", "TIME") in {(e.text, e.label_) for e in doc.ents}


def test_annotate_dedups_identical_texts() -> None:
    anns, stats = annotate(["hello there", "hello there", "你好"], ["en", "en", "zh"])
    assert stats.misses == 2 and stats.hits == 0
    assert anns[0] is anns[1]


def test_cache_hit_on_second_run(tmp_path: Path) -> None:
    cache = NlpCache(tmp_path / "nlp.sqlite")
    texts = ["I went hiking with Mel last Saturday.", "小明在公园里踢足球", "I went hiking with Mel last Saturday."]
    langs = ["en", "zh", "en"]
    first, s1 = annotate(texts, langs, cache)
    assert (s1.hits, s1.misses) == (0, 2)
    second, s2 = annotate(texts, langs, NlpCache(tmp_path / "nlp.sqlite"))
    assert (s2.hits, s2.misses) == (2, 0)
    assert second == first


def test_cache_key_includes_pipeline_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nlp.sqlite"
    cache = NlpCache(path)
    annotate(["I like tea."], ["en"], cache)
    with sqlite3.connect(path) as con:
        rows = con.execute("SELECT version, sha FROM annotations").fetchall()
    assert rows == [(nlp.PIPELINE_VERSION, text_sha("I like tea."))]
    monkeypatch.setattr(nlp, "PIPELINE_VERSION", nlp.PIPELINE_VERSION + "|bumped")
    _, stats = annotate(["I like tea."], ["en"], cache)
    assert stats.misses == 1  # a new pipeline version never reuses old annotations


def test_cache_is_shared_between_connections(tmp_path: Path) -> None:
    a, b = NlpCache(tmp_path / "c.sqlite"), NlpCache(tmp_path / "c.sqlite")
    (ann,), _ = annotate(["你好"], ["zh"])
    a.put_many({"k": ann})
    assert b.get_many(["k", "missing"]) == {"k": ann}
    with sqlite3.connect(tmp_path / "c.sqlite") as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_und_uses_english_pipeline() -> None:
    (a,), _ = annotate(["12:30 !!"], ["und"])
    assert a.lang == "en"


def test_pipeline_version_names_components() -> None:
    v = nlp.PIPELINE_VERSION
    assert v.startswith("nlp.v1|spacy=") and "|en=" in v and "|jieba=0.42.1" in v
