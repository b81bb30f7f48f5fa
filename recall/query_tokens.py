"""Search tokens of a question without loading jieba's whole dictionary first.

`r2g.tokens.search_tokens` segments Han text with jieba, whose first use builds a
dictionary of ~500k words in memory (0.5–1 s, each process). A question is a few
words long: it needs a few dozen of those entries. Here jieba's own algorithm
(a `jieba.Tokenizer`, search mode, HMM on) runs over a *lazy* dictionary: the same
word → frequency table (jieba's `gen_pfdict` of its default dict.txt, prefixes
included), stored once per machine as sorted arrays and looked up by binary search
over a memory map (recall.sorted_keys). The tokens are exactly r2g's (a test compares
them); when jieba's global dictionary is loaded already (this process indexed text),
that is used instead.

The table lives in `$TMPDIR/memctl_jieba_<jieba version>_<dict size>_<dict mtime>/`
(like jieba's own cache file), written atomically by the first process that needs it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from r2g.tokens import han_tokens, has_han
from r2g.tokens import search_tokens as r2g_search_tokens
from recall.sorted_keys import SortedKeys, mapped, prefix_array

_MISSING = object()


class LazyFreq:
    """jieba's FREQ mapping (word → frequency, 0 for a prefix that is no word), read from sorted arrays."""

    def __init__(self, folder: Path) -> None:
        self.keys = SortedKeys.open(folder / "words.keys.npy", None)
        self.freq = mapped(folder / "freq.npy")
        self._seen: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def _find(self, word: str) -> int | None:
        hit = self._seen.get(word, _MISSING)
        if hit is _MISSING:
            b = word.encode("utf-8")
            hit = None
            if len(b) <= self.keys.width:
                i = int(np.searchsorted(self.keys.prefixes, b))
                if i < len(self.keys.prefixes) and self.keys.prefixes[i] == b:
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
    """jieba's gen_pfdict over its dict file, as sorted arrays (atomically: built aside, then renamed)."""
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
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        np.save(tmp / "words.keys.npy", prefix_array(words))
        np.save(tmp / "freq.npy", np.array([freq[w] for w in words], dtype=np.int64))
        (tmp / "meta.json").write_text(json.dumps({"total": total, "words": len(words)}), "utf-8")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process got there first: its table is the same
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@lru_cache(maxsize=1)
def _lazy_tokenizer() -> Any:  # a jieba.Tokenizer (jieba has no types)
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


def _tokenizer() -> Any:
    jieba = sys.modules.get("jieba")
    if jieba is not None and jieba.dt.initialized:
        return jieba.dt  # the whole dictionary is in memory already
    return _lazy_tokenizer()


def search_tokens(text: str) -> list[str]:
    """r2g.tokens.search_tokens(text), token for token, without loading jieba's dictionary."""
    if not text:
        return []
    if not has_han(text):
        return r2g_search_tokens(text)
    return jieba_tokens(text)


def jieba_tokens(text: str, memo: dict[str, list[str]] | None = None) -> list[str]:
    """The tokens r2g.tokens.search_tokens makes of a text holding Han characters (jieba search mode, then its
    filter), for any text: a part of a longer text segments this way when the whole holds Han. `memo`: see
    r2g.tokens.han_tokens."""
    return han_tokens(text, memo, _tokenizer())
