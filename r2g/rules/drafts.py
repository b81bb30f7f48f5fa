"""What the rules see and what they propose: a message's context and the drafts r2g.extract turns into rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from r2g.nlp import Annotation
from r2g.rules.ids import ENTITY_EN, TIME
from r2g.time_values import TimeValue


@dataclass
class MessageCtx:
    """One message as the rules see it: identity, anchor time, text and its annotation."""

    tenant: str
    conv_id: str
    msg_id: str
    speaker: str
    ts: datetime | None
    lang: str
    text: str
    ann: Annotation
    # coreference context (r2g.rule.coref.v1), filled by r2g.extract from the conversation so far:
    names: dict[str, str] = field(default_factory=dict)  # normalised name variant → canonical name
    you: str | None = None  # who "you"/你 addresses (the other participant of a two-party talk)
    third: str | None = None  # the one third person recently mentioned, for he/she/他/她


@dataclass(frozen=True)
class EntityRef:
    """A mention of an entity: subtype, display name, char span in the text (-1 when not in the text)."""

    subtype: str  # PERSON | LOC | ORG | OBJECT | TIME | MISC
    name: str  # display form
    start: int = -1
    end: int = -1
    provenance: str = ENTITY_EN
    time: TimeValue | None = None
    alias: str | None = None  # the surface form when coreference mapped it to another name
    # the dedup key part: lower-cased, whitespace-collapsed name (computed once: every rule asks for it)
    norm: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "norm", " ".join(self.name.lower().split()))


@dataclass
class TimeRef:
    """A time expression in the text: char span, token span, resolved value (None if unresolvable)."""

    start: int
    end: int
    tok_start: int
    tok_end: int
    text: str
    value: TimeValue | None

    def entity(self) -> EntityRef | None:
        if self.value is None:
            return None
        return EntityRef("TIME", self.value.iso, self.start, self.end, TIME, self.value)


@dataclass
class Role:
    type: str  # AGENT | PATIENT | LOCATION | TIME | RECIPIENT | MANNER | INSTRUMENT
    target: EntityRef
    provenance: str


@dataclass
class FactDraft:
    """One predicate clause: normalised predicate, polarity, modality, roles, time and its text span."""

    index: int  # clause index within the message (part of the Fact id)
    predicate_norm: str
    subtype: str  # event | state
    negation: bool
    modality: str | None
    start: int
    end: int
    title: str
    keywords: list[str]
    provenance: str
    roles: list[Role] = field(default_factory=list)
    mentions: list[EntityRef] = field(default_factory=list)
    time: TimeValue | None = None
    time_text: str | None = None
    # causal marker found on this clause: ("because", effect_index | None) makes this the cause;
    # ("so", None) makes this the effect of the clause before it
    cause_marker: tuple[str, int | None] | None = None
    # (English) the predicate has no object, complement or prepositional phrase in the parse at all: "Where did
    # you go?", "The bin is done" — unlike "I've had them for years", whose object only resolved to no entity
    bare: bool = False


@dataclass
class PreferenceDraft:
    index: int
    subtype: str  # like | dislike | prefer | instruction
    start: int
    end: int
    text: str
    keywords: list[str]
    mentions: list[EntityRef]


@dataclass
class EpisodeDraft:
    title: str
    text: str
    keywords: list[str]
    importance: float


@dataclass
class TaskDraft:
    """A plan or to-do: from a Fact the speaker must/plans/will do, or a reminder sentence."""

    index: int
    subtype: str  # todo | plan | reminder
    start: int
    end: int
    text: str
    keywords: list[str]
    fact: int | None  # position in the message's facts it was made from
    time: TimeValue | None = None
    time_text: str | None = None
