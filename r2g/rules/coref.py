"""r2g.rule.coref.v1: name variants within a conversation (Mel/Melanie, 明明/小明), canonical names, and who a
pronoun stands for; with the person nouns both languages' rules use."""

from __future__ import annotations

import re

from r2g.rules.common import is_role_label, speaker_rule
from r2g.rules.drafts import EntityRef, MessageCtx
from r2g.rules.ids import COREF

# Nouns that denote a person: "for my mom" is a BENEFICIARY, "my neighbour Xiaoming" a PERSON.
PERSON_NOUNS_EN = frozenset(
    """
friend neighbour neighbor mom mum mother dad father parent sister brother sibling son daughter kid child
wife husband partner boyfriend girlfriend fiance fiancee boss colleague coworker teacher student grandma
grandmother grandpa grandfather granny aunt uncle cousin nephew niece roommate classmate doctor therapist
mentor counselor coach baby family people guy girl boy man woman buddy pal
""".split()
)
PERSON_NOUNS_ZH = frozenset(
    """
妈妈 妈 母亲 爸爸 爸 父亲 爸妈 父母 奶奶 爷爷 外婆 外公 姥姥 姥爷 姐姐 哥哥 弟弟 妹妹 朋友 好友 同事 老师 老板 邻居
女儿 儿子 孩子 老婆 老公 妻子 丈夫 男朋友 女朋友 室友 同学 医生 叔叔 阿姨 舅舅 姑姑 表哥 表姐 宝宝 家人 领导 师傅
""".split()
)
_EN_THIRD_PRON = frozenset({"he", "she", "him", "her"})
_EN_YOU = frozenset({"you"})
_ZH_THIRD_PRON = frozenset({"他", "她"})
_ZH_YOU = frozenset({"你", "您"})
_FIRST_PERSON = frozenset({"i", "me", "we", "us", "myself", "ourselves"})
_ZH_SELF = frozenset({"我", "我们", "咱们", "咱", "本人"})
_HAN = re.compile(r"^[\u4e00-\u9fff]{2,4}$")


def _norm_name(name: str) -> str:
    return " ".join(name.lower().split())


def _zh_short_forms(name: str) -> set[str]:
    """What a Chinese personal name is called for short: 王小明 → 小明; 王明/小明 → 明明, 小明, 阿明."""
    if not _HAN.match(name):
        return set()
    forms = set()
    if len(name) == 3 and name[0] not in "小阿老":
        forms.add(name[1:])  # 王小明 → 小明
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
            cands = [b for b in by_prefix.get(_norm_name(a)[:3], []) if b != a] if " " not in _norm_name(a) else []
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
    name = (
        ctx.you
        if (w in _EN_YOU or w in _ZH_YOU)
        else ctx.third
        if (w in _EN_THIRD_PRON or w in _ZH_THIRD_PRON)
        else None
    )
    return EntityRef("PERSON", name, start, end, COREF) if name and not is_role_label(name) else None
