"""`memctl materialize` with the dirty-set consolidation gives, byte for byte, the consolidated tables of a full
consolidation of the same lake.

Two lakes go through the same steps with the real pipeline: the first files; one more file (tenant demo); a forget
request (demo); a run as of a later date; an agent ops file (demo); a file of the other tenant (research). One lake
consolidates as it does by default (jobs.dirty), the other with every lake-wide step recomputed in full
(`MEMCTL_FULL=1`). After every step the consolidation's files must be equal, and the default lake must have redone
only the tenants that changed. The first build is full in both ways (a fresh lake has no snapshot), so it runs once
and the full lake starts as its copy.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from raw_store.lake import Lake
from tests.test_incremental import AS_OF, _build, _extra, _forget_extra0, _ops, first_build

SIDE = ("communities", "promotions", "review_queue", "cold_edges", "ops_applied", "ops_rejected", "feedback")


def _files(lake: Lake) -> dict[str, bytes]:
    folder = lake.root / "lake" / "consolidated"
    out = {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}
    # the merge overlay under it, and its snapshot (from the last run's, or made whole in the full lake)
    r2g = lake.root / "lake" / "r2g"
    out.update({f"r2g/{p.relative_to(r2g)}": p.read_bytes() for p in sorted(r2g.rglob("*.parquet"))})
    out.update({f"{n}.parquet": lake.table(n).read_bytes() for n in SIDE})
    return out


def _last_run() -> tuple[str, int, str]:
    """(consolidation_mode, dirty_tenants, merge_mode) of the latest `nodes` and `r2g_nodes` materializations
    ($DAGSTER_HOME: the lake built last)."""
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        meta = {}
        for key in ("nodes", "r2g_nodes"):
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            assert event is not None and event.asset_materialization is not None
            meta.update(event.asset_materialization.metadata)
        return meta["consolidation_mode"].value, meta["dirty_tenants"].value, meta["merge_mode"].value


def _add_demo(lake: Lake) -> None:
    (lake.inbox / "demo" / "extra_1.jsonl").write_text(_extra(1), "utf-8")


def _add_ops(lake: Lake) -> None:
    (lake.inbox / "demo" / "agent_ops.jsonl").write_text(_ops(), "utf-8")


def _add_research(lake: Lake) -> None:
    (lake.inbox / "research" / "extra_r.jsonl").write_text(_extra(7), "utf-8")


def _later(lake: Lake) -> None:
    os.environ["MEMCTL_AS_OF"] = "2024-07-01T00:00:00"  # the fixture's monkeypatch restores it


# (what, change, consolidation mode, tenants redone, merge overlay mode): a forget request rewrites a partition, so
# the merge overlay runs whole; a new inbox file is a partition added to it
STEPS: list[tuple[str, Callable[[Lake], None], str, int, str]] = [
    ("first build", lambda lake: None, "full", 2, "full"),
    ("a new demo file", _add_demo, "incremental", 1, "incremental"),
    ("a forget request", _forget_extra0, "incremental", 1, "full"),
    (
        "a later as_of, the same input",
        _later,
        "incremental",
        0,
        "incremental",
    ),  # before the ops: a batch's time is the as_of
    ("an ops file", _add_ops, "full", 2, "incremental"),
    ("a new research file", _add_research, "incremental", 1, "incremental"),
]


@pytest.fixture(scope="module")
def lockstep(tmp_path_factory):
    """[(step, mode and tenants redone by the default lake, its files, the full lake's files)]."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMCTL_AS_OF", AS_OF)
        for k in ("MEMCTL_FULL", "MEMCTL_EXECUTOR", "DAGSTER_HOME"):
            mp.delenv(k, raising=False)
        dirty = Lake(tmp_path_factory.mktemp("dirty") / "lake")
        shutil.copytree(first_build(tmp_path_factory), dirty.root)  # test_incremental's first build, shared
        mp.setenv("DAGSTER_HOME", str(dirty.root / "dagster_home"))
        # On a fresh lake a full recompute is the run the default lake just did (no snapshot: consolidation is
        # full either way, and MEMCTL_FULL changes nothing else the comparison reads), so the full lake starts
        # as a copy of it, its instance included, and the lockstep begins at the second step.
        files = _files(dirty)
        first = (STEPS[0][0], _last_run(), files, files)
        full = Lake(tmp_path_factory.mktemp("full") / "lake")
        shutil.copytree(dirty.root, full.root)
        lakes = {"dirty": dirty, "full": full}
        out = [first]
        for what, change, *_ in STEPS[1:]:
            files, ran = {}, None
            for way, lake in lakes.items():
                change(lake)
                mp.setenv("DAGSTER_HOME", str(lake.root / "dagster_home"))
                if way == "full":
                    mp.setenv("MEMCTL_FULL", "1")
                _build(lake)
                mp.delenv("MEMCTL_FULL", raising=False)
                files[way] = _files(lake)
                ran = ran or _last_run()
            out.append((what, ran, files["dirty"], files["full"]))
        yield out


@pytest.mark.parametrize("step", range(len(STEPS)), ids=[s[0] for s in STEPS])
def test_the_dirty_set_consolidation_equals_a_full_one_byte_for_byte(lockstep, step) -> None:
    what, ran, dirty, full = lockstep[step]
    assert ran == STEPS[step][2:], what
    if step == 0:
        return  # the full lake is a copy of this one (see lockstep): what the first step proves is its mode
    assert sorted(dirty) == sorted(full)
    for name in dirty:
        assert dirty[name] == full[name], f"{what}: {name}"


def test_a_crash_before_the_snapshot_is_written_means_a_full_run(tmp_path) -> None:
    from jobs.snapshot import drop_snapshot, read_snapshot
    from r2g.schema import EDGES, NODES

    folder = Path(tmp_path)
    (folder / "snapshot.json").write_text(json.dumps({"fingerprint": "x"}))
    drop_snapshot(folder)
    assert read_snapshot(folder, NODES.empty_table(), EDGES.empty_table()) is None
