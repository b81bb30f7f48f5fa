"""Arrow schemas of the consolidation tables (SPEC §8, §9): declared once, used by every writer and reader.

Nodes and edges keep their schemas in r2g.schema (consolidation fills the node columns
weight, activation, feedback, pinned, valid_since, valid_until, pii, tier, category,
status); the raw-layer tables (including tombstones) live in raw_store.schema.
"""
from __future__ import annotations

import pyarrow as pa

from r2g.schema import EDGES
from raw_store.schema import TS

COMMUNITIES = pa.schema([
    ("id", pa.string()),                # stable across runs while membership barely changes
    ("tenant", pa.string()),
    ("level", pa.int64()),              # 0: finest
    ("members", pa.list_(pa.string())), # node ids, sorted
    ("label", pa.string()),             # top keywords / entity titles
    ("size", pa.int64()),
    ("modularity", pa.float64()),       # of the partition this community belongs to
    ("concept_id", pa.string()),        # the Concept node standing for it
])

PROMOTIONS = pa.schema([
    ("tenant", pa.string()),
    ("node_id", pa.string()),
    ("from_tier", pa.string()),         # null: first seen by consolidation
    ("to_tier", pa.string()),
    ("from_category", pa.string()),
    ("to_category", pa.string()),
    ("from_status", pa.string()),
    ("to_status", pa.string()),
    ("reason", pa.string()),            # e.g. age>=7d, topic_repetition>=3, confidence>=0.8, decay<0.2
    ("at", TS),                         # the as_of of the run that made the change
    ("provenance", pa.string()),
])

REVIEW_QUEUE = pa.schema([
    ("id", pa.string()),
    ("tenant", pa.string()),
    ("kind", pa.string()),              # contradiction_near_tie | fact_low_weight | …
    ("node_ids", pa.list_(pa.string())),
    ("scores", pa.list_(pa.float64())),
    ("reason", pa.string()),
    ("created_at", TS),
    ("provenance", pa.string()),
])

# Edges sparsification moved out of the hot graph (seed 004 §22.1): kept, never lost.
COLD_EDGES = pa.schema([*EDGES, ("reason", pa.string()), ("capped_at", TS)])

FEEDBACK = pa.schema([
    ("tenant", pa.string()),
    ("node_id", pa.string()),
    ("kind", pa.string()),              # hit | pin | unpin | upvote | downvote
    ("at", TS),
    ("source", pa.string()),            # recall | inbox
    ("source_file", pa.string()),
    ("line", pa.int64()),
    ("query", pa.string()),             # recall hits: the query that returned the node
])

OPS_APPLIED = pa.schema([
    ("tenant", pa.string()),
    ("batch_id", pa.string()),          # sha256 of the ops file
    ("op_index", pa.int64()),
    ("op", pa.string()),                # create_memory | link_memories | create | edit | delete | link_upsert | …
    ("ref", pa.string()),               # the batch-local ref it defined, if any
    ("target_ids", pa.list_(pa.string())),  # nodes / edges it created or changed
    ("result", pa.string()),            # JSON
    ("at", TS),
])

OPS_REJECTED = pa.schema([
    ("tenant", pa.string()),
    ("batch_id", pa.string()),
    ("op_index", pa.int64()),
    ("op", pa.string()),
    ("code", pa.string()),              # BAD_ARGS | CHILD_NOT_FOUND | CHILD_HAS_PARENT | NOT_FOUND | …
    ("message", pa.string()),
    ("raw", pa.string()),               # the op as given
])

AUDIT = pa.schema([
    ("request_id", pa.string()),
    ("tenant", pa.string()),
    ("scope", pa.string()),             # node | conv | speaker | topic | window | all
    ("value", pa.string()),
    ("window_start", TS),
    ("window_end", TS),
    ("reason", pa.string()),
    ("requested_at", TS),
    ("messages", pa.int64()),           # messages removed
    ("nodes", pa.list_(pa.string())),   # node ids removed (the deletion proof)
    ("edges", pa.int64()),              # edges removed
    ("blobs", pa.list_(pa.string())),   # raw ids physically deleted (tombstoned)
    ("index_entries", pa.int64()),      # BM25 documents withdrawn
])
