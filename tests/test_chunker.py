"""The chunker: exact piece offsets, content-defined boundaries, determinism, append-stability."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from raw_store.chunker import Chunk, chunk_conversation, render_turn_header, split_text
from raw_store.readers import Message
from raw_store.text import estimate_tokens

PROPS = fuzz_settings(120)
T0 = dt.datetime(2023, 5, 8, 13, 56)


def _msg(i: int, text: str, speaker: str = "Caroline", ts: dt.datetime | None = T0) -> Message:
    return Message("t", "c", f"m{i}", i, speaker, "user", ts, text, None, "f.txt", i + 1, "transcript")


def _texts_from_chunks(chunks: Sequence[Chunk], n: int) -> list[bytes]:
    out = [b""] * n
    for c in chunks:
        for p in c.pieces:
            out[p.msg_index] += c.body[p.offset : p.offset + p.length]
    return out


def test_render_turn_header() -> None:
    assert render_turn_header(_msg(0, "hi")) == "[2023-05-08 13:56:00] Caroline: "
    assert render_turn_header(_msg(0, "hi", ts=None)) == "Caroline: "


def test_small_conversation_is_one_chunk() -> None:
    msgs = [_msg(0, "Hey Mel!"), _msg(1, "我在公园里踢足球", speaker="Melanie", ts=None)]
    [chunk] = chunk_conversation(msgs)
    assert chunk.body == "[2023-05-08 13:56:00] Caroline: Hey Mel!\nMelanie: 我在公园里踢足球\n".encode()
    assert chunk.seq == 0 and chunk.conv_id == "c"
    for p, m in zip(chunk.pieces, msgs):
        assert chunk.body[p.offset : p.offset + p.length].decode() == m.text


def test_empty_conversation() -> None:
    assert chunk_conversation([]) == []


def test_chunks_stay_within_bounds() -> None:
    msgs = [_msg(i, " ".join(f"word{i}_{k}" for k in range(37))) for i in range(300)]
    chunks = chunk_conversation(msgs, min_tokens=200, max_tokens=400)
    assert len(chunks) > 5
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    for c in chunks[:-1]:
        assert 200 <= estimate_tokens(c.body.decode()) <= 400
    assert _texts_from_chunks(chunks, len(msgs)) == [m.text.encode() for m in msgs]


def test_oversized_message_is_split_on_natural_boundaries() -> None:
    para = " ".join(["This is a sentence."] * 30)  # ~120 tokens per paragraph
    text = "\n\n".join([para] * 6)
    chunks = chunk_conversation([_msg(0, "short one"), _msg(1, text), _msg(2, "after")], min_tokens=50, max_tokens=200)
    pieces = [(c.seq, p) for c in chunks for p in c.pieces if p.msg_index == 1]
    assert len(pieces) > 1
    seqs = [s for s, _ in pieces]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # consecutive chunks
    assert _texts_from_chunks(chunks, 3)[1] == text.encode()
    assert b"Caroline (cont.): " in b"".join(c.body for c in chunks)
    for seq, p in pieces[:-1]:
        piece = chunks[seq].body[p.offset : p.offset + p.length].decode()
        assert piece.endswith((". ", "\n\n", "."))  # cut at a sentence/paragraph end


def test_split_text_falls_back_to_hard_cuts() -> None:
    text = "字" * 1000 + "x" * 50 + " y" * 300
    parts = split_text(text, 100)
    assert "".join(parts) == text
    assert all(estimate_tokens(p) <= 100 for p in parts)
    assert len(parts) >= 13


def test_split_text_cjk_sentences() -> None:
    text = "今天天气很好。" * 100
    parts = split_text(text, 50)
    assert "".join(parts) == text
    assert all(p.endswith("。") for p in parts)


# -- properties ------------------------------------------------------------------------------------

_WORDS = st.sampled_from(["hello", "world", "小明", "公园", "踢足球", "ok.", "Why?", "\n", "\n\n", "é", "🙂", "a-b"])
_TEXT = st.lists(_WORDS, min_size=1, max_size=80).map(" ".join).filter(lambda s: s.strip())
_MESSAGES = st.lists(
    st.tuples(_TEXT, st.sampled_from(["Caroline", "Melanie", "小红"]), st.booleans()), min_size=1, max_size=40
).map(
    lambda rows: [
        _msg(i, text, speaker, T0 + dt.timedelta(minutes=i) if has_ts else None)
        for i, (text, speaker, has_ts) in enumerate(rows)
    ]
)
_BOUNDS = st.sampled_from([(5, 10), (20, 40), (50, 120), (1000, 2000)])


@given(_MESSAGES, _BOUNDS)
@PROPS
def test_pieces_recover_every_message_exactly(msgs: list[Message], bounds: tuple[int, int]) -> None:
    chunks = chunk_conversation(msgs, *bounds)
    assert _texts_from_chunks(chunks, len(msgs)) == [m.text.encode() for m in msgs]
    order = [p.msg_index for c in chunks for p in c.pieces]
    assert order == sorted(order)  # turns stay in order
    for c in chunks:
        c.body.decode("utf-8")  # no split UTF-8 char anywhere
        assert c.body.endswith(b"\n") and c.pieces


@given(_MESSAGES, _BOUNDS)
@PROPS
def test_deterministic(msgs: list[Message], bounds: tuple[int, int]) -> None:
    assert chunk_conversation(msgs, *bounds) == chunk_conversation(list(msgs), *bounds)


@given(_MESSAGES, _MESSAGES, _BOUNDS)
@PROPS
def test_append_reproduces_complete_chunks(head: list[Message], tail: list[Message], bounds: tuple[int, int]) -> None:
    full = head + [_msg(len(head) + i, m.text, m.speaker, m.ts) for i, m in enumerate(tail)]
    before = chunk_conversation(head, *bounds)
    after = chunk_conversation(full, *bounds)
    # every chunk but the (possibly still growing) last one comes back byte for byte
    assert after[: len(before) - 1] == before[:-1]
    last = before[-1]
    assert after[len(before) - 1].body.startswith(last.body)


@PROPS
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=80))
def test_estimate_tokens_ascii_fast_path_agrees_with_the_regex(text: str) -> None:
    """ASCII text is counted with str.split; \\s and str.isspace agree on every ASCII character (\\x1c–\\x1f too)."""
    from raw_store.text import _WORDISH

    assert estimate_tokens(text) == len(_WORDISH.findall(text))
    assert estimate_tokens(text + "小明") == len(_WORDISH.findall(text + "小明"))
