# Frozen reference: jobs/sparsify.py as of commit 9d258c2, before vectorisation. The golden harness
# (bench/consolidation_golden.py) and the differential tests compare the library against it; not library code.
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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

import polars as pl
import pyarrow as pa

from jobs.schema import COLD_EDGES
from r2g.schema import EDGES, NODES
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
    n = pl.from_arrow(
        conform(nodes, NODES).select(["tenant", "id", "type", "last_seen", "time_end", "time_start", "first_seen"])
    )
    return n.select(
        "tenant",
        pl.col("id").alias("other"),
        pl.col("type").alias("other_type"),
        pl.coalesce("last_seen", "time_end", "time_start", "first_seen").alias("other_t"),
    ).unique(subset=["tenant", "other"], keep="first", maintain_order=True)


def _over_cap(e: pl.DataFrame, nodes: pl.DataFrame, as_of: datetime, config: SparsifyConfig) -> pl.DataFrame:
    """(row, reason) of every capped-type edge ranked beyond its cap at one of its counted endpoints."""
    caps = {t: config.cap(t) for t in e.get_column("type").unique().to_list()}
    caps = {t: k for t, k in caps.items() if k is not None}
    if not caps or e.height == 0:
        return pl.DataFrame(schema={"row": pl.UInt32, "reason": pl.String})
    capped = e.filter(pl.col("type").is_in(list(caps)))
    sides = [
        capped.select(
            "row", "tenant", "type", "weight", "valid_since", pl.col("src").alias("node"), pl.col("dst").alias("other")
        )
    ]
    sym = capped.filter(pl.col("type").is_in(list(config.symmetric)))
    if sym.height:
        sides.append(
            sym.select(
                "row",
                "tenant",
                "type",
                "weight",
                "valid_since",
                pl.col("dst").alias("node"),
                pl.col("src").alias("other"),
            )
        )
    inc = pl.concat(sides).join(nodes, on=["tenant", "other"], how="left")
    tau = pl.col("other_type").replace_strict(
        dict(config.tau_days), default=config.default_tau_days, return_dtype=pl.Float64
    )
    t = pl.coalesce("valid_since", "other_t")
    age = ((pl.lit(as_of, dtype=pl.Datetime("us")) - t).dt.total_microseconds() / 86_400e6).clip(lower_bound=0.0)
    w = pl.col("weight").fill_null(0.0)
    inc = inc.with_columns(t.alias("t"), (w * (-age / tau).exp()).fill_null(0.0).alias("score"), w.alias("w"))
    inc = inc.join(e.select("row", pl.col("id").alias("id_key")), on="row").sort(
        ["tenant", "node", "type", "score", "w", "t", "id_key"],
        descending=[False, False, False, True, True, True, False],
        nulls_last=True,
    )
    inc = inc.with_columns(
        pl.int_range(pl.len()).over(["tenant", "node", "type"]).alias("rank"),
        pl.col("type").replace_strict(caps, return_dtype=pl.Int64).alias("cap"),
    )
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
    e = pl.from_arrow(edges).with_row_index("row")
    below = e.filter(
        (pl.col("type") == "SIMILAR_TO") & (pl.col("weight").fill_null(0.0) < config.similar_threshold)
    ).select("row", pl.lit(f"similar_to<{config.similar_threshold:g}").alias("reason"))
    over = _over_cap(e.join(below, on="row", how="anti"), _node_times(nodes), as_of, config)
    cold_rows = pl.concat([below, over]).sort("row")
    reason = dict(zip(cold_rows.get_column("row").to_list(), cold_rows.get_column("reason").to_list()))

    keep = [i for i in range(edges.num_rows) if i not in reason]
    cold_idx = sorted(reason)
    kept = _sorted(edges.take(pa.array(keep, pa.int64())))
    cold = edges.take(pa.array(cold_idx, pa.int64()))
    cold = cold.append_column("reason", pa.array([reason[i] for i in cold_idx], pa.string()))
    cold = cold.append_column("capped_at", pa.array([as_of] * len(cold_idx), COLD_EDGES.field("capped_at").type))
    return SparsifyResult(edges=kept, cold=_sorted(conform(cold, COLD_EDGES)))


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("tenant", "ascending"), ("id", "ascending"), ("src", "ascending"), ("dst", "ascending")])
