"""Deterministic ids: a hash of the natural key, so re-runs never duplicate a node or an edge."""
from __future__ import annotations

import hashlib

_SEP = "\x1f"  # ASCII unit separator: cannot appear in the parts we hash, so ("a","bc") != ("ab","c")


def stable_id(prefix: str, *parts: str) -> str:
    """`prefix_` + the first 24 hex chars of sha256 over the parts joined by \\x1f.

    Node ids use prefix "n", edge ids "e". None parts hash as "".
    """
    key = _SEP.join("" if p is None else str(p) for p in parts)
    return f"{prefix}_{hashlib.sha256(key.encode('utf-8')).hexdigest()[:24]}"


def edge_id(tenant: str, src: str, type: str, dst: str) -> str:
    """Id of the edge (tenant, src, type, dst): one edge per typed pair, however often it is derived."""
    return stable_id("e", tenant, src, type, dst)


def text_sha(text: str) -> str:
    """sha256 hex of the utf-8 text: the NLP cache key (same as messages.text_sha)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
