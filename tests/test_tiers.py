"""jobs.tiers: promotion, decay, BOOST anti-abuse and the tiers_monotone check, on small hand-built tables."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.checks import tiers_monotone
from jobs.tiers import DecayRule, TierConfig, apply_boosts, counted_events, decayed_weight, promote
from r2g.ids import stable_id
from r2g.schema import EDGES, FEEDBACK, NODES, PROMOTIONS, REVIEW_QUEUE
from raw_store.lake import conform

PROMOTION, REVIEW = "jobs.tiers.promotion.v1", "jobs.tiers.review.v1"
D0 = datetime(2024, 3, 1, 9, 0)
H = timedelta(hours=1)
DAY = timedelta(days=1)
FACT = DecayRule(5.0, 0.85)
EPISODE = DecayRule(3.0, 0.6)


def node(
    id: str, type: str = "Fact", tenant: str = "t1", seen: datetime = D0, importance: float = 0.5, **extra
) -> dict:
    return {
        "id": id,
        "tenant": tenant,
        "type": type,
        "title": id,
        "text": id,
        "importance": importance,
        "confidence": 0.5,
        "frequency": 1,
        "first_seen": seen,
        "last_seen": seen,
        "time_start": seen,
        "tier": "short",
        "category": "episode" if type == "Episode" else "fact",
        "status": "open" if type == "Task" else "active",
        "raw_refs": [{"raw_id": f"raw_{id}", "offset": 0, "length": 5}],
        **extra,
    }


def nodes_table(rows: list[dict]) -> pa.Table:
    return conform(pa.Table.from_pylist(rows, schema=pa.schema([f for f in NODES if f.name in rows[0]])), NODES)


def fb(events: list[tuple], tenant: str = "t1") -> pa.Table:
    """(node_id, kind, at) rows as a FEEDBACK table."""
    return pa.Table.from_pylist(
        [{"tenant": tenant, "node_id": n, "kind": k, "at": at, "source": "recall"} for n, k, at in events],
        schema=FEEDBACK,
    )


NO_FEEDBACK = FEEDBACK.empty_table()


def by_id(table: pa.Table, key: str = "id") -> dict[str, dict]:
    return {r[key]: r for r in table.to_pylist()}


# ------------------------------------------------------------------------------------ BOOST anti-abuse


@pytest.mark.parametrize(
    "offsets_h, expected",
    [
        ([], 0.0),
        ([0], 0.3),
        ([0, 1], 0.3),  # 2 h cooldown: a second use an hour later counts once
        ([0, 2], 0.6),  # exactly 2 h later counts again
        ([0, 1.99, 2.01], 0.6),  # the window is anchored at the last *counted* use
        ([0, 1, 1.5, 1.9], 0.3),
        ([0, 3, 6, 9], 1.0),  # daily cap +1.0: 0.3 + 0.3 + 0.3 + 0.1
        ([0, 3, 6, 9, 12], 1.0),
        ([0, 3, 6, 9, 24, 27], 1.6),  # the cap is per UTC calendar day
        ([9, 3, 0, 6], 1.0),  # order of the input does not matter
    ],
)
def test_apply_boosts_cooldown_and_daily_cap(offsets_h: list[float], expected: float) -> None:
    assert apply_boosts([D0.replace(hour=0) + h * H for h in offsets_h]) == pytest.approx(expected)


@pytest.mark.parametrize("amount, cap, n, expected", [(0.5, 1.0, 3, 1.0), (0.3, 0.5, 3, 0.5), (0.3, 2.0, 5, 1.5)])
def test_apply_boosts_amount_and_cap_are_config(amount: float, cap: float, n: int, expected: float) -> None:
    cfg = TierConfig(daily_cap=cap)
    assert apply_boosts([D0.replace(hour=0) + 3 * i * H for i in range(n)], cfg, amount) == pytest.approx(expected)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=4 * 24 * 60), max_size=40))
def test_apply_boosts_properties(minutes: list[int]) -> None:
    events = [D0 + timedelta(minutes=m) for m in minutes]
    total = apply_boosts(events)
    days = {e.date() for e in events}
    assert 0.0 <= total <= 1.0 * len(days) + 1e-9
    assert total == apply_boosts(list(reversed(events)))
    counted = counted_events(events, 2 * H)
    assert all(b - a >= 2 * H for a, b in zip(counted, counted[1:]))
    assert total <= 0.3 * len(counted) + 1e-9


# ------------------------------------------------------------------------------------ step decay


@pytest.mark.parametrize(
    "base, events, days, rule, expected",
    [
        (0.5, [], 4.9, FACT, 0.5),  # inside the first 5-day period
        (0.5, [], 5, FACT, 0.425),  # fact: ×0.85 per 5 days
        (0.5, [], 14, FACT, 0.5 * 0.85**2),
        (1.0, [], 3, EPISODE, 0.6),  # episode: ×0.6 per 3 days
        (1.0, [], 6.5, EPISODE, 0.36),
        (0.5, [(4, 0.0, True)], 8, FACT, 0.5),  # a use at day 4 restarts the idle clock
        (0.5, [(4, 0.0, True)], 9, FACT, 0.425),
        (0.5, [(6, 0.0, True), (6, 0.3, False)], 6, FACT, 0.425 + 0.3),  # decay up to the use, then BOOST
        (0.5, [(6, 0.0, True), (6, 0.3, False)], 11, FACT, (0.425 + 0.3) * 0.85),
        (0.5, [(6, 0.0, True), (6, 0.3, False)], 400, None, 0.8),  # no rule (core, pinned): never decays
        (0.2, [(1, -0.3, False)], 2, FACT, 0.0),  # a downvote never takes it below 0
        (0.5, [(30, 0.3, True)], 10, FACT, 0.5 * 0.85**2),  # events after as_of are not replayed
    ],
)
def test_decayed_weight(base: float, events: list[tuple], days: float, rule: DecayRule | None, expected: float) -> None:
    replay = [(D0 + d * DAY, delta, use) for d, delta, use in events]
    assert decayed_weight(base, D0, replay, D0 + days * DAY, rule) == pytest.approx(expected)


# ------------------------------------------------------------------------------------ tiers over time


def run_chain(rows: list[dict], feedback: pa.Table, days: list[float], **kw):
    """promote at D0 + each day, each run's previous = the last run's nodes; returns the results."""
    previous, out = None, []
    for d in days:
        res = promote(nodes_table(rows), feedback, previous, D0 + d * DAY, **kw)
        out.append(res)
        previous = res.nodes
    return out


def test_a_fact_ages_short_mid_long_with_promotion_rows() -> None:
    runs = run_chain([node("f1")], NO_FEEDBACK, [0, 8, 31])
    assert [r.nodes.column("tier").to_pylist() for r in runs] == [["short"], ["mid"], ["long"]]
    rows = [r.promotions.to_pylist() for r in runs]
    assert rows == [
        [
            {
                "tenant": "t1",
                "node_id": "f1",
                "from_tier": None,
                "to_tier": "short",
                "from_category": None,
                "to_category": "fact",
                "from_status": None,
                "to_status": "active",
                "reason": "new",
                "at": D0,
                "provenance": PROMOTION,
            }
        ],
        [
            {
                "tenant": "t1",
                "node_id": "f1",
                "from_tier": "short",
                "to_tier": "mid",
                "from_category": "fact",
                "to_category": "fact",
                "from_status": "active",
                "to_status": "active",
                "reason": "age>=7d",
                "at": D0 + 8 * DAY,
                "provenance": PROMOTION,
            }
        ],
        [
            {
                "tenant": "t1",
                "node_id": "f1",
                "from_tier": "mid",
                "to_tier": "long",
                "from_category": "fact",
                "to_category": "fact",
                "from_status": "active",
                "to_status": "active",
                "reason": "age>=30d",
                "at": D0 + 31 * DAY,
                "provenance": PROMOTION,
            }
        ],
    ]
    assert [r.nodes.column("weight").to_pylist()[0] for r in runs] == pytest.approx([0.5, 0.5 * 0.85, 0.5 * 0.85**6])
    history = pa.concat_tables([r.promotions for r in runs])
    assert history.schema == PROMOTIONS
    assert tiers_monotone(runs[-1].nodes, history).passed


def test_early_triggers_topic_repetition_activation_and_consistency() -> None:
    rows = [
        node("freq", frequency=3),  # seen in 3 places
        node("about1"),
        node("about2"),
        node("about3"),
        node("lonely"),  # three nodes ABOUT one topic
        node("topic", "Concept"),
        node("used"),
        node(
            "stable",
            confidence=0.9,
            frequency=2,
            seen=D0 - 8 * DAY,
            raw_refs=[{"raw_id": "raw_a", "offset": 0, "length": 3}, {"raw_id": "raw_b", "offset": 4, "length": 3}],
        ),
        node(
            "unsure",
            confidence=0.7,
            frequency=2,
            seen=D0 - 8 * DAY,
            raw_refs=[{"raw_id": "raw_a", "offset": 0, "length": 3}, {"raw_id": "raw_b", "offset": 4, "length": 3}],
        ),
    ]
    edges = pa.Table.from_pylist(
        [
            {"id": f"e{i}", "tenant": "t1", "src": s, "dst": "topic", "type": "ABOUT"}
            for i, s in enumerate(["about1", "about2", "about3"])
        ]
        + [{"id": "e9", "tenant": "t2", "src": "lonely", "dst": "topic", "type": "ABOUT"}],
        schema=pa.schema([EDGES.field(c) for c in ("id", "tenant", "src", "dst", "type")]),
    )
    feedback = fb([("used", "hit", D0 + h * 3 * H) for h in range(3)])
    res = promote(nodes_table(rows), feedback, None, D0 + DAY, edges=edges)
    got = {r["node_id"]: (r["to_tier"], r["reason"]) for r in res.promotions.to_pylist()}
    assert got == {
        "freq": ("mid", "topic_repetition>=3"),
        "about1": ("mid", "topic_repetition>=3"),
        "about2": ("mid", "topic_repetition>=3"),
        "about3": ("mid", "topic_repetition>=3"),
        "topic": ("mid", "topic_repetition>=3"),
        "lonely": ("short", "new"),  # its ABOUT edge lies in another tenant
        "used": ("mid", "activation>=3"),
        "stable": ("long", "age>=7d; consistent:sessions>=2,sources>=2,confidence>=0.8"),
        "unsure": ("mid", "age>=7d"),
    }
    assert by_id(res.nodes)["used"]["activation"] == 3


def test_an_episode_is_archived_after_its_forced_delete_age() -> None:
    six, seven = run_chain([node("ep", "Episode")], NO_FEEDBACK, [6, 7])
    e6, e7 = six.nodes.to_pylist()[0], seven.nodes.to_pylist()[0]
    assert (e6["status"], e6["weight"]) == ("active", pytest.approx(0.5 * 0.6**2))
    assert (e7["status"], e7["tier"], e7["category"]) == ("archived", "mid", "episode")
    assert seven.promotions.to_pylist() == [
        {
            "tenant": "t1",
            "node_id": "ep",
            "from_tier": "short",
            "to_tier": "mid",
            "from_category": "episode",
            "to_category": "episode",
            "from_status": "active",
            "to_status": "archived",
            "reason": "age>=7d; archive:episode_age>=7d",
            "at": D0 + 7 * DAY,
            "provenance": PROMOTION,
        }
    ]
    assert seven.review.num_rows == 0  # episodes are archived, not reviewed


def test_access_protection_keeps_an_episode_three_days_and_restores_it() -> None:
    hit = fb([("ep", "hit", D0 + 6 * DAY)])
    runs = run_chain([node("ep", "Episode")], hit, [7, 8.9, 9])
    assert [r.nodes.column("status").to_pylist()[0] for r in runs] == ["active", "active", "archived"]
    # archived stays archived (sticky) until a use within the protection window restores it
    later = promote(nodes_table([node("ep", "Episode")]), hit, runs[-1].nodes, D0 + 20 * DAY)
    assert later.nodes.column("status").to_pylist() == ["archived"] and later.promotions.num_rows == 0
    back = fb([("ep", "hit", D0 + 6 * DAY), ("ep", "hit", D0 + 19 * DAY)])
    restored = promote(nodes_table([node("ep", "Episode")]), back, later.nodes, D0 + 20 * DAY)
    assert restored.promotions.select(["from_status", "to_status", "reason"]).to_pylist() == [
        {"from_status": "archived", "to_status": "active", "reason": "restore:access"}
    ]


def test_core_promotion_is_sticky_and_never_decays() -> None:
    hits = fb([("f", "hit", D0 + DAY + i * 3 * H) for i in range(3)])
    first, later = run_chain([node("f", importance=0.8)], hits, [2, 60])
    row = first.nodes.to_pylist()[0]
    assert (row["category"], row["tier"], row["activation"], row["weight"]) == ("core", "mid", 3, 0.8)
    assert first.promotions.column("reason").to_pylist() == ["activation>=3; core:weight>=0.8,activation>=3"]
    row = later.nodes.to_pylist()[0]
    assert (row["category"], row["tier"], row["weight"]) == ("core", "long", 0.8)
    assert later.promotions.column("reason").to_pylist() == ["age>=30d"]
    assert later.review.num_rows == 0


def test_a_preference_repeated_across_sessions_is_core() -> None:
    refs = [{"raw_id": "raw_a", "offset": 0, "length": 3}, {"raw_id": "raw_b", "offset": 0, "length": 3}]
    res = promote(
        nodes_table([node("p", "Preference", raw_refs=refs), node("q", "Preference")]), NO_FEEDBACK, None, D0 + DAY
    )
    assert {r["id"]: r["category"] for r in res.nodes.to_pylist()} == {"p": "core", "q": "fact"}
    assert by_id(res.promotions, "node_id")["p"]["reason"] == "core:preference_sessions>=2"


def test_a_downvote_drops_core_and_demotes_with_its_reason() -> None:
    hits = fb([("f", "hit", D0 + DAY + i * 3 * H) for i in range(3)])
    _, before = run_chain([node("f", importance=0.8)], hits, [2, 40])  # core at day 2, sticky since
    assert before.nodes.select(["tier", "category"]).to_pylist() == [{"tier": "long", "category": "core"}]
    down = fb([("f", "hit", D0 + DAY + i * 3 * H) for i in range(3)] + [("f", "downvote", D0 + 41 * DAY)])
    after = promote(nodes_table([node("f", importance=0.8)]), down, before.nodes, D0 + 42 * DAY)
    row = after.nodes.to_pylist()[0]
    assert (row["tier"], row["category"], row["feedback"]) == ("mid", "fact", pytest.approx(-0.3))
    assert after.promotions.select(["from_tier", "to_tier", "from_category", "to_category", "reason"]).to_pylist() == [
        {"from_tier": "long", "to_tier": "mid", "from_category": "core", "to_category": "fact", "reason": "downvote"}
    ]
    history = pa.concat_tables([before.promotions, after.promotions])
    assert tiers_monotone(after.nodes, history).passed
    forged = history.set_column(history.schema.get_field_index("reason"), "reason", pa.array(["age>=30d", "tidy-up"]))
    outcome = tiers_monotone(after.nodes, forged)
    assert (outcome.passed, outcome.failures, outcome.examples[0]["problem"]) == (False, 1, "demoted_without_reason")


def test_pinned_never_decays_and_unpin_lets_it_decay_again() -> None:
    pin = fb([("f", "pin", D0)])
    res = promote(nodes_table([node("f"), node("g")]), pin, None, D0 + 100 * DAY)
    f, g = res.nodes.to_pylist()
    assert (f["pinned"], f["weight"], f["category"], f["tier"], f["status"]) == (True, 0.5, "core", "long", "active")
    assert (g["pinned"], g["weight"]) == (False, pytest.approx(0.5 * 0.85**20))
    assert res.review.column("node_ids").to_pylist() == [["g"]]  # the pinned one is never reviewed
    unpin = fb([("f", "pin", D0), ("f", "unpin", D0 + 101 * DAY)])
    after = promote(nodes_table([node("f"), node("g")]), unpin, res.nodes, D0 + 102 * DAY)
    f = after.nodes.to_pylist()[0]
    assert (f["pinned"], f["category"], f["tier"]) == (False, "fact", "long")  # the tier stays
    assert f["weight"] == pytest.approx(0.5 * 0.85**20)  # idle since the pin at D0
    assert by_id(after.promotions, "node_id")["f"]["reason"] == "unpin"


def test_low_weight_facts_go_to_review_and_structural_nodes_keep_a_floor() -> None:
    rows = [node("f"), node("task", "Task"), node("ent", "Entity", importance=0.4), node("fresh")]
    fresh = fb([("fresh", "hit", D0 + 30 * DAY)])
    res = promote(nodes_table(rows), fresh, None, D0 + 31 * DAY)
    assert res.review.schema == REVIEW_QUEUE
    assert res.review.to_pylist() == [
        {
            "id": stable_id("rq", "t1", "fact_low_weight", "f"),
            "tenant": "t1",
            "kind": "fact_low_weight",
            "node_ids": ["f"],
            "scores": [pytest.approx(0.5 * 0.85**6)],
            "reason": "weight<0.2",
            "created_at": D0 + 31 * DAY,
            "provenance": REVIEW,
        },
        {
            "id": stable_id("rq", "t1", "fact_low_weight", "task"),
            "tenant": "t1",
            "kind": "fact_low_weight",
            "node_ids": ["task"],
            "scores": [pytest.approx(0.5 * 0.85**6)],
            "reason": "weight<0.2",
            "created_at": D0 + 31 * DAY,
            "provenance": REVIEW,
        },
    ]
    status = {r["id"]: (r["status"], r["weight"]) for r in res.nodes.to_pylist()}
    assert status["f"] == ("active", pytest.approx(0.5 * 0.85**6))  # flagged, still active
    assert status["task"][0] == "open"  # a Task keeps its own live status
    assert status["ent"] == ("active", 0.2)  # floored, not reviewed
    # a use stops the idle clock (decay so far stays) and, within 3 days, keeps the fact out of review
    assert status["fresh"] == ("active", pytest.approx(0.5 * 0.85**6))


# ------------------------------------------------------------------------------------ capacity (seed 002)


def facts(n: int, tenant: str = "t1", high: int = 0) -> list[dict]:
    return [node(f"f{i:02d}", tenant=tenant, seen=D0 - 10 * DAY, importance=0.7 if i < high else 0.5) for i in range(n)]


def test_overflow_transfer_all_moves_the_whole_mid_tier() -> None:
    res = promote(nodes_table(facts(30)), NO_FEEDBACK, None, D0)
    assert set(res.nodes.column("tier").to_pylist()) == {"long"}
    assert set(res.promotions.column("reason").to_pylist()) == {"age>=7d; overflow:transfer_all"}


def test_overflow_selective_cleanup_archives_the_low_ones() -> None:
    cfg = TierConfig(overflow_strategy="selective_cleanup")
    res = promote(nodes_table(facts(30, high=20)), NO_FEEDBACK, None, D0, cfg)
    got = [(r["tier"], r["status"]) for r in res.nodes.to_pylist()]
    assert got == [("long", "active")] * 20 + [("mid", "archived")] * 10
    again = promote(nodes_table(facts(30, high=20)), NO_FEEDBACK, res.nodes, D0, cfg)
    assert again.promotions.num_rows == 0 and again.nodes.equals(res.nodes)


def test_half_full_mid_tier_transfers_the_important_ones() -> None:
    res = promote(nodes_table(facts(16, high=5)), NO_FEEDBACK, None, D0)
    tiers = res.nodes.column("tier").to_pylist()
    assert tiers == ["long"] * 5 + ["mid"] * 11
    assert res.promotions.column("reason").to_pylist()[0] == "age>=7d; importance>=0.6:occupancy>=50%"
    assert (
        promote(nodes_table(facts(16, high=5)), NO_FEEDBACK, None, D0, TierConfig(overflow_strategy=None))
        .nodes.column("tier")
        .to_pylist()
        == ["mid"] * 16
    )


def test_bad_overflow_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="overflow_strategy"):
        TierConfig(overflow_strategy="drop_everything")


# ------------------------------------------------------------------------------------ isolation, determinism


def test_tenants_never_mix() -> None:
    # 20 mid facts per tenant: below the 30 capacity each, though 40 together would overflow
    rows = facts(20, "a") + facts(20, "b") + [node("same", tenant="a"), node("same", tenant="b")]
    feedback = pa.concat_tables([fb([("same", "pin", D0)], tenant="a"), fb([("same", "downvote", D0)], tenant="b")])
    res = promote(nodes_table(rows), feedback, None, D0 + DAY)
    assert set(r["tier"] for r in res.nodes.to_pylist() if r["id"] != "same") == {"mid"}
    same = {r["tenant"]: r for r in res.nodes.to_pylist() if r["id"] == "same"}
    assert (same["a"]["pinned"], same["a"]["category"], same["a"]["feedback"]) == (True, "core", 0.0)
    assert (same["b"]["pinned"], same["b"]["category"], same["b"]["feedback"]) == (False, "fact", -0.3)
    assert res.nodes.column("tenant").to_pylist() == ["a"] * 21 + ["b"] * 21


def scenario() -> tuple[list[dict], pa.Table]:
    rows = facts(18, high=6) + [
        node("ep", "Episode", seen=D0 - 9 * DAY),
        node("pin"),
        node("down"),
        node("pref", "Preference", tenant="t2"),
        node("ent", "Entity", tenant="t2"),
        node("core", importance=0.9, seen=D0 - 40 * DAY),
    ]
    feedback = pa.concat_tables(
        [
            fb(
                [
                    ("pin", "pin", D0 - DAY),
                    ("down", "downvote", D0 - 2 * H),
                    ("down", "downvote", D0 - 3 * H),
                    ("f03", "upvote", D0 - 5 * H),
                    ("f03", "upvote", D0 - 4 * H),
                    ("f03", "hit", D0 - H),
                    ("f04", "hit", D0 + 5 * DAY),
                ]  # after as_of: ignored
                + [("core", "hit", D0 - 30 * DAY + i * 3 * H) for i in range(3)]
            ),
            fb([("pref", "upvote", D0 - DAY)], tenant="t2"),
        ]
    )
    return rows, feedback


def test_determinism_shuffled_rows_give_identical_tables() -> None:
    rows, feedback = scenario()
    first = promote(nodes_table(rows), feedback, None, D0)
    rng = random.Random(7)
    for _ in range(3):
        shuffled = rows[:]
        rng.shuffle(shuffled)
        order = list(range(feedback.num_rows))
        rng.shuffle(order)
        again = promote(nodes_table(shuffled), feedback.take(order), None, D0)
        assert again.nodes.equals(first.nodes)
        assert again.promotions.equals(first.promotions)
        assert again.review.equals(first.review)


def test_idempotence_a_second_run_changes_nothing() -> None:
    rows, feedback = scenario()
    first = promote(nodes_table(rows), feedback, None, D0)
    assert first.promotions.num_rows == len(rows)  # all first seen
    second = promote(nodes_table(rows), feedback, first.nodes, D0)
    assert second.promotions.num_rows == 0
    assert second.nodes.equals(first.nodes)
    assert second.review.equals(first.review)
    # feeding the output back in as the input nodes changes nothing either
    third = promote(first.nodes, feedback, first.nodes, D0)
    assert third.promotions.num_rows == 0 and third.nodes.equals(first.nodes)
    assert tiers_monotone(first.nodes, first.promotions).passed


def test_as_of_with_a_timezone_is_read_as_utc() -> None:
    rows, feedback = scenario()
    naive = promote(nodes_table(rows), feedback, None, D0)
    aware = promote(nodes_table(rows), feedback, None, (D0 + 2 * H).replace(tzinfo=timezone(2 * H)))
    assert aware.nodes.equals(naive.nodes) and aware.promotions.equals(naive.promotions)


def test_output_keeps_every_node_and_the_nodes_schema() -> None:
    rows, feedback = scenario()
    res = promote(nodes_table(rows), feedback, None, D0)
    assert res.nodes.schema == NODES and res.nodes.num_rows == len(rows)
    assert res.nodes.drop_columns(["tier", "category", "status", "weight", "activation", "feedback", "pinned"]).equals(
        nodes_table(sorted(rows, key=lambda r: (r["tenant"], r["id"]))).drop_columns(
            ["tier", "category", "status", "weight", "activation", "feedback", "pinned"]
        )
    )
    for col in ("tier", "category", "status", "weight", "activation", "feedback", "pinned"):
        assert res.nodes.column(col).null_count == 0, col
    f03 = by_id(res.nodes)["f03"]
    assert (f03["activation"], f03["feedback"]) == (2, 0.3)  # second upvote inside the cooldown; hit 3 h later


def test_empty_inputs() -> None:
    res = promote(NODES.empty_table(), None, None, D0)
    assert (res.nodes.num_rows, res.promotions.num_rows, res.review.num_rows) == (0, 0, 0)
    assert res.promotions.schema == PROMOTIONS and tiers_monotone(res.nodes, res.promotions).passed


def test_tiers_monotone_catches_a_broken_chain_and_a_stale_tier() -> None:
    res = run_chain([node("f1")], NO_FEEDBACK, [0, 8])
    history = pa.concat_tables([r.promotions for r in res])
    broken = history.set_column(history.schema.get_field_index("from_tier"), "from_tier", pa.array([None, "long"]))
    problems = {e["problem"] for e in tiers_monotone(res[-1].nodes, broken).examples}
    assert problems == {"broken_chain", "demoted_without_reason"}
    stale = res[0].nodes
    outcome = tiers_monotone(stale, history)
    assert not outcome.passed and outcome.examples[0]["problem"] == "tier_not_last_promotion"


def _monotone_by_hand(nodes: list[dict], history: list[dict], config: TierConfig) -> tuple[int, list[dict]]:
    """tiers_monotone's rules spelled out row by row: (failures, the first five problems: rows, chains, ends)."""
    rank = {t: i for i, t in enumerate(("short", "mid", "long"))}
    cols = ["tenant", "node_id", "from_tier", "to_tier", "reason", "at"]
    per_row, broken, ended = [], [], []
    for r in history:
        unknown = r["to_tier"] not in rank or (r["from_tier"] is not None and r["from_tier"] not in rank)
        excused = any(word in (r["reason"] or "") for word in config.demotion_reasons)
        demoted = not unknown and r["from_tier"] is not None and rank[r["to_tier"]] < rank[r["from_tier"]]
        if unknown or (demoted and not excused):
            per_row.append(
                {**{c: r[c] for c in cols}, "problem": "unknown_tier" if unknown else "demoted_without_reason"}
            )
    by_node: dict[tuple, list[tuple[int, dict]]] = {}
    for k, r in enumerate(history):  # keys in order of first appearance
        by_node.setdefault((r["tenant"], r["node_id"]), []).append((k, r))
    last = {}
    for key, rows in by_node.items():
        rows.sort(key=lambda kr: (kr[1]["at"] or datetime.min, kr[0]))  # undated first, ties in table order
        for (_, before), (_, r) in zip(rows, rows[1:]):
            if r["from_tier"] != before["to_tier"]:
                broken.append({**{c: r[c] for c in cols}, "problem": "broken_chain"})
        last[key] = rows[-1][1]["to_tier"]
    for n in nodes:
        key = (n["tenant"], n["id"])
        if key in last and last[key] != n["tier"]:
            ended.append(
                {**dict(zip(("tenant", "node_id", "tier"), (*key, n["tier"]))), "last_to_tier": last[key]}
                | {"problem": "tier_not_last_promotion"}
            )
    return len(per_row) + len(broken) + len(ended), (per_row[:5] + broken[:5] + ended[:5])[:5]


_HISTORY_ROW = st.fixed_dictionaries(
    {
        "tenant": st.sampled_from(["a", "b"]),
        "node_id": st.sampled_from(["n1", "n2", "n3", "n4"]),
        "from_tier": st.sampled_from([None, "short", "mid", "long", "huge"]),
        "to_tier": st.sampled_from(["short", "mid", "long", "tiny"]),
        "reason": st.sampled_from([None, "downvote", "age>=30d"]),
        "at": st.sampled_from([None, D0, D0 + H, D0 + 2 * H]),  # ties and undated rows
    }
)


@settings(max_examples=300, deadline=None)
@given(
    history=st.lists(_HISTORY_ROW, max_size=25),
    tiers=st.dictionaries(
        st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["n1", "n2", "n3", "n4", "n5"])),
        st.sampled_from(["short", "mid", "long"]),
    ),
)
def test_tiers_monotone_agrees_with_the_rules_row_by_row(history: list[dict], tiers: dict) -> None:
    config = TierConfig()
    nodes = [{"tenant": t, "id": i, "tier": tier} for (t, i), tier in tiers.items()]
    node_table = pa.Table.from_pylist(
        nodes, schema=pa.schema([("tenant", pa.string()), ("id", pa.string()), ("tier", pa.string())])
    )
    promotions = pa.Table.from_pylist(
        [
            {
                **r,
                "from_category": None,
                "to_category": None,
                "from_status": None,
                "to_status": None,
                "provenance": PROMOTION,
            }
            for r in history
        ],
        schema=PROMOTIONS,
    )
    outcome = tiers_monotone(node_table, promotions, config)
    failures, examples = _monotone_by_hand(nodes, history, config)
    assert (outcome.failures, outcome.passed) == (failures, failures == 0)
    assert outcome.examples == examples
