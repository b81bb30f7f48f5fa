"""R2G rules (SPEC §5, seed 004 R2G-2…R2G-6): small pure functions over one message's Annotation.

Each rule has a versioned id that goes into the `provenance` column of every row
it creates; `RULES` maps ids to functions. A behaviour change is a new id
(`.v2`), never a silent edit. Rules only *propose* drafts (entities, facts,
preferences, links); `r2g.extract` turns drafts into node and edge rows.

All rules are plain loops over the Annotation's parallel lists (no spaCy objects),
so cached annotations run through them without the models.

  ids.py         the versioned rule ids and their extraction confidence (CONF)
  registry.py    RULES: id → description and implementing functions
  drafts.py      MessageCtx and the drafts rules return (EntityRef, FactDraft, …)
  common.py      shared helpers (content_words, clip), time, speaker and cause rules
  coref.py       name variants, canonical names, pronouns; person nouns
  en.py / zh.py  entities and predicate-clause facts of each language
  preference.py  preferences, instructions, tasks and reminders
  episode.py     importance, topic blocks, the Episode of a turn, TEMPORAL_NEXT

Every public name is importable from `r2g.rules` itself.
"""

from __future__ import annotations

from r2g.rules.common import (
    FUTURE_MODALITIES,
    ROLE_LABELS,
    SUMMARY_MAX_CHARS,
    TITLE_MAX_CHARS,
    cause_rule,
    clip,
    content_words,
    is_role_label,
    speaker_rule,
    time_rule,
)
from r2g.rules.coref import PERSON_NOUNS_EN, PERSON_NOUNS_ZH, name_variants, pronoun_ref
from r2g.rules.drafts import EntityRef, EpisodeDraft, FactDraft, MessageCtx, PreferenceDraft, Role, TaskDraft, TimeRef
from r2g.rules.en import (
    EMPTY_VERBS_EN,
    FILLERS_EN,
    LIGHT_VERBS_EN,
    PLACE_NOUNS_EN,
    entity_en_rule,
    fact_en_rule,
    is_memory_fact,
)
from r2g.rules.episode import (
    TOPIC_BLOCK_MIN_CHARS,
    TOPIC_BLOCK_MIN_LEN,
    TOPIC_BLOCK_MIN_SENTS,
    episode_rule,
    importance,
    temporal_next_rule,
    topic_blocks,
)
from r2g.rules.ids import (
    CAUSE,
    CONCEPT,
    CONF,
    COREF,
    DERIVED_FROM,
    ENTITY_EN,
    ENTITY_SPEAKER,
    ENTITY_ZH,
    EPISODE,
    FACT_EN,
    FACT_ZH,
    IMPORTANCE,
    LOCATION,
    MENTIONS,
    PREFERENCE,
    ROLES_EXTRA,
    TASK,
    TEMPORAL_NEXT,
    TIME,
    TOPIC_BLOCK,
)
from r2g.rules.preference import preference_rule, task_rule
from r2g.rules.registry import RULES, RuleSpec
from r2g.rules.zh import LIGHT_VERBS_ZH, entity_zh_rule, fact_zh_rule, zh_clauses

__all__ = [
    # rule ids, confidence and the registry
    "CAUSE",
    "CONCEPT",
    "CONF",
    "COREF",
    "DERIVED_FROM",
    "ENTITY_EN",
    "ENTITY_SPEAKER",
    "ENTITY_ZH",
    "EPISODE",
    "FACT_EN",
    "FACT_ZH",
    "IMPORTANCE",
    "LOCATION",
    "MENTIONS",
    "PREFERENCE",
    "ROLES_EXTRA",
    "TASK",
    "TEMPORAL_NEXT",
    "TIME",
    "TOPIC_BLOCK",
    "RULES",
    "RuleSpec",
    # drafts
    "MessageCtx",
    "EntityRef",
    "TimeRef",
    "Role",
    "FactDraft",
    "PreferenceDraft",
    "TaskDraft",
    "EpisodeDraft",
    # limits and word lists
    "SUMMARY_MAX_CHARS",
    "TITLE_MAX_CHARS",
    "FUTURE_MODALITIES",
    "PERSON_NOUNS_EN",
    "PERSON_NOUNS_ZH",
    "PLACE_NOUNS_EN",
    "EMPTY_VERBS_EN",
    "LIGHT_VERBS_EN",
    "FILLERS_EN",
    "LIGHT_VERBS_ZH",
    "ROLE_LABELS",
    "TOPIC_BLOCK_MIN_SENTS",
    "TOPIC_BLOCK_MIN_CHARS",
    "TOPIC_BLOCK_MIN_LEN",
    # rules and helpers
    "clip",
    "content_words",
    "time_rule",
    "speaker_rule",
    "cause_rule",
    "name_variants",
    "pronoun_ref",
    "is_role_label",
    "is_memory_fact",
    "entity_en_rule",
    "fact_en_rule",
    "entity_zh_rule",
    "fact_zh_rule",
    "zh_clauses",
    "preference_rule",
    "task_rule",
    "importance",
    "topic_blocks",
    "episode_rule",
    "temporal_next_rule",
]
