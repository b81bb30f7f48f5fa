"""Consolidation end to end through `memctl materialize`: agent ops from the inbox, access feedback (an inbox
feedback file and recall hits), PII flags and redaction, sparsification caps from a settings file, rollups, and
the consolidation tables in DuckDB — on the sample logs plus a few files of their own.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from assets.cli import main
from jobs.consolidate import ConsolidationConfig
from r2g.lake_graph import read_lake_table
from raw_store.lake import Lake
from recall.engine import recall
from recall.read_api import ReadApi
from recall.store import tenant_sql

ROOT = Path(__file__).resolve().parent.parent
EMAIL = "ann.lee@example.com"
CONTACT = f"Ann: You can always email me at {EMAIL} about the garden plans.\n"
OPS = [
    {
        "tool": "create_memory",
        "ref": "m1",
        "ts": "2024-03-05T09:00:00",
        "arguments": {"subject": "小明", "memory_type": "事件", "topic": "参加", "object": "足球俱乐部"},
    },
    {
        "tool": "link_memories",
        "arguments": {
            "source_memory_description": {"ref": "m1"},
            "target_memory_description": "小明在公园里踢足球",
            "relation_type": "基于",
        },
    },
    {"tool": "create_memory", "arguments": {"subject": "小明", "memory_type": "心情", "topic": "x", "object": "y"}},
]


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(args))
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("consolidation") / "data"
    shutil.copytree(ROOT / "data" / "inbox", root / "inbox")
    (root / "inbox" / "demo" / "contact.txt").write_text(CONTACT, "utf-8")
    (root / "inbox" / "demo" / "agent_ops.jsonl").write_text(
        "".join(json.dumps(op, ensure_ascii=False) + "\n" for op in OPS), "utf-8"
    )
    settings = root.parent / "consolidation.json"
    settings.write_text(json.dumps({"sparsify": {"default_cap": 3}}), "utf-8")
    with pytest.MonkeyPatch.context() as env:
        for k, v in (
            ("MEMCTL_DATA", str(root)),
            ("DAGSTER_HOME", str(root / "dagster_home")),
            ("MEMCTL_CONSOLIDATION", str(settings)),
            ("MEMCTL_REDACT_PII", "1"),
        ):
            env.setenv(k, v)
        lk = Lake(root)
        assert _cli("--data", str(root), "materialize", "--quiet")[0] == 0
        yield lk


def _nodes(lake: Lake) -> list[dict]:
    return read_lake_table(lake, "nodes").to_pylist()


def test_agent_ops_from_the_inbox_are_applied_and_cited(lake: Lake) -> None:
    applied = read_lake_table(lake, "ops_applied").to_pylist()
    rejected = read_lake_table(lake, "ops_rejected").to_pylist()
    assert [(r["op_index"], r["op"]) for r in applied] == [(1, "create_memory"), (2, "link_memories")]
    assert [(r["op_index"], r["code"]) for r in rejected] == [(3, "BAD_ARGS")]  # 心情 is no memory type
    made = applied[0]["target_ids"][0]
    node = next(n for n in _nodes(lake) if n["id"] == made)
    assert node["tenant"] == "demo" and "足球俱乐部" in node["title"]
    # link_memories found the football memory from its description, through recall
    link = json.loads(applied[1]["result"])
    target = next(n for n in _nodes(lake) if n["id"] == link["target"])
    assert "踢足球" in (target["title"] + (target["text"] or ""))
    assert any(e["type"] == "SUPPORTS" and e["src"] == made for e in read_lake_table(lake, "edges").to_pylist())
    # the memory cites the op line in the ops file, byte-exact
    [hit] = [r for r in recall("足球俱乐部", "demo", k=5, lake=lake) if r.node_id == made]
    assert hit.citations and hit.citations[0].verified and '"create_memory"' in hit.citations[0].excerpt


def test_pii_is_flagged_and_redacted_in_the_graph_but_not_in_the_raw_store(lake: Lake) -> None:
    flagged = [n for n in _nodes(lake) if n["pii"]]
    assert flagged and all("email" in n["pii"] for n in flagged)
    assert not [n for n in _nodes(lake) if EMAIL in (n["title"] or "") + (n["text"] or "")]
    assert any("[EMAIL]" in (n["text"] or "") + (n["title"] or "") for n in flagged)
    # the citation still quotes the original line: the raw store is the record, the graph text is redacted
    cited = [c.excerpt for r in recall("email garden plans", "demo", k=5, lake=lake) for c in r.citations]
    assert any(EMAIL in x for x in cited)


def test_degree_caps_from_the_settings_file_move_edges_to_the_cold_table(lake: Lake) -> None:
    cold = read_lake_table(lake, "cold_edges").to_pylist()
    edges = read_lake_table(lake, "edges").to_pylist()
    assert cold and all(c["reason"].startswith("degree_cap") for c in cold)
    assert not {c["id"] for c in cold} & {e["id"] for e in edges}
    per = {}
    for e in edges:
        if e["type"] not in ("DERIVED_FROM", "TEMPORAL_NEXT", "VERSION_NEXT", "ACTIVE_OF", "SEMANTIC_CONTAINS"):
            per[(e["src"], e["type"])] = per.get((e["src"], e["type"]), 0) + 1
    assert max(per.values()) <= 3


def test_long_conversations_are_rolled_up(lake: Lake) -> None:
    rollups = [n for n in _nodes(lake) if n["subtype"] == "rollup"]
    assert rollups and all(n["type"] == "Episode" and n["text"] for n in rollups)
    contains = [e for e in read_lake_table(lake, "edges").to_pylist() if e["type"] == "SEMANTIC_CONTAINS"]
    children = {e["dst"] for e in contains}
    with ReadApi.open(lake, "demo") as api:
        groups = api.compaction_candidates("Episode")
        assert not children & {c for g in groups for c in g.child_ids}  # rolled-up turns are not offered again
        parent = next(r for r in rollups if r["tenant"] == "demo")
        assert set(api.get_node(parent["id"]).children_ids) >= {e["dst"] for e in contains if e["src"] == parent["id"]}


def test_feedback_and_recall_hits_change_the_memory(lake: Lake) -> None:
    pref = next(n for n in _nodes(lake) if n["type"] == "Preference" and "中文" in n["title"])
    assert not pref["pinned"]
    (lake.inbox / "demo" / "feedback.jsonl").write_text(
        json.dumps({"feedback": "pin", "node_id": pref["id"], "at": "2024-03-03T10:00:00"}) + "\n", "utf-8"
    )
    # --k 20: the Preference cites the same line as the Episode ranked first, so MMR puts it last, and the turns
    # next to that Episode (session seeds) fill the first ten; a hit is logged for every result shown
    for _ in range(2):
        assert _cli("--data", str(lake.root), "recall", "以后优先用中文回答", "--tenant", "demo", "--k", "20")[0] == 0
    rc, out = _cli("--data", str(lake.root), "materialize", "--quiet")
    assert rc == 0 and "lake rebuilt: yes" in out
    after = next(n for n in _nodes(lake) if n["id"] == pref["id"])
    assert after["pinned"] and after["category"] == "core"
    feedback = read_lake_table(lake, "feedback").to_pylist()
    assert {f["kind"] for f in feedback if f["node_id"] == pref["id"]} >= {"pin", "hit"}
    # a recall without new hits leaves the lake as it is
    rc, out = _cli("--data", str(lake.root), "materialize", "--quiet")
    assert "lake rebuilt: no" in out


def test_consolidation_tables_are_in_duckdb_per_tenant(lake: Lake) -> None:
    con = tenant_sql(lake, "demo")
    try:
        for table in (
            "communities",
            "promotions",
            "review_queue",
            "cold_edges",
            "feedback",
            "ops_applied",
            "ops_rejected",
            "audit",
        ):
            assert {r[0] for r in con.execute(f"SELECT DISTINCT tenant FROM {table}").fetchall()} <= {"demo"}, table
        assert con.execute("SELECT count(*) FROM promotions").fetchone()[0] > 0
    finally:
        con.close()


def test_settings_overrides_are_checked() -> None:
    cfg = ConsolidationConfig().with_overrides({"tiers": {"short_days": 5}, "redact_pii": True})
    assert cfg.tiers.short_days == 5 and cfg.redact_pii
    with pytest.raises(ValueError, match="unknown tiers setting"):
        ConsolidationConfig().with_overrides({"tiers": {"shortdays": 5}})
    with pytest.raises(ValueError, match="unknown consolidation setting"):
        ConsolidationConfig().with_overrides({"teirs": {}})


def _check_records(lake: Lake) -> dict[str, tuple[str, str, dict]]:
    """check name → (run id, status, metadata) of the latest evaluation of each consolidation check."""
    import dagster as dg

    from assets.definitions import defs

    keys = [k for k in defs.resolve_asset_graph().asset_check_keys if k.name in CONSOLIDATION_CHECKS]
    with dg.DagsterInstance.get() as instance:
        latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
    out = {}
    for key, record in latest.items():
        assert record.event is not None and record.event.dagster_event is not None
        evaluation = record.event.dagster_event.event_specific_data
        meta = {k: v.value for k, v in evaluation.metadata.items()}
        out[key.name] = (record.run_id, record.status.value, meta)
    return out


CONSOLIDATION_CHECKS = ("no_orphan_edges", "raw_refs_resolve", "one_active_per_chain", "tiers_monotone")


def test_the_checks_report_the_same_beside_the_writes_as_after_them(lake: Lake, monkeypatch) -> None:
    """A graph this small is checked on the checks' own thread while the step writes its files; one over the limit
    in the step's thread after them. The same evaluations either way, recorded by Dagster for the run."""
    import threading

    import assets.consolidation as consolidation

    threads: list[str] = []
    checks = consolidation._checks

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return checks(*args, **kwargs)

    monkeypatch.setattr(consolidation, "_checks", recorded)
    edges = read_lake_table(lake, "edges").num_rows
    assert edges <= consolidation.CHECKS_BESIDE_MAX_EDGES
    evaluations = []
    for limit in (consolidation.CHECKS_BESIDE_MAX_EDGES, 0):
        monkeypatch.setattr(consolidation, "CHECKS_BESIDE_MAX_EDGES", limit)
        rc, out = _cli("--data", str(lake.root), "materialize", "--quiet", "--full")
        assert rc == 0 and "lake rebuilt: yes" in out
        evaluations.append(_check_records(lake))
    assert [t.startswith("memctl-checks") for t in threads] == [True, False], threads
    beside, after = evaluations
    assert set(beside) == set(CONSOLIDATION_CHECKS)
    assert {status for _, status, _ in beside.values()} == {"SUCCEEDED"}
    assert {name: (status, meta) for name, (_, status, meta) in after.items()} == {
        name: (status, meta) for name, (_, status, meta) in beside.items()
    }
    assert not {run for run, _, _ in after.values()} & {run for run, _, _ in beside.values()}  # new evaluations
    assert after["no_orphan_edges"][2]["checked"] == edges
