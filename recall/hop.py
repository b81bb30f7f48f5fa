"""Multi-hop seeds (issue 17 item 2): a question's second evidence line often shares no words with it or with the
first line BM25 finds. Before expansion, stage A's seeds are widened from the best hits:

  prf       pseudo-relevance feedback: the words the best `prf_docs` hits share that the query lacks (counted over
            the hits, query words, stop-words and light verbs left out) go into a second BM25 query, whose hits
            join the seeds at `prf_weight` × their normalised score
  session   the TEMPORAL_NEXT neighbours (the turns before and after) of the best `session_top` seeds join at
            `session_weight` × that seed's score: an answer is often the reply to the line that matched

Each is off at weight 0. RecallConfig ships session seeds on (0.6) and feedback off: cross-validation by
conversation found session seeds worth +3 / +4.6 points on LoCoMo and feedback none (bench/README.md, "Multi-hop
through the graph").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from recall.graph_csr import CsrGraph
from recall.query import EN_STOPWORDS
from recall.query_tokens import search_tokens

# Entity documents end in their label ("city (OBJECT)"): no word of the conversation
LABEL_WORDS = frozenset({"object", "person", "loc", "org", "misc", "time", "gpe", "norp", "fac", "event"})

if TYPE_CHECKING:  # engine imports this module
    from recall.config import RecallConfig


def feedback_terms(texts: Sequence[str], keywords: Sequence[str], n: int, skip: frozenset[str]) -> list[str]:
    """The `n` words most of `texts` hold (by how many texts hold them, then by first appearance) that are neither
    query keywords nor in `skip`; words of one or two Latin letters are left out."""
    known = {_root(k) for k in keywords}
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(
            list(
                dict.fromkeys(
                    _root(w)
                    for w in search_tokens(t)
                    if w not in skip
                    and w not in EN_STOPWORDS
                    and w not in LABEL_WORDS
                    and not (w.isascii() and len(w) < 3)
                )
            )
        )
    return [w for w, _ in counts.most_common(len(counts)) if w not in known][:n]


_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def _root(w: str) -> str:
    """An English word without its plural or -ing/-ed ending ("cities" → "city"): the query's word in another
    form is no new word. BM25 stems the feedback query itself."""
    for suffix, repl in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: len(w) - len(suffix)] + repl
    return w


def prf_seeds(
    texts: Callable[[Sequence[str]], list[str]],
    search: Callable[[str], list[tuple[str, float]]],
    seeds: Mapping[str, float],
    keywords: Sequence[str],
    cfg: RecallConfig,
    skip: frozenset[str],
) -> tuple[dict[str, float], list[str]]:
    """Seeds of the feedback query (× cfg.prf_weight, best = prf_weight) and its words. `texts(ids)`: the title and
    text of those nodes; `search(q)`: BM25 hits (id, score) of a query string."""
    top = list(seeds)[: cfg.prf_docs]
    words = feedback_terms(texts(top), keywords, cfg.prf_terms, skip)
    if not words:
        return {}, []
    hits = search(" ".join([*keywords, *words]))
    best = max((s for _, s in hits), default=0.0) or 1.0
    return {i: cfg.prf_weight * s / best for i, s in hits}, words


def session_seeds(g: CsrGraph, seeds: Mapping[str, float], cfg: RecallConfig) -> dict[str, float]:
    """The turns before and after the best cfg.session_top seeds, at cfg.session_weight × the seed's score (the best
    such seed's, for a turn two seeds border). A Fact's turn is the Episode it was DERIVED_FROM; an Entity or topic
    card has no turn."""
    if "TEMPORAL_NEXT" not in g.edge_types:
        return {}
    tn = g.edge_types.index("TEMPORAL_NEXT")
    derived = g.edge_types.index("DERIVED_FROM") if "DERIVED_FROM" in g.edge_types else -1
    top = list(seeds)[: cfg.session_top]
    out: dict[int, float] = {}
    for nid, v in zip(top, g.slots(top).tolist()):
        if v < 0:
            continue
        nbr, code, _ = g.incident(v)
        turns = [v]
        if not ((code >> 1) == tn).any():  # not an Episode: the Episodes it was derived from (out-edges)
            turns = nbr[((code >> 1) == derived) & ((code & 1) == 0)].tolist()
        for t in turns:
            tnbr, tcode, _ = g.incident(t) if t != v else (nbr, code, None)
            for u in tnbr[(tcode >> 1) == tn].tolist():
                out[u] = max(out.get(u, 0.0), cfg.session_weight * seeds[nid])
            if t != v:  # the Fact's own turn comes in too
                out[t] = max(out.get(t, 0.0), cfg.session_weight * seeds[nid])
    if not out:
        return {}
    order = sorted(out)
    return dict(zip(g.ids(order), (out[u] for u in order)))


def merge(seeds: dict[str, float], extra: Mapping[str, float]) -> None:
    """Extra seeds into `seeds` (the larger score where both have a node), in place; new ones after the old."""
    for i, s in extra.items():
        if s > seeds.get(i, 0.0):
            seeds[i] = s
