"""jobs.dirty: consolidation over the tenants whose input changed equals consolidate() over everything.

Random R2G-shaped lakes (tests/consolidation_graphs.py): a first run over the lake before an append, then the
dirty-set run over the lake after it, against consolidate() of the same input and previous state, table for table.
"""

from __future__ import annotations

import gc
import os
import random
import weakref
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from unittest import mock

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jobs.consolidate import ConsolidationConfig, ConsolidationResult, Previous, consolidate, time_steps
from jobs.dirty import (
    DirtyRun,
    Snapshot,
    changed_tenants,
    consolidate_dirty,
    input_row_hashes,
    tenant_hashes,
    version_tables,
)
from jobs.forget import ForgetRequest, ForgetRules
from jobs.rollup import RollupConfig, rollup_input
from jobs.schema import FEEDBACK
from jobs.snapshot import STEPS, read_snapshot, write_consolidated
from jobs.sparsify import SparsifyConfig
from r2g.schema import EDGES, NODE_STATE, NODES, STATE_COLUMNS
from raw_store.frames import take_columns
from raw_store.lake import conform
from raw_store.tables import diff_overlay, layered_table, patched, stage_and_final_overlays
from tests.consolidation_graphs import RandomGraph, random_graph
from tests.fuzzing import fuzz_settings
from tests.test_consolidation_golden import assert_same
from tests.test_versions import D1, DAY, Graph, coffee_change

SEEDS = st.integers(0, 2**32 - 1)
CONFIG = ConsolidationConfig(rollup=RollupConfig(threshold=2, fan_in=2))
TABLES = ("nodes", "edges", "communities", "promotions", "review_queue", "cold_edges", "ops_applied", "ops_rejected")


def before_append(g: RandomGraph, seed: int) -> tuple[pa.Table, pa.Table, set[str]]:
    """The lake before some tenants' last Episodes arrived: those Episodes, what derives from them and every edge
    touching either left out, and (as a merge would) their tenants' Entities seen less often."""
    r = random.Random(seed)
    n = pl.from_arrow(g.nodes)
    tenants = sorted(set(n.get_column("tenant").to_list()))
    touched = {t for t in tenants if r.random() < 0.5} or {tenants[0]}
    eps = n.filter((pl.col("type") == "Episode") & pl.col("tenant").is_in(sorted(touched)))
    late = eps.filter(pl.Series([r.random() < 0.3 for _ in range(eps.height)], dtype=pl.Boolean)).select("tenant", "id")
    e = pl.from_arrow(g.edges)
    derived = e.filter(pl.col("type") == "DERIVED_FROM")
    gone = late
    for _ in range(3):
        gone = pl.concat(
            [
                gone,
                derived.join(gone, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi").select(
                    "tenant", pl.col("src").alias("id")
                ),
            ]
        ).unique()
    nodes = n.join(gone, on=["tenant", "id"], how="anti")
    nodes = nodes.with_columns(
        pl.when(pl.col("tenant").is_in(sorted(touched)) & (pl.col("type") == "Entity"))
        .then(pl.col("mentions").fill_null(2) - 1)
        .otherwise("mentions")
        .alias("mentions")
    )
    edges = e.join(gone, left_on=["tenant", "src"], right_on=["tenant", "id"], how="anti").join(
        gone, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="anti"
    )
    return nodes.to_arrow().cast(g.nodes.schema), edges.to_arrow().cast(g.edges.schema), touched


def previous_of(result: ConsolidationResult) -> Previous:
    return Previous(result.nodes, result.communities, result.promotions)


def assert_same_result(a: ConsolidationResult, b: ConsolidationResult) -> None:
    for name in TABLES:
        assert_same(getattr(a, name), getattr(b, name))


def run_before_append(g: RandomGraph, seed: int) -> tuple[DirtyRun, set[str]]:
    """The full dirty-set run over the lake before the append (before_append), and the tenants the append touches."""
    old_nodes, old_edges, touched = before_append(g, seed)
    first = consolidate_dirty(
        old_nodes,
        old_edges,
        feedback=g.feedback,
        ops=[],
        previous=Previous(),
        as_of=g.as_of,
        snapshot=None,
        config=CONFIG,
    )
    assert first.mode == "full"
    return first, touched


def after_an_append(
    g: RandomGraph, seed: int, given: Callable[[Previous], Previous] = lambda held: held
) -> tuple[DirtyRun, DirtyRun, ConsolidationResult, set[str]]:
    """run_before_append, then the incremental run over the whole graph three days later from its snapshot (given
    the last run's tables as `given` hands them), and consolidate() of the same: (first, run, full, touched)."""
    first, touched = run_before_append(g, seed)
    previous, later = previous_of(first.result), g.as_of + timedelta(days=3)
    run = consolidate_dirty(
        g.nodes,
        g.edges,
        feedback=g.feedback,
        ops=[],
        previous=given(previous),
        as_of=later,
        snapshot=first.snapshot,
        config=CONFIG,
    )
    assert run.mode == "incremental", run.reason
    full = consolidate(g.nodes, g.edges, feedback=g.feedback, ops=[], previous=previous, as_of=later, config=CONFIG)
    return first, run, full, touched


@fuzz_settings(15)
@given(SEEDS)
def test_a_dirty_run_after_an_append_equals_consolidate(seed) -> None:
    _, run, full, touched = after_an_append(random_graph(seed, tenants=3, episodes=25, time_span_days=20), seed)
    assert run.dirty_tenants == len(touched) <= run.tenants
    assert_same_result(run.result, full)


def test_the_last_runs_state_and_promotions_are_read_by_the_time_steps_not_held_through_the_graph_steps() -> None:
    """Previous.read: the node state and the promotions (0.9 GB at 1M messages) are asked for once each, after the
    graph steps, and the run equals consolidate() given the same tables in hand."""
    calls: list[tuple[str, bool]] = []
    in_time_steps = [False]

    def timed(*args, **kwargs):
        in_time_steps[0] = True
        return time_steps(*args, **kwargs)

    def lazy(held: Previous) -> Previous:
        def read(name: str) -> pa.Table | None:
            calls.append((name, in_time_steps[0]))
            return getattr(held, name)

        assert held.promotions is not None and held.promotions.num_rows  # a history to carry on
        return Previous(communities=held.communities, read=read)

    with mock.patch("jobs.dirty.time_steps", timed):
        _, run, full, _ = after_an_append(random_graph(3), 3, lazy)
    assert sorted(calls) == [("nodes", True), ("promotions", True)]
    assert_same_result(run.result, full)


@fuzz_settings(4)
@given(SEEDS)
@example(1)
def test_a_dirty_tenants_unchanged_version_groups_keep_their_rows_and_equal_consolidate(seed) -> None:
    """Within a redone tenant, the multi-claim version groups the append left as they were keep the snapshot's rows
    (no rules run for them), and the result is still consolidate()'s; the next snapshot holds every group's."""
    g = random_graph(seed, tenants=2, episodes=120, time_span_days=8)  # ~10 multi-claim groups per tenant
    first, run, full, _ = after_an_append(g, seed)
    assert_same_result(run.result, full)
    previous = previous_of(first.result)
    scratch = consolidate_dirty(
        g.nodes,
        g.edges,
        feedback=g.feedback,
        ops=[],
        previous=previous,
        as_of=g.as_of + timedelta(days=3),
        snapshot=None,
        config=CONFIG,
    )
    for a, b in zip(version_tables(run.snapshot.versions), version_tables(scratch.snapshot.versions)):
        assert_same(by_key(a), by_key(b))
    if seed == 1:  # a known mix: 3 of the redone tenant's 13 groups kept
        assert run.kept_version_groups == 3


def by_key(table: pa.Table) -> pa.Table:
    """`table` sorted by its key columns (a version group's, else (tenant, id)): the kept rows come after the redone."""
    keys = [c for c in ("tenant", "id", "type", "subject", "canon", "patient", "modality") if c in table.column_names]
    return table.take(pc.sort_indices(table, [(c, "ascending") for c in keys]))


@fuzz_settings(10)
@given(SEEDS)
def test_a_forget_request_is_swept_and_its_tenant_redone(seed) -> None:
    g = random_graph(seed, tenants=2, episodes=20)
    first = consolidate_dirty(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=Previous(), as_of=g.as_of, snapshot=None, config=CONFIG
    )
    gone = pl.from_arrow(g.nodes.select(["tenant", "id", "type"])).filter(pl.col("type") == "Fact").head(2)
    forget = ForgetRules([ForgetRequest(t, "node", i, nodes=(i,)) for t, i in gone.select("tenant", "id").iter_rows()])
    nodes = pl.from_arrow(g.nodes).join(gone.select("tenant", "id"), on=["tenant", "id"], how="anti").to_arrow()
    previous = previous_of(first.result)
    run = consolidate_dirty(
        nodes,
        g.edges,
        feedback=g.feedback,
        ops=[],
        previous=previous,
        as_of=g.as_of,
        snapshot=first.snapshot,
        forget=forget,
        config=CONFIG,
    )
    full = consolidate(
        nodes, g.edges, feedback=g.feedback, ops=[], previous=previous, as_of=g.as_of, forget=forget, config=CONFIG
    )
    assert run.mode == "incremental"
    assert_same_result(run.result, full)


@fuzz_settings(10)
@given(SEEDS)
def test_the_stage_and_the_result_overlays_equal_their_two_diffs(seed) -> None:
    """The asset writes the result as an overlay over R2G, and the snapshot's stage as what it adds to the result, from
    one hashing (raw_store.tables.stage_and_final_overlays): the result's overlay is its diff from R2G, and R2G under
    it and the stage's overlay and patch gives the stage back, with forgotten nodes and capped edges dropped."""
    g = random_graph(seed, tenants=2, episodes=20)
    gone = pl.from_arrow(g.nodes.select(["tenant", "id", "type"])).filter(pl.col("type") == "Fact").head(2)
    forget = ForgetRules([ForgetRequest(t, "node", i, nodes=(i,)) for t, i in gone.select("tenant", "id").iter_rows()])
    capped = replace(CONFIG, sparsify=SparsifyConfig(default_cap=2))
    run = consolidate_dirty(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=Previous(), as_of=g.as_of, snapshot=None,
        forget=forget, config=capped,
    )  # fmt: skip
    stage, result = run.snapshot.stage, run.result
    assert result.cold_edges.num_rows and result.nodes.num_rows < stage.nodes.num_rows  # rows were dropped
    made = []
    for r2g, staged, final, schema, ignore in (
        (g.nodes, stage.nodes, result.nodes, NODES, STATE_COLUMNS),
        (g.edges, stage.edges, result.edges, EDGES, ()),
    ):
        to_stage, patch, to_final = stage_and_final_overlays(r2g, staged, final, schema, ignore=ignore)
        made.append((to_stage, patch, to_final))
        want = diff_overlay(r2g, final, schema, ignore=ignore)
        assert_same(to_final.upserts, want.upserts)
        assert_same(to_final.removed, want.removed)
        # the stage comes back whole from R2G, the result's overlay, the stage's overlay and its patch (the files)
        assert_same(
            patched(layered_table(r2g, [to_final, to_stage]), patch),
            staged.sort_by([("tenant", "ascending"), ("id", "ascending")]),
        )
        # what the stage's overlay holds: exactly the stage rows the result dropped, whole
        key = ["tenant", "id"]
        dropped = pl.from_arrow(staged).join(pl.from_arrow(final.select(key)), on=key, how="anti").sort(key)
        assert_same(to_stage.upserts, conform(dropped.to_arrow(), schema))
        assert to_stage.removed.num_rows == 0
    (stage_nodes, node_patch, final_nodes), (stage_edges, edge_patch, final_edges) = made
    assert node_patch.num_rows and edge_patch.num_rows == 0  # versions set state columns; edges have none
    assert node_patch.schema == NODE_STATE
    assert stage_nodes.upserts.num_rows and stage_edges.upserts.num_rows  # the forgotten nodes, the capped edges
    # the patch: exactly the rows whose state columns the layers below give otherwise than the stage has them
    key = ["tenant", "id"]
    layered = pl.from_arrow(layered_table(g.nodes, [final_nodes, stage_nodes]))
    differ = layered.join(pl.from_arrow(stage.nodes), on=key, suffix="_s").filter(
        ~pl.all_horizontal(pl.col(c).eq_missing(pl.col(f"{c}_s")) for c in STATE_COLUMNS)
    )
    assert sorted(pl.from_arrow(node_patch.select(key)).rows()) == sorted(differ.select(key).rows())


def test_an_unchanged_lake_redoes_no_tenant_and_a_new_config_redoes_all() -> None:
    g = random_graph(3, tenants=2, episodes=15)
    first = consolidate_dirty(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=Previous(), as_of=g.as_of, snapshot=None, config=CONFIG
    )
    previous = previous_of(first.result)
    again = consolidate_dirty(
        g.nodes,
        g.edges,
        feedback=g.feedback,
        ops=[],
        previous=previous,
        as_of=g.as_of,
        snapshot=first.snapshot,
        config=CONFIG,
    )
    assert (again.mode, again.dirty_tenants, again.stage_reused) == ("incremental", 0, True)
    assert_same_result(
        again.result,
        consolidate(g.nodes, g.edges, feedback=g.feedback, ops=[], previous=previous, as_of=g.as_of, config=CONFIG),
    )
    other = consolidate_dirty(
        g.nodes,
        g.edges,
        feedback=g.feedback,
        ops=[],
        previous=previous,
        as_of=g.as_of,
        snapshot=first.snapshot,
        config=replace(CONFIG, redact_pii=True),
    )
    assert (other.mode, other.dirty_tenants) == ("full", 2)
    assert other.reason == "configuration, code or ops batches changed"


def test_tenant_hashes_see_a_changed_a_moved_and_a_removed_row() -> None:
    g = random_graph(4, tenants=2, episodes=10)
    base = tenant_hashes(g.nodes, g.edges)
    n = pl.DataFrame(pl.from_arrow(g.nodes))
    t0 = pl.col("tenant") == "t0"
    first = n.filter(t0).get_column("id")[0]
    changed = n.with_columns(pl.when(t0 & (pl.col("id") == first)).then(pl.lit("x")).otherwise("title").alias("title"))
    # a state column (hashed apart from the others, see input_row_hashes) counts as much as any
    tier = n.with_columns(pl.when(t0 & (pl.col("id") == first)).then(pl.lit("x")).otherwise("tier").alias("tier"))
    moved = pl.concat([n.filter(t0).reverse(), n.filter(~t0)], how="vertical_relaxed")
    for variant in (changed, tier, moved, n.filter(~t0 | (pl.col("id") != first))):
        assert changed_tenants(base, tenant_hashes(variant.to_arrow().cast(g.nodes.schema), g.edges)) == {"t0"}
    assert changed_tenants(base, tenant_hashes(g.nodes, g.edges)) == set()


def test_the_dirty_run_hands_on_the_row_hashes_of_its_input() -> None:
    """consolidate_dirty's row hashes of its input are the overlays' base_hashes (the asset hashes R2G once)."""
    g = random_graph(5, tenants=2, episodes=10)
    run = consolidate_dirty(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=Previous(), as_of=g.as_of, snapshot=None, config=CONFIG
    )
    assert run.input_hashes is not None
    nodes, edges = input_row_hashes(g.nodes, g.edges)
    assert run.input_hashes[0].equals(nodes) and run.input_hashes[1].equals(edges)
    assert tenant_hashes(g.nodes, g.edges, (nodes, edges)).equals(tenant_hashes(g.nodes, g.edges))


@fuzz_settings(6)
@given(SEEDS, st.sampled_from([1, 3]))
@example(0, 1)
def test_the_input_graph_and_the_snapshot_are_let_go_before_the_time_steps(seed, tenants) -> None:
    """Handed over as the asset hands them (no other reference), the R2G graph and the last snapshot are garbage by
    the time steps: a snapshot read from the lake loads its stage over the R2G graph, so anything still holding it
    holds that graph (at 1M messages 5.2 GB, held through the time steps by the version step until this test)."""
    g = random_graph(seed, tenants=tenants, episodes=25)
    first, _ = run_before_append(g, seed)
    previous = previous_of(first.result)
    handed = [pa.Table.from_batches(t.to_batches(), t.schema) for t in (g.nodes, g.edges)] + [first.snapshot]
    del first
    refs = [weakref.ref(x) for x in handed]
    alive: list[int] = []

    def watched_time_steps(*args, **kwargs):
        gc.collect()
        alive.extend(k for k, ref in enumerate(refs) if ref() is not None)
        return time_steps(*args, **kwargs)

    with mock.patch("jobs.dirty.time_steps", watched_time_steps):
        run = consolidate_dirty(
            handed.pop(0),
            handed.pop(0),
            feedback=g.feedback,
            ops=[],
            previous=previous,
            as_of=g.as_of + timedelta(days=3),
            snapshot=handed.pop(),
            config=CONFIG,
        )
    assert run.mode == "incremental", run.reason
    assert alive == [], f"still held at the time steps: {[('nodes', 'edges', 'snapshot')[k] for k in alive]}"


def _other_pool() -> pa.MemoryPool:
    """A memory pool other than the default one, to count the bytes of one table alone."""
    for make in (pa.system_memory_pool, pa.jemalloc_memory_pool, pa.mimalloc_memory_pool):
        try:
            pool = make()
        except NotImplementedError:  # an allocator this pyarrow was built without
            continue
        if pool.backend_name != pa.default_memory_pool().backend_name:
            return pool
    raise AssertionError("pyarrow has a single memory pool")


def _loading_over(snapshot: Snapshot, r2g_edges: pa.Table) -> Snapshot:
    """`snapshot` as read_snapshot gives it: its stage loaded when first asked for, over the R2G graph of the run
    (the loader holds that graph; here the graph is not read, only held), and its rollups on their own."""
    stage, rollups = snapshot.stage, snapshot.rollups()
    return replace(
        snapshot, held=None, load=lambda: stage if r2g_edges.num_rows else stage, load_rollups=lambda: rollups
    )


@pytest.mark.parametrize("case", ["first build", "append", "new configuration"])
def test_handed_over_the_input_edges_are_freed_as_the_version_step_copies_what_it_keeps(case) -> None:
    """The version step drops rows (here a CONTRADICTS that was a change over time) by copying the edges it keeps.
    Handed over through consolidate_dirty and graph_steps with no reference kept, the input edges are let go as they
    are copied: at the end of that copy their bytes are all free, not held twice (3.5 GB at 1M messages), nor pinned
    by the step's own frames of the edge keys, which share string buffers with them. With a snapshot of the last run
    (loading its stage over the same edges) that is not used, the run's one tenant being dirty or the configuration
    new, the snapshot does not hold them either."""
    g = Graph()
    coffee_change(g)
    for k in range(3000):
        g.edge("t", "alice", "MENTIONS", f"x{k}")
    nodes, edges = g.tables()
    as_of, previous, snapshot = D1 + 20 * DAY, Previous(), None
    if case != "first build":  # the last run saw one MENTIONS less, under this configuration or another one
        first = consolidate_dirty(
            nodes, edges.slice(0, edges.num_rows - 1), feedback=FEEDBACK.empty_table(), ops=[], previous=previous,
            as_of=as_of, snapshot=None, config=CONFIG if case == "append" else replace(CONFIG, redact_pii=True),
        )  # fmt: skip
        previous, snapshot = previous_of(first.result), first.snapshot
        del first
    pool = _other_pool()
    edges = pc.take(edges, pa.array(range(edges.num_rows)), memory_pool=pool)  # its bytes alone in `pool`
    handed = [nodes, edges, None if snapshot is None else _loading_over(snapshot, edges)]
    input_bytes, at_copy_end = pool.bytes_allocated(), []
    del nodes, edges, snapshot

    def watched_take(columns, rows, schema):
        taken = take_columns(columns, rows, schema)
        gc.collect()
        at_copy_end.append(pool.bytes_allocated())
        return taken

    with mock.patch("jobs.versions.take_columns", watched_take):
        run = consolidate_dirty(
            handed.pop(0),
            handed.pop(0),
            feedback=FEEDBACK.empty_table(),
            ops=[],
            previous=previous,
            as_of=as_of,
            snapshot=handed.pop(),
            config=CONFIG,
        )
    assert run.mode == ("incremental" if case == "append" else "full"), run.reason
    kinds = pl.from_arrow(run.result.edges.select(["src", "type", "dst"]))
    assert kinds.filter(pl.col("type") == "CONTRADICTS").height == 0  # the row the step dropped
    assert ("f_love", "VERSION_NEXT", "f_not_like") in set(kinds.iter_rows())
    assert input_bytes > 0 and at_copy_end == [0], (at_copy_end, input_bytes)


def test_a_daily_run_lets_the_r2g_graph_go_as_it_loads_the_last_stage_over_it(tmp_path) -> None:
    """A run with the input of the last one (the daily run: only `as_of` moves) takes the last run's stage, read from
    the lake over this run's R2G graph (read_snapshot). Handed over as the asset hands it, the R2G graph then has the
    stage's loader as its only holder, which hands it to the gather: once the stage's edges are gathered, none of the
    R2G edges' bytes are held (at 1M messages the R2G graph beside the whole stage: 13.7 GB against 10.5)."""
    g = random_graph(3, tenants=1, episodes=25)
    first = consolidate_dirty(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=Previous(), as_of=g.as_of, snapshot=None, config=CONFIG
    )
    # the last run's files, as the consolidation asset writes them: the result over R2G, the stage over the result
    folder = tmp_path / "consolidated"
    write_consolidated(
        folder, first, {"nodes": g.nodes.select(["tenant", "id"]), "edges": g.edges.select(["tenant", "id"])}
    )
    pool = _other_pool()
    edges = pc.take(g.edges, pa.array(range(g.edges.num_rows)), memory_pool=pool)  # its bytes alone in `pool`
    nodes = pa.Table.from_batches(g.nodes.to_batches(), g.nodes.schema)
    handed = [nodes, edges, read_snapshot(folder / STEPS, nodes, edges)]
    input_bytes, after_gather = pool.bytes_allocated(), []
    del nodes, edges

    def watched_gather(base, overlays):
        gathered = layered_table(base, overlays)
        del base
        gc.collect()
        after_gather.append(pool.bytes_allocated())
        return gathered

    with mock.patch("jobs.snapshot.layered_table", watched_gather):
        run = consolidate_dirty(
            handed.pop(0),
            handed.pop(0),
            feedback=g.feedback,
            ops=[],
            previous=previous_of(first.result),
            as_of=g.as_of + timedelta(days=3),
            snapshot=handed.pop(),
            config=CONFIG,
        )
    assert run.mode == "incremental" and run.stage_reused, run.reason
    assert input_bytes > 0 and len(after_gather) == 2 and after_gather[-1] == 0, (after_gather, input_bytes)
    later = consolidate(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=previous_of(first.result),
        as_of=g.as_of + timedelta(days=3), config=CONFIG,
    )  # fmt: skip
    assert_same_result(run.result, later)


@fuzz_settings(10)
@given(SEEDS)
def test_a_changed_conversation_is_the_only_one_rolled_up_again(seed) -> None:
    g = random_graph(seed, tenants=1, episodes=40)
    n = pl.from_arrow(g.nodes)
    late = n.filter((pl.col("type") == "Episode") & (pl.col("conv_id") == "c1")).tail(2).select("tenant", "id")
    old_nodes = n.join(late, on=["tenant", "id"], how="anti").to_arrow().cast(g.nodes.schema)
    first = consolidate_dirty(
        old_nodes,
        g.edges,
        feedback=g.feedback,
        ops=[],
        previous=Previous(),
        as_of=g.as_of,
        snapshot=None,
        config=CONFIG,
    )
    previous = previous_of(first.result)
    with mock.patch("jobs.dirty.rollup_input", wraps=rollup_input) as spy:
        run = consolidate_dirty(
            g.nodes,
            g.edges,
            feedback=g.feedback,
            ops=[],
            previous=previous,
            as_of=g.as_of,
            snapshot=first.snapshot,
            config=CONFIG,
        )
    asked = [set(call.args[2].column("conv_id").to_pylist()) for call in spy.call_args_list]
    assert_same_result(
        run.result,
        consolidate(g.nodes, g.edges, feedback=g.feedback, ops=[], previous=previous, as_of=g.as_of, config=CONFIG),
    )
    assert asked == ([{"c1"}] if late.height else [set()])


def test_the_fingerprint_is_the_same_in_every_process() -> None:
    """A set in the configuration must not make two runs' fingerprints differ (string hashing is per process)."""
    import subprocess
    import sys

    code = (
        "from jobs.consolidate import ConsolidationConfig; from jobs.dirty import run_fingerprint; "
        "print(run_fingerprint(ConsolidationConfig(), []))"
    )
    prints = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(prints) == 1


@pytest.mark.parametrize("case", ["none dropped", "capped", "forgotten now", "forgotten before"])
@fuzz_settings(3)
@given(seed=SEEDS)
def test_a_daily_run_keeps_the_edge_overlays_only_where_it_would_write_the_same_files(case, seed) -> None:
    """A daily run (no tenant changed) that drops no edge after a run that dropped none keeps the edge overlays on
    disk (jobs.snapshot.edge_overlays_kept); every file then equals what writing them all gives. Where either run
    drops edges (degree caps, a node forgotten by this run or by the last one), the edge overlays are written."""
    import tempfile
    from pathlib import Path

    from raw_store import tables

    g = random_graph(seed, tenants=2, episodes=15)
    none_dropped = SparsifyConfig(caps={}, default_cap=None, similar_threshold=0.0)
    cfg = replace(CONFIG, sparsify=SparsifyConfig(default_cap=2) if case == "capped" else none_dropped)
    hub = pl.from_arrow(g.edges.select(["tenant", "src"])).group_by("tenant", "src").len().sort("len").row(-1)
    forget = ForgetRules([ForgetRequest(hub[0], "node", hub[1], nodes=(hub[1],))])
    keys = {"nodes": g.nodes.select(["tenant", "id"]), "edges": g.edges.select(["tenant", "id"])}
    first = consolidate_dirty(
        g.nodes, g.edges, feedback=g.feedback, ops=[], previous=Previous(), as_of=g.as_of, snapshot=None,
        forget=forget if case == "forgotten before" else None, config=cfg,
    )  # fmt: skip
    first_dropped = first.result.edges.num_rows < first.snapshot.stage.edges.num_rows
    with tempfile.TemporaryDirectory() as tmp:
        kept, written = Path(tmp, "kept"), Path(tmp, "written")
        write_consolidated(kept, first, dict(keys))
        for f in kept.rglob("*"):
            if f.is_file():
                (written / f.relative_to(kept)).parent.mkdir(parents=True, exist_ok=True)
                (written / f.relative_to(kept)).write_bytes(f.read_bytes())

        def daily(folder: Path) -> DirtyRun:
            return consolidate_dirty(
                g.nodes, g.edges, feedback=g.feedback, ops=[], previous=previous_of(first.result),
                as_of=g.as_of + timedelta(days=40), snapshot=read_snapshot(folder / STEPS, g.nodes, g.edges),
                forget=forget if case == "forgotten now" else None, config=cfg,
            )  # fmt: skip

        run = daily(kept)
        assert run.mode == "incremental" and run.stage_reused, run.reason
        dropped = run.result.edges.num_rows < run.snapshot.stage.edges.num_rows
        assert (dropped, first_dropped) == {
            "none dropped": (False, False), "capped": (True, True),
            "forgotten now": (True, False), "forgotten before": (False, True),
        }[case]  # fmt: skip
        with mock.patch("jobs.snapshot.stage_and_final_overlays", wraps=tables.stage_and_final_overlays) as diffs:
            write_consolidated(kept, run, dict(keys))
        assert diffs.call_count == (1 if case == "none dropped" else 2)  # the nodes' always, the edges' unless kept
        with mock.patch("jobs.snapshot.edge_overlays_kept", return_value=None):  # every file written
            write_consolidated(written, daily(written), dict(keys))
        names = sorted(str(f.relative_to(kept)) for f in kept.rglob("*") if f.is_file())
        assert names == sorted(str(f.relative_to(written)) for f in written.rglob("*") if f.is_file())
        for name in names:
            assert (kept / name).read_bytes() == (written / name).read_bytes(), name
