"""A tenant's recall index, read: versions of base + delta segments, opened memory-mapped, one folder per tenant.

    <index dir>/recall/<tenant slug>/
        CURRENT        the current version's manifest name (replaced atomically)
        m000007.json   a version: its tenant, its segments (oldest first: a base, then deltas), slot count,
                       edge type names, and the tenant's stats (n_nodes, n_chunks, newest)
        s000005/ …     segments (recall.segment), immutable once renamed into place
        LOCK           serialises writers (recall.index_build)

Reading needs a tenant: `open_tenant_index(index_dir, tenant)` resolves the tenant's own folder and
checks the manifest names that tenant, so no call reads another tenant's files. A version is opened
whole (every file mapped) and kept until CURRENT changes; a reader holding it keeps reading it after a
writer swaps a new version in and removes the old files.

What is live across segments: a node row is current when its slot's newest owner is its segment
(a delta re-states a changed node under the same slot, and lists the slots it removes); chunk rows
and message groups are current unless a newer segment re-states or removes their key. BM25 counts
only live documents (recall.postings), so base + deltas answer exactly like a fresh base.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from recall.citations import RawRef
from recall.graph_csr import NO_TIME, CsrGraph, SlotValues
from recall.postings import Part, bm25, live_stats, query_terms
from recall.scoring import BATCH_COLUMNS, INDEX_COLUMNS, NodeBatch
from recall.segment import SEG_CHUNKS, SEG_MESSAGES, SEG_NODES, Segment
from recall.sorted_keys import arrow_indices, arrow_numpy
from recall.store import FileCache, IndexFormatOutdated, IndexNotBuilt, TenantInfo, tenant_slug

FORMAT = 6  # a version of another format is rebuilt (2: multiset group hashes; 3: MMR tokens of nodes;
# 4: compact Arrow rows, node ids only in the keys, narrow CSR and postings arrays; 5: node records; 6: each posting's
# document length beside it)
NODE_COLUMNS = (
    "id",
    "type",
    "subtype",
    "title",
    "text",
    "time_start",
    "time_end",
    "first_seen",
    "last_seen",
    "raw_refs",
    "conv_id",
    "msg_id",
    "speaker",
    "status",
    "importance",
    "frequency",
    "sentiment",
)


def recall_dir(index_dir: Path) -> Path:
    """The folder of every tenant's recall index (its existence means the indexes were built)."""
    return Path(index_dir) / "recall"


def tenant_dir(index_dir: Path, tenant: str) -> Path:
    if not tenant:
        raise ValueError("tenant is required")
    return recall_dir(index_dir) / tenant_slug(tenant)


def read_current(folder: Path) -> dict | None:
    """The manifest CURRENT names, or None when the folder holds no version. FileNotFoundError when CURRENT names
    a manifest that is gone: a writer replaced and removed it since CURRENT was read (open CURRENT again)."""
    try:
        name = (folder / "CURRENT").read_text("utf-8").strip()
    except FileNotFoundError:
        return None
    return json.loads((folder / name).read_text("utf-8")) | {"name": name}


class Version:
    """One version of one tenant's index, opened (`random`: see Segment)."""

    def __init__(self, folder: Path, manifest: dict, tenant: str, random: bool = True) -> None:
        if manifest.get("tenant") != tenant:
            raise ValueError(f"{folder} holds the index of another tenant")
        if manifest.get("format") != FORMAT:
            raise IndexFormatOutdated(
                f"{folder} holds a recall index of format {manifest.get('format')}, this code reads "
                f"{FORMAT}: rebuild it (recall.index.build_indexes)"
            )
        self.folder = folder
        self.manifest = manifest
        self.tenant = tenant
        self.segments = [Segment(folder / name, random) for name in manifest["segments"]]
        self.n_slots = int(manifest["n_slots"])
        self.edge_types = manifest["edge_types"]
        self.single = len(self.segments) == 1
        self._lock = threading.Lock()
        self._graph: CsrGraph | None = None
        self._node_parts: list[Part] | None = None
        self._raw_parts: list[Part] | None = None
        self._stats: dict[str, tuple[int, float]] = {}
        if not self.single:
            self._owners()

    # -- liveness ------------------------------------------------------------------------------

    def _owners(self) -> None:
        """Per slot: the segment and row of its current node row (-1: removed)."""
        self.owner_seg = np.full(self.n_slots, -1, np.int16)
        self.owner_row = np.full(self.n_slots, -1, np.int32)
        for s, seg in enumerate(self.segments):
            if self._slot_is_row(s):  # its slot column (a 1M lake's every node, from disk on a cold start) unread
                n = seg.nodes.num_rows
                self.owner_seg[:n], self.owner_row[:n] = 0, np.arange(n, dtype=np.int32)
                continue
            self.owner_seg[seg.node_slot] = s
            self.owner_row[seg.node_slot] = np.arange(len(seg.node_slot), dtype=np.int32)
            if len(seg.removed_slots):
                self.owner_seg[seg.removed_slots] = -1
                self.owner_row[seg.removed_slots] = -1

    def _slot_is_row(self, s: int) -> bool:
        """Segment s numbers its nodes slot = row: a base (in id order), the first segment of every version."""
        return s == 0 and self.segments[0].meta.get("kind") == "base"

    def node_live(self, s: int) -> np.ndarray | None:
        """Which node rows of segment s are current (None: all)."""
        if self.single:
            return None
        if self._slot_is_row(s):
            return self.owner_seg[: self.segments[s].nodes.num_rows] == s
        return self.owner_seg[self.segments[s].node_slot] == s

    def chunk_live(self, s: int) -> np.ndarray | None:
        """Which chunk rows of segment s are current (None: all): newer segments neither re-state nor remove them."""
        newer = self.segments[s + 1 :]
        if not newer:
            return None
        seg = self.segments[s]
        live = np.ones(seg.chunks.num_rows, bool)
        for t in newer:
            keys = t.chunks.column("id").to_pylist() + sorted(t.removed_chunks)
            found = seg.chunk_keys.find(keys)
            live[found[found >= 0]] = False
        return live

    def node_parts(self) -> list[Part]:
        with self._lock:
            if self._node_parts is None:
                self._node_parts = [Part(seg.node_postings, self.node_live(s)) for s, seg in enumerate(self.segments)]
            return self._node_parts

    def raw_parts(self) -> list[Part]:
        with self._lock:
            if self._raw_parts is None:
                parts = []
                for s, seg in enumerate(self.segments):
                    live = self.chunk_live(s)
                    parts.append(Part(seg.raw_postings, None if live is None else live[seg.raw_doc_chunk]))
                self._raw_parts = parts
            return self._raw_parts

    def stats(self, kind: str) -> tuple[int, float]:
        """(N, avgdl) of the node or raw documents over the live rows of all segments."""
        if kind not in self._stats:
            self._stats[kind] = live_stats(self.node_parts() if kind == "node" else self.raw_parts())
        return self._stats[kind]

    # -- node rows by id / slot ----------------------------------------------------------------

    def slots_of(self, ids: Sequence[str]) -> np.ndarray:
        """Current slot of each id (-1: no current node)."""
        if self.single:
            return self.segments[0].node_keys.find(ids)
        out = np.full(len(ids), -1, np.int64)
        for seg in reversed(self.segments):
            todo = np.nonzero(out < 0)[0]
            if not len(todo):
                break
            rows = seg.node_keys.find([ids[i] for i in todo.tolist()])
            hit = rows >= 0
            out[todo[hit]] = seg.node_slot[rows[hit]]
        alive = out >= 0
        alive[alive] = self.owner_seg[out[alive]] >= 0
        return np.where(alive, out, -1)

    def rows_of(self, slots: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(segment, positions in `slots`, rows) for the live slots, grouped by segment."""
        if self.single:
            pos = np.nonzero(slots >= 0)[0]
            return [(0, pos, slots[pos])] if len(pos) else []
        out = []
        segs = np.where(slots >= 0, self.owner_seg[np.maximum(slots, 0)], -1)
        for s in np.unique(segs[segs >= 0]).tolist():
            pos = np.nonzero(segs == s)[0]
            out.append((s, pos, self.owner_row[slots[pos]].astype(np.int64)))
        return out

    def first_seen_of(self, slots: np.ndarray) -> np.ndarray:
        """first_seen (int64 µs) of each slot's current node row; NO_TIME where it has none or none is known."""
        out = np.full(len(slots), NO_TIME, np.int64)
        for s, pos, rows in self.rows_of(np.asarray(slots, dtype=np.int64)):
            out[pos] = self.segments[s].first_seen_at(rows)
        return out

    def ids_of_slots(self, slots: np.ndarray) -> list[str]:
        out: list[str | None] = [None] * len(slots)
        for s, pos, rows in self.rows_of(np.asarray(slots, dtype=np.int64)):
            for p, name in zip(pos.tolist(), self.segments[s].node_ids(rows)):
                out[p] = name
        return out  # type: ignore[return-value]

    def graph(self) -> CsrGraph:
        with self._lock:
            if self._graph is None:
                self._graph = self._build_graph()
            return self._graph

    def _build_graph(self) -> CsrGraph:
        for seg in self.segments:
            if seg.adjacency_error is not None:
                raise seg.adjacency_error
        # looked up where asked (a row's record): slot = row in a base; over deltas, each asked slot's current row's
        first_seen = SlotValues(self.segments[0].first_seen_at if self.single else self.first_seen_of)
        return CsrGraph(
            [seg.require_adjacency() for seg in self.segments],
            self.n_slots,
            [seg.removed_slots for seg in self.segments],
            first_seen,
            self.ids_of_slots,
            self.slots_of,
            self.edge_types,
        )


_VERSIONS = FileCache()


def open_version(index_dir: Path, tenant: str) -> Version | None:
    """The tenant's current version (cached until CURRENT is replaced); None when the index holds no such tenant.
    Raises IndexNotBuilt when no recall index was ever built at `index_dir`."""
    root = recall_dir(index_dir)
    folder = tenant_dir(index_dir, tenant)
    if not root.is_dir():
        raise IndexNotBuilt(f"no recall index at {root}; build it first (recall.index.build_indexes)")
    for attempt in range(3):
        try:
            return _VERSIONS.get(folder / "CURRENT", lambda _: _load(folder, tenant))
        except FileNotFoundError:
            if attempt == 2:  # a writer removed the version between our reads, three times over
                raise
    return None


def _load(folder: Path, tenant: str) -> Version | None:
    manifest = read_current(folder)
    return None if manifest is None else Version(folder, manifest, tenant)


class TenantIndex:
    """Tenant-scoped reads of one version: what recall's stages and citations read (TenantReader's methods)."""

    def __init__(self, version: Version) -> None:
        self.v = version
        self.tenant = version.tenant

    def close(self) -> None:
        """Nothing to release: the version stays cached for the next recall."""

    def info(self) -> TenantInfo:
        m = self.v.manifest
        newest = datetime.fromisoformat(m["newest"]) if m.get("newest") else None
        return TenantInfo(self.tenant, tenant_slug(self.tenant), int(m["n_nodes"]), int(m["n_chunks"]), newest)

    def _terms(self, query: str) -> tuple[str, ...]:
        sql = self.v.manifest.get("tokenize")
        return query_terms(sql).stems(query) if sql and query.strip() else ()

    def node_bm25(self, info: TenantInfo, query: str, limit: int) -> list[tuple[str, float]]:
        """(node id, BM25) best first over the node documents (equal scores to 9 decimals by id)."""
        n, avgdl = self.v.stats("node")
        segs = self.v.segments
        return bm25(
            self.v.node_parts(),
            n,
            avgdl,
            self._terms(query),
            lambda s, rows: segs[s].node_ids(rows),
            limit,
            rows_in_id_order=True,
        )

    def raw_bm25(self, info: TenantInfo, query: str, limit: int) -> list[tuple[str, float]]:
        """(raw_id, BM25) best first over the text passages."""
        n, avgdl = self.v.stats("raw")
        segs = self.v.segments
        return bm25(
            self.v.raw_parts(),
            n,
            avgdl,
            self._terms(query),
            lambda s, rows: segs[s].chunks.column("id").take(arrow_indices(segs[s].raw_doc_chunk[rows])).to_pylist(),
            limit,
        )

    def nodes(self, ids: Sequence[str], columns: Sequence[str] = NODE_COLUMNS) -> dict[str, dict]:
        """Node rows by id (unknown or removed ids are absent)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        out: dict[str, dict] = {}
        for s, _, rows in self.v.rows_of(self.v.slots_of(ids)):
            out.update(_dicts(self.v.segments[s].node_rows(rows, columns), "id"))
        return out

    def node_batch(self, ids: Sequence[str], columns: Sequence[str] = (*BATCH_COLUMNS, *INDEX_COLUMNS)) -> NodeBatch:
        """The rows of `ids` recall scores, as columns (recall.scoring), in the order asked; unknown ids left out.
        `columns`: SCORE_COLUMNS at least."""
        return NodeBatch.from_arrow(self.node_table(ids, columns))

    def node_table(self, ids: Sequence[str], columns: Sequence[str]) -> pa.Table:
        """`columns` of the rows of `ids` ("id" among them), in the order asked; unknown ids left out."""
        ids = list(dict.fromkeys(ids))
        parts, where = [], []
        for s, pos, rows in self.v.rows_of(self.v.slots_of(ids)):
            parts.append(self.v.segments[s].node_rows(rows, columns))
            where.append(pos)
        if not parts:
            # no rows: from_batches, as empty_table() and from_pylist() import pandas (~0.3 s)
            return pa.Table.from_batches([], schema=pa.schema([SEG_NODES.field(c) for c in columns]))
        table = parts[0]
        if len(parts) > 1:
            table = pa.concat_tables(parts).take(arrow_indices(np.argsort(np.concatenate(where), kind="stable")))
        return table

    def named_entities(self, names: Sequence[str]) -> list[str]:
        """Ids of the Entities whose title or an alias is one of `names` (case-insensitive), sorted."""
        if not names:
            return []
        low = list(dict.fromkeys(n.lower() for n in names))
        slots: set[int] = set()
        for s, seg in enumerate(self.v.segments):
            lo, hi = seg.name_keys.ranges(low)
            for a, z in zip(lo.tolist(), hi.tolist()):
                if z > a:
                    found = arrow_numpy(seg.names.column("slot").slice(a, z - a))
                    if not self.v.single:
                        found = found[self.v.owner_seg[found] == s]
                    slots.update(found.tolist())
        return sorted(self.v.ids_of_slots(np.array(sorted(slots), dtype=np.int64))) if slots else []

    def chunks(self, raw_ids: Sequence[str]) -> dict[str, dict]:
        """raw_chunks rows (id, path, sha256, conv_id, ts) by raw_id."""
        out: dict[str, dict] = {}
        todo = list(dict.fromkeys(raw_ids))
        for seg in reversed(self.v.segments):
            if not todo:
                break
            rows = seg.chunk_keys.find(todo)
            hit = rows >= 0
            if hit.any():
                out.update(
                    _dicts(seg.rows(seg.chunks, SEG_CHUNKS, rows[hit], ("id", "path", "sha256", "conv_id", "ts")), "id")
                )
            todo = [k for k, h in zip(todo, hit.tolist()) if not h and k not in seg.removed_chunks]
        return out

    def messages_in(self, raw_ids: Sequence[str]) -> list[dict]:
        """Messages with a piece in any of the chunks (conv_id, msg_id, seq, speaker, ts, text, raw_id, offset,
        length, raw_refs), each once, ordered by conv_id, seq."""
        cols = ("conv_id", "msg_id", "seq", "speaker", "ts", "text", "raw_id", "offset", "length", "raw_refs")
        found: list[dict] = []
        todo = list(dict.fromkeys(raw_ids))
        for seg in reversed(self.v.segments):
            if not todo:
                break
            js = seg.msg_keys.find(todo)
            spans = [(int(seg.msg_ptr[j]), int(seg.msg_ptr[j + 1])) for j in js[js >= 0].tolist()]
            if spans:
                idx = np.concatenate([np.arange(a, z) for a, z in spans])
                found.extend(_dicts(seg.rows(seg.messages, SEG_MESSAGES, idx, cols), None))
            todo = [k for k, j in zip(todo, js.tolist()) if j < 0 and k not in seg.removed_msgs]
        seen: set[tuple] = set()
        out = []
        for m in found:
            key = (m["conv_id"], m["msg_id"], m["seq"], m["raw_id"], m["offset"], m["length"])
            if key not in seen:
                seen.add(key)
                out.append(m)
        out.sort(
            key=lambda m: (
                m["conv_id"] is None,
                m["conv_id"] or "",
                m["seq"] is None,
                m["seq"] or 0,
                m["msg_id"] or "",
                m["raw_id"] or "",
                m["offset"] or 0,
            )
        )
        return out

    def message_pieces(self, raw_ids: Sequence[str], text: bool = True) -> dict[str, list[dict]]:
        """Per chunk, its messages (conv_id, msg_id, seq, speaker, ts, text, "piece": the message's RawRef in that
        chunk), ordered by conv_id, seq: what Citer.prefetch makes of messages_in, ready made. `text` False leaves
        the text out (citing needs only the pieces: the text is the column stored compressed, ~half the time)."""
        cols = ("conv_id", "msg_id", "seq", "speaker", "ts", *(("text",) if text else ()), "piece", "piece_offset")
        cols = (*cols, "piece_length")
        out: dict[str, list[dict]] = {}
        todo = list(dict.fromkeys(raw_ids))
        for seg in reversed(self.v.segments):
            if not todo:
                break
            js = seg.msg_keys.find(todo)
            spans = [(k, int(seg.msg_ptr[j]), int(seg.msg_ptr[j + 1])) for k, j in zip(todo, js.tolist()) if j >= 0]
            if spans:
                rows = _dicts(
                    seg.rows(seg.messages, SEG_MESSAGES, np.concatenate([np.arange(a, z) for _, a, z in spans]), cols),
                    None,
                )
                i = 0
                for key, a, z in spans:
                    group = rows[i : i + z - a]
                    i += z - a
                    for m in group:
                        m["piece"] = RawRef(m.pop("piece"), m.pop("piece_offset"), m.pop("piece_length"))
                    out[key] = group
            todo = [k for k, j in zip(todo, js.tolist()) if j < 0 and k not in seg.removed_msgs]
        return out

    def graph(self) -> CsrGraph:
        return self.v.graph()

    def contents(self) -> dict:
        """Everything this version answers, keyed by ids (not slots or segments): equal for any two versions
        built from the same tables, whatever their segment layout. For tests and diagnostics (reads it all)."""
        v = self.v
        live_slots = np.arange(v.n_slots) if v.single else np.flatnonzero(v.owner_seg >= 0)
        ids = v.ids_of_slots(live_slots)
        cols = [c for c in NODE_COLUMNS if c != "id"] + ["aliases"]
        rows = self.nodes(ids, ("id", *cols))
        g = self.graph()
        adjacency = {}
        for slot, node_id in zip(live_slots.tolist(), ids):
            nbr, code, w = g.incident(slot)
            adjacency[node_id] = [
                (name, g.type_of(c), c & 1, x) for name, c, x in zip(g.ids(nbr), code.tolist(), w.tolist())
            ]
        chunk_ids = sorted({k for seg in v.segments for k in seg.chunks.column("id").to_pylist()})
        pieces = sorted({k for seg in v.segments for k in seg.msg_key_strings.to_pylist()})
        return {
            "info": self.info(),
            "nodes": {i: tuple(rows[i][c] for c in cols) for i in sorted(ids)},
            "adjacency": adjacency,
            "degree": dict(zip(ids, g.degree(live_slots).tolist())),
            "chunks": self.chunks(chunk_ids),
            "messages": {k: m for k in pieces if (m := self.messages_in([k]))},
            "node_stats": v.stats("node"),
            "raw_stats": v.stats("raw"),
        }


def _dicts(part: pa.Table, key: str | None) -> Any:
    """The rows of an Arrow table as dicts: {row[key]: row} (key None: a list)."""
    columns = part.column_names
    values = [_pylist(part.column(c)) for c in columns]
    dicts = [dict(zip(columns, vals)) for vals in zip(*values)]
    return dicts if key is None else {d[key]: d for d in dicts}


def _pylist(col: pa.ChunkedArray) -> list:
    """A column as Python values; timestamps through numpy (25x faster than Arrow's to_pylist for them)."""
    if pa.types.is_timestamp(col.type) and col.type.tz is None:
        nulls = col.is_null().to_pylist() if col.null_count else None
        values = arrow_numpy(col, null=0).view(f"datetime64[{col.type.unit}]").astype(object)
        out = values.tolist()
        return [None if n else v for n, v in zip(nulls, out)] if nulls else out
    return col.to_pylist()


def open_tenant_index(index_dir: Path, tenant: str) -> TenantIndex | None:
    """A reader of `tenant`'s current version; None when the index holds no such tenant (IndexNotBuilt when
    no recall index was built here)."""
    v = open_version(index_dir, tenant)
    return None if v is None else TenantIndex(v)
