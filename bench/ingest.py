#!/usr/bin/env python3
"""Ingest speed: raw spaCy `nlp.pipe` against the full chunk → NLP → R2G → Parquet path, in one run.

Generates a deterministic synthetic chat corpus (bench/ingest_corpus.py; seeded; English and Chinese
conversations of 50–300 turns, several speakers, names, places, relative times,
causes, preferences and plans built from templates × vocabularies, so ~98 % of the
texts are distinct and the text-hash NLP cache cannot inflate the figures), writes
it as canonical JSONL inbox files (~2,000 messages each) in a temp dir, then measures

  (a) raw spaCy  the pipeline objects `r2g.nlp.annotate` uses (`pipeline_for(lang)`),
                 `nlp.pipe` over the same texts, language by language, docs dropped:
                 in 1 process; with W processes both as spaCy's `n_process=W`
                 (docs come back to the parent) and as W processes each piping 1/W
                 of the texts (nothing comes back: the ceiling on W cores).
  (b) pipeline   per inbox file, end to end: read + ingest_bytes (parse, chunk,
                 CAS) → annotate_messages (a fresh, empty NlpCache) → the
                 annotations written to and read back from the partition's
                 Parquet (Dagster's file_annotations → file_graph hand-over) →
                 partition_graph (build_graph + fact links) → Parquet (messages,
                 raw_chunks, nodes, edges): in 1 process; with W processes as
                 "files" (files spread over W processes, as Dagster runs one
                 partition per file) and as "annotate" (1 process, annotate's own
                 pool of W workers, R2G in the parent).

The runs are interleaved: the files are cut into rounds (default 4) and every run
does round 1, then every run round 2, …, so a drift in machine speed hits all of
them alike. Each run starts each round with a cold jieba HMM memo in every process
it uses; models are loaded and worker processes started before the clock starts.
Each row shows the machine's busy cores while it ran (all processes, /proc/stat):
~1.0 for a clean 1-process row, up to 2.0 with 2 processes; more means the machine
was shared and the row is not to be trusted.
Words are whitespace tokens for English and jieba tokens (`jieba.lcut`, spaces and
punctuation left out) for Chinese. The last line is always
`ratio pipeline/raw_spacy=0.xx messages=N`: (b)'s best messages/s over (a)'s best
messages/s, each at its best process count.

Usage: python bench/ingest.py [--messages 100000] [--seed 7] [--zh-share 0.5] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# generate_corpus and write_inbox stay importable from bench.ingest with these signatures: outside checks use them
from bench.ingest_corpus import TENANT, Corpus, corpus_sha256, generate_corpus, write_inbox  # noqa: E402
from bench.machine import cpu_busy_seconds  # noqa: E402
from r2g.nlp import (  # noqa: E402
    english,
    pipeline_for,
    shutdown_workers,
    single_thread_blas,
    worker_pool,
)
from r2g.nlp_cache import NlpCache  # noqa: E402
from r2g.nlp_zh import chinese, clear_hmm_memo, hmm_memo_stats  # noqa: E402
from r2g.pipeline import annotate_messages, annotations_from_table, annotations_table, partition_graph  # noqa: E402
from r2g.schema import ANNOTATIONS, EDGES, NODES  # noqa: E402
from raw_store.cas import RawStore  # noqa: E402
from raw_store.ingest import ingest_bytes  # noqa: E402
from raw_store.lake import read_table, write_table  # noqa: E402
from raw_store.schema import MESSAGES, RAW_CHUNKS  # noqa: E402

__all__ = ["generate_corpus", "write_inbox"]

BATCH_SIZE = 256  # nlp.pipe batch size, annotate's default (64–1000 measured within ±4 %)
STAGES = ("chunk", "nlp", "annotations", "r2g", "parquet")

_PUNCT_OR_SPACE = re.compile(r"^[\W_]+$")


def word_counts(corpus: Corpus) -> dict[str, int]:
    """Whitespace tokens of the English texts; jieba.lcut tokens of the Chinese ones, spaces/punctuation left out."""
    import jieba

    return {
        "en": sum(len(t.split()) for t in corpus.texts["en"]),
        "zh": sum(1 for t in corpus.texts["zh"] for w in jieba.lcut(t) if not _PUNCT_OR_SPACE.match(w)),
    }


# ---------------------------------------------------------------- worker processes


def _warm_worker() -> None:
    """Pool initializer: one BLAS thread, both pipelines loaded and run once, HMM memo emptied."""
    single_thread_blas()
    english()("Warm up.")
    chinese()("热身。")
    clear_hmm_memo()


def _ping(action: str) -> int:
    if action == "warm":
        _warm_worker()
    elif action == "clear":
        clear_hmm_memo()
    time.sleep(0.3)
    return os.getpid()


def _each_worker(pool: ProcessPoolExecutor, workers: int, action: str = "") -> None:
    """Return once every worker of `pool` has started and run _ping(action) ("warm", "clear" or "")."""
    seen: set[int] = set()
    for _ in range(50):
        seen.update(f.result() for f in [pool.submit(_ping, action) for _ in range(workers)])
        if len(seen) >= workers:
            return


def warm_pool(workers: int) -> ProcessPoolExecutor:
    """A spawn pool whose `workers` processes have all loaded both pipelines."""
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_warm_worker)
    _each_worker(pool, workers)
    return pool


# ---------------------------------------------------------------- (a) raw spaCy


def _pipe_count(lang: str, texts: list[str], batch_size: int = BATCH_SIZE) -> int:
    return sum(1 for _ in pipeline_for(lang).pipe(texts, batch_size=batch_size))


def raw_spacy(
    texts: dict[str, list[str]], workers: int, mode: str, pool: ProcessPoolExecutor | None
) -> dict[str, float]:
    """Seconds per language to nlp.pipe `texts`; mode "1" (here), "n_process" (spaCy's) or "split" (over `pool`)."""
    out: dict[str, float] = {}
    for lang in ("en", "zh"):
        ts = texts[lang]
        t0 = time.perf_counter()
        if not ts:
            pass
        elif mode == "1":
            _pipe_count(lang, ts)
        elif mode == "n_process":
            sum(1 for _ in pipeline_for(lang).pipe(ts, batch_size=BATCH_SIZE, n_process=workers))
        else:
            step = -(-len(ts) // workers)
            futures = [pool.submit(_pipe_count, lang, ts[k : k + step]) for k in range(0, len(ts), step)]
            assert sum(f.result() for f in futures) == len(ts)
        out[lang] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------- (b) full pipeline


def run_file(path: str, root: str, annotate_workers: int = 1) -> dict[str, float]:
    """One inbox file through read+chunk → NLP → R2G → Parquet under `root`; seconds per stage, counts."""
    t0 = time.perf_counter()
    data = Path(path).read_bytes()
    ing = ingest_bytes(data, f"{TENANT}/{Path(path).name}", TENANT, RawStore(Path(root)))
    t1 = time.perf_counter()
    annotations, stats = annotate_messages(
        ing.messages, NlpCache(Path(root) / "cache" / "nlp.sqlite"), workers=annotate_workers
    )
    t2 = time.perf_counter()
    # as in Dagster: file_annotations stores them with the partition, file_graph (another step) reads them back
    part = Path(root) / "lake" / "parts" / Path(path).stem
    part.mkdir(parents=True, exist_ok=True)
    write_table(annotations_table(annotations), part / "annotations.parquet", ANNOTATIONS)
    annotations = annotations_from_table(read_table(part / "annotations.parquet", ANNOTATIONS))
    t2a = time.perf_counter()
    nodes, edges = partition_graph(ing.messages, annotations)
    t3 = time.perf_counter()
    write_table(ing.messages, part / "messages.parquet", MESSAGES)
    write_table(ing.raw_chunks, part / "raw_chunks.parquet", RAW_CHUNKS)
    write_table(nodes, part / "nodes.parquet", NODES)
    write_table(edges, part / "edges.parquet", EDGES)
    t4 = time.perf_counter()
    return {
        "chunk": t1 - t0,
        "nlp": t2 - t1,
        "annotations": t2a - t2,
        "r2g": t3 - t2a,
        "parquet": t4 - t3,
        "messages": ing.messages.num_rows,
        "nlp_misses": stats.misses,
        "nodes": nodes.num_rows,
        "edges": edges.num_rows,
    }


def lake_sha256(root: Path) -> str:
    """sha256 over the partition Parquet files (name + bytes): equal runs write equal lakes."""
    h = hashlib.sha256()
    for p in sorted((root / "lake" / "parts").rglob("*.parquet")):
        h.update(str(p.relative_to(root)).encode("utf-8") + b"\0" + p.read_bytes())
    return h.hexdigest()


def pipeline(
    paths: list[Path], workers: int, mode: str, root: Path, pool: ProcessPoolExecutor | None
) -> list[dict[str, float]]:
    """(b) over `paths` into the lake at `root`; mode "1" (here), "files" (over `pool`) or "annotate" (annotate's pool)."""
    if mode == "files":  # largest first: fewer idle workers at the end of a round
        order = sorted(paths, key=lambda p: -p.stat().st_size)
        return list(pool.map(run_file, [str(p) for p in order], [str(root)] * len(order)))
    return [run_file(str(p), str(root), workers if mode == "annotate" else 1) for p in paths]


# ---------------------------------------------------------------- runs


@dataclass
class Run:
    """One measured configuration, accumulated over the rounds."""

    kind: str  # "a" raw spaCy | "b" pipeline
    workers: int
    mode: str  # a: 1 | n_process | split;  b: 1 | files | annotate
    seconds: float = 0.0
    busy: float | None = 0.0
    by_lang: dict[str, float] = field(default_factory=lambda: {"en": 0.0, "zh": 0.0})
    stages: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("messages", "nlp_misses", "nodes", "edges"), 0)
    )
    root: Path | None = None
    memo: list[int] = field(default_factory=lambda: [0, 0])  # HMM memo hits, misses (runs in this process)

    @property
    def label(self) -> str:
        if self.workers == 1:
            return "1 process"
        return {
            "n_process": f"n_process={self.workers}",
            "split": f"{self.workers} processes split",
            "files": f"{self.workers} processes (files)",
            "annotate": f"annotate pool {self.workers}",
        }[self.mode]


def plan(counts: list[int]) -> list[Run]:
    runs = []
    for w in counts:
        runs += [Run("a", w, "1" if w == 1 else "n_process")] + ([Run("a", w, "split")] if w > 1 else [])
        runs += [Run("b", w, "1" if w == 1 else "files")] + ([Run("b", w, "annotate")] if w > 1 else [])
    return runs


def measure(corpus: Corpus, paths: list[Path], runs: list[Run], rounds: int, work: Path) -> None:
    """Every run over every round's files, run after run, round after round (a drift in machine speed hits all alike).

    Each run starts with a cold HMM memo in every process it uses; model loading and
    worker start-up happen before the first round and are not timed.
    """
    pools = {w: warm_pool(w) for w in {r.workers for r in runs if r.mode in ("split", "files")}}
    for r in runs:
        if r.mode == "annotate":
            _each_worker(worker_pool(r.workers), r.workers, "warm")
        if r.kind == "b":
            r.root = work / f"lake_{r.mode}_{r.workers}"
            shutil.rmtree(r.root, ignore_errors=True)
            r.root.mkdir(parents=True)
    size = -(-len(paths) // rounds)
    try:
        for k in range(0, len(paths), size):
            idx = list(range(k, min(k + size, len(paths))))
            texts = corpus.texts_of(idx)
            for r in runs:
                pool = pools.get(r.workers)
                clear_hmm_memo()
                if r.mode in ("split", "files"):
                    _each_worker(pool, r.workers, "clear")
                elif r.mode == "annotate":
                    _each_worker(worker_pool(r.workers), r.workers, "clear")
                b0, t0 = cpu_busy_seconds(), time.perf_counter()
                if r.kind == "a":
                    for lang, sec in raw_spacy(texts, r.workers, r.mode, pool).items():
                        r.by_lang[lang] += sec
                else:
                    for row in pipeline([paths[i] for i in idx], r.workers, r.mode, r.root, pool):
                        for key in STAGES:
                            r.stages[key] += row[key]
                        for key in r.counts:
                            r.counts[key] += int(row[key])
                t1, b1 = time.perf_counter(), cpu_busy_seconds()
                if r.workers == 1:
                    hits, misses = hmm_memo_stats()
                    r.memo[0] += hits
                    r.memo[1] += misses
                r.seconds += t1 - t0
                r.busy = None if r.busy is None or b0 is None or b1 is None else r.busy + (b1 - b0)
    finally:
        for pool in pools.values():
            pool.shutdown()
        shutdown_workers()


# ---------------------------------------------------------------- report


def _rate(n: float, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "inf"


def _busy(r: Run) -> str:
    return "n/a" if r.busy is None else f"{r.busy / r.seconds:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000, help="corpus size (default 100000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--zh-share", type=float, default=0.5, help="share of Chinese conversations (default 0.5)")
    ap.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1, 2],
        help="process counts to measure (default: 1 2); 1 is always measured",
    )
    ap.add_argument("--rounds", type=int, default=4, help="interleaving rounds (default 4)")
    ap.add_argument("--keep", type=Path, help="write the corpus and lakes here and keep them (default: a temp dir)")
    args = ap.parse_args(argv)
    counts = sorted({1, *(w for w in args.workers if w >= 1)})

    t0 = time.perf_counter()
    corpus = generate_corpus(args.messages, args.seed, args.zh_share)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memctl_bench_ingest_"))
    paths = write_inbox(corpus, work / "inbox")
    words = word_counts(corpus)
    texts = corpus.texts
    n, w_all = corpus.n_messages, words["en"] + words["zh"]
    distinct = len(set(texts["en"]) | set(texts["zh"]))
    print(
        f"corpus: {n} messages ({len(texts['en'])} en, {len(texts['zh'])} zh) in {len(paths)} files, "
        f"{distinct / n:.1%} distinct texts, {sum(len(d) for _, d in corpus.files):,} bytes, seed {args.seed}, "
        f"generated in {time.perf_counter() - t0:.1f} s"
    )
    print(f"corpus sha256={corpus_sha256(corpus)}")
    print(f"words: {w_all:,} ({words['en']:,} en whitespace tokens, {words['zh']:,} zh jieba tokens)")
    english()("Warm up.")
    chinese()("热身。")

    runs = plan(counts)
    rounds = max(1, min(args.rounds, len(paths)))
    t0 = time.perf_counter()
    measure(corpus, paths, runs, rounds, work)
    hits, misses = runs[0].memo
    print(
        f"measured in {time.perf_counter() - t0:.0f} s: {len(runs)} runs interleaved over {rounds} rounds of files; "
        f"jieba HMM memo {hits / max(1, hits + misses):.1%} hits in the 1-process raw run"
    )

    print(f"\n== (a) raw spaCy: nlp.pipe over the same texts, same pipeline objects, batch_size {BATCH_SIZE}")
    raw = [r for r in runs if r.kind == "a"]
    for r in raw:
        print(
            f"  {r.label:<22} {r.seconds:8.1f} s  {_rate(n, r.seconds):>7} msg/s  {_rate(w_all, r.seconds):>8} words/s"
            f"   (en {_rate(len(texts['en']), r.by_lang['en'])} msg/s, zh {_rate(len(texts['zh']), r.by_lang['zh'])} "
            f"msg/s; busy cores {_busy(r)})"
        )

    print("\n== (b) pipeline: read+chunk → NLP (fresh cache) → annotations Parquet → R2G → Parquet, end to end")
    pipe = [r for r in runs if r.kind == "b"]
    for r in pipe:
        st = "  ".join(f"{k} {r.stages[k]:.1f}" for k in STAGES)
        print(
            f"  {r.label:<22} {r.seconds:8.1f} s  {_rate(n, r.seconds):>7} msg/s  {_rate(w_all, r.seconds):>8} words/s"
            f"   stages s: {st}"
        )
        print(
            f"  {'':<22} {r.counts['nlp_misses']} texts annotated, {r.counts['nodes']:,} nodes, "
            f"{r.counts['edges']:,} edges; busy cores {_busy(r)}"
        )
    shas = {lake_sha256(r.root) for r in pipe}
    print(f"  lakes identical across runs: {'yes' if len(shas) == 1 else 'NO'} ({sorted(shas)[0][:16]})")

    one_a, one_b = raw[0], pipe[0]
    s1 = one_b.stages
    print(
        f"\n1 process: pipeline/raw = {one_a.seconds / one_b.seconds:.2f}; on top of raw spaCy: NLP wrapper "
        f"{s1['nlp'] - one_a.seconds:+.1f} s, annotations Parquet round trip {s1['annotations']:.1f} s, "
        f"R2G {s1['r2g']:.1f} s, chunk {s1['chunk']:.1f} s, parquet {s1['parquet']:.1f} s"
    )
    for w in counts[1:]:
        a_w = min((r for r in raw if r.workers == w), key=lambda r: r.seconds)
        b_w = min((r for r in pipe if r.workers == w), key=lambda r: r.seconds)
        print(f"{w} processes: pipeline/raw = {a_w.seconds / b_w.seconds:.2f} ({b_w.label} / {a_w.label})")
    best_a, best_b = min(raw, key=lambda r: r.seconds), min(pipe, key=lambda r: r.seconds)
    print(
        f"best: pipeline {best_b.label} {_rate(n, best_b.seconds)} msg/s, "
        f"raw spaCy {best_a.label} {_rate(n, best_a.seconds)} msg/s"
    )
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    print(f"ratio pipeline/raw_spacy={best_a.seconds / best_b.seconds:.2f} messages={n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
