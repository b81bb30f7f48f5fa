"""Helpers every rule shares (content words, spans, clipping), and the language-independent rules: time
expressions (r2g.rule.time.v1), the speaker entity (r2g.rule.entity.speaker.v2) and cause pairs
(r2g.rule.cause.v1)."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

from r2g.nlp import Annotation
from r2g.rules.drafts import EntityRef, FactDraft, MessageCtx, Role, TimeRef
from r2g.rules.ids import ENTITY_SPEAKER, TIME
from r2g.time_norm import find_times, resolve
from r2g.time_values import TimeValue
from r2g.tokens import ZH_STOPWORDS

SUMMARY_MAX_CHARS = 200
TITLE_MAX_CHARS = 60

# ---------------------------------------------------------------- shared helpers

_PUNCT_POS = frozenset({"PUNCT", "SPACE", "SYM", "X"})
_EN_FUNCTION_POS = frozenset({"DET", "ADP", "AUX", "CCONJ", "SCONJ", "PART", "PRON", "NUM", "INTJ"})
_WORDISH = re.compile(r"\w", re.UNICODE)


def _dedup(xs: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(x for x in xs if x))


@cache
def _en_stop_words() -> frozenset[str]:
    """spaCy's English stop words, loaded when the first English annotation is read (not with the rules), from the
    list's own module in spaCy's folder: importing it through the package runs spacy/__init__ (~2.5 s of thinc,
    pydantic and registries) in processes that annotate nothing (a graph re-derived from stored annotations, a
    forget request's rebuild)."""
    package = importlib.util.find_spec("spacy")  # a top-level package is found without being imported
    assert package is not None and package.submodule_search_locations, "spaCy is installed (a dependency)"
    path = Path(package.submodule_search_locations[0]) / "lang" / "en" / "stop_words.py"
    spec = importlib.util.spec_from_file_location("_memctl_spacy_en_stop_words", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STOP_WORDS)


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
        stop = _en_stop_words()
        for tok, lemma, pos in zip(ann.tokens, ann.lemma, ann.pos):
            if (pos in _PUNCT_POS and pos != "X") or pos in _EN_FUNCTION_POS:
                out.append(None)
                continue
            lem = lemma.lower().strip()
            ok = lem and _WORDISH.search(lem) and lem not in stop and tok.lower() not in stop
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


def _dedup_refs(refs: list[EntityRef]) -> list[EntityRef]:
    seen = set()
    out = []
    for r in refs:
        k = (r.subtype, r.norm)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


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


def _labelled_ents(ctx: MessageCtx, labels: dict[str, str]) -> Iterator[tuple[int, int, str, int, int]]:
    """(start_tok, end_tok, subtype, char_start, char_end) of the NER spans whose label maps to a subtype."""
    ann = ctx.ann
    for s, e, label in ann.ents:
        sub = labels.get(label)
        if sub is not None:
            yield s, e, sub, ann.idx[s], _tok_end(ann, e - 1)


# ---------------------------------------------------------------- r2g.rule.entity.speaker.v2

# What chat exports put where a name belongs (ChatGPT's "user"/"assistant", a system prompt): a role, not a
# person anyone would remember things about, so no Entity (v2; v1 made "[Entity] assistant").
ROLE_LABELS = frozenset(
    {"assistant", "user", "system", "tool", "function", "developer", "human", "model", "助手", "用户", "系统"}
)


def is_role_label(name: str | None) -> bool:
    """Whether a speaker name is a chat role label (ROLE_LABELS, case-insensitive) rather than a name."""
    return " ".join((name or "").split()).lower() in ROLE_LABELS


def speaker_rule(ctx: MessageCtx) -> EntityRef | None:
    """The message's speaker as a PERSON entity (not located in the text); one per message (rules ask often).
    None for no speaker or a role label (ROLE_LABELS)."""
    if "_speaker" not in ctx.__dict__:
        name = " ".join((ctx.speaker or "").split())
        ok = name and not is_role_label(name)
        ctx.__dict__["_speaker"] = EntityRef("PERSON", name, -1, -1, ENTITY_SPEAKER) if ok else None
    return ctx.__dict__["_speaker"]


_BARE_WEEKDAY = re.compile(
    r"^(?:on\s+)?(?:mon|tues|wednes|thurs|fri|satur|sun)day$|^(?:周|星期|礼拜)[一二三四五六日天]$", re.I
)
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
    return TimeRef(
        tr.start,
        tr.end,
        tr.tok_start,
        tr.tok_end,
        tr.text,
        TimeValue(v.start + week, v.end + week, v.granularity, v.text, v.period),
    )


def _time_roles(
    times: list[TimeRef], roles: list[Role], future: bool = False, ts: datetime | None = None
) -> tuple[TimeValue | None, str | None]:
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
            elif k + 1 < len(facts) and (nxt := facts[k + 1].cause_marker) and nxt[0] == "so":
                continue  # 因为…，所以…: the "so" clause links itself to this one
            elif k > 0:
                pairs.append((k, k - 1))
            elif k + 1 < len(facts):
                pairs.append((k, k + 1))
        elif kind == "so" and k > 0:
            pairs.append((k - 1, k))
    return list(dict.fromkeys(pairs))
