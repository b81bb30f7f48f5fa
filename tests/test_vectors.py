"""Stage B (recall.vectors): the hashing embedder, the per-tenant vector files, and recall with vectors on
and off — the degradation matrix rows of seed 004 §18 that involve vectors. (The default static embedder:
tests/test_static_vectors.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from recall import RecallConfig, recall
from recall.index import build_indexes
from recall.vectors import HASHING_DIMS, embedder_spec, hashing_embedder, load_vectors, vector_path
from recall_fixtures import puppy_lake


def _cos(a: str, b: str) -> float:
    m = hashing_embedder([a, b])
    return float(m[0] @ m[1])


def _stages(trace: list) -> dict[str, dict]:
    return {t["stage"]: t for t in trace}


def constant_embedder(texts):
    """A plug-in embedder (module:callable) that sees every text alike."""
    return np.ones((len(texts), 8), dtype=np.float32)


def test_hashing_embedder_is_deterministic_normalised_and_lexical():
    m = hashing_embedder(["Biscuit won the puppy agility contest", "", "小明在公园里踢足球"])
    assert m.shape == (3, HASHING_DIMS) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m[[0, 2]], axis=1), 1.0, atol=1e-5) and not m[1].any()
    assert np.array_equal(m, hashing_embedder(["Biscuit won the puppy agility contest", "", "小明在公园里踢足球"]))
    assert _cos("footbal", "they played football") > _cos("footbal", "we went hiking") + 0.2
    assert _cos("踢足球", "小明在公园里踢足球") > _cos("踢足球", "我今天不开心，因为昨晚没睡好") + 0.2


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCTL_VECTORS", "hashing")
    return puppy_lake(tmp_path)


def test_index_build_writes_the_tenants_vectors(lake):
    index = load_vectors(lake, next(p.stem for p in (lake.index_dir / "vectors").glob("*.npz")))
    assert index.spec == "hashing" and index.vectors.shape[1] == HASHING_DIMS
    assert sorted(index.ids.tolist()) == ["ep_j1", "ep_m1", "ep_m2"]  # the Episodes (vectors.VECTOR_TYPES)


def test_off_by_default(lake):
    assert embedder_spec() == "hashing" and not RecallConfig().vectors_enabled
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace)
    assert _stages(trace)["vectors"]["detail"]["state"] == "off" and all("vector" not in r.breakdown for r in got)


def test_the_default_embedder_is_static(monkeypatch):
    monkeypatch.delenv("MEMCTL_VECTORS", raising=False)
    assert embedder_spec() == "static"
    for off in ("", "off", " OFF "):
        monkeypatch.setenv("MEMCTL_VECTORS", off)
        assert embedder_spec() == ""


def test_vectors_find_what_bm25_misses(lake):
    typo = "Biscit agilty contst"
    assert recall(typo, "t", k=10, lake=lake, config=RecallConfig(raw_fallback=False, vectors_enabled=False)) == []
    trace: list = []
    got = recall(
        typo, "t", k=10, lake=lake, trace=trace, config=RecallConfig(vectors_enabled=True, lambda_vector=0.4 / 0.6)
    )
    assert _stages(trace)["vectors"]["detail"]["state"] == "ok"
    assert got[0].node_id == "ep_j1" and got[0].breakdown["vector"] > 0 and got[0].breakdown["bm25"] == 0
    assert any("agility contest" in c.excerpt for c in got[0].citations)


def test_all_stages_a_b_c(lake):
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace, config=RecallConfig(vectors_enabled=True))
    st = _stages(trace)
    assert st["seeds"]["n"] > 0 and st["vectors"]["n"] > 0 and st["expand"]["detail"]["graph"] == "ok"
    assert got[0].node_id == "ep_j1"
    assert all(r.breakdown["vector"] > 0 for r in got if r.node_id in ("ep_j1", "ep_m1"))
    assert any(r.breakdown["graph"] > 0 for r in got)


def test_graph_under_maintenance_keywords_and_vectors_answer(lake):
    cfg = RecallConfig(vectors_enabled=True, graph_enabled=False)
    got = recall("Biscuit agility", "t", k=10, lake=lake, config=cfg)
    assert got[0].node_id == "ep_j1" and all(r.breakdown["graph"] == 0 for r in got)


def test_vectors_alone_answer(lake):
    cfg = RecallConfig(vectors_enabled=True, graph_enabled=False, bm25_enabled=False, raw_fallback=False)
    got = recall("puppy agility contest", "t", k=3, lake=lake, config=cfg)
    assert got[0].node_id == "ep_j1" and got[0].citations


def test_vector_index_not_ready_degrades_to_a_then_c(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCTL_VECTORS", "off")
    lake = puppy_lake(tmp_path)  # built without vectors
    for spec, state in ((None, "no embedder"), ("hashing", "missing")):
        trace: list = []
        got = recall(
            "Biscuit agility",
            "t",
            k=10,
            lake=lake,
            trace=trace,
            config=RecallConfig(vectors_enabled=True, vector_embedder=spec),
        )
        assert _stages(trace)["vectors"]["detail"]["state"] == state
        assert got[0].node_id == "ep_j1" and all(r.breakdown["vector"] == 0 for r in got)


def test_another_embedders_index_is_not_used(lake):
    trace: list = []
    cfg = RecallConfig(vectors_enabled=True, vector_embedder="tests.test_vectors:constant_embedder")
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace, config=cfg)
    assert _stages(trace)["vectors"]["detail"]["state"].startswith("embedder mismatch")
    assert got and all(r.breakdown["vector"] == 0 for r in got)


def test_a_plugged_in_embedder_builds_and_serves(lake, monkeypatch):
    monkeypatch.setenv("MEMCTL_VECTORS", "tests.test_vectors:constant_embedder")
    build_indexes(lake)
    slug = next(p.stem for p in (lake.index_dir / "vectors").glob("*.npz"))
    assert load_vectors(lake, slug).spec == "tests.test_vectors:constant_embedder"
    got = recall("anything at all", "t", k=10, lake=lake, config=RecallConfig(vectors_enabled=True, raw_fallback=False))
    assert {r.node_id for r in got} >= {"ep_j1", "ep_m1"}  # every node is as near as any other


def test_switching_vectors_off_removes_the_files(lake, monkeypatch):
    slug = next(p.stem for p in (lake.index_dir / "vectors").glob("*.npz"))
    monkeypatch.setenv("MEMCTL_VECTORS", "off")
    build_indexes(lake)
    assert not vector_path(lake, slug).exists()


def test_a_bad_embedder_name_is_refused(lake, monkeypatch):
    monkeypatch.setenv("MEMCTL_VECTORS", "not-a-module")
    with pytest.raises(ValueError, match="module:callable"):
        build_indexes(lake)
