# Frozen reference: jobs/rollup.py as of commit 9d258c2, before vectorisation. The golden harness
# (bench/consolidation_golden.py) and the differential tests compare the library against it; not library code.
"""Rollups (seed 001 `compactNodes` / `compactionCandidates`, SPEC §8): Episodes rolled into parent summaries.

Candidate selection is recall.read_api.ReadApi.compaction_candidates' rule, with its constants:
per tenant, per shared key — the conversation (group_by="conversation") or an ABOUT Concept
(group_by="concept"), optionally also a calendar period — the live *root* Episodes (no
SEMANTIC_CONTAINS parent yet; seed: "準備好 rollup 的語意根節點") at one depth are put in timeline
order (coalesce(time_start, first_seen) ascending, undated last, then id); at depth 0 the newest
`keep_recent_leaves` stay out; fewer than `threshold` left → nothing; else consecutive runs of
`fan_in` become groups (a short tail waits for more). Each group becomes one parent Episode
(subtype "rollup") with SEMANTIC_CONTAINS edges parent → child. The parents are depth d+1 roots
and are rolled up in turn while a level still reaches the threshold, up to `max_depth`
(children at depth >= max_depth are never grouped, as in compactionCandidates).

A parent holds: an extractive summary of its children (`text`), top keywords/entities, the time
span, raw_refs unioned and capped (r2g.merge.MERGED_REF_CAP), importance/confidence max (as
r2g.merge), frequency summed, and a deterministic id from tenant + sorted child ids. Children stay
as they are (not archived). Depth is not stored: it is 1 + the deepest child, read off the
SEMANTIC_CONTAINS edges. A child claimed by any parent (whatever its status) is never grouped
again (seed: CHILD_HAS_PARENT), so running on nodes ∪ output and edges ∪ output adds nothing.
With group_by="concept" an Episode about two Concepts could sit in two groups; the first group
(timeline order, then key) takes it, the other is re-formed from what is left.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from r2g.ids import edge_id, stable_id
from r2g.merge import MERGED_REF_CAP
from r2g.rules import TITLE_MAX_CHARS, clip
from r2g.schema import EDGES, NODES
from raw_store.lake import conform
from recall.read_api import (
    COMPACTION_FAN_IN,
    COMPACTION_KEEP_RECENT_LEAVES,
    COMPACTION_MAX_DEPTH,
    COMPACTION_THRESHOLD,
    GROUP_BY,
)
from recall.read_views import LIVE_STATUS

PROVENANCE = "jobs.rollup.compact.v2"  # v2 (issue 17): the title is the start of the summary, not keywords
ID_SCHEME = "jobs.rollup.compact.v1"
ROLLUP_SUBTYPE = "rollup"
SEMANTIC_CONTAINS = "SEMANTIC_CONTAINS"
EPISODE = "Episode"
PERIODS = ("day", "week", "month", "year")

_SENTENCE_END = frozenset("。！？!?；;\n")


@dataclass(frozen=True)
class RollupConfig:
    # seed 001 compactionCandidates' compression settings; the seed names them without values, these are
    # recall.read_api's COMPACTION_* (Luker's defaults), shared so both pick the same groups.
    threshold: int = COMPACTION_THRESHOLD  # 6
    fan_in: int = COMPACTION_FAN_IN  # 3
    max_depth: int = COMPACTION_MAX_DEPTH  # 6
    keep_recent_leaves: int = COMPACTION_KEEP_RECENT_LEAVES  # 0
    group_by: str = "conversation"  # read_api.GROUP_BY: conversation | concept
    # SPEC §8 "one topic/period": None keeps compaction_candidates' grouping; day|week|month|year splits
    # each key further by the calendar bucket of the node's time (undated nodes share one bucket).
    period: str | None = None
    # Summary bound: r2g.rules.SUMMARY_MAX_CHARS (200, one turn) × 2 — a parent summarises several turns.
    text_max_chars: int = 400
    max_keywords: int = 12  # a handful per child at fan_in 3
    max_entities: int = 20

    def __post_init__(self) -> None:
        if self.threshold < 1 or self.fan_in < 2 or self.max_depth < 1 or self.keep_recent_leaves < 0:
            raise ValueError("BAD_ARGS: threshold >= 1, fan_in >= 2, max_depth >= 1, keep_recent_leaves >= 0")
        if self.group_by not in GROUP_BY:
            raise ValueError(f"BAD_ARGS: group_by must be one of {GROUP_BY}")
        if self.period is not None and self.period not in PERIODS:
            raise ValueError(f"BAD_ARGS: period must be None or one of {PERIODS}")
        if self.text_max_chars < 20 or self.max_keywords < 1 or self.max_entities < 0:
            raise ValueError("BAD_ARGS: text_max_chars >= 20, max_keywords >= 1, max_entities >= 0")


@dataclass(frozen=True)
class RollupResult:
    nodes: pa.Table  # NODES: the new parent Episodes (subtype rollup), sorted by (tenant, id)
    edges: pa.Table  # EDGES: SEMANTIC_CONTAINS parent → child, sorted by (tenant, id)


def rollup_episodes(nodes: pa.Table, edges: pa.Table, config: RollupConfig = RollupConfig()) -> RollupResult:
    """New rollup parents and their SEMANTIC_CONTAINS edges for every tenant (only what is not there yet)."""
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    by_tenant: dict[str, list[dict]] = defaultdict(list)
    for row in nodes.to_pylist():
        by_tenant[row["tenant"]].append(row)
    edges_by_tenant: dict[str, list[dict]] = defaultdict(list)
    for row in edges.select(["tenant", "src", "dst", "type"]).to_pylist():
        if row["type"] in (SEMANTIC_CONTAINS, "ABOUT"):
            edges_by_tenant[row["tenant"]].append(row)
    new_nodes: list[dict] = []
    new_edges: list[dict] = []
    for tenant in sorted(t for t in by_tenant if t is not None):
        n, e = _Tenant(tenant, by_tenant[tenant], edges_by_tenant.get(tenant, []), config).run()
        new_nodes += n
        new_edges += e
    new_nodes.sort(key=lambda r: (r["tenant"], r["id"]))
    new_edges.sort(key=lambda r: (r["tenant"], r["id"]))
    return RollupResult(
        nodes=pa.Table.from_pylist(new_nodes, schema=NODES), edges=pa.Table.from_pylist(new_edges, schema=EDGES)
    )


class _Tenant:
    """One tenant's Episodes, parent links and topic keys; `run` rolls them up level by level."""

    def __init__(self, tenant: str, rows: list[dict], edges: list[dict], config: RollupConfig) -> None:
        self.tenant, self.config = tenant, config
        self.nodes = {r["id"]: r for r in sorted(rows, key=_row_order)}  # duplicate ids: one, deterministically
        self.children: dict[str, list[str]] = defaultdict(list)
        self.claimed: set[str] = set()
        self.concepts: dict[str, set[str]] = defaultdict(set)
        for e in edges:
            if e["src"] not in self.nodes or e["dst"] not in self.nodes:
                continue  # an edge into another tenant's node (or a RawChunk) links nothing here
            if e["type"] == SEMANTIC_CONTAINS:
                self.children[e["src"]].append(e["dst"])
                self.claimed.add(e["dst"])
            elif self.nodes[e["dst"]]["type"] == "Concept":
                self.concepts[e["src"]].add(e["dst"])
        self._depth: dict[str, int] = {}
        self._keys: dict[str, frozenset] = {}

    # -- structure

    def depth(self, nid: str) -> int:
        if nid not in self._depth:
            self._depth[nid] = 0  # guards a SEMANTIC_CONTAINS cycle
            row = self.nodes[nid]
            if row["subtype"] == ROLLUP_SUBTYPE:
                self._depth[nid] = 1 + max((self.depth(c) for c in self.children.get(nid, ())), default=0)
        return self._depth[nid]

    def keys(self, nid: str) -> frozenset:
        """The keys a node is grouped under: its conversation, or the Concepts it is about (a rollup's: its
        children's shared ones), each paired with its period bucket."""
        if nid not in self._keys:
            self._keys[nid] = frozenset()  # cycle guard
            row = self.nodes[nid]
            kids = self.children.get(nid, ()) if row["subtype"] == ROLLUP_SUBTYPE else ()
            if self.config.group_by == "conversation":
                base = {row["conv_id"]} if row["conv_id"] is not None else set()
            elif kids:
                base = set.intersection(*({k for k, _ in self.keys(c)} for c in kids))
            else:
                base = set(self.concepts.get(nid, ()))
            bucket = _bucket(_time(row), self.config.period)
            self._keys[nid] = frozenset((k, bucket) for k in base)
        return self._keys[nid]

    # -- the rollup loop

    def run(self) -> tuple[list[dict], list[dict]]:
        out_nodes: list[dict] = []
        out_edges: list[dict] = []
        for depth in range(self.config.max_depth):
            while True:
                accepted = self._take_groups(self._groups(depth))
                if not accepted:
                    break
                for child_ids in accepted:
                    parent = self._parent(child_ids)
                    self.nodes[parent["id"]] = parent
                    self.children[parent["id"]] = list(child_ids)
                    self.claimed.update(child_ids)
                    out_nodes.append(parent)
                    out_edges += [_contains_edge(self.tenant, parent["id"], c) for c in child_ids]
        return out_nodes, out_edges

    def _groups(self, depth: int) -> list[tuple[tuple, tuple[str, ...]]]:
        """compaction_candidates' groups at `depth`: ((sort key), child ids) in (first time, key, run) order."""
        pools: dict[tuple, list[tuple]] = defaultdict(list)
        for nid, row in self.nodes.items():
            if (
                row["type"] != EPISODE
                or nid in self.claimed
                or (row["status"] or "active") not in LIVE_STATUS
                or self.depth(nid) != depth
            ):
                continue
            t = _time(row)
            for key in self.keys(nid):
                pools[key].append((t is None, t or datetime.min, nid))
        keep = self.config.keep_recent_leaves if depth == 0 else 0
        fan = self.config.fan_in
        groups = []
        for key, pool in pools.items():
            pool.sort()
            kept = len(pool) - keep
            if kept < self.config.threshold:
                continue
            for g in range(kept // fan):
                run = pool[g * fan : (g + 1) * fan]
                groups.append(((run[0][0], run[0][1], _key_order(key), g), tuple(nid for *_, nid in run)))
        groups.sort()
        return groups

    def _take_groups(self, groups: list[tuple[tuple, tuple[str, ...]]]) -> list[tuple[str, ...]]:
        taken: set[str] = set()
        accepted = []
        for _, child_ids in groups:
            if taken.isdisjoint(child_ids) and _parent_id(self.tenant, child_ids) not in self.nodes:
                accepted.append(child_ids)
                taken.update(child_ids)
        return accepted

    def _parent(self, child_ids: tuple[str, ...]) -> dict:
        kids = [self.nodes[c] for c in child_ids]  # timeline order
        starts = [t for t in (_time(k) for k in kids) if t is not None]
        ends = [
            t
            for t in (_coalesce(k, "time_end", "time_start", "last_seen", "first_seen") for k in kids)
            if t is not None
        ]
        firsts = [k["first_seen"] for k in kids if k["first_seen"] is not None]
        lasts = [k["last_seen"] for k in kids if k["last_seen"] is not None]
        keywords = _top((k["keywords"] or () for k in kids), self.config.max_keywords)
        best = min(kids, key=lambda k: -(k["importance"] or 0.0))  # earliest among the most important
        text = _summary(kids, self.config.text_max_chars)
        title = clip(text or best["title"] or "", TITLE_MAX_CHARS)
        langs = Counter(k["lang"] for k in kids if k["lang"])
        return {
            "id": _parent_id(self.tenant, child_ids),
            "tenant": self.tenant,
            "type": EPISODE,
            "subtype": ROLLUP_SUBTYPE,
            "title": title,
            "text": text,
            "keywords": keywords,
            "entities": _top((k["entities"] or () for k in kids), self.config.max_entities) or None,
            "lang": min(langs, key=lambda x: (-langs[x], x)) if langs else None,
            "time_start": min(starts) if starts else None,
            "time_end": max(ends) if ends else None,
            "importance": max((k["importance"] or 0.0) for k in kids),
            "confidence": max((k["confidence"] or 0.0) for k in kids),
            "frequency": sum(k["frequency"] or 1 for k in kids),
            "first_seen": min(firsts) if firsts else None,
            "last_seen": max(lasts) if lasts else None,
            "status": "active",
            "raw_refs": _refs(kids),
            "provenance": PROVENANCE,
            "conv_id": _shared(k["conv_id"] for k in kids),
            "speaker": _shared(k["speaker"] for k in kids),
        }


# -- helpers


def _parent_id(tenant: str, child_ids: Iterable[str]) -> str:
    return stable_id("n", tenant, ID_SCHEME, *sorted(child_ids))


def _contains_edge(tenant: str, parent: str, child: str) -> dict:
    return {
        "id": edge_id(tenant, parent, SEMANTIC_CONTAINS, child),
        "tenant": tenant,
        "src": parent,
        "dst": child,
        "type": SEMANTIC_CONTAINS,
        "weight": 1.0,
        "confidence": 1.0,
        "provenance": PROVENANCE,
    }


def _row_order(row: dict) -> tuple:
    return (row["id"] or "", repr(sorted(row.items())))


def _coalesce(row: dict, *cols: str):
    return next((row[c] for c in cols if row[c] is not None), None)


def _time(row: dict) -> datetime | None:
    """Timeline position, as read_api: coalesce(time_start, first_seen)."""
    return _coalesce(row, "time_start", "first_seen")


def _bucket(t: datetime | None, period: str | None) -> str | None:
    if period is None or t is None:
        return None
    if period == "day":
        return t.strftime("%Y-%m-%d")
    if period == "week":
        y, w, _ = t.isocalendar()
        return f"{y}-W{w:02d}"
    return t.strftime("%Y-%m") if period == "month" else t.strftime("%Y")


def _key_order(key: tuple) -> tuple:
    k, bucket = key
    return (k, bucket is None, bucket or "")


def _shared(values: Iterable[str | None]) -> str | None:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _top(lists: Iterable[Iterable[str]], n: int) -> list[str]:
    """The n items found in the most children (each child counts once), ties by first appearance."""
    count: Counter = Counter()
    first: dict[str, int] = {}
    for lst in lists:
        for item in dict.fromkeys(x for x in lst if x):
            count[item] += 1
            first.setdefault(item, len(first))
    return sorted(count, key=lambda x: (-count[x], first[x]))[:n]


def _sentences(text: str) -> list[str]:
    out, cur = [], []
    for i, ch in enumerate(text):
        cur.append(ch)
        if ch in _SENTENCE_END or (ch == "." and (i + 1 == len(text) or text[i + 1].isspace())):
            out.append(cur)
            cur = []
    out.append(cur)
    return [s for s in (" ".join("".join(c).split()) for c in out) if s]


def _summary(kids: list[dict], max_chars: int) -> str:
    """Extractive: every child's first sentence (most important children first), then second sentences, …,
    while they fit in max_chars; duplicates skipped; printed in timeline order."""
    cands = []
    for i, k in enumerate(kids):
        for j, s in enumerate(_sentences(k["text"] or k["title"] or "")):
            cands.append((j, -(k["importance"] or 0.0), i, s))
    chosen, seen, used = [], set(), 0
    for j, _, i, s in sorted(cands):
        if s in seen:
            continue
        if used + len(s) + (1 if chosen else 0) > max_chars:
            if not chosen:
                chosen.append((i, j, clip(s, max_chars)))
                break
            continue
        chosen.append((i, j, s))
        seen.add(s)
        used += len(s) + (1 if len(chosen) > 1 else 0)
    return " ".join(s for _, _, s in sorted(chosen))


def _refs(kids: list[dict]) -> list[dict] | None:
    """Union of the children's raw_refs, capped at MERGED_REF_CAP: taken round-robin over the children (so each
    child keeps a citation while they number <= the cap), then sorted."""
    per_child = [sorted({(r["raw_id"], r["offset"], r["length"]) for r in (k["raw_refs"] or ())}) for k in kids]
    picked: set[tuple] = set()
    for rank in range(max((len(p) for p in per_child), default=0)):
        for p in per_child:
            if rank < len(p) and len(picked) < MERGED_REF_CAP:
                picked.add(p[rank])
    return [{"raw_id": a, "offset": b, "length": c} for a, b, c in sorted(picked)] or None
