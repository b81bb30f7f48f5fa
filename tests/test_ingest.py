"""Ingest: file bytes → CAS blobs + messages/raw_chunks/rejects tables, cited byte-exact, deterministic."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from raw_store import errors as E
from raw_store import schema
from raw_store.cas import RawStore
from raw_store.ingest import IngestResult, ingest_bytes, ingest_file
from raw_store.lake import read_table, write_table

FIXTURES = Path(__file__).parent / "fixtures" / "raw"


@pytest.fixture
def store(tmp_path: Path) -> RawStore:
    return RawStore(tmp_path / "data")


def _ingest(name: str, store: RawStore, tenant: str = "alice") -> IngestResult:
    return ingest_bytes((FIXTURES / name).read_bytes(), f"{tenant}/{name}", tenant, store)


def _assert_citations_exact(res: IngestResult, store: RawStore) -> None:
    """Every message's raw_refs recover its text byte for byte from sha-verified blobs."""
    chunks = {(r["tenant"], r["id"]): r for r in res.raw_chunks.to_pylist()}
    for m in res.messages.to_pylist():
        got = b""
        for ref in m["raw_refs"]:
            c = chunks[(m["tenant"], ref["raw_id"])]
            got += store.excerpt(m["tenant"], c["path"], c["sha256"], ref["offset"], ref["length"])
        assert got.decode() == m["text"]
        assert (m["raw_id"], m["offset"], m["length"]) == tuple(m["raw_refs"][0].values())


@pytest.mark.parametrize("name", ["canonical.jsonl", "transcript.txt", "locomo.json"])
def test_fixture_tables_follow_schemas(name: str, store: RawStore) -> None:
    res = _ingest(name, store)
    assert res.messages.schema == schema.MESSAGES
    assert res.raw_chunks.schema == schema.RAW_CHUNKS
    assert res.rejects.schema == schema.REJECTS
    assert res.n_input == res.messages.num_rows + res.rejects.num_rows
    assert res.source_sha256 == hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest()
    _assert_citations_exact(res, store)
    keys = [(r["tenant"], r["conv_id"], r["seq"]) for r in res.messages.to_pylist()]
    assert keys == sorted(keys)


def test_message_columns(store: RawStore) -> None:
    res = _ingest("canonical.jsonl", store)
    rows = {r["msg_id"]: r for r in res.messages.to_pylist()}
    zh = rows["6"]
    assert zh["lang"] == "zh" and rows["m1"]["lang"] == "en"
    assert zh["text_sha"] == hashlib.sha256("小明在公园里踢足球".encode()).hexdigest()
    assert zh["format"] == "canonical_jsonl" and zh["line"] == 6 and zh["source_file"] == "alice/canonical.jsonl"
    assert rows["9"]["tenant"] == "bob"
    bob_chunk = [c for c in res.raw_chunks.to_pylist() if c["tenant"] == "bob"][0]
    assert bob_chunk["path"].startswith("raw/bob/2024/01/04/")


def test_raw_chunk_row(store: RawStore) -> None:
    res = _ingest("locomo.json", store)
    [c] = res.raw_chunks.to_pylist()
    body = store.read("alice", c["path"], c["sha256"])
    assert c["text"] == body.decode() and c["len_bytes"] == len(body)
    assert c["id"] == "raw_" + c["sha256"][:32]
    assert c["path"].startswith("raw/alice/2023/05/08/")
    assert c["mime"] == "text/plain; charset=utf-8"
    assert c["created_at"] == c["ts"] == dt.datetime(2023, 5, 8, 13, 56)
    assert c["ts_end"] == dt.datetime(2023, 5, 25, 13, 14)
    assert c["speaker"] == ["Caroline", "Melanie"] and c["role"] == ["user"]
    assert c["lang"] == "en" and c["n_messages"] == 5 and c["conv_id"] == "conv-26" and c["seq"] == 0
    assert c["offsets"] == [r["offset"] for r in res.messages.to_pylist()]
    assert c["source_file"] == "alice/locomo.json"
    assert "SECRET_QUERY_TOKEN" not in c["text"]


def test_rejects_are_stored_and_coded(store: RawStore) -> None:
    res = _ingest("canonical.jsonl", store)
    rows = res.rejects.to_pylist()
    assert [(r["line"], r["reason"]) for r in rows] == [
        (3, E.E_JSON_PARSE),
        (4, E.E_TS_PARSE),
        (7, E.E_TEXT_EMPTY),
        (8, E.E_TS_MISSING),
        (10, E.E_JSON_SHAPE),
    ]
    for r in rows:
        assert r["raw_path"].startswith("raw/alice/0000/00/00/")
        sha = r["raw_path"].rsplit("raw_", 1)[1].removesuffix(".blob.zst")
        raw = store.read("alice", r["raw_path"], sha)
        assert len(raw) == r["length"] and r["raw_id"] == "raw_" + sha[:32]
        assert (FIXTURES / "canonical.jsonl").read_bytes()[r["byte_offset"] :].startswith(raw)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", E.E_READ_EMPTY),
        (b"Alice: caf\xe9 au lait\nBob: na\xefve\n", E.E_READ_UTF8),
        (b"\x00\x01\x02binary", E.E_READ_BINARY),
        (b"no chat here\njust prose\n", E.E_FORMAT_UNKNOWN),
    ],
)
def test_bad_files_become_one_stored_reject(data: bytes, reason: str, store: RawStore) -> None:
    res = ingest_bytes(data, "bad.txt", "alice", store)
    assert res.messages.num_rows == 0 and res.raw_chunks.num_rows == 0 and res.n_input == 1
    [row] = res.rejects.to_pylist()
    assert (row["line"], row["reason"], row["length"]) == (0, reason, len(data))
    sha = hashlib.sha256(data).hexdigest()
    assert store.read("alice", row["raw_path"], sha) == data


def test_good_lines_land_beside_bad_ones(store: RawStore) -> None:
    good = json.dumps({"conv_id": "c", "speaker": "A", "ts": "2024-01-01 09:00", "text": "I like tea."})
    data = f"{good}\n{{oops\n".encode() + b'{"conv_id": "c", "speaker": "A", "ts": "2024-01-01", "text": "\xff"}\n'
    res = ingest_bytes(data, "mixed.jsonl", "alice", store)
    assert res.messages.column("text").to_pylist() == ["I like tea."]
    assert res.rejects.column("reason").to_pylist() == [E.E_JSON_PARSE, E.E_READ_UTF8]
    assert res.n_input == 3


def test_deterministic_and_idempotent(tmp_path: Path) -> None:
    data = (FIXTURES / "transcript.txt").read_bytes() + (FIXTURES / "transcript.txt").read_bytes()
    a_store, b_store = RawStore(tmp_path / "a"), RawStore(tmp_path / "b")
    a = ingest_bytes(data, "x/t.txt", "x", a_store)
    a2 = ingest_bytes(data, "x/t.txt", "x", a_store)
    b = ingest_bytes(data, "x/t.txt", "x", b_store)
    for r1, r2, r3 in (
        (a.messages, a2.messages, b.messages),
        (a.raw_chunks, a2.raw_chunks, b.raw_chunks),
        (a.rejects, a2.rejects, b.rejects),
    ):
        assert r1.equals(r2) and r1.equals(r3)

    def files(root: Path) -> list[str]:
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    assert files(tmp_path / "a") == files(tmp_path / "b")


def test_tables_roundtrip_through_parquet(tmp_path: Path, store: RawStore) -> None:
    res = _ingest("locomo.json", store)
    for table, sch in (
        (res.messages, schema.MESSAGES),
        (res.raw_chunks, schema.RAW_CHUNKS),
        (res.rejects, schema.REJECTS),
    ):
        path = tmp_path / "t.parquet"
        write_table(table, path, sch)
        assert read_table(path, sch).equals(table)


def test_long_conversation_spans_chunks_and_appending_reuses_blobs(store: RawStore) -> None:
    lines = [
        f"[2024-01-01 10:{i // 60:02d}:{i % 60:02d}] {'Alice' if i % 2 else 'Bob'}: "
        + " ".join(f"topic{i} word{k}" for k in range(40))
        for i in range(400)
    ]
    first = ingest_bytes("\n".join(lines[:300]).encode(), "alice/log.txt", "alice", store)
    second = ingest_bytes("\n".join(lines).encode(), "alice/log.txt", "alice", store)
    assert first.raw_chunks.num_rows > 3
    ids1, ids2 = first.raw_chunks.column("id").to_pylist(), second.raw_chunks.column("id").to_pylist()
    assert ids2[: len(ids1) - 1] == ids1[:-1]  # earlier complete chunks reproduced, stored once
    _assert_citations_exact(second, store)
    n_blobs = len(list((store.root / "raw").rglob("*.blob.zst")))
    assert n_blobs == len(set(ids1) | set(ids2))


def test_oversized_message_has_several_raw_refs(store: RawStore) -> None:
    text = "\n\n".join(" ".join(f"w{p}_{k}." for k in range(300)) for p in range(12))
    rec = json.dumps({"conv_id": "c", "speaker": "A", "ts": "2024-01-01", "text": text})
    res = ingest_bytes(rec.encode(), "big.jsonl", "alice", store)
    [m] = res.messages.to_pylist()
    assert len(m["raw_refs"]) > 1
    assert sum(c["n_messages"] for c in res.raw_chunks.to_pylist()) == len(m["raw_refs"])
    _assert_citations_exact(res, store)


def test_ingest_file_from_inbox(tmp_path: Path, store: RawStore) -> None:
    inbox = tmp_path / "inbox"
    (inbox / "alice" / "chats").mkdir(parents=True)
    shutil.copy(FIXTURES / "transcript.txt", inbox / "alice" / "chats" / "day1.txt")
    shutil.copy(FIXTURES / "canonical.jsonl", inbox / "loose.jsonl")
    res = ingest_file(inbox / "alice" / "chats" / "day1.txt", inbox, store)
    assert res.source_file == "alice/chats/day1.txt" and res.format == "transcript"
    assert set(res.messages.column("conv_id").to_pylist()) == {"chats/day1"}
    assert set(res.messages.column("tenant").to_pylist()) == {"alice"}
    loose = ingest_file(inbox / "loose.jsonl", inbox, store)
    assert set(loose.rejects.column("tenant").to_pylist()) == {"default"}
    assert isinstance(loose.messages, pa.Table)


_LINES = st.sampled_from(
    [
        "Alice: hello there",
        "[2024-01-02 10:00] Bob: 我们去公园踢足球吧",
        "  and more",
        "garbage line",
        "",
        "[bad] Bob: x",
        "Carol: " + "long words here. " * 40,
    ]
)


@given(st.lists(_LINES, min_size=1, max_size=30))
@fuzz_settings(40)
def test_fuzz_ingest_conserves_and_cites(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = RawStore(Path(d))
        res = ingest_bytes("\n".join(lines).encode(), "f.txt", "t", store)
        assert res.n_input == res.messages.num_rows + res.rejects.num_rows >= 1
        _assert_citations_exact(res, store)
