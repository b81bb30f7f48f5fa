"""Recall's candidate scoring over columns: the filters, recency, weight(node) and query boosts of a batch at once.

Each term is defined row by row at the end of this module (node_span, recency_of, node_weight, query_boost;
the filters by recall.engine's Filters.node); a
query scores a few hundred candidates, and doing that in Python per row was a third of a warm recall.
Here the same definitions run over a NodeBatch with numpy: the same float operations in the same
order (exp and log1p through `math`, as there), so each score equals the row-by-row one bit for bit
(tests/test_recall_scoring.py compares them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from r2g.tokens import has_han
from recall.citations import RawRef, as_refs, refs_column
from recall.sorted_keys import arrow_numpy

if TYPE_CHECKING:  # recall.engine imports this module
    from recall.config import RecallConfig
    from recall.engine import Filters
    from recall.query import QueryAnalysis

NULL = np.iinfo(np.int64).min  # no time
EPOCH = datetime(1970, 1, 1)
TIME_COLUMNS = ("time_start", "time_end", "first_seen", "last_seen")
NUMBER_COLUMNS = ("importance", "frequency", "sentiment")
TEXT_COLUMNS = ("id", "type", "subtype", "title", "text", "conv_id", "msg_id", "speaker")
BATCH_COLUMNS = (*TEXT_COLUMNS, *TIME_COLUMNS, *NUMBER_COLUMNS, "raw_refs")
INDEX_COLUMNS = ("mmr",)  # what recall's index stores besides: MMR's tokens of a node holding Han
# What scoring and the content test read of every candidate; the rest (DETAIL_COLUMNS) is read only for the
# candidates recall goes on to read (MMR's pool, the matched lines): ~1 in 5 at 100k nodes.
SCORE_COLUMNS = ("id", "type", "subtype", "title", "speaker", *TIME_COLUMNS, *NUMBER_COLUMNS)
DETAIL_COLUMNS = ("id", "text", "conv_id", "msg_id", "raw_refs", *INDEX_COLUMNS)


def micros(t: datetime | None) -> int:
    """Microseconds since the epoch of a naive UTC datetime; NULL for None."""
    return NULL if t is None else (t - EPOCH) // timedelta(microseconds=1)


@dataclass
class NodeBatch:
    """Candidate node rows as columns: strings as lists, times as int64 µs (NULL: none), numbers as float64
    (nan: none), raw_refs as RawRef lists."""

    id: list
    type: list
    subtype: list
    title: list
    speaker: list
    time_start: np.ndarray
    time_end: np.ndarray
    first_seen: np.ndarray
    last_seen: np.ndarray
    importance: np.ndarray
    frequency: np.ndarray
    sentiment: np.ndarray
    # DETAIL_COLUMNS: None in a batch read with SCORE_COLUMNS only (recall.candidates.NodeDetails holds them)
    text: list | None = None
    conv_id: list | None = None
    msg_id: list | None = None
    raw_refs: list[list[RawRef]] | None = None
    mmr: list | None = None  # MMR's tokens where the index stored them (nodes holding Han), else None

    def __len__(self) -> int:
        return len(self.id)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> NodeBatch:
        """The batch of a table holding at least SCORE_COLUMNS (DETAIL_COLUMNS where present)."""
        cols = {}
        for c in TEXT_COLUMNS:
            if c in table.column_names:
                cols[c] = table.column(c).to_pylist()
        for c in TIME_COLUMNS:
            cols[c] = arrow_numpy(table.column(c).cast(pa.int64()), null=NULL)
        for c in NUMBER_COLUMNS:
            cols[c] = arrow_numpy(table.column(c).cast(pa.float64()), null=np.nan)
        if "raw_refs" in table.column_names:
            cols["raw_refs"] = refs_column(table.column("raw_refs"))
        if "mmr" in table.column_names:
            cols["mmr"] = table.column("mmr").to_pylist()
        return cls(**cols)

    @classmethod
    def from_rows(cls, rows: Mapping[str, Mapping], ids: Sequence[str]) -> NodeBatch:
        """The batch of the rows of `ids` that `rows` holds (row dicts, as TenantReader.nodes returns), in order."""
        found = [rows[i] for i in ids if i in rows]
        cols: dict[str, Any] = {c: [r.get(c) for r in found] for c in TEXT_COLUMNS}
        for c in TIME_COLUMNS:
            cols[c] = np.array([micros(r.get(c)) for r in found], dtype=np.int64)
        for c in NUMBER_COLUMNS:
            cols[c] = np.array([np.nan if (v := r.get(c)) is None else float(v) for r in found], dtype=np.float64)
        cols["raw_refs"] = [as_refs(r.get("raw_refs")) for r in found]
        return cls(**cols)

    def span(self) -> tuple[np.ndarray, np.ndarray]:
        """node_span per row: [time_start or first_seen, time_end or last_seen or that]."""
        lo = np.where(self.time_start != NULL, self.time_start, self.first_seen)
        hi = np.where(self.time_end != NULL, self.time_end, np.where(self.last_seen != NULL, self.last_seen, lo))
        return lo, hi

    def node_time(self) -> np.ndarray:
        """node_time per row: time_start or last_seen or first_seen."""
        return np.where(
            self.time_start != NULL, self.time_start, np.where(self.last_seen != NULL, self.last_seen, self.first_seen)
        )


def passes(b: NodeBatch, filters: Filters) -> np.ndarray:
    """engine.Filters.node per row."""
    keep = np.ones(len(b), bool)
    if filters.types is not None:
        keep &= np.fromiter((t in filters.types for t in b.type), bool, len(b))
    if filters.as_of is not None:
        keep &= (b.first_seen != NULL) & (b.first_seen <= micros(filters.as_of))
    if filters.start is not None or filters.end is not None:
        lo, hi = b.span()
        ok = (lo != NULL) | (hi != NULL)
        lo, hi = np.where(lo == NULL, hi, lo), np.where(hi == NULL, lo, hi)
        if filters.end is not None:
            ok &= lo <= micros(filters.end)
        if filters.start is not None:
            ok &= hi >= micros(filters.start)
        keep &= ok
    return keep


def recency(b: NodeBatch, newest: datetime | None, cfg: RecallConfig) -> np.ndarray:
    """recency_of per row, with τ by the row's type."""
    t = b.node_time()
    out = np.zeros(len(b))
    if newest is None:
        return out
    known = np.flatnonzero(t != NULL)
    days = np.maximum((micros(newest) - t[known]) / 1e6, 0.0) / 86400.0
    taus = [cfg.tau_days.get(b.type[i], cfg.default_tau_days) for i in known.tolist()]
    out[known] = [math.exp(-d / tau) for d, tau in zip(days.tolist(), taus)]
    return out


def weight(b: NodeBatch, rec: np.ndarray, cfg: RecallConfig) -> np.ndarray:
    """node_weight per row."""
    total = cfg.weight_importance + cfg.weight_frequency + cfg.weight_recency + cfg.weight_emotion
    if total <= 0:
        return np.zeros(len(b))
    imp = np.where(np.isnan(b.importance), 0.5, np.minimum(1.0, np.maximum(0.0, b.importance)))
    f = np.where(np.isnan(b.frequency) | (b.frequency < 1), 1.0, b.frequency)
    cap = math.log1p(max(1, cfg.frequency_cap))
    logs = {x: math.log1p(x) for x in set(f.tolist())}
    freq = np.minimum(1.0, np.array([logs[x] for x in f.tolist()]) / cap) if len(b) else np.zeros(0)
    emotion = np.where(np.isnan(b.sentiment), 0.0, np.minimum(1.0, np.abs(b.sentiment)))
    return (
        cfg.weight_importance * imp
        + cfg.weight_frequency * freq
        + cfg.weight_recency * rec
        + cfg.weight_emotion * emotion
    ) / total


def prior(b: NodeBatch, cfg: RecallConfig) -> np.ndarray:
    """The type prior per row: "Type/subtype" first, then "Type"."""
    cache: dict[tuple, float] = {}
    out = []
    for t, s in zip(b.type, b.subtype):
        p = cache.get((t, s))
        if p is None:
            p = cache[(t, s)] = cfg.type_prior.get(f"{t}/{s}", cfg.type_prior.get(t, 1.0))
        out.append(p)
    return np.array(out, dtype=np.float64)


def boost(b: NodeBatch, analysis: QueryAnalysis, cfg: RecallConfig) -> np.ndarray:
    """query_boost per row."""
    out = np.ones(len(b))
    if analysis.times:
        lo, hi = b.span()
        inside = np.zeros(len(b), bool)
        for t in analysis.times:
            inside |= (lo < micros(t.end)) & (hi >= micros(t.start))
        inside &= lo != NULL
        out[inside] *= 1.0 + cfg.time_match_boost
    if analysis.intent is not None:
        per_type = cfg.intent_type_boost.get(analysis.intent, {})
        out *= np.array([per_type.get(t, 1.0) for t in b.type], dtype=np.float64)
    return out


def scores(
    b: NodeBatch,
    bm25: np.ndarray,
    similarity: np.ndarray,
    graph: np.ndarray,
    weights: np.ndarray,
    analysis: QueryAnalysis,
    cfg: RecallConfig,
) -> np.ndarray:
    """(λ1·bm25 + λ2·cos + λ3·graph + λ4·weight) × type prior × query boost, per row."""
    return (
        (
            cfg.lambda_bm25 * bm25
            + cfg.lambda_vector * similarity
            + cfg.lambda_graph * graph
            + cfg.lambda_weight * weights
        )
        * prior(b, cfg)
        * boost(b, analysis, cfg)
    )


def speaker_boost(b: NodeBatch, query: str, cfg: RecallConfig) -> np.ndarray:
    """× (1 + cfg.speaker_boost) for a memory said by someone the question names: "What books has John read?" is
    answered by John's lines, which name him nowhere (the speaker is no word of the line)."""
    out = np.ones(len(b))
    if cfg.speaker_boost <= 0:
        return out
    q = query.lower()
    named: dict[str, bool] = {}
    for i, spk in enumerate(b.speaker):
        if spk:
            hit = named.get(spk)
            if hit is None:
                hit = named[spk] = names_speaker(q, spk.lower())
            if hit:
                out[i] = 1.0 + cfg.speaker_boost
    return out


def names_speaker(query: str, speaker: str) -> bool:
    """Whether the (lower-cased) query names the speaker: the whole name or its first word as a word, or a
    three-character Chinese name's given name (唐子昂 → 子昂)."""
    if has_han(speaker):
        return speaker in query or (len(speaker) == 3 and speaker[1:] in query)
    first = speaker.split()[0] if speaker.split() else speaker
    return any(re.search(rf"\b{re.escape(n)}\b", query) for n in {speaker, first} if len(n) > 1)


# ------------------------------------------------------------------ the terms row by row (recall's reference)


def node_span(row: Mapping) -> tuple[datetime | None, datetime | None]:
    """The time a memory covers: [time_start or first_seen, time_end or last_seen] (one end may stand for both)."""
    lo = row.get("time_start") or row.get("first_seen")
    return lo, row.get("time_end") or row.get("last_seen") or lo


def node_time(row: Mapping) -> datetime | None:
    return row.get("time_start") or row.get("last_seen") or row.get("first_seen")


def recency_of(t: datetime | None, newest: datetime | None, tau_days: float) -> float:
    """exp(-Δt/τ) with Δt measured back from the tenant's newest node (results do not depend on the clock)."""
    if t is None or newest is None:
        return 0.0
    days = max((newest - t).total_seconds(), 0.0) / 86400.0
    return math.exp(-days / tau_days)


def node_weight(
    importance: float | None, frequency: int | None, recency: float, sentiment: float | None, cfg: RecallConfig
) -> float:
    """Seed 004 §6.1 weight(node) in [0, 1]; an unknown importance counts 0.5, an unknown frequency 1."""
    total = cfg.weight_importance + cfg.weight_frequency + cfg.weight_recency + cfg.weight_emotion
    if total <= 0:
        return 0.0
    imp = 0.5 if importance is None else min(1.0, max(0.0, importance))
    freq = min(1.0, math.log1p(max(1, frequency or 1)) / math.log1p(max(1, cfg.frequency_cap)))
    emotion = min(1.0, abs(sentiment)) if sentiment is not None else 0.0
    return (
        cfg.weight_importance * imp
        + cfg.weight_frequency * freq
        + cfg.weight_recency * recency
        + cfg.weight_emotion * emotion
    ) / total


def query_boost(row: Mapping, analysis: QueryAnalysis, cfg: RecallConfig) -> float:
    """Score multiplier from the query analysis: a memory inside a time the question states; a preference for
    a what-does-X-like question; a Fact with a resolved time for a when-question."""
    boost = 1.0
    if analysis.times:
        lo, hi = node_span(row)
        if lo is not None and hi is not None and any(lo < t.end and hi >= t.start for t in analysis.times):
            boost *= 1.0 + cfg.time_match_boost
    if analysis.intent is not None:
        boost *= cfg.intent_type_boost.get(analysis.intent, {}).get(row["type"], 1.0)
    return boost
