"""The recall index's storage (FORMAT 5): compact Arrow rows, node records, text compressed row by row, narrow arrays —
same answers."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recall import segment
from recall.graph_csr import Adjacency, AdjacencyArrays, write_adjacency
from recall.segment import SEG_MESSAGES, SEG_NODES, compact, decode
from recall.sorted_keys import mapped


def _nodes(n: int) -> pa.Table:
    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "咖啡", "delta", "Zoë", ""]
    rows = []
    for i in range(n):
        text = None if i % 11 == 0 else " ".join(rng.choice(words, 6).tolist())
        refs = (
            None
            if i % 5 == 0
            else [
                {"raw_id": f"raw_{i % 7}", "offset": i, "length": 3},
                {"raw_id": None, "offset": None, "length": None},
            ][: 1 + i % 2]
        )
        rows.append(
            {
                "id": f"n_{i:05d}",
                "slot": i,
                "hash": (i * 2654435761) % 2**64,
                "type": ["Fact", "Episode"][i % 2],
                "subtype": None,
                "title": f"t{i % 40}",
                "text": text,
                "time_start": None,
                "time_end": datetime(2024, 1, 1 + i % 28),
                "first_seen": datetime(2024, 2, 1),
                "last_seen": None,
                "raw_refs": refs,
                "conv_id": f"c{i % 9}",
                "msg_id": str(i),
                "speaker": ["Ann", None][i % 2],
                "status": "active",
                "importance": [0.5, 0.25, None][i % 3],
                "frequency": i % 4,
                "sentiment": None,
                "aliases": ["x", "y"] if i % 3 else [],
                "mmr": None if i % 4 else ["咖啡", "馆"],
            }
        )
    return pa.Table.from_pylist(rows, schema=SEG_NODES)


@pytest.mark.parametrize("n", [40, 3000])
def test_compact_rows_read_back_equal_in_their_declared_types(n: int) -> None:
    t = _nodes(n)
    c = compact(t)
    assert pa.types.is_dictionary(c.schema.field("type").type)  # repeated strings
    assert pa.types.is_dictionary(c.schema.field("raw_refs").type.value_type.field("raw_id").type)
    assert c.schema.field("frequency").type == pa.int32()
    assert c.schema.field("hash").type == pa.uint64()  # distinct: as it is
    zipped = c.schema.field("text").type == pa.binary()
    assert zipped == (n >= segment.ZSTD_MIN_ROWS)
    if zipped:  # each row its own frame over the field's dictionary: what one compress() of the row makes
        import zstandard

        meta = c.schema.field("text").metadata
        one = zstandard.ZstdCompressor(
            dict_data=zstandard.ZstdCompressionDict(meta[segment._ZSTD_DICT]),
            level=3,
            write_checksum=False,
            write_dict_id=False,
        )
        texts = t.column("text").to_pylist()
        assert c.column("text").to_pylist() == [None if v is None else one.compress(v.encode()) for v in texts]
    assert decode(c, SEG_NODES).equals(t)
    rows = pa.array([n - 1, 0, 7, 11, 7], pa.int64())
    assert decode(c.take(rows), SEG_NODES).equals(t.take(rows))
    assert decode(c.select(["text", "id"]).slice(0, 0), SEG_NODES).num_rows == 0
    assert c.nbytes < t.nbytes


@pytest.mark.parametrize("n", [40, 3000])
def test_node_records_hold_the_fixed_width_fields_a_row_each_and_read_back_equal(tmp_path: Path, n: int) -> None:
    """A node's fixed-width fields (integers, times, dictionary indices; nulls as bits) in one record, the rest in
    Arrow: rows gathered from the mapped files equal the table's, in its declared types."""
    t = _nodes(n).append_column("sentiment_", pa.nulls(n, pa.float64())).drop_columns(["sentiment"])
    t = t.rename_columns([c.rstrip("_") for c in t.column_names]).select(SEG_NODES.names)
    rest, records, dicts = segment.node_records(t)
    fields = set(records.dtype.names or ())
    assert {"slot", "time_start", "time_end", "first_seen", "frequency", "sentiment"} <= fields
    assert {"type", "conv_id"} <= fields  # dictionary indices (their dictionaries in `dicts`)
    assert "title" not in fields if n == 40 else "title" in fields  # 40 distinct titles in 40 rows: strings
    assert not fields & set(rest.column_names) and {"text", "raw_refs", "hash", "mmr"} <= set(rest.column_names)
    assert records.dtype.itemsize <= 64  # a row's fields on one page, with room to spare
    segment.write_arrow(tmp_path / "nodes.arrow", rest)
    np.save(tmp_path / "node_rec.npy", records)
    segment.write_arrow(tmp_path / "node_dicts.arrow", dicts)
    opened = segment.NodeRecords(mapped(tmp_path / "node_rec.npy"), segment.read_arrow(tmp_path / "node_dicts.arrow"))
    stored = segment.read_arrow(tmp_path / "nodes.arrow")
    for rows in (np.array([n - 1, 0, 7, 11, 7]), np.arange(n), np.arange(0)):
        part = stored.take(pa.array(rows, pa.int64()))
        for name, arr in opened.columns(rows, sorted(opened.bit)).items():
            part = part.append_column(name, arr)
        got = decode(part, SEG_NODES).select(t.column_names)
        assert got.equals(t.take(pa.array(rows, pa.int64()))), rows
    times = opened.int64("time_start", np.arange(n), -1)  # all null in _nodes
    assert (times == -1).all() and (opened.int64("first_seen", np.arange(3), -1) > 0).all()


def test_message_rows_compact_and_back() -> None:
    n = 2000
    t = pa.Table.from_pylist(
        [
            {
                "piece": f"raw_{i // 50}",
                "piece_offset": i,
                "piece_length": 5,
                "conv_id": "c",
                "msg_id": str(i),
                "seq": i,
                "speaker": "Bo",
                "ts": None,
                "text": f"line {i} 喝茶",
                "raw_id": f"raw_{i // 50}",
                "offset": i,
                "length": 5,
                "raw_refs": [{"raw_id": f"raw_{i // 50}", "offset": i, "length": 5}],
            }
            for i in range(n)
        ],
        schema=SEG_MESSAGES,
    )
    c = compact(t)
    assert c.schema.field("text").type == pa.binary() and pa.types.is_dictionary(c.schema.field("piece").type)
    assert decode(c, SEG_MESSAGES).equals(t)


def test_adjacency_weights_are_exact_through_the_table_and_past_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    for name, w in (("few", rng.choice([0.1, 1 / 3, 0.7, 1.0], 5000)), ("many", rng.random(70_000))):
        n = len(w)
        a = AdjacencyArrays(
            slot=np.arange(n, dtype=np.int32),
            ptr=np.arange(n + 1, dtype=np.int64),
            nbr=rng.integers(0, n, n).astype(np.int32),
            code=rng.integers(0, 40, n).astype(np.uint16),
            w=w.astype(np.float64),
            hash=np.zeros(n, np.uint64),
        )
        (tmp_path / name).mkdir()
        write_adjacency(tmp_path / name, a)
        got = Adjacency(tmp_path / name)
        assert got.ptr.dtype == np.int32 and got.code.dtype == np.uint8
        assert (tmp_path / name / "adj_wtab.npy").exists() == (name == "few")
        assert np.array_equal(got.weights(0, n), w) and np.array_equal(got.code, a.code)
        assert np.array_equal(got.weights(10, 20), w[10:20])


@pytest.mark.parametrize("kind", ["every slot (a base)", "some slots (a delta)", "every slot but the last", "none"])
def test_adjacency_finds_each_slots_list_row_whether_it_lists_every_slot_or_some(tmp_path: Path, kind: str) -> None:
    """A base lists slots 0..n-1 and finds a slot's row without a search; a delta searches its sorted slots: both
    give each slot's row, -1 for a slot it holds no list of (negative, past the end, missing)."""
    rng = np.random.default_rng(9)
    n = 3000
    slots = {
        "every slot (a base)": np.arange(n),
        "some slots (a delta)": np.sort(rng.choice(10 * n, n, replace=False)),
        "every slot but the last": np.arange(n - 1),
        "none": np.zeros(0, np.int64),
    }[kind].astype(np.int32)
    m = len(slots)
    write_adjacency(
        tmp_path,
        AdjacencyArrays(
            slot=slots,
            ptr=np.arange(m + 1, dtype=np.int64),
            nbr=np.zeros(m, np.int32),
            code=np.zeros(m, np.uint16),
            w=np.ones(m),
            hash=np.zeros(m, np.uint64),
        ),
    )
    got = Adjacency(tmp_path)
    asked = np.r_[-1, slots, rng.integers(0, 11 * n, 500), 10**7].astype(np.int64)
    where = {int(s): i for i, s in enumerate(slots)}
    want = [where.get(int(v), -1) for v in asked]
    assert got.rows(asked).tolist() == want
    assert [got.row(int(v)) for v in asked[::7]] == want[::7]


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(1000, dtype=np.int64),
        np.array([3, 1, 65535], dtype=np.uint16),
        np.array([b"n_a", b"n_bc", b""], dtype="S4"),
        np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        np.zeros(0, dtype=np.int32),
        np.zeros((0, 3), dtype=np.uint64),
    ],
    ids=["int64", "uint16", "bytes", "fortran-2d", "empty", "empty-2d"],
)
@pytest.mark.parametrize("random", [True, False])
def test_mapped_reads_a_npy_file_as_numpy_does_and_read_only(tmp_path: Path, arr: np.ndarray, random: bool) -> None:
    from recall.sorted_keys import mapped

    np.save(tmp_path / "a.npy", arr)
    got = mapped(tmp_path / "a.npy", random)
    assert type(got) is np.ndarray and got.dtype == arr.dtype and got.shape == arr.shape
    assert np.array_equal(got, np.load(tmp_path / "a.npy"))
    assert got.flags.f_contiguous == arr.flags.f_contiguous and not got.flags.writeable


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 120_000),
    spread=st.sampled_from([3, 1_000, 2**30]),
    queries=st.integers(1, 60),
    side=st.sampled_from(["left", "right"]),
)
def test_fenced_searchsorted_finds_what_a_binary_search_over_the_whole_array_finds(
    tmp_path_factory, seed: int, n: int, spread: int, queries: int, side: Literal["left", "right"]
) -> None:
    """A fence (the first value of every 4 KB) and one block of the array give np.searchsorted's positions, for
    repeated values (spread 3), values past both ends, and the fence's own values; saved and loaded beside the array."""
    from recall.sorted_keys import fence_step, fenced_search_one, fenced_searchsorted, load_fence, mapped, save_sorted

    rng = np.random.default_rng(seed)
    arr = np.sort(rng.integers(0, spread, n)).astype(np.int32)
    folder = tmp_path_factory.mktemp("fence")
    save_sorted(folder / "a.npy", arr)
    on_disk, fence = mapped(folder / "a.npy"), load_fence(folder / "a.npy")
    assert fence is not None and np.array_equal(fence, arr[:: fence_step(arr.dtype)])
    q = np.concatenate([rng.integers(-2, spread + 2, queries), fence[:3], arr[-1:] if n else []]).astype(np.int32)
    want = np.searchsorted(arr, q, side=side)
    assert fenced_searchsorted(on_disk, fence, q, side).tolist() == want.tolist()
    if side == "left":
        assert [fenced_search_one(on_disk, fence, v) for v in q.tolist()] == want.tolist()
    if len(q) * fence_step(arr.dtype) <= n and ((want > 0) & (want < n)).any():
        # the fence is what is searched: a fence of the last value alone sends those queries to the first block
        assert fenced_searchsorted(on_disk, np.full_like(fence, arr[-1]), q, side).tolist() != want.tolist()


def test_sorted_keys_with_and_without_their_fence_find_the_same_rows(tmp_path: Path) -> None:
    """Byte keys (node ids, some longer than the prefix width, some sharing a prefix): a fenced SortedKeys finds
    what one written before fences (no fence file) finds, and add_fences writes the fence a new file would have."""
    from recall.segment import add_fences
    from recall.sorted_keys import MAX_WIDTH, SortedKeys, fence_path

    rng = np.random.default_rng(5)
    keys = sorted({f"n_{rng.integers(0, 10**9):09d}" for _ in range(30_000)} | {"x" * MAX_WIDTH + s for s in "abc"})
    full = pa.array(keys, pa.string())
    SortedKeys.write(tmp_path / "nodes.keys.npy", full)
    fenced = SortedKeys.open(tmp_path / "nodes.keys.npy", full)
    written = fence_path(tmp_path / "nodes.keys.npy").read_bytes()
    fence_path(tmp_path / "nodes.keys.npy").unlink()
    plain = SortedKeys.open(tmp_path / "nodes.keys.npy", full)
    assert fenced.fence is not None and plain.fence is None
    asked = [*keys[::997], "n_", "zzz", "x" * MAX_WIDTH, "x" * MAX_WIDTH + "b", "x" * MAX_WIDTH + "q", keys[-1]]
    assert fenced.find(asked).tolist() == plain.find(asked).tolist()
    assert [r.tolist() for r in fenced.ranges(asked)] == [r.tolist() for r in plain.ranges(asked)]
    assert (fenced.find(keys[::997]) == np.arange(0, len(keys), 997)).all()
    assert add_fences(tmp_path) == 1 and add_fences(tmp_path) == 0
    assert fence_path(tmp_path / "nodes.keys.npy").read_bytes() == written


def _resident(path: Path) -> np.ndarray:
    """Per page of `path`: whether it is in the page cache (mincore over a fresh map of the file)."""
    import ctypes
    import mmap

    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = np.frombuffer(mm, np.uint8)
    pages = (len(mm) + 4095) // 4096
    vec = (ctypes.c_ubyte * pages)()
    assert ctypes.CDLL(None).mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(pages * 4096), vec) == 0
    out = (np.frombuffer(memoryview(vec), np.uint8) & 1).astype(bool)
    del view
    mm.close()
    return out


def _evicted(path: Path) -> bool:
    """Drop `path`'s clean pages from the page cache (no root needed); False where the file system keeps them
    (tmpfs)."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return not _resident(path).any()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and madvise through Linux's libc")
def test_read_ahead_starts_reading_the_pages_of_the_rows_asked_and_no_others() -> None:
    """A cold query gathers a few hundred rows spread over mapped columns: read_rows_ahead (a .npy array) and
    read_arrow_rows_ahead (an Arrow IPC column) ask the kernel for exactly the pages holding those rows at once,
    so the gather that follows finds them read. The file lives on disk: tmpfs has no page cache to drop."""
    from recall.segment import read_arrow
    from recall.sorted_keys import mapped, read_arrow_rows_ahead, read_rows_ahead

    folder = Path(tempfile.mkdtemp(dir=Path(__file__).resolve().parent))
    try:
        np.save(folder / "a.npy", np.arange(2_000_000, dtype=np.int64))  # 16 MB: 3,907 pages
        with pa.ipc.new_file(folder / "t.arrow", pa.schema([("v", pa.int64())])) as w:
            w.write_table(pa.table({"v": np.arange(2_000_000, dtype=np.int64)}))
        rows = np.array([5, 700_000, 700_001, 1_999_999, 1_300_000])
        for name, read in (
            ("a.npy", lambda: read_rows_ahead(mapped(folder / "a.npy"), rows)),
            ("t.arrow", lambda: read_arrow_rows_ahead(read_arrow(folder / "t.arrow").column("v"), rows)),
        ):
            if not _evicted(folder / name):
                pytest.skip("this file system keeps the pages of a file (tmpfs)")
            read()
            for _ in range(100):  # the reads were started, not waited for
                if _resident(folder / name).sum() >= 4:
                    break
                time.sleep(0.01)
            resident = set(np.flatnonzero(_resident(folder / name)).tolist())
            # the rows' pages (two rows share one), and the few the file's header or footer was read from
            assert 4 <= len(resident) <= 8, resident
            if name == "a.npy":  # the values start after numpy's 128-byte header
                assert {(128 + r * 8) // 4096 for r in rows.tolist()} <= resident
        # columns whose rows are not at a fixed width of one buffer are left to the take
        for other in (pa.array([True, False]), pa.array([{"a": 1}, {"a": 2}]), pa.chunked_array([[1], [2]])):
            assert read_arrow_rows_ahead(other, np.array([1])) is None
    finally:
        shutil.rmtree(folder)
