"""Golden harness for the consolidation steps: the library (jobs/, r2g/link.py) against the frozen pre-vectorisation
reference (tests/legacy/), step by step, on a real lake.

    .venv/bin/python -m bench.consolidation_golden LAKE_DIR                  # compare old vs new, time each step
    .venv/bin/python -m bench.consolidation_golden LAKE_DIR --impl new       # time the new steps only
    .venv/bin/python -m bench.consolidation_golden LAKE_DIR --whole old      # one whole consolidate(): s + peak RSS
    … --previous        the lake's own outputs are the previous run (sticky tiers, stable community ids)
    … --feedback 2000   synthetic FEEDBACK rows on random nodes (the Python path of jobs.tiers.promote)
    … --shift-days 12   as_of moved on (decay, archives, restores)

LAKE_DIR holds r2g_nodes/r2g_edges.parquet (and messages, promotions, … for as_of and --previous). Each step runs
both implementations on the same input (the reference's output of the step before) and the outputs must be equal
tables and equal Parquet bytes (raw_store.lake.table_bytes). Without --previous/--feedback/--shift-days, the new
pipeline's final nodes/edges are also compared with the lake's own nodes.parquet/edges.parquet.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import random
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from jobs import communities as new_communities
from jobs import pii as new_pii
from jobs import rollup as new_rollup
from jobs import sparsify as new_sparsify
from jobs import tiers as new_tiers
from jobs import versions as new_versions
from jobs.consolidate import ConsolidationConfig, Previous, _without_orphaned_topics, concat, consolidate, default_as_of
from jobs.integrity import orphan_edges, unresolved_raw_refs
from jobs.schema import COLD_EDGES, COMMUNITIES, FEEDBACK, PROMOTIONS, REVIEW_QUEUE
from r2g import link as new_link
from r2g.schema import EDGES, NODES
from raw_store.lake import read_table, table_bytes
from raw_store.schema import MESSAGES, RAW_CHUNKS
from tests.legacy import communities as old_communities
from tests.legacy import link as old_link
from tests.legacy import pii as old_pii
from tests.legacy import rollup as old_rollup
from tests.legacy import sparsify as old_sparsify
from tests.legacy import tiers as old_tiers
from tests.legacy import versions as old_versions

IMPLS = {
    "old": SimpleNamespace(
        link=old_link,
        versions=old_versions,
        communities=old_communities,
        rollup=old_rollup,
        pii=old_pii,
        tiers=old_tiers,
        sparsify=old_sparsify,
    ),
    "new": SimpleNamespace(
        link=new_link,
        versions=new_versions,
        communities=new_communities,
        rollup=new_rollup,
        pii=new_pii,
        tiers=new_tiers,
        sparsify=new_sparsify,
    ),
}


def same(a: pa.Table, b: pa.Table, schema: pa.Schema | None = None) -> bool:
    """Equal schemas, equal values, and (given the schema) equal Parquet bytes once each is one chunk per column
    (Arrow's Parquet writer starts a page at every chunk boundary; consolidate()'s final sort leaves one chunk,
    and --whole compares those bytes as they are)."""
    if not a.schema.equals(b.schema) or not a.equals(b):
        return False
    return schema is None or table_bytes(a.combine_chunks(), schema) == table_bytes(b.combine_chunks(), schema)


def first_difference(a: pa.Table, b: pa.Table) -> str:
    if a.schema != b.schema:
        return f"schemas differ:\n{a.schema}\n---\n{b.schema}"
    if a.num_rows != b.num_rows:
        return f"{a.num_rows} vs {b.num_rows} rows"
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if not x.equals(y):
            xs, ys = x.to_pylist(), y.to_pylist()
            i = next(i for i, (p, q) in enumerate(zip(xs, ys)) if p != q or type(p) is not type(q))
            return f"column {name} row {i}: {xs[i]!r} vs {ys[i]!r}"
    return "Parquet bytes differ"


def synthetic_feedback(nodes: pa.Table, as_of, n: int, seed: int = 0) -> pa.Table:
    """n FEEDBACK rows on random nodes, kinds and times around as_of (some after it: ignored by design)."""
    if n <= 0:
        return FEEDBACK.empty_table()
    r = random.Random(seed)
    keys = list(zip(nodes.column("tenant").to_pylist(), nodes.column("id").to_pylist()))
    picked = r.sample(keys, min(len(keys), max(1, n // 3)))
    kinds = ["hit"] * 5 + ["upvote"] * 3 + ["downvote", "pin", "unpin"]
    rows = []
    for i in range(n):
        tenant, nid = r.choice(picked)
        at = as_of - timedelta(minutes=r.randint(-600, 20 * 24 * 60))
        rows.append(
            {
                "tenant": tenant,
                "node_id": nid,
                "kind": r.choice(kinds),
                "at": at,
                "source": "recall",
                "source_file": None,
                "line": i,
                "query": None,
            }
        )
    return pa.Table.from_pylist(rows, schema=FEEDBACK)


class Steps:
    """Runs the consolidation steps in consolidate()'s order with a chosen implementation per step."""

    def __init__(self, impls: list[str], only: set[str] | None = None, cache: Path | None = None) -> None:
        self.impls, self.only, self.cache = impls, only, cache
        self.seconds: dict[str, dict[str, float]] = {}  # wall seconds
        self.cpu: dict[str, dict[str, float]] = {}  # process CPU seconds (all threads): steadier on a shared box
        self.failures: list[str] = []

    def run(self, name: str, call, compare) -> Any:
        """call(impl) → result; compare(old, new) → list of (label, table_old, table_new, schema)."""
        if self.only is not None and name not in self.only:
            # a step not under test: the reference's result, from the cache when a run stored it
            path = self.cache / f"{name}.pkl" if self.cache else None
            if path is not None and path.exists():
                return pickle.loads(path.read_bytes())
            result = call(IMPLS["old"])
            if path is not None:
                path.write_bytes(pickle.dumps(result))
            return result
        results = {}
        for impl in self.impls:
            t0, c0 = time.perf_counter(), time.process_time()
            results[impl] = call(IMPLS[impl])
            self.seconds.setdefault(name, {})[impl] = time.perf_counter() - t0
            self.cpu.setdefault(name, {})[impl] = time.process_time() - c0
        if len(results) == 2:
            for label, a, b, schema in compare(results["old"], results["new"]):
                if not same(a, b, schema):
                    self.failures.append(f"{name}.{label}: {first_difference(a, b)}")
        return results[self.impls[0]]  # the reference's output feeds the next step (old when both run)


def pipeline(
    lake: Path,
    impls: list[str],
    *,
    use_previous: bool,
    feedback_rows: int,
    shift_days: float,
    check_final: bool,
    only: set[str] | None = None,
    cache: Path | None = None,
) -> Steps:
    nodes = read_table(lake / "r2g_nodes.parquet", NODES)
    edges = read_table(lake / "r2g_edges.parquet", EDGES)
    messages = read_table(lake / "messages.parquet", MESSAGES)
    previous = Previous()
    if use_previous:
        previous = Previous(
            read_table(lake / "nodes.parquet", NODES),
            read_table(lake / "communities.parquet", COMMUNITIES),
            read_table(lake / "promotions.parquet", PROMOTIONS),
        )
    as_of = default_as_of(messages, previous.promotions) + timedelta(days=shift_days)
    feedback = concat(
        [read_table(lake / "feedback.parquet", FEEDBACK), synthetic_feedback(nodes, as_of, feedback_rows)], FEEDBACK
    )
    cfg = ConsolidationConfig()
    s = Steps(impls, only, cache)

    s.run("link_facts", lambda m: m.link.link_facts(nodes, edges), lambda a, b: [("edges", a, b, EDGES)])
    v = s.run(
        "version_facts",
        lambda m: m.versions.version_facts(nodes, edges, cfg.versions),
        lambda a, b: [
            ("nodes", a.nodes, b.nodes, NODES),
            ("edges", a.edges, b.edges, EDGES),
            ("review_queue", a.review_queue, b.review_queue, REVIEW_QUEUE),
        ],
    )
    nodes, edges = v.nodes, v.edges
    s.run("one_active_per_chain", lambda m: m.versions.one_active_per_chain(nodes, edges), _outcomes)
    c = s.run(
        "detect_communities",
        lambda m: m.communities.detect_communities(nodes, edges, previous.communities, cfg.communities),
        lambda a, b: [
            ("communities", a.communities, b.communities, COMMUNITIES),
            ("nodes", a.nodes, b.nodes, NODES),
            ("edges", a.edges, b.edges, EDGES),
        ],
    )
    nodes = concat([nodes, _without_orphaned_topics(c.nodes, nodes, previous.communities)], NODES)
    edges = concat([edges, c.edges], EDGES)
    r = s.run(
        "rollup_episodes",
        lambda m: m.rollup.rollup_episodes(nodes, edges, cfg.rollup),
        lambda a, b: [("nodes", a.nodes, b.nodes, NODES), ("edges", a.edges, b.edges, EDGES)],
    )
    nodes, edges = concat([nodes, r.nodes], NODES), concat([edges, r.edges], EDGES)
    s.run(
        "flag_nodes(redact)", lambda m: m.pii.flag_nodes(nodes, redact_text=True), lambda a, b: [("nodes", a, b, NODES)]
    )
    nodes = s.run("flag_nodes", lambda m: m.pii.flag_nodes(nodes), lambda a, b: [("nodes", a, b, NODES)])
    t = s.run(
        "promote",
        lambda m: m.tiers.promote(nodes, feedback, previous.nodes, as_of, cfg.tiers, edges=edges),
        lambda a, b: [
            ("nodes", a.nodes, b.nodes, NODES),
            ("promotions", a.promotions, b.promotions, PROMOTIONS),
            ("review", a.review, b.review, REVIEW_QUEUE),
        ],
    )
    nodes = t.nodes
    promotions = concat([previous.promotions, t.promotions], PROMOTIONS)
    s.run("tiers_monotone", lambda m: m.tiers.tiers_monotone(nodes, promotions, cfg.tiers), _outcomes)
    sp = s.run(
        "sparsify",
        lambda m: m.sparsify.sparsify(nodes, edges, as_of, cfg.sparsify),
        lambda a, b: [("edges", a.edges, b.edges, EDGES), ("cold", a.cold, b.cold, None)],
    )
    edges = sp.edges
    chunks = read_table(lake / "raw_chunks.parquet", RAW_CHUNKS)
    s.run(
        "orphan_edges+raw_refs",
        lambda m: (orphan_edges(nodes, edges, chunks), unresolved_raw_refs(nodes, chunks)),
        lambda a, b: [],
    )
    if check_final:
        for name, table, schema in (("nodes", nodes, NODES), ("edges", edges, EDGES)):
            stored = read_table(lake / f"{name}.parquet", schema)
            ours = table.take(pa.compute.sort_indices(table, [("tenant", "ascending"), ("id", "ascending")]))
            if not same(conform_sorted(stored, schema), ours, schema):
                diff = first_difference(conform_sorted(stored, schema), ours)
                s.failures.append(f"final {name} vs the lake's: {diff}")
    return s


def conform_sorted(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table.take(pa.compute.sort_indices(table, [("tenant", "ascending"), ("id", "ascending")]))


def _outcomes(a, b) -> list:
    """Check outcomes compared as tables of their fields (examples included)."""

    def as_table(o) -> pa.Table:
        return pa.table(
            {"passed": [o.passed], "checked": [o.checked], "failures": [o.failures], "examples": [repr(o.examples)]}
        )

    return [("outcome", as_table(a), as_table(b), None)]


def whole(lake: Path, impl: str, use_previous: bool, feedback_rows: int, shift_days: float) -> None:
    """One consolidate() with the chosen implementation patched in; prints seconds and this process's peak RSS."""
    import jobs.consolidate as jc

    m = IMPLS[impl]
    for name, fn in (
        ("version_facts", m.versions.version_facts),
        ("detect_communities", m.communities.detect_communities),
        ("rollup_episodes", m.rollup.rollup_episodes),
        ("flag_nodes", m.pii.flag_nodes),
        ("promote", m.tiers.promote),
        ("sparsify", m.sparsify.sparsify),
    ):
        setattr(jc, name, fn)  # the names consolidate() calls, patched
    nodes = read_table(lake / "r2g_nodes.parquet", NODES)
    edges = read_table(lake / "r2g_edges.parquet", EDGES)
    messages = read_table(lake / "messages.parquet", MESSAGES)
    previous = Previous()
    if use_previous:
        previous = Previous(
            read_table(lake / "nodes.parquet", NODES),
            read_table(lake / "communities.parquet", COMMUNITIES),
            read_table(lake / "promotions.parquet", PROMOTIONS),
        )
    as_of = default_as_of(messages, previous.promotions) + timedelta(days=shift_days)
    feedback = concat(
        [read_table(lake / "feedback.parquet", FEEDBACK), synthetic_feedback(nodes, as_of, feedback_rows)], FEEDBACK
    )
    del messages
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    result = consolidate(nodes, edges, feedback=feedback, ops=[], previous=previous, as_of=as_of)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"impl={impl} consolidate_s={seconds:.2f} cpu_s={cpu:.2f} peak_rss_mb={rss:.0f} rss_before_mb={rss0:.0f} "
        f"nodes={result.nodes.num_rows} edges={result.edges.num_rows}"
    )
    # the written bytes of every output table: two runs (old, new) must print the same digests
    schemas = {
        "nodes": NODES,
        "edges": EDGES,
        "communities": COMMUNITIES,
        "promotions": PROMOTIONS,
        "review_queue": REVIEW_QUEUE,
        "cold_edges": COLD_EDGES,
    }
    for name, schema in schemas.items():
        print(f"sha256 {name} {hashlib.sha256(table_bytes(getattr(result, name), schema)).hexdigest()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lake", type=Path)
    ap.add_argument("--impl", choices=["both", "old", "new"], default="both")
    ap.add_argument("--whole", choices=["old", "new"])
    ap.add_argument("--previous", action="store_true")
    ap.add_argument("--feedback", type=int, default=0)
    ap.add_argument("--shift-days", type=float, default=0.0)
    ap.add_argument("--only", help="comma-separated steps to compare; the others run the reference only")
    ap.add_argument("--cache", type=Path, help="with --only: keep the reference results of the other steps here")
    a = ap.parse_args(argv)
    if a.whole:
        whole(a.lake, a.whole, a.previous, a.feedback, a.shift_days)
        return 0
    impls = ["old", "new"] if a.impl == "both" else [a.impl]
    plain = not (a.previous or a.feedback or a.shift_days)
    only = set(a.only.split(",")) if a.only else None
    if a.cache:
        a.cache = a.cache / f"prev{int(a.previous)}-fb{a.feedback}-shift{a.shift_days:g}"
        a.cache.mkdir(parents=True, exist_ok=True)
    s = pipeline(
        a.lake,
        impls,
        use_previous=a.previous,
        feedback_rows=a.feedback,
        shift_days=a.shift_days,
        check_final=plain and "old" in impls and only is None,
        only=only,
        cache=a.cache,
    )
    print(f"{'step':24s} " + " ".join(f"{i + ' wall':>9s} {i + ' cpu':>9s}" for i in impls))
    for name, secs in s.seconds.items():
        print(f"{name:24s} " + " ".join(f"{secs[i]:9.2f} {s.cpu[name][i]:9.2f}" for i in impls))
    print(
        f"{'total':24s} "
        + " ".join(
            f"{sum(v[i] for v in s.seconds.values()):9.2f} {sum(v[i] for v in s.cpu.values()):9.2f}" for i in impls
        )
    )
    for f in s.failures:
        print("DIFF", f)
    if len(impls) == 2:
        print("golden: identical" if not s.failures else f"golden: {len(s.failures)} difference(s)")
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
