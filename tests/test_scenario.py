"""Forty simulated days through `memctl materialize` (tests/fixtures/scenario): chat files arrive on days 1, 3,
11 and 20, and the lake is consolidated as of days 3, 12, 21 and 40. The tables show each step: a topic Concept
emerging, episodes decaying and being archived, a fact getting a new version, a contradiction settled by prio,
a preference promoted to core, tiers moving short → mid → long, and a forget request fully honoured.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from assets.cli import main
from r2g.lake_graph import read_lake_table
from raw_store.lake import Lake
from recall.engine import recall

SCENARIO = Path(__file__).parent / "fixtures" / "scenario"
STEPS = [
    ("2024-04-03T20:00:00", ["day01.jsonl", "day03.jsonl"]),
    ("2024-04-12T00:00:00", ["day11.jsonl"]),
    ("2024-04-21T00:00:00", ["day20.jsonl"]),
    ("2024-05-10T00:00:00", []),
]


def _cli(lake: Lake, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["--data", str(lake.root), *args])
    return rc, out.getvalue()


def _snapshot(lake: Lake) -> dict:
    nodes = read_lake_table(lake, "nodes").to_pylist()
    return {
        "nodes": {n["id"]: n for n in nodes},
        "by_title": {(n["type"], n["title"]): n for n in nodes},
        "edges": read_lake_table(lake, "edges").to_pylist(),
        "communities": read_lake_table(lake, "communities").to_pylist(),
        "promotions": read_lake_table(lake, "promotions").to_pylist(),
        "review": read_lake_table(lake, "review_queue").to_pylist(),
    }


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("scenario") / "data"
    (root / "inbox" / "sim").mkdir(parents=True)
    lake, snaps = Lake(root), {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMCTL_DATA", str(root))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        for as_of, files in STEPS:
            for name in files:
                shutil.copyfile(SCENARIO / name, root / "inbox" / "sim" / name)
            env.setenv("MEMCTL_AS_OF", as_of)
            rc, out = _cli(lake, "materialize", "--quiet")
            assert rc == 0, out
            snaps[as_of[:10]] = _snapshot(lake)
        yield lake, snaps


def _node(snap: dict, type_: str, title: str) -> dict:
    return snap["by_title"][(type_, title)]


def test_a_topic_concept_emerges_and_keeps_its_id(days) -> None:
    _, snaps = days
    first = snaps["2024-04-03"]
    garden = [c for c in first["communities"] if {"Luis", "Rosa"} <= {first["nodes"][m]["title"] for m in c["members"]}]
    assert len(garden) == 1
    concept = first["nodes"][garden[0]["concept_id"]]
    assert concept["type"] == "Concept" and concept["subtype"] == "community" and concept["title"] == garden[0]["label"]
    about = {e["src"] for e in first["edges"] if e["type"] == "ABOUT" and e["dst"] == concept["id"]}
    assert about == set(garden[0]["members"])
    # later days add unrelated talk: the topic keeps its id
    assert garden[0]["id"] in {c["id"] for c in snaps["2024-05-10"]["communities"]}


def test_episodes_decay_and_are_archived(days) -> None:
    _, snaps = days
    title = "Ann: Good morning! The weather is nice today."
    day3, day12 = _node(snaps["2024-04-03"], "Episode", title), _node(snaps["2024-04-12"], "Episode", title)
    assert day3["status"] == "active" and day3["tier"] == "short"
    assert day12["weight"] < day3["weight"] and day12["status"] == "archived"
    archived = [
        p for p in snaps["2024-04-12"]["promotions"] if p["node_id"] == day12["id"] and p["to_status"] == "archived"
    ]
    assert archived and str(archived[0]["at"])[:10] == "2024-04-12"


def test_a_fact_gets_a_new_version(days) -> None:
    _, snaps = days
    snap = snaps["2024-04-12"]
    old, new = _node(snap, "Fact", "Ann love coffee"), _node(snap, "Fact", "Ann not like coffee")
    assert (old["id"], new["id"]) in {(e["src"], e["dst"]) for e in snap["edges"] if e["type"] == "VERSION_NEXT"}
    assert str(old["valid_until"]) == "2024-04-11 08:00:00" and new["valid_until"] is None
    active = [e for e in snap["edges"] if e["type"] == "ACTIVE_OF" and e["dst"] in (old["id"], new["id"])]
    assert [e["dst"] for e in active] == [new["id"]]
    # a change over ten days is a version, not a contradiction
    assert not [
        e for e in snap["edges"] if e["type"] == "CONTRADICTS" and {e["src"], e["dst"]} == {old["id"], new["id"]}
    ]


def test_a_contradiction_is_settled_by_prio(days) -> None:
    _, snaps = days
    snap = snaps["2024-04-21"]
    oslo, bergen = _node(snap, "Fact", "Bob live Oslo"), _node(snap, "Fact", "Bob live Bergen")
    pairs = {(e["src"], e["dst"]) for e in snap["edges"] if e["type"] == "CONTRADICTS"}
    assert (oslo["id"], bergen["id"]) in pairs and (bergen["id"], oslo["id"]) in pairs
    active = {e["dst"] for e in snap["edges"] if e["type"] == "ACTIVE_OF"}
    assert oslo["id"] in active and bergen["id"] not in active  # three people say Oslo, one Bergen
    assert not [r for r in snap["review"] if r["kind"] == "contradiction_near_tie"]


def test_a_repeated_preference_is_promoted_to_core(days) -> None:
    _, snaps = days
    title = "Ann: From now on, please answer me in English."
    assert _node(snaps["2024-04-03"], "Preference", title)["category"] != "core"
    pref = _node(snaps["2024-04-12"], "Preference", title)
    assert pref["category"] == "core"
    assert [p for p in snaps["2024-04-12"]["promotions"] if p["node_id"] == pref["id"] and p["to_category"] == "core"]
    assert _node(snaps["2024-05-10"], "Preference", title)["category"] == "core"  # core never decays away


def test_tiers_move_with_age_and_promotions_record_it(days) -> None:
    _, snaps = days
    fact = "Luis plant tomato"
    tiers = [_node(snaps[d], "Fact", fact)["tier"] for d in ("2024-04-03", "2024-04-12", "2024-05-10")]
    rank = {"short": 0, "mid": 1, "long": 2}
    assert [rank[t] for t in tiers] == sorted(rank[t] for t in tiers) and tiers[-1] == "long"
    history = [
        p for p in snaps["2024-05-10"]["promotions"] if p["node_id"] == _node(snaps["2024-05-10"], "Fact", fact)["id"]
    ]
    assert [p["to_tier"] for p in sorted(history, key=lambda p: p["at"])][-1] == "long"
    # re-running as of the same day promotes nothing new
    assert len(snaps["2024-05-10"]["promotions"]) >= len(snaps["2024-04-21"]["promotions"])


def test_a_forget_request_is_fully_honoured(days, monkeypatch: pytest.MonkeyPatch) -> None:
    lake, snaps = days
    bergen = _node(snaps["2024-05-10"], "Fact", "Bob live Bergen")
    rc, out = _cli(lake, "forget", "--tenant", "sim", "--speaker", "Cat", "--reason", "Cat asked", "--quiet")
    assert rc == 0, out
    after = _snapshot(lake)
    assert bergen["id"] not in after["nodes"]
    assert not [e for e in after["edges"] if bergen["id"] in (e["src"], e["dst"])]
    assert "Bergen" not in " ".join(m["text"] for m in read_lake_table(lake, "messages").to_pylist())
    assert "Bergen" not in json.dumps([r.to_json() for r in recall("Bob Bergen", "sim", k=10, lake=lake)])
    [row] = read_lake_table(lake, "audit").to_pylist()
    assert row["scope"] == "speaker" and row["messages"] == 1 and bergen["id"] in row["nodes"] and row["blobs"]
    # and the next day's run does not bring it back
    monkeypatch.setenv("MEMCTL_AS_OF", "2024-05-11T00:00:00")
    assert _cli(lake, "materialize", "--quiet")[0] == 0
    assert bergen["id"] not in _snapshot(lake)["nodes"]
