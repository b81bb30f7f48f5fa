"""The versioned ids of the R2G rules and their extraction confidence (R2G-4 conf_extract).

An id goes into the `provenance` column of every row its rule makes; a behaviour change is a new id
(`.v2`), never a silent edit. r2g.rules.registry maps the ids to the functions that implement them.
"""

from __future__ import annotations

EPISODE = "r2g.rule.episode.v1"
ENTITY_EN = "r2g.rule.entity.en.v1"
ENTITY_ZH = "r2g.rule.entity.zh.v1"
ENTITY_SPEAKER = "r2g.rule.entity.speaker.v2"  # v2: a chat role label (assistant, user) is no one
FACT_EN = "r2g.rule.fact.en.v2"  # v2: no bare light verb or filler (nothing but the doer)
FACT_ZH = "r2g.rule.fact.zh.v2"  # v2: no pronoun/time+modal fragment as subject, no bare light verb
LOCATION = "r2g.rule.location.v2"  # v2: English needs place evidence
TIME = "r2g.rule.time.v1"
CAUSE = "r2g.rule.cause.v1"
PREFERENCE = "r2g.rule.preference.v1"
TEMPORAL_NEXT = "r2g.rule.temporal_next.v1"
MENTIONS = "r2g.rule.mentions.v1"
DERIVED_FROM = "r2g.rule.derived_from.v1"
COREF = "r2g.rule.coref.v1"
ROLES_EXTRA = "r2g.rule.roles_extra.v1"
TASK = "r2g.rule.task.v1"
CONCEPT = "r2g.rule.concept.v1"
IMPORTANCE = "r2g.rule.importance.v1"
TOPIC_BLOCK = "r2g.rule.topic_block.v1"

# Extraction confidence per rule (R2G-4 conf_extract).
CONF = {
    EPISODE: 1.0,
    ENTITY_EN: 0.85,
    ENTITY_ZH: 0.7,
    ENTITY_SPEAKER: 1.0,
    FACT_EN: 0.7,
    FACT_ZH: 0.6,
    LOCATION: 0.7,
    TIME: 0.8,
    CAUSE: 0.6,
    PREFERENCE: 0.7,
    TEMPORAL_NEXT: 1.0,
    MENTIONS: 0.9,
    DERIVED_FROM: 1.0,
    COREF: 0.6,
    ROLES_EXTRA: 0.6,
    TASK: 0.7,
    CONCEPT: 0.8,
    TOPIC_BLOCK: 1.0,
}
