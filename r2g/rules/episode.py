"""One turn as an Episode: importance (r2g.rule.importance.v1), topic blocks of a long text
(r2g.rule.topic_block.v1), title and extractive summary (r2g.rule.episode.v1), and the conversation's
TEMPORAL_NEXT chain (r2g.rule.temporal_next.v1)."""

from __future__ import annotations

import re

from r2g.rules.common import SUMMARY_MAX_CHARS, TITLE_MAX_CHARS, _tok_end, clip, content_words
from r2g.rules.drafts import EpisodeDraft, MessageCtx

# ---------------------------------------------------------------- r2g.rule.importance.v1

_LIFE_EVENTS_EN = frozenset(
    """
born birth birthday marry married marriage wedding engaged engagement divorce divorced pregnant pregnancy baby
adopt adoption graduate graduation degree die died death funeral pass hire hired fire fired job promotion promote
retire retirement move moved relocate house apartment diagnose diagnosed cancer surgery hospital accident
anniversary transition propose proposal breakup quit start business enroll admitted
""".split()
)
_LIFE_EVENTS_ZH = (
    "出生",
    "生日",
    "结婚",
    "婚礼",
    "订婚",
    "离婚",
    "怀孕",
    "宝宝",
    "领养",
    "收养",
    "毕业",
    "学位",
    "去世",
    "葬礼",
    "入职",
    "辞职",
    "升职",
    "被裁",
    "退休",
    "搬家",
    "买房",
    "确诊",
    "手术",
    "住院",
    "车祸",
    "周年",
    "求婚",
    "分手",
    "创业",
    "录取",
)
_LIFE_EVENTS_ZH_RE = re.compile("|".join(map(re.escape, _LIFE_EVENTS_ZH)))
# matched against lower-cased text: case-sensitive patterns let re skip ahead on their first characters
_NAME_CUES = re.compile(r"\bmy name is\b|\bi'?m called\b|\bcall me\b|\bbirthday\b|我叫|名字|生日")
_NAME_CUE_WORDS = ("name", "call", "birthday", "我叫", "名字", "生日")  # every _NAME_CUES match holds one
_IMPORTANCE_BASE = {"Preference": 0.6, "Task": 0.55, "Fact": 0.35, "Episode": 0.25, "Concept": 0.5}
_SMALL_TALK = re.compile(
    r"^\W*(?:hi|hey|hello|yo|thanks?|thank you|thx|ok(?:ay)?|sure|lol|haha+|hah|yeah|yep|yes|no|nope|cool|nice|"
    r"great|wow|bye|good ?night|good ?morning|see you|ttyl|np|you're welcome|"
    r"你好|您好|嗨|哈+|嗯+|好的?|谢谢|多谢|再见|拜拜|晚安|早安|早上好|收到|行|可以|哦+|噢+)\W*$",
    re.I,
)


def importance(
    kind: str,
    text: str,
    lang: str,
    words: list[str],
    *,
    n_entities: int = 0,
    n_roles: int = 0,
    n_facts: int = 0,
    n_prefs: int = 0,
) -> float:
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

TOPIC_BLOCK_MIN_SENTS = 8  # a turn is "long" from this many sentences …
TOPIC_BLOCK_MIN_CHARS = 500  # … and characters on
TOPIC_BLOCK_MIN_LEN = 3  # sentences per block at least


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
        left = set().union(*words[max(0, g - 2) : g])
        right = set().union(*words[g : g + 2])
        sims.append(len(left & right) / len(left | right) if left | right else 0.0)
    depths = []
    for k, v in enumerate(sims):
        lpeak = max(sims[: k + 1])
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


def episode_rule(
    ctx: MessageCtx,
    n_entities: int,
    n_facts: int,
    n_prefs: int,
    block: tuple[int, int] | None = None,
    n_blocks: int = 1,
) -> EpisodeDraft:
    """Title, extractive summary, keywords and importance of one turn (or of one topic block of it).

    Summary: the most informative sentences (content words + entities), kept in
    text order, at most SUMMARY_MAX_CHARS; a one-sentence message is that sentence.
    Keywords: every content word of the turn/block, so BM25 finds all of it.
    `block` is a sentence-index span from topic_blocks.
    """
    ann = ctx.ann
    sents = [(s, e) for s, e in ann.sents if e > s]
    if block is not None:
        sents = sents[block[0] : block[1]]
    texts = []
    for k, (s, e) in enumerate(sents):
        text = " ".join(ctx.text[ann.idx[s] : _tok_end(ann, e - 1)].split())
        if text:
            texts.append((k, s, e, text))
    if len(texts) == 1:
        summary = clip(texts[0][3], SUMMARY_MAX_CHARS)
    else:
        ent_toks = {k for s, e, _ in ann.ents for k in range(s, e)}
        scored = [
            (len(content_words(ann, s, e)) + 2 * sum(1 for t in range(s, e) if t in ent_toks), k, text)
            for k, s, e, text in texts
        ]
        chosen: list[tuple[int, str]] = []
        used = 0
        for _score, k, text in sorted(scored, key=lambda x: (-x[0], x[1])):
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
        span = ctx.text[ann.idx[lo_tok] : _tok_end(ann, hi_tok - 1)]
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
