"""Lake paths, atomic deterministic Parquet writes, inbox scanning, partition assembly, integrity checks."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.integrity import conservation, lake_conservation, orphan_edges, unresolved_raw_refs
from r2g.lake_graph import read_lake_table
from r2g.schema import EDGES, NODES
from raw_store.cas import RawStore
from raw_store.lake import (
    Lake,
    local_copies,
    part_id,
    partition_key_for,
    read_manifest,
    read_object,
    read_table,
    scan_inbox,
    union_sorted,
    write_bytes_atomic,
    write_manifest,
    write_table,
)
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS
from raw_store.tables import part_rows


def test_write_table_is_atomic_deterministic_and_skips_identical_bytes(tmp_path: Path) -> None:
    table = pa.table({"tenant": ["t"], "source_file": ["a.txt"], "line": [3], "reason": ["E_JSON_PARSE"]})
    path = tmp_path / "lake" / "rejects.parquet"
    assert write_table(table, path, REJECTS) is True
    first = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    assert write_table(table, path, REJECTS) is False  # same rows → same bytes → untouched
    assert path.read_bytes() == first and path.stat().st_mtime_ns == mtime
    assert [p.name for p in path.parent.iterdir()] == ["rejects.parquet"]  # no temp file left
    back = read_table(path, REJECTS)
    assert back.schema == REJECTS and back.column("line").to_pylist() == [3]
    assert back.column("raw_id").to_pylist() == [None]  # missing columns conform to nulls


def test_read_table_of_missing_file_is_empty_with_schema(tmp_path: Path) -> None:
    t = read_table(tmp_path / "nope.parquet", NODES)
    assert t.num_rows == 0 and t.schema == NODES


def test_write_bytes_atomic_replaces_content(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    assert write_bytes_atomic(p, b"one")
    assert write_bytes_atomic(p, b"two") and p.read_bytes() == b"two"


def test_objects_are_written_once_and_copied_locally_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On object storage (fsspec's memory file system here) a write of the same bytes is skipped, and local_copies
    maps each object it fetched to a file in the lake's local cache while its context lasts, anything else to
    itself."""
    monkeypatch.setenv("MEMCTL_CACHE_DIR", str(tmp_path / "cache"))
    lake = Lake.at(f"memory://copies-{tmp_path.name}/lake")
    nodes, edges, missing = (lake.parts / p / "x.parquet" for p in ("p1", "p2", "p3"))
    assert write_bytes_atomic(nodes, b"one") and write_bytes_atomic(edges, b"two")
    assert not write_bytes_atomic(nodes, b"one")
    assert write_bytes_atomic(nodes, b"three") and read_object(nodes) == b"three"
    with local_copies(lake, [nodes, edges, missing]) as local:
        copies = local(nodes), local(edges)
        assert [c.read_bytes() for c in copies] == [b"three", b"two"]
        assert all(c.is_relative_to(lake.index_dir) for c in copies) and copies[0] != copies[1]
        assert local(missing) is missing and local(lake.parts) == lake.parts
    assert not any(c.exists() for c in copies)
    here = Lake(tmp_path / "data")
    with local_copies(here, [here.parts / "p1" / "x.parquet"]) as local:
        assert local(here.parts / "p1" / "x.parquet") == here.parts / "p1" / "x.parquet"


@given(st.text(min_size=1, max_size=40))
@settings(max_examples=200, deadline=None)
def test_part_ids_are_stable_and_safe(key: str) -> None:
    pid = part_id(key)
    assert pid == part_id(key) and pid.startswith("p_") and pid.replace("_", "").isalnum()


def test_partition_keys_avoid_dagster_forbidden_substrings() -> None:
    assert partition_key_for("alice/chat.txt") == "alice/chat.txt"
    bad = partition_key_for("alice/odd...name.txt")
    assert bad.startswith("file-") and "..." not in bad


def test_scan_inbox_skips_hidden_and_temp_files(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    (inbox / "alice").mkdir(parents=True)
    (inbox / "alice" / "a.txt").write_text("A: hi\n")
    (inbox / "alice" / ".hidden.txt").write_text("x")
    (inbox / "alice" / "upload.part").write_text("x")
    (inbox / "top.jsonl").write_text("{}\n")
    files = scan_inbox(inbox)
    assert sorted(files) == ["alice/a.txt", "top.jsonl"]
    assert len(files["alice/a.txt"].sha256) == 64


def test_manifest_round_trip(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    d = lake.part_dir("alice/a.txt")
    assert read_manifest(d) == {}
    write_manifest(d, {"source_sha256": "ab", "n_input": 3})
    assert read_manifest(d) == {"source_sha256": "ab", "n_input": 3}


def test_union_sorted_orders_and_dedups_regardless_of_input_order() -> None:
    a = pa.table({"tenant": ["t", "t"], "id": ["raw_b", "raw_a"], "source_file": ["y", "x"], "seq": [0, 1]})
    b = pa.table({"tenant": ["t"], "id": ["raw_a"], "source_file": ["w"], "seq": [0]})
    one = union_sorted([a, b], RAW_CHUNKS, ["tenant", "id", "source_file"], unique=["tenant", "id"])
    two = union_sorted([b, a], RAW_CHUNKS, ["tenant", "id", "source_file"], unique=["tenant", "id"])
    assert one.equals(two)
    assert one.column("id").to_pylist() == ["raw_a", "raw_b"]
    assert one.column("source_file").to_pylist() == ["w", "y"]


def _nodes(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=NODES)


def test_orphan_edges_finds_missing_endpoints_per_tenant() -> None:
    nodes = _nodes([{"id": "n1", "tenant": "a"}, {"id": "n2", "tenant": "a"}, {"id": "n3", "tenant": "b"}])
    chunks = pa.Table.from_pylist([{"id": "raw_1", "tenant": "a", "len_bytes": 10}], schema=RAW_CHUNKS)
    edges = pa.Table.from_pylist(
        [
            {"id": "e1", "tenant": "a", "src": "n1", "dst": "n2", "type": "MENTIONS"},
            {"id": "e2", "tenant": "a", "src": "n1", "dst": "raw_1", "type": "DERIVED_FROM"},
            {"id": "e3", "tenant": "a", "src": "n1", "dst": "n3", "type": "MENTIONS"},  # crosses tenants
            {"id": "e4", "tenant": "a", "src": "gone", "dst": "n2", "type": "MENTIONS"},
        ],
        schema=EDGES,
    )
    out = orphan_edges(nodes, edges, chunks)
    assert not out.passed and out.failures == 2 and {e["id"] for e in out.examples} == {"e3", "e4"}
    assert orphan_edges(nodes, edges.slice(0, 2), chunks).passed


_NAMES = st.sampled_from(["n1", "n2", "n3", "raw_1", None])
_TENANTS = st.sampled_from(["a", "b", None])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_TENANTS, _NAMES), max_size=6),
    st.lists(st.tuples(_TENANTS, _NAMES), max_size=3),
    st.lists(st.tuples(_TENANTS, _NAMES, _NAMES), max_size=8),
)
def test_orphan_edges_fails_the_edges_a_join_on_the_strings_finds(nodes, chunks, edges) -> None:
    """The hashed ends find exactly the edges an anti join of (tenant, end) strings finds (nulls match nothing), with
    the examples in its order (src failures, then dst failures, each in edge order), however the ends are sliced."""
    import polars as pl

    import raw_store.frames

    n = _nodes([{"id": i, "tenant": t} for t, i in nodes]) if nodes else NODES.empty_table()
    c = pa.Table.from_pylist([{"id": i, "tenant": t, "len_bytes": 1} for t, i in chunks], schema=RAW_CHUNKS)
    rows = [{"id": f"e{k}", "tenant": t, "src": a, "dst": b, "type": "MENTIONS"} for k, (t, a, b) in enumerate(edges)]
    e = pa.Table.from_pylist(rows, schema=EDGES)
    ef = pl.from_arrow(e.select(["id", "tenant", "src", "dst", "type"]))
    nf = pl.from_arrow(n.select(["tenant", "id"]))
    ends = pl.concat([nf, pl.from_arrow(c.select(["tenant", "id"]))])
    bad_src = ef.join(nf, left_on=["tenant", "src"], right_on=["tenant", "id"], how="anti", maintain_order="left")
    bad_dst = ef.join(ends, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="anti", maintain_order="left")
    expected = pl.concat([bad_src, bad_dst]).unique(subset=["id"], maintain_order=True)
    chunked = pa.concat_tables([e.slice(0, 3), e.slice(3)])  # a table of two chunks, as a union of partitions is
    for table, rows_a_slice in ((e, raw_store.frames.SLICE_ROWS), (chunked, 2)):
        with patch.object(raw_store.frames, "SLICE_ROWS", rows_a_slice):
            out = orphan_edges(n, table, c)
        assert (out.passed, out.checked, out.failures) == (expected.height == 0, len(rows), expected.height)
        assert out.examples == expected.head(5).to_dicts()


def test_unresolved_raw_refs_checks_bounds_and_tenant() -> None:
    chunks = pa.Table.from_pylist([{"id": "raw_1", "tenant": "a", "len_bytes": 10}], schema=RAW_CHUNKS)
    ok = _nodes([{"id": "n1", "tenant": "a", "raw_refs": [{"raw_id": "raw_1", "offset": 2, "length": 8}]}])
    assert unresolved_raw_refs(ok, chunks).passed
    bad = _nodes(
        [
            {"id": "n1", "tenant": "a", "raw_refs": [{"raw_id": "raw_1", "offset": 5, "length": 6}]},  # past the end
            {"id": "n2", "tenant": "b", "raw_refs": [{"raw_id": "raw_1", "offset": 0, "length": 1}]},  # other tenant
            {"id": "n3", "tenant": "a", "raw_refs": []},
        ]
    )
    assert unresolved_raw_refs(bad, chunks).failures == 2


def test_conservation(tmp_path: Path) -> None:
    msgs = pa.Table.from_pylist([{"text": "a"}, {"text": "b"}], schema=MESSAGES)
    rej = pa.Table.from_pylist([{"reason": "E_JSON_PARSE"}], schema=REJECTS)
    assert conservation(3, msgs, rej).passed
    assert not conservation(4, msgs, rej).passed
    blank = pa.Table.from_pylist([{"text": "a"}, {"text": "  "}], schema=MESSAGES)
    assert conservation(3, blank, rej).examples == [{"empty_message": 1}]
    # with the store: a reject whose bytes are not in the CAS is a loss
    store = RawStore(tmp_path)
    ref = store.put("t", b"{broken")
    kept = pa.Table.from_pylist([{"tenant": "t", "raw_path": ref.path, "length": 7, "line": 2}], schema=REJECTS)
    assert conservation(3, msgs, kept, store).passed
    (tmp_path / ref.path).unlink()
    lost = conservation(3, msgs, kept, RawStore(tmp_path))  # a fresh store: nothing cached
    assert not lost.passed and lost.examples[0]["reject_bytes_lost"] == ref.path


def test_lake_conservation_sums_the_partitions(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    for key, n in (("a/x.txt", 2), ("b/y.txt", 1)):
        write_manifest(lake.part_dir(key), {"partition_key": key, "source_file": key, "n_input": n})
    rej = pa.Table.from_pylist([{"reason": "E_JSON_PARSE"}], schema=REJECTS)
    assert lake_conservation(lake, 2, rej).passed
    assert not lake_conservation(lake, 1, rej).passed


def test_part_rows_are_the_rows_read_lake_table_reads(tmp_path: Path) -> None:
    """part_rows counts what read_lake_table reads (from the footers), partitions without the file and empty files
    included."""
    lake = Lake(tmp_path)
    for key, n in (("a/x.txt", 3), ("b/y.txt", 0), ("c/z.txt", 2)):
        part = lake.part_dir(key)
        write_manifest(part, {"partition_key": key, "source_file": key, "n_input": n})
        write_table(
            pa.Table.from_pylist([{"text": str(i)} for i in range(n)], schema=MESSAGES),
            part / "messages.parquet",
            MESSAGES,
        )
    write_manifest(lake.part_dir("d/none.txt"), {"partition_key": "d/none.txt", "source_file": "d/none.txt"})
    assert part_rows(lake, "messages") == 5 == read_lake_table(lake, "messages").num_rows
    assert part_rows(lake, "rejects") == 0


def test_a_loose_file_is_stale_when_the_default_tenant_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from raw_store.lake import stale_partitions

    lake = Lake(tmp_path)
    (lake.inbox / "alice").mkdir(parents=True)
    (lake.inbox / "loose.txt").write_text("Ann: hi\n", "utf-8")
    (lake.inbox / "alice" / "x.txt").write_text("Ann: hi\n", "utf-8")
    files = scan_inbox(lake.inbox)
    for key, f in files.items():
        write_manifest(
            lake.part_dir(key), {"graph_sha256": f.sha256, "tenant": "alice" if key.startswith("alice/") else "default"}
        )
    assert stale_partitions(lake, files) == {}
    monkeypatch.setenv("MEMCTL_TENANT", "acme")
    assert list(stale_partitions(lake, files)) == ["loose.txt"]
