"""Rollups (seed 001 `compactNodes` / `compactionCandidates`, SPEC §8): Episodes rolled into parent summaries.

Candidate selection is recall.read_api.ReadApi.compaction_candidates' rule, with its constants:
per tenant, per shared key — the conversation (group_by="conversation") or an ABOUT Concept
(group_by="concept"), optionally also a calendar period — the live *root* Episodes (no
SEMANTIC_CONTAINS parent yet; seed: "準備好 rollup 的語意根節點") at one depth are put in timeline
order (coalesce(time_start, first_seen) ascending, undated last, then id); at depth 0 the newest
`keep_recent_leaves` stay out; fewer than `threshold` left → nothing; else consecutive runs of
`fan_in` become groups (a short tail waits for more). Each group becomes one parent Episode
(subtype "rollup") with SEMANTIC_CONTAINS edges parent → child. The parents are depth d+1 roots
and are rolled up in turn while a level still reaches the threshold, up to `max_depth`
(children at depth >= max_depth are never grouped, as in compactionCandidates).

A parent (built in jobs.rollup_parents) holds: an extractive summary of its children (`text`), top keywords/entities, the time
span, raw_refs unioned and capped (r2g.merge.MERGED_REF_CAP), importance/confidence max (as
r2g.merge), frequency summed, and a deterministic id from tenant + sorted child ids. Children stay
as they are (not archived). Depth is not stored: it is 1 + the deepest child, read off the
SEMANTIC_CONTAINS edges. A child claimed by any parent (whatever its status) is never grouped
again (seed: CHILD_HAS_PARENT), so running on nodes ∪ output and edges ∪ output adds nothing.
With group_by="concept" an Episode about two Concepts could sit in two groups; the first group
(timeline order, then key) takes it, the other is re-formed from what is left.

Group-local under group_by="conversation" (`rollup_group_keys`: (tenant, conversation, period bucket);
`rollup_input` adds the tenant's existing rollups and SEMANTIC_CONTAINS edges): a group's parents, at every
level, depend on its own Episodes only. Under group_by="concept" the first-group-wins rule couples every
Concept of a tenant: the tenant is the unit. Node ids unique per tenant. Tested in
tests/test_consolidation_contracts.py::test_rollups_of_some_conversations_are_the_full_runs_parents_of_those.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import polars as pl
import pyarrow as pa

from jobs.rollup_parents import EPISODE, PROVENANCE, ROLLUP_SUBTYPE, SEMANTIC_CONTAINS, build_parents, parent_id
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame, take_columns, take_rows
from raw_store.lake import conform
from recall.read_api import (
    COMPACTION_FAN_IN,
    COMPACTION_KEEP_RECENT_LEAVES,
    COMPACTION_MAX_DEPTH,
    COMPACTION_THRESHOLD,
    GROUP_BY,
)
from recall.read_views import LIVE_STATUS

PERIODS = ("day", "week", "month", "year")


@dataclass(frozen=True)
class RollupConfig:
    # seed 001 compactionCandidates' compression settings; the seed names them without values, these are
    # recall.read_api's COMPACTION_* (Luker's defaults), shared so both pick the same groups.
    threshold: int = COMPACTION_THRESHOLD  # 6
    fan_in: int = COMPACTION_FAN_IN  # 3
    max_depth: int = COMPACTION_MAX_DEPTH  # 6
    keep_recent_leaves: int = COMPACTION_KEEP_RECENT_LEAVES  # 0
    group_by: str = "conversation"  # read_api.GROUP_BY: conversation | concept
    # SPEC §8 "one topic/period": None keeps compaction_candidates' grouping; day|week|month|year splits
    # each key further by the calendar bucket of the node's time (undated nodes share one bucket).
    period: str | None = None
    # Summary bound: r2g.rules.SUMMARY_MAX_CHARS (200, one turn) × 2 — a parent summarises several turns.
    text_max_chars: int = 400
    max_keywords: int = 12  # a handful per child at fan_in 3
    max_entities: int = 20

    def __post_init__(self) -> None:
        if self.threshold < 1 or self.fan_in < 2 or self.max_depth < 1 or self.keep_recent_leaves < 0:
            raise ValueError("BAD_ARGS: threshold >= 1, fan_in >= 2, max_depth >= 1, keep_recent_leaves >= 0")
        if self.group_by not in GROUP_BY:
            raise ValueError(f"BAD_ARGS: group_by must be one of {GROUP_BY}")
        if self.period is not None and self.period not in PERIODS:
            raise ValueError(f"BAD_ARGS: period must be None or one of {PERIODS}")
        if self.text_max_chars < 20 or self.max_keywords < 1 or self.max_entities < 0:
            raise ValueError("BAD_ARGS: text_max_chars >= 20, max_keywords >= 1, max_entities >= 0")


@dataclass(frozen=True)
class RollupResult:
    nodes: pa.Table  # NODES: the new parent Episodes (subtype rollup), sorted by (tenant, id)
    edges: pa.Table  # EDGES: SEMANTIC_CONTAINS parent → child, sorted by (tenant, id)


EPISODE_COLUMNS = [
    "id",
    "tenant",
    "type",
    "subtype",
    "title",
    "text",
    "keywords",
    "entities",
    "lang",
    "time_start",
    "time_end",
    "first_seen",
    "last_seen",
    "importance",
    "confidence",
    "frequency",
    "status",
    "raw_refs",
    "conv_id",
    "speaker",
]
_OUT_COLS = [
    "id",
    "tenant",
    "type",
    "subtype",
    "title",
    "text",
    "keywords",
    "entities",
    "lang",
    "time_start",
    "time_end",
    "importance",
    "confidence",
    "frequency",
    "first_seen",
    "last_seen",
    "status",
    "raw_refs",
    "provenance",
    "conv_id",
    "speaker",
]


def rollup_episodes(nodes: pa.Table, edges: pa.Table, config: RollupConfig = RollupConfig()) -> RollupResult:
    """New rollup parents and their SEMANTIC_CONTAINS edges for every tenant (only what is not there yet).

    group_by="conversation" (the default) is vectorised and group-local: the groups are (tenant, conversation,
    period bucket) — see rollup_group_keys — and no group's parents depend on another's rows. group_by="concept"
    is not: an Episode about two Concepts goes to the first group that takes it, so a tenant is one unit there.
    """
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    state = _State.load(nodes, edges, config)
    if config.group_by == "conversation":
        parents, contains = _by_conversation(state, config)
    else:
        parents, contains = _by_concept(state, config)
    out_nodes = (
        conform(parents.sort(["tenant", "id"]).select(_OUT_COLS).to_arrow(), NODES)
        if parents.height
        else NODES.empty_table()
    )
    out_edges = EDGES.empty_table()
    if contains.height:
        out_edges = conform(
            contains.sort(["tenant", "id"])
            .select(
                "id",
                "tenant",
                "src",
                "dst",
                pl.lit(SEMANTIC_CONTAINS).alias("type"),
                pl.lit(1.0).alias("weight"),
                pl.lit(1.0).alias("confidence"),
                pl.lit(PROVENANCE).alias("provenance"),
            )
            .to_arrow(),
            EDGES,
        )
    return RollupResult(nodes=out_nodes, edges=out_edges)


def rollup_group_keys(nodes: pa.Table, config: RollupConfig = RollupConfig()) -> pa.Table:
    """(tenant, id, conv_id, bucket) of every Episode: its rollup group under group_by="conversation" (bucket: the
    `period` bucket of coalesce(time_start, first_seen), null without a period or a time). Episodes without a
    conversation have no group (conv_id null) and are never rolled up.

    Contract (tests/test_consolidation_contracts.py): rollup_episodes over rollup_input(nodes, edges, G) yields
    exactly the parents (and their SEMANTIC_CONTAINS edges) of the full run whose group is in G; a parent's group
    is its children's. Under group_by="concept" there is no smaller unit than the tenant (see rollup_episodes).
    """
    n = as_frame(conform(nodes, NODES).select(["tenant", "id", "type", "conv_id", "time_start", "first_seen"]))
    n = n.filter(pl.col("type") == EPISODE)
    return _with_bucket(n, config.period).select("tenant", "id", "conv_id", "bucket").to_arrow()


def rollup_input(
    nodes: pa.Table, edges: pa.Table, keys: pa.Table, config: RollupConfig = RollupConfig()
) -> tuple[pa.Table, pa.Table]:
    """The rows rollup_episodes needs to redo the conversation groups in `keys` (rows of rollup_group_keys): their
    Episodes, the tenant's existing rollup parents and every SEMANTIC_CONTAINS edge of the tenant with both ends."""
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    k = as_frame(keys.select(["tenant", "conv_id", "bucket"])).unique()
    n = _with_bucket(
        as_frame(
            nodes.select(["tenant", "id", "type", "subtype", "conv_id", "time_start", "first_seen"])
        ).with_row_index("_row"),
        config.period,
    )
    tenants = k.select("tenant").unique()
    e = (
        as_frame(edges.select(["tenant", "src", "dst", "type"]))
        .with_row_index("_row")
        .filter(pl.col("type") == SEMANTIC_CONTAINS)
        .join(tenants, on="tenant", how="semi")
    )
    ends = pl.concat([e.select("tenant", pl.col("src").alias("id")), e.select("tenant", pl.col("dst").alias("id"))])
    chosen = (
        pl.concat(
            [
                n.filter(pl.col("type") == EPISODE).join(
                    k, on=["tenant", "conv_id", "bucket"], how="semi", nulls_equal=True
                ),
                n.filter(pl.col("subtype") == ROLLUP_SUBTYPE).join(tenants, on="tenant", how="semi"),
                n.join(ends, on=["tenant", "id"], how="semi"),
            ]
        )
        .get_column("_row")
        .unique()
        .sort()
    )
    # the caller keeps its graph: its columns are taken a column per core, not let go
    return take_columns(nodes.columns, chosen.to_arrow(), nodes.schema), take_rows(
        edges, e.get_column("_row").to_arrow()
    )


def _with_bucket(n: pl.DataFrame, period: str | None) -> pl.DataFrame:
    """`n` plus `bucket`: the calendar bucket of coalesce(time_start, first_seen) (Python's strftime/isocalendar,
    once per distinct date)."""
    t = pl.coalesce("time_start", "first_seen")
    if period is None:
        return n.with_columns(pl.lit(None, dtype=pl.String).alias("bucket"))
    days = n.select(t.dt.date().alias("_d")).unique().drop_nulls().get_column("_d")
    table = pl.DataFrame(
        {
            "_d": days,
            "bucket": pl.Series(
                [_bucket(datetime(d.year, d.month, d.day), period) for d in days.to_list()], dtype=pl.String
            ),
        }
    )
    return n.with_columns(t.dt.date().alias("_d")).join(table, on="_d", how="left", maintain_order="left").drop("_d")


class _State:
    """Every tenant's Episodes (one row per id) with depth and claim flags, the ids already taken, and — for
    group_by="concept" — the Concepts each node is ABOUT; parents are appended as they are made."""

    def __init__(
        self,
        episodes: pl.DataFrame,
        ids: pl.DataFrame,
        children: dict[tuple[str, str], list[str]],
        concepts: pl.DataFrame,
    ) -> None:
        self.episodes, self.ids, self.children, self.concepts = episodes, ids, children, concepts

    @classmethod
    def load(cls, nodes: pa.Table, edges: pa.Table, config: RollupConfig) -> _State:
        n = _one_row_per_id(nodes)
        ids = n.select("tenant", "id")
        e = (
            as_frame(edges.select(["tenant", "src", "dst", "type"]))
            .filter(pl.col("tenant").is_not_null() & pl.col("type").is_in([SEMANTIC_CONTAINS, "ABOUT"]))
            .join(ids, left_on=["tenant", "src"], right_on=["tenant", "id"], how="semi")
            .join(ids, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi")
        )
        contains = e.filter(pl.col("type") == SEMANTIC_CONTAINS)
        children: dict[tuple[str, str], list[str]] = {}
        for t, src, dst in contains.select("tenant", "src", "dst").iter_rows():
            children.setdefault((t, src), []).append(dst)
        claimed = (
            contains.select("tenant", pl.col("dst").alias("id")).unique().with_columns(pl.lit(True).alias("claimed"))
        )
        kinds = n.select("tenant", "id", "type")
        concepts = (
            e.filter(pl.col("type") == "ABOUT")
            .join(kinds, left_on=["tenant", "dst"], right_on=["tenant", "id"])
            .filter(pl.col("type_right") == "Concept")
            .select("tenant", "src", "dst")
            .unique()
        )
        eps = (
            n.filter(pl.col("type") == EPISODE)
            .select(EPISODE_COLUMNS)
            .join(claimed, on=["tenant", "id"], how="left", maintain_order="left")
            .with_columns(pl.col("claimed").fill_null(False))
        )
        eps = _with_depths(eps, n.filter(pl.col("subtype") == ROLLUP_SUBTYPE), children)
        return cls(_timeline(eps, config), ids, children, concepts)

    def add(self, parents: pl.DataFrame, contains: pl.DataFrame, depth: int, config: RollupConfig) -> None:
        claimed = contains.select("tenant", pl.col("dst").alias("id"), pl.lit(True).alias("_now"))
        eps = self.episodes.join(claimed, on=["tenant", "id"], how="left", maintain_order="left")
        eps = eps.with_columns((pl.col("claimed") | pl.col("_now").fill_null(False)).alias("claimed")).drop("_now")
        fresh = parents.select(EPISODE_COLUMNS).with_columns(
            pl.lit(False).alias("claimed"), pl.lit(depth + 1, dtype=pl.Int64).alias("depth")
        )
        self.episodes = pl.concat([eps, _timeline(fresh, config)], how="vertical_relaxed")
        self.ids = pl.concat([self.ids, parents.select("tenant", "id")])
        for t, src, dst in contains.select("tenant", "src", "dst").iter_rows():
            self.children.setdefault((t, src), []).append(dst)


def _one_row_per_id(nodes: pa.Table) -> pl.DataFrame:
    """The nodes of tenants (not null), one row per (tenant, id): of duplicates, the row the Python rollup kept —
    the last in (id, repr of the sorted row) order."""
    n = as_frame(nodes.select(EPISODE_COLUMNS)).with_row_index("_row").filter(pl.col("tenant").is_not_null())
    dup = n.select(pl.struct("tenant", "id").is_duplicated()).to_series()
    if not dup.any():
        return n.drop("_row")
    rows = n.filter(dup).get_column("_row").to_list()
    best: dict[tuple, tuple] = {}
    for i, row in zip(rows, nodes.take(pa.array(rows, pa.int64())).to_pylist()):
        key, order = (row["tenant"], row["id"]), repr(sorted(row.items()))
        if key not in best or order >= best[key][0]:
            best[key] = (order, i)
    winners = pl.Series([i for _, i in best.values()], dtype=pl.UInt32)
    return n.filter(~dup | pl.col("_row").is_in(winners)).drop("_row")


def _with_depths(eps: pl.DataFrame, rollups: pl.DataFrame, children: dict[tuple[str, str], list[str]]) -> pl.DataFrame:
    """`eps` plus `depth`: 0, or for a rollup (any node of subtype rollup, `rollups`) 1 + its deepest child's,
    visited in the Python rollup's order (ids ascending among unclaimed live Episodes, so a SEMANTIC_CONTAINS
    cycle resolves the same way). Only rollups are held in Python: there are few, none in an R2G graph."""
    if rollups.height == 0:
        return eps.with_columns(pl.lit(0, dtype=pl.Int64).alias("depth"))
    is_rollup = set(rollups.select("tenant", "id").iter_rows())
    depth: dict[tuple[str, str], int] = {}

    def visit(t: str, nid: str) -> int:
        if (t, nid) not in depth:
            depth[(t, nid)] = 0  # guards a cycle
            if (t, nid) in is_rollup:
                depth[(t, nid)] = 1 + max((visit(t, c) for c in children.get((t, nid), ())), default=0)
        return depth[(t, nid)]

    live = pl.col("status").fill_null("active").is_in(list(LIVE_STATUS))
    first = eps.filter(~pl.col("claimed") & live & (pl.col("subtype") == ROLLUP_SUBTYPE)).sort(["tenant", "id"])
    for t, nid in first.select("tenant", "id").iter_rows():
        visit(t, nid)
    for t, nid in sorted(is_rollup):
        visit(t, nid)
    found = pl.DataFrame(
        [(t, i, d) for (t, i), d in depth.items() if (t, i) in is_rollup],
        schema={"tenant": pl.String, "id": pl.String, "depth": pl.Int64},
        orient="row",
    )
    return eps.join(found, on=["tenant", "id"], how="left", maintain_order="left").with_columns(
        pl.col("depth").fill_null(0)
    )


def _timeline(eps: pl.DataFrame, config: RollupConfig) -> pl.DataFrame:
    """Episodes plus their timeline position t = coalesce(time_start, first_seen), bucket and liveness."""
    return _with_bucket(eps, config.period).with_columns(
        pl.coalesce("time_start", "first_seen").alias("t"),
        pl.col("status").fill_null("active").is_in(list(LIVE_STATUS)).alias("live"),
    )


def _by_conversation(state: _State, config: RollupConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """compaction_candidates' groups of each (tenant, conversation, bucket), level by level, all groups at once."""
    key = ["tenant", "conv_id", "bucket"]
    made_nodes, made_edges = [], []
    for depth in range(config.max_depth):
        keep = config.keep_recent_leaves if depth == 0 else 0
        while True:
            pool = state.episodes.filter(
                ~pl.col("claimed") & pl.col("live") & (pl.col("depth") == depth) & pl.col("conv_id").is_not_null()
            ).sort([*key, pl.col("t").is_null(), "t", "id"], nulls_last=True)
            kept = pl.len().over(key).cast(pl.Int64) - keep
            runs = pool.with_columns(
                pl.int_range(pl.len(), dtype=pl.Int64).over(key).alias("pos"), kept.alias("_kept")
            ).filter(
                (pl.col("_kept") >= config.threshold)
                & (pl.col("pos") < (pl.col("_kept") // config.fan_in) * config.fan_in)
            )
            groups = (
                runs.with_columns((pl.col("pos") // config.fan_in).alias("_g"))
                .group_by([*key, "_g"], maintain_order=True)
                .agg("id")
            )
            accepted = _new_parents(groups, state)
            if accepted.height == 0:
                break
            parents, contains = build_parents(accepted, pool, config)
            state.add(parents, contains, depth, config)
            made_nodes.append(parents)
            made_edges.append(contains)
    return _concat(made_nodes), _concat(made_edges)


def _new_parents(groups: pl.DataFrame, state: _State) -> pl.DataFrame:
    """(gid, tenant, parent, id: child ids in timeline order) of the groups whose parent does not exist yet."""
    if groups.height == 0:
        return pl.DataFrame(
            schema={"gid": pl.UInt32, "tenant": pl.String, "parent": pl.String, "id": pl.List(pl.String)}
        )
    parent = [parent_id(t, kids) for t, kids in groups.select("tenant", "id").iter_rows()]
    g = groups.select("tenant", "id").with_columns(pl.Series("parent", parent, dtype=pl.String))
    # which of these ids exist already: the few new ids are hashed, the many existing ones only probed
    taken = state.ids.join(g.select("tenant", pl.col("parent").alias("id")), on=["tenant", "id"], how="semi")
    return (
        g.join(taken.rename({"id": "parent"}), on=["tenant", "parent"], how="anti", maintain_order="left")
        .with_row_index("gid")
        .select("gid", "tenant", "parent", "id")
    )


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()


def _by_concept(state: _State, config: RollupConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """group_by="concept": per tenant, the Python selection (an Episode under two Concepts: first group wins),
    each level's accepted groups built by the vectorised builder."""
    made_nodes, made_edges = [], []
    for (tenant,), eps in sorted(state.episodes.partition_by("tenant", as_dict=True).items()):
        sel = _ConceptTenant(tenant, eps, state, config)
        for depth in range(config.max_depth):
            while True:
                accepted = sel.take_groups(sel.groups(depth))
                if not accepted:
                    break
                groups = pl.DataFrame(
                    {
                        "gid": list(range(len(accepted))),
                        "tenant": [tenant] * len(accepted),
                        "parent": [parent_id(tenant, g) for g in accepted],
                        "id": [list(g) for g in accepted],
                    },
                    schema={"gid": pl.UInt32, "tenant": pl.String, "parent": pl.String, "id": pl.List(pl.String)},
                )
                parents, contains = build_parents(groups, state.episodes, config)
                state.add(parents, contains, depth, config)
                sel.added(parents, accepted, depth + 1)
                made_nodes.append(parents)
                made_edges.append(contains)
    return _concat(made_nodes), _concat(made_edges)


class _ConceptTenant:
    """One tenant's Episodes under group_by="concept": keys are the Concepts a node is ABOUT (a rollup's: its
    children's shared ones), each paired with its period bucket."""

    def __init__(self, tenant: str, eps: pl.DataFrame, state: _State, config: RollupConfig) -> None:
        self.tenant, self.config, self.state = tenant, config, state
        self.rows = {
            r["id"]: r
            for r in eps.select("id", "subtype", "status", "t", "bucket", "depth", "claimed").iter_rows(named=True)
        }
        self.claimed = {i for i, r in self.rows.items() if r["claimed"]}
        self.about: dict[str, set[str]] = {}
        for src, dst in state.concepts.filter(pl.col("tenant") == tenant).select("src", "dst").iter_rows():
            self.about.setdefault(src, set()).add(dst)
        self.ids = set(state.ids.filter(pl.col("tenant") == tenant).get_column("id").to_list())
        self._keys: dict[str, frozenset] = {}

    def keys(self, nid: str) -> frozenset:
        if nid not in self._keys:
            self._keys[nid] = frozenset()  # cycle guard
            row = self.rows.get(nid)
            if row is None:  # a non-Episode child: its own Concepts
                base = set(self.about.get(nid, ()))
                bucket = None
            else:
                kids = self.state.children.get((self.tenant, nid), ()) if row["subtype"] == ROLLUP_SUBTYPE else ()
                base = (
                    set.intersection(*({k for k, _ in self.keys(c)} for c in kids))
                    if kids
                    else set(self.about.get(nid, ()))
                )
                bucket = row["bucket"]
            self._keys[nid] = frozenset((k, bucket) for k in base)
        return self._keys[nid]

    def groups(self, depth: int) -> list[tuple[tuple, tuple[str, ...]]]:
        pools: dict[tuple, list[tuple]] = defaultdict(list)
        for nid in sorted(self.rows):
            row = self.rows[nid]
            if nid in self.claimed or (row["status"] or "active") not in LIVE_STATUS or row["depth"] != depth:
                continue
            t = row["t"]
            for key in self.keys(nid):
                pools[key].append((t is None, t or datetime.min, nid))
        keep = self.config.keep_recent_leaves if depth == 0 else 0
        fan = self.config.fan_in
        groups = []
        for key, pool in pools.items():
            pool.sort()
            kept = len(pool) - keep
            if kept < self.config.threshold:
                continue
            for g in range(kept // fan):
                run = pool[g * fan : (g + 1) * fan]
                groups.append(((run[0][0], run[0][1], _key_order(key), g), tuple(nid for *_, nid in run)))
        groups.sort()
        return groups

    def take_groups(self, groups: list[tuple[tuple, tuple[str, ...]]]) -> list[tuple[str, ...]]:
        taken: set[str] = set()
        accepted = []
        for _, child_ids in groups:
            if taken.isdisjoint(child_ids) and parent_id(self.tenant, child_ids) not in self.ids:
                accepted.append(child_ids)
                taken.update(child_ids)
        return accepted

    def added(self, parents: pl.DataFrame, accepted: list[tuple[str, ...]], depth: int) -> None:
        for r in (
            _timeline(parents.select(EPISODE_COLUMNS), self.config)
            .select("id", "subtype", "status", "t", "bucket")
            .iter_rows(named=True)
        ):
            self.rows[r["id"]] = {**r, "depth": depth, "claimed": False}
            self.ids.add(r["id"])
        for kids in accepted:
            self.claimed.update(kids)


# -- helpers


def _bucket(t: datetime | None, period: str | None) -> str | None:
    if period is None or t is None:
        return None
    if period == "day":
        return t.strftime("%Y-%m-%d")
    if period == "week":
        y, w, _ = t.isocalendar()
        return f"{y}-W{w:02d}"
    return t.strftime("%Y-%m") if period == "month" else t.strftime("%Y")


def _key_order(key: tuple) -> tuple:
    k, bucket = key
    return (k, bucket is None, bucket or "")
