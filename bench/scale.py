#!/usr/bin/env python3
"""Scale-out: wall time of `memctl materialize` on the dask executor with 1 and with 2 workers.

Builds a deterministic inbox (default 40 canonical JSONL files × 150 messages, English and
Chinese turns from bench/ingest.py's generator, four tenants), then materializes it, each time
into a fresh data directory — so the NLP cache starts cold every time and every message is
annotated — with MEMCTL_EXECUTOR=dask on a LocalCluster of 1 worker, then of 2 workers
(threads_per_worker=1, one NLP process per worker), and, for reference, in-process.

Every time includes what a user waits for: cluster start, worker warm-up (imports, spaCy and
jieba models), the file runs, the lake-wide run and the cluster's shutdown. Phases per row:
  start  from the call to the first file run starting (cluster, Dagster instance, warm-up)
  files  first file run start → last file run end (the fan-out)
  lake   last file run end → return (the lake-wide run on dagster-dask, cluster shutdown)
`busy` is the machine's busy cores over the row (all processes, /proc/stat): near the row's
worker count on a quiet machine, more when other work shared it. The lakes of all rows must be
byte-identical (checked). The last line is `scale workers=2 speedup=<1-worker time / 2-worker
time> files=<n>`.

Usage: python bench/scale.py [--files 40] [--messages 150] [--seed 7] [--repeat 1] [--keep DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ingest import generate_corpus  # noqa: E402
from bench.machine import cpu_busy_seconds  # noqa: E402

TENANTS = ("alpha", "beta", "gamma", "delta")


@dataclass
class Row:
    label: str
    seconds: float
    start: float
    files: float
    lake: float
    busy: float | None
    workers_used: int
    fingerprint: str


def build_inbox(inbox: Path, n_files: int, per_file: int, seed: int) -> int:
    """n_files canonical JSONL files of exactly per_file messages each (deterministic); returns the message count."""
    for i in range(n_files):
        corpus = generate_corpus(per_file, seed=seed + i, convs_per_file=10**9)   # one file of per_file turns
        (_, data), = corpus.files
        path = inbox / TENANTS[i % len(TENANTS)] / f"chat_{i:03d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return n_files * per_file


def lake_sha256(root: Path) -> str:
    """One hash over the lake's Parquet tables and manifests and the raw store's blobs."""
    h = hashlib.sha256()
    paths = [p for p in sorted((root / "lake").rglob("*")) if p.suffix in (".parquet", ".json")
             and not p.name.startswith(".") and p.name != "_state.json"]
    for p in paths + sorted((root / "raw").rglob("*.blob.zst")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def measure(label: str, inbox: Path, work: Path, kind: str, workers: int) -> Row:
    from assets.run import ExecutorConfig, materialize
    from raw_store.lake import Lake

    root = work / label
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(inbox, root / "inbox")
    os.environ.pop("DAGSTER_HOME", None)     # each row its own instance under its data dir
    busy0, t0 = cpu_busy_seconds(), time.time()
    summary = materialize(Lake(root), progress=False, executor=ExecutorConfig(kind=kind, workers=workers))
    t1, busy1 = time.time(), cpu_busy_seconds()
    if not summary.ok:
        raise SystemExit(f"{label}: materialize failed: {summary.failed or summary.lake_failed}")
    placed = summary.placements.values()
    first, last = min(o.started for o in placed), max(o.finished for o in placed)
    busy = None if busy0 is None or busy1 is None else (busy1 - busy0) / (t1 - t0)
    return Row(label, t1 - t0, first - t0, last - first, t1 - last, busy,
               len({o.worker.split(" pid=")[0] for o in placed}), lake_sha256(root))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--messages", type=int, default=150, help="messages per file (default 150)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the worker order alternates, medians reported")
    ap.add_argument("--no-in-process", action="store_true", help="skip the in-process reference row")
    ap.add_argument("--keep", type=Path, help="keep the inbox and lakes here (default: a temp dir)")
    args = ap.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl-scale-"))
    try:
        n = build_inbox(work / "inbox", args.files, args.messages, args.seed)
        print(f"inbox: {args.files} files × {args.messages} messages = {n} messages, {len(TENANTS)} tenants, "
              f"seed {args.seed}; NLP cache cold in every row; {os.cpu_count()} cores")
        rows: dict[str, list[Row]] = {}
        for r in range(args.repeat):
            plan = [("dask, 1 worker", "dask", 1), ("dask, 2 workers", "dask", 2)]
            plan = plan if r % 2 == 0 else plan[::-1]
            if not args.no_in_process:
                plan.append(("in-process", "in_process", 1))
            for label, kind, workers in plan:
                row = measure(label.replace(" ", "_").replace(",", ""), work / "inbox", work, kind, workers)
                rows.setdefault(label, []).append(row)
        prints = {row.fingerprint for rs in rows.values() for row in rs}
        if len(prints) != 1:
            raise SystemExit("lakes differ between rows")
        print(f"{'run':<16} {'total s':>8} {'start':>6} {'files':>6} {'lake':>6} {'msg/s (files)':>14} "
              f"{'workers used':>12} {'busy':>5}")
        med: dict[str, float] = {}
        for label, rs in rows.items():
            med[label] = statistics.median(r.seconds for r in rs)
            files = statistics.median(r.files for r in rs)
            busy = [r.busy for r in rs if r.busy is not None]
            print(f"{label:<16} {med[label]:>8.1f} {statistics.median(r.start for r in rs):>6.1f} {files:>6.1f} "
                  f"{statistics.median(r.lake for r in rs):>6.1f} {n / files:>14,.0f} {rs[0].workers_used:>12} "
                  f"{(statistics.median(busy) if busy else float('nan')):>5.2f}")
        files1 = statistics.median(r.files for r in rows["dask, 1 worker"])
        files2 = statistics.median(r.files for r in rows["dask, 2 workers"])
        print(f"lakes byte-identical across rows: yes (sha256 {prints.pop()[:16]}…)")
        print(f"file phase speed-up 2 vs 1 worker: {files1 / files2:.2f}")
        print(f"scale workers=2 speedup={med['dask, 1 worker'] / med['dask, 2 workers']:.2f} files={args.files}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":   # the dask workers are spawned processes: they must not run this again
    sys.exit(main())
