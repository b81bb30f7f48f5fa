"""Consolidation over a dirty set: redo the date-free steps only for the tenants whose input changed.

    graph steps (ops → versions → topics → rollups → PII)   per tenant: a function of that tenant's R2G rows, its
                                                             ops batches and its previous communities alone
    time steps (tiers → caps → forget)                        a vectorised sweep over every node: `as_of` moves
                                                             them all

A run keeps a `Snapshot`: a hash of each tenant's R2G input rows and the graph steps' output. The next run hashes
its input the same way; a tenant whose hash is unchanged keeps the snapshot's rows byte for byte, the others (new,
changed or gone tenants) run the graph steps on their own rows, and the time steps sweep the spliced graph. Forget
requests need no rule of their own: R2G drops what they name (the tenant's hash changes) and the time steps drop
the consolidated nodes they name. The result equals `consolidate()` on the same input and previous state
(tests/test_dirty.py).

A full run instead when the snapshot is missing or was made by another configuration, code version or set of
agent ops batches (their `at` included), or when a changed tenant has ops batches (an op's free-text target is
resolved against its whole tenant's graph). `DirtyRun.mode` and `.reason` say which ran and why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from datetime import datetime

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.consolidate import (
    ConsolidationConfig,
    ConsolidationResult,
    GraphStage,
    Previous,
    concat,
    graph_steps,
    time_steps,
)
from jobs.forget import ForgetRules
from jobs.ops import OpsBatch
from jobs.rollup import (
    EPISODE_COLUMNS,
    RollupConfig,
    RollupResult,
    rollup_episodes,
    rollup_group_keys,
    rollup_input,
)
from jobs.rollup_parents import EPISODE, ROLLUP_SUBTYPE, SEMANTIC_CONTAINS
from jobs.rollup_parents import PROVENANCE as ROLLUP_PROVENANCE
from jobs.schema import COLD_EDGES, COMMUNITIES, OPS_APPLIED, OPS_REJECTED, REVIEW_QUEUE
from jobs.version_groups import VERSION_GROUPS, VERSION_PLACES, VersionReuse
from jobs.versions import VersionConfig, VersionResult, version_facts
from r2g.schema import EDGES, NODES, STATE_COLUMNS
from raw_store.frames import as_frame, take_rows
from raw_store.lake import conform
from raw_store.tables import hash_code, row_hashes

# (tenant, conv_id, bucket, rows, h) per rollup group: its Episodes' count and row hashes (see rollup_group_hashes)
ROLLUP_GROUPS = pa.schema(
    [
        ("tenant", pa.string()),
        ("conv_id", pa.string()),
        ("bucket", pa.string()),
        ("rows", pa.int64()),
        ("h", pa.uint64()),
    ]
)
_GROUP = ["tenant", "conv_id", "bucket"]
# (tenant, rows, h) per tenant and table: rows and an order-sensitive sum of row hashes (see tenant_hashes)
INPUT_HASHES = pa.schema([("tenant", pa.string()), ("table", pa.string()), ("rows", pa.int64()), ("h", pa.uint64())])
_CODE = ("jobs", "r2g", "raw_store")  # packages whose source the graph steps run (any edit: a full run)


@dataclass
class Snapshot:
    """What the last run's graph steps consumed (`inputs`: INPUT_HASHES) and made (`stage`, or `load` to read it
    when first needed: a run whose every tenant is dirty never reads it), and under which configuration, code and
    ops batches (`fingerprint`)."""

    fingerprint: str
    inputs: pa.Table
    rollup_groups: pa.Table  # ROLLUP_GROUPS of the stage's input (see rollup_group_hashes)
    versions: VersionReuse  # what version_facts made for the multi-claim version groups (VersionResult.reuse)
    held: GraphStage | None = None
    load: Callable[[], GraphStage] | None = None
    load_rollups: Callable[[], tuple[pa.Table, pa.Table]] | None = None

    @property
    def stage(self) -> GraphStage:
        if self.held is None:
            assert self.load is not None, "a snapshot holds its stage or can load it"
            self.held = self.load()
        return self.held

    def release(self, name: str) -> None:
        """Let go of the held stage's `name` table ("nodes", "edges"), keeping the rest: once it is written as an
        overlay (jobs.snapshot.write_stage), a run no longer needs that whole table in memory."""
        if self.held is not None:
            schema = {"nodes": NODES, "edges": EDGES}[name]
            self.held = GraphStage(
                **{**{f.name: getattr(self.held, f.name) for f in fields(self.held)}, name: schema.empty_table()}
            )

    def without_stage(self) -> Snapshot:
        """This snapshot without its stage, held or loadable, for a run that keeps none of it; its rollups still come.
        Read from the lake, a snapshot loads its stage over the R2G graph (jobs.snapshot.read_snapshot), so holding
        the loader holds that graph."""
        if self.held is None and self.load_rollups is not None:
            return replace(self, load=None)
        made = self.rollups()  # in memory: the stage's rollup rows, the little a dirty run still reads of it
        return replace(self, held=None, load=None, load_rollups=lambda: made)

    def rollups(self) -> tuple[pa.Table, pa.Table]:
        """The rollup parents and SEMANTIC_CONTAINS edges the stage holds (rows rollup_episodes made)."""
        if self.held is None and self.load_rollups is not None:
            return self.load_rollups()
        return made_by_rollup(self.stage.nodes), made_by_rollup(self.stage.edges)


@dataclass
class DirtyRun:
    result: ConsolidationResult
    snapshot: Snapshot  # this run's, for the next
    mode: str  # "incremental" | "full"
    reason: str  # why a full run ("" for an incremental one)
    tenants: int  # tenants in the input
    dirty_tenants: int  # tenants whose graph steps ran
    dirty_nodes: int  # input node rows of those tenants
    dirty_edges: int  # input edge rows of those tenants
    stage_reused: bool = False  # no tenant changed (nor went): the snapshot's stage as it was
    kept_version_groups: int = 0  # multi-claim version groups of the dirty tenants whose rows the snapshot gave
    # input_row_hashes of the input nodes and edges: the base_hashes of the overlays over them (None once used)
    input_hashes: tuple[pl.DataFrame, pl.DataFrame] | None = None

    def metadata(self) -> dict:
        return {
            "consolidation_mode": self.mode,
            "full_reason": self.reason,
            "tenants": self.tenants,
            "dirty_tenants": self.dirty_tenants,
            "dirty_nodes": self.dirty_nodes,
            "dirty_edges": self.dirty_edges,
            "kept_version_groups": self.kept_version_groups,
        }


def consolidate_dirty(
    nodes: pa.Table,
    edges: pa.Table,
    *,
    feedback: pa.Table,
    ops: Sequence[OpsBatch],
    previous: Previous,
    as_of: datetime,
    snapshot: Snapshot | None,
    forget: ForgetRules | None = None,
    config: ConsolidationConfig | None = None,
) -> DirtyRun:
    """consolidate() of the same arguments, with the graph steps redone only for the tenants whose R2G rows
    changed since `snapshot` (see the module doc); falls back to a full run where that would not be exact."""
    cfg = config or ConsolidationConfig()
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    fingerprint = run_fingerprint(cfg, ops)
    hashes = input_row_hashes(nodes, edges)
    inputs = tenant_hashes(nodes, edges, hashes)
    # from here the graph is handed on (graph_steps, or let go): with no reference kept here, the version step frees
    # the input edges as it copies the rows it keeps (a snapshot read from the lake still holds them for the clean
    # tenants' stage, until it is spliced)
    graph = [nodes, edges]
    del nodes, edges
    tenants = _tenants(inputs)
    reason, dirty = _why_full(snapshot, fingerprint, previous), tenants
    if not reason and snapshot is not None:
        dirty = changed_tenants(snapshot.inputs, inputs)
        if dirty & {b.tenant for b in ops}:
            reason = "a tenant with agent ops changed"
    groups: list[pa.Table] = []
    made: list[VersionReuse] = []
    kept_version_groups = 0
    if reason or snapshot is None:
        # nothing of the snapshot is used: let go of it (read from the lake, it can load its stage over the R2G graph,
        # so holding it would hold that graph through the graph steps: the first build after an upgrade, a new config)
        snapshot = None
        stage = graph_steps(
            graph.pop(0),
            graph.pop(0),
            ops=ops,
            previous_communities=previous.communities,
            config=cfg,
            rollup=RollupOverDirtyGroups(None, groups, cfg),
            versions=VersionsOverDirtyGroups(None, made).facts,
        )
        dirty = tenants
        rollup_groups, versions = groups[0], made[0]
    else:
        if not dirty:  # the input as last time (a daily run): only the time steps, on the stage loaded over R2G
            graph.clear()  # the snapshot's loader then holds the R2G graph alone, and lets it go as it loads
            stage, rollup_groups, versions = snapshot.stage, snapshot.rollup_groups, snapshot.versions
        else:
            if not _tenants(snapshot.inputs) - dirty:
                snapshot = snapshot.without_stage()  # nothing of it kept: the R2G graph is the graph steps' alone
            part = graph_steps(
                of_tenants(graph.pop(0), dirty),
                of_tenants(graph.pop(0), dirty),
                ops=[],
                previous_communities=_of_tenants_or_none(previous.communities, dirty),
                config=cfg,
                rollup=RollupOverDirtyGroups(snapshot, groups, cfg),
                versions=(redo := VersionsOverDirtyGroups(snapshot.versions, made)).facts,
            )
            kept_version_groups = redo.kept
            # every tenant of the snapshot dirty: nothing of it to keep (and its stage need not be read)
            stage = splice(snapshot.stage, part, dirty) if _tenants(snapshot.inputs) - dirty else part
            del part  # the stage is sorted in place below: no other reference to hold its unsorted columns
            rollup_groups = concat([of_tenants(snapshot.rollup_groups, dirty, keep=False), groups[0]], ROLLUP_GROUPS)
            versions = VersionReuse(
                *(
                    concat([of_tenants(before, dirty, keep=False), now], schema)
                    for before, now, schema in zip(
                        version_tables(snapshot.versions), version_tables(made[0]), VERSION_SCHEMAS
                    )
                )
            )
    mode = "full" if reason or snapshot is None else "incremental"
    stage_reused = not reason and snapshot is not None and not dirty
    # past the graph steps neither the R2G graph nor the last snapshot (its stage read over that graph) is needed: a
    # caller that handed them over (assets.consolidation) has them let go before the time steps, whose stage is a
    # graph of its own (~0.4 GB of R2G edges at 100k messages)
    del graph, snapshot
    stage.sort_by_key()  # the snapshot holds the sorted stage, which the result shares
    result = time_steps(stage, feedback=feedback, previous=previous, as_of=as_of, forget=forget, config=cfg)
    counts = {t: r for t, r in _rows_by_tenant(inputs).items() if t in dirty}
    return DirtyRun(
        result=result,
        snapshot=Snapshot(fingerprint, inputs, rollup_groups, versions, stage),
        mode=mode,
        reason=reason,
        tenants=len(tenants),
        dirty_tenants=len(dirty & tenants),
        dirty_nodes=sum(n for n, _ in counts.values()),
        dirty_edges=sum(e for _, e in counts.values()),
        stage_reused=stage_reused,
        kept_version_groups=kept_version_groups,
        input_hashes=hashes,
    )


def _why_full(snapshot: Snapshot | None, fingerprint: str, previous: Previous) -> str:
    if snapshot is None:
        return "no snapshot of the last run"
    if snapshot.fingerprint != fingerprint:
        return "configuration, code or ops batches changed"
    if previous.communities is None:
        return "no previous communities"
    return ""


def run_fingerprint(config: ConsolidationConfig, ops: Sequence[OpsBatch]) -> str:
    """What the graph steps' output depends on besides each tenant's rows: the configuration, the source of the
    code they run, the library versions (Leiden, hashing) and the ops batches with their times."""
    # not repr(): a frozenset's order changes with the process's string hash seed
    h = hash_code(hashlib.sha256(_canonical(config).encode()), _CODE, ("polars", "pyarrow", "igraph"))
    for b in sorted(ops, key=lambda b: (b.tenant, b.source_file, b.batch_id)):
        h.update(f"{b.tenant}\x1f{b.source_file}\x1f{b.batch_id}\x1f{b.at.isoformat()}".encode())
    return h.hexdigest()


def _canonical(value: object) -> str:
    """A text of `value` (dataclasses, mappings, sets, sequences, scalars) that is the same in every process."""
    if is_dataclass(value) and not isinstance(value, type):
        return f"{type(value).__name__}({', '.join(f'{f.name}={_canonical(getattr(value, f.name))}' for f in fields(value))})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(sorted(f"{_canonical(k)}: {_canonical(v)}" for k, v in value.items())) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_canonical(v) for v in value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_canonical(v) for v in value) + "]"
    return repr(value)


def input_row_hashes(nodes: pa.Table, edges: pa.Table) -> tuple[pl.DataFrame, pl.DataFrame]:
    """raw_store.tables.row_hashes of the R2G nodes (state columns apart, as the consolidated overlay compares them)
    and edges: the dirty set's row hashes, handed on to the overlays over the same R2G graph (DirtyRun.input_hashes)."""
    return row_hashes(nodes, NODES, ignore=STATE_COLUMNS), row_hashes(edges, EDGES)


def tenant_hashes(
    nodes: pa.Table, edges: pa.Table, hashes: tuple[pl.DataFrame, pl.DataFrame] | None = None
) -> pa.Table:
    """INPUT_HASHES of the nodes and edges: per tenant the row count and the sum of a hash of (row, its position
    among the tenant's rows), so any changed, added, removed or moved row changes the tenant's hash. A row's hash
    is one of its row_hashes (`hashes`, input_row_hashes(nodes, edges) when not given): key and every column."""
    hashes = hashes or input_row_hashes(nodes, edges)
    parts = []
    for name, table, h in (("nodes", nodes, hashes[0]), ("edges", edges, hashes[1])):
        rows = pl.DataFrame(
            [
                as_frame(table.select(["tenant"])).get_column("tenant"),
                h.select(pl.struct("_k", "_h0", "_h1").hash(seed=7).alias("_h")).to_series(),
            ]
        )
        rows = rows.with_columns(pl.int_range(pl.len()).over("tenant").alias("_i"))
        parts.append(
            rows.group_by("tenant").agg(
                pl.lit(name).alias("table"),
                pl.len().cast(pl.Int64).alias("rows"),
                # 40-bit terms: a tenant of < 2^24 rows sums without overflow
                (pl.struct("_h", "_i").hash(seed=11) // (1 << 24)).sum().cast(pl.UInt64).alias("h"),
            )
        )
    out = pl.concat(parts).sort(["tenant", "table"], nulls_last=True)
    return conform(out.to_arrow(), INPUT_HASHES)


def changed_tenants(before: pa.Table, after: pa.Table) -> set[str | None]:
    """Tenants whose INPUT_HASHES rows differ between two runs (new and gone tenants included)."""

    def by_tenant(table: pa.Table) -> dict[str | None, set[tuple]]:
        out: dict[str | None, set[tuple]] = {}
        for r in table.to_pylist():
            out.setdefault(r["tenant"], set()).add((r["table"], r["rows"], r["h"]))
        return out

    a, b = by_tenant(before), by_tenant(after)
    return {t for t in a.keys() | b.keys() if a.get(t) != b.get(t)}


def _tenants(inputs: pa.Table) -> set[str | None]:
    return set(inputs.column("tenant").to_pylist())


def _rows_by_tenant(inputs: pa.Table) -> dict[str | None, tuple[int, int]]:
    out: dict[str | None, tuple[int, int]] = {}
    for r in inputs.to_pylist():
        n, e = out.get(r["tenant"], (0, 0))
        out[r["tenant"]] = (n + r["rows"], e) if r["table"] == "nodes" else (n, e + r["rows"])
    return out


def _mask(table: pa.Table, tenants: set[str | None]) -> pl.Series:
    named = sorted(t for t in tenants if t is not None)
    col = as_frame(table.select(["tenant"])).get_column("tenant")
    hit = col.is_in(named)
    return (hit | col.is_null()) if None in tenants else hit.fill_null(False)


def of_tenants(table: pa.Table, tenants: set[str | None], keep: bool = True) -> pa.Table:
    """The rows of `table` whose tenant is (keep) or is not (not keep) in `tenants`, in table order."""
    mask = _mask(table, tenants)
    mask = mask if keep else ~mask
    # every row kept (a one-tenant lake's append: its only tenant is dirty) is the table itself, not a copy of it
    return table if mask.all() else table.filter(mask.to_arrow())


def _of_tenants_or_none(table: pa.Table | None, tenants: set[str | None]) -> pa.Table | None:
    return None if table is None else of_tenants(table, tenants)


def rollup_group_hashes(nodes: pa.Table, config: RollupConfig) -> pa.Table:
    """ROLLUP_GROUPS of `nodes`: per (tenant, conversation, bucket), the count of its Episodes and the sum of a hash
    of (row, position in the group) over their rows: all a group's parents depend on (rollup_group_keys)."""
    keys = as_frame(rollup_group_keys(nodes, config))  # the Episodes, in table order
    eps = as_frame(nodes.select(EPISODE_COLUMNS)).filter(pl.col("type") == EPISODE)
    rows = keys.with_columns(eps.select(pl.struct(EPISODE_COLUMNS).hash(seed=7).alias("_h")).to_series())
    rows = rows.filter(pl.col("conv_id").is_not_null()).with_columns(pl.int_range(pl.len()).over(_GROUP).alias("_i"))
    out = rows.group_by(_GROUP).agg(
        pl.len().cast(pl.Int64).alias("rows"),
        (pl.struct("_h", "_i").hash(seed=11) // (1 << 24)).sum().cast(pl.UInt64).alias("h"),
    )
    return conform(out.sort(_GROUP, nulls_last=True).to_arrow(), ROLLUP_GROUPS)


class RollupOverDirtyGroups:
    """rollup_episodes for graph_steps that keeps the snapshot's parents of every conversation group whose Episodes
    hash as before and rolls up the others (the group contract of jobs.rollup). Records the groups' hashes in
    `record`. Only where that contract holds as used here: group_by conversation, no rollups or SEMANTIC_CONTAINS
    in the input (R2G makes none), one row per Episode id, and no redaction (a kept parent is flagged again)."""

    def __init__(self, snapshot: Snapshot | None, record: list[pa.Table], config: ConsolidationConfig) -> None:
        self.snapshot, self.record, self.redact = snapshot, record, config.redact_pii

    def __call__(self, nodes: pa.Table, edges: pa.Table, config: RollupConfig) -> RollupResult:
        groups = rollup_group_hashes(nodes, config)
        self.record.append(groups)
        if self.snapshot is None or not self._applies(nodes, edges, config):
            return rollup_episodes(nodes, edges, config)
        now, before = as_frame(groups), as_frame(conform(self.snapshot.rollup_groups, ROLLUP_GROUPS))
        clean = now.join(before, on=[*_GROUP, "rows", "h"], how="semi", nulls_equal=True).select(_GROUP)
        keys = as_frame(rollup_group_keys(nodes, config)).join(clean, on=_GROUP, how="anti", nulls_equal=True)
        part = rollup_episodes(
            *rollup_input(nodes, edges, keys.filter(pl.col("conv_id").is_not_null()).to_arrow(), config), config
        )
        parents, contains = self.snapshot.rollups()
        kept = as_frame(rollup_group_keys(parents, config)).join(clean, on=_GROUP, how="semi", nulls_equal=True)
        kept_ids = kept.select("tenant", "id")
        kept_nodes = _rows_with(parents, kept_ids, "id")
        kept_edges = _rows_with(contains, kept_ids, "src")
        return RollupResult(
            nodes=by_key(concat([kept_nodes, part.nodes], NODES)),
            edges=by_key(concat([kept_edges, part.edges], EDGES)),
        )

    def _applies(self, nodes: pa.Table, edges: pa.Table, config: RollupConfig) -> bool:
        if config.group_by != "conversation" or self.redact:
            return False
        n = as_frame(nodes.select(["tenant", "id", "type", "subtype"]))
        eps = n.filter(pl.col("type") == EPISODE)
        return (
            n.filter(pl.col("subtype") == ROLLUP_SUBTYPE).height == 0
            and as_frame(edges.select(["type"])).filter(pl.col("type") == SEMANTIC_CONTAINS).height == 0
            and eps.select("tenant", "id").is_unique().all()
        )


class VersionsOverDirtyGroups:
    """version_facts for graph_steps that keeps the rows of every multi-claim version group whose signature is
    unchanged (`reuse`: the snapshot's, version_facts' `reuse`), and records what this run made in `record`. It holds
    the snapshot's version tables, not the snapshot: a snapshot read from the lake can load its stage over the R2G
    graph, so holding it would hold that graph (5.2 GB at 1M messages) through the time steps."""

    def __init__(self, reuse: VersionReuse | None, record: list[VersionReuse]) -> None:
        self.reuse, self.record, self.kept = reuse, record, 0

    def facts(self, nodes: pa.Table, edges: pa.Table, config: VersionConfig) -> VersionResult:
        """The `versions` of graph_steps. A method, not __call__: a call through __call__ holds its arguments in a
        tuple until it returns, so edges handed over would be held through the version step (see graph_steps)."""
        graph = [nodes, edges]  # handed on, no reference kept
        del nodes, edges
        result = version_facts(graph.pop(0), graph.pop(0), config, reuse=self.reuse)
        self.record.append(result.reuse())
        self.kept = result.kept_groups
        return result


VERSION_SCHEMAS = (VERSION_GROUPS, VERSION_PLACES, EDGES, REVIEW_QUEUE)


def version_tables(v: VersionReuse) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table]:
    return v.groups, v.places, v.edges, v.review


def made_by_rollup(table: pa.Table) -> pa.Table:
    return table.filter(pc.equal(table.column("provenance").fill_null(""), ROLLUP_PROVENANCE))


def _rows_with(table: pa.Table, ids: pl.DataFrame, column: str) -> pa.Table:
    """The rows of `table` whose (tenant, `column`) is a (tenant, id) of `ids`, in table order."""
    f = as_frame(table.select(["tenant", column])).with_row_index("_row")
    hit = f.join(ids, left_on=["tenant", column], right_on=["tenant", "id"], how="semi", nulls_equal=True)
    return take_rows(table, hit.get_column("_row").to_arrow())


def by_key(table: pa.Table) -> pa.Table:
    """`table` sorted by (tenant, id), as rollup_episodes returns its rows."""
    order = as_frame(table.select(["tenant", "id"])).with_row_index("_row")
    return take_rows(table, order.sort(["tenant", "id"], nulls_last=True, maintain_order=True)["_row"].to_arrow())


def splice(before: GraphStage, part: GraphStage, dirty: set[str | None]) -> GraphStage:
    """The graph stage of every tenant: `before`'s rows of the clean tenants, `part`'s of the dirty ones. Agent
    ops never belong to a dirty tenant here (else a full run), so their tables are `before`'s."""

    def both(name: str, schema: pa.Schema) -> pa.Table:
        return concat([of_tenants(getattr(before, name), dirty, keep=False), getattr(part, name)], schema)

    communities = (
        as_frame(both("communities", COMMUNITIES))
        .with_row_index("_row")
        .sort(["tenant", "level", "id"], nulls_last=True, maintain_order=True)
        .get_column("_row")
    )
    return GraphStage(
        nodes=both("nodes", NODES),
        edges=both("edges", EDGES),
        communities=both("communities", COMMUNITIES).take(communities.to_arrow()),
        version_review=both("version_review", REVIEW_QUEUE),
        deleted_links=conform(before.deleted_links, COLD_EDGES),
        ops_applied=conform(before.ops_applied, OPS_APPLIED),
        ops_rejected=conform(before.ops_rejected, OPS_REJECTED),
    )
