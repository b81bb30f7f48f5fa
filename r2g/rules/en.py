"""English rules over the spaCy parse: NER entities (r2g.rule.entity.en.v1) and predicate-clause facts
(r2g.rule.fact.en.v2), with their LOCATION (r2g.rule.location.v2) and extra roles (r2g.rule.roles_extra.v1)."""

from __future__ import annotations

import re

from r2g.nlp import Annotation
from r2g.rules.common import (
    _PUNCT_POS,
    _WORDISH,
    FUTURE_MODALITIES,
    _dedup,
    _dedup_refs,
    _labelled_ents,
    _time_roles,
    _tok_end,
    clip,
    content_words,
    speaker_rule,
)
from r2g.rules.coref import PERSON_NOUNS_EN, _canonical, pronoun_ref
from r2g.rules.drafts import EntityRef, FactDraft, MessageCtx, Role, TimeRef
from r2g.rules.ids import ENTITY_EN, FACT_EN, LOCATION, ROLES_EXTRA

# ---------------------------------------------------------------- r2g.rule.entity.en.v1

_EN_LABEL = {
    "PERSON": "PERSON",
    "ORG": "ORG",
    "GPE": "LOC",
    "LOC": "LOC",
    "FAC": "LOC",
    "NORP": "MISC",
    "PRODUCT": "MISC",
    "EVENT": "MISC",
    "WORK_OF_ART": "MISC",
    "LANGUAGE": "MISC",
    "LAW": "MISC",
}
_EN_LEADING = re.compile(r"^(?:the|a|an|my|our|your|his|her|their)\s+", re.IGNORECASE)


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


# ---------------------------------------------------------------- r2g.rule.fact.en.v2

_EN_PRED_DEPS = frozenset({"ROOT", "conj", "advcl", "ccomp", "parataxis", "relcl"})
_EN_MODAL_AUX = {
    "can": "can",
    "could": "can",
    "ca": "can",
    "should": "should",
    "ought": "should",
    "must": "must",
    "will": "will",
    "wo": "will",
    "'ll": "will",
    "shall": "will",
    "would": "will",
    "'d": "will",
    "might": "maybe",
    "may": "maybe",
}
_EN_MODAL_ADV = {"maybe": "maybe", "perhaps": "maybe", "probably": "maybe", "possibly": "maybe"}
# verb + infinitive: the verb becomes modality and the infinitive the predicate (want to play soccer → play_soccer)
_EN_MODAL_VERBS = {
    "want": "want",
    "wish": "want",
    "hope": "want",
    "plan": "plan",
    "intend": "plan",
    "decide": "plan",
    "need": "must",
    "have": "must",
}
_EN_NEG = frozenset({"not", "n't", "never", "no"})
_EN_LOC_PREPS = frozenset({"at", "in", "on", "to", "into", "inside", "near"})
# Place evidence for LOCATION (r2g.rule.location.v2): "in life", "on the list", "at the moment" are not places.
_EN_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
_EN_ORG_PREPS = frozenset({"at", "in", "to"})  # "works at Google"; "on Door Dash" is not a place
_EN_DESTINATION_PREPS = frozenset({"to", "into", "at", "in"})  # after a motion verb: "went to the support group"
_EN_MOTION_VERBS = frozenset(
    """
go come travel move drive walk fly head return ride arrive relocate commute hike sail cycle bike
""".split()
)
# "at the concert" says where someone was; "in the competition" does not
_EN_AT_EVENTS = frozenset(
    """
party concert wedding conference festival workshop class meeting game show convention fair parade event
competition tournament match ceremony funeral reunion rally exhibition exhibit gig recital
""".split()
)
_EN_NOT_DESTINATIONS = frozenset("life mind conclusion point end terms trouble touch contact rescue top".split())
PLACE_NOUNS_EN = frozenset(
    """
park beach library gym office mall museum lake cafe café restaurant bar pub diner airport hospital clinic
campus school college university classroom dorm church temple mosque synagogue shelter studio kitchen home
house apartment flat room bedroom bathroom garden backyard yard porch balcony garage basement playground store
shop market supermarket bakery theater theatre cinema stadium arena court trail mountain hill forest woods
river sea ocean coast shore island city town village country countryside neighborhood neighbourhood street
road downtown center centre hall station hotel motel hostel farm zoo aquarium pool club venue camp campsite
workplace lab laboratory factory warehouse salon spa bank embassy prison jail gallery bookstore bookshop plaza
harbor harbour port bridge valley desert canyon cabin cottage resort lodge building tower castle palace
""".split()
)
_EN_QUANTITY_HEADS = frozenset(
    {
        "cup",
        "glass",
        "bottle",
        "lot",
        "bit",
        "kind",
        "piece",
        "couple",
        "bunch",
        "bowl",
        "slice",
        "type",
        "sort",
        "pair",
        "box",
        "bag",
        "plate",
    }
)
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
        if lo == i and (
            ann.pos[i] == "PROPN" and ann.dep[i] in ("nsubj", "nsubjpass") or ann.lemma[i].lower() in PERSON_NOUNS_EN
        ):
            subtype = "PERSON"
        return _canonical(self.ctx, EntityRef(subtype, " ".join(words), ann.idx[lo], _tok_end(ann, i), FACT_EN))

    def is_person(self, i: int) -> bool:
        ann = self.ctx.ann
        return self.label_by_tok.get(i) == "PERSON" or ann.pos[i] == "PRON" or ann.lemma[i].lower() in PERSON_NOUNS_EN


_EN_CAUSE_PREPS = frozenset({"because", "due", "owing", "thanks"})
_EN_VEHICLES = frozenset(
    {
        "bus",
        "car",
        "train",
        "plane",
        "bike",
        "bicycle",
        "taxi",
        "boat",
        "ship",
        "subway",
        "metro",
        "tram",
        "foot",
        "air",
        "sea",
        "email",
        "mail",
        "phone",
        "text",
    }
)


def _en_prep_role(
    prep: str, person: bool, label: str | None, ann: Annotation, g: int, kids: list[list[int]], motion: bool = False
) -> str | None:
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


# v2: a clause that says nothing a person would call a memory makes no Fact. Empty verbs and fillers ("be",
# "do", "alright", "ok") need a participant besides the doer ("compost bin do" has none); a light verb that
# usually takes an object ("have", "go") needs one in the parse ("Where did you go?" has none, while "I've had
# them for years" keeps its Fact though "them" names no entity). A participant-less state stays: "it was so
# powerful" answers how a thing felt (dropping those cost recall).
EMPTY_VERBS_EN = frozenset("be do happen seem let".split())
LIGHT_VERBS_EN = frozenset("have get make go come take give put keep say tell become".split())
FILLERS_EN = frozenset(
    """
alright ok okay yeah yes yep yup sure cool nice wow right fine great awesome good thanks thank hi hello hey oh
lol haha hmm true sorry yay well
""".split()
)
_EN_NOT_BARE = frozenset({"dobj", "attr", "oprd", "prep", "dative", "acomp", "xcomp", "ccomp", "npadvmod", "agent"})


def is_memory_fact(f: FactDraft) -> bool:
    """Whether an English fact draft is worth a Fact node (r2g.rule.fact.en.v2): no one-word empty verb or
    filler with nobody but the doer, no one-word light verb with nothing after it (FactDraft.bare)."""
    if "_" in f.predicate_norm:
        return True
    participant = any(r.type != "AGENT" for r in f.roles)
    if f.predicate_norm in EMPTY_VERBS_EN or f.predicate_norm in FILLERS_EN:
        return participant
    if f.predicate_norm in LIGHT_VERBS_EN:
        return participant or not f.bare
    return True


def fact_en_rule(ctx: MessageCtx, times: list[TimeRef], ner: list[tuple[int, int, EntityRef]]) -> list[FactDraft]:
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
        elif (
            pos == "AUX"
            and dep in _EN_PRED_DEPS
            and has_subj(i)
            and any(ann.dep[c] == "prep" for c in kids[i])
            or (pos == "AUX" and dep in _EN_PRED_DEPS and has_subj(i) and any(nps.is_time(c) for c in kids[i]))
        ):
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
        root = next(
            (
                k
                for k in range(tr.tok_start, tr.tok_end)
                if not (tr.tok_start <= ann.head[k] < tr.tok_end) or ann.head[k] == k
            ),
            tr.tok_start,
        )
        time_owner.setdefault(owner[root], []).append(tr)
    ner_owner: dict[int, list[EntityRef]] = {}
    for s, _e, ref in ner:
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
                elif ann.dep[c] in ("aux", "auxpass") and (
                    low in _EN_MODAL_AUX or ann.lemma[c].lower() in _EN_MODAL_AUX
                ):
                    modality = modality or _EN_MODAL_AUX.get(low) or _EN_MODAL_AUX[ann.lemma[c].lower()]
                elif ann.dep[c] == "advmod" and low in _EN_MODAL_ADV:
                    modality = modality or _EN_MODAL_ADV[low]
        verb_words = list(parts)
        subj = subject(p)
        if subj is not None:
            agent = nps.target(subj, "OBJECT")
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
                    role = _en_prep_role(
                        prep, nps.is_person(g), label, ann, g, kids, ann.lemma[q].lower() in _EN_MOTION_VERBS
                    )
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
        marker: tuple[str, int | None] | None = None
        for c in kids[p]:
            low = ann.tokens[c].lower()
            if low in _EN_CAUSE_MARKS and ann.dep[c] in ("mark", "advmod", "prep") and ann.dep[p] == "advcl":
                marker = ("because", ann.head[p])
        prev_pred = preds[preds.index(p) - 1] if preds.index(p) > 0 else -1
        if (
            marker is None
            and prev_pred >= 0
            and any(
                ann.tokens[t].lower() in _EN_EFFECT_MARKS and ann.pos[t] in ("CCONJ", "ADV", "SCONJ")
                for t in range(prev_pred + 1, p)
            )
        ):
            marker = ("so", None)  # "It rained, so I stayed home" / "… . So I am tired.
        index_of[p] = len(facts)
        facts.append(
            FactDraft(
                index=len(facts),
                predicate_norm=predicate_norm,
                subtype=subtype,
                negation=negation,
                modality=modality,
                start=start,
                end=end,
                title=clip(" ".join(w for w in words if w), 120),
                keywords=_dedup(content_words(ann, lo, hi + 1) + parts),
                provenance=FACT_EN,
                roles=roles,
                mentions=mentions,
                time=ftime,
                time_text=ftext,
                cause_marker=marker,
                bare=not any(ann.dep[c] in _EN_NOT_BARE for q in scope for c in kids[q]),
            )
        )
    for f in facts:  # map "because" markers from token ids to fact indices
        if f.cause_marker and f.cause_marker[0] == "because":
            head = f.cause_marker[1]
            f.cause_marker = ("because", index_of.get(owner[head]) if head is not None else None)
    kept = [f for f in facts if is_memory_fact(f)]
    if len(kept) < len(facts):
        gone = {f.index for f in facts} - {f.index for f in kept}
        for f in kept:  # a cause or effect that made no Fact links nothing
            if f.cause_marker and (f.cause_marker[1] in gone or (f.cause_marker[0] == "so" and f.index - 1 in gone)):
                f.cause_marker = None
    return kept
