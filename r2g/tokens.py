"""Search tokenisation shared by the FTS index builder and the query side.

DuckDB's FTS splits on non-letters and cannot segment Chinese, so Chinese text is
pre-segmented with jieba (search mode) and joined by spaces; English passes
through and DuckDB applies its porter stemmer and English stop-words.

jieba's dictionary is also here, whole or lazy (`jieba_tokenizer`, `lazy_jieba`): the Chinese
NLP (r2g.nlp_zh) and recall's query side segment with it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

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


# A process segments this many texts over the lazy dictionary (lazy_jieba), then loads jieba's whole one: a small
# run (a file of a few messages, a question) never loads it, a big one pays for it once and then looks words up
# faster (432 Chinese chat turns: 1.0-1.6 s to load it, then 0.51 s; 0.85 s lazily, nothing to load)
LAZY_TEXTS = 2_000
_lazy_texts = 0


@lru_cache(maxsize=1)
def _jieba() -> ModuleType:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def jieba_tokenizer(may_load: bool = True) -> Any:  # a jieba.Tokenizer (jieba has no types)
    """The jieba tokenizer to segment one more text with: jieba's own once its dictionary is loaded, or once this
    process has segmented LAZY_TEXTS texts (it is loaded then); before that lazy_jieba(). The words are the same.
    `may_load=False` (a question, recall's index documents): lazy_jieba() unless the dictionary is loaded already."""
    global _lazy_texts
    jieba = sys.modules.get("jieba")
    if jieba is not None and jieba.dt.initialized:
        return jieba.dt
    if not may_load:
        return lazy_jieba()
    _lazy_texts += 1
    return _jieba().dt if _lazy_texts > LAZY_TEXTS else lazy_jieba()


@lru_cache(maxsize=1)
def lazy_jieba() -> Any:  # a jieba.Tokenizer
    """jieba's own algorithm (a `jieba.Tokenizer`) over a lazy dictionary: the same word → frequency table as jieba's
    `gen_pfdict` of its default dict.txt (prefixes included), stored once per machine as sorted arrays and looked up
    by binary search over a memory map. Loading jieba's dictionary builds ~500k words in memory (~1 s, each process);
    a question or a small file needs a few dozen of them.

    The table lives in `$TMPDIR/memctl_jieba_<jieba version>_<dict size>_<dict mtime>/` (like jieba's own cache
    file), written atomically by the first process that needs it."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    src, folder = _dict_folder()
    if not (folder / "meta.json").exists():
        _write_table(src, folder)
    tok = jieba.Tokenizer()
    tok.FREQ = LazyFreq(folder)
    tok.total = json.loads((folder / "meta.json").read_text("utf-8"))["total"]
    tok.initialized = True
    return tok


_MISSING = object()


class LazyFreq:
    """jieba's FREQ mapping (word → frequency, 0 for a prefix that is no word), read from sorted arrays."""

    def __init__(self, folder: Path) -> None:
        # plain arrays over the maps (numpy's memmap subclass costs microseconds on every element read)
        self.keys = np.load(folder / "words.keys.npy", mmap_mode="r").view(np.ndarray)
        self.freq = np.load(folder / "freq.npy", mmap_mode="r").view(np.ndarray)
        self.width = self.keys.dtype.itemsize
        self._seen: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def _find(self, word: str) -> int | None:
        hit = self._seen.get(word, _MISSING)
        if hit is _MISSING:
            b = word.encode("utf-8")
            hit = None
            if len(b) <= self.width:
                i = int(np.searchsorted(self.keys, b))
                if i < len(self.keys) and self.keys[i] == b:
                    hit = int(self.freq[i])
            with self._lock:
                if len(self._seen) > 1 << 18:
                    self._seen.clear()
                self._seen[word] = hit
        return hit  # type: ignore[return-value]

    def __contains__(self, word: str) -> bool:
        return self._find(word) is not None

    def __getitem__(self, word: str) -> int:
        v = self._find(word)
        if v is None:
            raise KeyError(word)
        return v

    def get(self, word: str, default: int | None = None) -> int | None:
        v = self._find(word)
        return default if v is None else v


def _dict_folder() -> tuple[Path, Path]:
    import jieba

    f = jieba.dt.get_dict_file()
    src = Path(f.name)
    f.close()
    st = src.stat()
    return src, Path(tempfile.gettempdir()) / f"memctl_jieba_{jieba.__version__}_{st.st_size}_{st.st_mtime_ns}"


def _write_table(src: Path, folder: Path) -> None:
    """jieba's gen_pfdict over its dict file, as sorted arrays (atomically: built aside, then renamed). The keys are
    a fixed-width byte array as wide as the longest word, so every word is whole in it."""
    freq: dict[str, int] = {}
    total = 0
    with open(src, "rb") as f:
        for line in f:
            word, n = line.strip().decode("utf-8").split(" ")[:2]
            freq[word] = int(n)
            total += int(n)
            for i in range(1, len(word)):
                freq.setdefault(word[:i], 0)
    words = sorted(freq, key=lambda w: w.encode("utf-8"))
    keys = [w.encode("utf-8") for w in words]
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        np.save(tmp / "words.keys.npy", np.array(keys, dtype=f"S{max(map(len, keys), default=1)}"))
        np.save(tmp / "freq.npy", np.array([freq[w] for w in words], dtype=np.int64))
        (tmp / "meta.json").write_text(json.dumps({"total": total, "words": len(words)}), "utf-8")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process got there first: its table is the same
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    """search_tokens of a text that holds Han, or of a part of one: jieba search mode (`tokenizer`, default
    jieba_tokenizer()), then the filter. With `memo` the text is segmented piece by piece between whitespace, each distinct piece
    once per memo: token for token the same as the whole, since jieba's blocks never span whitespace (its block
    pattern holds none) and the filter drops the whitespace it yields. A build's documents repeat pieces: a
    rollup's summary is its children's sentences: 9 pieces in 10 seen before at 100k messages."""
    cut = (tokenizer or jieba_tokenizer()).cut_for_search
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
