#!/usr/bin/env python3
"""Recall latency: recall() warm p50/p95/p99, cold start and peak RSS on synthetic tenant graphs of 10k–1M edges.

For each size `nodes:edges` it generates one deterministic tenant (seeded) and builds it
through the real code paths:

  chat      conversations of 50–300 turns (~6 % Chinese) between the tenant's user and
            1–2 others; each turn is 1–3 clauses "<who> <verb> <object> at <place> <when>,
            <filler>" whose filler words follow a Zipf law over a vocabulary that grows
            with the corpus. Written as canonical JSONL and ingested with
            raw_store.ingest.ingest_bytes (real chunker + CAS), so citations read real,
            sha-verified blobs.
  graph     Episode per turn; Entities (PERSON / LOC / OBJECT / TIME) picked by Zipf
            popularity, so a few are hubs; Facts on a share of the clauses with AGENT /
            PATIENT / LOCATION / TIME edges and DERIVED_FROM their Episode; Concepts on
            vocabulary words with ABOUT edges from the turns that use them; MENTIONS
            (speaker and named entities); TEMPORAL_NEXT chains; Episode DERIVED_FROM its
            RawChunk. Edges beyond what the text supports (the issue's 10 edges a node is
            denser than R2G's ~4) are implicit MENTIONS / ABOUT from random turns to
            Zipf-popular entities and concepts, so the edges table holds exactly `edges`
            rows. raw_refs point at the exact bytes (turn, clause, name) in the chunks.
  index     nodes / edges / messages / raw_chunks written with the shared schemas at the
            Lake paths, then the real recall.index.build_indexes, in a fresh process
            (time and peak RSS); then a 1 % update of the tables (new turns' nodes and
            edges, changed and removed nodes) indexed again: the delta segment's time.
  serve     a fresh process: the first recall() minus its warm time is the cold start
            (open the tenant's recall index, the first query's stems and BM25, jieba's lazy
            word table, first queries; the page cache stays warm); then
            every query once, warm, with recall(q, tenant, k=10, expand_depth=1): p50 /
            p95 / p99 and the p50 / p95 of each traced stage. Peak RSS of that process.
            A second fresh process times the index loads one by one.

Queries (deterministic, `--queries`, default 200): frequent and rare single words,
2–4 words of one turn, entity names (hubs and tail), questions, Chinese, and words the
corpus does not hold. `--profile N` adds a profiled second build and query pass (after the
measured ones) and prints where the time goes. The last line is always, for the largest size:
`p95_ms=… p50_ms=… cold_start_s=… nodes=… edges=…`.

The code is in three files: this one (fresh-process measurements, report, CLI),
bench/latency_corpus.py (vocabularies, sizes, data classes, queries) and
bench/latency_tenant.py (the generator).

Usage: python bench/recall_latency.py [--sizes 10k:100k 30k:300k 100k:1M] [--queries 200] [--seed 7]
                                      [--keep DIR] [--profile N]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import math
import os
import pstats
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.latency_corpus import (  # noqa: E402,F401
    DEFAULT_SIZES,
    KIND_PATTERN,
    TENANT,
    ZH_WORDS,
    Query,
    Size,
    Tenant,
    make_queries,
    parse_size,
)
from bench.latency_tenant import generate_tenant  # noqa: E402
from bench.machine import cpu_busy_seconds  # noqa: E402
from r2g.lake_graph import read_lake_table  # noqa: E402
from r2g.schema import EDGES, NODES  # noqa: E402
from raw_store.lake import Lake  # noqa: E402
from recall import RecallConfig, recall  # noqa: E402
from recall.index import build_indexes  # noqa: E402
from recall.index_build import build_recall_indexes  # noqa: E402
from recall.query_tokens import search_tokens  # noqa: E402
from recall.tenant_index import open_tenant_index, recall_dir  # noqa: E402

# ---------------------------------------------------------------- fresh-process measurements


def run_fresh(func: str, **kwargs) -> dict:
    """`func(**kwargs)` of this file in a new Python process (caches cold); its JSON result plus import_s."""
    code = (
        "import importlib.util, json, sys, time\n"
        "t = time.perf_counter()\n"
        "spec = importlib.util.spec_from_file_location('bench_recall_latency_child', sys.argv[1])\n"
        "mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)\n"
        "t = time.perf_counter() - t\n"
        "out = getattr(mod, sys.argv[2])(**json.load(sys.stdin))\n"
        "out['import_s'] = t\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).resolve()), func],
        input=json.dumps(kwargs),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{func} failed in its process:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def recall_code_id() -> str:
    """A short hash of the recall package's sources: which recall() a figure belongs to."""
    h = hashlib.sha256()
    for path in sorted((Path(__file__).resolve().parents[1] / "recall").glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def _peak_rss_mib() -> float:
    """This process's peak RSS: VmHWM. (ru_maxrss keeps the peak of the process before exec, so a child of the
    generating process reported the generator's ~1.2 GiB: the serve figures before 2026-11-25 are inflated.)"""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _own_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# Where the time goes: these functions' cumulative time in a profile, as a share of the root function's.
PROFILE_KEYS = {
    "recall": (
        ("recall/query.py", "analyze", "query analysis (intent, times, names)"),
        ("recall/tenant_index.py", "named_entities", "names matched to Entities"),
        ("recall/tenant_index.py", "node_bm25", "BM25 seeds (postings)"),
        ("recall/postings.py", "stems", "  of which query stems (DuckDB stem/tokenize, cached)"),
        ("recall/tenant_index.py", "raw_bm25", "BM25 raw fallback (postings)"),
        ("recall/engine.py", "_expand", "graph expansion (CSR walk + PPR)"),
        ("recall/engine.py", "_ppr", "  of which personalized PageRank"),
        ("recall/engine.py", "_score", "candidate scoring"),
        ("recall/tenant_index.py", "node_batch", "  of which candidate node rows"),
        ("recall/citations.py", "prefetch", "citation rows (chunks + message pieces)"),
        ("raw_store/cas.py", "read", "blob reads (sha-verified, cached)"),
        ("recall/engine.py", "_mmr", "MMR"),
    ),
    "build_indexes": (
        ("raw_store/lake.py", "read_table", "read the Parquet tables"),
        ("recall/index.py", "_write_duckdb", "DuckDB file (_write_duckdb)"),
        ("recall/index.py", "_per_tenant_fts", "  of which per-tenant copy + create_fts_index"),
        ("recall/index.py", "_write_recall_indexes", "recall index (recall.index_build)"),
        ("recall/index_build.py", "prepare", "  of which row hashes, half-edges, message pieces (polars)"),
        ("recall/segment_build.py", "_adjacency", "  of which CSR neighbour lists"),
        ("recall/postings.py", "build_postings", "  of which DuckDB FTS → postings"),
        ("r2g/tokens.py", "segment_for_fts", "jieba / token segmentation of docs (both indexes)"),
    ),
}


def _profile_text(prof: cProfile.Profile, top: int, root_func: str, runs: int = 1) -> str:
    """The key functions' share of `root_func`'s cumulative time (and calls per run), then the top N by own time."""
    stats = pstats.Stats(prof)
    by_key = {
        (k[0] if k[0].startswith("<") else f"{Path(k[0]).parent.name}/{Path(k[0]).name}", k[2]): v
        for k, v in stats.stats.items()  # type: ignore[attr-defined]  # typeshed leaves out Stats.stats
    }
    total = (
        max((v[3] for (f, name), v in by_key.items() if name == root_func and not f.startswith("<")), default=0.0)
        or 1.0
    )
    lines = [f"  {'cumulative s':>12} {'share':>6} {'calls/run':>9}  what"]
    for file, name, label in PROFILE_KEYS[root_func]:
        hit = by_key.get((file, name))
        if hit:
            lines.append(f"  {hit[3]:>12.2f} {hit[3] / total:>6.1%} {hit[1] / runs:>9.1f}  {label}")
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    out = buf.getvalue().splitlines()
    head = next((i for i, ln in enumerate(out) if ln.lstrip().startswith("ncalls")), 0)
    return "\n".join(lines + [""] + [ln for ln in out[head:] if ln.strip()])


def _tree_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.exists() else 0.0


def build(root: str, profile: int = 0) -> dict:
    """build_indexes on the lake at `root`: its stats, seconds and peak RSS; with `profile`, a second
    build under cProfile gives the top functions (the figures come from the first, unprofiled one)."""
    lake = Lake(Path(root))
    t = time.perf_counter()
    stats = build_indexes(lake)
    out = {
        "seconds": time.perf_counter() - t,
        "graphs": stats["graphs"],
        "tables": stats["tables"],
        "rss_mib": _peak_rss_mib(),
        "duckdb_mib": lake.duckdb_path.stat().st_size / 2**20,
        "index_mib": _tree_mib(recall_dir(lake.index_dir)),
    }
    if profile:
        shutil.rmtree(recall_dir(lake.index_dir))  # a full build again, not an unchanged-tables no-op
        prof = cProfile.Profile()
        prof.runcall(build_indexes, lake)
        out["profile"] = _profile_text(prof, profile, "build_indexes")
    return out


def update(root: str, share: float, seed: int) -> dict:
    """A `share` of the tenant changes — new turns' Episodes with their edges, changed texts, removed Facts —
    and recall's index is brought up to the changed tables: the delta segment's seconds and size."""
    lake = Lake(Path(root))
    r = random.Random(f"recall-latency-update:{seed}")
    nodes = read_lake_table(lake, "nodes").to_pylist()
    edges = read_lake_table(lake, "edges").to_pylist()
    k = max(1, round(share * len(nodes)))
    episodes = [n for n in nodes if n["type"] == "Episode"]
    entities = [n["id"] for n in nodes if n["type"] == "Entity"]
    added = [dict(n, id=n["id"] + "_u", text=(n["text"] or "") + " again") for n in r.sample(episodes, k // 2)]
    new_edges = [
        dict(e, id=f"e_u{i}_{j}", src=n["id"], dst=r.choice(entities), type="MENTIONS")
        for i, n in enumerate(added)
        for j, e in enumerate(r.sample(edges, 2))
    ]
    for n in r.sample(episodes, k // 4):
        n["text"] = (n["text"] or "") + " (edited)"
    gone = {n["id"] for n in r.sample([n for n in nodes if n["type"] == "Fact"], k // 4)}
    tables = {
        "nodes": pa.Table.from_pylist([n for n in nodes if n["id"] not in gone] + added, schema=NODES),
        "edges": pa.Table.from_pylist(
            [e for e in edges if e["src"] not in gone and e["dst"] not in gone] + new_edges, schema=EDGES
        ),
        "raw_chunks": read_lake_table(lake, "raw_chunks"),
        "messages": read_lake_table(lake, "messages"),
    }
    t = time.perf_counter()
    st = build_recall_indexes(lake.index_dir, tables)[TENANT]
    return {
        "seconds": time.perf_counter() - t,
        "mode": st["mode"],
        "units": st["units"],
        "changed_nodes": k,
        "index_mib": _tree_mib(recall_dir(lake.index_dir)),
        "rss_mib": _peak_rss_mib(),
    }


def load_breakdown(root: str, tenant: str) -> dict:
    """Seconds of each index load a first recall pays, one by one, in a process that has loaded none."""
    lake = Lake(Path(root))
    out = {}
    t = time.perf_counter()
    reader = open_tenant_index(lake.index_dir, tenant)
    info = reader.info()
    out["open_index"] = time.perf_counter() - t
    t = time.perf_counter()
    tg = reader.graph()
    out["graph"] = time.perf_counter() - t
    out["hubs"] = int((tg.degrees() > RecallConfig().hub_degree).sum())
    t = time.perf_counter()
    reader.node_bm25(info, "coffee garden", RecallConfig().seed_limit)
    out["first_bm25"] = time.perf_counter() - t
    t = time.perf_counter()
    search_tokens("公园")
    out["jieba_init"] = time.perf_counter() - t
    t = time.perf_counter()
    reader.node_batch([n for n, _ in reader.node_bm25(info, "garden", 50)])
    out["first_rows"] = time.perf_counter() - t
    return out


def serve(root: str, tenant: str, queries: list[dict], warmup: str, profile: int = 0) -> dict:
    """First recall() cold, then each query once warm: per-query ms, stage ms, result counts; peak RSS."""
    lake = Lake(Path(root))
    code = recall_code_id()

    def timed(q: str) -> tuple[float, list, list]:
        trace: list = []
        t = time.perf_counter()
        res = recall(q, tenant, k=10, expand_depth=1, lake=lake, trace=trace)
        return (time.perf_counter() - t) * 1000, trace, res

    cold_ms, _, _ = timed(warmup)
    rows = []
    busy, cpu, wall = cpu_busy_seconds(), _own_cpu_seconds(), time.perf_counter()
    for q in queries:
        ms, trace, res = timed(q["text"])
        stages = defaultdict(float)
        for s in trace:
            stages[s["stage"]] += s["ms"]
        rows.append(
            {
                "kind": q["kind"],
                "ms": ms,
                "stages": stages,
                "results": len(res),
                "cited": sum(1 for x in res if x.citations),
                "expect_hits": q["expect_hits"],
                "seeds": next((s["n"] for s in trace if s["stage"] == "seeds"), 0),
                "reached": next((s["n"] for s in trace if s["stage"] == "expand"), 0),
            }
        )
    wall, cpu = time.perf_counter() - wall, _own_cpu_seconds() - cpu
    busy = None if busy is None else (cpu_busy_seconds() - busy) / wall
    warm_again = sorted(timed(warmup)[0] for _ in range(5))[2]
    out = {
        "cold_ms": cold_ms,
        "warmup_warm_ms": warm_again,
        "rows": rows,
        "rss_mib": _peak_rss_mib(),
        "loop_s": wall,
        "loop_cpu_s": cpu,
        "busy_cores": busy,
        "code": code,
    }
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for q in queries:
            recall(q["text"], tenant, k=10, expand_depth=1, lake=lake)
        prof.disable()
        out["profile"] = _profile_text(prof, profile, "recall", len(queries))
    return out


# ---------------------------------------------------------------- report


def pct(xs: list[float], p: float) -> float:
    """The p-th percentile (nearest rank, p in 0–100); 0.0 for no values."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


@dataclass
class Measured:
    """One size's figures: generation stats, then what the build, load and serve processes returned."""

    size: Size
    stats: dict
    built: dict
    load: dict
    served: dict
    updated: dict | None = None  # the 1 % update: its delta build, and warm latency over base + delta
    served_delta: dict | None = None

    @property
    def ms(self) -> list[float]:
        return [r["ms"] for r in self.served["rows"]]

    @property
    def cold_start_s(self) -> float:
        return max(0.0, (self.served["cold_ms"] - self.served["warmup_warm_ms"]) / 1000)


def measure_size(size: Size, seed: int, n_queries: int, root: Path, profile: int, update_share: float) -> Measured:
    """Generate the tenant at `root`, then build, load and serve it, each in a fresh process; then update
    `update_share` of it (a delta segment) and serve a quarter of the queries again."""
    t = time.perf_counter()
    tenant = generate_tenant(size, seed, root)
    tenant.stats["seconds"]["total"] = time.perf_counter() - t
    queries = make_queries(tenant.corpus, n_queries, seed)
    built = run_fresh("build", root=str(root), profile=profile)
    load = run_fresh("load_breakdown", root=str(root), tenant=TENANT)
    warmup = f"{tenant.corpus.vocab[0]} {ZH_WORDS[0]}"  # English and Chinese: loads the jieba dictionary too
    served = run_fresh(
        "serve", root=str(root), tenant=TENANT, queries=[q.__dict__ for q in queries], warmup=warmup, profile=profile
    )
    m = Measured(size, tenant.stats, built, load, served)
    if update_share > 0:
        m.updated = run_fresh("update", root=str(root), share=update_share, seed=seed)
        m.served_delta = run_fresh(
            "serve", root=str(root), tenant=TENANT, queries=[q.__dict__ for q in queries[::4]], warmup=warmup
        )
    return m


def print_size(m: Measured) -> None:
    st, b, s = m.stats, m.built, m.served
    g = next(iter(b["graphs"].values()))
    sec = st["seconds"]
    nodes = ", ".join(f"{k} {v:,}" for k, v in sorted(st["nodes"].items(), key=lambda kv: -kv[1]))
    edges = ", ".join(f"{k} {v:,}" for k, v in sorted(st["edges"].items(), key=lambda kv: -kv[1]))
    print(f"\n== {m.size.label}: {m.size.nodes:,} nodes, {m.size.edges:,} edges")
    print(f"nodes: {nodes}")
    print(f"edges: {edges}")
    print(
        f"graph index: {g['vertices']:,} vertices, {g['edges']:,} edges (DERIVED_FROM → RawChunk left out); "
        f"{m.load['hubs']:,} hubs above degree {RecallConfig().hub_degree}"
    )
    print(f"raw: {st['messages']:,} messages in {st['raw_chunks']:,} chunks ({st['raw_bytes'] / 2**20:.1f} MiB)")
    print(
        f"generate {sec['total']:.1f} s (chat {sec['chat']:.1f}, ingest+CAS {sec['ingest']:.1f}, "
        f"graph+Parquet {sec['graph']:.1f});  build_indexes {b['seconds']:.1f} s (recall index {g['seconds']:.1f} s), "
        f"peak RSS {b['rss_mib']:,.0f} MiB; memory.duckdb {b['duckdb_mib']:.0f} MiB, recall index "
        f"{b['index_mib']:.1f} MiB"
    )
    ld = m.load
    print(
        f"cold start {m.cold_start_s:.2f} s: first recall() in a fresh process {s['cold_ms']:.0f} ms − warm "
        f"{s['warmup_warm_ms']:.0f} ms (imports before it {s['import_s']:.2f} s, not counted)"
    )
    print(
        f"  one by one: open the recall index {ld['open_index'] * 1000:.0f} ms, graph arrays "
        f"{ld['graph'] * 1000:.0f} ms, first BM25 (query stems included) {ld['first_bm25'] * 1000:.0f} ms, "
        f"jieba (lazy word table) {ld['jieba_init'] * 1000:.0f} ms, first node rows {ld['first_rows'] * 1000:.0f} ms"
    )
    rows = s["rows"]
    ms = m.ms
    print(
        f"warm recall() over {len(rows)} queries (k=10, expand_depth=1): p50 {pct(ms, 50):.1f} ms  "
        f"p95 {pct(ms, 95):.1f} ms  p99 {pct(ms, 99):.1f} ms  max {max(ms):.1f} ms  "
        f"mean {sum(ms) / len(ms):.1f} ms;  "
        f"peak RSS {s['rss_mib']:,.0f} MiB"
    )
    busy = "n/a" if s["busy_cores"] is None else f"{s['busy_cores']:.2f}"
    print(
        f"  the loop: {s['loop_s']:.1f} s wall, {s['loop_cpu_s']:.1f} s CPU of the recall process "
        f"(DuckDB runs its own threads); machine busy cores {busy} of {os.cpu_count()}"
    )
    print(f"  {'stage':<10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for stage in (*stages_of(rows), "other"):
        xs = [r["ms"] - sum(r["stages"].values()) if stage == "other" else r["stages"].get(stage, 0.0) for r in rows]
        print(f"  {stage:<10}{pct(xs, 50):>9.1f}{pct(xs, 95):>9.1f}{pct(xs, 99):>9.1f}{sum(xs) / len(xs):>9.1f}")
    print(f"  {'kind':<10}{'n':>4}{'p50 ms':>9}{'p95 ms':>9}{'seeds':>7}{'reached':>9}{'results':>9}{'cited':>7}")
    for kind in dict.fromkeys(KIND_PATTERN):
        kr = [r for r in rows if r["kind"] == kind]
        if kr:
            km = [r["ms"] for r in kr]

            def avg(key: str, kr: list[dict] = kr) -> float:
                return sum(r[key] for r in kr) / len(kr)

            print(
                f"  {kind:<10}{len(kr):>4}{pct(km, 50):>9.1f}{pct(km, 95):>9.1f}{avg('seeds'):>7.1f}"
                f"{avg('reached'):>9.0f}{avg('results'):>9.1f}{avg('cited'):>7.1f}"
            )
    hit = [r for r in rows if r["expect_hits"]]
    nohit = [r for r in rows if not r["expect_hits"]]
    print(
        f"hits: {sum(1 for r in hit if r['results'])}/{len(hit)} queries with hits returned results "
        f"({sum(1 for r in hit if r['cited'])} with citations); "
        f"{sum(1 for r in nohit if not r['results'])}/{len(nohit)} no-hit queries returned nothing"
    )
    if m.updated:
        u, d = m.updated, m.served_delta
        dm = [r["ms"] for r in d["rows"]]
        print(
            f"{u['changed_nodes']:,}-node update ({u['mode']}, {u['units']:,} units): {u['seconds']:.1f} s "
            f"(the recall index's full build: {g['seconds']:.1f} s), index {u['index_mib']:.1f} MiB; warm recall() "
            f"over base + delta, {len(dm)} queries: p50 {pct(dm, 50):.1f} ms  p95 {pct(dm, 95):.1f} ms; "
            f"cold start {max(0.0, (d['cold_ms'] - d['warmup_warm_ms']) / 1000):.2f} s"
        )
    for name, key in (("build_indexes", b), ("warm recall() loop", s)):
        if key.get("profile"):
            print(f"\nprofile of {name} (cProfile, by own time):\n{key['profile']}")


def stages_of(rows: list[dict]) -> list[str]:
    """The traced stages, in the order recall() reports them (a stage skipped by one query counts 0 ms there)."""
    return list(dict.fromkeys(stage for r in rows for stage in r["stages"]))


def print_summary(done: list[Measured]) -> None:
    codes = {m.served["code"] for m in done}
    print(
        "\n== summary"
        + (
            f" (recall sources {codes.pop()})"
            if len(codes) == 1
            else f" — WARNING: recall sources changed during the run: {sorted(codes)}"
        )
    )
    print(
        f"{'size':<12}{'build s':>9}{'cold s':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'RSS MiB':>9}"
        f"{'seeds p95':>10}{'expand p95':>11}{'cite p95':>9}"
    )
    for m in done:
        rows = m.served["rows"]
        sp = {k: pct([r["stages"].get(k, 0.0) for r in rows], 95) for k in ("seeds", "expand", "cite")}
        print(
            f"{m.size.label:<12}{m.built['seconds']:>9.1f}{m.cold_start_s:>8.2f}{pct(m.ms, 50):>8.1f}"
            f"{pct(m.ms, 95):>8.1f}{pct(m.ms, 99):>8.1f}{m.served['rss_mib']:>9,.0f}{sp['seeds']:>10.1f}"
            f"{sp['expand']:>11.1f}{sp['cite']:>9.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        type=parse_size,
        nargs="+",
        default=[parse_size(s) for s in DEFAULT_SIZES],
        help=f"NODES:EDGES per tenant, e.g. 10k:100k 100k:1M (default: {' '.join(DEFAULT_SIZES)})",
    )
    ap.add_argument("--queries", type=int, default=200, help="queries per size (default 200)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build the lakes here and keep them (default: a temp dir)")
    ap.add_argument(
        "--update",
        type=float,
        default=0.01,
        metavar="SHARE",
        help="then change this share of the nodes and time the delta segment (default 0.01; 0: skip)",
    )
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also profile (cProfile) a second build and a second pass over the queries, after "
        "the measured ones, and print where the time goes plus the top N functions",
    )
    args = ap.parse_args(argv)
    if args.queries < 1:
        ap.error("--queries must be at least 1")

    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl_bench_recall_"))
    done = []
    try:
        for size in sorted(args.sizes, key=lambda s: (s.edges, s.nodes)):
            root = work / f"lake_{size.nodes}_{size.edges}"
            shutil.rmtree(root, ignore_errors=True)
            m = measure_size(size, args.seed, args.queries, root, args.profile, args.update)
            print_size(m)
            done.append(m)
            sys.stdout.flush()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print_summary(done)
    last = done[-1]
    print(
        f"p95_ms={pct(last.ms, 95):.1f} p50_ms={pct(last.ms, 50):.1f} cold_start_s={last.cold_start_s:.2f} "
        f"nodes={last.size.nodes} edges={last.size.edges}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
