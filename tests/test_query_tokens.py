"""recall.query_tokens: r2g's search tokens token for token, without jieba's dictionary in memory."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dev_sets import dev_texts
from fuzzing import fuzz_settings
from r2g.lake_graph import make_docs
from r2g.tokens import LazyFreq, han_tokens, has_han, lazy_jieba, node_doc
from r2g.tokens import search_tokens as r2g_search_tokens
from recall.diversify import mmr_tokens
from recall.query_tokens import search_tokens
from recall_fixtures import puppy_lake

ROOT = Path(__file__).resolve().parents[1]


def _texts() -> list[str]:
    out = [
        "小明在公园里踢足球",
        "以后优先用中文回答",
        "我今天不开心，因为昨晚没睡好",
        "AT&T 和 c# 还有 Zoë 的咖啡馆",
        "子昂打排位时电脑蓝屏 VIDEO_TDR_FAILURE nvlddmkm.sys",
        "Where did Xiaoming play football?",
        "",
        "。。。",
    ]
    for name in ("zh_dev.json", "locomo_dev.json"):
        out += dev_texts(name, samples=2, questions=True)
    return out


def test_tokens_equal_r2g_search_tokens() -> None:
    texts = _texts()
    assert sum(1 for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)) > 100 or len(texts) == 8
    assert [search_tokens(t) for t in texts] == [r2g_search_tokens(t) for t in texts]


class _Counting:
    """A jieba tokenizer that counts the texts it segments."""

    def __init__(self, tokenizer: Any) -> None:  # a jieba.Tokenizer (jieba has no types)
        self.tokenizer = tokenizer
        self.texts: list[str] = []

    def cut_for_search(self, text: str) -> Iterator[str]:
        self.texts.append(text)
        return self.tokenizer.cut_for_search(text)


def test_a_memo_segments_each_distinct_piece_once_and_changes_no_token() -> None:
    import jieba

    jieba.initialize()
    texts = [t for t in _texts() if has_han(t)]
    texts += [f"{a} {b}" for a, b in zip(texts, texts[1:])]  # documents made of earlier ones' pieces, as a rollup's
    counting, memo = _Counting(jieba.dt), {}
    assert [han_tokens(t, memo, counting) for t in texts] == [han_tokens(t) for t in texts]
    pieces = {p for t in texts for p in t.split()}
    assert sorted(counting.texts) == sorted(pieces)  # each distinct piece once, and nothing else
    assert len(pieces) < sum(len(t.split()) for t in texts)
    docs = [node_doc("标题 Title", t, ["小明", "Zoë"]) for t in texts]
    memo = {}
    assert [node_doc("标题 Title", t, ["小明", "Zoë"], memo) for t in texts] == docs
    frame = make_docs(
        __import__("polars").DataFrame(
            {
                "tenant": ["t"] * len(texts),
                "id": [str(i) for i in range(len(texts))],
                "title": ["标题 Title"] * len(texts),
                "text": texts,
                "keywords": [["小明", "Zoë"]] * len(texts),
            }
        ),
        "node",
    )
    assert frame.column("doc").to_pylist() == docs


_PIECES = st.sampled_from(
    [
        "小明",
        "在",
        "公园里",
        "踢足球",
        "中华人民共和国",
        "的",
        "AT&T",
        "c#",
        "3.5",
        "e.g.",
        "Zoë",
        "_x_",
        "-",
        "。",
        "，",
        "！",
        "abc",
        "足球场上的",
        "VIDEO_TDR_FAILURE",
        "%",
        "一",
    ]
)
_SPACE = st.sampled_from([" ", "  ", "\t", "\n", "\u3000", "\xa0", "\r\n", ""])


def test_a_full_memo_starts_over_and_still_gives_the_same_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    from r2g import tokens

    monkeypatch.setattr(tokens, "MEMO_PIECES", 3)
    texts = [t for t in _texts() if has_han(t)][:40]
    memo: dict[str, list[str]] = {}
    got = []
    for t in texts:
        got.append(han_tokens(t, memo))
        assert len(memo) <= 3
    assert got == [han_tokens(t) for t in texts]


@given(st.lists(st.tuples(_PIECES, _SPACE), max_size=30))
@fuzz_settings(150)
def test_segmenting_between_whitespace_gives_the_whole_texts_tokens(parts: list[tuple[str, str]]) -> None:
    text = "".join(p + s for p, s in parts)
    memo: dict[str, list[str]] = {}
    assert han_tokens(text, memo) == han_tokens(text)
    assert han_tokens(text, memo) == han_tokens(text)  # from the memo this time


def test_the_lazy_table_is_jiebas_dictionary() -> None:
    import jieba

    jieba.initialize()
    lazy = lazy_jieba()
    assert isinstance(lazy.FREQ, LazyFreq) and lazy.total == jieba.dt.total
    for word in ("足球", "踢", "公园里", "AT&T", "c#", "中华人民共和国", "中华人", "zzzz", "", "足球场上的"):
        assert (word in lazy.FREQ) == (word in jieba.dt.FREQ), word
        assert lazy.FREQ.get(word) == jieba.dt.FREQ.get(word), word


def test_a_recall_process_never_loads_jiebas_dictionary(tmp_path: Path) -> None:
    lake = puppy_lake(tmp_path)
    code = (
        "import sys, json\n"
        "from raw_store.lake import Lake\n"
        "from recall import recall\n"
        "lake = Lake(__import__('pathlib').Path(sys.argv[1]))\n"
        "en = recall('Biscuit agility contest', 't', lake=lake)\n"
        "english_only = 'jieba' not in sys.modules or not sys.modules['jieba'].dt.initialized\n"
        "zh = recall('小明在哪里踢足球 puppy', 't', lake=lake)\n"
        "print(json.dumps([bool(en), english_only, not sys.modules['jieba'].dt.initialized]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(lake.root)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, True, True]


@pytest.mark.parametrize("text", ["Ann: Biscuit won", "小明踢足球", "我 ok 卡拉OK"])
def test_mmr_compares_search_tokens(text: str) -> None:
    assert mmr_tokens(text) == frozenset(r2g_search_tokens(text))


# Characters where Python's \w or lower() and the Rust regex's part ways (U+0130 lower-cases to two code points,
# the combining dot not a word character for Python; Join_Control and connector punctuation are word characters
# for Rust only; a final sigma lower-cases by its context), beside ASCII, the typographic punctuation polars
# segments (r2g.tokens._PLAIN_TEXT) and Han.
_EDGE_TEXTS = [
    "İstanbul İST",
    "ΟΔΟΣ'Α ΟΔΟΣ",
    "x\u200dy a\u200cb",
    "under\u203ftie",
    "Zoë café naïve",
    "e\u0301clair",
    "ﬁne ligature",
    "\u00a0no-break «quoted» — dash – “curly” ‘single’ • bullet … end…",
    "Caroline: I went to the park…",
    "__init__ x_y 42 3.14 AT&T c#",
    "小明在公园里踢足球 football…",
    "   ",
    "",
]
_ALPHABET = st.sampled_from(
    list("abcXYZ019_ .,;:'\"!?-\n\t")
    + [
        "İ",
        "Σ",
        "σ",
        "ë",
        "\u0301",
        "\u200d",
        "\u203f",
        "ﬁ",
        "ß",
        "…",
        "—",
        "“",
        "\u00a0",
        "«",
        "足",
        "球",
        "的",
        "٣",
        "Ⅻ",
    ]
)


@fuzz_settings(150)
@given(st.lists(st.one_of(st.none(), st.text(_ALPHABET, max_size=40)), max_size=12))
def test_fts_documents_are_segment_for_fts_of_each_text(texts: list[str | None]) -> None:
    import polars as pl

    from r2g.tokens import fts_documents, segment_for_fts

    texts = [*texts, *_EDGE_TEXTS]
    got = fts_documents(pl.Series("text", texts, dtype=pl.String))
    assert got.name == "text" and got.to_list() == [segment_for_fts(t or "") for t in texts]
