"""jobs.sparsify: seed 004 §22.1 degree caps by weight × recency, SIMILAR_TO threshold, cold edges kept."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.sparsify import STRUCTURAL_EDGE_TYPES, SparsifyConfig, sparsify
from r2g.schema import COLD_EDGES, EDGES, NODES

AS_OF = datetime(2023, 6, 1)
DAY = timedelta(days=1)


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)


def node(
    tenant: str, nid: str, type: str = "Concept", last_seen: datetime | None = None, time_start: datetime | None = None
) -> dict:
    return {"tenant": tenant, "id": nid, "type": type, "last_seen": last_seen, "time_start": time_start}


def edge(
    tenant: str,
    eid: str,
    src: str,
    dst: str,
    type: str = "ABOUT",
    weight: float | None = 0.5,
    valid_since: datetime | None = None,
) -> dict:
    return {
        "tenant": tenant,
        "id": eid,
        "src": src,
        "dst": dst,
        "type": type,
        "weight": weight,
        "valid_since": valid_since,
        "provenance": "r2g.rule.about.v1",
    }


def run(nodes: list[dict], edges: list[dict], config: SparsifyConfig = SparsifyConfig()):
    return sparsify(_table(nodes, NODES), _table(edges, EDGES), AS_OF, config)


def ids(table: pa.Table) -> list[str]:
    return table.column("id").to_pylist()


def test_cap_keeps_top_k_by_weight_times_recency() -> None:
    nodes = [
        node("t", "ep", "Episode"),
        node("t", "c_new", last_seen=AS_OF - DAY),
        node("t", "c_old", last_seen=AS_OF - 400 * DAY),
        node("t", "c_mid", last_seen=AS_OF - 30 * DAY),
        node("t", "c_none"),
    ]
    edges = [
        edge("t", "e_new", "ep", "c_new", weight=0.4),  # 0.4·e^(-1/180)   ≈ 0.398
        edge("t", "e_old", "ep", "c_old", weight=0.9),  # 0.9·e^(-400/180) ≈ 0.098
        edge("t", "e_mid", "ep", "c_mid", weight=0.5),  # 0.5·e^(-30/180)  ≈ 0.423
        edge("t", "e_none", "ep", "c_none", weight=1.0),
    ]  # undated: 0
    out = run(nodes, edges, SparsifyConfig(caps={"ABOUT": 2}))
    assert ids(out.edges) == ["e_mid", "e_new"]
    assert out.cold.to_pylist() == [
        {**_table([edges[3]], EDGES).to_pylist()[0], "reason": "degree_cap:ABOUT>2", "capped_at": AS_OF},
        {**_table([edges[1]], EDGES).to_pylist()[0], "reason": "degree_cap:ABOUT>2", "capped_at": AS_OF},
    ]
    assert out.cold.schema == COLD_EDGES and out.edges.schema == EDGES


def test_valid_since_overrides_endpoint_time_and_tau_follows_endpoint_type() -> None:
    # Same 20-day age: an Episode endpoint (τ 14 d) decays far more than a Concept one (τ 180 d).
    nodes = [
        node("t", "f", "Fact"),
        node("t", "ep", "Episode", last_seen=AS_OF),
        node("t", "c", "Concept", last_seen=AS_OF - 20 * DAY),
    ]
    edges = [
        edge("t", "e_ep", "f", "ep", "SUPPORTS", 0.8, valid_since=AS_OF - 20 * DAY),  # 0.8·e^(-20/14) ≈ 0.19
        edge("t", "e_c", "f", "c", "SUPPORTS", 0.5),
    ]  # 0.5·e^(-20/180) ≈ 0.45
    out = run(nodes, edges, SparsifyConfig(caps={"SUPPORTS": 1}))
    assert ids(out.edges) == ["e_c"] and ids(out.cold) == ["e_ep"]


def test_ties_break_on_weight_then_time_then_id() -> None:
    nodes = [node("t", "a", "Episode"), *(node("t", f"c{i}") for i in range(4))]
    edges = [
        edge("t", "e3", "a", "c0", weight=0.7),
        edge("t", "e1", "a", "c1", weight=0.7),
        edge("t", "e2", "a", "c2", weight=0.9),
        edge("t", "e0", "a", "c3", weight=None),
    ]
    out = run(nodes, edges, SparsifyConfig(caps={"ABOUT": 2}))  # all undated: score 0 → weight, then id
    assert ids(out.edges) == ["e1", "e2"]
    assert ids(out.cold) == ["e0", "e3"]


def test_similar_to_threshold_then_symmetric_cap() -> None:
    nodes = [node("t", x, "Fact", last_seen=AS_OF) for x in "abcd"]
    edges = [
        edge("t", "s_low", "a", "b", "SIMILAR_TO", 0.74),
        edge("t", "s_ab", "a", "c", "SIMILAR_TO", 0.9),
        edge("t", "s_db", "d", "c", "SIMILAR_TO", 0.95),  # c now has two: only the best stays at c
        edge("t", "s_nul", "b", "d", "SIMILAR_TO", None),
    ]
    out = run(nodes, edges, SparsifyConfig(caps={"SIMILAR_TO": 1}))
    assert ids(out.edges) == ["s_db"]
    assert dict(zip(ids(out.cold), out.cold.column("reason").to_pylist())) == {
        "s_ab": "degree_cap:SIMILAR_TO>1",
        "s_low": "similar_to<0.75",
        "s_nul": "similar_to<0.75",
    }


def test_structural_edges_are_never_capped() -> None:
    nodes = [node("t", "ep", "Episode"), *(node("t", f"n{i}", "Episode") for i in range(5))]
    edges = [edge("t", f"{ty}{i}", "ep", f"n{i}", ty) for ty in sorted(STRUCTURAL_EDGE_TYPES) for i in range(5)]
    edges.append(edge("t", "m0", "ep", "n0", "MENTIONS"))
    out = run(nodes, edges, SparsifyConfig(caps={}, default_cap=0))
    assert sorted(ids(out.edges)) == sorted(e["id"] for e in edges if e["type"] != "MENTIONS")
    assert ids(out.cold) == ["m0"]


@pytest.mark.parametrize("bad", [{"caps": {"DERIVED_FROM": 3}}, {"caps": {"ABOUT": -1}}, {"default_tau_days": 0}])
def test_config_rejects_nonsense(bad: dict) -> None:
    with pytest.raises(ValueError):
        SparsifyConfig(**bad)


def test_seed_defaults() -> None:
    cfg = SparsifyConfig()
    assert [cfg.cap(t) for t in ("ABOUT", "SIMILAR_TO", "MENTIONS", "TEMPORAL_NEXT")] == [256, 64, 256, None]
    assert cfg.similar_threshold == 0.75
    assert dict(cfg.tau_days) == {"Episode": 14.0, "Fact": 90.0, "Concept": 180.0}


def test_tenants_are_capped_separately() -> None:
    # Same node ids in two tenants: each tenant's "a" has its own budget, and t2's endpoint time
    # (recent) must not leak into t1's ranking.
    nodes = [
        node("t1", "a", "Episode"),
        node("t1", "x", last_seen=AS_OF - 300 * DAY),
        node("t1", "y", last_seen=AS_OF),
        node("t2", "a", "Episode"),
        node("t2", "x", last_seen=AS_OF),
        node("t2", "y", last_seen=AS_OF - 300 * DAY),
    ]
    edges = [edge(t, f"{t}_{d}", "a", d) for t in ("t1", "t2") for d in "xy"]
    out = run(nodes, edges, SparsifyConfig(caps={"ABOUT": 1}))
    assert ids(out.edges) == ["t1_y", "t2_x"]
    assert ids(out.cold) == ["t1_x", "t2_y"]


def test_shuffled_input_gives_identical_output() -> None:
    rng = random.Random(7)
    nodes = [
        node(t, f"n{i}", rng.choice(["Episode", "Fact", "Concept"]), last_seen=AS_OF - rng.randint(0, 99) * DAY)
        for t in ("t1", "t2")
        for i in range(8)
    ]
    edges = [
        edge(
            t,
            f"{t}e{k}",
            f"n{rng.randrange(8)}",
            f"n{rng.randrange(8)}",
            rng.choice(["ABOUT", "SIMILAR_TO", "MENTIONS", "TEMPORAL_NEXT"]),
            round(rng.random(), 2),
        )
        for t in ("t1", "t2")
        for k in range(40)
    ]
    cfg = SparsifyConfig(caps={"ABOUT": 2, "SIMILAR_TO": 1, "MENTIONS": 3})
    base = run(nodes, edges, cfg)
    for seed in range(3):
        n2, e2 = nodes[:], edges[:]
        random.Random(seed).shuffle(n2)
        random.Random(seed).shuffle(e2)
        again = run(n2, e2, cfg)
        assert again.edges.equals(base.edges) and again.cold.equals(base.cold)


def test_empty_inputs() -> None:
    out = sparsify(NODES.empty_table(), EDGES.empty_table(), AS_OF)
    assert out.edges.num_rows == 0 and out.cold.num_rows == 0 and out.cold.schema == COLD_EDGES


_TYPES = ["ABOUT", "SIMILAR_TO", "MENTIONS", "DERIVED_FROM"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["t1", "t2"]),
            st.integers(0, 5),
            st.integers(0, 5),
            st.sampled_from(_TYPES),
            st.one_of(st.none(), st.floats(0, 1)),
            st.one_of(st.none(), st.integers(0, 200)),
        ),
        max_size=50,
    ),
    st.integers(0, 3),
)
def test_nothing_lost_and_caps_hold(rows: list[tuple], cap: int) -> None:
    nodes = [node(t, f"n{i}", "Fact", last_seen=AS_OF - i * 10 * DAY) for t in ("t1", "t2") for i in range(6)]
    edges = [
        edge(t, f"{t}_{k}", f"n{s}", f"n{d}", ty, w, None if age is None else AS_OF - age * DAY)
        for k, (t, s, d, ty, w, age) in enumerate(rows)
    ]
    out = run(nodes, edges, SparsifyConfig(caps={"ABOUT": cap, "SIMILAR_TO": cap, "MENTIONS": cap}))
    given_rows = _table(edges, EDGES).to_pylist()
    back = out.edges.to_pylist() + [
        {k: v for k, v in r.items() if k not in ("reason", "capped_at")} for r in out.cold.to_pylist()
    ]
    assert sorted(back, key=lambda r: r["id"]) == sorted(given_rows, key=lambda r: r["id"])
    assert set(out.cold.column("capped_at").to_pylist()) <= {AS_OF}
    kept = out.edges.to_pylist()
    out_deg = Counter((r["tenant"], r["src"], r["type"]) for r in kept if r["type"] != "DERIVED_FROM")
    assert max(out_deg.values(), default=0) <= cap
    sim_deg = Counter((r["tenant"], x) for r in kept if r["type"] == "SIMILAR_TO" for x in {r["src"], r["dst"]})
    assert max(sim_deg.values(), default=0) <= cap
    assert all(r["weight"] >= 0.75 for r in kept if r["type"] == "SIMILAR_TO")
    assert sum(r["type"] == "DERIVED_FROM" for r in kept) == sum(e["type"] == "DERIVED_FROM" for e in edges)
