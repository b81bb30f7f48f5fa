"""The static embedders (recall.static_vectors, recall.distil): distillation from the pinned weights is
deterministic, a tampered weight or table file is refused, text is routed to its language's table, and a
missing table turns stage B off with the reason in the build log and the recall trace."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

from recall import RecallConfig, recall
from recall.distil import distil_e5, distil_minilm, needed
from recall.index import build_indexes
from recall.static_vectors import (
    E5,
    MINILM,
    PINS,
    StaticEmbedder,
    StaticTable,
    TableError,
    TableMissing,
    check_file,
    load_static,
    read_table,
    site_file,
    space_of,
    table_dir,
    table_path,
    write_table,
)
from recall.vectors import VectorIndex, embed
from recall_fixtures import puppy_lake


@pytest.fixture(scope="module")
def small_tables() -> tuple[StaticTable, StaticTable]:
    """Tables distilled from the pinned weights over a small vocabulary (the full ones take a minute)."""
    return distil_minilm(limit=64), distil_e5(chars=24, words=8)


def test_distillation_is_deterministic(small_tables):
    minilm, e5 = small_tables
    assert distil_minilm(limit=64).table_sha256() == minilm.table_sha256()
    assert distil_e5(chars=24, words=8).table_sha256() == e5.table_sha256()
    assert minilm.source_sha256 == PINS[MINILM][1] and e5.source_sha256 == PINS[E5][1]
    assert e5.table.shape == (32, 256) and len(e5.tokens) == 32 and e5.table.dtype == np.float32


def test_a_table_round_trips_with_its_hashes(small_tables, tmp_path):
    for t in small_tables:
        write_table(t, tmp_path)
        back = read_table(t.name, tmp_path)
        assert back.table_sha256() == t.table_sha256() and back.source_sha256 == t.source_sha256
    assert needed(tmp_path) == []


def test_a_tampered_weight_file_is_refused(tmp_path):
    src = site_file(PINS[E5][0])
    copy = tmp_path / src.name
    shutil.copyfile(src, copy)
    assert check_file(copy, PINS[E5][1]) == PINS[E5][1]
    with copy.open("r+b") as f:
        f.seek(4096)
        b = f.read(1)
        f.seek(4096)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(TableError, match="not the pinned"):
        check_file(copy, PINS[E5][1])


def test_a_tampered_or_foreign_table_is_refused(small_tables, tmp_path):
    minilm, e5 = small_tables
    path = write_table(e5, tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(TableError):
        read_table(E5, tmp_path)
    assert needed(tmp_path) == [MINILM, E5]
    foreign = StaticTable(MINILM, minilm.table, (), minilm.tokenizer, "0" * 64)  # distilled from other weights
    write_table(foreign, tmp_path)
    with pytest.raises(TableError, match="pinned"):
        read_table(MINILM, tmp_path)
    with pytest.raises(TableMissing, match="recall.distil"):
        read_table(E5, tmp_path / "nowhere")


def test_language_routing(small_tables):
    emb = StaticEmbedder(*small_tables)
    assert [space_of(t) for t in ("I played football", "小明在公园里踢足球", "Xiaoming 踢足球", "")] == [0, 1, 1, 0]
    m, spaces = emb.embed(["a text", "小明在公园里踢足球", ""])
    assert spaces.tolist() == [0, 1, 0] and m.shape == (3, 128)  # the first 128 principal axes (VECTOR_DIMS)
    assert abs(float(np.linalg.norm(m[1])) - 1) < 1e-5 and not m[2].any()
    # a query meets only the vectors of its own space: a Chinese memory is never an English query's neighbour
    index = VectorIndex(np.array(["en", "zh"]), np.stack([m[1], m[1]]), "static", np.array([0, 1], np.int8))
    assert [i for i, _ in index.search(m[1], 5, space=1)] == ["zh"]
    assert [i for i, _ in index.search(m[1], 5, space=0)] == ["en"]


def test_the_installed_tables_are_semantic():
    """The tables set-up distilled (`python -m recall.distil`): related texts are nearer than unrelated ones."""
    m, spaces = embed(
        "static",
        [
            "Where did he play soccer?",
            "We played football in the park",
            "I bought groceries for dinner",
            "小明在哪里运动？",
            "小明在公园里踢足球",
            "我去超市买菜",
        ],
    )
    assert spaces.tolist() == [0, 0, 0, 1, 1, 1]
    assert m[0] @ m[1] > m[0] @ m[2] and m[3] @ m[4] > m[3] @ m[5]
    assert {t.name for t in (load_static().minilm, load_static().e5)} == {MINILM, E5}
    assert table_path(MINILM).parent == table_dir()


def test_weight_zero_is_the_same_as_vectors_off(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCTL_VECTORS", "static")
    lake = puppy_lake(tmp_path)
    for q in ("Biscuit agility", "What did the puppy win?"):
        off = recall(q, "t", k=10, lake=lake, config=RecallConfig(vectors_enabled=False))
        zero = recall(q, "t", k=10, lake=lake, config=RecallConfig(vectors_enabled=True, lambda_vector=0.0))
        assert [(r.node_id, r.score) for r in zero] == [(r.node_id, r.score) for r in off]
    trace: list = []
    on = recall("What did the puppy win?", "t", k=10, lake=lake, trace=trace, config=RecallConfig(vectors_enabled=True))
    stage = next(t for t in trace if t["stage"] == "vectors")
    assert stage["detail"]["state"] == "ok" and stage["n"] > 0 and any(r.breakdown.get("vector", 0) > 0 for r in on)


def test_a_missing_table_turns_vectors_off_and_says_why(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MEMCTL_VECTOR_TABLES", str(tmp_path / "no-tables"))
    monkeypatch.setenv("MEMCTL_VECTORS", "static")
    with caplog.at_level(logging.WARNING, logger="recall.index"):
        lake = puppy_lake(tmp_path / "lake")
        stats = build_indexes(lake)
    assert stats["vectors"]["off"].startswith("TableMissing") and "vectors OFF" in caplog.text
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace, config=RecallConfig(vectors_enabled=True))
    state = next(t for t in trace if t["stage"] == "vectors")["detail"]["state"]
    assert state.startswith("missing (TableMissing") and "recall.distil" in state
    assert got and got[0].node_id == "ep_j1"


def test_a_build_embeds_only_when_asked(tmp_path, monkeypatch):
    """Unset $MEMCTL_VECTORS: the build writes no vector file (stage B is off by default), and `--vectors` says the
    file is missing; a query still embeds with "static"."""
    from recall.vectors import build_spec, embedder_spec

    monkeypatch.delenv("MEMCTL_VECTORS", raising=False)
    assert build_spec() == "" and embedder_spec() == "static"
    lake = puppy_lake(tmp_path / "lake")
    assert build_indexes(lake)["vectors"]["off"].startswith("no embedder")
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace, config=RecallConfig(vectors_enabled=True))
    assert next(t for t in trace if t["stage"] == "vectors")["detail"]["state"].startswith("missing")
    assert got and got[0].node_id == "ep_j1"
