#!/usr/bin/env python3
"""Scale: `memctl materialize` end to end on N messages, then a 1 % append, then a cold `memctl recall`.

What a user runs, as subprocesses, timed from the outside:

1. **full**   N messages from bench/ingest_corpus.py's generator (`generate_corpus(N, zh_share=0.3)`, ~2,000 messages
              an inbox file, one tenant "bench") are written to a fresh data directory, and `memctl materialize`
              builds everything: per-file assets, lake-wide tables, consolidation, indexes.
2. **incr**   1 % more messages (one new inbox file, another seed, holding one line no other file has) are
              dropped in, and `memctl materialize` runs again.
3. **recall** a new process runs `memctl recall "<a question only that line answers>" --tenant bench --json`:
              its wall time is the cold CLI's, and its results must cite the appended line.
4. **small**  after the disk is measured, a 2-message file (an English and a Chinese turn) is dropped in and
              `memctl materialize` runs again: a daily append's cost, reported with its steps on the line
              `2-message append: … s (… of the full build)` before the last line.
5. **daily**  with no new input, `memctl materialize` runs as of the day after the newest message
              (`MEMCTL_AS_OF`, as the daily schedule moves the date): decay and tier moves over the whole lake, the
              graph steps reused. Reported with its steps on the line `daily run: … s (… of the full build)`.

Per run it reports wall seconds, messages per second, the CPU seconds of the whole process tree (all workers,
via getrusage of the waited-for children) and so the cores it kept busy, the peak RSS of the process tree (the
sum over its live processes, sampled every 0.2 s) and of its largest process, and where the time went: every
Dagster step of the runs the command made (from the lake's Dagster instance), summed per asset step over the
file runs and for the lake run. Then the bytes on disk per message for every artefact of the data directory.

The last line is exactly:
`messages=N full_s=… incr_s=… incr_ratio=… peak_rss_gb=… bytes_per_msg=… recall_cold_s=… busy_cores=…`
(peak_rss_gb: the larger of the two builds' tree peaks; bytes_per_msg: the data directory without the inbox,
after the append; busy_cores: of the full build).

With --one-file the N messages are one inbox file (a ChatGPT export, a QQ chat of years, dropped alone): it runs in
`memctl materialize`'s own process, its NLP on an annotate process per core (r2g.nlp.file_run_workers).

With --rss-limit-gb G a build whose process tree passes G GB is killed, and the steps it ran (the open one marked
"(unfinished)") are reported with the tree's peak RSS during each, before the script exits non-zero.

Usage: python bench/scale.py [--messages 100000] [--seed 7] [--keep DIR] [--executor auto] [--one-file]
       [--rss-limit-gb G]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ingest_corpus import generate_corpus, write_inbox  # noqa: E402
from bench.machine import cpu_busy_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TENANT = "bench"
ZH_SHARE = 0.3
# The appended file's one line no generated turn can produce, and the question only it answers.
NEEDLE = "My new locker combination at the Quarry Street climbing gym is 4-19-27."
QUESTION = "What is my locker combination at the climbing gym?"


@dataclass
class Run:
    label: str
    wall: float
    cpu: float  # CPU seconds of the command's whole process tree
    machine_busy: float | None  # busy cores of the machine over the run (others' work included)
    peak_tree_rss: int  # bytes: the largest sum of RSS over the tree's live processes
    peak_proc_rss: int  # bytes: the largest single process
    stdout: str
    steps: dict[str, float] = field(default_factory=dict)
    samples: list[tuple[float, int]] = field(default_factory=list)  # (time.time(), tree RSS bytes)
    step_peaks: dict[str, int] = field(default_factory=dict)  # step → the tree's peak RSS while it ran

    @property
    def busy_cores(self) -> float:
        return self.cpu / self.wall if self.wall else 0.0


class TreeSampler(threading.Thread):
    """Samples the RSS of a process and all its descendants every `interval` seconds; kills the tree once the sum
    exceeds `limit` bytes (0: no limit), so a run that cannot fit is stopped while the machine still has room."""

    def __init__(self, pid: int, interval: float = 0.2, limit: int = 0) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.limit, self.peak_tree, self.peak_proc = pid, interval, limit, 0, 0
        self.samples: list[tuple[float, int]] = []
        self.killed_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                total += rss
                self.peak_proc = max(self.peak_proc, rss)
            self.peak_tree = max(self.peak_tree, total)
            now = time.time()
            if not self.samples or total != self.samples[-1][1] and now - self.samples[-1][0] >= 1.0:
                self.samples.append((now, total))
            if self.limit and total > self.limit and self.killed_at is None:
                self.samples.append((now, total))
                self.killed_at = now
                for p in reversed(procs):
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
            self.stop.wait(self.interval)


class RunFailed(Exception):
    """A command exited non-zero (or was stopped at the RSS limit); `run` holds what was measured until then."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


def run_command(label: str, args: list[str], env: dict[str, str], rss_limit: int = 0) -> Run:
    """Runs `args` to its end, measuring it; raises RunFailed (with the measurements) if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, t0 = cpu_busy_seconds(), time.perf_counter()
    proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid, limit=rss_limit)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    busy1 = cpu_busy_seconds()
    sampler.stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    machine = None if busy0 is None or busy1 is None else (busy1 - busy0) / wall
    run = Run(label, wall, cpu, machine, sampler.peak_tree, sampler.peak_proc, out, samples=sampler.samples)
    if sampler.killed_at is not None:
        raise RunFailed(f"{label}: stopped after {wall:.0f} s, its process tree past {_gb(rss_limit):.1f} GB", run)
    if proc.returncode != 0:
        raise RunFailed(f"{label}: {' '.join(args[1:])} failed ({proc.returncode}):\n{err[-4000:]}", run)
    return run


def step_seconds(dagster_home: Path, since: float, run: Run | None = None) -> dict[str, float]:
    """Seconds per Dagster step (file-run steps summed over files, prefixed "file:"; lake-run steps "lake:") of
    the runs created after `since` (time.time()). A step still open (the command was stopped) counts until the
    last RSS sample, marked "(unfinished)". With `run`, its `step_peaks` get the tree's peak RSS per step, and
    "command:(outside the runs)" is the part of its wall that no run covers."""
    import dagster as dg

    out: dict[str, float] = defaultdict(float)
    end = run.samples[-1][0] if run is not None and run.samples else time.time()
    spans: list[tuple[float, float]] = []  # each run's (start, end)
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    with dg.DagsterInstance.get() as instance:
        for r in instance.get_runs():
            stats = instance.get_run_stats(r.run_id)
            if (stats.start_time or 0) < since:
                continue
            spans.append((stats.start_time or since, stats.end_time or end))
            kind = "file" if r.tags.get("dagster/partition") else "lake"
            for s in instance.get_run_step_stats(r.run_id):
                if s.start_time is None:
                    continue
                key = f"{kind}:{s.step_key}" + ("" if s.end_time is not None else " (unfinished)")
                stop = s.end_time if s.end_time is not None else end
                out[key] += stop - s.start_time
                if run is not None:
                    peak = max((rss for t, rss in run.samples if s.start_time <= t <= stop), default=0)
                    run.step_peaks[key] = max(run.step_peaks.get(key, 0), peak)
            if stats.start_time and stats.end_time:
                out[f"{kind}:(whole runs)"] += stats.end_time - stats.start_time
    if run is not None:
        # Python's start and imports, the instance, the plan, the process's end: the wall no run covers
        out["command:(outside the runs)"] = max(0.0, run.wall - covered_seconds(spans))
    return dict(out)


def covered_seconds(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of the (start, end) spans (file runs on a cluster overlap)."""
    total, reach = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > reach:
            total += stop - max(start, reach)
            reach = stop
    return total


def disk_usage(root: Path) -> dict[str, int]:
    """Bytes per artefact of a data directory (the inbox excluded: it is the input)."""
    groups = {
        "raw store (zstd blobs)": ["raw"],
        "partitions: messages, raw_chunks, rejects": [
            "lake/parts/*/messages.parquet",
            "lake/parts/*/raw_chunks.parquet",
            "lake/parts/*/rejects.parquet",
            "lake/parts/*/forgotten.parquet",
            "lake/parts/*/feedback.parquet",
            "lake/parts/*/manifest.json",
        ],
        "partitions: annotations": ["lake/parts/*/annotations.parquet"],
        "partitions: graph (nodes, edges)": ["lake/parts/*/nodes.parquet", "lake/parts/*/edges.parquet"],
        "partitions: FTS documents": ["lake/parts/*/docs.parquet", "lake/parts/*/raw_docs.parquet"],
        "merge overlay (lake/r2g)": ["lake/r2g"],
        "consolidation overlay + state": ["lake/consolidated"],
        "consolidation side tables": ["lake/*.parquet"],
        "DuckDB (views, FTS)": ["lake/memory.duckdb"],
        "recall index": ["lake/recall", "lake/graph", "lake/vectors"],
        "NLP cache": ["cache"],
        "Dagster instance": ["dagster_home"],
    }
    out: dict[str, int] = {}
    seen: set[Path] = set()
    for name, patterns in groups.items():
        total = 0
        for pattern in patterns:
            for p in root.glob(pattern):
                files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
                for f in files:
                    if f not in seen:
                        seen.add(f)
                        total += f.stat().st_size
        out[name] = total
    rest = sum(
        f.stat().st_size
        for f in root.rglob("*")
        if f.is_file() and f not in seen and not f.is_relative_to(root / "inbox")
    )
    out["other"] = rest
    return out


def append_file(inbox: Path, n: int, seed: int) -> Path:
    """One new inbox file of `n` generated turns with NEEDLE said halfway through."""
    corpus = generate_corpus(n, seed=seed, zh_share=ZH_SHARE, convs_per_file=10**9)
    ((_, data),) = corpus.files
    lines = data.decode("utf-8").splitlines()
    mid = json.loads(lines[len(lines) // 2])
    needle = {**mid, "msg_id": "needle", "text": NEEDLE}
    lines.insert(len(lines) // 2 + 1, json.dumps(needle, ensure_ascii=False))
    path = inbox / TENANT / "chat_append.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def small_file(inbox: Path, seed: int) -> Path:
    """One new inbox file of two generated turns, an English and a Chinese one, in a conversation of their own: the
    daily append of a user who said two things (the issue's "a 2-message file ≤ 15 s at 100k")."""
    corpus = generate_corpus(600, seed=seed, zh_share=0.5, convs_per_file=10**9)
    ((_, data),) = corpus.files
    turns = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    han = [any("\u4e00" <= ch <= "\u9fff" for ch in t["text"]) for t in turns]
    picked = [turns[han.index(False)], turns[han.index(True)]]
    lines = [
        json.dumps({**t, "conv_id": "small_append", "msg_id": f"s{i}", "ts": picked[0]["ts"]}, ensure_ascii=False)
        for i, t in enumerate(picked)
    ]
    path = inbox / TENANT / "chat_small_append.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def next_day(inbox: Path) -> str:
    """The ISO date of the day after the newest message `ts` in the inbox's JSONL files: the daily run's as-of."""
    newest = max(
        datetime.fromisoformat(json.loads(line)["ts"])
        for f in sorted(inbox.rglob("*.jsonl"))
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    return (newest.date() + timedelta(days=1)).isoformat()


def _gb(n: int) -> float:
    return n / 2**30


def report(run: Run, messages: int) -> None:
    machine = f"; machine {run.machine_busy:.2f}" if run.machine_busy is not None else ""
    rate = f"{messages / run.wall:,.0f} msg/s, " if messages else ""  # none for a run with no new input
    print(
        f"\n== {run.label}: {run.wall:.1f} s wall, {rate}{run.cpu:.1f} CPU-s "
        f"(busy cores {run.busy_cores:.2f}{machine}), peak RSS {_gb(run.peak_tree_rss):.2f} GB "
        f"(largest process {_gb(run.peak_proc_rss):.2f} GB)"
    )
    if run.steps:
        print(f"{'step':<44} {'seconds':>8} {'peak tree RSS GB':>17}")
        for key, sec in sorted(run.steps.items(), key=lambda kv: (kv[0].split(":")[0], -kv[1])):
            peak = run.step_peaks.get(key)
            shown = f"{_gb(peak):>17.2f}" if peak else f"{'':>17}"
            print(f"{key:<44} {sec:>8.1f} {shown}")


def build(label: str, args: list[str], env: dict[str, str], limit: int, data: Path, messages: int) -> Run:
    """run_command of a `memctl materialize`, with its Dagster steps; a failed build is reported, then exits."""
    t = time.time()
    try:
        run = run_command(label, args, env, limit)
    except RunFailed as failed:
        failed.run.steps = step_seconds(data / "dagster_home", t, failed.run)
        report(failed.run, messages)
        raise SystemExit(str(failed)) from None
    run.steps = step_seconds(data / "dagster_home", t, run)
    report(run, messages)
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="build the lake here and keep it (default: a temp dir, removed)")
    ap.add_argument("--executor", default="", help="$MEMCTL_EXECUTOR for the builds (default: memctl's own)")
    ap.add_argument(
        "--one-file",
        action="store_true",
        help="the whole corpus as one inbox file, as a big export dropped alone (default: files of a few conversations)",
    )
    ap.add_argument(
        "--rss-limit-gb",
        type=float,
        default=0.0,
        help="stop a build whose process tree passes this many GB, and report its steps so far (default: none)",
    )
    args = ap.parse_args(argv)
    limit = int(args.rss_limit_gb * 2**30)

    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl-scale-"))
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    memctl = str(Path(sys.executable).with_name("memctl"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMCTL_", "DAGSTER_"))},
        "MEMCTL_DATA": str(data),
        "PYTHONHASHSEED": "0",
    }
    if args.executor:
        env["MEMCTL_EXECUTOR"] = args.executor
    try:
        one_file = {"convs_per_file": 10**9} if args.one_file else {}
        corpus = generate_corpus(args.messages, seed=args.seed, zh_share=ZH_SHARE, **one_file)
        write_inbox(corpus, data / "inbox")
        n_append = max(1, args.messages // 100)
        print(
            f"corpus: {corpus.n_messages:,} messages in {len(corpus.files)} inbox files (seed {args.seed}, "
            f"{ZH_SHARE:.0%} Chinese), append {n_append:,} + 1; {os.cpu_count()} cores"
        )

        full = build("full build", [memctl, "materialize", "--quiet"], env, limit, data, corpus.n_messages)
        append_file(data / "inbox", n_append, args.seed + 1)
        incr = build("1 % append", [memctl, "materialize", "--quiet"], env, limit, data, n_append + 1)

        recall = run_command("cold recall", [memctl, "recall", QUESTION, "--tenant", TENANT, "--json", "--no-log"], env)
        results = json.loads(recall.stdout)
        cited = any(
            c.get("msg_id") == "needle" and NEEDLE in (c.get("excerpt") or "")
            for r in results
            for c in r.get("citations", [])
        )
        print(
            f"\n== cold recall: {recall.wall:.2f} s, peak RSS {_gb(recall.peak_tree_rss):.2f} GB, "
            f"{len(results)} results, cites the appended line: {'yes' if cited else 'NO'}"
        )
        if not cited:
            raise SystemExit("the cold recall did not cite the appended line")

        usage = disk_usage(data)
        total = sum(usage.values())
        n_total = corpus.n_messages + n_append + 1
        inbox_bytes = sum(f.stat().st_size for f in (data / "inbox").rglob("*") if f.is_file())
        print(f"\n== disk after the append ({n_total:,} messages; inbox {inbox_bytes / n_total:,.0f} bytes a message)")
        print(f"{'artefact':<44} {'MB':>9} {'bytes/msg':>10}")
        for name, b in usage.items():
            print(f"{name:<44} {b / 1e6:>9.1f} {b / n_total:>10,.0f}")
        print(f"{'total':<44} {total / 1e6:>9.1f} {total / n_total:>10,.0f}")

        small_file(data / "inbox", args.seed + 2)
        small = build("2-message append", [memctl, "materialize", "--quiet"], env, limit, data, 2)
        print(f"2-message append: {small.wall:.1f} s ({small.wall / full.wall:.3f} of the full build)")

        as_of = next_day(data / "inbox")
        daily_env = {**env, "MEMCTL_AS_OF": as_of}
        daily = build(f"daily run as of {as_of}", [memctl, "materialize", "--quiet"], daily_env, limit, data, 0)
        print(f"daily run: {daily.wall:.1f} s ({daily.wall / full.wall:.3f} of the full build)")

        peak = max(full.peak_tree_rss, incr.peak_tree_rss)
        print(
            f"messages={corpus.n_messages} full_s={full.wall:.1f} incr_s={incr.wall:.1f} "
            f"incr_ratio={incr.wall / full.wall:.3f} peak_rss_gb={_gb(peak):.2f} bytes_per_msg={total / n_total:.0f} "
            f"recall_cold_s={recall.wall:.2f} busy_cores={full.busy_cores:.2f}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
