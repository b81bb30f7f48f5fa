"""The tenant graph as CSR neighbour arrays: what recall's stage C walks, memory-mapped instead of unpickled.

Vertices are the tenant's active nodes, numbered by *slot* (recall.tenant_index assigns them; a base
segment numbers its nodes in id order). Each segment stores the neighbour lists of the slots it owns:

  adj_slot.npy   int32 [m]      the slots whose list this segment holds, ascending
  adj_ptr.npy    int32 [m + 1]  CSR offsets (int64 past 2^31 half-edges)
  adj_nbr.npy    int32          neighbour slot
  adj_code.npy   uint8          edge type code * 2 + direction (0: out, the slot is the edge's src; 1: in);
                                uint16 past 128 edge types
  adj_w.npy      uint16         edge weight (null: 1.0) as a row of adj_wtab.npy, the distinct weights
                                (float64, exact: weights repeat, ~1.8k distinct in 3.4M half-edges at 100k
                                messages); past 65,536 distinct weights adj_w.npy is the float64 weights
                                themselves and there is no table
  adj_hash.npy   uint64 [m]     a hash of the list (what an update compares)

A list holds every edge between two active nodes that touches the slot, once per end (a self-loop
twice), ordered by neighbour id (igraph's `incident(v, mode="all")` order when vertices are numbered
in id order), then out before in, then by type. Its length is igraph's degree. The edge type names are
the version's `edge_types` list (codes are shared by a base and its deltas).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recall.sorted_keys import fenced_search_one, fenced_searchsorted, load_fence, mapped, narrow, save_sorted

FILES = ("adj_slot", "adj_ptr", "adj_nbr", "adj_code", "adj_w", "adj_hash")
NO_TIME = np.iinfo(np.int64).max  # first_seen unknown: never "known by" an as_of date


@dataclass
class AdjacencyArrays:
    slot: np.ndarray
    ptr: np.ndarray
    nbr: np.ndarray
    code: np.ndarray
    w: np.ndarray
    hash: np.ndarray


def empty_adjacency() -> AdjacencyArrays:
    return AdjacencyArrays(
        np.zeros(0, np.int32),
        np.zeros(1, np.int64),
        np.zeros(0, np.int32),
        np.zeros(0, np.uint16),
        np.zeros(0, np.float64),
        np.zeros(0, np.uint64),
    )


def write_adjacency(folder: Path, a: AdjacencyArrays) -> None:
    w = np.asarray(a.w, np.float64)
    table, index = np.unique(w, return_inverse=True)
    if len(table) <= 2**16:
        np.save(folder / "adj_wtab.npy", table)
        w = index.astype(np.uint16)
    arrays = (a.slot, narrow(a.ptr, (np.int32, np.int64)), a.nbr, narrow(a.code, (np.uint8, np.uint16)), w, a.hash)
    for name, arr in zip(FILES, arrays):
        (save_sorted if name == "adj_slot" else np.save)(folder / f"{name}.npy", arr)


class Adjacency:
    """One segment's neighbour lists, memory-mapped."""

    def __init__(self, folder: Path, random: bool = True) -> None:
        self.slot, self.ptr, self.nbr, self.code, w, self.hash = (
            mapped(folder / f"{name}.npy", random) for name in FILES
        )
        table = folder / "adj_wtab.npy"
        self._w, self._wtab = w, (np.load(table) if table.exists() else None)
        self._slot_fence = load_fence(folder / "adj_slot.npy")
        # a base lists every slot 0..n-1 (sorted, distinct: its first and last say so): slot v's list is row v,
        # found without a search (a walk asks for hundreds of lists a query)
        n = len(self.slot)
        self._every_slot = bool(n) and int(self.slot[0]) == 0 and int(self.slot[-1]) == n - 1

    def rows(self, slots: np.ndarray) -> np.ndarray:
        """The row of each slot's list in this segment, -1 where it holds none (a page of adj_slot read per slot)."""
        if self._every_slot:
            vs = np.asarray(slots, np.int64)
            return np.where((vs >= 0) & (vs < len(self.slot)), vs, -1)
        vs = np.asarray(slots).astype(self.slot.dtype)
        if not len(self.slot):
            return np.full(len(vs), -1, np.int64)
        at = np.minimum(fenced_searchsorted(self.slot, self._slot_fence, vs), len(self.slot) - 1)
        return np.where(self.slot[at] == vs, at, -1)

    def row(self, v: int) -> int:
        """rows() of one slot."""
        if self._every_slot:
            return v if 0 <= v < len(self.slot) else -1
        at = fenced_search_one(self.slot, self._slot_fence, self.slot.dtype.type(v))
        return at if at < len(self.slot) and self.slot[at] == v else -1

    def weights(self, lo: int, hi: int) -> np.ndarray:
        """The float64 weights of half-edges [lo, hi)."""
        return self.weights_at(slice(lo, hi))

    def weights_at(self, at: slice | np.ndarray) -> np.ndarray:
        """The float64 weights of the half-edges at `at` (a slice or positions)."""
        return self._w[at] if self._wtab is None else self._wtab[self._w[at]]


DENSE_AFTER = 2048  # slot lookups over deltas before CsrGraph builds its per-slot owner arrays (~3 queries)


class SlotValues:
    """Per-slot values looked up where they are asked for (`g.first_seen[v]`, `g.first_seen[slots]`), not made as
    one array over every slot: with deltas, that array is gathered from each segment's node rows, and a cold
    `memctl recall` at 1M messages, whose query asks for none of it, read and built it (1.4 of 3.7 s on a cold
    disk)."""

    def __init__(self, lookup: Callable[[np.ndarray], np.ndarray]) -> None:
        self._lookup = lookup

    def __getitem__(self, slots: int | np.ndarray) -> np.ndarray | np.integer:
        if np.ndim(slots) == 0:
            return self._lookup(np.array([slots], np.int64))[0]
        return self._lookup(np.asarray(slots, np.int64))


class CsrGraph:
    """One version's graph over its segments: neighbour lists, degrees, first_seen and ids by slot.

    With deltas, a slot's current list is the one of the newest segment that lists or removes it (a removal wins
    within its segment: the node has no list then). The slots the deltas name are few (a 1 % append at 1M
    messages: 75k of 3.4M), so only they are put in a sorted table of owners, made when first asked; any other slot's
    list is the base's, found by a binary search of its sorted slot list. No array over every slot is built at open
    (a cold `memctl recall` at 1M messages read every segment's slot list for one: 0.3 s of a cold disk); a process
    that goes on asking (a server: a query asks ~600 times, each search ~35 µs) builds the per-slot owner arrays
    after DENSE_AFTER lookups and reads them from then on. A slot with no list has no edges.
    """

    def __init__(
        self,
        adjacency: Sequence[Adjacency],
        n_slots: int,
        removed: Sequence[np.ndarray],
        first_seen: np.ndarray | SlotValues,
        ids: Callable[[np.ndarray], list[str]],
        slots: Callable[[Sequence[str]], np.ndarray],
        edge_types: Sequence[str],
    ) -> None:
        self.n = n_slots
        self.edge_types = list(edge_types)
        self.first_seen = first_seen  # int64 µs per slot (NO_TIME unknown)
        self._ids = ids  # slots -> ids (callable on an int array)
        self._slots = slots  # ids -> slots, -1 for no current node (callable)
        self._adj = list(adjacency)
        self._removed = list(removed)
        self._single = len(self._adj) == 1 and not len(removed[0])
        self._named: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._dense: tuple[np.ndarray, np.ndarray] | None = None  # per slot: segment and row of its current list
        self._lookups = 0

    def _dense_owners(self) -> tuple[np.ndarray, np.ndarray]:
        seg = np.full(self.n, -1, np.int16)
        row = np.full(self.n, -1, np.int32)
        for s, (a, gone) in enumerate(zip(self._adj, self._removed)):
            seg_slots = np.asarray(a.slot)
            seg[seg_slots] = s
            row[seg_slots] = np.arange(len(seg_slots))
            if len(gone):
                seg[gone] = -1
                row[gone] = -1
        return seg, row

    def _delta_owners(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slots, segment, row) sorted by slot: the current list of every slot a delta lists or some segment
        removes (segment and row -1: none)."""
        if self._named is None:
            slot, seg, row = [], [], []
            for s, (a, gone) in enumerate(zip(self._adj, self._removed)):  # in order: a later entry wins
                if s:
                    slot.append(np.asarray(a.slot, np.int64))
                    seg.append(np.full(len(a.slot), s, np.int64))
                    row.append(np.arange(len(a.slot), dtype=np.int64))
                slot.append(np.asarray(gone, np.int64))  # after its own lists: a removal wins in its segment
                seg.append(np.full(len(gone), -1, np.int64))
                row.append(np.full(len(gone), -1, np.int64))
            all_slots = np.concatenate(slot)
            order = np.argsort(all_slots, kind="stable")
            all_slots, segs, rows = all_slots[order], np.concatenate(seg)[order], np.concatenate(row)[order]
            last = np.ones(len(all_slots), bool)
            last[:-1] = all_slots[1:] != all_slots[:-1]
            self._named = (all_slots[last], segs[last], rows[last])
        return self._named

    def _owners(self, vs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(segment, row in its slot list) of each slot's current list; -1, -1 where it has none."""
        if self._dense is None:
            self._lookups += 1
            if self._lookups > DENSE_AFTER:
                self._dense = self._dense_owners()
        if self._dense is not None:
            return self._dense[0][vs].astype(np.int64), self._dense[1][vs].astype(np.int64)
        keys, segs, rows = self._delta_owners()
        seg = np.full(len(vs), -1, np.int64)
        row = np.full(len(vs), -1, np.int64)
        named = np.zeros(len(vs), bool)
        if len(keys):
            at = np.minimum(np.searchsorted(keys, vs), len(keys) - 1)
            named = keys[at] == vs
            seg[named], row[named] = segs[at[named]], rows[at[named]]
        rest = np.flatnonzero(~named)
        if len(rest):
            at = self._adj[0].rows(vs[rest])
            hit = at >= 0
            seg[rest[hit]], row[rest[hit]] = 0, at[hit]
        return seg, row

    def degree(self, slots: np.ndarray) -> np.ndarray:
        """igraph's degree of each slot (edges at it, a self-loop twice), looked up: no per-slot array is built,
        so opening a large tenant's graph reads nothing."""
        lo, hi, _ = self._spans(np.asarray(slots, dtype=np.int64))
        return hi - lo

    def _spans(self, vs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, segment) of each slot's current list: its half-edges are [lo, hi) of that segment's arrays
        (a slot with no list: 0, 0, -1)."""
        lo = np.zeros(len(vs), np.int64)
        hi = np.zeros(len(vs), np.int64)
        seg = np.full(len(vs), -1, np.int64)
        if self._single:
            a = self._adj[0]
            rows = a.rows(vs)
            ok = rows >= 0
            lo[ok], hi[ok], seg[ok] = a.ptr[rows[ok]], a.ptr[rows[ok] + 1], 0
            return lo, hi, seg
        segs, rows = self._owners(vs)
        for s in np.unique(segs[segs >= 0]).tolist():
            pick = segs == s
            r = rows[pick]
            lo[pick], hi[pick], seg[pick] = self._adj[s].ptr[r], self._adj[s].ptr[r + 1], s
        return lo, hi, seg

    def degrees(self) -> np.ndarray:
        """Every slot's degree (reads every list's offsets: for reports, not for queries)."""
        return self.degree(np.arange(self.n))

    def ids(self, slots: Sequence[int] | np.ndarray) -> list[str]:
        return self._ids(np.asarray(slots, dtype=np.int64))

    def slots(self, ids: Sequence[str]) -> np.ndarray:
        return self._slots(list(ids))

    def incident(self, v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(neighbour slots, codes, weights) of slot v's edges, in list order."""
        if self._single:
            a = self._adj[0]
            row = a.row(v)
            if row < 0:
                return _EMPTY
        else:
            segs, rows = self._owners(np.array([v], np.int64))
            row = int(rows[0])
            if row < 0:
                return _EMPTY
            a = self._adj[int(segs[0])]
        lo, hi = int(a.ptr[row]), int(a.ptr[row + 1])
        return a.nbr[lo:hi], a.code[lo:hi], a.weights(lo, hi)

    def incident_many(self, vs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """incident() of every slot of `vs` at once: (ptr, neighbour slots, codes, weights), slot vs[i]'s edges
        at [ptr[i], ptr[i + 1]) in list order. Fewer numpy calls than a call a slot (a query's ~50 seeds)."""
        lo, hi, seg = self._spans(np.asarray(vs, dtype=np.int64))
        lengths = hi - lo
        ptr = np.zeros(len(vs) + 1, np.int64)
        np.cumsum(lengths, out=ptr[1:])
        at = np.repeat(lo - ptr[:-1], lengths) + np.arange(ptr[-1])  # each edge's position in its segment
        owner = np.repeat(seg, lengths)
        nbr = np.empty(ptr[-1], np.int64)
        code = np.empty(ptr[-1], np.int64)
        w = np.empty(ptr[-1], np.float64)
        for s in np.unique(seg[seg >= 0]).tolist():
            a, pick = self._adj[s], owner == s
            idx = at[pick]
            nbr[pick], code[pick] = a.nbr[idx], a.code[idx]
            w[pick] = a.weights_at(idx)
        return ptr, nbr, code, w

    def type_of(self, code: int) -> str:
        return self.edge_types[code >> 1]


_EMPTY = (np.zeros(0, np.int32), np.zeros(0, np.uint8), np.zeros(0, np.float64))


def personalized_pagerank(
    n: int,
    src: Sequence[int],
    dst: Sequence[int],
    weights: Sequence[float],
    reset: Sequence[float],
    damping: float = 0.85,
    tol: float = 1e-13,
    max_iter: int = 1000,
) -> np.ndarray:
    """igraph's `personalized_pagerank(directed=False, weights=…, reset=…)` (PRPACK) by power iteration: an
    undirected weighted graph of `n` vertices; a walker at a vertex without edges restarts by `reset`, as
    PRPACK does. Iterates until the L1 change is below `tol` (PRPACK's own tolerance is 1e-10) and agrees
    with igraph to ~1e-12 (tests/test_recall_scoring.py), without importing igraph, whose import pulls in
    matplotlib: ~1 s of a cold `memctl recall`."""
    r = np.asarray(reset, dtype=np.float64)
    r = r / r.sum()
    if not len(src):
        return r
    a = np.concatenate([np.asarray(src, np.int64), np.asarray(dst, np.int64)])
    b = np.concatenate([np.asarray(dst, np.int64), np.asarray(src, np.int64)])
    w = np.asarray(weights, dtype=np.float64)
    w = np.concatenate([w, w])
    strength = np.bincount(a, weights=w, minlength=n)
    share = damping * w / strength[a]  # the walker's step along each (directed) half of an edge
    dangling = np.flatnonzero(strength == 0)
    # without dangling vertices their mass term is damping * 0.0 = 0.0 and the restart is (1 - damping) * r: the
    # same floats made once. The step buffer: a query's ~180 iterations of small arrays are numpy call overhead.
    restart = (1 - damping) * r
    step = np.empty(len(a))
    x = r.copy()
    for i in range(max_iter):
        np.take(x, a, out=step)
        np.multiply(share, step, out=step)
        nx = np.bincount(b, weights=step, minlength=n)
        if len(dangling):
            nx += (damping * x[dangling].sum() + (1 - damping)) * r
        else:
            nx += restart
        if i % 8 == 7:  # the L1 change shrinks by ~damping a step: test it now and then, not every step
            done = np.abs(nx - x).sum() < tol
            x = nx
            if done:
                break
        else:
            x = nx
    return x / x.sum()
