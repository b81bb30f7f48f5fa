"""An incremental `memctl materialize` gives the tables a from-scratch build of the same inbox gives.

Three ways to reach one inbox: (a) everything at once into a fresh lake; (b) the first files, then one more file
added, then an agent ops file, then a forget request; (c) the same as (b) but with every lake-wide step recomputed
in full at the end (`MEMCTL_FULL=1`). The history-free tables (messages, raw_chunks, rejects, the R2G graph) must be
equal in all three; the consolidated graph of (b) must equal (c)'s, row for row. Between (a) and (b) the
consolidated graph may differ only where consolidation keeps history on purpose — a community keeps its id while
its members barely change (seed 004 §23) and a tier never falls back by itself — and the test names those columns.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from assets.run import ExecutorConfig, materialize
from jobs.forget import resolve, save_request
from r2g.lake_graph import read_lake_table
from raw_store.lake import Lake
from tests.session_lakes import session_lake

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "inbox"
AS_OF = "2024-06-01T00:00:00"
HISTORY_FREE = ("messages", "raw_chunks", "rejects", "r2g_nodes", "r2g_edges")


def _extra(i: int) -> str:
    lines = [
        {
            "conv_id": f"extra{i}",
            "msg_id": f"m{k}",
            "speaker": ["Caroline", "Melanie"][k % 2],
            "ts": f"2024-03-{10 + i:02d} 10:{k:02d}:00",
            "text": text,
        }
        for k, text in enumerate(
            [
                f"I went hiking with Xiaoming at Bear Creek on trip {i}.",
                "Caroline loves green tea and hates coffee.",
                f"We will meet at Riverside Park on Saturday for the {i}th time.",
                "Melanie plays football every weekend in Riverside Park.",
            ]
        )
    ]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines)


def _ops() -> str:
    ops = [
        {
            "tool": "create_memory",
            "ref": "m1",
            "ts": "2024-03-20T09:00:00",
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
    ]
    return "".join(json.dumps(op, ensure_ascii=False) + "\n" for op in ops)


def _inbox(root: Path, extras: int) -> None:
    shutil.copytree(SAMPLES, root / "inbox")
    for i in range(extras):
        (root / "inbox" / "demo" / f"extra_{i}.jsonl").write_text(_extra(i), "utf-8")


def _build(lake: Lake) -> None:
    summary = materialize(lake, progress=False, executor=ExecutorConfig(kind="in_process"))
    assert summary.ok, (summary.failed, summary.lake_failed)


def _tables(lake: Lake) -> dict[str, pl.DataFrame]:
    out = {}
    for name in (*HISTORY_FREE, "nodes", "edges", "cold_edges", "review_queue", "ops_applied"):
        t = pl.from_arrow(read_lake_table(lake, name))
        keys = [
            c
            for c in ("tenant", "id", "batch_id", "op_index", "source_file", "line", "conv_id", "seq")
            if c in t.columns
        ]
        out[name] = t.sort(keys)
    return out


def _forget_extra0(lake: Lake) -> None:
    save_request(lake, resolve(lake, "demo", "conv", "extra0", reason="test"))


def first_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lake of the first files (the sample inbox and extra_0) after one default build as of AS_OF, its Dagster
    instance inside: where (b) and (c) here and both lakes of test_dirty_lake start. Built once per test run
    (tests/session_lakes.py); copy it."""

    def build(root: Path) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MEMCTL_AS_OF", AS_OF)
            for k in ("MEMCTL_FULL", "MEMCTL_EXECUTOR"):
                mp.delenv(k, raising=False)
            mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
            _inbox(root, extras=1)
            _build(Lake(root))

    return session_lake(tmp_path_factory, "incremental_first", build)


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMCTL_AS_OF", AS_OF)
        for k in ("MEMCTL_FULL", "MEMCTL_EXECUTOR", "DAGSTER_HOME"):
            mp.delenv(k, raising=False)
        out = {}
        # first files, then one more, then ops (the same three default builds for (b) and (c): built once, and (c)
        # starts from a copy of that lake), then a forget
        first = Lake(tmp_path_factory.mktemp("incremental") / "lake")
        shutil.copytree(first_build(tmp_path_factory), first.root)
        (first.inbox / "demo" / "extra_1.jsonl").write_text(_extra(1), "utf-8")
        _build(first)
        (first.inbox / "demo" / "agent_ops.jsonl").write_text(_ops(), "utf-8")
        _build(first)
        copy = Lake(tmp_path_factory.mktemp("full") / "lake")
        shutil.copytree(first.root, copy.root)
        for way, lake in (("incremental", first), ("full", copy)):
            _forget_extra0(lake)
            if way == "full":
                mp.setenv("MEMCTL_FULL", "1")
            _build(lake)
            mp.delenv("MEMCTL_FULL", raising=False)
            out[way] = _tables(lake)
        lake = Lake(tmp_path_factory.mktemp("scratch"))  # everything at once (a forget needs a built lake first)
        _inbox(lake.root, extras=2)
        (lake.inbox / "demo" / "agent_ops.jsonl").write_text(_ops(), "utf-8")
        _build(lake)
        _forget_extra0(lake)
        _build(lake)
        out["scratch"] = _tables(lake)
        os.environ.pop("DAGSTER_HOME", None)
        yield out


def test_incremental_equals_a_full_recompute(three_ways) -> None:
    for name, table in three_ways["incremental"].items():
        assert table.equals(three_ways["full"][name]), name


def test_history_free_tables_equal_a_fresh_build(three_ways) -> None:
    for name in HISTORY_FREE:
        assert three_ways["incremental"][name].equals(three_ways["scratch"][name]), name
    ops = three_ways["incremental"]["ops_applied"]
    assert ops.height == 2 and ops.equals(three_ways["scratch"]["ops_applied"])


def test_the_consolidated_graph_differs_from_a_fresh_build_only_by_kept_history(three_ways) -> None:
    inc, scratch = three_ways["incremental"], three_ways["scratch"]
    for name in ("nodes", "edges"):
        a, b = inc[name], scratch[name]
        assert a.height == b.height, name
        assert a.drop("id").equals(b.drop("id")) or _only_topic_ids_differ(a, b), name


def _only_topic_ids_differ(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    """The frames are equal once community Concepts (and edges to them) are left out."""

    def plain(t: pl.DataFrame) -> pl.DataFrame:
        if "subtype" in t.columns:
            return t.filter(pl.col("subtype").ne_missing("community"))
        return t.filter(~pl.col("provenance").str.starts_with("jobs.communities"))

    return plain(a).equals(plain(b))
