"""Arrow schemas of the graph tables (SPEC §5): nodes and edges.

Declared once; the R2G writer, the lake-wide merge, the index builders and the
tests all use these. Raw-layer tables live in raw_store.schema.
"""

from __future__ import annotations

import pyarrow as pa

from raw_store.schema import RAW_REFS, TS

NODE_TYPES = ("Episode", "Entity", "Fact", "Preference", "Concept", "Task", "Meta")
EDGE_TYPES = (
    "TEMPORAL_NEXT",
    "MENTIONS",
    "AGENT",
    "PATIENT",
    "LOCATION",
    "TIME",
    "MANNER",
    "INSTRUMENT",
    "RECIPIENT",
    "CAUSE",
    "BENEFICIARY",
    "ABOUT",
    "SUPPORTS",
    "CONTRADICTS",
    "SAME_AS",
    "DERIVED_FROM",
    "SIMILAR_TO",
    "VERSION_NEXT",
    "ACTIVE_OF",
    "CAUSES",
    "CAUSED_BY",
    "REFERS_TO",
    "SEMANTIC_CONTAINS",
)

# Edges from a Fact (or Preference/Task) to the Entity filling one of its roles.
ROLE_EDGES = frozenset(
    {"AGENT", "PATIENT", "LOCATION", "TIME", "MANNER", "INSTRUMENT", "RECIPIENT", "CAUSE", "BENEFICIARY"}
)

NODES = pa.schema(
    [
        ("id", pa.string()),
        ("tenant", pa.string()),
        ("type", pa.string()),  # NODE_TYPES
        ("subtype", pa.string()),  # Entity: PERSON/LOC/ORG/OBJECT/TIME/MISC; Fact: event/state; …
        ("title", pa.string()),
        ("text", pa.string()),  # summary or normalised statement, never the raw text
        ("keywords", pa.list_(pa.string())),
        ("entities", pa.list_(pa.string())),  # titles of the entities it mentions
        ("lang", pa.string()),
        ("time_start", TS),
        ("time_end", TS),
        ("time_granularity", pa.string()),  # day | week | month | year | part_of_day | minute | unspecified
        ("time_text", pa.string()),  # the original time expression
        ("importance", pa.float64()),
        ("confidence", pa.float64()),
        ("frequency", pa.int64()),
        ("sentiment", pa.float64()),
        ("first_seen", TS),
        ("last_seen", TS),
        ("tier", pa.string()),  # short | mid | long
        ("category", pa.string()),  # episode | fact | core
        ("status", pa.string()),  # active | archived
        ("raw_refs", RAW_REFS),
        ("provenance", pa.string()),  # versioned rule id, e.g. r2g.rule.fact.en.v1
        ("conv_id", pa.string()),  # conversation of origin (Entities: null — tenant-wide)
        ("msg_id", pa.string()),
        ("speaker", pa.string()),
        ("predicate_norm", pa.string()),  # Fact: lemma or verb_object, e.g. play_soccer
        ("negation", pa.bool_()),
        ("modality", pa.string()),  # Fact: can/should/want/plan/maybe or null
        ("aliases", pa.list_(pa.string())),
        ("mentions", pa.int64()),  # Entity: number of mentions
        # -- set by consolidation (jobs/), null straight out of R2G --------------------------------
        ("weight", pa.float64()),  # current memory weight after decay and feedback (seed 003)
        ("activation", pa.int64()),  # counted uses: recall hits and feedback, after the 2 h cooldown
        ("feedback", pa.float64()),  # net explicit feedback (upvote/downvote/boost), capped per day
        ("pinned", pa.bool_()),  # pinned by feedback: never decays or archives
        ("valid_since", TS),  # Fact versions: when this version became true
        ("valid_until", TS),  # … and when the next version replaced it (null: current)
        ("pii", pa.list_(pa.string())),  # PII kinds found in its text: email, phone, id_card, card
    ]
)

EDGES = pa.schema(
    [
        ("id", pa.string()),
        ("tenant", pa.string()),
        ("src", pa.string()),
        ("dst", pa.string()),  # a node id, or a raw_id for DERIVED_FROM → RawChunk
        ("type", pa.string()),  # EDGE_TYPES
        ("weight", pa.float64()),  # R2G-4: 0.5*conf + 0.3*source_trust + 0.2*recency_boost
        ("confidence", pa.float64()),
        ("valid_since", TS),
        ("valid_until", TS),
        ("raw_refs", RAW_REFS),
        ("provenance", pa.string()),
    ]
)

# The node columns consolidation sets (R2G leaves them null): tiers and decay as of the run's date (jobs.tiers), fact
# versions (jobs.versions) and PII flags (jobs.pii). The consolidated graph keeps them in a narrow table of their own
# (r2g.lake_graph), so a node whose only change is one of these is no overlay row, and a run whose only change is the
# date rewrites just that table.
STATE_COLUMNS = (
    "tier",
    "category",
    "status",
    "weight",
    "activation",
    "feedback",
    "pinned",
    "valid_since",
    "valid_until",
    "pii",
)
NODE_STATE = pa.schema([NODES.field("tenant"), NODES.field("id"), *[NODES.field(c) for c in STATE_COLUMNS]])

# Full-text documents, computed once per partition where the rows are made (jieba segmentation is the cost), and
# reused by the index build while the row's text is unchanged: `content` hashes the text the doc was made from.
DOCS = pa.schema([("tenant", pa.string()), ("id", pa.string()), ("content", pa.uint64()), ("doc", pa.string())])

# Per-partition NLP output: one row per distinct message text (Annotation JSON), so the
# graph step reads exactly what the NLP step produced without touching the cache.
ANNOTATIONS = pa.schema(
    [
        ("text_sha", pa.string()),
        ("lang", pa.string()),
        ("annotation", pa.string()),  # r2g.nlp.Annotation.to_json()
    ]
)


# -- consolidation and forgetting tables (jobs/ writes them; recall and assets read them) ----------------------
COMMUNITIES = pa.schema(
    [
        ("id", pa.string()),  # stable across runs while membership barely changes
        ("tenant", pa.string()),
        ("level", pa.int64()),  # 0: finest
        ("members", pa.list_(pa.string())),  # node ids, sorted
        ("label", pa.string()),  # top keywords / entity titles
        ("size", pa.int64()),
        ("modularity", pa.float64()),  # of the partition this community belongs to
        ("concept_id", pa.string()),  # the Concept node standing for it
    ]
)

PROMOTIONS = pa.schema(
    [
        ("tenant", pa.string()),
        ("node_id", pa.string()),
        ("from_tier", pa.string()),  # null: first seen by consolidation
        ("to_tier", pa.string()),
        ("from_category", pa.string()),
        ("to_category", pa.string()),
        ("from_status", pa.string()),
        ("to_status", pa.string()),
        ("reason", pa.string()),  # e.g. age>=7d, topic_repetition>=3, confidence>=0.8, decay<0.2
        ("at", TS),  # the as_of of the run that made the change
        ("provenance", pa.string()),
    ]
)

REVIEW_QUEUE = pa.schema(
    [
        ("id", pa.string()),
        ("tenant", pa.string()),
        ("kind", pa.string()),  # contradiction_near_tie | fact_low_weight | …
        ("node_ids", pa.list_(pa.string())),
        ("scores", pa.list_(pa.float64())),
        ("reason", pa.string()),
        ("created_at", TS),
        ("provenance", pa.string()),
    ]
)

# Edges sparsification moved out of the hot graph (seed 004 §22.1): kept, never lost.
COLD_EDGES = pa.schema([*EDGES, ("reason", pa.string()), ("capped_at", TS)])

FEEDBACK = pa.schema(
    [
        ("tenant", pa.string()),
        ("node_id", pa.string()),
        ("kind", pa.string()),  # hit | pin | unpin | upvote | downvote
        ("at", TS),
        ("source", pa.string()),  # recall | inbox
        ("source_file", pa.string()),
        ("line", pa.int64()),
        ("query", pa.string()),  # recall hits: the query that returned the node
    ]
)

OPS_APPLIED = pa.schema(
    [
        ("tenant", pa.string()),
        ("batch_id", pa.string()),  # sha256 of the ops file
        ("op_index", pa.int64()),
        ("op", pa.string()),  # create_memory | link_memories | create | edit | delete | link_upsert | …
        ("ref", pa.string()),  # the batch-local ref it defined, if any
        ("target_ids", pa.list_(pa.string())),  # nodes / edges it created or changed
        ("result", pa.string()),  # JSON
        ("at", TS),
    ]
)

OPS_REJECTED = pa.schema(
    [
        ("tenant", pa.string()),
        ("batch_id", pa.string()),
        ("op_index", pa.int64()),
        ("op", pa.string()),
        ("code", pa.string()),  # BAD_ARGS | CHILD_NOT_FOUND | CHILD_HAS_PARENT | NOT_FOUND | …
        ("message", pa.string()),
        ("raw", pa.string()),  # the op as given
    ]
)

AUDIT = pa.schema(
    [
        ("request_id", pa.string()),
        ("tenant", pa.string()),
        ("scope", pa.string()),  # node | conv | speaker | topic | window | all
        ("value", pa.string()),
        ("window_start", TS),
        ("window_end", TS),
        ("reason", pa.string()),
        ("requested_at", TS),
        ("messages", pa.int64()),  # messages removed
        ("nodes", pa.list_(pa.string())),  # node ids removed (the deletion proof)
        ("edges", pa.int64()),  # edges removed
        ("blobs", pa.list_(pa.string())),  # raw ids physically deleted (tombstoned)
        ("index_entries", pa.int64()),  # BM25 documents withdrawn
    ]
)
