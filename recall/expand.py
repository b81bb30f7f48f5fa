"""Stage C of recall: k-hop expansion from the seeds over the tenant's graph (CSR arrays), hubs not expanded, then
personalised PageRank on the subgraph walked (or spreading activation), with the evidence edges of each reached
node."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from recall.graph_csr import CsrGraph, personalized_pagerank

if TYPE_CHECKING:  # engine imports this module
    from recall.config import RecallConfig


def expand(
    g: CsrGraph, seeds: Mapping[str, float], depth: int, cfg: RecallConfig, as_of: datetime | None = None
) -> tuple[dict[str, float], Mapping[str, list[dict]]]:
    """Graph scores in [0, 1] for the seeds and every node within `depth` hops of one,
    plus the evidence edges by which each non-seed was reached.

    cfg.graph_method "ppr": personalised PageRank on the reached subgraph, restarting
    at the seeds in proportion to their BM25 (seeds keep their mass; a node that
    several seeds point to gains). "spread": each reached node gets
    seed_score * Π(edge weight * type weight) * hop_decay^(hop-1), summed over seeds.
    Both are divided by their maximum. Hubs (degree > cfg.hub_degree) are neither
    expanded from nor reached: a speaker entity touching every turn would otherwise
    link everything to everything and top every query.
    """
    spread: dict[int, float] = defaultdict(float)
    reached_by: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # (src, type, dst) slots
    type_w = np.array([cfg.edge_type_weight.get(t, cfg.default_edge_type_weight) for t in g.edge_types] or [0.0])
    allowed = (
        None
        if cfg.expand_edge_types is None
        else np.array([t in cfg.expand_edge_types for t in g.edge_types] or [False])
    )
    hub = cfg.hub_degree
    # as_of: a memory first seen later (or never known) is neither a seed nor a bridge
    cutoff = _micros(as_of) if as_of is not None else None
    seen = g.first_seen
    ids = list(seeds)
    slots = g.slots(ids)
    seed_deg = g.degree(np.maximum(slots, 0)).tolist()
    seed_v = {
        int(v): seeds[i]
        for i, v, d in zip(ids, slots.tolist(), seed_deg)
        if v >= 0 and d <= hub and (cutoff is None or seen[v] <= cutoff)
    }
    used: dict[tuple[int, int, int], float] = {}  # (src, dst, type) → edge weight
    first = _first_hop(g, seed_v, type_w, allowed, hub, cutoff) if depth >= 1 else None
    for i, (v0, s_score) in enumerate(seed_v.items()):
        frontier = {v0: s_score}
        visited = {v0}
        for hop in range(1, depth + 1):
            nxt: dict[int, float] = {}
            decay = cfg.hop_decay ** (hop - 1)
            for v, mass in frontier.items():
                if hop == 1 and first is not None:  # the seeds' own lists, gathered for all seeds at once
                    a, z = first.bounds[i], first.bounds[i + 1]
                    walk = zip(first.nbr[a:z], first.code[a:z], first.w[a:z], first.pushed[a:z])
                else:
                    nbr, code, w = g.incident(v)
                    if not len(nbr):
                        continue
                    etype = code >> 1
                    keep = g.degree(nbr) <= hub
                    if allowed is not None:
                        keep &= allowed[etype]
                    if cutoff is not None:
                        keep &= seen[nbr] <= cutoff
                    idx = np.flatnonzero(keep)
                    if not len(idx):
                        continue
                    # the same float operations, in the same order, as a walk edge by edge
                    pushed = mass * w[idx] * type_w[etype[idx]] * decay
                    walk = zip(nbr[idx].tolist(), code[idx].tolist(), w[idx].tolist(), pushed.tolist())
                for u, c, ew, x in walk:
                    if u in visited or x <= 0:
                        continue
                    src, dst = (v, u) if not c & 1 else (u, v)
                    used[(src, dst, c >> 1)] = ew
                    spread[u] += x
                    if u not in seed_v and len(reached_by[u]) < cfg.max_evidence:
                        reached_by[u].append((src, c >> 1, dst))
                    if hop < depth:
                        nxt[u] = max(nxt.get(u, 0.0), x)
            visited.update(nxt)
            frontier = nxt
    names = _names(g, {*seed_v, *spread, *(x for s, _, d in used for x in (s, d))})
    if cfg.graph_method == "ppr":
        scores = _ppr(g, seed_v, used, names, cfg)
    else:
        scores = dict(spread)
    top = max(scores.values(), default=0.0) or 1.0
    return {names[v]: x / top for v, x in scores.items() if x > 0}, Evidence(g, reached_by, names)


class Evidence(Mapping[str, list[dict]]):
    """The evidence edges ({src, type, dst}) of each reached node by id, made when asked: recall shows them
    for its few results, not for the ~400 nodes a query reaches."""

    def __init__(self, g: CsrGraph, reached_by: Mapping[int, list[tuple[int, int, int]]], names: Mapping[int, str]):
        self._g, self._names = g, names
        self._by_id = {names[u]: edges for u, edges in reached_by.items()}

    def __getitem__(self, nid: str) -> list[dict]:
        names, types = self._names, self._g.edge_types
        return [{"src": names[s], "type": types[t], "dst": names[d]} for s, t, d in self._by_id[nid]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


@dataclass
class _FirstHop:
    """The seeds' incident edges that expansion walks, seed i's at [bounds[i], bounds[i + 1]), as Python lists."""

    bounds: list[int]
    nbr: list[int]
    code: list[int]
    w: list[float]
    pushed: list[float]


def _first_hop(
    g: CsrGraph,
    seed_v: Mapping[int, float],
    type_w: np.ndarray,
    allowed: np.ndarray | None,
    hub: int,
    cutoff: int | None,
) -> _FirstHop:
    """The first hop from every seed in one gather: the edges not to a hub (nor of a type left out, nor first seen
    after the cut-off), with the mass each pushes (seed score × weight × type weight × hop decay 1: the same
    float operations as a walk edge by edge)."""
    ptr, nbr, code, w = g.incident_many(np.fromiter(seed_v, np.int64, len(seed_v)))
    etype = code >> 1
    keep = g.degree(nbr) <= hub
    if allowed is not None:
        keep &= allowed[etype]
    if cutoff is not None:
        keep &= g.first_seen[nbr] <= cutoff
    mass = np.repeat(np.fromiter(seed_v.values(), np.float64, len(seed_v)), np.diff(ptr))
    sel = np.flatnonzero(keep)
    pushed = mass[sel] * w[sel] * type_w[etype[sel]] * 1.0
    return _FirstHop(
        np.searchsorted(sel, ptr).tolist(), nbr[sel].tolist(), code[sel].tolist(), w[sel].tolist(), pushed.tolist()
    )


def _micros(t: datetime) -> int:
    """Microseconds since the epoch of a naive UTC datetime (the graph's first_seen unit)."""
    return (t - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def _names(g: CsrGraph, slots: set[int]) -> dict[int, str]:
    order = sorted(slots)
    return dict(zip(order, g.ids(order)))


def _ppr(
    g: CsrGraph,
    seed_v: Mapping[int, float],
    used: Mapping[tuple[int, int, int], float],
    names: Mapping[int, str],
    cfg: RecallConfig,
) -> dict[int, float]:
    """Personalised PageRank over the subgraph of the edges expansion walked (undirected, weighted; igraph's
    PRPACK result, recall.graph_csr.personalized_pagerank). Vertices in id order and edges in (src id, dst id,
    type) order: the same subgraph whatever slots the nodes have, so a base + delta index ranks like a fresh one."""
    if not seed_v:
        return {}
    if not used:
        return dict(seed_v)
    vs = sorted(set(seed_v) | {x for s, d, _ in used for x in (s, d)}, key=names.__getitem__)
    local = {v: i for i, v in enumerate(vs)}
    es = sorted(used, key=lambda e: (names[e[0]], names[e[1]], g.edge_types[e[2]]))
    w = [used[e] * cfg.edge_type_weight.get(g.edge_types[e[2]], cfg.default_edge_type_weight) for e in es]
    reset = [seed_v.get(v, 0.0) for v in vs]
    pr = personalized_pagerank(
        len(vs), [local[s] for s, _, _ in es], [local[d] for _, d, _ in es], w, reset, damping=cfg.ppr_damping
    ).tolist()
    return {v: pr[local[v]] for v in vs}
