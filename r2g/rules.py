"""R2G rules (SPEC §5, seed 004 R2G-2…R2G-6): small pure functions over one message's Annotation.

Each rule has a versioned id that goes into the `provenance` column of every row
it creates; `RULES` maps ids to functions. A behaviour change is a new id
(`.v2`), never a silent edit. Rules only *propose* drafts (entities, facts,
preferences, links); `r2g.extract` turns drafts into node and edge rows.

All rules are plain loops over the Annotation's parallel lists (no spaCy objects),
so cached annotations run through them without the models.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, Iterator

from spacy.lang.en.stop_words import STOP_WORDS as EN_STOP_WORDS

from r2g.nlp import Annotation, zh_lexicon
from r2g.time_norm import TimeValue, find_times, resolve
from r2g.tokens import ZH_STOPWORDS

EPISODE = "r2g.rule.episode.v1"
ENTITY_EN = "r2g.rule.entity.en.v1"
ENTITY_ZH = "r2g.rule.entity.zh.v1"
ENTITY_SPEAKER = "r2g.rule.entity.speaker.v1"
FACT_EN = "r2g.rule.fact.en.v1"
FACT_ZH = "r2g.rule.fact.zh.v1"
LOCATION = "r2g.rule.location.v2"   # v2: English needs place evidence
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
    EPISODE: 1.0, ENTITY_EN: 0.85, ENTITY_ZH: 0.7, ENTITY_SPEAKER: 1.0, FACT_EN: 0.7, FACT_ZH: 0.6,
    LOCATION: 0.7, TIME: 0.8, CAUSE: 0.6, PREFERENCE: 0.7, TEMPORAL_NEXT: 1.0, MENTIONS: 0.9, DERIVED_FROM: 1.0,
    COREF: 0.6, ROLES_EXTRA: 0.6, TASK: 0.7, CONCEPT: 0.8, TOPIC_BLOCK: 1.0,
}

SUMMARY_MAX_CHARS = 200
_ONE_DAY = timedelta(days=1)
TITLE_MAX_CHARS = 60


# ---------------------------------------------------------------- drafts

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
    names: dict[str, str] = field(default_factory=dict)   # normalised name variant → canonical name
    you: str | None = None      # who "you"/你 addresses (the other participant of a two-party talk)
    third: str | None = None    # the one third person recently mentioned, for he/she/他/她


@dataclass(frozen=True)
class EntityRef:
    """A mention of an entity: subtype, display name, char span in the text (-1 when not in the text)."""

    subtype: str          # PERSON | LOC | ORG | OBJECT | TIME | MISC
    name: str             # display form
    start: int = -1
    end: int = -1
    provenance: str = ENTITY_EN
    time: TimeValue | None = None
    alias: str | None = None   # the surface form when coreference mapped it to another name
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
    type: str             # AGENT | PATIENT | LOCATION | TIME | RECIPIENT | MANNER | INSTRUMENT
    target: EntityRef
    provenance: str


@dataclass
class FactDraft:
    """One predicate clause: normalised predicate, polarity, modality, roles, time and its text span."""

    index: int                      # clause index within the message (part of the Fact id)
    predicate_norm: str
    subtype: str                    # event | state
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


@dataclass
class PreferenceDraft:
    index: int
    subtype: str                    # like | dislike | prefer | instruction
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


# ---------------------------------------------------------------- shared helpers

_PUNCT_POS = frozenset({"PUNCT", "SPACE", "SYM", "X"})
_EN_FUNCTION_POS = frozenset({"DET", "ADP", "AUX", "CCONJ", "SCONJ", "PART", "PRON", "NUM", "INTJ"})
_WORDISH = re.compile(r"\w", re.UNICODE)


def _dedup(xs) -> list[str]:
    return list(dict.fromkeys(x for x in xs if x))


def _content_tokens(ann: Annotation) -> list[str | None]:
    """Per token: its content word (see content_words) or None — computed once per annotation."""
    cached = ann.__dict__.get("_content_tokens")
    if cached is not None:
        return cached
    out: list[str | None] = []
    if ann.lang == "zh":
        for w, pos in zip(ann.tokens, ann.pos):
            w = w.strip().lower()
            # embedded latin words (jieba tag eng → X) carry content too
            ok = w and pos != "PUNCT" and _WORDISH.search(w) and w not in ZH_STOPWORDS
            out.append(w if ok else None)
    else:
        for tok, lemma, pos in zip(ann.tokens, ann.lemma, ann.pos):
            if (pos in _PUNCT_POS and pos != "X") or pos in _EN_FUNCTION_POS:
                out.append(None)
                continue
            lem = lemma.lower().strip()
            ok = lem and _WORDISH.search(lem) and lem not in EN_STOP_WORDS and tok.lower() not in EN_STOP_WORDS
            out.append(lem if ok else None)
    ann.__dict__["_content_tokens"] = out
    return out


def content_words(ann: Annotation, lo: int = 0, hi: int | None = None) -> list[str]:
    """Content words of tokens [lo, hi): English lower-cased lemmas minus stop-words, Chinese words minus stop-words."""
    return _dedup(_content_tokens(ann)[lo:hi])


def _tok_end(ann: Annotation, i: int) -> int:
    return ann.idx[i] + len(ann.tokens[i])


def clip(s: str, n: int) -> str:
    """Whitespace-collapsed `s`, cut to at most n chars with an ellipsis."""
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


# ---------------------------------------------------------------- r2g.rule.time.v1

def time_rule(ctx: MessageCtx) -> list[TimeRef]:
    """Time expressions of the message, resolved against its ts (R2G-4: relative → ISO + granularity).

    English: NER DATE/TIME entities plus rule-found expressions NER missed;
    Chinese: TIME entities (jieba `t` words and rule spans). Unresolvable ones keep value None.
    """
    ann = ctx.ann
    refs: list[TimeRef] = []
    covered = [False] * len(ann.tokens)
    for s, e, label in ann.ents:
        if label in ("DATE", "TIME"):
            cs, ce = ann.idx[s], _tok_end(ann, e - 1)
            surface = ctx.text[cs:ce]
            refs.append(TimeRef(cs, ce, s, e, surface, resolve(surface, ctx.ts, ctx.lang)))
            for k in range(s, e):
                covered[k] = True
    if ctx.lang != "zh":
        for tm in find_times(ctx.text, ctx.lang, ctx.ts):
            toks = [i for i in range(len(ann.tokens)) if ann.idx[i] < tm.end and _tok_end(ann, i) > tm.start]
            if not toks or any(covered[i] for i in toks):
                continue
            refs.append(TimeRef(tm.start, tm.end, toks[0], toks[-1] + 1, tm.text, tm.value))
    refs.sort(key=lambda r: r.start)
    return refs


# ---------------------------------------------------------------- entities

_EN_LABEL = {"PERSON": "PERSON", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "FAC": "LOC",
             "NORP": "MISC", "PRODUCT": "MISC", "EVENT": "MISC", "WORK_OF_ART": "MISC", "LANGUAGE": "MISC",
             "LAW": "MISC"}
_ZH_LABEL = {"PERSON": "PERSON", "LOC": "LOC", "ORG": "ORG", "MISC": "MISC"}
_EN_LEADING = re.compile(r"^(?:the|a|an|my|our|your|his|her|their)\s+", re.IGNORECASE)


def _labelled_ents(ctx: MessageCtx, labels: dict[str, str]) -> Iterator[tuple[int, int, str, int, int]]:
    """(start_tok, end_tok, subtype, char_start, char_end) of the NER spans whose label maps to a subtype."""
    ann = ctx.ann
    for s, e, label in ann.ents:
        sub = labels.get(label)
        if sub is not None:
            yield s, e, sub, ann.idx[s], _tok_end(ann, e - 1)


def entity_en_rule(ctx: MessageCtx) -> list[tuple[int, int, EntityRef]]:
    """NER entities of an English message (PERSON, ORG, GPE/LOC/FAC→LOC, NORP/PRODUCT/EVENT/WORK_OF_ART→MISC).

    Returns (start_tok, end_tok, ref); DATE/TIME go to the time rule, numbers are ignored.
    A name standing in apposition to a person noun ("my neighbour Xiaoming") is a
    PERSON whatever NER said; a name variant maps to its canonical name (coref).
    """
    ann = ctx.ann
    out = []
    for s, e, sub, cs, ce in _labelled_ents(ctx, _EN_LABEL):
        name = _EN_LEADING.sub("", ctx.text[cs:ce]).strip()
        name = re.sub(r"'s$", "", name)
        if not (name and _WORDISH.search(name)):
            continue
        head = next((k for k in range(s, e) if not s <= ann.head[k] < e or ann.head[k] == k), s)
        if sub != "PERSON" and ann.dep[head] == "appos" and ann.lemma[ann.head[head]].lower() in PERSON_NOUNS_EN:
            sub = "PERSON"
        out.append((s, e, _canonical(ctx, EntityRef(sub, " ".join(name.split()), cs, ce, ENTITY_EN))))
    return out


def entity_zh_rule(ctx: MessageCtx) -> list[tuple[int, int, EntityRef]]:
    """Entities of a Chinese message from the POS entity component (nr→PERSON, ns→LOC, nt→ORG, nz→MISC).

    Computed once per message (the extractor and the fact rule both ask); callers only read it."""
    cached = ctx.__dict__.get("_entities_zh")
    if cached is None:
        cached = ctx.__dict__["_entities_zh"] = [
            (s, e, _canonical(ctx, EntityRef(sub, ctx.text[cs:ce], cs, ce, ENTITY_ZH)))
            for s, e, sub, cs, ce in _labelled_ents(ctx, _ZH_LABEL)]
    return cached


def speaker_rule(ctx: MessageCtx) -> EntityRef | None:
    """The message's speaker as a PERSON entity (not located in the text); one per message (rules ask often)."""
    if "_speaker" not in ctx.__dict__:
        name = " ".join((ctx.speaker or "").split())
        ctx.__dict__["_speaker"] = EntityRef("PERSON", name, -1, -1, ENTITY_SPEAKER) if name else None
    return ctx.__dict__["_speaker"]


_BARE_WEEKDAY = re.compile(r"^(?:on\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)day$|^(?:周|星期|礼拜)[一二三四五六日天]$",
                           re.I)
FUTURE_MODALITIES = frozenset({"will", "plan", "want", "must", "should"})


def _forward(tr: TimeRef, ts: datetime | None) -> TimeRef:
    """A bare weekday in a clause about the future means the coming one: "I'll call on Friday" said on a
    Monday is four days ahead, not three days back (time_norm resolves bare weekdays to the past)."""
    v = tr.value
    if v is None or ts is None or v.granularity != "day" or not _BARE_WEEKDAY.match(tr.text.strip()):
        return tr
    if v.start >= ts.replace(hour=0, minute=0, second=0, microsecond=0):
        return tr
    week = timedelta(days=7)
    return TimeRef(tr.start, tr.end, tr.tok_start, tr.tok_end, tr.text,
                   TimeValue(v.start + week, v.end + week, v.granularity, v.text, v.period))


def _time_roles(times: list[TimeRef], roles: list[Role], future: bool = False,
                ts: datetime | None = None) -> tuple[TimeValue | None, str | None]:
    """Append a TIME role per resolved time of a clause; return the fact's (time value, time text).

    The first resolved expression dates the fact; an unresolved one still keeps its text.
    `future`: the clause is about what will/should happen (bare weekdays move forward).
    """
    ftime, ftext = None, None
    for tr in times:
        if future:
            tr = _forward(tr, ts)
        ent = tr.entity()
        if ent is not None:
            roles.append(Role("TIME", ent, TIME))
            if ftime is None:
                ftime, ftext = tr.value, tr.text
        elif ftext is None:
            ftext = tr.text
    return ftime, ftext


# ---------------------------------------------------------------- r2g.rule.coref.v1

# Nouns that denote a person: "for my mom" is a BENEFICIARY, "my neighbour Xiaoming" a PERSON.
PERSON_NOUNS_EN = frozenset("""
friend neighbour neighbor mom mum mother dad father parent sister brother sibling son daughter kid child
wife husband partner boyfriend girlfriend fiance fiancee boss colleague coworker teacher student grandma
grandmother grandpa grandfather granny aunt uncle cousin nephew niece roommate classmate doctor therapist
mentor counselor coach baby family people guy girl boy man woman buddy pal
""".split())
PERSON_NOUNS_ZH = frozenset("""
妈妈 妈 母亲 爸爸 爸 父亲 爸妈 父母 奶奶 爷爷 外婆 外公 姥姥 姥爷 姐姐 哥哥 弟弟 妹妹 朋友 好友 同事 老师 老板 邻居
女儿 儿子 孩子 老婆 老公 妻子 丈夫 男朋友 女朋友 室友 同学 医生 叔叔 阿姨 舅舅 姑姑 表哥 表姐 宝宝 家人 领导 师傅
""".split())
_EN_THIRD_PRON = frozenset({"he", "she", "him", "her"})
_EN_YOU = frozenset({"you"})
_ZH_THIRD_PRON = frozenset({"他", "她"})
_ZH_YOU = frozenset({"你", "您"})
_HAN = re.compile(r"^[\u4e00-\u9fff]{2,4}$")


def _norm_name(name: str) -> str:
    return " ".join(name.lower().split())


def _zh_short_forms(name: str) -> set[str]:
    """What a Chinese personal name is called for short: 王小明 → 小明; 王明/小明 → 明明, 小明, 阿明."""
    if not _HAN.match(name):
        return set()
    forms = set()
    if len(name) == 3 and name[0] not in "小阿老":
        forms.add(name[1:])                       # 王小明 → 小明
    last = name[-1]
    forms |= {last * 2, "小" + last, "阿" + last}
    forms.discard(name)
    return forms


def _is_variant(short: str, long: str) -> bool:
    """`short` is a short form of `long`: Mel/Melanie, Caroline/Caroline Smith, 明明/小明, 小明/王小明."""
    if _HAN.match(short) or _HAN.match(long):
        return short in _zh_short_forms(long)
    s, first = _norm_name(short), _norm_name(long).split(" ")[0]
    return " " not in s and len(s) >= 3 and s != _norm_name(long) and first.startswith(s)


def name_variants(names: list[str], speakers: list[str]) -> dict[str, str]:
    """{normalised variant: canonical name} for the person names of one conversation.

    Evidence needed: both forms occur in the conversation (as speakers or PERSON
    mentions) and the short form fits exactly one name — "Mel" with both Melanie
    and Melissa present stays itself. Two speakers are never merged. The canonical
    form is the speaker's name if one of the pair speaks, else the longer name.
    """
    uniq = list(dict.fromkeys(n for n in list(speakers) + list(names) if n and n.strip()))
    spk = {_norm_name(s) for s in speakers if s}
    # index the candidate pairs instead of comparing every two names (a long chat names hundreds of people)
    by_prefix: dict[str, list[str]] = {}
    by_form: dict[str, list[str]] = {}
    for b in uniq:
        if _HAN.match(b):
            for f in _zh_short_forms(b):
                by_form.setdefault(f, []).append(b)
        else:
            first = _norm_name(b).split(" ")[0]
            by_prefix.setdefault(first[:3], []).append(b)

    def related(a: str) -> list[str]:
        if _HAN.match(a):
            cands = by_form.get(a, []) + [b for b in _zh_short_forms(a) if b in present]
        else:
            cands = [b for b in by_prefix.get(_norm_name(a)[:3], []) if b != a] if " " not in _norm_name(a) \
                else []
            first = _norm_name(a).split(" ")[0]
            cands += [b for b in by_prefix.get(first[:3], []) if b != a and _is_variant(b, a)]
        return list(dict.fromkeys(b for b in cands if b != a and (_is_variant(a, b) or _is_variant(b, a))))

    present = set(uniq)
    out: dict[str, str] = {}
    for a in uniq:
        fits = [b for b in related(a) if not (_norm_name(a) in spk and _norm_name(b) in spk)]
        if len(fits) != 1:
            continue
        b = fits[0]
        # the other side must not be ambiguous either (明明 fits 小明 only; 小明 must fit 明明 only)
        if len(related(b)) != 1:
            continue
        if _rank(b, spk, uniq) > _rank(a, spk, uniq):
            out[_norm_name(a)] = b
    return out


def _rank(name: str, speakers: set[str], order: list[str]) -> tuple:
    """Which of two forms is canonical: a speaker's, then the longer, then not a doubled nickname (明明), then
    the one named first."""
    doubled = len(name) == 2 and name[0] == name[1]
    return (_norm_name(name) in speakers, len(name), not doubled, -order.index(name))


def _canonical(ctx: MessageCtx, ref: EntityRef) -> EntityRef:
    """The ref under its conversation's canonical name (the surface kept as alias)."""
    if ref.subtype != "PERSON":
        return ref
    canon = ctx.names.get(ref.norm)
    if canon is None or _norm_name(canon) == ref.norm:
        return ref
    return EntityRef(ref.subtype, canon, ref.start, ref.end, COREF, ref.time, alias=ref.name)


def pronoun_ref(ctx: MessageCtx, word: str, start: int, end: int) -> EntityRef | None:
    """The person a pronoun stands for: I/we/我 → speaker; you/你 → the addressee; he/she/他/她 → the
    one third person recently mentioned. None when the context does not say (r2g.rule.coref.v1)."""
    w = word.lower()
    if w in _FIRST_PERSON or w in _ZH_SELF:
        return speaker_rule(ctx)
    name = ctx.you if (w in _EN_YOU or w in _ZH_YOU) else ctx.third if (w in _EN_THIRD_PRON or w in _ZH_THIRD_PRON) \
        else None
    return EntityRef("PERSON", name, start, end, COREF) if name else None


# ---------------------------------------------------------------- r2g.rule.fact.en.v1

_FIRST_PERSON = frozenset({"i", "me", "we", "us", "myself", "ourselves"})
_EN_PRED_DEPS = frozenset({"ROOT", "conj", "advcl", "ccomp", "parataxis", "relcl"})
_EN_MODAL_AUX = {"can": "can", "could": "can", "ca": "can", "should": "should", "ought": "should", "must": "must",
                 "will": "will", "wo": "will", "'ll": "will", "shall": "will", "would": "will", "'d": "will",
                 "might": "maybe", "may": "maybe"}
_EN_MODAL_ADV = {"maybe": "maybe", "perhaps": "maybe", "probably": "maybe", "possibly": "maybe"}
# verb + infinitive: the verb becomes modality and the infinitive the predicate (want to play soccer → play_soccer)
_EN_MODAL_VERBS = {"want": "want", "wish": "want", "hope": "want", "plan": "plan", "intend": "plan",
                   "decide": "plan", "need": "must", "have": "must"}
_EN_NEG = frozenset({"not", "n't", "never", "no"})
_EN_LOC_PREPS = frozenset({"at", "in", "on", "to", "into", "inside", "near"})
# Place evidence for LOCATION (r2g.rule.location.v2): "in life", "on the list", "at the moment" are not places.
_EN_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
_EN_ORG_PREPS = frozenset({"at", "in", "to"})                 # "works at Google"; "on Door Dash" is not a place
_EN_DESTINATION_PREPS = frozenset({"to", "into", "at", "in"})  # after a motion verb: "went to the support group"
_EN_MOTION_VERBS = frozenset("""
go come travel move drive walk fly head return ride arrive relocate commute hike sail cycle bike
""".split())
# "at the concert" says where someone was; "in the competition" does not
_EN_AT_EVENTS = frozenset("""
party concert wedding conference festival workshop class meeting game show convention fair parade event
competition tournament match ceremony funeral reunion rally exhibition exhibit gig recital
""".split())
_EN_NOT_DESTINATIONS = frozenset("life mind conclusion point end terms trouble touch contact rescue top".split())
PLACE_NOUNS_EN = frozenset("""
park beach library gym office mall museum lake cafe café restaurant bar pub diner airport hospital clinic
campus school college university classroom dorm church temple mosque synagogue shelter studio kitchen home
house apartment flat room bedroom bathroom garden backyard yard porch balcony garage basement playground store
shop market supermarket bakery theater theatre cinema stadium arena court trail mountain hill forest woods
river sea ocean coast shore island city town village country countryside neighborhood neighbourhood street
road downtown center centre hall station hotel motel hostel farm zoo aquarium pool club venue camp campsite
workplace lab laboratory factory warehouse salon spa bank embassy prison jail gallery bookstore bookshop plaza
harbor harbour port bridge valley desert canyon cabin cottage resort lodge building tower castle palace
""".split())
_EN_QUANTITY_HEADS = frozenset({"cup", "glass", "bottle", "lot", "bit", "kind", "piece", "couple", "bunch", "bowl",
                                "slice", "type", "sort", "pair", "box", "bag", "plate"})
_EN_NP_MODS = frozenset({"compound", "amod", "nmod", "nummod"})
_EN_CAUSE_MARKS = frozenset({"because", "cause", "'cause", "cuz", "coz"})
_EN_EFFECT_MARKS = frozenset({"so", "therefore", "thus", "hence", "consequently"})


def _children(ann: Annotation) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in ann.tokens]
    for i, h in enumerate(ann.head):
        if h != i:
            kids[h].append(i)
    return kids


class _EnNps:
    """Entity lookup for English role targets: NER spans first, else a normalised noun phrase."""

    def __init__(self, ctx: MessageCtx, ner: list[tuple[int, int, EntityRef]], kids: list[list[int]]):
        self.ctx = ctx
        self.kids = kids
        self.by_tok: dict[int, EntityRef] = {}
        self.label_by_tok: dict[int, str] = {}
        for s, e, ref in ner:
            for k in range(s, e):
                self.by_tok[k] = ref
        for s, e, label in ctx.ann.ents:
            for k in range(s, e):
                self.label_by_tok[k] = label

    def is_time(self, i: int) -> bool:
        return self.label_by_tok.get(i) in ("DATE", "TIME")

    def speaker(self) -> EntityRef | None:
        return speaker_rule(self.ctx)

    def target(self, i: int, subtype: str = "OBJECT") -> EntityRef | None:
        """Entity for the phrase headed by token i: NER entity, the speaker for I/we, a noun phrase, or None."""
        ann = self.ctx.ann
        if i in self.by_tok:
            return self.by_tok[i]
        if ann.pos[i] == "PRON":
            if ann.dep[i] == "poss":
                return None
            return pronoun_ref(self.ctx, ann.tokens[i], ann.idx[i], _tok_end(ann, i))
        if ann.pos[i] not in ("NOUN", "PROPN"):
            return None
        # "my neighbour Xiaoming": the name in apposition is who the phrase means
        appos = next((c for c in self.kids[i] if ann.dep[c] == "appos" and ann.pos[c] == "PROPN"), None)
        if appos is not None:
            return self.target(appos, "PERSON" if ann.lemma[i].lower() in PERSON_NOUNS_EN else subtype)
        if ann.lemma[i].lower() in _EN_QUANTITY_HEADS:
            for c in self.kids[i]:
                if ann.dep[c] == "prep" and ann.tokens[c].lower() == "of":
                    for g in self.kids[c]:
                        if ann.dep[g] == "pobj":
                            return self.target(g, subtype)
        # extend leftwards over contiguous modifiers that attach inside the phrase: "LGBTQ support group"
        lo = i
        while lo - 1 >= 0 and ann.dep[lo - 1] in _EN_NP_MODS and lo - 1 < ann.head[lo - 1] <= i:
            if ann.pos[i] == "PROPN" and ann.pos[lo - 1] != "PROPN":
                break  # "my friend Anna" names Anna, not "friend Anna"
            lo -= 1
        words = []
        for k in range(lo, i + 1):
            if ann.pos[k] in _PUNCT_POS or ann.dep[k] in ("det", "poss", "case"):
                continue
            if k == i:
                w = ann.tokens[k] if ann.pos[k] == "PROPN" else ann.lemma[k].lower()
            else:
                w = ann.tokens[k] if ann.pos[k] == "PROPN" or ann.tokens[k].isupper() else ann.tokens[k].lower()
            words.append(w)
        if not words:
            return None
        if lo == i and (ann.pos[i] == "PROPN" and ann.dep[i] in ("nsubj", "nsubjpass")
                        or ann.lemma[i].lower() in PERSON_NOUNS_EN):
            subtype = "PERSON"
        return _canonical(self.ctx, EntityRef(subtype, " ".join(words), ann.idx[lo], _tok_end(ann, i), FACT_EN))

    def is_person(self, i: int) -> bool:
        ann = self.ctx.ann
        return (self.label_by_tok.get(i) == "PERSON" or ann.pos[i] == "PRON"
                or ann.lemma[i].lower() in PERSON_NOUNS_EN)


_EN_CAUSE_PREPS = frozenset({"because", "due", "owing", "thanks"})
_EN_VEHICLES = frozenset({"bus", "car", "train", "plane", "bike", "bicycle", "taxi", "boat", "ship", "subway", "metro",
                          "tram", "foot", "air", "sea", "email", "mail", "phone", "text"})


def _en_prep_role(prep: str, person: bool, label: str | None, ann: Annotation, g: int,
                  kids: list[list[int]], motion: bool = False) -> str | None:
    """The role a prepositional object plays (r2g.rule.location.v2 / r2g.rule.roles_extra.v1).

    to + person → RECIPIENT; for + person → BENEFICIARY; because of / due to → CAUSE;
    with + thing → INSTRUMENT, with + person → WITH (a companion, mentioned);
    by + bare vehicle/medium → INSTRUMENT; in + language/nationality → MANNER;
    at/in/on/to/into/near + a place → LOCATION, where a place is a GPE/LOC/FAC entity, an ORG after
    at/in/to, a proper noun after anything but "on", a noun of PLACE_NOUNS_EN, or, after a motion
    verb (`motion`: went to, moved into), any non-person noun: the destination.
    """
    if prep in _EN_CAUSE_PREPS:
        return "CAUSE"
    if prep == "to" and person:
        return "RECIPIENT"
    if prep == "for" and person:
        return "BENEFICIARY"
    if prep == "with":
        return "WITH" if person else "INSTRUMENT"
    if prep == "by" and ann.lemma[g].lower() in _EN_VEHICLES and not any(ann.dep[c] == "det" for c in kids[g]):
        return "INSTRUMENT"
    if prep in _EN_LOC_PREPS and label in ("NORP", "LANGUAGE"):
        return "MANNER"
    if prep in _EN_LOC_PREPS and not person and _en_is_place(prep, label, ann, g, motion):
        return "LOCATION"
    return None


def _en_is_place(prep: str, label: str | None, ann: Annotation, g: int, motion: bool) -> bool:
    if label in _EN_PLACE_LABELS or (label == "ORG" and prep in _EN_ORG_PREPS):
        return True
    if ann.pos[g] == "PROPN":
        return prep != "on" and label is None
    lemma = ann.lemma[g].lower()
    if lemma in PLACE_NOUNS_EN or (prep == "at" and lemma in _EN_AT_EVENTS):
        return True
    return motion and prep in _EN_DESTINATION_PREPS and lemma not in _EN_NOT_DESTINATIONS


def fact_en_rule(ctx: MessageCtx, times: list[TimeRef],
                 ner: list[tuple[int, int, EntityRef]]) -> list[FactDraft]:
    """Event-centred facts from the English dependency parse: one per predicate clause.

    Predicates are VERBs (and copular AUX with an adjective/attribute) that head a
    clause (ROOT/conj/advcl/ccomp/…; xcomp only with its own subject). Subject →
    AGENT (I/we → speaker, you/he/she/it dropped), dobj → PATIENT, at/in/on/to +
    place → LOCATION (r2g.rule.location.v2), DATE/TIME → TIME (r2g.rule.time.v1).
    """
    ann = ctx.ann
    n = len(ann.tokens)
    kids = _children(ann)
    nps = _EnNps(ctx, ner, kids)

    def has_subj(i: int) -> bool:
        return any(ann.dep[c] in ("nsubj", "nsubjpass", "expl") for c in kids[i])

    preds: list[int] = []
    for i in range(n):
        if nps.is_time(i):
            continue
        dep, pos = ann.dep[i], ann.pos[i]
        if pos == "VERB" and (dep in _EN_PRED_DEPS or (dep == "xcomp" and has_subj(i))):
            preds.append(i)
        elif pos == "AUX" and dep in _EN_PRED_DEPS and any(ann.dep[c] in ("acomp", "attr") for c in kids[i]):
            preds.append(i)
        elif pos == "AUX" and dep in _EN_PRED_DEPS and has_subj(i) and any(ann.dep[c] == "prep" for c in kids[i]) \
                or (pos == "AUX" and dep in _EN_PRED_DEPS and has_subj(i)
                    and any(nps.is_time(c) for c in kids[i])):
            preds.append(i)  # "my birthday is on May 7", "I was at the gym": be + where/when
        elif pos == "ADJ" and dep == "ROOT":  # fragments like "So happy today!"
            preds.append(i)
    pred_set = set(preds)

    # owner[t] = the predicate whose clause token t belongs to (nearest predicate ancestor)
    owner = [-1] * n
    for t in range(n):
        k, steps = t, 0
        while k not in pred_set and ann.head[k] != k and steps < n:
            k = ann.head[k]
            steps += 1
        owner[t] = k if k in pred_set else (preds[0] if preds else -1)

    subj_of: dict[int, int | None] = {}

    def subject(p: int) -> int | None:
        if p in subj_of:
            return subj_of[p]
        subj_of[p] = None
        s = next((c for c in kids[p] if ann.dep[c] in ("nsubj", "nsubjpass")), None)
        if s is None and ann.dep[p] in ("conj", "xcomp", "advcl") and ann.head[p] in pred_set:
            s = subject(ann.head[p])  # "I went home and slept": slept shares went's subject
        subj_of[p] = s
        return s

    time_owner: dict[int, list[TimeRef]] = {}
    for tr in times:
        root = next((k for k in range(tr.tok_start, tr.tok_end)
                     if not (tr.tok_start <= ann.head[k] < tr.tok_end) or ann.head[k] == k), tr.tok_start)
        time_owner.setdefault(owner[root], []).append(tr)
    ner_owner: dict[int, list[EntityRef]] = {}
    for s, e, ref in ner:
        ner_owner.setdefault(owner[s], []).append(ref)

    facts: list[FactDraft] = []
    index_of: dict[int, int] = {}
    for p in preds:
        main = p
        parts = [ann.lemma[p].lower()]
        modality: str | None = None
        negation = False
        subtype = "event"
        roles: list[Role] = []
        scope = [p]
        xc = next((c for c in kids[p] if ann.dep[c] == "xcomp" and c not in pred_set), None)
        if ann.pos[p] == "AUX" or (ann.pos[p] == "ADJ" and ann.dep[p] == "ROOT"):
            acomp = next((c for c in kids[p] if ann.dep[c] == "acomp"), None)
            if ann.pos[p] == "ADJ":
                parts, subtype = [ann.lemma[p].lower()], "state"
            elif acomp is not None:
                parts, subtype = [ann.lemma[acomp].lower()], "state"
                scope.append(acomp)
        if xc is not None and ann.pos[xc] in ("VERB", "AUX"):
            lem = ann.lemma[p].lower()
            if ann.tag[xc] == "VB" and (lem in _EN_MODAL_VERBS or (lem == "go" and ann.tag[p] == "VBG")):
                modality = "will" if lem == "go" else _EN_MODAL_VERBS[lem]
                main, parts = xc, [ann.lemma[xc].lower()]
            else:
                parts.append(ann.lemma[xc].lower())
            scope.append(xc)
        for q in scope:
            for c in kids[q]:
                low = ann.tokens[c].lower()
                if ann.dep[c] == "neg" or (low in _EN_NEG and ann.dep[c] in ("advmod", "neg")):
                    negation = True
                elif ann.dep[c] in ("aux", "auxpass") and (low in _EN_MODAL_AUX or ann.lemma[c].lower() in _EN_MODAL_AUX):
                    modality = modality or _EN_MODAL_AUX.get(low) or _EN_MODAL_AUX[ann.lemma[c].lower()]
                elif ann.dep[c] == "advmod" and low in _EN_MODAL_ADV:
                    modality = modality or _EN_MODAL_ADV[low]
        verb_words = list(parts)
        s = subject(p)
        if s is not None:
            agent = nps.target(s, "OBJECT")
            if agent is not None:
                roles.append(Role("AGENT", agent, FACT_EN))
        patient = None
        obj_heads = [c for q in (main, xc) if q is not None for c in kids[q] if ann.dep[c] in ("dobj", "attr", "oprd")]
        for o in obj_heads[:1]:
            if any(ann.tokens[c].lower() == "no" for c in kids[o]):
                negation = True
            patient = nps.target(o)
            if patient is not None:
                roles.append(Role("PATIENT", patient, FACT_EN))
                if len(parts) == 1:
                    # the object's head word: "a cup of coffee" → coffee, "Paris" → paris
                    if patient.start >= 0:  # not for the speaker standing in for "me"/"us"
                        parts.append(patient.name.split()[-1].lower())
        location = None
        companions: list[EntityRef] = []
        for q in dict.fromkeys(x for x in (main, xc, p, *obj_heads[:1]) if x is not None):
            for c in kids[q]:
                if ann.dep[c] != "prep":
                    continue
                prep = ann.tokens[c].lower()
                if q not in (main, xc, p) and prep not in ("for", "to"):
                    continue  # on the object only "a gift for my mom" / "a letter to Anna" name a participant
                objs = [g for g in kids[c] if ann.dep[g] == "pobj"]
                if prep in _EN_CAUSE_PREPS:  # "because of the rain", "due to work": object under a pcomp
                    objs += [x for g in kids[c] if ann.dep[g] == "pcomp" for x in kids[g] if ann.dep[x] == "pobj"]
                for g in objs:
                    if nps.is_time(g):
                        continue
                    label = nps.label_by_tok.get(g)
                    tgt = nps.target(g)
                    if tgt is None:
                        continue
                    role = _en_prep_role(prep, nps.is_person(g), label, ann, g, kids,
                                         ann.lemma[q].lower() in _EN_MOTION_VERBS)
                    if q not in (main, xc, p) and role not in ("BENEFICIARY", "RECIPIENT"):
                        continue
                    if role == "LOCATION":
                        if location is None:
                            location = tgt
                            roles.append(Role("LOCATION", tgt, LOCATION))
                    elif role == "WITH":
                        companions.append(tgt)
                    elif role is not None:
                        roles.append(Role(role, tgt, FACT_EN if role in ("RECIPIENT", "MANNER") else ROLES_EXTRA))
        tvals = [tr for tr in time_owner.get(p, []) + (time_owner.get(xc, []) if xc is not None else [])]
        ftime, ftext = _time_roles(tvals, roles, modality in FUTURE_MODALITIES, ctx.ts)
        owned = [t for t in range(n) if owner[t] == p]
        lo, hi = min(owned), max(owned)
        while lo <= hi and ann.pos[lo] in _PUNCT_POS and ann.pos[lo] != "X":
            lo += 1
        while hi >= lo and ann.pos[hi] in _PUNCT_POS and ann.pos[hi] != "X":
            hi -= 1
        if hi < lo:
            lo = hi = p
        start, end = ann.idx[lo], _tok_end(ann, hi)
        predicate_norm = "_".join(x.replace(" ", "_") for x in parts)
        agent_name = next((r.target.name for r in roles if r.type == "AGENT"), "")
        obj_name = patient.name if patient else (location.name if location else "")
        words = [agent_name, "not" if negation else "", modality or "", *verb_words, obj_name]
        mentions = _dedup_refs([r.target for r in roles] + companions + ner_owner.get(p, []))
        marker = None
        for c in kids[p]:
            low = ann.tokens[c].lower()
            if low in _EN_CAUSE_MARKS and ann.dep[c] in ("mark", "advmod", "prep") and ann.dep[p] == "advcl":
                marker = ("because", ann.head[p])
        prev_pred = preds[preds.index(p) - 1] if preds.index(p) > 0 else -1
        if marker is None and prev_pred >= 0 and any(
                ann.tokens[t].lower() in _EN_EFFECT_MARKS and ann.pos[t] in ("CCONJ", "ADV", "SCONJ")
                for t in range(prev_pred + 1, p)):
            marker = ("so", None)  # "It rained, so I stayed home" / "… . So I am tired.
        index_of[p] = len(facts)
        facts.append(FactDraft(
            index=len(facts), predicate_norm=predicate_norm, subtype=subtype, negation=negation,
            modality=modality, start=start, end=end, title=clip(" ".join(w for w in words if w), 120),
            keywords=_dedup(content_words(ann, lo, hi + 1) + parts), provenance=FACT_EN, roles=roles,
            mentions=mentions, time=ftime, time_text=ftext, cause_marker=marker))
    for f in facts:  # map "because" markers from token ids to fact indices
        if f.cause_marker and f.cause_marker[0] == "because":
            head = f.cause_marker[1]
            f.cause_marker = ("because", index_of.get(owner[head]) if head is not None else None)
    return facts


def _dedup_refs(refs: list[EntityRef]) -> list[EntityRef]:
    seen = set()
    out = []
    for r in refs:
        k = (r.subtype, r.norm)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


# ---------------------------------------------------------------- r2g.rule.fact.zh.v1

_ZH_CLAUSE_PUNCT = frozenset("，,；;。！？!?\n…~～")
_ZH_BOUNDARY_TOKEN = re.compile("[%s\\s]+" % re.escape("".join(sorted(_ZH_CLAUSE_PUNCT))))  # punctuation/space only
_ZH_CAUSE_CONJ = frozenset({"因为", "由于"})
_ZH_EFFECT_CONJ = frozenset({"所以", "因此", "于是", "因而", "导致", "从而"})
_ZH_NEG = frozenset({"不", "没", "没有", "别", "未", "甭", "不要", "不会", "不能", "不想"})
_ZH_MODAL = {"想": "want", "要": "will", "想要": "want", "可能": "maybe", "也许": "maybe", "打算": "plan", "计划": "plan",
             "准备": "plan", "会": "will", "将": "will", "将要": "will", "能": "can", "可以": "can", "能够": "can",
             "应该": "should", "应当": "should", "必须": "must", "得": "must", "需要": "must"}
_ZH_SELF = frozenset({"我", "我们", "咱们", "咱", "本人"})
_ZH_PRONOUNS = frozenset({"我", "我们", "咱们", "咱", "你", "您", "你们", "他", "她", "它", "他们", "她们", "它们", "大家", "本人"})
_ZH_LOC_PREP = frozenset({"在", "于"})
_ZH_POLITE = frozenset({"请", "麻烦", "劳驾"})
_ZH_INSTR_PREP = frozenset({"用", "拿", "通过", "使用"})
_ZH_WITH = frozenset({"和", "跟", "与", "同"})
_ZH_DEGREE = frozenset({"好", "很", "太", "真", "挺", "非常", "特别", "超", "超级", "蛮", "有点", "比较", "更", "最"})
_ZH_BENEFIT_PREP = {"给": "RECIPIENT", "为": "BENEFICIARY", "替": "BENEFICIARY", "帮": "BENEFICIARY"}
_ZH_LANGUAGES = frozenset({"中文", "英文", "英语", "汉语", "普通话", "粤语", "日语", "日文", "韩语", "法语", "德语",
                           "西班牙语", "俄语"})
_ZH_ASPECT = frozenset({"了", "过", "着", "的", "地", "得"})
_ZH_RESULT = frozenset("好完到见懂着错会掉")
_ZH_MOTION = frozenset({"去", "来", "回", "到", "住", "住在", "搬到", "飞", "飞到", "回到", "前往", "来到", "离开", "访问", "拜访"})
_ZH_NOUNISH = ("n", "ng", "nr", "nrfg", "nrt", "ns", "nt", "nz", "s", "eng", "j", "vn", "an")
_ZH_SUBJECT_TAGS = ("n", "nr", "nrfg", "nrt", "ns", "nt", "nz", "j", "eng")
_ZH_ENT_SUB = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "LOC", "nt": "ORG", "nz": "MISC", "s": "LOC"}


def _zh_nounish(tag: str) -> bool:
    return tag in _ZH_NOUNISH or (tag.startswith("n") and tag != "nx")


def _zh_is_verb(ann: Annotation, i: int) -> bool:
    tag, w = ann.tag[i], ann.tokens[i]
    lex = zh_lexicon().get(w)
    if lex is not None and lex.kind in ("vo", "verb") and tag != "p":
        return True
    return tag.startswith("v") and tag != "vn"


def _zh_is_state(ann: Annotation, i: int) -> bool:
    lex = zh_lexicon().get(ann.tokens[i])
    return (lex is not None and lex.kind == "state") or ann.tag[i] in ("a", "ad", "ag", "z")


def zh_clauses(ann: Annotation) -> list[tuple[int, int, str | None]]:
    """Clause token spans [lo, hi) split on ，；。！？ and causal conjunctions; with the clause's causal marker.

    Marker "because" (因为/由于 opens the clause: it is a cause) or "so"
    (所以/因此/导致…: it is the effect of the clause before).
    """
    out: list[tuple[int, int, str | None]] = []
    lo, marker = 0, None
    n = len(ann.tokens)
    for i in range(n + 1):
        w = ann.tokens[i] if i < n else ""
        boundary = i == n or (w != " " and _ZH_BOUNDARY_TOKEN.fullmatch(w) is not None)
        conj = i < n and (w in _ZH_CAUSE_CONJ or w in _ZH_EFFECT_CONJ)
        if boundary or conj:
            if i > lo:
                out.append((lo, i, marker))
            marker = None
            lo = i + 1
            if conj:
                marker = "because" if w in _ZH_CAUSE_CONJ else "so"
    return out


def _zh_entity_for(ctx: MessageCtx, lo: int, hi: int, role_sub: str | None = None) -> EntityRef:
    ann = ctx.ann
    cs, ce = ann.idx[lo], _tok_end(ann, hi - 1)
    name = ctx.text[cs:ce]
    known_person = name in PERSON_NOUNS_ZH or _norm_name(name) in ctx.names or name in (ctx.speaker, ctx.you)
    sub = role_sub or ("PERSON" if known_person else _ZH_ENT_SUB.get(ann.tag[hi - 1], "OBJECT"))
    return _canonical(ctx, EntityRef(sub, name, cs, ce, FACT_ZH))


_ZH_WEATHER = ("下雨", "下雪", "刮风", "打雷", "降温", "升温", "起雾", "天晴", "阴天", "下冰雹")
_ZH_QUESTION_END = ("吗", "呢", "？", "?", "么", "嘛")
_ZH_IMPERATIVE = ("请", "别", "不要", "不许", "记得", "快", "来", "去吧", "吧")


def _zh_first_person_default(ctx: MessageCtx, ann: Annotation, lo: int, hi: int) -> bool:
    """A subjectless opening clause defaults to the speaker unless it asks or tells someone to do something."""
    clause = ctx.text[ann.idx[lo]:_tok_end(ann, hi - 1)].strip()
    after = ctx.text[_tok_end(ann, hi - 1):].lstrip()[:1]
    if not clause or clause.endswith(_ZH_QUESTION_END) or after in ("？", "?"):
        return False
    if clause.startswith(_ZH_IMPERATIVE) or clause.endswith(("吧", "啊吧")) or _ZH_PREF[0][0].search(clause):
        return False  # asks or instructs someone else (以后优先用中文回答 is the assistant's to do)
    if any(w in clause for w in _ZH_WEATHER):
        return False  # 下雨 has no doer
    return bool(ctx.speaker)


def _zh_personish(ann: Annotation, lo: int, hi: int) -> bool:
    return ann.tag[hi - 1].startswith("nr") or ann.tokens[hi - 1] in PERSON_NOUNS_ZH


def _zh_noun_run(ann: Annotation, i: int, hi: int, in_time: list[bool]) -> int:
    """End (exclusive) of the run of noun-like tokens starting at i (i itself when there is none)."""
    j = i
    while j < hi and not in_time[j] and _zh_nounish(ann.tag[j]) and ann.tokens[j] not in _ZH_PRONOUNS:
        j += 1
    return j


def fact_zh_rule(ctx: MessageCtx, times: list[TimeRef]) -> list[FactDraft]:
    """Facts from jieba POS per clause (R2G-6 minimum rules).

    Subject (nr / pronoun / noun before the verb) → AGENT (我 → speaker; a
    subject-less clause inherits the previous clause's agent); 在/于 + noun
    (+ 方位词) → LOCATION (subtype LOC, r2g.rule.location.v2); verb + following
    noun → predicate + PATIENT (motion verb + place → LOCATION); time words →
    TIME. predicate_norm from the shipped lexicon, else the Chinese verb(_object).
    """
    ann = ctx.ann
    n = len(ann.tokens)
    lex = zh_lexicon()
    in_time = [False] * n
    for tr in times:
        for k in range(tr.tok_start, tr.tok_end):
            in_time[k] = True
    speaker = speaker_rule(ctx)
    facts: list[FactDraft] = []
    prev_agent: EntityRef | None = None
    pending_cause: list[tuple[int, EntityRef]] = []   # (index of the next fact, cause entity)
    ents = entity_zh_rule(ctx)  # once per message; each clause keeps its own
    for ci, (lo, hi, marker) in enumerate(zh_clauses(ann)):
        agent: EntityRef | None = None
        agent_seen = False
        negation, neg_word, modality = False, "", None
        location: EntityRef | None = None
        instrument: EntityRef | None = None
        companions: list[EntityRef] = []
        extra: list[Role] = []
        pred = -1
        i = lo
        while i < hi:
            w, tag = ann.tokens[i], ann.tag[i]
            if in_time[i] or (tag == "x" and not w.strip()) or w in _ZH_POLITE:
                i += 1
                continue
            if w in _ZH_DEGREE and i + 1 < hi and (_zh_is_state(ann, i + 1) or _zh_is_verb(ann, i + 1)):
                i += 1  # 好累, 很喜欢, 太大: a degree adverb, not the predicate
                continue
            if w in _ZH_LOC_PREP:
                j0 = i + 1
                j = _zh_noun_run(ann, j0, hi, in_time)
                if j > j0:
                    location = _zh_entity_for(ctx, j0, j, "LOC")
                    i = j + (1 if j < hi and ann.tag[j] == "f" else 0)
                    continue
            if w in _ZH_INSTR_PREP and i + 1 < hi and not _zh_is_verb(ann, i + 1):
                j = _zh_noun_run(ann, i + 1, hi, in_time)
                if j > i + 1:
                    tgt = _zh_entity_for(ctx, i + 1, j)
                    if tgt.name in _ZH_LANGUAGES:
                        extra.append(Role("MANNER", tgt, FACT_ZH))  # 用中文写信
                    else:
                        instrument = tgt
                    i = j
                    continue
            if w in _ZH_WITH and i + 1 < hi:
                j = _zh_noun_run(ann, i + 1, hi, in_time)
                if j > i + 1:
                    companions.append(_zh_entity_for(ctx, i + 1, j))
                    i = j
                    continue
            if w in _ZH_BENEFIT_PREP and i + 1 < hi:  # 给妈妈买礼物, 替妈妈做饭, 为孩子攒钱
                j = _zh_noun_run(ann, i + 1, hi, in_time)
                tgt = None
                if j > i + 1:
                    tgt = _zh_entity_for(ctx, i + 1, j, "PERSON" if _zh_personish(ann, i + 1, j) else None)
                elif i + 1 < hi and ann.tokens[i + 1] in _ZH_PRONOUNS:
                    j = i + 2
                    tgt = pronoun_ref(ctx, ann.tokens[i + 1], ann.idx[i + 1], _tok_end(ann, i + 1))
                if j > i + 1 and j < hi and (_zh_is_verb(ann, j) or ann.tokens[j] in _ZH_MODAL):
                    if tgt is not None:
                        extra.append(Role(_ZH_BENEFIT_PREP[w], tgt, ROLES_EXTRA))
                    i = j
                    continue
            if w in _ZH_NEG:
                negation, neg_word = True, w
                if w == "没有" and not any(_zh_is_verb(ann, k) or _zh_is_state(ann, k) for k in range(i + 1, hi)):
                    pred = i  # 没有 + noun: "not have"
                    break
                i += 1
                continue
            if w in _ZH_MODAL and any(_zh_is_verb(ann, k) or _zh_is_state(ann, k) for k in range(i + 1, hi)):
                modality = modality or _ZH_MODAL[w]
                i += 1
                continue
            if _zh_is_verb(ann, i) or _zh_is_state(ann, i):
                pred = i
                break
            if not agent_seen and (tag.startswith("r") and w in _ZH_PRONOUNS):
                if i + 1 < hi and ann.tokens[i + 1] == "的":
                    i += 2  # 我的朋友…: a possessor, the subject follows
                    continue
                agent_seen = True
                agent = pronoun_ref(ctx, w, ann.idx[i], _tok_end(ann, i))
                i += 1
                continue
            if not agent_seen and tag in _ZH_SUBJECT_TAGS:
                j = _zh_noun_run(ann, i, hi, in_time)
                while j + 1 < hi and ann.tokens[j] == "的" and _zh_noun_run(ann, j + 1, hi, in_time) > j + 1:
                    i = j + 1  # 姐夫的父亲: the possessed noun is the subject
                    j = _zh_noun_run(ann, i, hi, in_time)
                agent_seen = True
                # 朋友张伟: a person noun in apposition to a name — the name is the subject
                k0 = next((k for k in range(i, j) if ann.tag[k].startswith("nr")), i)
                k0 = k0 if all(ann.tokens[k] in PERSON_NOUNS_ZH for k in range(i, k0)) else i
                agent = _zh_entity_for(ctx, k0, j, "PERSON" if _zh_personish(ann, k0, j) else None)
                i = j
                continue
            i += 1
        clause_text = ctx.text[ann.idx[lo]:_tok_end(ann, hi - 1)]
        if _SMALL_TALK.match(clause_text):
            continue  # 好的, 哈哈, 嗯嗯: an acknowledgement, not a statement
        if pred < 0 and location is None:
            j = _zh_noun_run(ann, lo, hi, in_time)
            if marker == "because" and j > lo:  # 由于疫情，… : a noun cause, a CAUSE role of the fact it explains
                pending_cause.append((len(facts), _zh_entity_for(ctx, lo, j)))
            continue
        if not agent_seen:
            agent = prev_agent  # pro-drop: 「我今天不开心，因为昨晚没睡好」 — 睡 is still the speaker's
            if agent is None and not facts and pred >= 0 and _zh_first_person_default(ctx, ann, lo, hi):
                # a subjectless statement opening a chat turn is the speaker's own (zero pronoun 我):
                # 「知道啦」「不喝了」「忙忘了问」 — weaker evidence, so the coref rule and its confidence
                agent = speaker and EntityRef(speaker.subtype, speaker.name, -1, -1, COREF)
        prev_agent = agent if agent_seen else prev_agent
        subtype = "event"
        patient: EntityRef | None = None
        parts: list[str]
        surface_lo, surface_hi = (pred if pred >= 0 else lo), (pred + 1 if pred >= 0 else hi)
        if pred < 0:
            parts, subtype = ["be_at"], "state"
        elif ann.tokens[pred] == "没有" and negation:
            parts = ["have"]
            j0 = pred + 1
            j = _zh_noun_run(ann, j0, hi, in_time)
            if j > j0:
                patient = _zh_entity_for(ctx, j0, j)
                surface_hi = j
        else:
            v = pred
            verb = ann.tokens[v]
            k = v + 1
            # resultative complement: 睡好, 做完, 看到
            if k < hi and ann.tokens[k] in _ZH_RESULT and verb + ann.tokens[k] in lex:
                verb = verb + ann.tokens[k]
                k += 1
            surface_hi = k
            while k < hi and ann.tokens[k] in _ZH_ASPECT:
                k += 1
            # serial verbs: 去 爬山 → go_hike; 喜欢 喝 咖啡 → like_drink + PATIENT 咖啡
            v2 = None
            if k < hi and _zh_is_verb(ann, k) and not in_time[k]:
                v2 = k
                k += 1
                surface_hi = k
                while k < hi and ann.tokens[k] in _ZH_ASPECT:
                    k += 1
            recipient = None
            if verb.endswith("给") or (k < hi and ann.tokens[k] == "给"):  # 送给妈妈一束花
                k += 1 if not verb.endswith("给") else 0
                j = _zh_noun_run(ann, k, hi, in_time)
                if j > k:
                    recipient = _zh_entity_for(ctx, k, j, "PERSON" if _zh_personish(ann, k, j) else None)
                elif k < hi and ann.tokens[k] in _ZH_PRONOUNS:
                    j = k + 1
                    recipient = pronoun_ref(ctx, ann.tokens[k], ann.idx[k], _tok_end(ann, k))
                if recipient is not None:
                    extra.append(Role("RECIPIENT", recipient, ROLES_EXTRA))
                    k = j
            while k < hi and (ann.tag[k] in ("m", "mq", "q", "uj") or ann.tokens[k] in ("这", "那", "一些", "些")):
                k += 1
            j = _zh_noun_run(ann, k, hi, in_time)
            # 奶奶做的饺子: "noun verb 的 noun" is a relative clause; its head noun is the object
            if j < hi - 2 and _zh_is_verb(ann, j) and ann.tokens[j + 1] == "的":
                j2 = _zh_noun_run(ann, j + 2, hi, in_time)
                if j2 > j + 2:
                    if j > k:
                        companions.append(_zh_entity_for(ctx, k, j, "PERSON" if _zh_personish(ann, k, j) else None))
                    k, j = j + 2, j2
            obj = (k, j) if j > k else None
            if obj is None and recipient is None and k < hi and ann.tokens[k] in _ZH_PRONOUNS and not in_time[k] \
                    and (k + 1 >= hi or not (ann.tokens[k + 1] == "的" or _zh_nounish(ann.tag[k + 1]))):
                patient = pronoun_ref(ctx, ann.tokens[k], ann.idx[k], _tok_end(ann, k))  # 我喜欢她
            obj_name = ctx.text[ann.idx[k]:_tok_end(ann, j - 1)] if obj else ""
            if _zh_is_state(ann, v) and v2 is None and obj is None:
                subtype = "state"
            last_verb = ann.tokens[v2] if v2 is not None else verb
            vo = lex.get(last_verb + obj_name) if obj else None
            vo = vo if vo is not None and vo.kind == "vo" else None
            entry = lex.get(verb)
            if v2 is None:
                parts = [vo.norm] if vo else [entry.norm if entry else verb]
            else:
                e2 = lex.get(last_verb)
                parts = [entry.norm if entry else verb, vo.norm if vo else (e2.norm if e2 else last_verb)]
            if obj is not None:
                place = ann.tokens[v] in _ZH_MOTION and v2 is None
                tgt = _zh_entity_for(ctx, k, j, "LOC" if place and not ann.tag[j - 1].startswith("nr") else None)
                if place:
                    location = location or tgt
                else:
                    patient = tgt
                    if len(parts) == 1 and vo is None:
                        parts.append(tgt.name)  # verb_object, e.g. eat_苹果 (no lexicon entry for the pair)
                surface_hi = j
        roles: list[Role] = []
        if agent is not None:
            roles.append(Role("AGENT", agent, FACT_ZH))
        if patient is not None:
            roles.append(Role("PATIENT", patient, FACT_ZH))
        if location is not None:
            roles.append(Role("LOCATION", location, LOCATION))
        if instrument is not None:
            roles.append(Role("INSTRUMENT", instrument, FACT_ZH))
        roles.extend(extra)
        roles.extend(Role("CAUSE", c, ROLES_EXTRA) for at, c in pending_cause if at == len(facts))
        cs_clause, ce_clause = ann.idx[lo], _tok_end(ann, hi - 1)
        ftime, ftext = _time_roles([tr for tr in times if cs_clause <= tr.start and tr.end <= ce_clause], roles,
                                   modality in FUTURE_MODALITIES, ctx.ts)
        clause_ents = [ref for s, e, ref in ents if lo <= s and e <= hi]
        mentions = _dedup_refs([r.target for r in roles] + companions + clause_ents)
        surface = ctx.text[ann.idx[surface_lo]:_tok_end(ann, max(surface_lo, surface_hi - 1))]
        prefix = "" if pred >= 0 and ann.tokens[pred] == neg_word else neg_word
        title = " ".join(x for x in ((agent.name if agent else ""), prefix + surface) if x)
        facts.append(FactDraft(
            index=ci, predicate_norm="_".join(parts), subtype=subtype, negation=negation, modality=modality,
            start=cs_clause, end=ce_clause, title=clip(title, 120),
            keywords=_dedup(content_words(ann, lo, hi) + [p for part in parts for p in part.split("_")]),
            provenance=FACT_ZH, roles=roles, mentions=mentions, time=ftime, time_text=ftext,
            cause_marker=(marker, None) if marker else None))
    return facts


# ---------------------------------------------------------------- r2g.rule.cause.v1

def cause_rule(facts: list[FactDraft]) -> list[tuple[int, int]]:
    """(cause, effect) pairs of positions in `facts` from because/so markers (因为/所以/导致/because/so/therefore).

    A "because" clause with an explicit effect uses it; a Chinese 因为 clause
    followed by a 所以 clause pairs with it, else with the clause before it, else
    the one after. A "so" clause is the effect of the clause before it.
    """
    pairs: list[tuple[int, int]] = []
    by_index = {f.index: k for k, f in enumerate(facts)}
    for k, f in enumerate(facts):
        if not f.cause_marker:
            continue
        kind, target = f.cause_marker
        if kind == "because":
            if target is not None and target in by_index and by_index[target] != k:
                pairs.append((k, by_index[target]))
            elif k + 1 < len(facts) and facts[k + 1].cause_marker and facts[k + 1].cause_marker[0] == "so":
                continue  # 因为…，所以…: the "so" clause links itself to this one
            elif k > 0:
                pairs.append((k, k - 1))
            elif k + 1 < len(facts):
                pairs.append((k, k + 1))
        elif kind == "so" and k > 0:
            pairs.append((k - 1, k))
    return list(dict.fromkeys(pairs))


# ---------------------------------------------------------------- r2g.rule.preference.v1

_EN_PREF = [
    (re.compile(r"\b(?:i|we)\s+(?:really\s+|much\s+|would\s+|'d\s+)?prefer\b", re.I), "prefer"),
    (re.compile(r"\bfrom now on\b|\bgoing forward\b|\bin the future,?\s+(?:please|always|never)\b", re.I), "instruction"),
    (re.compile(r"^\s*(?:please\s+)?(?:always|never|don't|do not|stop)\s+\w+", re.I), "instruction"),
    (re.compile(r"\bplease\s+(?:always|never|don't|do not|use|answer|reply|respond|call|write|speak|keep)\b", re.I), "instruction"),
    (re.compile(r"\b(?:i|we)\s+(?:really\s+|absolutely\s+)?(?:hate|dislike|can't stand|cannot stand|don't like|do not like|don't enjoy)\b", re.I), "dislike"),
    (re.compile(r"\b(?:i|we)\s+(?:really\s+|absolutely\s+|just\s+)?(?:like|love|enjoy|adore)\b", re.I), "like"),
    (re.compile(r"\bmy\s+favou?rite\b", re.I), "like"),
]
_ZH_PREF = [
    (re.compile(r"以后|今后|从现在开始|往后|请用|请你|优先|不要|别再"), "instruction"),
    (re.compile(r"偏好|更喜欢|比较喜欢"), "prefer"),
    (re.compile(r"讨厌|不喜欢|受不了|不爱"), "dislike"),
    (re.compile(r"喜欢|最爱|爱吃|爱喝|爱看"), "like"),
]
_ZH_THIRD = re.compile(r"^[^我]*?(?:他|她|它|他们|她们)")


def preference_rule(ctx: MessageCtx, ner: list[tuple[int, int, EntityRef]]) -> list[PreferenceDraft]:
    """Preference/instruction sentences ("I prefer…", "from now on…", 以后/优先/喜欢/讨厌/不要/请用).

    Likes and dislikes count only in the first person (or with no subject in
    Chinese); instructions count always.
    """
    ann = ctx.ann
    out: list[PreferenceDraft] = []
    rules = _ZH_PREF if ctx.lang == "zh" else _EN_PREF
    for si, (s, e) in enumerate(ann.sents):
        if e <= s:
            continue
        cs, ce = ann.idx[s], _tok_end(ann, e - 1)
        sent = ctx.text[cs:ce]
        for pat, sub in rules:
            if not pat.search(sent):
                continue
            if ctx.lang == "zh" and sub in ("like", "dislike", "prefer") and _ZH_THIRD.search(sent):
                continue
            ents = [ref for ts_, te_, ref in ner if s <= ts_ and te_ <= e]
            out.append(PreferenceDraft(si, sub, cs, ce, clip(sent, SUMMARY_MAX_CHARS),
                                       content_words(ann, s, e), _dedup_refs(ents)))
            break
    return out


# ---------------------------------------------------------------- r2g.rule.task.v1

@dataclass
class TaskDraft:
    """A plan or to-do: from a Fact the speaker must/plans/will do, or a reminder sentence."""

    index: int
    subtype: str                    # todo | plan | reminder
    start: int
    end: int
    text: str
    keywords: list[str]
    fact: int | None                # position in the message's facts it was made from
    time: TimeValue | None = None
    time_text: str | None = None


_EN_REMIND = re.compile(r"\b(?:remind me to|don't forget to|do not forget to|remember to|to-?do:?|my to-?do list)\b",
                        re.I)
_ZH_REMIND = re.compile(r"记得|别忘了|不要忘了|提醒我|待办")
_TASK_MODALITY = {"must": "todo", "plan": "plan"}


def task_rule(ctx: MessageCtx, facts: list[FactDraft]) -> list[TaskDraft]:
    """Tasks: "I need to / have to / must / plan to …", 要/得/需要/打算/计划 …, and reminders
    ("remind me to…", 记得/别忘了). A "will"/要 fact is a plan only when it is dated in the
    future ("I'll call the dentist tomorrow", 明天要买菜) — "I'll be fine" is not a task.
    The doer is the speaker (I/we or no subject); negated facts are never tasks.
    """
    speaker = speaker_rule(ctx)
    out: list[TaskDraft] = []
    for k, f in enumerate(facts):
        if f.negation or f.subtype != "event":
            continue
        agent = next((r.target for r in f.roles if r.type == "AGENT"), None)
        if agent is not None and (speaker is None or agent.norm != speaker.norm):
            continue
        sub = _TASK_MODALITY.get(f.modality or "")
        future = f.time is not None and ctx.ts is not None and f.time.start is not None and \
            f.time.start >= ctx.ts.replace(hour=0, minute=0, second=0, microsecond=0) + _ONE_DAY
        if sub is None and f.modality == "will" and future:
            sub = "plan"
        if sub is None:
            continue
        out.append(TaskDraft(len(out), sub, f.start, f.end, clip(ctx.text[f.start:f.end], SUMMARY_MAX_CHARS),
                             f.keywords, k, f.time, f.time_text))
    covered = [(t.start, t.end) for t in out]
    pat = _ZH_REMIND if ctx.lang == "zh" else _EN_REMIND
    ann = ctx.ann
    for s, e in ann.sents:
        if e <= s:
            continue
        cs, ce = ann.idx[s], _tok_end(ann, e - 1)
        if not pat.search(ctx.text[cs:ce]) or any(a < ce and cs < b for a, b in covered):
            continue
        inside = [k for k, f in enumerate(facts) if cs <= f.start < ce]
        fk = inside[-1] if inside else None   # "remind me to call mom": the last clause is the task
        f = facts[fk] if fk is not None else None
        out.append(TaskDraft(len(out), "reminder", cs, ce, clip(ctx.text[cs:ce], SUMMARY_MAX_CHARS),
                             content_words(ann, s, e), fk, f.time if f else None, f.time_text if f else None))
    return out


# ---------------------------------------------------------------- r2g.rule.importance.v1

_LIFE_EVENTS_EN = frozenset("""
born birth birthday marry married marriage wedding engaged engagement divorce divorced pregnant pregnancy baby
adopt adoption graduate graduation degree die died death funeral pass hire hired fire fired job promotion promote
retire retirement move moved relocate house apartment diagnose diagnosed cancer surgery hospital accident
anniversary transition propose proposal breakup quit start business enroll admitted
""".split())
_LIFE_EVENTS_ZH = ("出生", "生日", "结婚", "婚礼", "订婚", "离婚", "怀孕", "宝宝", "领养", "收养", "毕业", "学位", "去世",
                   "葬礼", "入职", "辞职", "升职", "被裁", "退休", "搬家", "买房", "确诊", "手术", "住院", "车祸", "周年",
                   "求婚", "分手", "创业", "录取")
_LIFE_EVENTS_ZH_RE = re.compile("|".join(map(re.escape, _LIFE_EVENTS_ZH)))
# matched against lower-cased text: case-sensitive patterns let re skip ahead on their first characters
_NAME_CUES = re.compile(r"\bmy name is\b|\bi'?m called\b|\bcall me\b|\bbirthday\b|我叫|名字|生日")
_NAME_CUE_WORDS = ("name", "call", "birthday", "我叫", "名字", "生日")   # every _NAME_CUES match holds one
_IMPORTANCE_BASE = {"Preference": 0.6, "Task": 0.55, "Fact": 0.35, "Episode": 0.25, "Concept": 0.5}
_SMALL_TALK = re.compile(
    r"^\W*(?:hi|hey|hello|yo|thanks?|thank you|thx|ok(?:ay)?|sure|lol|haha+|hah|yeah|yep|yes|no|nope|cool|nice|"
    r"great|wow|bye|good ?night|good ?morning|see you|ttyl|np|you're welcome|"
    r"你好|您好|嗨|哈+|嗯+|好的?|谢谢|多谢|再见|拜拜|晚安|早安|早上好|收到|行|可以|哦+|噢+)\W*$", re.I)


def importance(kind: str, text: str, lang: str, words: list[str], *, n_entities: int = 0, n_roles: int = 0,
               n_facts: int = 0, n_prefs: int = 0) -> float:
    """Heuristic importance in [0, 1]: preferences, life events and names/birthdays over small talk.

    Base by kind (Preference 0.6, Task 0.55, Fact 0.35, Episode 0.25, Concept 0.5), then
    +0.3 for a life event (wedding, new job, moving, diagnosis, 结婚/毕业/搬家…),
    +0.2 for names and birthdays, +0.1 per role/entity/fact (capped), +0.15 for a turn
    holding a preference; small talk ("thanks!", 哈哈, 好的) or under 3 content words: −0.2.
    """
    score = _IMPORTANCE_BASE.get(kind, 0.3)
    if lang == "zh":
        life = _LIFE_EVENTS_ZH_RE.search(text) is not None
    else:
        life = not _LIFE_EVENTS_EN.isdisjoint(words)
    score += 0.3 if life else 0.0
    low = text.lower()
    # the regex only where one of its words occurs: it has no literal prefix for re to skip ahead on
    score += 0.2 if any(w in low for w in _NAME_CUE_WORDS) and _NAME_CUES.search(low) else 0.0
    score += 0.05 * min(n_entities, 3) + 0.05 * min(n_roles, 3) + 0.05 * min(n_facts, 3)
    score += 0.15 if n_prefs else 0.0
    if _SMALL_TALK.match(text.strip()) or len(words) < 3 and not life and kind in ("Episode", "Fact"):
        score -= 0.2
    return round(min(1.0, max(0.05, score)), 3)


# ---------------------------------------------------------------- r2g.rule.topic_block.v1

TOPIC_BLOCK_MIN_SENTS = 8      # a turn is "long" from this many sentences …
TOPIC_BLOCK_MIN_CHARS = 500    # … and characters on
TOPIC_BLOCK_MIN_LEN = 3        # sentences per block at least


def topic_blocks(ctx: MessageCtx) -> list[tuple[int, int]]:
    """Sentence-index spans [lo, hi) of the topic blocks of a long text; [(0, n)] for an ordinary turn.

    TextTiling-style: lexical cohesion (Jaccard of content words) between the two
    sentences before and after every gap; a gap whose depth below its neighbouring
    peaks exceeds the mean depth by half a standard deviation is a topic boundary,
    keeping blocks of at least TOPIC_BLOCK_MIN_LEN sentences.
    """
    ann = ctx.ann
    sents = [(s, e) for s, e in ann.sents if e > s]
    n = len(sents)
    if n < TOPIC_BLOCK_MIN_SENTS or len(ctx.text) < TOPIC_BLOCK_MIN_CHARS:
        return [(0, n)]
    words = [set(content_words(ann, s, e)) for s, e in sents]
    sims = []
    for g in range(1, n):
        left = set().union(*words[max(0, g - 2):g])
        right = set().union(*words[g:g + 2])
        sims.append(len(left & right) / len(left | right) if left | right else 0.0)
    depths = []
    for k, v in enumerate(sims):
        lpeak = max(sims[:k + 1])
        rpeak = max(sims[k:])
        depths.append((lpeak - v) + (rpeak - v))
    mean = sum(depths) / len(depths)
    sd = (sum((d - mean) ** 2 for d in depths) / len(depths)) ** 0.5
    cuts: list[int] = []
    for k in sorted(range(len(depths)), key=lambda k: (-depths[k], k)):
        gap = k + 1
        if depths[k] <= mean + 0.5 * sd or depths[k] <= 0:
            break
        bounds = sorted(cuts + [gap])
        edges = [0] + bounds + [n]
        if all(b - a >= TOPIC_BLOCK_MIN_LEN for a, b in zip(edges, edges[1:])):
            cuts.append(gap)
    edges = [0] + sorted(cuts) + [n]
    return list(zip(edges, edges[1:]))


# ---------------------------------------------------------------- r2g.rule.episode.v1

def episode_rule(ctx: MessageCtx, n_entities: int, n_facts: int, n_prefs: int,
                 block: tuple[int, int] | None = None, n_blocks: int = 1) -> EpisodeDraft:
    """Title, extractive summary, keywords and importance of one turn (or of one topic block of it).

    Summary: the most informative sentences (content words + entities), kept in
    text order, at most SUMMARY_MAX_CHARS; a one-sentence message is that sentence.
    Keywords: every content word of the turn/block, so BM25 finds all of it.
    `block` is a sentence-index span from topic_blocks.
    """
    ann = ctx.ann
    sents = [(s, e) for s, e in ann.sents if e > s]
    if block is not None:
        sents = sents[block[0]:block[1]]
    texts = []
    for k, (s, e) in enumerate(sents):
        text = " ".join(ctx.text[ann.idx[s]:_tok_end(ann, e - 1)].split())
        if text:
            texts.append((k, s, e, text))
    if len(texts) == 1:
        summary = clip(texts[0][3], SUMMARY_MAX_CHARS)
    else:
        ent_toks = {k for s, e, _ in ann.ents for k in range(s, e)}
        scored = [(len(content_words(ann, s, e)) + 2 * sum(1 for t in range(s, e) if t in ent_toks), k, text)
                  for k, s, e, text in texts]
        chosen, used = [], 0
        for score, k, text in sorted(scored, key=lambda x: (-x[0], x[1])):
            if used + len(text) + (1 if chosen else 0) > SUMMARY_MAX_CHARS:
                if not chosen:
                    chosen.append((k, clip(text, SUMMARY_MAX_CHARS)))
                    break
                continue
            chosen.append((k, text))
            used += len(text) + 1
        summary = " ".join(t for _, t in sorted(chosen))
    if sents:
        lo_tok, hi_tok = sents[0][0], sents[-1][1]
        span = ctx.text[ann.idx[lo_tok]:_tok_end(ann, hi_tok - 1)]
        words = content_words(ann, lo_tok, hi_tok)
    else:
        span, words = ctx.text, []
    head = clip(span, TITLE_MAX_CHARS)
    if n_blocks > 1 and block is not None:
        head = f"[{block[0] + 1}–{block[1]}/{len(ann.sents)}] {head}"
    title = f"{ctx.speaker}: {head}" if ctx.speaker else head
    imp = importance("Episode", span, ctx.lang, words, n_entities=n_entities, n_facts=n_facts, n_prefs=n_prefs)
    return EpisodeDraft(title, summary, words, imp)


def temporal_next_rule(episodes: list[tuple]) -> list[tuple[str, str]]:
    """(src, dst) Episode pairs chaining each (tenant, conv_id) in order: input rows
    (tenant, conv_id, seq, …, episode_id) — the last field is the id, the ones between order blocks of a turn."""
    ordered = sorted(episodes)
    return [(a[-1], b[-1]) for a, b in zip(ordered, ordered[1:]) if a[:2] == b[:2] and a[-1] != b[-1]]


@dataclass(frozen=True)
class RuleSpec:
    id: str
    description: str
    fns: tuple[Callable, ...]   # the functions implementing it (wiring rules live in r2g.extract)


RULES: dict[str, RuleSpec] = {r.id: r for r in [
    RuleSpec(EPISODE, "one Episode per turn: title, extractive summary, keywords", (episode_rule,)),
    RuleSpec(ENTITY_EN, "English NER entities", (entity_en_rule,)),
    RuleSpec(ENTITY_ZH, "Chinese POS/rule entities", (entity_zh_rule,)),
    RuleSpec(ENTITY_SPEAKER, "the speaker of every message is a PERSON", (speaker_rule,)),
    RuleSpec(FACT_EN, "English predicate clauses from the dependency parse", (fact_en_rule,)),
    RuleSpec(FACT_ZH, "Chinese predicate clauses from jieba POS", (fact_zh_rule,)),
    RuleSpec(LOCATION, "at/in/on/to + place, 在/于 + noun (+方位词), motion verb + place → LOCATION",
             (fact_en_rule, fact_zh_rule)),
    RuleSpec(TIME, "time expressions resolved against the message ts → TIME", (time_rule,)),
    RuleSpec(CAUSE, "because/so/因为/所以/导致 → CAUSES / CAUSED_BY", (cause_rule,)),
    RuleSpec(PREFERENCE, "preference and instruction language → Preference", (preference_rule,)),
    RuleSpec(TEMPORAL_NEXT, "Episodes of one conversation chained by seq", (temporal_next_rule,)),
    RuleSpec(MENTIONS, "Episode/Fact/Preference → Entity for every mention", ()),
    RuleSpec(DERIVED_FROM, "Fact/Preference/Task → Episode, and every node → its RawChunk", ()),
    RuleSpec(COREF, "name variants (Mel/Melanie, 明明/小明) and pronouns (you/he/she/他/她) within a conversation",
             (name_variants, pronoun_ref)),
    RuleSpec(ROLES_EXTRA, "BENEFICIARY (for/为/替), CAUSE (because of/由于), INSTRUMENT (with/by), RECIPIENT (给)",
             (fact_en_rule, fact_zh_rule)),
    RuleSpec(TASK, "plans and to-dos: need to/have to/plan to, 要/得/打算, reminders → Task", (task_rule,)),
    RuleSpec(CONCEPT, "topic dictionary hits → Concept, ABOUT from the turn and the units holding the hit", ()),
    RuleSpec(IMPORTANCE, "importance in [0,1]: preferences, life events, names/birthdays over small talk",
             (importance,)),
    RuleSpec(TOPIC_BLOCK, "a long text is split into topic blocks, one Episode each", (topic_blocks,)),
]}
