"""r2g.nlp: annotation shape, the jieba-backed Chinese pipeline, and the sqlite cache."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dev_sets import EVAL, dev_texts
from fuzzing import fuzz_settings
from r2g import nlp, nlp_cache, nlp_zh
from r2g.ids import text_sha
from r2g.nlp import Annotation, annotate, english
from r2g.nlp_cache import NlpCache
from r2g.nlp_zh import chinese, zh_segment


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
    (a,), _ = annotate(
        [
            "I went hiking with Mel last Saturday.",
        ],
        ["en"],
    )
    b = Annotation.from_json(a.to_json())
    assert b == a
    assert all(isinstance(e, tuple) for e in b.ents) and all(isinstance(s, tuple) for s in b.sents)
    (z,), _ = annotate(["小明在公园里踢足球"], ["zh"])
    assert Annotation.from_json(z.to_json()) == z


def test_token_offsets_point_into_text() -> None:
    text = "我用 Python 写代码。\n今天很好!"
    (a,), _ = annotate([text], ["zh"])
    for tok, i in zip(a.tokens, a.idx):
        assert text[i : i + len(tok)] == tok


def test_jieba_verb_object_split() -> None:
    assert zh_segment("小明在公园里踢足球") == [
        ("小明", "nr"),
        ("在", "p"),
        ("公园", "n"),
        ("里", "f"),
        ("踢", "v"),
        ("足球", "n"),
    ]
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
    monkeypatch.setattr(nlp_cache, "PIPELINE_VERSION", nlp.PIPELINE_VERSION + "|bumped")
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
    import jieba
    import spacy

    v = nlp.PIPELINE_VERSION
    assert v.startswith("nlp.v1|spacy=") and "|en=" in v and "|jieba=0.42.1" in v
    # read from the installed distributions (no import); the same versions the packages themselves report
    en = spacy.util.get_package_version(nlp.EN_MODEL)
    assert v.split("|")[1:4] == [f"spacy={spacy.about.__version__}", f"en={en}", f"jieba={jieba.__version__}"]


def test_old_without_rowid_cache_is_upgraded_keeping_current_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    (ann,), _ = annotate(["I like tea."], ["en"])
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE annotations (version TEXT NOT NULL, sha TEXT NOT NULL, body TEXT NOT NULL,"
            " PRIMARY KEY (version, sha)) WITHOUT ROWID"
        )
        con.executemany(
            "INSERT INTO annotations VALUES (?, ?, ?)",
            [(nlp.PIPELINE_VERSION, "cur", ann.to_json()), ("nlp.v0|old", "old", ann.to_json())],
        )
    cache = NlpCache(path)
    assert cache.get_many(["cur", "old"]) == {"cur": ann}
    with sqlite3.connect(path) as con:
        (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'annotations'").fetchone()
        assert "WITHOUT ROWID" not in sql.upper()
        assert con.execute("SELECT count(*) FROM annotations").fetchone() == (1,)
    NlpCache(path).put_many({"new": ann})  # opening an upgraded cache again changes nothing
    assert set(NlpCache(path).get_many(["cur", "new"])) == {"cur", "new"}


def test_worker_processes_give_the_same_annotations(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [
        "I went hiking with Mel last Saturday.",
        "小明在公园里踢足球",
        "Caroline went to a support group.",
        "我今天不开心，因为昨晚没睡好",
        "We need to book the flights tomorrow.",
        "以后优先用中文回答",
    ]
    langs = ["en", "zh"] * 3
    monkeypatch.setattr(nlp, "PARALLEL_MIN_TEXTS", 2)
    try:
        one, _ = annotate(texts, langs, workers=1, batch_size=2)
        two, stats = annotate(texts, langs, workers=2, batch_size=2)  # 2-text slices over 2 processes
    finally:
        nlp.shutdown_workers()
    assert stats.misses == 6 and [a.to_json() for a in two] == [a.to_json() for a in one]


def test_memoised_jieba_hmm_decodes_like_jieba() -> None:
    import jieba.posseg as pseg

    text = "王芳和刘洋上周六去西湖拍照了"
    first = zh_segment(text)
    nlp_zh.clear_hmm_memo()
    assert zh_segment(text) == first
    hits, misses = nlp_zh.hmm_memo_stats()
    assert misses > 0 and zh_segment(text) == first and nlp_zh.hmm_memo_stats()[0] > hits
    original = sys.modules["jieba.posseg.viterbi"].viterbi  # the module keeps jieba's own function
    tables = (pseg.char_state_tab_P, pseg.start_P, pseg.trans_P, pseg.emit_P)
    for run in ("王芳", "刘洋上", "西湖拍照"):
        assert pseg.viterbi(run, *tables) == original(run, *tables)


def test_entities_read_from_iob_match_doc_ents(en) -> None:
    for doc in (
        en("Caroline met Mel in New York last Saturday, then flew to Paris with Jon."),
        chinese()("小红明天要去北京"),
    ):
        assert nlp._doc_ents(doc) == [(e.start, e.end, e.label_) for e in doc.ents] != []


# -- the lake's NLP cache: an index into the partitions' annotation files -------------------------------------


def _part_cache(tmp_path: Path):
    from r2g.pipeline import PartAnnotations

    return PartAnnotations(tmp_path / "cache" / "nlp.sqlite", tmp_path / "parts")


def _write_part(tmp_path: Path, name: str, anns: dict) -> None:
    from r2g.pipeline import annotations_table
    from r2g.schema import ANNOTATIONS
    from raw_store.lake import write_table

    write_table(annotations_table(anns), tmp_path / "parts" / name / "annotations.parquet", ANNOTATIONS)


def test_part_cache_finds_annotations_in_the_partition_files(tmp_path: Path) -> None:
    texts, langs = ["I went hiking with Mel last Saturday.", "小明在公园里踢足球"], ["en", "zh"]
    cache = _part_cache(tmp_path)
    first, s1 = annotate(texts, langs, cache)
    assert (s1.hits, s1.misses) == (0, 2)
    _write_part(tmp_path, "p_a", {text_sha(t): a for t, a in zip(texts, first)})
    cache.record("p_a", [text_sha(t) for t in texts])
    second, s2 = annotate(texts, langs, _part_cache(tmp_path))
    assert (s2.hits, s2.misses) == (2, 0) and second == first
    with sqlite3.connect(tmp_path / "cache" / "nlp.sqlite") as con:  # hashes and partition names, never text
        assert con.execute("SELECT count(*), min(part) FROM seen").fetchone() == (2, "p_a")


def test_part_cache_misses_what_the_partition_no_longer_holds(tmp_path: Path) -> None:
    cache = _part_cache(tmp_path)
    [ann], _ = annotate(["I like tea."], ["en"], cache)
    cache.record("p_a", [text_sha("I like tea.")])
    assert cache.get_many([text_sha("I like tea.")]) == {}  # no file yet: a miss, not an error
    _write_part(tmp_path, "p_a", {text_sha("other"): ann})
    assert cache.get_many([text_sha("I like tea.")]) == {}  # the file holds other texts
    _write_part(tmp_path, "p_a", {text_sha("I like tea."): ann})
    assert cache.get_many([text_sha("I like tea.")]) == {text_sha("I like tea."): ann}
    cache.drop([text_sha("I like tea.")])
    assert cache.get_many([text_sha("I like tea.")]) == {}


def test_part_cache_is_emptied_by_a_new_pipeline_version_and_drops_the_old_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2g import pipeline

    old = NlpCache(tmp_path / "cache" / "nlp.sqlite")  # the cache before 2026-11-25: whole annotations
    annotate(["I like tea."], ["en"], old)
    cache = _part_cache(tmp_path)
    with sqlite3.connect(tmp_path / "cache" / "nlp.sqlite") as con:
        assert not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'annotations'").fetchone()
    [ann], _ = annotate(["I like tea."], ["en"])
    _write_part(tmp_path, "p_a", {text_sha("I like tea."): ann})
    cache.record("p_a", [text_sha("I like tea.")])
    monkeypatch.setattr(pipeline, "PIPELINE_VERSION", nlp.PIPELINE_VERSION + "|bumped")
    assert _part_cache(tmp_path).get_many([text_sha("I like tea.")]) == {}


def _zh_texts() -> list[str]:
    return [
        "小明在公园里踢足球",
        "我上周和小李去爬山了",
        "AT&T 和 c# 还有 Zoë 的咖啡馆 3.5%",
        "",
        "。。。",
    ] + dev_texts("zh_dev.json")


_ZH_CHARS = list("小明在公园里踢足球我上周和李去爬山了他不喜欢喝咖啡很开心的中华人民共和国今天 ，。！?a1%#&") + [
    "\u3000",
    "\n",
]


def _both_cuts(texts: list[str]) -> tuple[list, list]:
    """jieba.posseg's (word, flag) pairs of `texts` over the lazy dictionary, and over jieba's whole one."""
    import jieba

    from r2g.tokens import lazy_jieba

    pseg = nlp_zh._jieba_pos()
    jieba.initialize()
    lazy = nlp_zh._lazy_pos_tokenizer(pseg, lazy_jieba())
    return [[tuple(p) for p in lazy.cut(t)] for t in texts], [[tuple(p) for p in pseg.dt.cut(t)] for t in texts]


def test_posseg_over_the_lazy_dictionary_gives_jiebas_words_and_flags() -> None:
    texts = _zh_texts()
    assert len(texts) > 400 or not EVAL.exists()
    lazy, whole = _both_cuts(texts)
    assert lazy == whole


@given(st.lists(st.text(st.sampled_from(_ZH_CHARS), max_size=30), min_size=1, max_size=5))
@fuzz_settings(100)
def test_posseg_over_the_lazy_dictionary_gives_jiebas_words_and_flags_on_any_text(texts: list[str]) -> None:
    lazy, whole = _both_cuts(texts)
    assert lazy == whole


def test_a_process_annotating_a_few_chinese_texts_never_loads_jiebas_dictionary() -> None:
    """A small file's few texts go through the lazy dictionary; past LAZY_TEXTS the process loads jieba's own."""
    import json
    import subprocess

    code = (
        "import json, sys\n"
        "from r2g import tokens\n"
        "from r2g.nlp import annotate\n"
        "texts = ['小明在公园里踢足球', '我上周和小李去爬山了', '他不喜欢喝咖啡']\n"
        "first = [a.to_json() for a in annotate(texts, ['zh'] * 3)[0]]\n"
        "loaded = [sys.modules['jieba'].dt.initialized]\n"
        "tokens.LAZY_TEXTS = 4\n"
        "again = [a.to_json() for a in annotate([t + '。' for t in texts], ['zh'] * 3)[0]]\n"
        "loaded.append(sys.modules['jieba'].dt.initialized)\n"
        "print(json.dumps([loaded, first, again]))\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, first, again = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [False, True]
    __import__("jieba").initialize()  # this process: jieba's whole dictionary
    whole = [
        a.to_json() for a in annotate(["小明在公园里踢足球", "我上周和小李去爬山了", "他不喜欢喝咖啡"], ["zh"] * 3)[0]
    ]
    assert first == json.loads(json.dumps(whole))


def _open_cache(path: str, barrier, errors) -> None:
    from r2g.pipeline import PartAnnotations

    barrier.wait()
    try:
        PartAnnotations(Path(path), None)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        errors.put(repr(e))


def test_processes_opening_a_new_cache_at_once_all_open_it(tmp_path) -> None:
    """A fresh lake's first file runs start on a cluster's workers at once, each opening the new NLP cache: switching
    it to WAL takes no busy handler, and 4 of 160 such opens failed with "database is locked" before the switch was
    retried (4 processes at a barrier, 40 new caches)."""
    import multiprocessing as mp

    # forkserver, not fork: a fork of this pytest process (threads of Arrow, polars, sqlite from earlier tests) may
    # inherit a lock another thread held and never start; the server is a fresh process with this module loaded
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    errors = ctx.Queue()
    for i in range(16):  # (the race: ~2 % of opens before; 16 caches keep the test a few seconds)
        path = tmp_path / f"c{i}" / "nlp.sqlite"
        barrier = ctx.Barrier(4)
        procs = [ctx.Process(target=_open_cache, args=(str(path), barrier, errors), daemon=True) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0] * 4  # None: still running after 2 minutes
        con = sqlite3.connect(path)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        con.close()
    got = []
    while not errors.empty():
        got.append(errors.get())
    assert got == []
