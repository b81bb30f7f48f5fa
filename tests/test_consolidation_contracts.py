"""Group contracts of the consolidation steps: a run over the input rows of some groups (plus the context rows the
step's `*_input` function adds) gives exactly the full run's output rows of those groups.

This is what lets a build recompute only a dirty set of groups after a new inbox file. Each test draws a random
R2G-shaped graph and a random subset of its groups.
"""

from __future__ import annotations

import random
from datetime import timedelta

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from jobs.communities import CommunityConfig, communities_from_pairs, context_items, detect_communities
from jobs.community_contexts import aggregate_pairs, context_pairs
from jobs.pii import flag_nodes, pii_group_keys
from jobs.rollup import RollupConfig, rollup_episodes, rollup_group_keys, rollup_input
from jobs.sparsify import SparsifyConfig, sparsify, sparsify_group_keys, sparsify_input
from jobs.tiers import TierConfig, promote, tier_input
from jobs.versions import VersionConfig, version_facts, version_group_keys, version_input
from r2g.link import LINK_GROUP, link_facts, link_group_keys, link_input
from tests.consolidation_graphs import random_graph
from tests.fuzzing import fuzz_settings
from tests.test_consolidation_golden import assert_same

SEEDS = st.integers(0, 2**32 - 1)


def pick_groups(keys: pl.DataFrame, cols: list[str], seed: int, share: float = 0.4) -> pl.DataFrame:
    """A random subset of the distinct groups (rows of `cols`) in `keys`, and every key row of those groups."""
    groups = keys.select(cols).unique().sort(cols, nulls_last=True)
    r = random.Random(seed)
    chosen = groups.filter(pl.Series([r.random() < share for _ in range(groups.height)], dtype=pl.Boolean))
    return keys.join(chosen, on=cols, how="semi", nulls_equal=True)


def rows_of(table: pa.Table, ids: pl.DataFrame, cols: tuple[str, str] = ("tenant", "id")) -> pa.Table:
    """The rows of `table` whose (tenant, id-like column) is in `ids` (tenant, id), in table order."""
    t = pl.from_arrow(table.select(list(cols))).with_row_index("_row")
    hit = t.join(ids, left_on=list(cols), right_on=["tenant", "id"], how="semi", nulls_equal=True)
    return table.take(hit.get_column("_row").to_arrow())


def touching(edges: pa.Table, ids: pl.DataFrame) -> pa.Table:
    e = pl.from_arrow(edges.select(["tenant", "src", "dst"])).with_row_index("_row")
    hit = pl.concat(
        [
            e.join(ids, left_on=["tenant", "src"], right_on=["tenant", "id"], how="semi"),
            e.join(ids, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi"),
        ]
    )
    return edges.take(hit.get_column("_row").unique().sort().to_arrow())


@fuzz_settings(25)
@given(SEEDS)
def test_link_facts_of_some_groups_are_the_full_runs_links_of_those_groups(seed) -> None:
    g = random_graph(seed, episodes=40, time_span_days=5)
    chosen = pick_groups(pl.from_arrow(link_group_keys(g.nodes, g.edges)), ["tenant", *LINK_GROUP[1:]], seed)
    part = link_facts(*link_input(g.nodes, g.edges, chosen.to_arrow()))
    assert_same(part, rows_of(link_facts(g.nodes, g.edges), chosen.select("tenant", "id"), ("tenant", "src")))


@fuzz_settings(25)
@given(SEEDS)
def test_version_facts_of_some_groups_are_the_full_runs_rows_of_those_groups(seed) -> None:
    g = random_graph(seed, episodes=40, time_span_days=8)
    cfg = VersionConfig(near_tie_margin=0.2)
    keys = pl.from_arrow(version_group_keys(g.nodes, g.edges, cfg))
    chosen = pick_groups(keys, ["tenant", "type", "subject", "canon", "patient", "modality"], seed)
    members = chosen.select("tenant", "id")
    full = version_facts(g.nodes, g.edges, cfg)
    part = version_facts(*version_input(g.nodes, g.edges, chosen.to_arrow(), cfg), cfg)
    assert_same(rows_of(part.nodes, members), rows_of(full.nodes, members))
    assert_same(touching(part.edges, members), touching(full.edges, members))  # incl. removed R2G CONTRADICTS

    assert_same(review_of(part.review_queue, members), review_of(full.review_queue, members))


ROLLUPS = [
    RollupConfig(threshold=2, fan_in=2, max_depth=3),
    RollupConfig(threshold=3, fan_in=2, period="month"),
    RollupConfig(threshold=2, fan_in=3, period="week", keep_recent_leaves=1),
]


@fuzz_settings(25)
@given(SEEDS, st.sampled_from(range(len(ROLLUPS))), st.booleans())
def test_rollups_of_some_conversations_are_the_full_runs_parents_of_those(seed, which, rerun) -> None:
    g, cfg = random_graph(seed, episodes=40), ROLLUPS[which]
    nodes, edges = g.nodes, g.edges
    if rerun:  # existing parents and claimed children: an earlier run's output, then more turns
        first = rollup_episodes(nodes, edges, cfg)
        more = random_graph(seed + 1, episodes=15).nodes
        more = more.filter(pc.equal(more.column("type"), "Episode"))
        more = more.set_column(0, "id", pc.binary_join_element_wise("new:", more.column("id"), ""))  # ids unique
        nodes = pa.concat_tables([nodes, first.nodes, more])
        edges = pa.concat_tables([edges, first.edges])
    keys = pl.from_arrow(rollup_group_keys(nodes, cfg)).filter(pl.col("conv_id").is_not_null())
    chosen = pick_groups(keys, ["tenant", "conv_id", "bucket"], seed)

    def parents_in_groups(out) -> tuple[pa.Table, pa.Table]:
        made = (
            pl.from_arrow(rollup_group_keys(out.nodes, cfg))
            .join(
                chosen.select("tenant", "conv_id", "bucket").unique(),
                on=["tenant", "conv_id", "bucket"],
                how="semi",
                nulls_equal=True,
            )
            .select("tenant", "id")
        )
        return rows_of(out.nodes, made), rows_of(out.edges, made, ("tenant", "src"))

    full, part = (
        rollup_episodes(nodes, edges, cfg),
        rollup_episodes(*rollup_input(nodes, edges, chosen.to_arrow(), cfg), cfg),
    )
    for a, b in zip(parents_in_groups(part), parents_in_groups(full)):
        assert_same(a, b)


@fuzz_settings(15)
@given(SEEDS)
def test_pii_flags_are_per_row(seed) -> None:
    g = random_graph(seed, episodes=15)
    some = pick_groups(pl.from_arrow(pii_group_keys(g.nodes)), ["tenant", "id"], seed).select("tenant", "id")
    assert_same(
        flag_nodes(rows_of(g.nodes, some), redact_text=True), rows_of(flag_nodes(g.nodes, redact_text=True), some)
    )


@fuzz_settings(25)
@given(
    SEEDS,
    st.sampled_from(
        [
            TierConfig(short_term_max_memories=4),
            TierConfig(short_term_max_memories=6, overflow_strategy="selective_cleanup"),
            TierConfig(),
        ]
    ),
)
def test_promote_of_some_nodes_with_the_tenants_mid_count_is_the_full_run(seed, cfg) -> None:
    g = random_graph(seed, episodes=30, feedback=40)
    full1 = promote(g.nodes, g.feedback, None, g.as_of, cfg, edges=g.edges)
    later = g.as_of + timedelta(days=9)
    full2 = promote(g.nodes, g.feedback, full1.nodes, later, cfg, edges=g.edges)
    some = pick_groups(pl.from_arrow(g.nodes.select(["tenant", "id"])), ["tenant", "id"], seed)
    nodes, feedback, previous, edges = tier_input(g.nodes, g.feedback, full1.nodes, g.edges, some.to_arrow())
    part = promote(nodes, feedback, previous, later, cfg, edges=edges, tenant_mid_counts=full2.mid_counts)
    assert_same(part.nodes, rows_of(full2.nodes, some))
    assert_same(part.promotions, rows_of(full2.promotions, some, ("tenant", "node_id")))
    assert_same(part.review, review_of(full2.review, some))


def review_of(queue: pa.Table, ids: pl.DataFrame) -> pa.Table:
    """The review rows all of whose nodes are in `ids` (tenant, id)."""
    inside = set(ids.select("tenant", "id").iter_rows())
    keep = [
        all((t, i) in inside for i in nodes)
        for t, nodes in zip(queue.column("tenant").to_pylist(), queue.column("node_ids").to_pylist())
    ]
    return queue.filter(pa.array(keep, pa.bool_()))


def test_the_capacity_rule_couples_a_tenants_nodes() -> None:
    """Without the tenant's mid count a partial run can decide otherwise: the documented coupling."""
    g = random_graph(5, episodes=30)
    cfg = TierConfig(short_term_max_memories=4)
    full = promote(g.nodes, None, None, g.as_of, cfg)
    facts = (
        pl.from_arrow(full.nodes.select(["tenant", "id", "type", "tier"]))
        .filter((pl.col("type") == "Fact") & (pl.col("tier") == "long"))
        .head(1)
        .select("tenant", "id")
    )
    alone = promote(rows_of(g.nodes, facts), None, None, g.as_of, cfg)
    told = promote(rows_of(g.nodes, facts), None, None, g.as_of, cfg, tenant_mid_counts=full.mid_counts)
    assert told.nodes.column("tier").to_pylist() == ["long"] != alone.nodes.column("tier").to_pylist()


@fuzz_settings(25)
@given(
    SEEDS,
    st.sampled_from(
        [
            SparsifyConfig(default_cap=1, caps={"SIMILAR_TO": 1, "ABOUT": 2}),
            SparsifyConfig(default_cap=2, similar_threshold=0.85),
        ]
    ),
)
def test_sparsify_of_some_groups_places_their_edges_as_the_full_run(seed, cfg) -> None:
    g = random_graph(seed)
    chosen = pick_groups(pl.from_arrow(sparsify_group_keys(g.edges, cfg)), ["tenant", "node", "type"], seed)
    full = sparsify(g.nodes, g.edges, g.as_of, cfg)
    part = sparsify(*sparsify_input(g.nodes, g.edges, chosen.to_arrow(), cfg), g.as_of, cfg)
    ids = chosen.select("tenant", "id").unique()
    assert_same(rows_of(part.edges, ids), rows_of(full.edges, ids))
    assert_same(rows_of(part.cold, ids), rows_of(full.cold, ids))


@fuzz_settings(15)
@given(SEEDS)
def test_communities_are_per_tenant_and_pairs_add_over_batches_of_contexts(seed) -> None:
    g = random_graph(seed, episodes=40, tenants=3)
    cfg = CommunityConfig(hub_min_degree=3)
    full = detect_communities(g.nodes, g.edges, None, cfg)
    one = rows_of(g.nodes, pl.from_arrow(g.nodes.select(["tenant", "id"])).filter(pl.col("tenant") == "t1"))
    alone = detect_communities(one, g.edges, None, cfg)
    t1 = pc.equal(full.communities.column("tenant"), "t1")
    assert_same(alone.communities, full.communities.filter(t1))
    assert_same(alone.nodes, full.nodes.filter(pc.equal(full.nodes.column("tenant"), "t1")))
    # the pair table of a lake is the sum of its batches' (any split of the contexts), and Leiden runs from it
    items = pl.from_arrow(context_items(g.nodes, g.edges, cfg))
    r = random.Random(seed)
    contexts = items.select("tenant", "context").unique().sort(["tenant", "context"])
    batch = pl.Series([r.randrange(3) for _ in range(contexts.height)])
    split = contexts.with_columns(batch.alias("_b"))
    parts = [items.join(split.filter(pl.col("_b") == b), on=["tenant", "context"], how="semi") for b in range(3)]
    pairs = aggregate_pairs(*(context_pairs(p.to_arrow()) for p in parts))
    assert_same(pairs, context_pairs(items.to_arrow()))
    again = communities_from_pairs(pairs, pl.concat(parts).to_arrow(), g.nodes, None, cfg)
    for a, b in ((again.communities, full.communities), (again.nodes, full.nodes), (again.edges, full.edges)):
        assert_same(a, b)


@fuzz_settings(15)
@given(SEEDS)
def test_context_items_of_a_file_batch_are_its_contexts_rows(seed) -> None:
    """One inbox file's rows (its Episodes, what derives from them, the tenant's Entities) give exactly the context
    rows of its Episodes: a batch's pairs can be computed when the file arrives."""
    g = random_graph(seed, episodes=30)
    items = pl.from_arrow(context_items(g.nodes, g.edges))
    n = pl.from_arrow(g.nodes.select(["tenant", "id", "type", "conv_id"]))
    file_eps = n.filter((pl.col("type") == "Episode") & (pl.col("conv_id") == "c1")).select("tenant", "id")
    e = pl.from_arrow(g.edges.select(["tenant", "src", "dst", "type"]))
    derived = e.filter(pl.col("type") == "DERIVED_FROM")
    carriers = file_eps
    for _ in range(3):
        carriers = pl.concat(
            [
                carriers,
                derived.join(carriers, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi").select(
                    "tenant", pl.col("src").alias("id")
                ),
            ]
        ).unique()
    others = n.filter(pl.col("type") != "Episode").select("tenant", "id")
    # what derives from this file's Episodes only (an R2G partition never derives across files)
    elsewhere = (
        derived.join(
            n.filter(pl.col("type") == "Episode"), left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi"
        )
        .join(file_eps, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="anti")
        .select("tenant", pl.col("src").alias("id"))
    )
    batch_ids = pl.concat([file_eps, others.join(elsewhere, on=["tenant", "id"], how="anti")]).unique()
    batch_nodes = rows_of(g.nodes, batch_ids)
    batch = pl.from_arrow(context_items(batch_nodes, g.edges))
    mine = items.join(file_eps.rename({"id": "context"}), on=["tenant", "context"], how="semi")
    assert batch.join(file_eps.rename({"id": "context"}), on=["tenant", "context"], how="semi").equals(mine)


@fuzz_settings(15)
@given(SEEDS)
def test_context_items_do_not_depend_on_the_order_of_the_nodes(seed) -> None:
    """Nodes in (tenant, id) order (integer codes sorted) and shuffled (the strings sorted) give the same table."""
    g = random_graph(seed, episodes=30, tenants=3)
    ordered = g.nodes.take(pc.sort_indices(g.nodes, sort_keys=[("tenant", "ascending"), ("id", "ascending")]))
    shuffled = g.nodes.take(pa.array(random.Random(seed).sample(range(g.nodes.num_rows), g.nodes.num_rows)))
    items = context_items(ordered, g.edges)
    assert items.num_rows and items.equals(context_items(shuffled, g.edges))
    keys = pl.from_arrow(items)
    assert keys.equals(keys.sort(["tenant", "context", "item"]))
