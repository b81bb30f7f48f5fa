"""Content-addressed zstd blob store: `raw/{tenant}/YYYY/MM/DD/{sha[:2]}/raw_{sha}.blob.zst`.

Blobs are immutable and named by the sha256 of their uncompressed bytes, so the
same bytes are stored once. Writes are atomic (temp + fsync + rename); reads
verify the hash and never serve bytes that do not match. Deleting a blob leaves
a `raw_{sha}.tomb` JSON tombstone beside where it was.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import zstandard

from raw_store.errors import BlobCorrupt, BlobForgotten, BlobMissing
from raw_store.lake import as_path, file_bytes, fsync_dir, is_remote, write_bytes_atomic

ZSTD_LEVEL = 3
QUARANTINE = "quarantine"  # corrupt blobs found by `verify`, moved here under their store path
UNDATED = "0000/00/00"  # folder of blobs without a day (e.g. rejected bytes)
_SAFE_TENANT = re.compile(r"[A-Za-z0-9._-]{1,64}")
_HASHED_TENANT = re.compile(r"t_[0-9a-f]{16}")
_SHA = re.compile(r"[0-9a-f]{64}")
_CACHE_ENTRIES = 256
_CACHE_BYTES = 64 << 20


@dataclass(frozen=True)
class BlobRef:
    raw_id: str  # "raw_" + sha256[:32]
    sha256: str  # full hex sha256 of the uncompressed bytes
    path: str  # posix, relative to the data root
    len_bytes: int  # uncompressed
    stored_bytes: int  # compressed size on disk


@dataclass
class VerifyReport:
    total: int  # blobs in the store (of the tenant)
    checked: int  # blobs re-hashed (all, or the sample)
    corrupt: list[dict]  # [{path, sha256, problem}]
    partial: list[str]  # temp files of interrupted writes (never blobs)
    quarantined: bool  # whether corrupt blobs were moved away and partial files removed

    @property
    def ok(self) -> bool:
        return not self.corrupt


def raw_id_for(sha256: str) -> str:
    """The RawChunk id of a blob: "raw_" + the first 32 hex digits of its sha256."""
    return "raw_" + sha256[:32]


def tenant_dir(tenant: str) -> str:
    """A filesystem-safe folder name for `tenant` (the name itself when already safe, else "t_" + hash).

    Never empty, never "." / "..", never containing a separator. Names that look like
    hashed names are hashed too, so no tenant can name its way into another's folder.
    """
    if (
        _SAFE_TENANT.fullmatch(tenant)
        and ".." not in tenant
        and not tenant.startswith(".")
        and not _HASHED_TENANT.fullmatch(tenant)
    ):
        return tenant
    return "t_" + hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _compress(data: bytes) -> bytes:
    # single-threaded, fixed level: the same bytes always compress to the same file
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True).compress(data)


def _decompress(blob: bytes) -> bytes:
    # content size is always written by `put`; max_output_size guards blobs written otherwise
    return zstandard.ZstdDecompressor().decompress(blob, max_output_size=1 << 31)


class RawStore:
    """The CAS under `data_root/raw`; `path`s handed out and accepted are relative to `data_root`."""

    def __init__(self, data_root: Path) -> None:
        self.root = as_path(data_root)  # a local folder, or a UPath on object storage
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._lock = threading.Lock()

    # -- paths -------------------------------------------------------------------------------

    def blob_path(self, tenant: str, sha256: str, day: dt.date | None = None) -> str:
        """The relative posix path where `put` stores a blob."""
        folder = UNDATED if day is None else f"{day.year:04d}/{day.month:02d}/{day.day:02d}"
        return f"raw/{tenant_dir(tenant)}/{folder}/{sha256[:2]}/raw_{sha256}.blob.zst"

    def _checked(self, tenant: str, path: str, sha256: str) -> Path:
        """Resolve `path` after checking it lies in the tenant's folder and names `sha256`.

        PermissionError when the path is outside raw/{tenant_dir(tenant)}/ (tenant isolation
        at the lowest layer); ValueError when it is not a blob path of that sha.
        """
        parts = PurePosixPath(path).parts
        if len(parts) < 2 or parts[0] != "raw" or parts[1] != tenant_dir(tenant) or "\\" in path:
            raise PermissionError(f"{path!r} is not in tenant {tenant!r}'s raw store")
        if any(p in ("..", ".") for p in parts) or ".." in path.split("/"):
            raise PermissionError(f"{path!r} escapes the raw store")
        if not _SHA.fullmatch(sha256 or ""):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        if len(parts) != 7 or parts[5] != sha256[:2] or parts[6] != f"raw_{sha256}.blob.zst":
            raise ValueError(f"{path!r} is not the blob path of sha256 {sha256}")
        return self.root.joinpath(*parts)

    @staticmethod
    def _tomb(full: Path) -> Path:
        return full.with_name(full.name.removesuffix(".blob.zst") + ".tomb")

    # -- write -------------------------------------------------------------------------------

    def put(self, tenant: str, data: bytes, day: dt.date | None = None) -> BlobRef:
        """Store `data` for `tenant` (once per tenant+bytes+day) and return its ref.

        A blob forgotten by `delete` stays forgotten: putting the same bytes again
        returns the ref without rewriting it, so re-ingesting cannot resurrect it.
        An existing blob that fails verification is rewritten (repaired).
        """
        sha = hashlib.sha256(data).hexdigest()
        rel = self.blob_path(tenant, sha, day)
        full = self.root / rel
        compressed = _compress(data)
        ref = BlobRef(raw_id_for(sha), sha, rel, len(data), len(compressed))
        if self._tomb(full).exists():
            return ref
        try:
            existing = file_bytes(full)
        except FileNotFoundError:
            existing = None
        if existing is not None and existing != compressed and _verified_quietly(existing, sha):
            # a valid blob written by another zstd build: keep it, report its real size
            return BlobRef(ref.raw_id, sha, rel, len(data), len(existing))
        if existing != compressed:
            write_bytes_atomic(full, compressed)
        return ref

    def delete(self, tenant: str, path: str, sha256: str, reason: str, at: dt.datetime | None = None) -> dict:
        """Forget a blob: write its tombstone, then remove it. Returns a `schema.TOMBSTONES` row.

        Idempotent; the tombstone is written first so a crash in between still reads as forgotten.
        `at` defaults to now (UTC); a naive `at` is taken as UTC.
        """
        full = self._checked(tenant, path, sha256)
        at = dt.datetime.now(dt.UTC) if at is None else at
        at = at.replace(tzinfo=dt.UTC) if at.tzinfo is None else at.astimezone(dt.UTC)
        row = {
            "raw_id": raw_id_for(sha256),
            "tenant": tenant,
            "path": path,
            "sha256": sha256,
            "deleted_at": at,
            "reason": reason,
        }
        tomb = {**row, "deleted_at": at.isoformat()}
        write_bytes_atomic(self._tomb(full), json.dumps(tomb, ensure_ascii=False, sort_keys=True).encode())
        full.unlink(missing_ok=True)
        with self._lock:
            cached = self._cache.pop(path, None)
            if cached is not None:
                self._cache_bytes -= len(cached)
        return row

    # -- read --------------------------------------------------------------------------------

    def read(self, tenant: str, path: str, sha256: str) -> bytes:
        """The verified uncompressed bytes of a blob.

        PermissionError: path outside the tenant's folder. BlobForgotten: tombstoned.
        BlobMissing: no file. BlobCorrupt: undecodable or hash mismatch (bytes never returned).
        """
        full = self._checked(tenant, path, sha256)
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None:
                self._cache.move_to_end(path)
        if hit is not None and not self._tomb(full).exists():
            return hit
        if self._tomb(full).exists():
            raise BlobForgotten(f"{path} was forgotten")
        try:
            blob = file_bytes(full)
        except FileNotFoundError as exc:
            if self.quarantine_path(path).exists():
                raise BlobCorrupt(f"{path}: quarantined as corrupt by verify") from exc
            raise BlobMissing(path) from exc
        try:
            data = _decompress(blob)
        except zstandard.ZstdError as exc:
            raise BlobCorrupt(f"{path}: zstd: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            raise BlobCorrupt(f"{path}: sha256 mismatch")
        self._remember(path, data)
        return data

    def excerpt(self, tenant: str, path: str, sha256: str, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) of a verified blob; ValueError when out of range."""
        data = self.read(tenant, path, sha256)
        if offset < 0 or length < 0 or offset + length > len(data):
            raise ValueError(f"excerpt [{offset}, {offset + length}) outside blob of {len(data)} bytes")
        return data[offset : offset + length]

    def verify(
        self, tenant: str | None = None, *, sample: int | None = None, seed: int = 0, quarantine: bool = False
    ) -> VerifyReport:
        """Re-hash the blobs of one tenant (or all): every blob, or a seeded random `sample` of them.

        A blob that does not decode to its sha256 is reported and, with `quarantine`, moved to
        quarantine/ (reads then raise BlobCorrupt; putting the same bytes again repairs it).
        Temp files a killed writer left beside the blobs are partial writes: never blobs, never
        served; with `quarantine` they are removed.
        """
        base = self.root / "raw"
        folders = (
            [base / tenant_dir(tenant)]
            if tenant is not None
            else sorted((p for p in base.glob("*") if p.is_dir()), key=lambda p: p.name)
        )
        blobs: list[Path] = []
        partial: list[str] = []
        for folder in folders:
            blobs.extend(sorted(folder.rglob("raw_*.blob.zst")))
            partial.extend(p.relative_to(self.root).as_posix() for p in sorted(folder.rglob(".raw_*.tmp")))
        total = len(blobs)
        if sample is not None and sample < total:
            blobs = sorted(random.Random(seed).sample(blobs, sample))
        problems = []
        for full in blobs:
            sha = full.name.removeprefix("raw_").removesuffix(".blob.zst")
            rel = full.relative_to(self.root).as_posix()
            try:
                problem = None if _verified(file_bytes(full), sha) else "sha256 mismatch"
            except zstandard.ZstdError as exc:
                problem = f"zstd: {exc}"
            except FileNotFoundError:
                continue  # deleted (forgotten) while we walked
            if problem:
                problems.append({"path": rel, "sha256": sha, "problem": problem})
        if quarantine:
            for p in problems:
                self._quarantine(p["path"])
            for rel in partial:
                (self.root / rel).unlink(missing_ok=True)
        return VerifyReport(total=total, checked=len(blobs), corrupt=problems, partial=partial, quarantined=quarantine)

    def quarantine_path(self, path: str) -> Path:
        return self.root / QUARANTINE / path

    def _quarantine(self, path: str) -> None:
        """Move a corrupt blob out of the store (kept for inspection), so it is never served."""
        dest = self.quarantine_path(path)
        if is_remote(dest):
            (self.root / path).rename(dest)  # copy, then delete the source object
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / path, dest)
            fsync_dir(dest.parent)
            fsync_dir((self.root / path).parent)
        with self._lock:
            cached = self._cache.pop(path, None)
            if cached is not None:
                self._cache_bytes -= len(cached)

    def _remember(self, path: str, data: bytes) -> None:
        if len(data) > _CACHE_BYTES // 4:
            return
        with self._lock:
            if path in self._cache:
                return
            self._cache[path] = data
            self._cache_bytes += len(data)
            while len(self._cache) > _CACHE_ENTRIES or self._cache_bytes > _CACHE_BYTES:
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= len(old)


def _verified_quietly(blob: bytes, sha256: str) -> bool:
    try:
        return _verified(blob, sha256)
    except zstandard.ZstdError:
        return False


def _verified(blob: bytes, sha256: str) -> bool:
    """True when the compressed `blob` decodes to bytes hashing to `sha256` (ZstdError propagates)."""
    return hashlib.sha256(_decompress(blob)).hexdigest() == sha256
