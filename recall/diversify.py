"""What recall shows of its ranked candidates: maximal marginal relevance as the final score (a result citing the
same bytes or words as a better one loses score), and the token budget (the results that fit with the most score)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import TYPE_CHECKING

from recall.query_tokens import search_tokens

if TYPE_CHECKING:  # engine imports this module
    from recall.citations import RawRef
    from recall.config import RecallConfig
    from recall.engine import RecallResult

# Node types extracted from one turn: their raw_refs point into the turn they came from.
TURN_LEVEL = frozenset({"Episode", "Fact", "Preference", "Task"})
# Node types gathered over many turns: their raw_refs are sample mentions.
AGGREGATE = frozenset({"Entity", "Concept"})


_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def estimate_tokens(text: str) -> int:
    """Tokens an LLM tokenizer makes of `text`, roughly: one per CJK character, one per 4 other characters."""
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


def result_tokens(r: RecallResult) -> int:
    """Tokens a cited result costs in a prompt: its title, its text and its citation excerpts (estimated)."""
    return estimate_tokens(r.title) + estimate_tokens(r.text) + sum(estimate_tokens(c.excerpt) for c in r.citations)


@lru_cache(maxsize=1 << 16)
def mmr_tokens(text: str) -> frozenset[str]:
    """The words MMR compares results by: their search tokens (cached: the same cards come back query after
    query). Chinese goes through recall.query_tokens, so an English question whose candidates hold Chinese
    text no longer loads jieba's whole dictionary (~1 s of a cold CLI's "mmr" stage before)."""
    return frozenset(search_tokens(text))


# What MMR compares of a candidate, made once per candidate (not per pair): whether it is a card, its first three
# raw_refs, its words.
_Key = tuple[bool, "Sequence[RawRef]", AbstractSet[str]]


def _similar(a: _Key, b: _Key) -> float:
    """1.0 when two turn-level results cite overlapping bytes (an Episode and a Fact of the same turn), else the
    Jaccard overlap of their title+text words (mmr_tokens). An entity, topic or rollup card's raw_refs are
    sample mentions, not what it cites for this query: they make no line its duplicate."""
    if not (a[0] or b[0]):
        for x in a[1]:
            for y in b[1]:
                if x.raw_id == y.raw_id and x.offset < y.offset + y.length and y.offset < x.offset + x.length:
                    return 1.0
    ta, tb = a[2], b[2]
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


def _is_card(r: RecallResult, cards: frozenset[str] | set[str]) -> bool:
    return r.type in AGGREGATE or r.node_id in cards


def mmr(
    ranked: list[tuple[RecallResult, list[RawRef]]],
    k: int,
    cfg: RecallConfig,
    hint: Mapping[str, Sequence[str]] | None = None,
    cards: frozenset[str] | set[str] = frozenset(),
) -> list[tuple[RecallResult, list[RawRef]]]:
    """Maximal marginal relevance over the best candidates, as the results' final score.

    Each pick maximises score − penalty, penalty = (1−λ)/λ · top · (max similarity to what is already
    picked): λ·score/top − (1−λ)·similarity in score units. A candidate at least cfg.mmr_threshold similar
    to a pick (the same line as Episode and as Fact) keeps at most (1 − similarity) of its score; no score
    falls below 0. The
    pick's final score is that gain (breakdown "mmr": what MMR took off, "mmr_similarity"); a candidate's
    gain only falls as picks are added, so the results come out in non-increasing final score: the printed
    order is the ranking. λ = 1 keeps score order and scores."""
    if cfg.mmr_lambda >= 1.0 or len(ranked) <= 1:
        return ranked[:k]
    pool = ranked[: max(k, cfg.mmr_pool)]
    top = pool[0][0].score or 1.0
    weight = (1 - cfg.mmr_lambda) / max(cfg.mmr_lambda, 1e-9) * top
    hint = hint or {}
    tokens = {
        r.node_id: frozenset(hint[r.node_id]) if r.node_id in hint else mmr_tokens(f"{r.title} {r.text}")
        for r, _ in pool
    }

    def gain(score: float, sim: float) -> float:
        g = score - weight * sim
        return max(0.0, min(g, score * (1.0 - sim)) if sim >= cfg.mmr_threshold else g)

    picked: list[tuple[RecallResult, list[RawRef]]] = []
    rest = list(pool)
    best_sim = [0.0] * len(rest)
    keys: list[_Key] = [(_is_card(r, cards), refs[:3], tokens[r.node_id]) for r, refs in rest]
    while rest and len(picked) < k:
        gains = [gain(c[0].score, sim) for c, sim in zip(rest, best_sim)]
        i = gains.index(max(gains))  # the first of the best (a gain is never nan: max(0.0, ·))
        chosen, sim, key = rest.pop(i), best_sim.pop(i), keys.pop(i)
        r = chosen[0]
        r.breakdown["mmr"] = gains[i] - r.score
        r.breakdown["mmr_similarity"] = sim
        r.score = gains[i]
        picked.append(chosen)
        best_sim = [max(s, _similar(other, key)) for other, s in zip(keys, best_sim)]
    return picked


def pack(results: list[RecallResult], budget: int) -> list[RecallResult]:
    """The subset of `results` (in their order) fitting `budget` tokens with the most total score: the better of
    greedy-by-score-per-token and the single best-scoring result that fits (the knapsack 2-approximation)."""
    costs = [max(1, result_tokens(r)) for r in results]
    order = sorted(range(len(results)), key=lambda i: (-results[i].score / costs[i], i))
    chosen, used = set(), 0
    for i in order:
        if used + costs[i] <= budget:
            chosen.add(i)
            used += costs[i]
    fitting = [i for i in range(len(results)) if costs[i] <= budget]
    if fitting:
        single = max(fitting, key=lambda i: (results[i].score, -i))
        if results[single].score > sum(results[i].score for i in chosen):
            chosen = {single}
    return [results[i] for i in sorted(chosen)]
