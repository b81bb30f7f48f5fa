"""The content-addressed zstd store: dedup, verified reads, tenant isolation, forgetting, atomicity."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pyarrow as pa
import pytest

from raw_store import schema
from raw_store.cas import BlobRef, RawStore, raw_id_for, tenant_dir
from raw_store.errors import BlobCorrupt, BlobForgotten, BlobMissing

DAY = dt.date(2023, 5, 8)


@pytest.fixture
def store(tmp_path: Path) -> RawStore:
    return RawStore(tmp_path)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_put_returns_content_addressed_ref(store: RawStore) -> None:
    data = b"Caroline: hi\n"
    ref = store.put("alice", data, DAY)
    sha = hashlib.sha256(data).hexdigest()
    assert ref == BlobRef(
        raw_id_for(sha), sha, f"raw/alice/2023/05/08/{sha[:2]}/raw_{sha}.blob.zst", len(data), ref.stored_bytes
    )
    assert ref.raw_id == "raw_" + sha[:32]
    assert (store.root / ref.path).stat().st_size == ref.stored_bytes


def test_put_twice_stores_once(store: RawStore) -> None:
    data = b"same bytes " * 100
    a = store.put("alice", data, DAY)
    mtime = (store.root / a.path).stat().st_mtime_ns
    b = store.put("alice", data, DAY)
    assert a == b
    assert len(_files(store.root)) == 1
    assert (store.root / a.path).stat().st_mtime_ns == mtime
    assert a.stored_bytes < a.len_bytes  # zstd actually compresses


def test_undated_blobs_go_to_zero_folder(store: RawStore) -> None:
    ref = store.put("alice", b"\xff\xfe rejected bytes")
    assert ref.path.startswith("raw/alice/0000/00/00/")


def test_read_and_excerpt_roundtrip(store: RawStore) -> None:
    data = "[2023-05-08 13:56:00] Caroline: 我在公园里踢足球\n".encode()
    ref = store.put("alice", data, DAY)
    assert store.read("alice", ref.path, ref.sha256) == data
    start = data.index("我".encode())
    assert store.excerpt("alice", ref.path, ref.sha256, start, len("我在公园".encode())).decode() == "我在公园"
    with pytest.raises(ValueError):
        store.excerpt("alice", ref.path, ref.sha256, len(data) - 1, 5)


def test_flipped_byte_is_reported_not_served(store: RawStore) -> None:
    ref = store.put("alice", b"hello world, " * 50, DAY)
    full = store.root / ref.path
    blob = bytearray(full.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    full.write_bytes(bytes(blob))
    with pytest.raises(BlobCorrupt):
        RawStore(store.root).read("alice", ref.path, ref.sha256)  # fresh store: no cache
    assert [p["path"] for p in store.verify("alice").corrupt] == [ref.path]
    assert store.verify() == store.verify("alice")
    # putting the same bytes again repairs the blob
    store.put("alice", b"hello world, " * 50, DAY)
    assert store.verify().corrupt == []
    assert RawStore(store.root).read("alice", ref.path, ref.sha256) == b"hello world, " * 50


def test_garbage_file_is_corrupt(store: RawStore) -> None:
    ref = store.put("alice", b"abc", DAY)
    (store.root / ref.path).write_bytes(b"not zstd at all")
    with pytest.raises(BlobCorrupt):
        RawStore(store.root).read("alice", ref.path, ref.sha256)
    assert store.verify().corrupt[0]["problem"].startswith("zstd")


def test_missing_blob(store: RawStore) -> None:
    sha = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(BlobMissing):
        store.read("alice", store.blob_path("alice", sha, DAY), sha)


def test_tenant_isolation(store: RawStore) -> None:
    ref = store.put("alice", b"alice's secret", DAY)
    with pytest.raises(PermissionError):
        store.read("bob", ref.path, ref.sha256)
    with pytest.raises(PermissionError):
        store.read("bob", "raw/bob/../alice/" + ref.path.split("/", 2)[2], ref.sha256)
    with pytest.raises(PermissionError):
        store.delete("bob", ref.path, ref.sha256, "not yours")
    assert store.read("alice", ref.path, ref.sha256) == b"alice's secret"


def test_path_must_name_the_sha(store: RawStore) -> None:
    ref = store.put("alice", b"x", DAY)
    other = hashlib.sha256(b"y").hexdigest()
    with pytest.raises(ValueError):
        store.read("alice", ref.path, other)


@pytest.mark.parametrize(
    "tenant", ["", ".", "..", "../etc", "a/b", "a\\b", "ünïcode", "t_0123456789abcdef", ".hidden", "x" * 65, "a..b"]
)
def test_tenant_dir_is_always_safe(tenant: str) -> None:
    d = tenant_dir(tenant)
    assert d and d not in (".", "..") and "/" not in d and "\\" not in d and ".." not in d
    assert d.startswith("t_") and d != tenant


def test_tenant_dir_keeps_safe_names() -> None:
    assert tenant_dir("alice") == "alice"
    assert tenant_dir("team-1.prod_x") == "team-1.prod_x"
    assert tenant_dir("a/b") != tenant_dir("a\\b")


def test_unsafe_tenant_roundtrip(store: RawStore) -> None:
    ref = store.put("../evil", b"data", DAY)
    assert ref.path.split("/")[1] == tenant_dir("../evil")
    assert store.read("../evil", ref.path, ref.sha256) == b"data"
    assert (store.root / ref.path).resolve().is_relative_to((store.root / "raw").resolve())


def test_delete_leaves_tombstone_and_forgets(store: RawStore) -> None:
    ref = store.put("alice", b"forget me", DAY)
    assert store.read("alice", ref.path, ref.sha256) == b"forget me"  # now cached
    at = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.UTC)
    row = store.delete("alice", ref.path, ref.sha256, "user request", at=at)
    assert row == {
        "raw_id": ref.raw_id,
        "tenant": "alice",
        "path": ref.path,
        "sha256": ref.sha256,
        "deleted_at": at,
        "reason": "user request",
    }
    pa.Table.from_pylist([row], schema=schema.TOMBSTONES)  # the row fits the shared schema
    assert not (store.root / ref.path).exists()
    assert (store.root / ref.path).with_name(f"raw_{ref.sha256}.tomb").exists()
    with pytest.raises(BlobForgotten):
        store.read("alice", ref.path, ref.sha256)
    with pytest.raises(BlobForgotten):
        RawStore(store.root).read("alice", ref.path, ref.sha256)
    # re-ingesting the same bytes does not resurrect a forgotten blob
    store.put("alice", b"forget me", DAY)
    assert not (store.root / ref.path).exists()
    with pytest.raises(BlobForgotten):
        store.read("alice", ref.path, ref.sha256)


def test_delete_defaults_to_now_utc(store: RawStore) -> None:
    ref = store.put("alice", b"x", DAY)
    row = store.delete("alice", ref.path, ref.sha256, "gc")
    assert row["deleted_at"].tzinfo is not None
    assert abs(row["deleted_at"] - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)


def test_no_temp_files_left(store: RawStore) -> None:
    for i in range(20):
        store.put("alice", f"blob {i}".encode() * 10, DAY if i % 2 else None)
    names = [p.name for p in _files(store.root)]
    assert len(names) == 20
    assert all(n.startswith("raw_") and n.endswith(".blob.zst") for n in names)


def test_failed_write_leaves_no_blob(store: RawStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.put("alice", b"half written", DAY)
    assert _files(store.root) == []


def test_empty_blob(store: RawStore) -> None:
    ref = store.put("alice", b"")
    assert ref.len_bytes == 0
    assert store.read("alice", ref.path, ref.sha256) == b""


def test_verify_quarantines_corrupt_blobs_and_put_repairs_them(store: RawStore) -> None:
    good = store.put("alice", b"fine bytes", DAY)
    bad = store.put("alice", b"soon broken", DAY)
    store.read("alice", bad.path, bad.sha256)  # now in the read cache
    (store.root / bad.path).write_bytes(b"\x28\xb5\x2f\xfd garbage")
    report = store.verify(quarantine=True)
    assert (report.total, report.checked, report.ok) == (2, 2, False)
    assert [p["path"] for p in report.corrupt] == [bad.path]
    assert not (store.root / bad.path).exists() and store.quarantine_path(bad.path).exists()
    # never served again, not even from the cache
    with pytest.raises(BlobCorrupt, match="quarantined"):
        store.read("alice", bad.path, bad.sha256)
    assert store.read("alice", good.path, good.sha256) == b"fine bytes"
    assert store.verify().ok
    store.put("alice", b"soon broken", DAY)  # re-ingesting the source repairs it
    assert store.read("alice", bad.path, bad.sha256) == b"soon broken"


def test_verify_sample_is_seeded_and_bounded(store: RawStore) -> None:
    for i in range(20):
        store.put("alice", f"blob {i}".encode(), DAY)
    a, b = store.verify(sample=5, seed=7), store.verify(sample=5, seed=7)
    assert (a.total, a.checked) == (20, 5) and a == b
    assert store.verify(sample=50).checked == 20


def test_verify_removes_partial_writes_left_by_a_killed_writer(store: RawStore) -> None:
    ref = store.put("alice", b"whole", DAY)
    folder = (store.root / ref.path).parent
    partial = folder / f".raw_{'ab' * 32}.blob.zst.k1lled.tmp"
    partial.write_bytes(b"\x28\xb5\x2f")  # half a zstd frame
    report = store.verify("alice")
    assert report.partial == [partial.relative_to(store.root).as_posix()] and report.ok
    assert partial.exists()  # reported only, until asked to clean
    assert store.verify("alice", quarantine=True).partial and not partial.exists()
    assert store.verify("alice").partial == []
