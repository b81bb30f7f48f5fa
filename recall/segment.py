"""One segment of a tenant's recall index: immutable files in one folder, opened memory-mapped.

A *base* segment holds everything recall reads for the tenant; a *delta* holds only what changed since
the segments before it, and names what it removes. Files (Arrow IPC files are uncompressed, so
opening one maps it and reads nothing; .npy files are mapped read-only too; a reader's maps are advised for random
reads, sorted_keys.map_file):

  nodes.arrow, nodes.keys.npy     node rows recall reads, sorted by id; `slot` is the node's vertex number; the
                                  ids themselves are the keys' prefixes (an `id` column only when some id is
                                  longer than the prefix width)
  node_rec.npy, node_dicts.arrow  the same rows' fixed-width fields, a record a row (`node_records`), and the
                                  dictionaries of those that are dictionary indices
  node_*                          BM25 postings over the node documents (row i = node row i; recall.postings)
  names.arrow, names.keys.npy     (lower-cased Entity title or alias, slot), sorted by name
  adj_*.npy                       neighbour lists of slots (recall.graph_csr)
  chunks.arrow, chunks.keys.npy   raw_chunks rows citations read (id, path, sha256, conv_id, ts), sorted by id
  raw_doc_chunk.npy, raw_*        BM25 postings over the text passages (raw doc i = chunk row raw_doc_chunk[i])
  messages.arrow                  message pieces sorted by the chunk they lie in (`piece`), then conv_id, seq
  msg_keys.arrow/.keys.npy, msg_ptr.npy, msg_hash.npy   the distinct pieces' chunk ids, CSR offsets, group hashes
  removed_slots.npy, removed_chunks.arrow, removed_msgs.arrow   (delta) what it removes from older segments
  meta.json                       kind, counts, the FTS tokenize macro, the edge type names

The Arrow files are stored *compact* (`compact`): a column, list item or struct field whose values repeat
(at most one distinct value in two rows: node types, statuses, speakers, conv ids, the raw ids of raw_refs,
MMR tokens, importances) is dictionary-encoded with the narrowest index, and an int64 whose values fit
is int32. Dictionaries are read once when a file is opened, the indices stay mapped; rows read are cast back
to the declared schema (`SEG_NODES`, `SEG_CHUNKS`, `SEG_MESSAGES`), so readers see the same types and values.
Free text (`text` of nodes and messages) is compressed row by row (`ZSTD_COLUMNS`). Compressing whole record
batches (LZ4/zstd) was measured and not kept: a query reads a few hundred node rows spread over the whole file,
so it would decode most batches (+70–180 ms a query; bench/README.md, "Lean storage").
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from r2g.schema import NODES
from raw_store.schema import MESSAGES, RAW_CHUNKS
from recall.graph_csr import NO_TIME, Adjacency, AdjacencyArrays, write_adjacency
from recall.index_commit import write_atomic
from recall.postings import Postings, PostingsArrays, write_postings
from recall.sorted_keys import (
    SortedKeys,
    arrow_indices,
    fence_of,
    fence_path,
    map_file,
    mapped,
    prefix_strings,
    read_arrow_rows_ahead,
    read_rows_ahead,
)

# Node columns recall reads (TenantReader.nodes' columns, plus aliases).
NODE_ROW_COLS = (
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
    "aliases",
)
CHUNK_ROW_COLS = ("path", "sha256", "conv_id", "ts")
MESSAGE_ROW_COLS = ("conv_id", "msg_id", "seq", "speaker", "ts", "text", "raw_id", "offset", "length", "raw_refs")

# The rows of a segment's Arrow files as readers see them (stored compact: see the module docstring).
SEG_NODES = pa.schema(
    [
        ("id", pa.string()),
        ("slot", pa.int32()),
        ("hash", pa.uint64()),
        *(NODES.field(c) for c in NODE_ROW_COLS),
        ("mmr", pa.list_(pa.string())),
    ]
)
SEG_CHUNKS = pa.schema(
    [
        ("id", pa.string()),
        ("path", pa.string()),
        ("sha256", pa.string()),
        ("conv_id", pa.string()),
        ("ts", RAW_CHUNKS.field("ts").type),
        ("hash", pa.uint64()),
    ]
)
SEG_MESSAGES = pa.schema(
    [
        ("piece", pa.string()),
        ("piece_offset", pa.int64()),
        ("piece_length", pa.int64()),
        *(MESSAGES.field(c) for c in MESSAGE_ROW_COLS),
    ]
)


def write_arrow(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as f:
        with pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)


def _index_type(n: int) -> pa.DataType:
    return pa.int8() if n < 2**7 else pa.int16() if n < 2**15 else pa.int32()


def _compact(col: pa.Array) -> pa.Array:
    """One column (list item, struct field) in its storage type (see the module docstring)."""
    t = col.type
    mask = col.is_null() if col.null_count else None
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(col.offsets, _compact(col.values), mask=mask)
    if pa.types.is_struct(t):
        parts = [_compact(f) for f in col.flatten()]
        return pa.StructArray.from_arrays(
            parts, fields=[pa.field(f.name, p.type, f.nullable) for f, p in zip(t, parts)], mask=mask
        )
    if t == pa.int64() and len(col) > col.null_count:
        lo, hi = pc.min_max(col).values()
        if -(2**31) <= lo.as_py() and hi.as_py() < 2**31:
            return col.cast(pa.int32())
    if (pa.types.is_string(t) or pa.types.is_floating(t)) and len(col) >= 16:
        distinct = pc.count_distinct(col).as_py()
        if distinct * 2 <= len(col):
            d = pc.dictionary_encode(col)
            return pa.DictionaryArray.from_arrays(d.indices.cast(_index_type(distinct)), d.dictionary)
    return col


# Free text (node and message `text`): compressed row by row with zstd and a dictionary trained on the file's own
# rows (kept in the field's metadata), so a query decompresses just the rows it reads (~1 µs a row).
ZSTD_COLUMNS = ("text",)
ZSTD_MIN_ROWS = 1024  # fewer rows (a small delta): stored as they are
ZSTD_DICT_BYTES = 32 * 1024
ZSTD_SAMPLE = 20_000  # rows the dictionary is trained on, evenly spaced (the same file gives the same bytes)
_ZSTD_DICT = b"zstd_dict"
_ZSTD_ID = b"zstd_dict_id"
_DECOMPRESSORS = threading.local()


def _zstd(col: pa.Array) -> tuple[pa.Array, dict[bytes, bytes]] | None:
    """A string column as per-row zstd frames and the field metadata holding the dictionary; None when too few
    rows or no dictionary could be trained."""
    import zstandard

    if len(col) - col.null_count < ZSTD_MIN_ROWS:
        return None
    values = [v.encode("utf-8") if v is not None else None for v in col.to_pylist()]
    present = [v for v in values if v]
    sample = present[:: max(1, len(present) // ZSTD_SAMPLE)]
    try:
        d = zstandard.train_dictionary(ZSTD_DICT_BYTES, sample, level=3)
    except zstandard.ZstdError:
        return None
    c = zstandard.ZstdCompressor(dict_data=d, level=3, write_checksum=False, write_dict_id=False)
    # the frames made on every core, by zstd itself (the same bytes as c.compress of each: ~2x faster at 100k)
    made = c.multi_compress_to_buffer([v for v in values if v is not None], threads=-1)
    frames = (made[i].tobytes() for i in range(len(made)))
    data = pa.array([None if v is None else next(frames) for v in values], pa.binary())
    raw = d.as_bytes()
    return data, {_ZSTD_DICT: raw, _ZSTD_ID: hashlib.sha256(raw).hexdigest()[:16].encode()}


def compact(table: pa.Table) -> pa.Table:
    """`table` (of its declared schema) in its storage types: repeated values dictionary-encoded, int64 as int32
    where they fit, ZSTD_COLUMNS compressed row by row; `decode` casts rows read back."""
    fields, arrays = [], []
    for f, col in zip(table.schema, table.columns):
        arr = col.combine_chunks()
        z = _zstd(arr) if f.name in ZSTD_COLUMNS and pa.types.is_string(f.type) else None
        if z is not None:
            arrays.append(z[0])
            fields.append(pa.field(f.name, pa.binary(), f.nullable, metadata=z[1]))
        else:
            arrays.append(_compact(arr))
            fields.append(pa.field(f.name, arrays[-1].type, f.nullable))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _unzstd(col: pa.ChunkedArray, meta: dict[bytes, bytes]) -> pa.Array:
    """The strings of a ZSTD_COLUMNS column's rows: its frames handed to zstd in one call, zero-copy from the Arrow
    buffers, and the result built from buffers (pa.array would import pandas)."""
    import zstandard

    cache = _DECOMPRESSORS.__dict__.setdefault("by_id", {})  # per thread: a ZstdDecompressor is not thread-safe
    d = cache.get(meta[_ZSTD_ID])
    if d is None:
        d = cache[meta[_ZSTD_ID]] = zstandard.ZstdDecompressor(
            dict_data=zstandard.ZstdCompressionDict(meta[_ZSTD_DICT])
        )
    arr = col.combine_chunks()
    n = len(arr)
    offsets = np.zeros(n + 1, np.int32)
    if n:
        bounds = np.frombuffer(arr.buffers()[1], np.int32, n + 1, arr.offset * 4)
        rows = np.flatnonzero(np.diff(bounds) > 0)  # null rows have no frame (an empty string has one)
        if len(rows):
            segments = np.empty((len(rows), 2), np.uint64)
            segments[:, 0] = bounds[rows] - bounds[0]
            segments[:, 1] = bounds[rows + 1] - bounds[rows]
            frames = zstandard.BufferWithSegments(
                memoryview(arr.buffers()[2])[bounds[0] : bounds[-1]], segments.tobytes()
            )
            texts = [seg.tobytes() for seg in d.multi_decompress_to_buffer(frames)]
            sizes = np.zeros(n, np.int64)
            sizes[rows] = [len(t) for t in texts]
            np.cumsum(sizes, out=offsets[1:])
            data = b"".join(texts)
        else:
            data = b""
    else:
        data = b""
    valid = arr.buffers()[0] if arr.null_count else None
    if valid is not None and arr.offset:
        valid = pa.py_buffer(np.packbits(arr.is_valid().to_numpy(zero_copy_only=False), bitorder="little"))
    return pa.Array.from_buffers(
        pa.string(), n, [valid, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=arr.null_count
    )


def decode(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows read from a compact file, in their declared types (the fields of `schema` named by `table`)."""
    zipped = {f.name: f.metadata for f in table.schema if f.metadata and _ZSTD_ID in f.metadata}
    if not zipped:
        return table.cast(pa.schema([schema.field(c) for c in table.column_names]))
    rest = table.drop_columns(list(zipped))
    rest = rest.cast(pa.schema([schema.field(c) for c in rest.column_names]))  # one cast for the other columns
    cols = [_unzstd(table.column(c), zipped[c]) if c in zipped else rest.column(c) for c in table.column_names]
    return pa.Table.from_arrays(cols, schema=pa.schema([schema.field(c) for c in table.column_names]))


# The fixed-width node fields a query reads for each candidate, stored row by row (`node_rec.npy`, a numpy record
# array): a candidate's fields on one page, not on a page per column. A cold query at 1M messages read ~230 pages
# of each of a dozen columns, and of their validity bits, for its ~230 candidates: ~2,700 of the 3,700 pages it
# read of nodes.arrow (bench/README.md). A field goes there when its compact storage is fixed-width (an integer, a
# time, a float, a dictionary's index; the dictionaries are one-row list columns of `node_dicts.arrow`); a field
# stored otherwise (a small delta's distinct titles) stays in nodes.arrow. Bit i of `_null` is field i's null.
RECORD_COLS = ("slot", *(c for c in NODE_ROW_COLS if c not in ("text", "raw_refs", "aliases")))
_NULLS = "_null"


def node_records(table: pa.Table) -> tuple[pa.Table, np.ndarray, pa.Table]:
    """compact(table) split in three: its Arrow columns but the RECORD_COLS stored fixed-width, those as one
    record a row, and their dictionaries (a one-row table, a list column a dictionary)."""
    c = compact(table)
    fields: list[tuple[str, np.ndarray, np.ndarray | None]] = []
    dicts: dict[str, pa.Array] = {}
    for name in RECORD_COLS:
        if name not in c.column_names:
            continue
        col = c.column(name).combine_chunks()
        values = col.indices if pa.types.is_dictionary(col.type) else col
        t = pa.int64() if pa.types.is_timestamp(values.type) else values.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            continue
        dtype = np.dtype(t.to_pandas_dtype())
        data = np.frombuffer(values.buffers()[1], dtype, count=len(values) + values.offset)[values.offset :]
        nulls = values.is_null().to_numpy(zero_copy_only=False) if values.null_count else None
        fields.append((name, data, nulls))
        if pa.types.is_dictionary(col.type):
            dicts[name] = col.dictionary
    rec = np.zeros(c.num_rows, np.dtype([*((n, d.dtype) for n, d, _ in fields), (_NULLS, np.uint16)]))
    for bit, (name, data, nulls) in enumerate(fields):
        rec[name] = data
        if nulls is not None:
            rec[_NULLS] |= nulls.astype(np.uint16) << bit
    lists = {n: pa.ListArray.from_arrays(pa.array([0, len(d)], pa.int32()), d) for n, d in dicts.items()}
    return c.drop_columns([n for n, _, _ in fields]), rec, pa.table(lists)


class NodeRecords:
    """A segment's node records (node_records), opened: fields gathered by row in their compact Arrow types."""

    def __init__(self, records: np.ndarray, dicts: pa.Table) -> None:
        self.records = records
        self.bit = {n: i for i, n in enumerate(records.dtype.names or ()) if n != _NULLS}
        self.dicts = {n: dicts.column(n).chunk(0).values for n in dicts.column_names if n in self.bit}

    def columns(self, rows: np.ndarray, names: Sequence[str]) -> dict[str, pa.Array]:
        """{name: the field's values at `rows`} (Arrow, compact: decode casts them), one page read per row."""
        read_rows_ahead(self.records, rows)
        got = self.records[rows]
        out = {}
        for name in names:
            data = np.ascontiguousarray(got[name])
            null = ((got[_NULLS] >> self.bit[name]) & 1).astype(bool)
            n_null = int(null.sum())
            valid = pa.py_buffer(np.packbits(~null, bitorder="little")) if n_null else None
            arr = pa.Array.from_buffers(
                pa.from_numpy_dtype(data.dtype), len(data), [valid, pa.py_buffer(data)], null_count=n_null
            )
            out[name] = pa.DictionaryArray.from_arrays(arr, self.dicts[name]) if name in self.dicts else arr
        return out

    def int64(self, name: str, rows: np.ndarray, null: int) -> np.ndarray:
        """Field `name` at `rows` as int64 (a time's µs), `null` where it has none."""
        read_rows_ahead(self.records, rows)
        got = self.records[rows]
        return np.where((got[_NULLS] >> self.bit[name]) & 1, null, got[name].astype(np.int64))


def read_arrow(path: Path, random: bool = True) -> pa.Table:
    """The table of an Arrow IPC file, zero-copy over a memory map (sorted_keys.map_file; the table's buffers
    keep it alive)."""
    return pa.ipc.open_file(pa.py_buffer(map_file(path, random))).read_all()


def add_fences(*folders: Path) -> int:
    """The fences (sorted_keys.save_sorted) of the sorted arrays of segments written before segments kept them, each
    written atomically beside its array: a reader sees a whole fence or none, and finds the same rows either way.
    Returns how many were written."""
    written = 0
    paths = [p for folder in folders for p in (*sorted(folder.glob("*.keys.npy")), folder / "adj_slot.npy")]
    for path in paths:
        if path.exists() and not fence_path(path).exists():
            arr = mapped(path, random=False)
            buf = io.BytesIO()
            np.save(buf, fence_of(arr))
            write_atomic(fence_path(path), buf.getvalue())
            written += 1
    return written


def write_segment(
    folder: Path,
    *,
    kind: str,
    nodes: pa.Table,
    node_postings: PostingsArrays,
    names: pa.Table,
    adjacency: AdjacencyArrays,
    chunks: pa.Table,
    raw_doc_chunk: np.ndarray,
    raw_postings: PostingsArrays,
    messages: pa.Table,
    msg_keys: pa.Array,
    msg_ptr: np.ndarray,
    msg_hash: np.ndarray,
    removed_slots: np.ndarray,
    removed_chunks: list[str],
    removed_msgs: list[str],
    meta: dict,
) -> None:
    """Write one segment's files into `folder` (created; fsynced, the caller renames it into place)."""
    folder.mkdir(parents=True)
    keys = SortedKeys.write(folder / "nodes.keys.npy", nodes.column("id"))
    ids = nodes.column("id")
    if (
        len(nodes)
        and pc.max(pc.binary_length(ids)).as_py() <= keys.dtype.itemsize
        and not pc.any(pc.match_substring(ids, "\x00")).as_py()
    ):
        nodes = nodes.drop_columns(["id"])  # the prefixes are the ids, whole
    rest, records, dicts = node_records(nodes)
    write_arrow(folder / "nodes.arrow", rest)
    np.save(folder / "node_rec.npy", records)
    write_arrow(folder / "node_dicts.arrow", dicts)
    write_postings(folder, "node", node_postings)
    write_arrow(folder / "names.arrow", names)
    SortedKeys.write(folder / "names.keys.npy", names.column("name"))
    write_adjacency(folder, adjacency)
    write_arrow(folder / "chunks.arrow", compact(chunks))
    SortedKeys.write(folder / "chunks.keys.npy", chunks.column("id"))
    np.save(folder / "raw_doc_chunk.npy", raw_doc_chunk.astype(np.int32))
    write_postings(folder, "raw", raw_postings)
    write_arrow(folder / "messages.arrow", compact(messages))
    write_arrow(folder / "msg_keys.arrow", pa.table({"key": msg_keys}))
    SortedKeys.write(folder / "msg_keys.keys.npy", msg_keys)
    np.save(folder / "msg_ptr.npy", msg_ptr.astype(np.int64))
    np.save(folder / "msg_hash.npy", msg_hash.astype(np.uint64))
    np.save(folder / "removed_slots.npy", removed_slots.astype(np.int32))
    write_arrow(folder / "removed_chunks.arrow", pa.table({"key": pa.array(sorted(removed_chunks), pa.string())}))
    write_arrow(folder / "removed_msgs.arrow", pa.table({"key": pa.array(sorted(removed_msgs), pa.string())}))
    # the documents' summed lengths: BM25's average length without reading every length (recall.postings.live_stats)
    sums = {
        "doc_len_sum": {
            k: int(np.sum(p.doc_len, dtype=np.int64)) for k, p in (("node", node_postings), ("raw", raw_postings))
        }
    }
    meta = {"kind": kind, **meta, **sums}
    (folder / "meta.json").write_text(json.dumps(meta, sort_keys=True, ensure_ascii=False), "utf-8")
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
    """One segment, opened: every file mapped at once (a reader that holds it keeps it after a swap). `random`:
    the maps are advised for random reads, as a query makes them (sorted_keys.map_file); False for a reader that
    scans whole columns."""

    def __init__(self, folder: Path, random: bool = True) -> None:
        self.folder = folder
        self.name = folder.name
        self.meta = json.loads((folder / "meta.json").read_text("utf-8"))
        self.random = random
        self.nodes = self._arrow("nodes.arrow")
        self._node_id_col = self.nodes.column("id") if "id" in self.nodes.column_names else None
        self.node_keys = SortedKeys.open(folder / "nodes.keys.npy", self._node_id_col, random)
        self.records = NodeRecords(mapped(folder / "node_rec.npy", random), self._arrow("node_dicts.arrow"))
        self.node_slot = self.records.records["slot"]  # (slot and first_seen are always fixed-width: records)
        sums = self.meta.get("doc_len_sum", {})  # (a segment written before the sums were kept: summed when asked)
        self.node_postings = Postings(folder, "node", random, sums.get("node"))
        self.names = self._arrow("names.arrow")
        self.name_keys = SortedKeys.open(folder / "names.keys.npy", self.names.column("name"), random)
        try:  # a damaged graph drops stage C only (seed 004 §18): the error is raised when the graph is asked for
            self.adjacency: Adjacency | None = Adjacency(folder, random)
            self.adjacency_error: Exception | None = None
        except Exception as e:  # noqa: BLE001
            if isinstance(e, FileNotFoundError) and not (folder / "meta.json").exists():
                raise  # not damage: a writer removed this segment while it opened (open_version opens CURRENT again)
            self.adjacency, self.adjacency_error = None, e
        self.chunks = self._arrow("chunks.arrow")
        self.chunk_keys = SortedKeys.open(folder / "chunks.keys.npy", self.chunks.column("id"), random)
        self.raw_doc_chunk = mapped(folder / "raw_doc_chunk.npy", random)
        self.raw_postings = Postings(folder, "raw", random, sums.get("raw"))
        self.messages = self._arrow("messages.arrow")
        keys = self._arrow("msg_keys.arrow").column("key")
        self.msg_keys = SortedKeys.open(folder / "msg_keys.keys.npy", keys, random)
        self.msg_key_strings = keys
        self.msg_ptr = mapped(folder / "msg_ptr.npy", random)
        self.msg_hash = mapped(folder / "msg_hash.npy", random)
        self.removed_slots = mapped(folder / "removed_slots.npy", random)
        self.removed_chunks = frozenset(self._arrow("removed_chunks.arrow").column("key").to_pylist())
        self.removed_msgs = frozenset(self._arrow("removed_msgs.arrow").column("key").to_pylist())

    def first_seen_at(self, rows: np.ndarray) -> np.ndarray:
        """int64 µs of node rows `rows` (the graph's as_of), NO_TIME when unknown."""
        return self.records.int64("first_seen", np.asarray(rows, np.int64), int(NO_TIME))

    def require_adjacency(self) -> Adjacency:
        """The graph's adjacency lists; the error that kept them from loading is raised when they are asked for."""
        if self.adjacency is None:
            assert self.adjacency_error is not None
            raise self.adjacency_error
        return self.adjacency

    def _arrow(self, name: str) -> pa.Table:
        return read_arrow(self.folder / name, self.random)

    def node_ids(self, rows: np.ndarray) -> list[str]:
        """The ids of node rows `rows`."""
        return self.node_id_array(rows).to_pylist()

    def node_id_array(self, rows: np.ndarray) -> pa.Array:
        """The ids of node rows `rows`, as Arrow strings."""
        if self._node_id_col is not None:
            return self._node_id_col.take(arrow_indices(rows)).combine_chunks()
        read_rows_ahead(self.node_keys.prefixes, rows)
        return prefix_strings(self.node_keys.prefixes[np.asarray(rows, np.int64)])

    def node_rows(self, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
        """Node rows `rows` (`columns` of SEG_NODES, "id" included), in the declared types."""
        rows = np.asarray(rows, np.int64)
        stored = [c for c in columns if c not in self.records.bit and (c != "id" or self._node_id_col is not None)]
        for name in stored:
            read_arrow_rows_ahead(self.nodes.column(name), rows)
        recorded = self.records.columns(rows, [c for c in columns if c in self.records.bit])
        if stored:  # taken as a table: a zstd field keeps the dictionary in its metadata
            part = self.nodes.select(stored).take(arrow_indices(rows))
            for name, arr in recorded.items():
                part = part.append_column(name, arr)
        else:  # (a table of no columns has no rows: then only the ids)
            part = pa.table(recorded) if recorded else pa.table({"id": self.node_id_array(rows)})
        part = decode(part, SEG_NODES)
        if "id" in columns and "id" not in part.column_names:
            part = part.append_column("id", self.node_id_array(rows))
        return part.select(list(columns))

    def rows(self, table: pa.Table, schema: pa.Schema, rows: np.ndarray, columns: Sequence[str]) -> pa.Table:
        """Rows of one of this segment's chunk or message tables, in the declared types."""
        return decode(table.select(list(columns)).take(arrow_indices(rows)), schema)

    def holds_chunk(self, key: str) -> bool:
        return self.chunk_keys.find([key])[0] >= 0

    def message_rows(self, key: str) -> tuple[int, int] | None:
        """[lo, hi) of the messages with a piece in chunk `key`, None when this segment has no group for it."""
        j = int(self.msg_keys.find([key])[0])
        if j < 0:
            return None
        return int(self.msg_ptr[j]), int(self.msg_ptr[j + 1])
