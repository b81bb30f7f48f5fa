"""Consolidation: the R2G graph → the maintained memory graph (SPEC §8, §9), as one pure function.

    agent write-ops (jobs.ops)            agent-made memories and links join the graph
    → fact versions (jobs.versions)       VERSION_NEXT chains, ACTIVE_OF, CONTRADICTS by prio, review queue
    → communities (jobs.communities)      Leiden topics → Concept nodes + ABOUT edges
    → rollups (jobs.rollup)               Episodes of a conversation rolled up under summary parents
    → PII flags (jobs.pii)                flags on nodes; optional redaction of the graph text
    → tiers (jobs.tiers)                  tier / category / weight / status as of `as_of`, promotions
    → sparsification (jobs.sparsify)      per-type degree caps; capped edges to the cold table
    → forget (jobs.forget)                nodes a request names, even ones consolidation made, stay out

Deterministic: the same graph, feedback, ops, previous state and `as_of` give the same tables. Nothing
is lost: capped edges go to `cold_edges`, decayed memories are archived (still citable), not dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.communities import CommunityConfig, detect_communities
from jobs.forget import ForgetRules
from jobs.ops import OpsBatch, apply_ops
from jobs.pii import flag_nodes
from jobs.rollup import RollupConfig, RollupResult, rollup_episodes
from jobs.rollup_parents import PROVENANCE as ROLLUP_PROVENANCE
from jobs.schema import COLD_EDGES, COMMUNITIES, OPS_APPLIED, OPS_REJECTED, PROMOTIONS, REVIEW_QUEUE
from jobs.sparsify import SparsifyConfig, sparsify
from jobs.tiers import TierConfig, promote
from jobs.versions import VersionConfig, VersionResult, version_facts
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame, columns_of, key_order, sort_stable, sorted_by, take_columns, take_rows
from raw_store.lake import conform
from raw_store.tables import xor_hash


@dataclass(frozen=True)
class ConsolidationConfig:
    communities: CommunityConfig = field(default_factory=CommunityConfig)
    versions: VersionConfig = field(default_factory=VersionConfig)
    rollup: RollupConfig = field(default_factory=RollupConfig)
    tiers: TierConfig = field(default_factory=TierConfig)
    sparsify: SparsifyConfig = field(default_factory=SparsifyConfig)
    redact_pii: bool = False  # $MEMCTL_REDACT_PII=1: PII replaced in the graph text (the raw store keeps its bytes)

    @classmethod
    def from_env(cls) -> ConsolidationConfig:
        """Defaults, overridden by the JSON file at $MEMCTL_CONSOLIDATION ({"tiers": {"short_days": 5}, "sparsify":
        {"default_cap": 64}, "redact_pii": true, …}: any field of the step configs) and $MEMCTL_REDACT_PII=1."""
        cfg, path = cls(), os.environ.get("MEMCTL_CONSOLIDATION", "").strip()
        if path:
            cfg = cfg.with_overrides(json.loads(Path(path).read_text("utf-8")))
        if os.environ.get("MEMCTL_REDACT_PII", "").strip().lower() in ("1", "true", "yes"):
            cfg = replace(cfg, redact_pii=True)
        return cfg

    def with_overrides(self, overrides: dict) -> ConsolidationConfig:
        """A copy with `overrides` applied: {step: {field: value}} and top-level fields; unknown names raise
        ValueError (a typo in a config file must not be silently ignored)."""
        changes: dict = {}
        for name, value in overrides.items():
            if name not in {f.name for f in fields(self)}:
                raise ValueError(f"unknown consolidation setting {name!r}")
            current = getattr(self, name)
            if is_dataclass(current) and not isinstance(current, type):
                known = {f.name: f for f in fields(current)}
                unknown = set(value) - set(known)
                if unknown:
                    raise ValueError(f"unknown {name} setting(s): {', '.join(sorted(unknown))}")
                value = replace(current, **{k: _like(getattr(current, k), v) for k, v in value.items()})
            changes[name] = value
        return replace(self, **changes)


@dataclass
class Previous:
    """The last run's outputs this run depends on: stable community ids, sticky tiers (the nodes' state) and the
    accumulated promotions. (The review queue is made anew every run, from versions' near ties and tiers' due
    facts.) `read`, where given, reads `nodes` and `promotions` when the time step that uses each asks for it (and
    does not keep it), so that they are not held through the graph steps: assets.consolidation reads them from
    the lake, 0.9 GB as Arrow at 1M messages."""

    nodes: pa.Table | None = None  # NODES, or NODE_STATE (its tier, category and status are all promote reads)
    communities: pa.Table | None = None
    promotions: pa.Table | None = None
    read: Callable[[str], pa.Table | None] | None = None

    def table(self, name: str) -> pa.Table | None:
        """The last run's `name` ("nodes" or "promotions"): the table held, else `read`'s (None: no such table)."""
        held = getattr(self, name)
        return held if held is not None or self.read is None else self.read(name)


@dataclass
class ConsolidationResult:
    nodes: pa.Table  # NODES
    edges: pa.Table  # EDGES
    communities: pa.Table  # COMMUNITIES
    promotions: pa.Table  # PROMOTIONS (this run's rows appended to the previous ones)
    review_queue: pa.Table  # REVIEW_QUEUE
    cold_edges: pa.Table  # COLD_EDGES
    ops_applied: pa.Table  # OPS_APPLIED
    ops_rejected: pa.Table  # OPS_REJECTED
    stats: dict = field(default_factory=dict)


def default_as_of(messages: pa.Table, promotions: pa.Table | None = None) -> datetime:
    """$MEMCTL_AS_OF, else the newest message time of the lake: decay "as of what we last heard", so the
    same inbox always gives the same tables (a daily schedule passes its own date instead). Never earlier
    than the last run's date (`promotions`): forgetting the newest messages must not turn the clock back."""
    env = os.environ.get("MEMCTL_AS_OF", "").strip()
    if env:
        return datetime.fromisoformat(env).replace(tzinfo=None)
    stamps = [
        pc.max(messages.column("ts")).as_py() if messages.num_rows else None,
        pc.max(promotions.column("at")).as_py() if promotions is not None and promotions.num_rows else None,
    ]
    return max((t for t in stamps if t is not None), default=datetime(1970, 1, 1))


@dataclass
class GraphStage:
    """What the steps that do not depend on the date make (ops → versions → topics → rollups → PII): per tenant,
    a function of that tenant's R2G rows, ops and previous communities alone (jobs.dirty reuses it per tenant)."""

    nodes: pa.Table  # NODES
    edges: pa.Table  # EDGES
    communities: pa.Table  # COMMUNITIES
    version_review: pa.Table  # REVIEW_QUEUE (near-tie contradictions)
    deleted_links: pa.Table  # COLD_EDGES (link_delete ops)
    ops_applied: pa.Table  # OPS_APPLIED
    ops_rejected: pa.Table  # OPS_REJECTED

    def sort_by_key(self) -> None:
        """Nodes and edges sorted by (tenant, id), ties in table order, as the result's are, in place. The time steps'
        output does not depend on the stage's row order (they sort by key, stably), but over a stage in key order they
        keep its rows (none capped or forgotten: the usual case) instead of taking sorted copies, so the stage and the
        result share the graph (~0.5 GB at 100k messages). Sorted a column per core at once, each unsorted column let
        go once taken: where the stage held the only reference, its graph is not held twice."""
        for name, schema in (("nodes", NODES), ("edges", EDGES)):
            table = conform(getattr(self, name), schema)
            order = key_order(table, ["tenant", "id"])
            if order is None:
                setattr(self, name, table)
                continue
            setattr(self, name, schema.empty_table())
            columns = columns_of(table)
            del table
            setattr(self, name, take_columns(columns, order, schema))


def consolidate(
    nodes: pa.Table,
    edges: pa.Table,
    *,
    feedback: pa.Table,
    ops: Sequence[OpsBatch],
    previous: Previous,
    as_of: datetime,
    forget: ForgetRules | None = None,
    resolve: Callable[[str, str], str | None] | None = None,
    config: ConsolidationConfig | None = None,
) -> ConsolidationResult:
    """The consolidated graph and its side tables (see the module doc for the order of the steps)."""
    cfg = config or ConsolidationConfig()
    stage = graph_steps(nodes, edges, ops=ops, previous_communities=previous.communities, resolve=resolve, config=cfg)
    stage.sort_by_key()
    return time_steps(stage, feedback=feedback, previous=previous, as_of=as_of, forget=forget, config=cfg)


def graph_steps(
    nodes: pa.Table,
    edges: pa.Table,
    *,
    ops: Sequence[OpsBatch],
    previous_communities: pa.Table | None,
    resolve: Callable[[str, str], str | None] | None = None,
    config: ConsolidationConfig | None = None,
    rollup: Callable[[pa.Table, pa.Table, RollupConfig], RollupResult] = rollup_episodes,
    versions: Callable[[pa.Table, pa.Table, VersionConfig], VersionResult] = version_facts,
) -> GraphStage:
    """Ops, versions, communities, rollups and PII flags over the R2G graph (no date involved). `rollup` and
    `versions` stand in for rollup_episodes and version_facts (jobs.dirty's reuse the unchanged conversations'
    parents and the unchanged version groups' rows). A caller that hands `nodes` and `edges` over (keeps no reference)
    has the input edges freed as the version step copies the rows it keeps."""
    cfg = config or ConsolidationConfig()
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)

    applied, rejected = [], []
    deleted_links = COLD_EDGES.empty_table()  # link_delete moves an edge here: kept, never lost
    resolve = resolve or (keyword_resolver(nodes) if ops else None)
    for batch in sorted(ops, key=lambda b: (b.tenant, b.source_file, b.batch_id)):
        res = apply_ops(nodes, edges, batch.ops, batch.batch_id, batch.at, resolve, cold_edges=deleted_links)
        nodes, edges, deleted_links = res.nodes, res.edges, conform(res.cold_edges, COLD_EDGES)
        applied.append(res.applied)
        rejected.append(res.rejected)

    # handed over, no reference kept here (nor by a caller that handed the graph to this function): version_facts
    # lets go of the input edges a column at a time as it copies the rows it keeps, not held twice (3.5 GB at 1M)
    graph = [nodes, edges]
    del nodes, edges
    made = versions(graph.pop(0), graph.pop(0), cfg.versions)
    nodes, edges = made.nodes, made.edges

    comm = detect_communities(nodes, edges, previous_communities, cfg.communities)
    topics = _without_orphaned_topics(comm.nodes, nodes, previous_communities)
    nodes, edges = concat([nodes, topics], NODES), concat([edges, comm.edges], EDGES)

    roll = rollup(nodes, edges, cfg.rollup)
    nodes, edges = concat([nodes, roll.nodes], NODES), concat([edges, roll.edges], EDGES)

    nodes = flag_nodes(nodes, redact_text=cfg.redact_pii)
    return GraphStage(
        nodes=nodes,
        edges=edges,
        communities=conform(comm.communities, COMMUNITIES),
        version_review=conform(made.review_queue, REVIEW_QUEUE),
        deleted_links=deleted_links,
        ops_applied=concat(applied, OPS_APPLIED),
        ops_rejected=concat(rejected + [b.parse_rejects for b in ops], OPS_REJECTED),
    )


def time_steps(
    stage: GraphStage,
    *,
    feedback: pa.Table,
    previous: Previous,
    as_of: datetime,
    forget: ForgetRules | None = None,
    config: ConsolidationConfig | None = None,
) -> ConsolidationResult:
    """Tiers, degree caps and forgetting as of `as_of` over the whole stage graph (vectorised sweeps: the date
    moves every node), and the accumulated side tables."""
    cfg = config or ConsolidationConfig()
    stats: dict = {"as_of": as_of.isoformat()}
    nodes, edges = stage.nodes, stage.edges

    tiers = promote(nodes, feedback, previous.table("nodes"), as_of, cfg.tiers, edges=edges)
    nodes = tiers.nodes

    sparse = sparsify(nodes, edges, as_of, cfg.sparsify)
    edges = sparse.edges

    if forget:
        nodes, edges = forget.drop_nodes(nodes, edges)

    # the history in the order it happened: earlier runs' rows first (several runs may share an as_of)
    promotions = _first_of_each(
        concat([previous.table("promotions"), tiers.promotions], PROMOTIONS),
        ["tenant", "node_id", "at", "from_tier", "to_tier", "from_category", "to_category", "from_status", "to_status"],
    )
    review = _dedup_sorted(concat([stage.version_review, tiers.review], REVIEW_QUEUE), ["tenant", "id"])

    stats.update(
        {
            "ops_applied": stage.ops_applied.num_rows,
            "ops_rejected": stage.ops_rejected.num_rows,
            "communities": stage.communities.num_rows,
            "rollups": pc.sum(pc.equal(stage.nodes.column("provenance"), ROLLUP_PROVENANCE)).as_py() or 0,
            "promotions": tiers.promotions.num_rows,
            "review": review.num_rows,
            "cold_edges": sparse.cold.num_rows,
        }
    )
    return ConsolidationResult(
        nodes=_sorted(nodes, NODES),
        edges=_sorted(edges, EDGES),
        communities=stage.communities,
        promotions=promotions,
        review_queue=review,
        cold_edges=_sorted(concat([stage.deleted_links, sparse.cold], COLD_EDGES), COLD_EDGES),
        ops_applied=stage.ops_applied,
        ops_rejected=stage.ops_rejected,
        stats=stats,
    )


def _like(current: object, value: object) -> object:
    """A JSON value in the shape of the field it replaces (lists → tuples, mappings of lists → of tuples)."""
    if isinstance(current, tuple) and isinstance(value, list):
        return tuple(value)
    if isinstance(current, frozenset) and isinstance(value, list):
        return frozenset(value)
    return value


def _without_orphaned_topics(concepts: pa.Table, nodes: pa.Table, previous: pa.Table | None) -> pa.Table:
    """A retired community's Concept is kept (archived) only while all its former members still exist: its label
    names them, so once one is forgotten (or gone with its file) the Concept goes too. A Python set of every
    (tenant, id) took 2.9 s of a 1M-message append; only the nodes whose id some member has are looked at now."""
    if previous is None or previous.num_rows == 0 or concepts.num_rows == 0:
        return concepts
    members = (
        as_frame(previous.select(["tenant", "concept_id", "members"]))
        .filter(pl.col("members").list.len() > 0)  # a null or empty list names no member
        .explode("members")
    )
    # only the nodes that could be members (a membership test over the ids in Arrow, not a frame of every key)
    ids = nodes.column("id")
    named = members.get_column("members").drop_nulls().unique().to_arrow().cast(ids.type)
    live = as_frame(nodes.select(["tenant", "id"]).filter(pc.or_(pc.is_in(ids, value_set=named), pc.is_null(ids))))
    orphaned = (
        members.join(live, left_on=["tenant", "members"], right_on=["tenant", "id"], how="anti", nulls_equal=True)
        .select("tenant", pl.col("concept_id").alias("id"), pl.lit(True).alias("_orphaned"))
        .unique(subset=["tenant", "id"])
    )
    keep = (
        as_frame(concepts.select(["tenant", "id", "status"]))
        .join(orphaned, on=["tenant", "id"], how="left", nulls_equal=True, maintain_order="left")
        .select(~pl.col("_orphaned").fill_null(False) | pl.col("status").ne_missing("archived"))
        .to_series()
    )
    return concepts if keep.all() else concepts.filter(keep.to_arrow())


def keyword_resolver(nodes: pa.Table, min_share: float = 0.5) -> Callable[[str, str], str | None]:
    """link_memories' free-text descriptions → a memory of the graph being consolidated, by recall's own query
    analysis (keywords: stop-words out, jieba for Chinese, stems) against each memory's title, text and keywords.
    The best share of the description's keywords wins (≥ min_share), then importance, then id. Unlike a recall
    over the last built index, it sees this run's graph, so the result depends on the input alone."""
    from recall.query import query_keywords

    by_tenant: dict[str, list[tuple[str, float, set[str]]]] = {}
    cols = nodes.select(["tenant", "id", "type", "title", "text", "keywords", "importance", "status"]).to_pylist()
    for r in cols:
        if r["type"] in ("Entity", "Concept") or (r["status"] or "active") not in ("active", "open"):
            continue
        words = set(query_keywords(" ".join([r["title"] or "", r["text"] or "", *(r["keywords"] or [])])))
        by_tenant.setdefault(r["tenant"], []).append((r["id"], r["importance"] or 0.0, words))

    def resolve(tenant: str, text: str) -> str | None:
        wanted = set(query_keywords(text))
        if not wanted:
            return None
        best = min(
            ((-len(wanted & words) / len(wanted), -imp, nid) for nid, imp, words in by_tenant.get(tenant, ())),
            default=None,
        )
        return best[2] if best and -best[0] >= min_share else None

    return resolve


def concat(tables: Sequence[pa.Table | None], schema: pa.Schema) -> pa.Table:
    """The non-empty tables conformed to `schema` and concatenated (an empty table of it when none)."""
    parts = [conform(t, schema) for t in tables if t is not None and t.num_rows]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _sorted(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` by (tenant, id), ties in table order."""
    table = conform(table, schema)
    order = key_order(table, ["tenant", "id"])
    # in order already (the graph usually is): no copy of it (~3 GB of a 1M-message lake's edges)
    return table if order is None else take_rows(table, order)


def _first_of_each(table: pa.Table, keys: list[str]) -> pa.Table:
    """The first row of each key, in table order: re-deriving rows already recorded (a re-run, a crash between
    writes) adds nothing. A row whose keys' hash no other row has is the first of its key, so only the rows that
    share a hash are compared on their keys (usually none): the keys go to polars a column at a time to be hashed,
    not as one frame made unique (the promotions' nine key columns, 6.9M rows at 1M messages: a ~2 GB peak)."""
    h = xor_hash(table, [(name, 11 + k) for k, name in enumerate(keys)])
    rows = pl.DataFrame({"_h": h}).with_row_index("_row")
    shared = rows.filter(pl.col("_h").is_duplicated()).get_column("_row")
    if shared.len() == 0:
        return table
    keyed = as_frame(take_rows(table.select(keys), shared.to_arrow())).with_columns(shared.alias("_row"))
    first = keyed.unique(keys, keep="first", maintain_order=True).get_column("_row")
    later = shared.filter(~shared.is_in(first))  # rows whose key an earlier row has
    if later.len() == 0:
        return table  # hashes shared by different keys only: every row is the first of its key, in order
    return take_rows(table, rows.get_column("_row").filter(~rows.get_column("_row").is_in(later)).to_arrow())


def _dedup_sorted(table: pa.Table, keys: list[str]) -> pa.Table:
    """One row per key (the first in sort order), sorted by the keys: accumulating tables stay idempotent."""
    frame = as_frame(table.select(keys)).with_row_index("_row")
    return _first_rows(table, frame if sorted_by(frame, keys) else sort_stable(frame, keys, nulls_last=True), keys)


def _first_rows(table: pa.Table, frame: pl.DataFrame, keys: list[str]) -> pa.Table:
    """The rows of `table` first of their key in `frame` (its key columns and row numbers `_row`, in the order
    wanted), gathered once; `table` itself when that is every row in its order (a history with nothing new: the
    usual run, no copy of it)."""
    rows = frame.unique(keys, keep="first", maintain_order=True).get_column("_row")
    if rows.len() == table.num_rows and (rows.diff().drop_nulls() == 1).all():
        return table
    return take_rows(table, rows.to_arrow())
