"""Search tokens of a question without loading jieba's whole dictionary first.

`r2g.tokens.search_tokens` segments Han text with jieba, whose dictionary is loaded whole by a process that segments
a lot of text (r2g.tokens.jieba_tokenizer). A question is a few words long: it needs a few dozen of its entries. Here
jieba's own algorithm (search mode, HMM on) always runs over r2g.tokens.lazy_jieba, the same word → frequency table
looked up by binary search over a memory map, unless this process has jieba's dictionary loaded already (it indexed
text): that is used then. The tokens are exactly r2g's (a test compares them).
"""

from __future__ import annotations

from typing import Any

from r2g.tokens import han_tokens, has_han, jieba_tokenizer
from r2g.tokens import search_tokens as r2g_search_tokens


def _tokenizer() -> Any:
    return jieba_tokenizer(may_load=False)


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
