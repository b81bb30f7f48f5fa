"""Arrow schemas of the graph tables (SPEC §5): nodes and edges.

Declared once; the R2G writer, the lake-wide merge, the index builders and the
tests all use these. Raw-layer tables live in raw_store.schema.
"""
from __future__ import annotations

import pyarrow as pa

from raw_store.schema import RAW_REFS, TS

NODE_TYPES = ("Episode", "Entity", "Fact", "Preference", "Concept", "Task", "Meta")
EDGE_TYPES = (
    "TEMPORAL_NEXT", "MENTIONS",
    "AGENT", "PATIENT", "LOCATION", "TIME", "MANNER", "INSTRUMENT", "RECIPIENT", "CAUSE", "BENEFICIARY",
    "ABOUT", "SUPPORTS", "CONTRADICTS", "SAME_AS", "DERIVED_FROM", "SIMILAR_TO",
    "VERSION_NEXT", "ACTIVE_OF", "CAUSES", "CAUSED_BY", "REFERS_TO", "SEMANTIC_CONTAINS",
)

# Edges from a Fact (or Preference/Task) to the Entity filling one of its roles.
ROLE_EDGES = frozenset({"AGENT", "PATIENT", "LOCATION", "TIME", "MANNER", "INSTRUMENT", "RECIPIENT", "CAUSE",
                        "BENEFICIARY"})

NODES = pa.schema([
    ("id", pa.string()),
    ("tenant", pa.string()),
    ("type", pa.string()),              # NODE_TYPES
    ("subtype", pa.string()),           # Entity: PERSON/LOC/ORG/OBJECT/TIME/MISC; Fact: event/state; …
    ("title", pa.string()),
    ("text", pa.string()),              # summary or normalised statement, never the raw text
    ("keywords", pa.list_(pa.string())),
    ("entities", pa.list_(pa.string())),  # titles of the entities it mentions
    ("lang", pa.string()),
    ("time_start", TS),
    ("time_end", TS),
    ("time_granularity", pa.string()),  # day | week | month | year | part_of_day | minute | unspecified
    ("time_text", pa.string()),         # the original time expression
    ("importance", pa.float64()),
    ("confidence", pa.float64()),
    ("frequency", pa.int64()),
    ("sentiment", pa.float64()),
    ("first_seen", TS),
    ("last_seen", TS),
    ("tier", pa.string()),              # short | mid | long
    ("category", pa.string()),          # episode | fact | core
    ("status", pa.string()),            # active | archived
    ("raw_refs", RAW_REFS),
    ("provenance", pa.string()),        # versioned rule id, e.g. r2g.rule.fact.en.v1
    ("conv_id", pa.string()),           # conversation of origin (Entities: null — tenant-wide)
    ("msg_id", pa.string()),
    ("speaker", pa.string()),
    ("predicate_norm", pa.string()),    # Fact: lemma or verb_object, e.g. play_soccer
    ("negation", pa.bool_()),
    ("modality", pa.string()),          # Fact: can/should/want/plan/maybe or null
    ("aliases", pa.list_(pa.string())),
    ("mentions", pa.int64()),           # Entity: number of mentions
    # -- set by consolidation (jobs/), null straight out of R2G --------------------------------
    ("weight", pa.float64()),           # current memory weight after decay and feedback (seed 003)
    ("activation", pa.int64()),         # counted uses: recall hits and feedback, after the 2 h cooldown
    ("feedback", pa.float64()),         # net explicit feedback (upvote/downvote/boost), capped per day
    ("pinned", pa.bool_()),             # pinned by feedback: never decays or archives
    ("valid_since", TS),                # Fact versions: when this version became true
    ("valid_until", TS),                # … and when the next version replaced it (null: current)
    ("pii", pa.list_(pa.string())),     # PII kinds found in its text: email, phone, id_card, card
])

EDGES = pa.schema([
    ("id", pa.string()),
    ("tenant", pa.string()),
    ("src", pa.string()),
    ("dst", pa.string()),               # a node id, or a raw_id for DERIVED_FROM → RawChunk
    ("type", pa.string()),              # EDGE_TYPES
    ("weight", pa.float64()),           # R2G-4: 0.5*conf + 0.3*source_trust + 0.2*recency_boost
    ("confidence", pa.float64()),
    ("valid_since", TS),
    ("valid_until", TS),
    ("raw_refs", RAW_REFS),
    ("provenance", pa.string()),
])

# Per-partition NLP output: one row per distinct message text (Annotation JSON), so the
# graph step reads exactly what the NLP step produced without touching the cache.
ANNOTATIONS = pa.schema([
    ("text_sha", pa.string()),
    ("lang", pa.string()),
    ("annotation", pa.string()),        # r2g.nlp.Annotation.to_json()
])
