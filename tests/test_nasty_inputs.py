"""A corpus of nasty files through `ingest_bytes`: nothing crashes, nothing is lost.

For every file: each input record is an accepted message or a coded reject (conservation); a reject's
bytes are in the CAS and are bytes of the file; a message's text is recovered byte-exact from its chunk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raw_store import errors as E
from raw_store.cas import RawStore
from raw_store.ingest import IngestResult, ingest_bytes
from raw_store.readers import MAX_MESSAGE_BYTES

FUTURE = "2991-01-01 00:00:00"


def _jsonl(*records: dict) -> bytes:
    return ("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n").encode("utf-8")


def _rec(text: str, ts: str = "2024-01-02 10:00:00", speaker: str = "Ann") -> dict:
    return {"conv_id": "c", "speaker": speaker, "ts": ts, "text": text}


def _deep(depth: int) -> bytes:
    return b'{"conv_id": "c", "speaker": "Ann", "ts": "2024-01-02", "text": ' + b"[" * depth + b"]" * depth + b"}\n"


NASTY: dict[str, bytes] = {
    "bom.jsonl": b"\xef\xbb\xbf" + _jsonl(_rec("hello with a BOM")),
    "bom.txt": "\ufeffAnn: hello\nBob: 你好\n".encode(),
    "crlf.txt": b"Ann: one\r\nBob: two\r\n\r\n  still two\r\n",
    "crlf.jsonl": _jsonl(_rec("one"), _rec("two")).replace(b"\n", b"\r\n"),
    "nul_bytes.txt": b"Ann: hi\x00\x00\nBob: there\n",
    "invalid_utf8_line.jsonl": _jsonl(_rec("good")) + b'{"speaker": "Bob", "ts": "2024-01-02", "text": "\xff\xfe"}\n',
    "latin1.txt": "Zoë: café\nRené: ça va\n".encode("latin-1"),
    "deep_json.jsonl": _deep(100_000) + _jsonl(_rec("after the deep one")),
    "deep_document.json": b"[" * 200_000 + b"]" * 200_000,
    "truncated.jsonl": _jsonl(_rec("whole"), _rec("cut"))[:-12],
    "truncated_locomo.json": b'{"conversation": {"session_1": [{"speaker": "A", "text": "hi"}',
    "emoji_zwj.txt": "Ann: family 👨‍👩‍👧‍👦 and flags 🇳🇴 and skin 👍🏽\nBob: ❤️‍🔥\n".encode(),
    "mixed_scripts.jsonl": _jsonl(
        _rec("Hello 你好 Привет مرحبا שלום こんにちは 안녕"), _rec("e\u0301 \u200b zero-width")
    ),
    "rtl_marks.txt": "Ann: \u200fשלום\u200e world\nBob: \u202eevil\u202c\n".encode(),
    "out_of_order.jsonl": _jsonl(
        _rec("third", "2024-01-03"), _rec("first", "2024-01-01"), _rec("second", "2024-01-02")
    ),
    "future.jsonl": _jsonl(_rec("from the future", FUTURE), _rec("epoch ms", "1704189600000")),
    "bad_ts.jsonl": _jsonl(_rec("ok"), _rec("bad", "yesterday-ish"), {"speaker": "Ann", "text": "no ts"}),
    "only_blank.txt": b"\n\n   \n\t\n",
    "empty.jsonl": b"",
    "not_a_chat.csv": b"a,b,c\n1,2,3\n4,5,6\n",
    "surrogate_escape.jsonl": b'{"speaker": "Ann", "ts": "2024-01-02", "text": "\\ud800 lone"}\n'
    + _jsonl(_rec("fine")),
    "control_chars.txt": b"Ann: bell\x07 and escape \x1b[31mred\x1b[0m\nBob: ok\n",
    "huge_speaker.txt": b"A" * 10_000 + b": text\nBob: ok\n",
}


@pytest.fixture()
def store(tmp_path: Path) -> RawStore:
    return RawStore(tmp_path)


def _check_nothing_lost(data: bytes, res: IngestResult, store: RawStore) -> None:
    msgs, rejects = res.messages.to_pylist(), res.rejects.to_pylist()
    assert res.n_input == len(msgs) + len(rejects)
    assert res.n_input > 0 or not data.strip(), "a non-empty file vanished without a trace"
    for r in rejects:
        assert r["reason"] in E.REASONS, r
        raw = store.read(r["tenant"], r["raw_path"], _sha(store, r))
        assert len(raw) == r["length"]
        assert raw in data or r["line"] == 0 and raw == data or r["format"] == "locomo_json", r["reason"]
    chunks = {c["id"]: c for c in res.raw_chunks.to_pylist()}
    for m in msgs:
        assert m["text"].strip()
        parts = [
            store.excerpt(
                m["tenant"],
                chunks[ref["raw_id"]]["path"],
                chunks[ref["raw_id"]]["sha256"],
                ref["offset"],
                ref["length"],
            )
            for ref in m["raw_refs"]
        ]
        assert b"".join(parts).decode("utf-8") == m["text"]


def _sha(store: RawStore, reject: dict) -> str:
    return reject["raw_path"].rsplit("raw_", 1)[1].removesuffix(".blob.zst")


@pytest.mark.parametrize("name", sorted(NASTY))
def test_nasty_file_is_conserved(name: str, store: RawStore) -> None:
    data = NASTY[name]
    res = ingest_bytes(data, f"alice/{name}", "alice", store)
    _check_nothing_lost(data, res, store)


def test_what_the_nasty_files_become(store: RawStore) -> None:
    def ingest(name: str) -> IngestResult:
        return ingest_bytes(NASTY[name], f"alice/{name}", "alice", store)

    def reasons(name: str) -> list[str]:
        return ingest(name).rejects.column("reason").to_pylist()

    def texts(name: str) -> list[str]:
        return ingest(name).messages.column("text").to_pylist()

    assert texts("bom.jsonl") == ["hello with a BOM"] and texts("bom.txt") == ["hello", "你好"]
    assert texts("crlf.txt") == ["one", "two\nstill two"] and texts("crlf.jsonl") == ["one", "two"]
    assert reasons("nul_bytes.txt") == [E.E_READ_BINARY] and reasons("latin1.txt") == [E.E_READ_UTF8]
    assert texts("invalid_utf8_line.jsonl") == ["good"] and reasons("invalid_utf8_line.jsonl") == [E.E_READ_UTF8]
    assert texts("deep_json.jsonl") == ["after the deep one"]
    assert reasons("deep_json.jsonl") in ([E.E_JSON_PARSE], [E.E_JSON_SHAPE])
    assert len(reasons("deep_document.json")) == 1
    assert texts("truncated.jsonl") == ["whole"] and reasons("truncated.jsonl") == [E.E_JSON_PARSE]
    assert reasons("truncated_locomo.json") == [E.E_JSON_PARSE]
    assert texts("emoji_zwj.txt") == ["family 👨‍👩‍👧‍👦 and flags 🇳🇴 and skin 👍🏽", "❤️‍🔥"]
    assert texts("mixed_scripts.jsonl")[0] == "Hello 你好 Привет مرحبا שלום こんにちは 안녕"
    assert texts("rtl_marks.txt") == ["\u200fשלום\u200e world", "\u202eevil\u202c"]
    # the file's order is kept (seq), the timestamps are kept as written, never "corrected"
    out_of_order = ingest("out_of_order.jsonl").messages.to_pylist()
    assert [m["text"] for m in sorted(out_of_order, key=lambda m: m["seq"])] == ["third", "first", "second"]
    assert str(ingest("future.jsonl").messages.column("ts")[0].as_py()) == FUTURE
    assert sorted(reasons("bad_ts.jsonl")) == sorted([E.E_TS_PARSE, E.E_TS_MISSING])
    assert reasons("only_blank.txt") == [E.E_READ_EMPTY] and reasons("empty.jsonl") == [E.E_READ_EMPTY]
    assert reasons("not_a_chat.csv") == [E.E_FORMAT_UNKNOWN]
    assert texts("surrogate_escape.jsonl") == ["fine"] and reasons("surrogate_escape.jsonl") == [E.E_JSON_SHAPE]


def test_duplicate_files_store_their_bytes_once(store: RawStore) -> None:
    data = NASTY["emoji_zwj.txt"]
    a = ingest_bytes(data, "alice/a.txt", "alice", store)
    files = sorted((store.root / "raw").rglob("*.blob.zst"))
    b = ingest_bytes(data, "alice/copy/a.txt", "alice", store)
    assert sorted((store.root / "raw").rglob("*.blob.zst")) == files  # same chunk bytes, one blob
    assert a.raw_chunks.column("id").to_pylist() == b.raw_chunks.column("id").to_pylist()
    assert a.messages.column("conv_id").to_pylist() != b.messages.column("conv_id").to_pylist()


def test_fifty_megabyte_single_line(store: RawStore) -> None:
    line = b"Ann: " + b"na" * (25 << 20) + b"\nBob: after the flood\n"
    res = ingest_bytes(line, "alice/flood.txt", "alice", store)
    _check_nothing_lost(line, res, store)
    assert res.messages.column("text").to_pylist() == ["after the flood"]
    [reject] = res.rejects.to_pylist()
    assert reject["reason"] == E.E_MSG_TOO_LARGE and reject["length"] > MAX_MESSAGE_BYTES
