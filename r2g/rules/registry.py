"""The registry of R2G rules: every versioned rule id, what it does and the functions implementing it.

r2g.pipeline.graph_version() hashes these ids (not the code): a changed rule is a new id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from r2g.rules.common import cause_rule, speaker_rule, time_rule
from r2g.rules.coref import name_variants, pronoun_ref
from r2g.rules.en import entity_en_rule, fact_en_rule, is_memory_fact
from r2g.rules.episode import episode_rule, importance, temporal_next_rule, topic_blocks
from r2g.rules.ids import (
    CAUSE,
    CONCEPT,
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
from r2g.rules.zh import entity_zh_rule, fact_zh_rule


@dataclass(frozen=True)
class RuleSpec:
    id: str
    description: str
    fns: tuple[Callable, ...]  # the functions implementing it (wiring rules live in r2g.extract)


RULES: dict[str, RuleSpec] = {
    r.id: r
    for r in [
        RuleSpec(EPISODE, "one Episode per turn: title, extractive summary, keywords", (episode_rule,)),
        RuleSpec(ENTITY_EN, "English NER entities", (entity_en_rule,)),
        RuleSpec(ENTITY_ZH, "Chinese POS/rule entities", (entity_zh_rule,)),
        RuleSpec(
            ENTITY_SPEAKER,
            "the speaker of every message is a PERSON, unless a chat role label (assistant, user)",
            (speaker_rule,),
        ),
        RuleSpec(
            FACT_EN,
            "English predicate clauses from the dependency parse; no bare light verb or filler (nothing but the doer)",
            (fact_en_rule, is_memory_fact),
        ),
        RuleSpec(
            FACT_ZH,
            "Chinese predicate clauses from jieba POS; glued pronoun/time + modal read as parts, no bare light verb",
            (fact_zh_rule,),
        ),
        RuleSpec(
            LOCATION,
            "at/in/on/to + place, 在/于 + noun (+方位词), motion verb + place → LOCATION",
            (fact_en_rule, fact_zh_rule),
        ),
        RuleSpec(TIME, "time expressions resolved against the message ts → TIME", (time_rule,)),
        RuleSpec(CAUSE, "because/so/因为/所以/导致 → CAUSES / CAUSED_BY", (cause_rule,)),
        RuleSpec(PREFERENCE, "preference and instruction language → Preference", (preference_rule,)),
        RuleSpec(TEMPORAL_NEXT, "Episodes of one conversation chained by seq", (temporal_next_rule,)),
        RuleSpec(MENTIONS, "Episode/Fact/Preference → Entity for every mention", ()),
        RuleSpec(DERIVED_FROM, "Fact/Preference/Task → Episode, and every node → its RawChunk", ()),
        RuleSpec(
            COREF,
            "name variants (Mel/Melanie, 明明/小明) and pronouns (you/he/she/他/她) within a conversation",
            (name_variants, pronoun_ref),
        ),
        RuleSpec(
            ROLES_EXTRA,
            "BENEFICIARY (for/为/替), CAUSE (because of/由于), INSTRUMENT (with/by), RECIPIENT (给)",
            (fact_en_rule, fact_zh_rule),
        ),
        RuleSpec(TASK, "plans and to-dos: need to/have to/plan to, 要/得/打算, reminders → Task", (task_rule,)),
        RuleSpec(CONCEPT, "topic dictionary hits → Concept, ABOUT from the turn and the units holding the hit", ()),
        RuleSpec(
            IMPORTANCE, "importance in [0,1]: preferences, life events, names/birthdays over small talk", (importance,)
        ),
        RuleSpec(TOPIC_BLOCK, "a long text is split into topic blocks, one Episode each", (topic_blocks,)),
    ]
}
