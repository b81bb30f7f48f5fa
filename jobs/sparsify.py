"""Graph sparsification (seed 004 §22.1, SPEC §8): per-type degree caps and the SIMILAR_TO threshold.

The hot graph (recall's L1 layer, seed 004 §22.2) keeps, for every (tenant, node, edge type),
the `cap` edges ranked best by weight × recency; the rest move to the COLD_EDGES table with a
reason and `capped_at = as_of`. Nothing is dropped: kept + cold is exactly the input, rows and
ids unchanged, so an edge can be paged back in.

Rules, in order (rule ids go into the cold rows' `reason`):
1. SIMILAR_TO below the similarity threshold → cold, reason "similar_to<0.75". The edge's
   `weight` is read as its similarity (seed 004 §22.1.3: keep only similarity ≥ θ).
2. Degree cap (seed 004 §22.1.1: "对高出度节点按边类型设上限 k_type … 保留 weight×recency Top-K"):
   counted on the source's out-edges of each type; for symmetric types (SIMILAR_TO, SAME_AS) an
   edge counts at both endpoints and stays only if it ranks within the cap at both, so no node
   keeps more than `cap` of them. Over-cap edges → cold, reason "degree_cap:<TYPE>><k>".
   Ranking: weight × recency desc, then weight desc, then edge time desc (undated last), then id.
   recency = exp(-age / τ) with age = as_of − (edge valid_since, else the other endpoint's
   last_seen / time_end / time_start / first_seen), clipped at 0 for future times; an undated
   edge has recency 0 (it keeps its weight order among the undated). τ is the other endpoint's
   type's (seed 004 §15).
Structural edges (DERIVED_FROM, VERSION_NEXT, ACTIVE_OF, SEMANTIC_CONTAINS, TEMPORAL_NEXT) are
never capped or cold: they carry citations, version chains, rollup membership and the timeline,
and each node has only a handful of them anyway.
In-degree is not capped (the seed caps out-degree): an Entity mentioned by thousands of Episodes
keeps every MENTIONS edge, since each is the only link from that Episode to it.
Not done here: seed §22.1.2 age–confidence pruning, §22.1.4 evidence folding, §22.1.5 Concept
down-sampling and SIMILAR_TO triangle-closure limits.

Per group (`sparsify_group_keys`: (tenant, src, type), and for a symmetric type also (tenant, dst, type)): an
edge's side depends on its group's edges and their other endpoints' type and time; a symmetric edge on both of
its groups (`sparsify_input` adds the second). Depends on `as_of`. Tested in tests/test_consolidation_contracts.py::
test_sparsify_of_some_groups_places_their_edges_as_the_full_run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.schema import COLD_EDGES
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame, key_order, per_column
from raw_store.lake import conform

PROVENANCE = "jobs.sparsify.degree_cap.v1"  # the rule set; cold rows keep each edge's own provenance
STRUCTURAL_EDGE_TYPES = frozenset({"DERIVED_FROM", "VERSION_NEXT", "ACTIVE_OF", "SEMANTIC_CONTAINS", "TEMPORAL_NEXT"})

# seed 004 §22.1.1 gives ABOUT=256 and SIMILAR_TO=64 as examples of k_type.
SEED_CAPS = MappingProxyType({"ABOUT": 256, "SIMILAR_TO": 64})
# seed 004 §15: τ_Episode=14d, τ_Fact=90d, τ_Concept=180d.
SEED_TAU_DAYS = MappingProxyType({"Episode": 14.0, "Fact": 90.0, "Concept": 180.0})


@dataclass(frozen=True)
class SparsifyConfig:
    # Per-type caps; seed 004 §22.1.1 (ABOUT 256, SIMILAR_TO 64).
    caps: Mapping[str, int] = field(default_factory=lambda: SEED_CAPS)
    # Every other non-structural type: ABOUT's 256, the seed's order of magnitude for a generous cap. None: uncapped.
    default_cap: int | None = 256
    # Types whose edges count at both endpoints (undirected relations).
    symmetric: frozenset[str] = frozenset({"SIMILAR_TO", "SAME_AS"})
    # seed 004 §22.1.3: SIMILAR_TO kept only with similarity ≥ θ = 0.75.
    similar_threshold: float = 0.75
    # Recency τ by the other endpoint's node type (seed 004 §15) and for any other type/raw chunk
    # (Fact's 90 d: the middle of the seed's range).
    tau_days: Mapping[str, float] = field(default_factory=lambda: SEED_TAU_DAYS)
    default_tau_days: float = 90.0

    def __post_init__(self) -> None:
        bad = sorted(set(self.caps) & STRUCTURAL_EDGE_TYPES)
        if bad:
            raise ValueError(f"structural edge types are never capped: {bad}")
        if any(k < 0 for k in self.caps.values()) or (self.default_cap is not None and self.default_cap < 0):
            raise ValueError("caps must be >= 0")
        if any(t <= 0 for t in self.tau_days.values()) or self.default_tau_days <= 0:
            raise ValueError("tau_days must be > 0")

    def cap(self, edge_type: str) -> int | None:
        if edge_type in STRUCTURAL_EDGE_TYPES:
            return None
        return self.caps.get(edge_type, self.default_cap)


@dataclass(frozen=True)
class SparsifyResult:
    edges: pa.Table  # EDGES: the hot edges kept, sorted by (tenant, id)
    cold: pa.Table  # COLD_EDGES: the rest, each with reason and capped_at = as_of, sorted by (tenant, id)


def _node_times(nodes: pa.Table) -> pl.DataFrame:
    n = as_frame(
        conform(nodes, NODES).select(["tenant", "id", "type", "last_seen", "time_end", "time_start", "first_seen"])
    )
    return n.select(
        "tenant",
        pl.col("id").alias("other"),
        pl.col("type").alias("other_type"),
        pl.coalesce("last_seen", "time_end", "time_start", "first_seen").alias("other_t"),
    ).unique(subset=["tenant", "other"], keep="first", maintain_order=True)


def _ranking_frame(edges: pa.Table) -> pl.DataFrame:
    """The columns the ranking reads, with row numbers, and the ends as 32-bit hashes of their ids (end_hashes).
    As strings polars copies every id into its frame (src and dst were 84 of a row's ~136 bytes, 2.4 GB at 1M
    messages); as codes of one dictionary, Arrow's dictionary_encode took 10-15 s over 1M messages' 35M ends. The
    ranking only counts groups by them: it takes the ends back as strings for the few rows of groups over a cap."""
    ends = per_column(lambda name: end_hashes(edges.column(name)).alias(name), ["src", "dst"])
    frame = as_frame(edges.select(["tenant", "type", "weight", "valid_since"])).with_columns(ends)
    return frame.with_row_index("row")


def end_hashes(ids: pa.ChunkedArray) -> pl.Series:
    """A 32-bit hash of each id (polars' 64-bit one, folded), taken to polars HASH_SLICE rows at a time (a copy of the
    whole column in polars was ~1 GB at 1M messages) into one buffer, one chunk like the frame's other columns. Ids
    may share one (~1,350 pairs expected among 1M messages' 3.4M ids): the caps only count groups by it, so a
    collision can only send a group under its cap to the exact ranking, where every edge ranks within the cap and
    stays."""
    out = np.empty(len(ids), np.uint32)
    at = 0
    for chunk in ids.chunks:
        for start in range(0, len(chunk), HASH_SLICE):
            part = pl.Series(chunk.slice(start, HASH_SLICE)).hash(seed=23).to_numpy()
            out[at : at + len(part)] = part ^ (part >> np.uint64(32))  # the low 32 bits of the fold
            at += len(part)
    return pl.Series("ends", out)


HASH_SLICE = 1 << 20


def _over_cap(
    e: pl.DataFrame, edges: pa.Table, nodes: pa.Table, as_of: datetime, config: SparsifyConfig
) -> pl.DataFrame:
    """(row, reason) of every capped-type edge ranked beyond its cap at one of its counted endpoints (`e`: the
    edges' ranking columns and row numbers, their ends hashed (_ranking_frame); `edges`: their rows, whose ids and
    ends are read for the rows of groups over a cap)."""
    caps = {t: config.cap(t) for t in e.get_column("type").unique().to_list()}
    caps = {t: k for t, k in caps.items() if k is not None}
    if not caps or e.height == 0:
        return pl.DataFrame(schema={"row": pl.UInt32, "reason": pl.String})
    group = ["tenant", "node", "type"]
    capped = pl.col("type").is_in(list(caps))
    sides = [(capped, "src", "dst")]  # (edges counted, node, other): every capped edge at its source, ...
    symmetric = capped & pl.col("type").is_in(list(config.symmetric))
    if e.select(symmetric.any()).item():
        sides.append((symmetric, "dst", "src"))  # ... and a symmetric one at its destination too
    cap = pl.col("type").replace_strict(caps, return_dtype=pl.Int64).alias("cap")
    # only a group over its cap has edges to rank: most nodes hold a handful of each type. Groups counted by a hash
    # of their key (8 bytes a row, not the key strings), on the row numbers alone: the wide rows are gathered for
    # those groups only. A collision only ranks a group under its cap too, whose edges all rank within it and stay
    counted = pl.concat(
        [
            e.lazy()
            .filter(kept)
            .select(
                "row",
                pl.lit(side, pl.UInt8).alias("_side"),
                cap,
                pl.struct("tenant", pl.col(node).alias("node"), "type").hash(seed=5).alias("_g"),
            )
            for side, (kept, node, _) in enumerate(sides)
        ]
    ).collect()
    over_groups = counted.filter(pl.len().over("_g") > pl.col("cap")).select("row", "_side", "cap")
    if over_groups.height == 0:
        return pl.DataFrame(schema={"row": pl.UInt32, "reason": pl.String})

    def side_rows(side: int, node: str, other: str) -> pl.DataFrame:
        """The side's rows of groups over a cap with their cap, and that side's node and other end as strings."""
        mine = over_groups.filter(pl.col("_side") == side).select("row", "cap")
        at = mine.get_column("row").to_arrow()
        ends = [pl.Series(name, edges.column(column).take(at)) for name, column in (("node", node), ("other", other))]
        return mine.with_columns(ends)

    inc = pl.concat([side_rows(side, node, other) for side, (_, node, other) in enumerate(sides)]).join(
        e.select("row", "tenant", "type", "weight", "valid_since"), on="row", how="left", maintain_order="left"
    )
    inc = inc.join(_node_times(nodes), on=["tenant", "other"], how="left")
    tau = pl.col("other_type").replace_strict(
        dict(config.tau_days), default=config.default_tau_days, return_dtype=pl.Float64
    )
    t = pl.coalesce("valid_since", "other_t")
    age = ((pl.lit(as_of, dtype=pl.Datetime("us")) - t).dt.total_microseconds() / 86_400e6).clip(lower_bound=0.0)
    w = pl.col("weight").fill_null(0.0)
    inc = inc.with_columns(t.alias("t"), (w * (-age / tau).exp()).fill_null(0.0).alias("score"), w.alias("w"))
    rows = inc.get_column("row").unique().sort()
    id_keys = pl.DataFrame({"row": rows, "id_key": pl.from_arrow(edges.column("id").take(rows.to_arrow()))})
    inc = inc.join(id_keys, on="row").sort(
        ["tenant", "node", "type", "score", "w", "t", "id_key"],
        descending=[False, False, False, True, True, True, False],
        nulls_last=True,
    )
    inc = inc.with_columns(pl.int_range(pl.len()).over(group).alias("rank"))
    over = inc.filter(pl.col("rank") >= pl.col("cap"))
    return (
        over.group_by("row")
        .agg(pl.col("type").first(), pl.col("cap").first())
        .select("row", pl.format("degree_cap:{}>{}", "type", "cap").alias("reason"))
    )


def sparsify(
    nodes: pa.Table, edges: pa.Table, as_of: datetime, config: SparsifyConfig = SparsifyConfig()
) -> SparsifyResult:
    """Split `edges` into the hot edges kept and the cold ones (seed 004 §22.1); per tenant, nothing lost.

    `nodes` supply the other endpoint's time and type for recency; `as_of` (naive UTC) is the
    reference time and the cold rows' capped_at. Input rows are returned unchanged.
    """
    edges = conform(edges, EDGES)
    # the columns the ranking reads, not the ids (read for the rows of groups over a cap: usually none)
    e = _ranking_frame(edges)
    below = e.filter(
        (pl.col("type") == "SIMILAR_TO") & (pl.col("weight").fill_null(0.0) < config.similar_threshold)
    ).select("row", pl.lit(f"similar_to<{config.similar_threshold:g}").alias("reason"))
    # the rows not below the threshold (all of them, usually: no copy of the frame then)
    rest = e.filter(~pl.col("row").is_in(below.get_column("row"))) if below.height else e
    over = _over_cap(rest, edges, nodes, as_of, config)
    cold_rows = pl.concat([below, over]).sort("row")
    cold_mask = e.select(pl.col("row").is_in(cold_rows.get_column("row"))).to_series().to_arrow()
    del e, rest  # not held through the copies below
    # at most one copy of the hot edges: the sorted order of all edges, without the cold rows, taken once; none when
    # none is cold and the edges are in that order already (GraphStage.sort_by_key)
    order = key_order(edges, [k for k, _ in _ORDER])
    if order is None:
        kept = edges.filter(pc.invert(cold_mask)) if cold_rows.height else edges
    else:
        if cold_rows.height:
            order = order.filter(pc.invert(pc.is_in(order, value_set=cold_rows.get_column("row").to_arrow())))
        kept = edges.take(order)
    cold = edges.filter(cold_mask)  # row order, as cold_rows
    cold = cold.append_column("reason", cold_rows.get_column("reason").to_arrow().cast(pa.string()))
    cold = cold.append_column("capped_at", pa.array([as_of] * cold.num_rows, COLD_EDGES.field("capped_at").type))
    return SparsifyResult(edges=kept, cold=_sorted(conform(cold, COLD_EDGES)))


_ORDER = [("tenant", "ascending"), ("id", "ascending"), ("src", "ascending"), ("dst", "ascending")]


def _sorted(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=_ORDER))


def sparsify_group_keys(edges: pa.Table, config: SparsifyConfig = SparsifyConfig()) -> pa.Table:
    """(tenant, node, type, id): the degree-cap group(s) of every edge — (tenant, src, type), and for a symmetric
    type (SIMILAR_TO, SAME_AS) also (tenant, dst, type), where the edge counts too.

    Contract (tests/test_consolidation_contracts.py): sparsify over sparsify_input(nodes, edges, G) puts every edge
    of the groups G on the same side (hot or cold, same reason) as the full run. An edge's side depends on its
    group's edges and their other endpoints' types and times — for a symmetric edge, on both its groups."""
    e = as_frame(conform(edges, EDGES).select(["id", "tenant", "src", "dst", "type"]))
    sym = pl.col("type").is_in(sorted(config.symmetric))
    keys = pl.concat(
        [
            e.select("tenant", pl.col("src").alias("node"), "type", "id"),
            e.filter(sym).select("tenant", pl.col("dst").alias("node"), "type", "id"),
        ]
    )
    return keys.to_arrow()


def sparsify_input(
    nodes: pa.Table, edges: pa.Table, keys: pa.Table, config: SparsifyConfig = SparsifyConfig()
) -> tuple[pa.Table, pa.Table]:
    """The rows sparsify needs to place the edges of the groups in `keys` (tenant, node, type): those groups'
    edges, every edge of the other group of their symmetric edges, and the nodes at both ends of all of them."""
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    k = as_frame(keys.select(["tenant", "node", "type"])).unique()
    all_keys = as_frame(sparsify_group_keys(edges, config)).join(
        as_frame(edges.select(["id", "tenant"])).with_row_index("_row"), on=["tenant", "id"]
    )
    mine = all_keys.join(k, on=["tenant", "node", "type"], how="semi", nulls_equal=True)
    sym = mine.filter(pl.col("type").is_in(sorted(config.symmetric))).select("tenant", "id")
    # the other end of each symmetric edge: its whole group counts towards the edge's fate
    other = all_keys.join(sym, on=["tenant", "id"], how="semi").select("tenant", "node", "type").unique()
    rows = (
        pl.concat([mine, all_keys.join(other, on=["tenant", "node", "type"], how="semi", nulls_equal=True)])
        .get_column("_row")
        .unique()
        .sort()
    )
    chosen = edges.take(rows.to_arrow())
    ends = as_frame(chosen.select(["tenant", "src", "dst"]))
    ends = pl.concat(
        [ends.select("tenant", pl.col("src").alias("id")), ends.select("tenant", pl.col("dst").alias("id"))]
    )
    n = (
        as_frame(nodes.select(["tenant", "id"]))
        .with_row_index("_row")
        .join(ends.unique(), on=["tenant", "id"], how="semi", nulls_equal=True)
    )
    return nodes.take(n.get_column("_row").to_arrow()), chosen
