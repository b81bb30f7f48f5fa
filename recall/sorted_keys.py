"""Sorted string keys looked up by binary search over a memory-mapped array: the recall index's only "hash table".

A column of keys (node ids, raw ids, index terms, entity names) is stored sorted in byte order, as
a fixed-width numpy `S` array of each key's first `width` UTF-8 bytes (`<name>.keys.npy`, opened
memory-mapped). `np.searchsorted` finds hundreds of keys in microseconds without loading the column;
when some key is longer than `width` (rare: the width is the longest key's, capped at MAX_WIDTH), the
candidates sharing a prefix are checked against the full strings, which the caller passes in (an Arrow
column of the same rows).

Beside a sorted array on disk lies its *fence* (`<name>.fence.npy`): the first value of every 4 KB of it.
A lookup searches the fence (read whole, ~1/150 of a key column) and then one block of the mapped array,
so on a disk with nothing cached it reads one or two pages of the array, not the ~15 of a binary search
over all of it (a cold recall at 1M messages looked up 353 node ids: 5,163 pages of nodes.keys.npy).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_WIDTH = 64  # bytes of a key kept in the prefix array; longer keys are told apart by their full string


_NUMPY = {
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint64(): np.uint64,
    pa.float64(): np.float64,
    pa.uint16(): np.uint16,
}


def _dtype(t: pa.DataType) -> np.dtype:
    return np.dtype(np.int64) if pa.types.is_timestamp(t) else np.dtype(_NUMPY[t])


def arrow_numpy(col: pa.Array | pa.ChunkedArray, null: float | None = None) -> np.ndarray:
    """A primitive Arrow column as numpy (zero-copy for one chunk without nulls; timestamps as int64), its nulls
    set to `null` (a column with nulls needs one). pyarrow's own to_numpy, fill_null and pa.array import pandas
    when it is installed: 0.5 s of a cold recall process."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks != 1:
            return (
                np.concatenate([arrow_numpy(c, null) for c in col.chunks])
                if col.num_chunks
                else np.zeros(0, _dtype(col.type))
            )
        col = col.chunk(0)
    dt = _dtype(col.type)
    if len(col) == 0:
        return np.zeros(0, dt)
    values = np.frombuffer(col.buffers()[1], dtype=dt, count=len(col), offset=col.offset * dt.itemsize)
    if col.null_count:
        if null is None:
            raise ValueError("arrow_numpy: the column has nulls and no value for them")
        bits = np.unpackbits(np.frombuffer(col.buffers()[0], np.uint8), bitorder="little")
        values = values.copy()
        values[bits[col.offset : col.offset + len(col)] == 0] = null
    return values


def arrow_indices(rows: Sequence[int] | np.ndarray) -> pa.Array:
    """Row numbers as an Arrow int64 array, for take() (built from the buffer: pa.array would import pandas)."""
    a = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(a), [None, pa.py_buffer(a)])


def prefix_strings(prefixes: np.ndarray) -> pa.Array:
    """The keys of a prefix array as an Arrow string array, for keys held whole (no key longer than the width and
    none holding NUL: numpy pads with NULs). Built from buffers, without pa.array (see arrow_indices)."""
    n, width = len(prefixes), prefixes.dtype.itemsize
    raw = np.ascontiguousarray(prefixes).view(np.uint8).reshape(n, width)
    used = raw != 0
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(used.sum(axis=1), out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw[used].tobytes())])


def narrow(a: np.ndarray, dtypes: Sequence[type]) -> np.ndarray:
    """`a` as the first of `dtypes` that holds all its values (integers), else as it is."""
    if len(a):
        lo, hi = int(a.min()), int(a.max())
        for dt in dtypes:
            info = np.iinfo(dt)
            if info.min <= lo and hi <= info.max:
                return a.astype(dt)
    return a.astype(dtypes[0]) if not len(a) else a


def map_file(path: Path, random: bool = True) -> mmap.mmap:
    """`path` memory-mapped read-only. `random`: advised MADV_RANDOM, so a page fault reads that page and not the
    device's read-ahead window. A query reads a few hundred rows spread over whole columns; with the window (8 MB
    on the project machine) a cold query at 1M messages read ~1 GB of its 1.3 GB index to use a few MB of it.
    Readers that scan whole columns (the index writer's comparison) map with random=False."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if random and hasattr(mmap, "MADV_RANDOM"):  # not on Windows
        mm.madvise(mmap.MADV_RANDOM)
    return mm


def mapped(path: Path, random: bool = True) -> np.ndarray:
    """A .npy file memory-mapped read-only (map_file), as a plain ndarray (numpy's memmap subclass costs
    microseconds on every slice and element read; the array keeps the map alive)."""
    with open(path, "rb") as f:
        major, minor = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        offset = f.tell()
    order: Literal["C", "F"] = "F" if fortran else "C"
    if not int(np.prod(shape)):  # an empty array: nothing to map (and its file may end at the header)
        empty = np.zeros(shape, dtype, order=order)
        empty.flags.writeable = False
        return empty
    return np.ndarray(shape, dtype, buffer=map_file(path, random), offset=offset, order=order)


def sort_order(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row order that sorts `keys` by their UTF-8 bytes (stable: equal keys keep their order)."""
    return pc.array_sort_indices(keys, order="ascending", null_placement="at_end").to_numpy()


def prefix_array(keys: pa.Array | Sequence[str], width: int | None = None) -> np.ndarray:
    """The fixed-width byte prefixes of `keys` (numpy `S<width>`; width: the longest key, at most MAX_WIDTH)."""
    arr = pa.array(keys, pa.string()) if not isinstance(keys, (pa.Array, pa.ChunkedArray)) else keys
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.string()) if arr.type != pa.string() else arr
    if width is None:
        longest = pc.max(pc.binary_length(arr)).as_py() if len(arr) else 0
        width = max(1, min(MAX_WIDTH, longest or 1))
    raw = arr.cast(pa.binary())
    if len(arr) and pc.max(pc.binary_length(arr)).as_py() > width:
        raw = pc.binary_slice(raw, 0, width)
    return raw.to_numpy(zero_copy_only=False).astype(f"S{width}") if len(arr) else np.zeros(0, f"S{width}")


PAGE = 4096  # bytes of a fence block: one page of the mapped array


def fence_step(dtype: np.dtype) -> int:
    """Values of a sorted array per fence entry (per PAGE bytes)."""
    return max(1, PAGE // np.dtype(dtype).itemsize)


def fence_path(path: Path) -> Path:
    """`x.npy` → `x.fence.npy`."""
    return path.with_name(path.name.removesuffix(".npy") + ".fence.npy")


def fence_of(arr: np.ndarray) -> np.ndarray:
    """The fence of a sorted 1-d array: its first value of every PAGE bytes, in memory."""
    return np.ascontiguousarray(arr[:: fence_step(arr.dtype)])


def save_sorted(path: Path, arr: np.ndarray) -> None:
    """np.save of a sorted 1-d array, with its fence beside it (fenced_searchsorted)."""
    np.save(path, arr)
    np.save(fence_path(path), fence_of(arr))


def load_fence(path: Path) -> np.ndarray | None:
    """The fence saved beside `path` (read whole, not mapped), or None for an array written without one."""
    try:
        return np.load(fence_path(path))
    except FileNotFoundError:
        return None


def fenced_searchsorted(
    arr: np.ndarray, fence: np.ndarray | None, q: np.ndarray, side: Literal["left", "right"] = "left"
) -> np.ndarray:
    """np.searchsorted(arr, q, side), reading one block of `arr` per query where its fence (arr[::fence_step],
    load_fence) is given. With j fence values before q's position i, i lies in ((j-1)*step, j*step]: only that
    block is compared. Many queries (a block each would add up to more than the array) search the array whole."""
    q = np.asarray(q, dtype=arr.dtype)
    step = fence_step(arr.dtype)
    if fence is None or not len(q) or len(q) * step > min(len(arr), 1 << 20):
        return np.searchsorted(arr, q, side=side)
    j = np.searchsorted(fence, q, side=side).astype(np.int64)
    lo = np.maximum(j - 1, 0) * step
    hi = np.minimum(j * step, len(arr))
    read_rows_ahead(arr, np.concatenate([lo, np.maximum(hi - 1, 0)]))
    at = lo[:, None] + np.arange(step)
    inside = at < hi[:, None]
    block = arr[np.minimum(at, len(arr) - 1)]
    before = (block < q[:, None]) if side == "left" else (block <= q[:, None])
    return lo + np.count_nonzero(before & inside, axis=1)


def fenced_search_one(arr: np.ndarray, fence: np.ndarray | None, v: np.generic | int) -> int:
    """fenced_searchsorted of one value (side "left"), without the vector round trip (a scalar lookup per call)."""
    if fence is None:
        return int(np.searchsorted(arr, v))
    step = fence_step(arr.dtype)
    lo = max(int(np.searchsorted(fence, v)) - 1, 0) * step
    return lo + int(np.searchsorted(arr[lo : lo + step], v))


_MADV_WILLNEED = 3  # Linux's value
_libc: ctypes.CDLL | None = None


def _linux_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def read_ahead(address: int, size: int, offsets: np.ndarray) -> None:
    """Start reading, all at once, the pages of the mapped bytes [address, address + size) that hold `offsets`
    (from `address`) and are not in memory (mincore): a gather over rows spread across a column then waits on
    reads the disk serves side by side, not on one page fault after another (~0.1 ms each on the project
    machine's disk, thousands in a cold query at 1M messages). Pages in memory cost one mincore call for the
    span, no read. Linux only; elsewhere a no-op."""
    libc = _linux_libc()
    if libc is None or not len(offsets) or size <= 0:
        return
    first, last = address // PAGE, (address + size - 1) // PAGE
    vec = np.empty(last - first + 1, np.uint8)  # not a ctypes array: its new type per length would make cycles
    span = ctypes.c_size_t(len(vec) * PAGE)
    if libc.mincore(ctypes.c_void_p(first * PAGE), span, ctypes.c_void_p(vec.ctypes.data)):
        return  # not a mapping mincore knows: leave it to the page faults
    pages = np.unique((address + np.clip(np.asarray(offsets, np.int64), 0, size - 1)) // PAGE) - first
    for page in pages[(vec[pages] & 1) == 0].tolist():
        libc.madvise(ctypes.c_void_p((first + page) * PAGE), ctypes.c_size_t(PAGE), _MADV_WILLNEED)


def read_rows_ahead(arr: np.ndarray, rows: np.ndarray) -> None:
    """read_ahead of the rows `rows` of a mapped 1-d array (`mapped`)."""
    base: object = arr.base
    if isinstance(base, mmap.mmap):
        read_ahead(arr.ctypes.data, arr.nbytes, np.asarray(rows, np.int64) * arr.itemsize)


def read_arrow_rows_ahead(column: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> None:
    """read_ahead of what a take of `rows` reads first in a mapped Arrow column of one chunk: a fixed-width value,
    a dictionary index, a string's or list's offsets (the bytes those point at are read when taken)."""
    arr = column.chunk(0) if isinstance(column, pa.ChunkedArray) and column.num_chunks == 1 else column
    if isinstance(arr, pa.ChunkedArray):
        return
    if pa.types.is_dictionary(arr.type):
        arr = arr.indices
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_list(t):
        width = 4
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_list(t):
        width = 8
    else:
        try:
            width = t.bit_width // 8  # 0 for booleans: a bit a row, a page holds 32k of them
        except ValueError:  # a struct, a map, a union: not a column recall's node rows have
            return
    buf = arr.buffers()[1]
    if buf is not None and width:
        read_ahead(buf.address, buf.size, (np.asarray(rows, np.int64) + arr.offset) * width)


class SortedKeys:
    """Lookups in a sorted key column: positions of keys (unique columns) or row ranges (repeated keys)."""

    def __init__(
        self, prefixes: np.ndarray, full: pa.Array | pa.ChunkedArray | None = None, fence: np.ndarray | None = None
    ) -> None:
        self.prefixes = prefixes
        self.fence = fence
        self.width = prefixes.dtype.itemsize
        self.full = full  # the full strings, needed only when some key is longer than width
        self._truncated: bool | None = None

    @classmethod
    def write(cls, path: Path, keys: pa.Array) -> np.ndarray:
        """Write the prefix array of `keys` (already sorted) to `path` (.npy), and its fence; returns it."""
        arr = prefix_array(keys)
        save_sorted(path, arr)
        return arr

    @classmethod
    def open(cls, path: Path, full: pa.Array | pa.ChunkedArray | None, random: bool = True) -> SortedKeys:
        return cls(mapped(path, random), full, load_fence(path))

    def __len__(self) -> int:
        return len(self.prefixes)

    @property
    def truncated(self) -> bool:
        """True when some key is longer than the prefix width (then full strings settle ties)."""
        if self._truncated is None:
            self._truncated = bool(
                self.full is not None and len(self.full) and pc.max(pc.binary_length(self.full)).as_py() > self.width
            )
        return self._truncated

    def _encode(self, keys: Sequence[str]) -> tuple[np.ndarray, list[bytes]]:
        raw = [k.encode("utf-8") for k in keys]
        return np.array([b[: self.width] for b in raw], dtype=f"S{self.width}"), raw

    def ranges(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) arrays: rows [lo, hi) hold each key (an empty range when absent)."""
        n = len(keys)
        if not n or not len(self.prefixes):
            z = np.zeros(n, dtype=np.int64)
            return z, z.copy()
        q, raw = self._encode(keys)
        lo = fenced_searchsorted(self.prefixes, self.fence, q, "left")
        hi = fenced_searchsorted(self.prefixes, self.fence, q, "right")
        if not self.truncated:
            longer = np.fromiter((len(b) > self.width for b in raw), bool, n)
            hi[longer] = lo[longer]  # no stored key is that long
        else:
            # a prefix of `width` bytes may be shared by several keys: the full strings decide
            assert self.full is not None  # truncated only when the full strings are there
            for i in np.nonzero((hi > lo) & (np.fromiter((len(b) >= self.width for b in raw), bool, n)))[0].tolist():
                hits = [j for j in range(int(lo[i]), int(hi[i])) if self.full[j].as_py() == keys[i]]
                lo[i], hi[i] = (hits[0], hits[-1] + 1) if hits else (lo[i], lo[i])
        return lo, hi

    def find(self, keys: Sequence[str]) -> np.ndarray:
        """Row of each key in a column of distinct keys, -1 when absent (int64 array)."""
        lo, hi = self.ranges(keys)
        return np.where(hi > lo, lo, -1)
