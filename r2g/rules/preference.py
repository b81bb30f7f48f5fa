"""What the speaker wants: preference and instruction sentences (r2g.rule.preference.v1) and plans, to-dos
and reminders (r2g.rule.task.v1), English and Chinese side by side."""

from __future__ import annotations

import re
from datetime import timedelta

from r2g.rules.common import SUMMARY_MAX_CHARS, _dedup_refs, _tok_end, clip, content_words, speaker_rule
from r2g.rules.drafts import EntityRef, FactDraft, MessageCtx, PreferenceDraft, TaskDraft

_ONE_DAY = timedelta(days=1)

# ---------------------------------------------------------------- r2g.rule.preference.v1

_EN_PREF = [
    (re.compile(r"\b(?:i|we)\s+(?:really\s+|much\s+|would\s+|'d\s+)?prefer\b", re.I), "prefer"),
    (
        re.compile(r"\bfrom now on\b|\bgoing forward\b|\bin the future,?\s+(?:please|always|never)\b", re.I),
        "instruction",
    ),
    (re.compile(r"^\s*(?:please\s+)?(?:always|never|don't|do not|stop)\s+\w+", re.I), "instruction"),
    (
        re.compile(r"\bplease\s+(?:always|never|don't|do not|use|answer|reply|respond|call|write|speak|keep)\b", re.I),
        "instruction",
    ),
    (
        re.compile(
            r"\b(?:i|we)\s+(?:really\s+|absolutely\s+)?"
            r"(?:hate|dislike|can't stand|cannot stand|don't like|do not like|don't enjoy)\b",
            re.I,
        ),
        "dislike",
    ),
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
            out.append(
                PreferenceDraft(
                    si, sub, cs, ce, clip(sent, SUMMARY_MAX_CHARS), content_words(ann, s, e), _dedup_refs(ents)
                )
            )
            break
    return out


# ---------------------------------------------------------------- r2g.rule.task.v1

_EN_REMIND = re.compile(
    r"\b(?:remind me to|don't forget to|do not forget to|remember to|to-?do:?|my to-?do list)\b", re.I
)
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
        future = (
            f.time is not None
            and ctx.ts is not None
            and f.time.start is not None
            and f.time.start >= ctx.ts.replace(hour=0, minute=0, second=0, microsecond=0) + _ONE_DAY
        )
        if sub is None and f.modality == "will" and future:
            sub = "plan"
        if sub is None:
            continue
        out.append(
            TaskDraft(
                len(out),
                sub,
                f.start,
                f.end,
                clip(ctx.text[f.start : f.end], SUMMARY_MAX_CHARS),
                f.keywords,
                k,
                f.time,
                f.time_text,
            )
        )
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
        fk = inside[-1] if inside else None  # "remind me to call mom": the last clause is the task
        task_fact = facts[fk] if fk is not None else None
        out.append(
            TaskDraft(
                len(out),
                "reminder",
                cs,
                ce,
                clip(ctx.text[cs:ce], SUMMARY_MAX_CHARS),
                content_words(ann, s, e),
                fk,
                task_fact.time if task_fact else None,
                task_fact.time_text if task_fact else None,
            )
        )
    return out
