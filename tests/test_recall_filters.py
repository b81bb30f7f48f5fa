"""recall() filters (types, time range, as-of), MMR de-duplication and token-budget packing."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from raw_store.lake import Lake
from recall import RecallConfig, recall
from recall.engine import estimate_tokens, result_tokens
from recall.tenant_index import tenant_dir
from recall_fixtures import JULY, MAY, puppy_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """Built once for the module: the tests only read it (the one that damages the graph builds its own)."""
    return puppy_lake(tmp_path_factory.mktemp("puppy"))


def _ids(results) -> list[str]:
    return [r.node_id for r in results]


def test_types_filter(lake):
    got = recall("Biscuit puppy", "t", k=10, lake=lake, types=["Fact"])
    assert _ids(got) == ["f_m1"]


def test_time_range_keeps_what_overlaps_it(lake):
    got = _ids(recall("Biscuit puppy", "t", k=10, lake=lake, time_range=(datetime(2023, 7, 1), None)))
    assert "ep_j1" in got and "ent_biscuit" in got  # Biscuit's span (May–July) overlaps July
    assert not {"ep_m1", "ep_m2", "f_m1"} & set(got)
    got = _ids(recall("Biscuit puppy", "t", k=10, lake=lake, time_range=(datetime(2023, 5, 1), datetime(2023, 5, 31))))
    assert "ep_j1" not in got and "ent_contest" not in got and "ep_m1" in got


def test_as_of_sees_only_what_was_known_then_even_through_the_graph(lake):
    before = _ids(recall("Biscuit", "t", k=10, expand_depth=2, lake=lake, as_of=datetime(2023, 6, 1)))
    assert "ep_m1" in before
    # July's turn and the contest entity (reachable from Biscuit in two hops) did not exist yet
    assert not {"ep_j1", "ent_contest"} & set(before)
    # Biscuit was first seen in May, so the entity itself is known
    assert "ent_biscuit" in before
    after = _ids(recall("Biscuit", "t", k=10, expand_depth=2, lake=lake, as_of=datetime(2023, 8, 1)))
    assert {"ep_j1", "ent_contest"} <= set(after)


def test_aware_datetimes_are_read_as_utc(lake):
    aware = datetime(2023, 6, 1, tzinfo=timezone(timedelta(hours=8)))
    assert _ids(recall("Biscuit", "t", k=10, lake=lake, as_of=aware)) == _ids(
        recall("Biscuit", "t", k=10, lake=lake, as_of=datetime(2023, 5, 31, 16, 0))
    )


def test_bad_filters_are_errors(lake):
    with pytest.raises(ValueError):
        recall("Biscuit", "t", lake=lake, time_range=(JULY, MAY))
    with pytest.raises(ValueError):
        recall("Biscuit", "t", lake=lake, expand_depth=-1)
    with pytest.raises(ValueError):
        recall("Biscuit", "t", lake=lake, budget_tokens=-5)


def test_mmr_lets_a_second_line_in_before_a_duplicate_of_the_first(lake):
    plain = recall("adopted puppy Biscuit", "t", k=3, lake=lake, config=RecallConfig(mmr_lambda=1.0))
    mmr = recall("adopted puppy Biscuit", "t", k=3, lake=lake)
    # by score alone the Episode and the Fact of the same line both make the top 3
    assert {"ep_m1", "f_m1"} <= set(_ids(plain))
    # MMR keeps the first of them and fills the slot with another line
    assert len({"ep_m1", "f_m1"} & set(_ids(mmr))) == 1
    assert _ids(mmr)[0] == _ids(plain)[0]


def test_budget_packing_fits_the_budget_and_keeps_the_best(lake):
    full = recall("Biscuit puppy", "t", k=10, lake=lake)
    costs = [result_tokens(r) for r in full]
    assert (
        costs[0]
        == estimate_tokens(full[0].title)
        + estimate_tokens(full[0].text)
        + sum(estimate_tokens(c.excerpt) for c in full[0].citations)
        > 0
    )
    budget = sum(costs[:2]) + 1
    packed = recall("Biscuit puppy", "t", k=10, lake=lake, budget_tokens=budget)
    assert packed and len(packed) < len(full)
    assert sum(result_tokens(r) for r in packed) <= budget
    # at least half the best total score any subset within the budget reaches (the knapsack 2-approximation)
    best = max(
        sum(full[i].score for i in range(len(full)) if mask >> i & 1)
        for mask in range(1 << len(full))
        if sum(costs[i] for i in range(len(full)) if mask >> i & 1) <= budget
    )
    assert sum(r.score for r in packed) >= best / 2
    assert recall("Biscuit puppy", "t", k=10, lake=lake, budget_tokens=0) == []
    # results keep score order
    assert [r.score for r in packed] == sorted((r.score for r in packed), reverse=True)


def test_estimate_tokens():
    assert estimate_tokens("") == 0
    assert estimate_tokens("小明在公园") == 5
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("去gym了") == 2 + 1


# ---------------------------------------------------------------- degradation matrix (seed 004 §18)


def _stages(trace: list) -> dict[str, dict]:
    return {t["stage"]: t for t in trace}


def test_degradation_all_stages(lake):
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace)
    st = _stages(trace)
    assert st["seeds"]["n"] > 0 and st["expand"]["detail"]["graph"] == "ok" and st["expand"]["n"] > 0
    assert any(r.breakdown["graph"] > 0 for r in got)


def test_degradation_graph_switched_off_keyword_and_weight_only(lake):
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace, config=RecallConfig(graph_enabled=False))
    assert got and all(r.breakdown["graph"] == 0 for r in got)
    assert _stages(trace)["expand"]["detail"]["graph"] == "off"
    assert "ep_j1" in _ids(got)


@pytest.mark.parametrize("damage", ["missing", "unreadable"])
def test_degradation_graph_under_maintenance(tmp_path, damage):
    lake = puppy_lake(tmp_path)
    folder = tenant_dir(lake.index_dir, "t")
    for p in folder.glob("s*/adj_*.npy"):
        if damage == "missing":
            p.unlink()
        else:
            p.write_bytes(b"not an array")
    current = folder / "CURRENT"  # the same version swapped in again: the next recall opens the damaged files
    tmp = folder / ".CURRENT.tmp"
    tmp.write_bytes(current.read_bytes())
    tmp.replace(current)
    trace: list = []
    got = recall("Biscuit agility", "t", k=10, lake=lake, trace=trace)
    assert "ep_j1" in _ids(got) and all(r.breakdown["graph"] == 0 for r in got)
    assert _stages(trace)["expand"]["detail"]["graph"].startswith(damage)
    assert all(r.citations for r in got if r.type != "Entity")


def test_degradation_keyword_index_off_raw_passages_answer(lake):
    trace: list = []
    got = recall("agility contest", "t", k=10, lake=lake, trace=trace, config=RecallConfig(bm25_enabled=False))
    assert _stages(trace)["raw"]["detail"]["trigger"] == "few_seeds"
    assert got and got[0].type == "RawChunk"
    assert any("agility contest" in c.excerpt for c in got[0].citations)


def test_degradation_nothing_left_is_an_empty_answer_not_an_error(lake):
    cfg = RecallConfig(bm25_enabled=False, raw_fallback=False)
    assert recall("agility contest", "t", k=10, lake=lake, config=cfg) == []


def test_node_weight_follows_seed_004_6_1():
    from recall.scoring import node_weight

    cfg = RecallConfig()
    assert node_weight(1.0, 10, 1.0, None, cfg) == pytest.approx(1.0)
    assert node_weight(0.0, 1, 0.0, None, cfg) == pytest.approx(0.2 * (math.log1p(1) / math.log1p(10)))
    # more important, more frequent, more recent: more weight
    assert node_weight(0.9, 1, 0.5, None, cfg) > node_weight(0.3, 1, 0.5, None, cfg)
    assert node_weight(0.5, 8, 0.5, None, cfg) > node_weight(0.5, 1, 0.5, None, cfg)
    assert node_weight(0.5, 1, 0.9, None, cfg) > node_weight(0.5, 1, 0.1, None, cfg)
    assert node_weight(None, None, 0.0, None, cfg) == node_weight(0.5, 1, 0.0, None, cfg)
    emo = RecallConfig(weight_emotion=0.2)
    assert node_weight(0.5, 1, 0.5, -0.9, emo) > node_weight(0.5, 1, 0.5, 0.0, emo)
