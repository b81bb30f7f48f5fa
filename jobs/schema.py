"""The consolidation tables' schemas live in r2g.schema (below both jobs/ and recall/, which read them); this
module re-exports them for jobs/ code."""

from r2g.schema import AUDIT, COLD_EDGES, COMMUNITIES, FEEDBACK, OPS_APPLIED, OPS_REJECTED, PROMOTIONS, REVIEW_QUEUE

__all__ = [
    "AUDIT",
    "COLD_EDGES",
    "COMMUNITIES",
    "FEEDBACK",
    "OPS_APPLIED",
    "OPS_REJECTED",
    "PROMOTIONS",
    "REVIEW_QUEUE",
]
