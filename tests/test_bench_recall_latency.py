"""bench/recall_latency.py: a deterministic, exact-size synthetic tenant; a tiny run keeps the last-line contract."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from r2g.lake_graph import read_lake_table
from raw_store.cas import RawStore
from raw_store.lake import Lake
from raw_store.tables import part_paths

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    if "bench_recall_latency" not in sys.modules:  # dataclasses need the module registered while it executes
        spec = importlib.util.spec_from_file_location("bench_recall_latency", ROOT / "bench" / "recall_latency.py")
        sys.modules["bench_recall_latency"] = mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    return sys.modules["bench_recall_latency"]


@pytest.mark.parametrize(
    "text, nodes, edges",
    [
        ("100k:1M", 100_000, 1_000_000),
        ("2k:10k", 2_000, 10_000),
        ("1500:8000", 1_500, 8_000),
        ("0.5M:5m", 500_000, 5_000_000),
    ],
)
def test_sizes_parse(text: str, nodes: int, edges: int) -> None:
    assert _bench().parse_size(text) == _bench().Size(nodes, edges)


def test_tenant_is_deterministic_exact_and_cites_real_bytes(tmp_path: Path) -> None:
    b = _bench()
    size = b.Size(1_000, 5_000)
    one, two = b.generate_tenant(size, 7, tmp_path / "one"), b.generate_tenant(size, 7, tmp_path / "two")
    for name in ("nodes", "edges", "messages", "raw_chunks"):
        [first], [second] = part_paths(Lake(tmp_path / "one"), name), part_paths(Lake(tmp_path / "two"), name)
        assert first.read_bytes() == second.read_bytes(), name
    assert sum(one.stats["nodes"].values()) == 1_000 and sum(one.stats["edges"].values()) == 5_000
    assert set(one.stats["nodes"]) == {"Episode", "Fact", "Entity", "Concept"}
    assert {"MENTIONS", "ABOUT", "AGENT", "PATIENT", "TIME", "TEMPORAL_NEXT", "DERIVED_FROM"} <= set(one.stats["edges"])
    assert any(t.lang == "zh" for t in one.corpus.turns)

    nodes = read_lake_table(Lake(tmp_path / "one"), "nodes").to_pylist()
    edges = read_lake_table(Lake(tmp_path / "one"), "edges").to_pylist()
    assert len({e["id"] for e in edges}) == len(edges)
    assert one.corpus.popular[0].mentions > 200  # hubs: the user, popular people and things
    chunks = {c["id"]: c for c in read_lake_table(Lake(tmp_path / "one"), "raw_chunks").to_pylist()}
    store = RawStore(tmp_path / "one")
    for n in [n for n in nodes if n["type"] == "Fact"][:50]:  # a Fact's raw_ref holds exactly its clause
        ref = n["raw_refs"][0]
        c = chunks[ref["raw_id"]]
        data = store.read("bench", c["path"], c["sha256"])
        assert data[ref["offset"] : ref["offset"] + ref["length"]].decode("utf-8").strip() == n["text"]

    queries = b.make_queries(one.corpus, 40, 7)
    assert queries == b.make_queries(two.corpus, 40, 7)
    assert {q.kind for q in queries} == set(b.KIND_PATTERN) and sum(not q.expect_hits for q in queries) == 2


def test_tiny_run_prints_the_contract_line_and_finds_what_has_hits(capsys) -> None:
    assert _bench().main(["--sizes", "2k:10k", "--queries", "20"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    m = re.fullmatch(r"p95_ms=([\d.]+) p50_ms=([\d.]+) cold_start_s=([\d.]+) nodes=(\d+) edges=(\d+)", lines[-1])
    assert m, lines[-1]
    assert 0 < float(m.group(2)) <= float(m.group(1)) and float(m.group(3)) >= 0
    assert (int(m.group(4)), int(m.group(5))) == (2_000, 10_000)
    hits = next(
        re.match(
            r"hits: (\d+)/(\d+) queries with hits returned results \((\d+) with citations\); "
            r"(\d+)/(\d+) no-hit queries returned nothing",
            ln,
        )
        for ln in lines
        if ln.startswith("hits:")
    )
    assert hits, "no hits line"
    found, with_hits, cited, empty, no_hits = map(int, hits.groups())
    assert with_hits == 19 and found == with_hits and cited == with_hits
    assert no_hits == 1 and empty == no_hits
    for stage in ("seeds", "expand", "score", "cite"):
        assert any(ln.split()[:1] == [stage] for ln in lines), stage
