"""Recall: DuckDB FTS + igraph indexes over the memory graph, and cited, tenant-scoped recall()."""

from recall.citations import Citation
from recall.config import RecallConfig
from recall.engine import RecallResult, query_keywords, ranked_turns, recall
from recall.store import IndexNotBuilt

__all__ = ["Citation", "IndexNotBuilt", "RecallConfig", "RecallResult", "query_keywords", "ranked_turns", "recall"]
