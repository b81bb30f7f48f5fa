"""DuckDB FTS's tokenization, English stop-words and porter stems, reproduced without DuckDB: a query's stems
(`python_stems`) and a chunk of documents' postings (`_python_chunk_postings`), equal to what DuckDB's
create_fts_index and its tokenize macro give (tests/test_query_stems.py checks them against DuckDB itself)."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

STEMMER = "porter"


# The tokenize macro DuckDB's FTS writes for recall.index.FTS_IGNORE; `python_stems` reproduces exactly this one
# (tests/test_query_stems.py checks both: the macro text at build, and the stems against DuckDB's).
PYTHON_IGNORE = r"(\.|[^\p{L}\p{N}])+"  # recall.index.FTS_IGNORE
PYTHON_TOKENIZE = (
    rf"string_split_regex(regexp_replace(lower(strip_accents(CAST(s AS VARCHAR))), '{PYTHON_IGNORE}', ' ', 'g'), "
    r"'\s+')"
)
_NOT_LETTER_OR_DIGIT = re.compile(r"[\W_]+")  # in Python's Unicode tables: exactly what is not \p{L} or \p{N}
_MARKS = frozenset(("Mn", "Mc", "Me"))


def python_stems(query: str) -> tuple[str, ...] | None:
    """The distinct porter stems DuckDB gives for `query` with PYTHON_TOKENIZE, sorted; None when the query holds
    a character Python's Unicode tables do not assign (DuckDB's utf8proc and RE2 are newer: ask DuckDB then).

    strip_accents = utf8proc's NFD, marks (Mn, Mc, Me) removed, NFC; lower = per character (no final sigma);
    the regex keeps runs of letters and digits; stems by libstemmer's "porter", as DuckDB's stem()."""
    words = _python_words(query)
    if words is None:
        return None
    with _STEMMER_LOCK:  # a PyStemmer object is not thread-safe
        stems = _stemmer().stemWords(words)
    return tuple(sorted({t for t in stems if t}))


def _python_words(s: str) -> list[str] | None:
    """PYTHON_TOKENIZE's words of `s` (empty ones dropped), or None when `s` holds a character Python's Unicode
    tables do not assign (see python_stems)."""
    if not s.isascii():
        if any(unicodedata.category(c) == "Cn" for c in s):
            return None
        s = unicodedata.normalize("NFD", s)
        s = unicodedata.normalize("NFC", "".join(c for c in s if unicodedata.category(c) not in _MARKS))
        s = s.replace("\u03a3", "\u03c3")  # Σ: Python lowers a word-final one to ς, utf8proc always to σ
    return [w for w in _NOT_LETTER_OR_DIGIT.split(s.lower()) if w]


def _python_chunk_postings(
    docs: Sequence[str | None], ignore: str
) -> tuple[str, np.ndarray, list[str | None], np.ndarray, np.ndarray, np.ndarray] | None:
    """What _chunk_postings gives for `docs`, made without DuckDB as its create_fts_index makes it: each document's
    words by PYTHON_TOKENIZE, the English stop-words left out, porter stems (python_stems' steps), its length the
    number of stems; the terms numbered as first met (their order is not kept: _build_postings sorts them). None
    when `ignore` is not the pattern PYTHON_TOKENIZE holds or a document holds a character Python's Unicode tables
    do not assign: DuckDB indexes those.

    The words of a document made only of characters in _plain_chars() (ASCII, CJK ideographs and punctuation, …:
    nearly every document, the jieba-segmented Chinese ones included) come from polars in one vectorised pass over
    the chunk, lowercased and split as the per-character tables say Python and DuckDB do; the rest one by one in
    Python (_python_words). Stems are looked up once per distinct word. 3.4M node documents of a 1M-message lake:
    ~48 s of DuckDB FTS builds on both cores before."""
    if ignore != PYTHON_IGNORE:
        return None
    import polars as pl

    n = len(docs)
    frame = pl.DataFrame({"doc": pl.Series(docs, dtype=pl.String)}).with_row_index("row")
    is_plain = pl.col("doc").is_null() | pl.col("doc").str.contains(f"^{_plain_class()}*$")
    plain = frame.filter(is_plain)
    if plain.height < n:
        rest = frame.filter(~is_plain)
        words = [_python_words(d) for d in rest.get_column("doc").to_list()]
        if any(w is None for w in words):
            return None
        spoken = pl.DataFrame({"row": rest.get_column("row"), "w": pl.Series(words, dtype=pl.List(pl.String))})
    else:
        spoken = pl.DataFrame(schema={"row": pl.UInt32, "w": pl.List(pl.String)})
    tokens = (
        pl.concat(
            [
                plain.select("row", pl.col("doc").str.to_lowercase().str.extract_all(_WORD).alias("w")),
                spoken,
            ]
        )
        .explode("w")
        .drop_nulls("w")
        .filter(~pl.col("w").is_in(sorted(fts_stopwords())))
    )
    distinct = tokens.get_column("w").unique()
    with _STEMMER_LOCK:
        stems = _stemmer().stemWords(distinct.to_list())
    tokens = tokens.join(
        pl.DataFrame({"w": distinct, "stem": pl.Series(stems, dtype=pl.String)}), on="w", how="left"
    ).drop("w")
    doc_len = np.zeros(n, dtype=np.int32)
    lengths = tokens.group_by("row").len()
    doc_len[lengths.get_column("row").to_numpy()] = lengths.get_column("len").to_numpy()
    counted = tokens.group_by("row", "stem").len()
    terms = counted.get_column("stem").unique(maintain_order=True)
    counted = counted.join(pl.DataFrame({"stem": terms}).with_row_index("termid"), on="stem", how="left")
    return (
        PYTHON_TOKENIZE,
        doc_len,
        terms.to_list(),
        counted.get_column("termid").to_numpy().astype(np.int32),
        counted.get_column("row").to_numpy().astype(np.int32),
        counted.get_column("len").to_numpy().astype(np.int32),
    )


_WORD = r"[\p{L}\p{N}]+"  # PYTHON_IGNORE's complement: a run of letters and digits
# the blocks whose characters _plain_chars() checks one by one (others always go through _python_words)
_PLAIN_CANDIDATES = (
    (0x0000, 0x02FF),  # ASCII, Latin-1, Latin Extended-A/B, IPA
    (0x2000, 0x206F),  # general punctuation
    (0x3000, 0x30FF),  # CJK symbols and punctuation, hiragana, katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xFF00, 0xFFEF),  # half- and full-width forms
)


@lru_cache(maxsize=1)
def _plain_chars() -> tuple[int, ...]:
    """The characters on which polars' lowercase and _WORD give exactly what _python_words gives
    (so DuckDB's strip_accents / lower / regexp_replace): each assigned in Python's Unicode tables, its own NFD and NFC,
    no combining mark and never the second of a canonical composition (so NFD, mark removal and NFC leave any string
    of them as it is), lowercased to one character by polars as by Python, a word character for both or for
    neither; Σ is left out (lowercased by its context). Checked character by character here, once a process."""
    import polars as pl

    second = set()  # characters NFC may fold into the one before them
    for cp in range(0x10000):
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            second.add(int(parts[1], 16))
    chars = [
        chr(cp)
        for lo, hi in _PLAIN_CANDIDATES
        for cp in range(lo, hi + 1)
        if cp not in second
        and not 0x1100 <= cp <= 0x11FF
        and chr(cp) != "\u03a3"
        and unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Mn", "Mc", "Me")
        and unicodedata.combining(chr(cp)) == 0
        and unicodedata.normalize("NFD", chr(cp)) == chr(cp) == unicodedata.normalize("NFC", chr(cp))
    ]
    col = pl.Series(chars, dtype=pl.String)
    lowered = col.str.to_lowercase().to_list()
    worded = col.str.contains(f"^{_WORD}$").to_list()
    plain = [
        ord(c)
        for c, low, word in zip(chars, lowered, worded, strict=True)
        if low == c.lower()
        and len(low) == 1
        and word == bool(_python_words(c))
        and unicodedata.normalize("NFD", low) == low
    ]
    return tuple(plain)


@lru_cache(maxsize=1)
def _plain_class() -> str:
    """_plain_chars() as a regex character class of ranges."""
    spans: list[tuple[int, int]] = []
    for cp in _plain_chars():
        if spans and spans[-1][1] == cp - 1:
            spans[-1] = (spans[-1][0], cp)
        else:
            spans.append((cp, cp))
    return "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in spans) + "]"


@lru_cache(maxsize=1)
def fts_stopwords() -> frozenset[str]:
    """DuckDB's FTS English stop-words (its `stopwords='english'` table, copied: recall/data; a test compares)."""
    return frozenset(resources.files("recall").joinpath("data/fts_english_stopwords.txt").read_text("utf-8").split())


_STEMMER_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _stemmer() -> Any:  # Stemmer.Stemmer (PyStemmer has no types)
    import Stemmer

    return Stemmer.Stemmer(STEMMER)
