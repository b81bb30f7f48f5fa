"""One segment of a tenant's recall index: immutable files in one folder, opened memory-mapped.

A *base* segment holds everything recall reads for the tenant; a *delta* holds only what changed since
the segments before it, and names what it removes. Files (Arrow IPC files are uncompressed, so
opening one maps it and reads nothing; .npy files open with mmap_mode="r"):

  nodes.arrow, nodes.keys.npy     node rows recall reads, sorted by id; `slot` is the node's vertex number
  node_first_seen.npy             int64 µs per node row (graph as_of), NO_TIME when unknown
  node_*                          BM25 postings over the node documents (row i = node row i; recall.postings)
  names.arrow, names.keys.npy     (lower-cased Entity title or alias, slot), sorted by name
  adj_*.npy                       neighbour lists of slots (recall.graph_csr)
  chunks.arrow, chunks.keys.npy   raw_chunks rows citations read (id, path, sha256, conv_id, ts), sorted by id
  raw_doc_chunk.npy, raw_*        BM25 postings over the text passages (raw doc i = chunk row raw_doc_chunk[i])
  messages.arrow                  message pieces sorted by the chunk they lie in (`piece`), then conv_id, seq
  msg_keys.arrow/.keys.npy, msg_ptr.npy, msg_hash.npy   the distinct pieces' chunk ids, CSR offsets, group hashes
  removed_slots.npy, removed_chunks.arrow, removed_msgs.arrow   (delta) what it removes from older segments
  meta.json                       kind, counts, the FTS tokenize macro, the edge type names
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from recall.graph_csr import Adjacency, AdjacencyArrays, write_adjacency
from recall.postings import Postings, PostingsArrays, write_postings
from recall.sorted_keys import SortedKeys, arrow_numpy, mapped

# Node columns recall reads (TenantReader.nodes' columns, plus aliases).
NODE_ROW_COLS = ("type", "subtype", "title", "text", "time_start", "time_end", "first_seen", "last_seen",
                 "raw_refs", "conv_id", "msg_id", "speaker", "status", "importance", "frequency", "sentiment",
                 "aliases")
CHUNK_ROW_COLS = ("path", "sha256", "conv_id", "ts")
MESSAGE_ROW_COLS = ("conv_id", "msg_id", "seq", "speaker", "ts", "text", "raw_id", "offset", "length", "raw_refs")


def write_arrow(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as f:
        with pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)


def read_arrow(path: Path) -> tuple[pa.Table, pa.MemoryMappedFile]:
    """The table of an Arrow IPC file, zero-copy over a memory map (kept alive by the returned map)."""
    mm = pa.memory_map(str(path))
    return pa.ipc.open_file(mm).read_all(), mm


def write_segment(folder: Path, *, kind: str, nodes: pa.Table, node_postings: PostingsArrays,
                  first_seen: np.ndarray, names: pa.Table, adjacency: AdjacencyArrays, chunks: pa.Table,
                  raw_doc_chunk: np.ndarray, raw_postings: PostingsArrays, messages: pa.Table, msg_keys: pa.Array,
                  msg_ptr: np.ndarray, msg_hash: np.ndarray, removed_slots: np.ndarray,
                  removed_chunks: list[str], removed_msgs: list[str], meta: dict) -> None:
    """Write one segment's files into `folder` (created; fsynced, the caller renames it into place)."""
    folder.mkdir(parents=True)
    write_arrow(folder / "nodes.arrow", nodes)
    SortedKeys.write(folder / "nodes.keys.npy", nodes.column("id"))
    np.save(folder / "node_first_seen.npy", first_seen.astype(np.int64))
    write_postings(folder, "node", node_postings)
    write_arrow(folder / "names.arrow", names)
    SortedKeys.write(folder / "names.keys.npy", names.column("name"))
    write_adjacency(folder, adjacency)
    write_arrow(folder / "chunks.arrow", chunks)
    SortedKeys.write(folder / "chunks.keys.npy", chunks.column("id"))
    np.save(folder / "raw_doc_chunk.npy", raw_doc_chunk.astype(np.int32))
    write_postings(folder, "raw", raw_postings)
    write_arrow(folder / "messages.arrow", messages)
    write_arrow(folder / "msg_keys.arrow", pa.table({"key": msg_keys}))
    SortedKeys.write(folder / "msg_keys.keys.npy", msg_keys)
    np.save(folder / "msg_ptr.npy", msg_ptr.astype(np.int64))
    np.save(folder / "msg_hash.npy", msg_hash.astype(np.uint64))
    np.save(folder / "removed_slots.npy", removed_slots.astype(np.int32))
    write_arrow(folder / "removed_chunks.arrow", pa.table({"key": pa.array(sorted(removed_chunks), pa.string())}))
    write_arrow(folder / "removed_msgs.arrow", pa.table({"key": pa.array(sorted(removed_msgs), pa.string())}))
    (folder / "meta.json").write_text(json.dumps({"kind": kind, **meta}, sort_keys=True, ensure_ascii=False),
                                      "utf-8")
    fsync_tree(folder)


def fsync_tree(folder: Path) -> None:
    """fsync every file in `folder`, then the folder itself."""
    for p in folder.iterdir():
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Segment:
    """One segment, opened: every file mapped at once (a reader that holds it keeps it after a swap)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = folder.name
        self.meta = json.loads((folder / "meta.json").read_text("utf-8"))
        self._maps: list[pa.MemoryMappedFile] = []
        self.nodes = self._arrow("nodes.arrow")
        self.node_keys = SortedKeys.open(folder / "nodes.keys.npy", self.nodes.column("id"))
        self.node_slot = arrow_numpy(self.nodes.column("slot"))
        self.node_first_seen = mapped(folder / "node_first_seen.npy")
        self.node_postings = Postings(folder, "node")
        self.names = self._arrow("names.arrow")
        self.name_keys = SortedKeys.open(folder / "names.keys.npy", self.names.column("name"))
        try:   # a damaged graph drops stage C only (seed 004 §18): the error is raised when the graph is asked for
            self.adjacency: Adjacency | None = Adjacency(folder)
            self.adjacency_error: Exception | None = None
        except Exception as e:  # noqa: BLE001
            self.adjacency, self.adjacency_error = None, e
        self.chunks = self._arrow("chunks.arrow")
        self.chunk_keys = SortedKeys.open(folder / "chunks.keys.npy", self.chunks.column("id"))
        self.raw_doc_chunk = mapped(folder / "raw_doc_chunk.npy")
        self.raw_postings = Postings(folder, "raw")
        self.messages = self._arrow("messages.arrow")
        keys = self._arrow("msg_keys.arrow").column("key")
        self.msg_keys = SortedKeys.open(folder / "msg_keys.keys.npy", keys)
        self.msg_key_strings = keys
        self.msg_ptr = mapped(folder / "msg_ptr.npy")
        self.msg_hash = mapped(folder / "msg_hash.npy")
        self.removed_slots = mapped(folder / "removed_slots.npy")
        self.removed_chunks = frozenset(self._arrow("removed_chunks.arrow").column("key").to_pylist())
        self.removed_msgs = frozenset(self._arrow("removed_msgs.arrow").column("key").to_pylist())

    def require_adjacency(self) -> Adjacency:
        """The graph's adjacency lists; the error that kept them from loading is raised when they are asked for."""
        if self.adjacency is None:
            assert self.adjacency_error is not None
            raise self.adjacency_error
        return self.adjacency

    def _arrow(self, name: str) -> pa.Table:
        table, mm = read_arrow(self.folder / name)
        self._maps.append(mm)
        return table

    def holds_chunk(self, key: str) -> bool:
        return self.chunk_keys.find([key])[0] >= 0

    def message_rows(self, key: str) -> tuple[int, int] | None:
        """[lo, hi) of the messages with a piece in chunk `key`, None when this segment has no group for it."""
        j = int(self.msg_keys.find([key])[0])
        if j < 0:
            return None
        return int(self.msg_ptr[j]), int(self.msg_ptr[j + 1])
