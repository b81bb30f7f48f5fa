"""Pack one conversation's turns into RawChunks of ~1–2k tokens with content-defined boundaries.

A chunk body is, per turn, `header + text + "\\n"` in UTF-8. Cuts fall only between
turns, and whether to cut after a turn depends only on the turns since the chunk
start (token count, and a hash of the turn bytes), never on what follows. So
re-chunking a conversation, or the same conversation with more turns appended,
reproduces every earlier complete chunk byte for byte — the CAS stores it once.
A message longer than `max_tokens` is split on paragraphs, then sentences, then
token/character boundaries into pieces that land in consecutive chunks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from raw_store.readers import Message
from raw_store.text import estimate_tokens

_PARAGRAPH_END = re.compile(r"\n[ \t\r\f\v]*\n\s*")
# CJK stops end a sentence by themselves; Latin ones only when whitespace follows ("3.14", "e.g." stay whole)
_SENTENCE_END = re.compile(r"[。！？]+[”’」』）)]*\s*|[.!?]+[\"')\]]*\s+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD_BACKOFF = 64  # how far a hard cut may move back to land between words


@dataclass(frozen=True)
class Piece:
    msg_index: int  # index into the messages list given
    offset: int  # byte offset of the piece of message text inside body
    length: int  # byte length


@dataclass(frozen=True)
class Chunk:
    conv_id: str
    seq: int
    body: bytes
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class _Unit:
    """One turn (or one piece of an oversized message) as it appears in a chunk body."""

    msg_index: int
    header: bytes
    text: bytes

    @property
    def bytes(self) -> bytes:
        return self.header + self.text + b"\n"


def render_turn_header(m: Message) -> str:
    """The header before a turn's text: "[2023-05-08 13:56:00] Caroline: ", or "Caroline: " without ts."""
    return _header(m, "")


def _header(m: Message, mark: str) -> str:
    stamp = f"[{m.ts:%Y-%m-%d %H:%M:%S}] " if m.ts is not None else ""
    return f"{stamp}{m.speaker}{mark}: "


def _split_after(text: str, pattern: re.Pattern) -> list[str]:
    """`text` cut after each match of `pattern`; the parts concatenate back to `text`."""
    parts, start = [], 0
    for m in pattern.finditer(text):
        if m.end() > start:
            parts.append(text[start : m.end()])
            start = m.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def _fitting_prefix(text: str, budget: int) -> int:
    """The length of the longest prefix of `text` within `budget` tokens (prefix token counts only grow)."""
    # k characters never hold more than k tokens, so `budget` chars always fit; gallop, then bisect
    lo = min(budget, len(text))
    hi = min(2 * budget, len(text))
    while lo < len(text) and estimate_tokens(text[:hi]) <= budget:
        lo, hi = hi, min(2 * hi, len(text))
    if lo == len(text):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimate_tokens(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def _hard_split(text: str, budget: int) -> list[str]:
    """Cut `text` into parts of at most `budget` tokens, between words when one is near."""
    parts = []
    while text:
        cut = _fitting_prefix(text, budget)
        if cut < len(text):
            for p in range(cut, max(cut - _WORD_BACKOFF, 0), -1):
                if text[p - 1].isspace() or _HAN.match(text[p - 1]) or _HAN.match(text[p]):
                    cut = p
                    break
        parts.append(text[:cut])
        text = text[cut:]
    return parts


def _atoms(text: str, budget: int, level: int = 0) -> list[str]:
    """Parts of `text` each within `budget` tokens: paragraphs, then sentences, then hard cuts."""
    if estimate_tokens(text) <= budget:
        return [text]
    if level >= 2:
        return _hard_split(text, budget)
    parts = _split_after(text, _PARAGRAPH_END if level == 0 else _SENTENCE_END)
    return [a for part in parts for a in _atoms(part, budget, level + 1)]


def split_text(text: str, max_tokens: int) -> list[str]:
    """Split an oversized message text into pieces of at most `max_tokens` tokens that concatenate to `text`.

    Natural boundaries first; adjacent small parts are merged back up to the budget.
    """
    budget = max(1, max_tokens)
    pieces: list[str] = []
    current, tokens = "", 0
    for atom in _atoms(text, budget):
        t = estimate_tokens(atom)
        if current and tokens + t > budget:
            pieces.append(current)
            current, tokens = "", 0
        current += atom
        tokens += t
    if current:
        pieces.append(current)
    return pieces


def _units(messages: Sequence[Message], max_tokens: int) -> list[_Unit]:
    units = []
    for i, m in enumerate(messages):
        texts = [m.text] if estimate_tokens(m.text) <= max_tokens else split_text(m.text, max_tokens)
        for k, piece in enumerate(texts):
            header = _header(m, "" if k == 0 else " (cont.)")
            units.append(_Unit(i, header.encode("utf-8"), piece.encode("utf-8")))
    return units


def _boundary_after(unit_bytes: bytes) -> bool:
    """The content-defined cut test: about one turn in four past min_tokens ends a chunk."""
    return int(hashlib.sha256(unit_bytes).hexdigest()[:8], 16) % 4 == 0


def chunk_conversation(messages: Sequence[Message], min_tokens: int = 1000, max_tokens: int = 2000) -> list[Chunk]:
    """Pack the turns of ONE conversation (in seq order) into chunks; deterministic and append-stable.

    A turn that would push a non-empty chunk past `max_tokens` starts a new chunk; after a
    turn, the chunk ends when it holds >= max_tokens, or >= min_tokens and the turn's hash
    says so. Each Piece points at message text bytes in the body (never at headers).
    """
    if not messages:
        return []
    conv_id = messages[0].conv_id
    chunks: list[Chunk] = []
    pieces: list[Piece] = []
    body, tokens = bytearray(), 0

    def emit() -> None:
        nonlocal body, pieces, tokens
        chunks.append(Chunk(conv_id, len(chunks), bytes(body), tuple(pieces)))
        body, pieces, tokens = bytearray(), [], 0

    for unit in _units(messages, max_tokens):
        raw = unit.bytes
        t = estimate_tokens(raw.decode("utf-8"))
        if pieces and tokens + t > max_tokens:
            emit()
        pieces.append(Piece(unit.msg_index, len(body) + len(unit.header), len(unit.text)))
        body += raw
        tokens += t
        if tokens >= max_tokens or (tokens >= min_tokens and _boundary_after(raw)):
            emit()
    if pieces:
        emit()
    return chunks
