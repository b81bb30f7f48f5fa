"""Time normalisation: relative and absolute time expressions → ISO interval + granularity.

Both languages share one shape: a table of (regex, resolver) rules (r2g.time_en,
r2g.time_zh; the values and intervals they build are r2g.time_values). `resolve`
full-matches one expression (e.g. an NER DATE span); `find_times` scans a text
for every expression the rules know. Relative expressions need the message
timestamp as anchor; without one only absolute dates resolve. Weeks start on
Monday; intervals are [start, end) in naive wall-clock time, like the message ts.

Granularities beyond the exact ones (day, week, month, year, part_of_day):

- ``unspecified`` — a vague count ("a few days ago", 几天前, 前几天): the window of
  every day/week/… the count could mean (few = 2–5, a couple = 2–3, several = 3–7),
  labelled ``first/last`` by `TimeValue.iso`.
- ``recurring`` — a habit ("on Sundays", "every day", "Sunday mornings", 每周日,
  每天, 每晚): it is not one day, so the value says so. [start, end) is the
  occurrence in effect at, or most recently before, the anchor (never one in the
  future, so a fact's time never lies ahead of the message that states it);
  `TimeValue.period` holds the ISO-8601 repeat duration (P1D, P1W, P2W, P1M, P1Y)
  and `iso` is an ISO-8601 repeating interval, ``R/2023-05-07/P1W``. Like other
  relative expressions it needs the anchor.

Unresolvable on purpose: "recently", "sometimes", 最近 — no rule matches them.
Bump RULES_VERSION whenever what `find_times` finds or `resolve` returns changes
(the Chinese NLP pipeline stores find_times spans as TIME entities).
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

from r2g.time_en import EN_RESOLVE_ONLY, EN_RULES, en_rules_for
from r2g.time_values import Resolved, Resolver, TimeMention, TimeValue
from r2g.time_zh import ZH_RESOLVE_ONLY, ZH_RULES

RULES_VERSION = "time_norm.v2"


def _rules(lang: str) -> list[tuple[re.Pattern, Resolver]]:
    return ZH_RULES if lang == "zh" else EN_RULES


def _any_rule(rules: list[tuple[re.Pattern, Resolver]]) -> re.Pattern:
    """One pattern matching wherever any rule does (groups made non-capturing): a prefilter, so the
    common message with no time expression costs one regex search instead of one per rule."""
    body = "|".join("(?:" + re.sub(r"\(\?P<\w+>", "(?:", p.pattern) + ")" for p, _ in rules)
    return re.compile(body, rules[0][0].flags)


_ANY = {"en": _any_rule(EN_RULES), "zh": _any_rule(ZH_RULES)}


def _value(r: Resolved, text: str) -> TimeValue:
    return TimeValue(r[0], r[1], r[2], text, r[3] if len(r) > 3 else None)


_EN_STRIP = re.compile(r"^(?:on|in|at|during|by|since|from|until|over|the)\s+", re.IGNORECASE)


def _candidates(e: str, lg: str) -> list[str]:
    """The forms of an expression tried against `lg`'s rules: as is, then with up to two leading prepositions off
    ("in two days" is a rule of its own; "on the weekend" → "weekend")."""
    if lg == "zh":
        return [e]
    out = [e.lower()]
    for _ in range(2):
        nxt = _EN_STRIP.sub("", out[-1]).strip()
        if nxt == out[-1]:
            break
        out.append(nxt)
    return out


def resolve(expr: str, anchor: datetime | None, lang: str) -> TimeValue | None:
    """The TimeValue of one whole time expression, or None when no rule resolves it.

    `anchor` (the message ts) resolves relative expressions; None → absolute only.
    Chinese rules also apply to an English-tagged message and vice versa, since
    mixed-language messages carry both.
    """
    raw = expr.strip()
    e = raw.strip(" ,.;!?，。；！？")
    if not e:
        return None
    for fn, m in _full_matches(e, lang):
        r = fn(m, anchor)
        if r is not None:
            return _value(r, raw)
    return None


@lru_cache(maxsize=1 << 14)
def _full_matches(e: str, lang: str) -> tuple[tuple[Resolver, re.Match], ...]:
    """Every (resolver, match) of the rules matching all of `e`, in the order resolve tries them. It does not
    depend on the anchor, and the same expressions (today, 昨天, last week) recur in message after message."""
    out = []
    for lg in (lang, "en" if lang == "zh" else "zh"):
        rules = _rules(lg) + (ZH_RESOLVE_ONLY if lg == "zh" else EN_RESOLVE_ONLY)
        for cand in _candidates(e, lg):
            for pat, fn in rules:
                m = pat.fullmatch(cand)
                if m:
                    out.append((fn, m))
    return tuple(out)


_BOUNDARY = re.compile(r"\w")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_OR_DIGIT = re.compile(r"[A-Za-z0-9]")


def find_times(text: str, lang: str, anchor: datetime | None) -> list[TimeMention]:
    """Every time expression the rules recognise in `text`, longest-first and non-overlapping, in text order.

    English matches must sit on word boundaries; Chinese matches need none.
    Mentions that need an anchor are returned with value None when anchor is None.
    """
    cands: list[tuple[int, int, Resolver, re.Match]] = []
    # a language's rules only run when the text has its script (mixed messages get both)
    langs = [lg for lg, script in (("zh", _HAN), ("en", _LATIN_OR_DIGIT)) if script.search(text)]
    for lg in langs:
        subject, rules = text, _rules(lg)
        if lg == "en" and len(low := text.lower()) == len(text):  # same offsets (a few characters lower-case to two)
            subject, rules = low, en_rules_for(low)
            if not rules:
                continue
        elif not _ANY[lg].search(subject):
            continue
        for pat, fn in rules:
            for m in pat.finditer(subject):
                s, e = m.span()
                if s == e:
                    continue
                if lg == "en" and (
                    (s > 0 and _BOUNDARY.match(text[s - 1])) or (e < len(text) and _BOUNDARY.match(text[e]))
                ):
                    continue
                cands.append((s, e, fn, m))
    cands.sort(key=lambda c: (c[0] - c[1], c[0]))  # longest first, then leftmost
    taken: list[tuple[int, int]] = []
    out: list[TimeMention] = []
    for s, e, fn, m in cands:
        if any(s < te and ts < e for ts, te in taken):
            continue
        taken.append((s, e))
        r = fn(m, anchor)
        surface = text[s:e]
        out.append(TimeMention(s, e, surface, _value(r, surface) if r else None))
    out.sort(key=lambda t: t.start)
    return out
