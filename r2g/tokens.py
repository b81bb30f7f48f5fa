"""Search tokenisation shared by the FTS index builder and the query side.

DuckDB's FTS splits on non-letters and cannot segment Chinese, so Chinese text is
pre-segmented with jieba (search mode) and joined by spaces; English passes
through and DuckDB applies its porter stemmer and English stop-words.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import lru_cache
from types import ModuleType
from typing import Any

# Han characters (also a polars/Rust regex: `pl.col(c).str.contains(HAN_CLASS)`)
HAN_CLASS = r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
_HAN = re.compile(HAN_CLASS)
_TOKEN = re.compile(r"[\w\u3400-\u4dbf\u4e00-\u9fff]+", re.UNICODE)

# Function words that carry no search value in Chinese (DuckDB's list is English-only).
ZH_STOPWORDS = frozenset(
    "的 了 着 过 是 在 和 与 及 或 也 都 就 还 又 很 太 吗 呢 吧 啊 呀 哦 嗯 么 么样 什么 怎么 怎样 为什么 哪 哪里 哪儿 谁 "
    "几 多少 这 那 这个 那个 这些 那些 一个 一下 有 没有 我 你 他 她 它 我们 你们 他们 她们 自己 吗 被 把 给 让 对 从 到 "
    "上 下 里 中 会 能 要 想 去 来 说 做 得 地 之 其 而 但 但是 因为 所以 如果 然后 时候 今天".split()
)


# han_tokens' memo holds at most this many pieces (~0.3 GB), then starts over
MEMO_PIECES = 1 << 20


@lru_cache(maxsize=1)
def _jieba() -> ModuleType:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def has_han(text: str) -> bool:
    return _HAN.search(text) is not None


def han_in(text: Any) -> Any:
    """has_han as a polars expression over a String expression (null: False)."""
    return text.str.contains(HAN_CLASS).fill_null(False)


def search_tokens(text: str, memo: dict[str, list[str]] | None = None) -> list[str]:
    """Lower-cased search tokens of `text`: jieba search-mode words for Han runs, word runs otherwise. `memo`: see
    han_tokens."""
    if not text:
        return []
    if not has_han(text):
        return [t.lower() for t in _TOKEN.findall(text)]
    return han_tokens(text, memo)


def han_tokens(text: str, memo: dict[str, list[str]] | None = None, tokenizer: Any = None) -> list[str]:
    """search_tokens of a text that holds Han, or of a part of one: jieba search mode (`tokenizer`, default jieba's
    own), then the filter. With `memo` the text is segmented piece by piece between whitespace, each distinct piece
    once per memo: token for token the same as the whole, since jieba's blocks never span whitespace (its block
    pattern holds none) and the filter drops the whitespace it yields. A build's documents repeat pieces: a
    rollup's summary is its children's sentences: 9 pieces in 10 seen before at 100k messages."""
    cut = (tokenizer or _jieba()).cut_for_search
    if memo is None:
        return _kept(cut(text))
    out: list[str] = []
    for piece in text.split():
        tokens = memo.get(piece)
        if tokens is None:
            if len(memo) >= MEMO_PIECES:
                memo.clear()  # bounded, whatever the input: a lake's distinct pieces are a few hundred thousand
            tokens = memo[piece] = _kept(cut(piece))
        out.extend(tokens)
    return out


def _kept(words: Iterable[str]) -> list[str]:
    """jieba's words as search tokens: stripped, lower-cased, word characters only, no stop-words."""
    out = []
    for w in words:
        w = w.strip().lower()
        if w and _TOKEN.fullmatch(w) and w not in ZH_STOPWORDS:
            out.append(w)
    return out


def segment_for_fts(text: str, memo: dict[str, list[str]] | None = None) -> str:
    """The document string DuckDB FTS indexes: space-joined search tokens (`memo`: see han_tokens)."""
    return " ".join(search_tokens(text, memo))


def node_doc(
    title: str | None, text: str | None, keywords: list[str] | None, memo: dict[str, list[str]] | None = None
) -> str:
    """The FTS document of a node: segmented title + text + keywords (`memo`: see han_tokens)."""
    return segment_for_fts(" ".join([title or "", text or "", " ".join(keywords or [])]), memo)


def node_doc_text(title: Any, text: Any, keywords: Any) -> Any:
    """As a polars expression (over the columns given), the text node_doc segments: title + text + keywords."""
    import polars as pl

    return pl.concat_str(
        [title.fill_null(""), text.fill_null(""), keywords.list.join(" ").fill_null("")], separator=" "
    )


# The texts polars segments: ASCII, and the typographic punctuation English text has (no-break space, « », the
# dashes, quotes, bullets and ellipsis of U+2010–U+2027): a word character for neither Python's \w (search_tokens)
# nor the Rust regex's, unchanged by either's lower-casing. Such a text's tokens are its runs of [A-Za-z0-9_].
_PLAIN_TEXT = r"^[\x00-\x7F\u00A0\u00AB\u00BB\u2010-\u2027]*$"
_PLAIN_GAPS = r"[^A-Za-z0-9_]+"


def fts_documents(texts: Any, memo: dict[str, list[str]] | None = None) -> Any:
    """segment_for_fts of each of a polars String Series (null: ""), as a Series. Plain texts (ASCII and common
    punctuation, _PLAIN_TEXT: most of an English lake's) are segmented by polars (each gap between tokens made one
    space, then lower-cased: the same string as the tokens joined); the others (Han, accented letters, …) by
    segment_for_fts one by one. A full index build at 100k messages made 270k English node documents in Python."""
    import polars as pl

    frame = pl.DataFrame({"text": texts.fill_null("")}).with_row_index("row")
    plain = pl.col("text").str.contains(_PLAIN_TEXT)
    fast = frame.filter(plain).select(
        "row", pl.col("text").str.replace_all(_PLAIN_GAPS, " ").str.strip_chars(" ").str.to_lowercase().alias("doc")
    )
    other = frame.filter(~plain)
    slow = other.select("row").with_columns(
        pl.Series("doc", [segment_for_fts(t, memo) for t in other.get_column("text").to_list()], dtype=pl.String)
    )
    return pl.concat([fast, slow]).sort("row").get_column("doc").alias(texts.name)
