"""Index assets: the DuckDB file (tables + per-tenant BM25) and per-tenant igraph graphs, swapped in atomically."""

from collections.abc import Iterator

import dagster as dg

from assets.resources import LakeResource
from raw_store.lake import lake_fingerprints, write_lake_state
from recall.index import SQL_TABLES, build_indexes


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "memory_duckdb",
            group_name="indexes",
            deps=[
                "nodes",
                "edges",
                "messages",
                "raw_chunks",
                "rejects",
                "audit",
                "tombstones",
                "communities",
                "promotions",
                "review_queue",
                "cold_edges",
                "feedback",
                "ops_applied",
                "ops_rejected",
            ],
            kinds={"duckdb"},
            owners=["team:memory"],
            description="lake/memory.duckdb: SQL tables over the lake plus BM25 full-text indexes per tenant.",
        ),
        dg.AssetSpec(
            "graph_index",
            group_name="indexes",
            deps=["nodes", "edges"],
            kinds={"python"},
            owners=["team:memory"],
            description="lake/graph/<tenant>.pkl: the tenant's typed, weighted igraph for graph expansion.",
        ),
    ],
)
def indexes(context: dg.AssetExecutionContext, lake: LakeResource) -> Iterator[dg.MaterializeResult]:
    """Rebuild both recall indexes into temp files and swap them in, so readers see old or new, never half."""
    lk = lake.get()
    fingerprints = lake_fingerprints(lk)  # the partition set the tables were just merged from
    stats = build_indexes(lk, SQL_TABLES, full=lake.full_rebuild)
    write_lake_state(lk, *fingerprints)
    graphs = stats["graphs"]
    vec = stats.get("vectors", {})
    if vec.get("embedder") and vec.get("off"):  # an embedder is configured (the static one by default) but cannot run
        context.log.warning(f"vectors OFF: embedder {vec['embedder']!r} unavailable: {vec['off']}")
    yield dg.MaterializeResult(
        asset_key="memory_duckdb",
        metadata={
            "tables": dg.MetadataValue.json(stats["tables"]),
            "tenants": stats["tenants"],
            "node_docs": stats["node_docs"],
            "raw_docs": stats["raw_docs"],
            "seconds": stats["seconds"],
            "rebuilt": stats["rebuilt"],
            "vectors": vec.get("off") or f"{vec.get('embedder')}: {sum(vec.get('nodes', {}).values())} nodes embedded",
        },
    )
    yield dg.MaterializeResult(
        asset_key="graph_index",
        metadata={
            "graphs": dg.MetadataValue.json(graphs),
            "tenants": len(graphs),
            "vertices": sum(g["vertices"] for g in graphs.values()),
            "edges": sum(g["edges"] for g in graphs.values()),
        },
    )
