"""The query's BM25 terms in Python (recall.fts_tokens.python_stems) equal DuckDB FTS's, string for string."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Sequence
from functools import cache

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dev_sets import EVAL, dev_texts
from recall.fts_tokens import PYTHON_TOKENIZE, python_stems
from recall.index import FTS_IGNORE
from recall.postings import build_postings, query_terms
from recall.query import query_keywords
from recall.store import connect


@cache
def _stemmer() -> duckdb.DuckDBPyConnection:
    """One in-memory DuckDB with the fts extension and the tokenize macro for the module: opening one per call
    (extension loaded, macro created) cost more than the stems of 300 generated examples."""
    con = connect(None, read_only=False)
    con.execute(f"CREATE MACRO memctl_tokenize(s) AS {PYTHON_TOKENIZE}")
    return con


def _duckdb_stems(strings: Sequence[str]) -> list[tuple[str, ...]]:
    """DuckDB's distinct stems of each string, sorted, in one query (as QueryTerms.duckdb_stems, batched)."""
    import pyarrow as pa

    con = _stemmer()
    con.register("q", pa.table({"i": list(range(len(strings))), "s": list(strings)}))
    try:
        rows = con.execute("SELECT i, stem(unnest(memctl_tokenize(s)), 'porter') AS t FROM q").fetchall()
    finally:
        con.unregister("q")
    out: list[set[str]] = [set() for _ in strings]
    for i, t in rows:
        if t:
            out[i].add(t)
    return [tuple(sorted(s)) for s in out]


def _assert_equal(strings: Sequence[str]) -> int:
    """Python's stems equal DuckDB's for every string Python answers; how many it answered."""
    want = _duckdb_stems(strings)
    answered = 0
    for s, w in zip(strings, want):
        got = python_stems(s)
        if got is not None:
            assert got == w, s
            answered += 1
    return answered


def test_the_index_writes_the_tokenize_macro_python_reproduces() -> None:
    _, macro = build_postings(["Zoë's café", "小明 踢 足球"], FTS_IGNORE)
    assert macro == PYTHON_TOKENIZE
    assert query_terms(macro)._python


@pytest.mark.parametrize("name", ["locomo_dev.json", "zh_dev.json"])
def test_python_stems_equal_duckdb_on_every_question_and_turn(name: str) -> None:
    if not (EVAL / name).exists():
        pytest.skip(f"{EVAL / name} not here")
    strings: list[str] = []
    for sample in json.loads((EVAL / name).read_text("utf-8")):
        for qa in sample["qa"]:
            q = str(qa["question"])
            strings += [q, " ".join(query_keywords(q))]
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                strings += [str(t["text"]) for t in turns]
    assert _assert_equal(strings) == len(strings)


def test_python_stems_equal_duckdb_on_hard_cases() -> None:
    cases = [
        "",
        "   ",
        "ΣΊΣΥΦΟΣ Σ σ ς",  # final sigma: utf8proc lowers Σ to σ everywhere
        "İstanbul KELVİN K Å ﬁ ß ẞ",  # İ, Kelvin sign, Ångström sign, ligature, sharp s
        "Zoë's café naïve résumé, AT&T c# e.g. 3.14 1,000 x_y",
        "가나다 한국어 ｆｕｌｌｗｉｄｔｈ ①②③ ¼ Ⅻ",
        "小明什么时候去踢足球？ 咖啡馆 😀👍🏽 🇫🇷",
        "e\u0301 a\u0308\u0304 \u0301start",  # combining marks, one with no base
        "generously running caresses ponies skies",
        "don't won't it’s O'Neil",
    ]
    assert _assert_equal(cases) == len(cases)


def test_a_character_python_does_not_assign_goes_to_duckdb() -> None:
    unassigned = next(chr(c) for c in range(0x0378, sys.maxunicode) if unicodedata.category(chr(c)) == "Cn")
    assert python_stems(f"tea {unassigned}") is None
    qt = query_terms(PYTHON_TOKENIZE)
    assert qt.stems(f"teas {unassigned}") == qt.duckdb_stems(f"teas {unassigned}")


_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_characters="\x00"),
        st.sampled_from("AaÉéΣσςİıßẞ  .'-_,!?0123456789小明足球咖啡가😀\u0301\u0308"),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=20))
def test_python_stems_equal_duckdb_on_generated_strings(strings: list[str]) -> None:
    _assert_equal(strings)


# ---------------------------------------------------------------- documents: a small build's postings in Python


def _triples(built: tuple) -> tuple[list[int], list[tuple[str | None, int, int]]]:
    """A chunk's (doc lengths, sorted (term, row, tf)): the same whatever order its terms were numbered in."""
    _, lens, terms, termid, row, tf = built
    return lens.tolist(), sorted((terms[a], int(b), int(c)) for a, b, c in zip(termid, row, tf))


def _assert_same_postings(docs: list[str | None]) -> bool:
    """Python's postings of `docs` equal DuckDB's create_fts_index's; False when Python left them to DuckDB."""
    from recall.fts_tokens import _python_chunk_postings
    from recall.postings import _chunk_postings

    python = _python_chunk_postings(docs, FTS_IGNORE)
    if python is None:
        return False
    assert python[0] == PYTHON_TOKENIZE
    assert _triples(python) == _triples(_chunk_postings(docs, FTS_IGNORE))
    return True


def test_the_stop_words_are_duckdbs() -> None:
    from recall.fts_tokens import fts_stopwords

    con = connect(None, read_only=False)
    con.execute("CREATE TABLE d(row INT, doc VARCHAR)")
    con.execute(f"PRAGMA create_fts_index('d', 'row', 'doc', stopwords='english', ignore='{FTS_IGNORE}')")
    assert fts_stopwords() == {r[0] for r in con.execute("SELECT sw FROM fts_main_d.stopwords").fetchall()}


@pytest.mark.parametrize("name", ["locomo_dev.json", "zh_dev.json"])
def test_a_small_builds_postings_in_python_equal_duckdbs(name: str) -> None:
    from r2g.tokens import segment_for_fts

    texts = dev_texts(name)
    if not texts:
        pytest.skip(f"{EVAL / name} not here")
    docs: list[str | None] = [segment_for_fts(t) for t in texts] + [*texts, None, "", "The THE the a's"]
    assert _assert_same_postings(docs)


def test_postings_of_hard_cases_and_what_python_leaves_to_duckdb() -> None:
    from recall.postings import _build_postings

    cases: list[str | None] = [
        "ΣΊΣΥΦΟΣ Σ σ ς",
        "İstanbul KELVİN K Å ﬁ ß ẞ",
        "Zoë's café naïve résumé, AT&T c# e.g. 3.14 1,000 x_y",
        "小明 什么 时候 去 踢 足球 ？ 😀👍🏽",
        "e\u0301 a\u0308\u0304 \u0301start",
        "the and of a an it's",  # stop-words only: length 0
        None,
        "running runs ran runner RUNNING",
    ]
    assert _assert_same_postings(cases)
    unassigned = next(chr(c) for c in range(0x0378, sys.maxunicode) if unicodedata.category(chr(c)) == "Cn")
    assert not _assert_same_postings([*cases, f"tea {unassigned}"])  # left to DuckDB
    postings, macro = _build_postings([*cases, f"tea {unassigned}"], FTS_IGNORE)  # and DuckDB indexes them
    assert macro == PYTHON_TOKENIZE and "tea" in postings.terms.to_pylist()


@settings(max_examples=100, deadline=None)  # each example builds a DuckDB FTS index (~40 ms)
@given(st.lists(st.one_of(st.none(), _TEXT), min_size=1, max_size=20))
def test_postings_in_python_equal_duckdbs_on_generated_documents(docs: list[str | None]) -> None:
    _assert_same_postings(docs)


def test_every_character_split_by_polars_is_indexed_as_duckdb_indexes_it() -> None:
    """The characters whose documents skip _python_words: each one, upper and lower, alone, in runs and beside the
    characters around it, gives DuckDB's postings (a character wrongly called plain, as an accented letter or a
    final sigma would be, changes a term or a length)."""
    from recall.fts_tokens import _plain_chars

    chars = [chr(c) for c in _plain_chars()]
    assert len(chars) > 25_000 and "É" not in chars and "\u03a3" not in chars and "小" in chars and "A" in chars
    runs = ["".join(chars[i : i + 40]) for i in range(0, len(chars), 40)]
    docs: list[str | None] = [
        *runs,
        *(" ".join(r) for r in runs),
        *(r.upper() for r in runs),
        *(r.lower() for r in runs),
    ]
    assert _assert_same_postings(docs)
