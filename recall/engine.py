"""recall(): query → BM25 seeds → k-hop graph expansion → scored, cited memories (no LLM).

Stages (each reported in `trace`):
  keywords   search tokens of the query minus stop-words (jieba for Chinese)
  analyze    intent, stated times (resolved against the newest memory), names matched to Entities
  seeds      Stage A: BM25 over the tenant's node FTS index
  raw        W5 raw fallback: BM25 over raw passages when node seeds are weak
             or the query holds code-like tokens (hex, UUID, URL, path, error code)
  prf        (off by default) pseudo-relevance feedback: the best hits' words as a second BM25 query (recall.hop)
  session    the turns before and after the best seeds join the seeds (recall.hop)
  expand     Stage C: 0..expand_depth hops on the tenant's graph (CSR arrays), hubs not expanded, then PPR
  score      λ1*bm25 + λ3*graph + λ4*weight(node) (importance, log frequency, recency), filters applied,
             × (1 + speaker_boost) for a line said by someone the question names
  mmr        de-duplication: a result citing the same bytes or words as a better one loses score
             (breakdown "mmr"), and results are in the order of their final score
  cite       raw_refs → sha-verified excerpts from the raw store; a blob that cannot be read
             (quarantined, missing, forgotten) is named in the result's `unavailable` and here
  budget     (with budget_tokens) the results that fit the token budget with the most score

Stage B (recall.vectors, static embedders) is off by default (vectors_enabled): hits seed and score with λ2.

Degradation (seed 004 §18): RecallConfig.graph_enabled / bm25_enabled / vectors_enabled /
raw_fallback switch a stage off; a vector file that is missing or built by another embedder drops
stage B; a tenant graph that is missing or unreadable drops stage C and says so in the
trace; recall still answers from what is left.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, overload

import numpy as np

from raw_store.cas import RawStore
from raw_store.lake import Lake
from recall import hop, scoring, vectors
from recall.candidates import NO_CONTENT_WORDS, Scored, matched_line, read_details, with_content
from recall.citations import Citation, Citer, RawRef
from recall.config import RecallConfig
from recall.diversify import AGGREGATE, estimate_tokens, mmr, pack, result_tokens
from recall.expand import expand
from recall.query import QueryAnalysis, analyze, has_code_token, query_keywords
from recall.query_tokens import search_tokens
from recall.scoring import SCORE_COLUMNS, NodeBatch, node_span, node_weight, recency_of
from recall.store import IndexFormatOutdated, IndexNotBuilt, TenantInfo, TenantReader, tenant_reader
from recall.tenant_index import TenantIndex, open_tenant_index

__all__ = [
    "Citation",
    "Filters",
    "RecallResult",
    "recall",
    "ranked_turns",
    "query_keywords",
    "estimate_tokens",
    "result_tokens",
]


@dataclass
class RecallResult:
    node_id: str
    type: str
    title: str
    text: str
    score: float
    breakdown: dict[str, float]
    citations: list[Citation]
    evidence: list[dict]  # edges that brought it in: {src, type, dst}
    # citations that could not be read: {raw_id, error, reason} (a quarantined, missing or forgotten blob)
    unavailable: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "node_id": self.node_id,
            "type": self.type,
            "title": self.title,
            "text": self.text,
            "score": round(self.score, 6),
            "breakdown": {k: round(v, 6) for k, v in self.breakdown.items()},
            "citations": [c.to_json() for c in self.citations],
            "evidence": [dict(e) for e in self.evidence],
            "unavailable": [dict(u) for u in self.unavailable],
        }


class _Trace:
    def __init__(self, sink: list | None) -> None:
        self.sink = sink
        self.t = time.perf_counter()

    def stage(self, name: str, n: int, **detail: Any) -> None:
        now = time.perf_counter()
        if self.sink is not None:
            self.sink.append({"stage": name, "ms": round((now - self.t) * 1000, 3), "n": n, "detail": detail})
        self.t = now


@dataclass(frozen=True)
class Filters:
    """What a recall may return (seed 000 `search_memories`): node types, a time range, an as-of date.

    time_range: (start, end), either end open (None); a memory matches when its time
    span [time_start or first_seen, time_end or last_seen] overlaps the range (a raw
    passage: the time of its matching messages). as_of: only memories first seen on or
    before it — results, and the nodes expansion may walk through. Datetimes are naive
    UTC like the tables (an aware one is converted).
    """

    types: frozenset[str] | None = None
    start: datetime | None = None
    end: datetime | None = None
    as_of: datetime | None = None

    @classmethod
    def make(
        cls,
        types: Sequence[str] | None = None,
        time_range: tuple[datetime | None, datetime | None] | None = None,
        as_of: datetime | None = None,
    ) -> Filters:
        start, end = time_range if time_range is not None else (None, None)
        if start is not None and end is not None and _naive(start) > _naive(end):
            raise ValueError("time_range start is after its end")
        return cls(frozenset(types) if types else None, _naive(start), _naive(end), _naive(as_of))

    def known(self, first_seen: datetime | None) -> bool:
        return self.as_of is None or (first_seen is not None and first_seen <= self.as_of)

    def in_range(self, lo: datetime | None, hi: datetime | None) -> bool:
        if self.start is None and self.end is None:
            return True
        lo, hi = lo or hi, hi or lo
        if lo is None or hi is None:
            return False  # a memory with no time cannot be shown to fall in the range
        return (self.end is None or lo <= self.end) and (self.start is None or hi >= self.start)

    def node(self, row: Mapping) -> bool:
        if self.types is not None and row["type"] not in self.types:
            return False
        if not self.known(row.get("first_seen")):
            return False
        return self.in_range(*node_span(row))

    def message(self, ts: datetime | None) -> bool:
        return self.known(ts) and self.in_range(ts, ts)


@overload
def _naive(t: datetime) -> datetime: ...
@overload
def _naive(t: None) -> None: ...
@overload
def _naive(t: datetime | None) -> datetime | None: ...
def _naive(t: datetime | None) -> datetime | None:
    if t is None or t.tzinfo is None:
        return t
    return t.astimezone(UTC).replace(tzinfo=None)


def recall(
    query: str,
    tenant: str,
    k: int = 10,
    expand_depth: int = 1,
    *,
    lake: Lake | None = None,
    types: Sequence[str] | None = None,
    trace: list | None = None,
    config: RecallConfig | None = None,
    time_range: tuple[datetime | None, datetime | None] | None = None,
    as_of: datetime | None = None,
    budget_tokens: int | None = None,
) -> list[RecallResult]:
    """Ranked, cited memories of `tenant` for `query`.

    `types`, `time_range` and `as_of` filter what comes back (see Filters);
    `budget_tokens` packs the results into that many tokens (title, text and
    citation excerpts, estimated), keeping the most score per token.
    Raises ValueError for an empty tenant or a bad filter, IndexNotBuilt when the
    lake has no index. An empty query, or a tenant the index does not hold, gives
    []. Results never include another tenant's nodes, edges or excerpts.
    """
    if not tenant:
        raise ValueError("tenant is required")
    if expand_depth < 0:
        raise ValueError("expand_depth must be 0 or more")
    if budget_tokens is not None and budget_tokens < 0:
        raise ValueError("budget_tokens must be 0 or more")
    filters = Filters.make(types, time_range, as_of)
    if k <= 0:
        return []
    cfg = config or RecallConfig()
    lake = lake or Lake.from_env()
    tr = _Trace(trace)

    keywords = query_keywords(query)
    code_like = has_code_token(query)
    tr.stage("keywords", len(keywords), keywords=keywords, code_like=code_like)
    if not keywords:
        return []
    with _cyclic_gc_paused():
        reader = _reader(lake, tenant)
        if reader is None:
            tr.stage("seeds", 0, reason="tenant not in index")
            return []
        try:
            return _recall(reader, lake, query, keywords, code_like, k, expand_depth, filters, budget_tokens, cfg, tr)
        finally:
            reader.close()
            _freeze_long_lived()


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The cyclic GC off while one recall runs. A query makes no reference cycles (tests/test_recall_output.py
    pins it), so a collection inside it frees nothing and only walks the query's own live objects: 2-8 full
    passes per 200 bench queries at 35-45 ms each, the top of the p95 tail. Refcounting frees everything as
    before; the collections run between queries instead, over a small live set. Re-enabled only if it was on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


_FROZEN = False


def _freeze_long_lived() -> None:
    """After the process's first recall, hide what is alive then (modules, the opened index) from the cyclic GC.

    Its full passes otherwise walk all of it, 40-80 ms each, a few times per hundred warm queries (the p95 spikes
    in bench/README.md). gc.freeze changes no result: refcounting still frees everything; only a reference cycle
    alive at that moment is never collected. A full collection first, so no cycle that is garbage already is kept."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.collect()
        gc.freeze()


def _reader(lake: Lake, tenant: str) -> TenantIndex | TenantReader | None:
    """The tenant's recall index (recall.tenant_index); None when it holds no such tenant. A lake indexed before
    that index existed (its DuckDB file only) still answers through DuckDB, without stage C, until rebuilt."""
    try:
        return open_tenant_index(lake.index_dir, tenant)
    except IndexFormatOutdated as e:
        if str(e) not in _OUTDATED:  # said once per index and process (a server answers many queries)
            _OUTDATED.add(str(e))
            _log.warning(
                "memctl: %s. Answering from the DuckDB file, without graph expansion, until `memctl materialize` "
                "rebuilds it.",
                e,
            )
        return tenant_reader(lake, tenant)
    except IndexNotBuilt:
        return tenant_reader(lake, tenant)


_log = logging.getLogger(__name__)
_OUTDATED: set[str] = set()


def _recall(
    reader: TenantIndex | TenantReader,
    lake: Lake,
    query: str,
    keywords: list[str],
    code_like: bool,
    k: int,
    expand_depth: int,
    filters: Filters,
    budget_tokens: int | None,
    cfg: RecallConfig,
    tr: _Trace,
) -> list[RecallResult]:
    info = reader.info()
    if info is None:
        tr.stage("seeds", 0, reason="tenant not in index")
        return []
    q = " ".join(keywords)
    # relative times ("last week", 上周) mean the conversation's last week: anchored at the newest memory
    analysis = analyze(query, info.newest, keywords)
    named = _named_entities(reader, analysis.names) if cfg.bm25_enabled else []
    tr.stage("analyze", len(named), **analysis.to_json(), entities=named)

    seeds = _normalise(reader.node_bm25(info, q, cfg.seed_limit)) if cfg.bm25_enabled else {}
    for eid in named:  # a named entity seeds the expansion even where BM25 ranked it low
        seeds[eid] = max(seeds.get(eid, 0.0), cfg.named_entity_seed)
    tr.stage("seeds", len(seeds), top=[(i, round(s, 4)) for i, s in list(seeds.items())[:5]])
    if cfg.prf_weight > 0 and seeds:
        extra, words = hop.prf_seeds(
            lambda ids: [f"{r['title'] or ''} {r['text'] or ''}" for r in reader.nodes(ids).values()],
            lambda text: reader.node_bm25(info, text, cfg.seed_limit),
            seeds,
            keywords,
            cfg,
            NO_CONTENT_WORDS,
        )
        hop.merge(seeds, extra)
        tr.stage("prf", len(extra), words=words)

    vec: dict[str, float] | None = None
    if cfg.vectors_enabled and cfg.lambda_vector > 0:  # λ2 = 0 is stage B off: the same results as without it
        spec = vectors.embedder_spec() if cfg.vector_embedder is None else cfg.vector_embedder
        hits, vec_state = vectors.search(lake, info.slug, query, cfg.vector_limit, spec)
        vec = vectors.rescaled(hits) if cfg.vector_minmax else dict(hits)  # cosines in [0, 1] either way
    else:
        vec_state = "off" if not cfg.vectors_enabled else "off (lambda_vector 0)"
    tr.stage(
        "vectors", len(vec or ()), state=vec_state, top=[(i, round(s, 4)) for i, s in list((vec or {}).items())[:5]]
    )
    expand_from = dict(seeds)  # the expansion starts from stage A's and stage B's seeds alike
    for nid, s in (vec or {}).items() if cfg.vector_seed > 0 else ():
        expand_from[nid] = max(expand_from.get(nid, 0.0), cfg.vector_seed * s)

    raw_hits: dict[str, float] = {}
    trigger = "code_token" if code_like else "few_seeds" if len(seeds) < cfg.raw_min_seeds else None
    if cfg.raw_fallback and trigger:
        raw_hits = _normalise(reader.raw_bm25(info, q, cfg.raw_limit))
    tr.stage("raw", len(raw_hits), trigger=trigger if cfg.raw_fallback else "off")

    graph, graph_state = None, "off"
    if cfg.graph_enabled:
        try:
            graph = reader.graph() if isinstance(reader, TenantIndex) else None
            graph_state = "ok" if graph is not None else "missing"
        except FileNotFoundError:
            graph_state = "missing"
        except Exception as e:  # noqa: BLE001 — any unreadable graph file degrades recall to stage A (seed 004 §18)
            graph_state = f"unreadable: {type(e).__name__}"
    if graph is not None and cfg.session_weight > 0:  # the turns around the best seeds (recall.hop)
        near = hop.session_seeds(graph, seeds, cfg)
        hop.merge(seeds, near)
        hop.merge(expand_from, near)
        tr.stage("session", len(near))
    graph_scores, evidence = (
        expand(graph, expand_from, expand_depth, cfg, filters.as_of) if graph is not None else ({}, {})
    )
    tr.stage("expand", len(graph_scores), depth=expand_depth, graph=graph_state, method=cfg.graph_method)

    turn_of: dict[str, tuple[str, str]] = {}
    mmr_hint: dict[str, list[str]] = {}
    cands = _score(reader, info, seeds, vec, graph_scores, filters, analysis, cfg, query)
    cards = cands.cards
    citer = Citer(reader, _raw_store(lake))
    order = cands.order(_raw_results(citer, raw_hits, keywords, info, cfg, filters))
    scored = len(order)
    ranked, no_content = with_content(order, max(k, cfg.mmr_pool, 2), cards, cands)
    read_details(reader, ranked, cands, evidence, turn_of, mmr_hint)  # what is read below: text, raw_refs
    tr.stage("score", scored, k=k, no_content=no_content[:5])
    top = mmr(ranked, k, cfg, mmr_hint, cards)
    tr.stage("mmr", len(top), pool=min(len(ranked), max(k, cfg.mmr_pool)), mmr_lambda=cfg.mmr_lambda)

    # Messages the query matched through a turn-level node (not an Entity, whose refs
    # are mentions anywhere), best first: an Entity result cites those mentions first. A node
    # row names its message (conv_id, msg_id); only rows that do not are looked up through
    # their refs, so the raw store is read for the results' chunks alone.
    matched = [(r.node_id, refs) for r, refs in ranked if matched_line(r, cards)]
    citer.prefetch(
        [
            *(ref for nid, refs in matched if nid not in turn_of for ref in refs),
            *(ref for _, refs in top for ref in refs),
        ]
    )
    rank: dict[tuple[str, str], int] = {}
    for nid, refs in matched:
        keys = [turn_of[nid]] if nid in turn_of else [citer.message_key(ref) for ref in refs]
        for key in keys:
            if key is not None:
                rank.setdefault(key, len(rank))
    prefer = set(rank)
    for result, refs in top:
        cap = cfg.max_citations
        if result.type in AGGREGATE or result.node_id in cards:
            # an entity/topic card cites the best-ranked line where the query's words were said about it (else
            # one sample mention): its other mentions are no evidence for this query and would crowd out lines
            keyed = [(mk, r) for r in refs if (mk := citer.message_key(r)) is not None and mk in prefer]
            matched_refs = [r for _, r in sorted(keyed, key=lambda kr: rank[kr[0]])]
            refs, cap = (matched_refs, cfg.aggregate_citations) if matched_refs else (refs, 1)
        result.citations = citer.cite_all(refs, cap, prefer)
        result.unavailable = _unavailable(citer, refs)
    tr.stage(
        "cite",
        sum(len(r.citations) for r, _ in top),
        failures=citer.failures[:5],
        unavailable=[{"node_id": r.node_id, **u} for r, _ in top for u in r.unavailable][:5],
    )
    results = [r for r, _ in top]
    if budget_tokens is not None:
        results = pack(results, budget_tokens)
        tr.stage("budget", len(results), budget_tokens=budget_tokens, tokens=sum(map(result_tokens, results)))
    return results


def _unavailable(citer: Citer, refs: Sequence[RawRef]) -> list[dict]:
    """What a result could not cite and why: each of its chunks whose blob failed to read in this call."""
    failed = {f["raw_id"]: f for f in citer.failures}
    out = []
    for raw_id in dict.fromkeys(r.raw_id for r in refs):
        f = failed.get(raw_id)
        if f is not None:
            out.append(
                {"raw_id": raw_id, "error": f["error"], "reason": unavailable_reason(raw_id, f["error"], f["detail"])}
            )
    return out


def unavailable_reason(raw_id: str, error: str, detail: str) -> str:
    """One line for a citation that cannot be read (BlobCorrupt, BlobMissing, BlobForgotten, …)."""
    if error == "BlobCorrupt":
        what = "quarantined" if "quarantine" in detail else "corrupt"
        return f"blob {raw_id} {what}, run `memctl materialize` to repair"
    if error == "BlobMissing":
        return f"blob {raw_id} missing from the raw store, run `memctl materialize` to repair"
    if error == "BlobForgotten":
        return f"blob {raw_id} was forgotten (memctl forget)"
    return f"blob {raw_id} unreadable ({error})"


_STORES: dict[Path, RawStore] = {}


def _raw_store(lake: Lake) -> RawStore:
    """One RawStore per data root, so its verified-blob cache serves consecutive recalls."""
    store = _STORES.get(lake.root)
    if store is None:
        store = _STORES.setdefault(lake.root, RawStore(lake.root))
    return store


def _normalise(hits: list[tuple[str, float]]) -> dict[str, float]:
    """Scores divided by the best one (best = 1.0), order kept."""
    if not hits:
        return {}
    top = max(s for _, s in hits) or 1.0
    return {i: s / top for i, s in hits}


def _named_entities(reader: TenantIndex | TenantReader, names: Sequence[str]) -> list[str]:
    """Ids of the tenant's Entities whose title or an alias is one of `names` (case-insensitive), by id."""
    if not names:
        return []
    if isinstance(reader, TenantIndex):
        return reader.named_entities(names)
    low = [n.lower() for n in names]
    rows = reader.select(
        "nodes",
        "id",
        "type = 'Entity' AND (lower(title) IN (SELECT unnest(?::VARCHAR[])) "
        "OR list_has_any(list_transform(aliases, a -> lower(a)), ?::VARCHAR[]))",
        [low, low],
        order="id",
    )
    return [r[0] for r in rows]


def _score(
    reader: TenantIndex | TenantReader,
    info: TenantInfo,
    seeds: Mapping[str, float],
    vec: Mapping[str, float] | None,
    graph_scores: Mapping[str, float],
    filters: Filters,
    analysis: QueryAnalysis,
    cfg: RecallConfig,
    query: str = "",
) -> Scored:
    """Candidates (seeds ∪ reached) that pass the filters, with their score breakdown, and the rollup summaries
    among them (cited like entity and topic cards). `vec`: stage B's cosines (None: stage B off, and no "vector"
    in the breakdown). Recall's index is read for SCORE_COLUMNS only: the candidates' text and raw_refs are read
    by read_details for the few recall goes on to read (the DuckDB reader's rows hold them already)."""
    ids = list(dict.fromkeys([*seeds, *(vec or ()), *graph_scores]))
    if isinstance(reader, TenantIndex):
        b = reader.node_batch(ids, SCORE_COLUMNS)
    else:
        b = NodeBatch.from_rows(reader.nodes(ids), ids)
    # each term as engine's row-by-row definitions above, computed for the whole batch (recall.scoring)
    bm25 = np.array([seeds.get(i, 0.0) for i in b.id], dtype=np.float64)
    graph = np.array([graph_scores.get(i, 0.0) for i in b.id], dtype=np.float64)
    similarity = np.array([vec.get(i, 0.0) for i in b.id], dtype=np.float64) if vec is not None else np.zeros(len(b))
    rec = scoring.recency(b, info.newest, cfg)
    weight = scoring.weight(b, rec, cfg)
    score = scoring.scores(b, bm25, similarity, graph, weight, analysis, cfg) * scoring.speaker_boost(b, query, cfg)
    columns = [x.tolist() for x in (bm25, graph, weight, rec, similarity, score)]
    rows = np.flatnonzero(scoring.passes(b, filters)).tolist()
    return Scored(b, rows, columns, lambda i: _result(b, i, columns, vec is not None))


def _result(b: NodeBatch, i: int, columns: list[list[float]], vector: bool) -> RecallResult:
    """The RecallResult of batch row i as scored (text, citations and evidence still empty)."""
    breakdown = {"bm25": columns[0][i], "graph": columns[1][i], "weight": columns[2][i], "recency": columns[3][i]}
    if vector:
        breakdown["vector"] = columns[4][i]
    return RecallResult(b.id[i], b.type[i], b.title[i] or "", "", columns[5][i], breakdown, [], [])


def _raw_results(
    citer: Citer,
    raw_hits: Mapping[str, float],
    keywords: Sequence[str],
    info: TenantInfo,
    cfg: RecallConfig,
    filters: Filters,
) -> list[tuple[RecallResult, list[RawRef]]]:
    """Raw-fallback hits as results of type RawChunk, citing the chunk's messages that hold the keywords
    (and pass the time filters; a chunk with none left is dropped)."""
    if not raw_hits or (filters.types is not None and "RawChunk" not in filters.types):
        return []
    citer.prefetch((RawRef(i, 0, 0) for i in raw_hits), texts=True)
    kw = set(keywords)
    out = []
    for raw_id, bm25 in raw_hits.items():
        scored = []
        for m in citer.messages_of(raw_id):
            if not filters.message(m["ts"]):
                continue
            toks = set(search_tokens(m["text"] or ""))
            overlap = len(kw & toks) + sum(1 for k in kw if len(k) > 3 and k in (m["text"] or "").lower())
            if overlap:
                scored.append((-overlap, m["seq"] if m["seq"] is not None else 0, m))
        if not scored and (filters.as_of is not None or filters.start is not None or filters.end is not None):
            continue
        scored.sort(key=lambda x: (x[0], x[1]))
        refs = [m["piece"] for _, _, m in scored]
        chunk_ts = max((m["ts"] for _, _, m in scored if m["ts"] is not None), default=None)
        rec = recency_of(chunk_ts, info.newest, cfg.tau_days.get("RawChunk", cfg.default_tau_days))
        weight = node_weight(None, len(scored), rec, None, cfg)
        breakdown = {"bm25": bm25, "graph": 0.0, "weight": weight, "recency": rec}
        r = RecallResult(
            node_id=raw_id,
            type="RawChunk",
            title=f"raw passage {raw_id}",
            text="",
            score=cfg.lambda_bm25 * bm25 + cfg.lambda_weight * weight,
            breakdown=breakdown,
            citations=[],
            evidence=[],
        )
        out.append((r, refs))
    return out


def ranked_turns(results: Sequence[RecallResult]) -> list[tuple[str, str]]:
    """Distinct (conv_id, msg_id) of the results' citations, in order of first citation."""
    seen: dict[tuple[str, str], None] = {}
    for r in results:
        for c in r.citations:
            if c.msg_id is not None:
                seen.setdefault((c.conv_id or "", c.msg_id), None)
    return list(seen)
