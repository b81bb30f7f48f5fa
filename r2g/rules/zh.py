"""Chinese rules over jieba POS: entities (r2g.rule.entity.zh.v1) and per-clause facts (r2g.rule.fact.zh.v2,
R2G-6), with their LOCATION (r2g.rule.location.v2) and extra roles (r2g.rule.roles_extra.v1)."""

from __future__ import annotations

import re

from r2g.nlp import Annotation
from r2g.nlp_zh import zh_lexicon
from r2g.rules.common import (
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
from r2g.rules.coref import PERSON_NOUNS_ZH, _canonical, _norm_name, pronoun_ref
from r2g.rules.drafts import EntityRef, FactDraft, MessageCtx, Role, TimeRef
from r2g.rules.episode import _SMALL_TALK
from r2g.rules.ids import COREF, ENTITY_ZH, FACT_ZH, LOCATION, ROLES_EXTRA
from r2g.rules.preference import _ZH_PREF

# ---------------------------------------------------------------- r2g.rule.entity.zh.v1

_ZH_LABEL = {"PERSON": "PERSON", "LOC": "LOC", "ORG": "ORG", "MISC": "MISC"}


def entity_zh_rule(ctx: MessageCtx) -> list[tuple[int, int, EntityRef]]:
    """Entities of a Chinese message from the POS entity component (nr→PERSON, ns→LOC, nt→ORG, nz→MISC).

    Computed once per message (the extractor and the fact rule both ask); callers only read it."""
    cached = ctx.__dict__.get("_entities_zh")
    if cached is None:
        cached = ctx.__dict__["_entities_zh"] = [
            (s, e, _canonical(ctx, EntityRef(sub, ctx.text[cs:ce], cs, ce, ENTITY_ZH)))
            for s, e, sub, cs, ce in _labelled_ents(ctx, _ZH_LABEL)
        ]
    return cached


# ---------------------------------------------------------------- r2g.rule.fact.zh.v2

_ZH_CLAUSE_PUNCT = frozenset("，,；;。！？!?\n…~～：")  # v2: 「帮我记一下：…」 the colon ends the clause
_ZH_BOUNDARY_TOKEN = re.compile("[" + re.escape("".join(sorted(_ZH_CLAUSE_PUNCT))) + "\\s]+")  # punctuation/space only
_ZH_CAUSE_CONJ = frozenset({"因为", "由于"})
_ZH_EFFECT_CONJ = frozenset({"所以", "因此", "于是", "因而", "导致", "从而"})
_ZH_NEG = frozenset({"不", "没", "没有", "别", "未", "甭", "不要", "不会", "不能", "不想"})
_ZH_MODAL = {
    "想": "want",
    "要": "will",
    "想要": "want",
    "可能": "maybe",
    "也许": "maybe",
    "打算": "plan",
    "计划": "plan",
    "准备": "plan",
    "会": "will",
    "将": "will",
    "将要": "will",
    "能": "can",
    "可以": "can",
    "能够": "can",
    "应该": "should",
    "应当": "should",
    "必须": "must",
    "得": "must",
    "需要": "must",
}
_ZH_PRONOUNS = frozenset(
    {"我", "我们", "咱们", "咱", "你", "您", "你们", "他", "她", "它", "他们", "她们", "它们", "大家", "本人"}
)
_ZH_LOC_PREP = frozenset({"在", "于"})
_ZH_POLITE = frozenset({"请", "麻烦", "劳驾"})
_ZH_INSTR_PREP = frozenset({"用", "拿", "通过", "使用"})
_ZH_WITH = frozenset({"和", "跟", "与", "同"})
_ZH_DEGREE = frozenset({"好", "很", "太", "真", "挺", "非常", "特别", "超", "超级", "蛮", "有点", "比较", "更", "最"})
_ZH_BENEFIT_PREP = {"给": "RECIPIENT", "为": "BENEFICIARY", "替": "BENEFICIARY", "帮": "BENEFICIARY"}
_ZH_LANGUAGES = frozenset(
    {"中文", "英文", "英语", "汉语", "普通话", "粤语", "日语", "日文", "韩语", "法语", "德语", "西班牙语", "俄语"}
)
_ZH_ASPECT = frozenset({"了", "过", "着", "的", "地", "得"})
_ZH_RESULT = frozenset("好完到见懂着错会掉")
_ZH_MOTION = frozenset(
    {"去", "来", "回", "到", "住", "住在", "搬到", "飞", "飞到", "回到", "前往", "来到", "离开", "访问", "拜访"}
)
_ZH_NOUNISH = ("n", "ng", "nr", "nrfg", "nrt", "ns", "nt", "nz", "s", "eng", "j", "vn", "an")
_ZH_SUBJECT_TAGS = ("n", "nr", "nrfg", "nrt", "ns", "nt", "nz", "j", "eng")
_ZH_ENT_SUB = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "LOC", "nt": "ORG", "nz": "MISC", "s": "LOC"}


# v2: jieba glues a pronoun or a time/place word to the modal after it (以后「我会」优先…, 晚饭「前会」回来) and tags
# the pair a noun; v1 took "我会优先" and "晚饭前会" for subjects (Entities). A glued pair is read as its parts.
_ZH_PRONOUN_CHARS = frozenset("我你您他她它咱")
_ZH_BEFORE_AFTER = frozenset({"前", "后", "以前", "以后", "之前", "之后", "时", "的时候"})
_ZH_MODAL_CHARS = frozenset("会要想能将得")
# v2: a light verb (是, 有, 帮, 做, …) alone, with no participant beyond the doer, is no memory (「小明 帮」).
LIGHT_VERBS_ZH = frozenset(
    {"是", "有", "做", "帮", "搞", "弄", "让", "给", "把", "被", "来", "去", "在", "要", "会", "干", "弄好", "搞定"}
)


def _zh_glued(w: str) -> tuple[str, str] | None:
    """(head, modal) of a token jieba glued from a pronoun or before/after word and a modal (我会, 前会), else None."""
    if len(w) >= 2 and w[-1] in _ZH_MODAL_CHARS:
        head = w[:-1]
        if head in _ZH_BEFORE_AFTER or (len(head) == 1 and head in _ZH_PRONOUN_CHARS):
            return head, w[-1]
    return None


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
    clause = ctx.text[ann.idx[lo] : _tok_end(ann, hi - 1)].strip()
    after = ctx.text[_tok_end(ann, hi - 1) :].lstrip()[:1]
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
    while (
        j < hi
        and not in_time[j]
        and _zh_nounish(ann.tag[j])
        and ann.tokens[j] not in _ZH_PRONOUNS
        and _zh_glued(ann.tokens[j]) is None
    ):
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
    pending_cause: list[tuple[int, EntityRef]] = []  # (index of the next fact, cause entity)
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
                beneficiary: EntityRef | None = None
                if j > i + 1:
                    beneficiary = _zh_entity_for(ctx, i + 1, j, "PERSON" if _zh_personish(ann, i + 1, j) else None)
                elif i + 1 < hi and ann.tokens[i + 1] in _ZH_PRONOUNS:
                    j = i + 2
                    beneficiary = pronoun_ref(ctx, ann.tokens[i + 1], ann.idx[i + 1], _tok_end(ann, i + 1))
                if j > i + 1 and j < hi and (_zh_is_verb(ann, j) or ann.tokens[j] in _ZH_MODAL):
                    if beneficiary is not None:
                        extra.append(Role(_ZH_BENEFIT_PREP[w], beneficiary, ROLES_EXTRA))
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
            glued = _zh_glued(w)
            if glued is not None:  # 我会 → 我 (the subject) + 会 (a modal); 前会 → 前 + 会 (after a time noun)
                head, modal = glued
                modality = modality or _ZH_MODAL.get(modal)
                if not agent_seen and head in _ZH_PRONOUN_CHARS:
                    agent_seen = True
                    agent = pronoun_ref(ctx, head, ann.idx[i], ann.idx[i] + len(head))
                i += 1
                continue
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
                if j < hi and (
                    ann.tokens[j] in _ZH_BEFORE_AFTER or (_zh_glued(ann.tokens[j]) or ("",))[0] in _ZH_BEFORE_AFTER
                ):
                    i = j  # 晚饭前(会)回来: "before dinner" says when, it is not the subject
                    continue
                agent_seen = True
                # 朋友张伟: a person noun in apposition to a name — the name is the subject
                k0 = next((k for k in range(i, j) if ann.tag[k].startswith("nr")), i)
                k0 = k0 if all(ann.tokens[k] in PERSON_NOUNS_ZH for k in range(i, k0)) else i
                agent = _zh_entity_for(ctx, k0, j, "PERSON" if _zh_personish(ann, k0, j) else None)
                i = j
                continue
            i += 1
        clause_text = ctx.text[ann.idx[lo] : _tok_end(ann, hi - 1)]
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
            if (
                obj is None
                and recipient is None
                and k < hi
                and ann.tokens[k] in _ZH_PRONOUNS
                and not in_time[k]
                and (k + 1 >= hi or not (ann.tokens[k + 1] == "的" or _zh_nounish(ann.tag[k + 1])))
            ):
                patient = pronoun_ref(ctx, ann.tokens[k], ann.idx[k], _tok_end(ann, k))  # 我喜欢她
            obj_name = ctx.text[ann.idx[k] : _tok_end(ann, j - 1)] if obj else ""
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
        if (
            pred >= 0
            and len(parts) == 1
            and ann.tokens[pred] in LIGHT_VERBS_ZH
            and not any(r.type != "AGENT" and (agent is None or r.target.norm != agent.norm) for r in roles)
        ):
            continue  # 帮我…, 我去, 是: a light verb with no participant but the doer (v2)
        cs_clause, ce_clause = ann.idx[lo], _tok_end(ann, hi - 1)
        ftime, ftext = _time_roles(
            [tr for tr in times if cs_clause <= tr.start and tr.end <= ce_clause],
            roles,
            modality in FUTURE_MODALITIES,
            ctx.ts,
        )
        clause_ents = [ref for s, e, ref in ents if lo <= s and e <= hi]
        mentions = _dedup_refs([r.target for r in roles] + companions + clause_ents)
        surface = ctx.text[ann.idx[surface_lo] : _tok_end(ann, max(surface_lo, surface_hi - 1))]
        prefix = "" if pred >= 0 and ann.tokens[pred] == neg_word else neg_word
        title = " ".join(x for x in ((agent.name if agent else ""), prefix + surface) if x)
        facts.append(
            FactDraft(
                index=ci,
                predicate_norm="_".join(parts),
                subtype=subtype,
                negation=negation,
                modality=modality,
                start=cs_clause,
                end=ce_clause,
                title=clip(title, 120),
                keywords=_dedup(content_words(ann, lo, hi) + [p for part in parts for p in part.split("_")]),
                provenance=FACT_ZH,
                roles=roles,
                mentions=mentions,
                time=ftime,
                time_text=ftext,
                cause_marker=(marker, None) if marker else None,
            )
        )
    return facts
