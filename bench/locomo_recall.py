#!/usr/bin/env python3
"""LoCoMo evidence recall: memctl recall() against the turn-level DuckDB FTS baseline, in one run.

Builds a temporary memctl lake from a LoCoMo-layout JSON file (one tenant per
conversation: inbox/<sample_id>/<sample_id>.json), runs the library pipeline
directly (ingest → R2G → merge → tables → indexes; no Dagster), then for every
QA of categories 1–4 ranks the conversation's turns

  memctl    by recall(question, tenant, k=50): turns in order of first citation
  baseline  by DuckDB FTS match_bm25 (defaults) over `speaker: text [+ image: caption]`
            turn documents, one index per conversation (as ../shared/eval/locomo_bm25_baseline.py)

and reports Recall@k = |gold ∩ top-k| / |gold| per category and overall. The last
line is always: `overall R@5 memctl=xx.x baseline=yy.y R@10 memctl=xx.x baseline=yy.y`.

Usage: python bench/locomo_recall.py --data ../shared/eval/locomo_dev.json [--limit-convs N] [--k 5 10]
       [--cv-lambda W ...] [--cv FIELD=[V1,V2] ...] [--set FIELD=VALUE ...] [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo_data import CATEGORY_NAMES, scored_questions, turn_documents  # noqa: E402
from r2g.merge import merge_graph  # noqa: E402
from r2g.nlp_cache import NlpCache  # noqa: E402
from r2g.pipeline import run_partition  # noqa: E402
from r2g.schema import EDGES, NODES  # noqa: E402
from r2g.tokens import has_han, segment_for_fts  # noqa: E402
from raw_store.cas import RawStore  # noqa: E402
from raw_store.ingest import ingest_file  # noqa: E402
from raw_store.lake import Lake  # noqa: E402
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS  # noqa: E402
from raw_store.tables import write_import  # noqa: E402
from recall import RecallConfig, ranked_turns, recall  # noqa: E402
from recall.index import FTS_IGNORE, build_indexes  # noqa: E402
from recall.store import connect  # noqa: E402
from recall.vectors import OFF  # noqa: E402

CATEGORY_ORDER = [4, 1, 2, 3]
RECALL_K = 50


def build_lake(data: list[dict], root: Path, consolidated: bool = False) -> tuple[Lake, dict]:
    """Ingest every sample as its own tenant, run R2G, merge, write the tables, build the indexes."""
    lake = Lake(root)
    store = RawStore(root)
    cache = NlpCache(root / "cache" / "nlp.sqlite")
    parts: dict[str, list[pa.Table]] = defaultdict(list)
    timings = defaultdict(float)
    for sample in data:
        sid = sample["sample_id"]
        path = lake.inbox / sid / f"{sid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sample, ensure_ascii=False), encoding="utf-8")
        t = time.perf_counter()
        result = ingest_file(path, lake.inbox, store)
        timings["ingest"] += time.perf_counter() - t
        t = time.perf_counter()
        graph = run_partition(result.messages, cache)
        timings["r2g"] += time.perf_counter() - t
        parts["messages"].append(result.messages)
        parts["raw_chunks"].append(result.raw_chunks)
        parts["rejects"].append(result.rejects)
        parts["nodes"].append(graph.nodes)
        parts["edges"].append(graph.edges)
    t = time.perf_counter()
    nodes, edges = merge_graph(parts["nodes"], parts["edges"])
    timings["merge"] += time.perf_counter() - t
    if consolidated:  # what `memctl materialize` serves: versions, topics, rollups, tiers, caps
        from jobs.consolidate import ConsolidationConfig, Previous, consolidate, default_as_of
        from r2g.schema import FEEDBACK

        t = time.perf_counter()
        messages = pa.concat_tables(parts["messages"])
        res = consolidate(
            nodes,
            edges,
            feedback=FEEDBACK.empty_table(),
            ops=[],
            previous=Previous(),
            as_of=default_as_of(messages),
            config=ConsolidationConfig.from_env(),
        )
        nodes, edges = res.nodes, res.edges
        timings["consolidate"] = time.perf_counter() - t
    write_import(
        lake,
        {
            "messages": (pa.concat_tables(parts["messages"]), MESSAGES),
            "raw_chunks": (pa.concat_tables(parts["raw_chunks"]), RAW_CHUNKS),
            "rejects": (pa.concat_tables(parts["rejects"]), REJECTS),
            "nodes": (nodes, NODES),
            "edges": (edges, EDGES),
        },
    )
    t = time.perf_counter()
    stats = build_indexes(lake)
    timings["index"] += time.perf_counter() - t
    stats["timings"] = {k: round(v, 2) for k, v in timings.items()}
    return lake, stats


class TurnBaseline:
    """The reference baseline: DuckDB FTS (match_bm25 defaults) over turn documents of one conversation.

    DuckDB's tokenizer drops Han characters, so for a conversation with Chinese turns the
    documents and queries are pre-segmented with jieba (as ../shared/eval/README.md's
    Chinese baseline does) and the index keeps Han; English conversations are indexed
    exactly as the reference script does.
    """

    def __init__(self) -> None:
        self.con = connect(None, read_only=False)
        self.n = 0
        self.chinese = False

    def fit(self, texts: list[str]) -> None:
        self.n += 1
        self.table = f"turns_{self.n}"
        self.n_docs = len(texts)
        self.chinese = any(has_han(t) for t in texts)
        docs = [segment_for_fts(t) for t in texts] if self.chinese else texts
        self.con.execute(f"CREATE TABLE {self.table}(doc INTEGER, body VARCHAR)")
        self.con.executemany(f"INSERT INTO {self.table} VALUES (?, ?)", list(enumerate(docs)))
        options = f", ignore='{FTS_IGNORE}'" if self.chinese else ""
        self.con.execute(f"PRAGMA create_fts_index('{self.table}', 'doc', 'body'{options})")

    def rank(self, query: str) -> list[int]:
        """Document indices best first; unmatched documents after, ties in conversation order."""
        if self.chinese:
            query = segment_for_fts(query)
        rows = self.con.execute(
            f"SELECT doc, fts_main_{self.table}.match_bm25(doc, ?) FROM {self.table}", [query]
        ).fetchall()
        scores = [float("-inf")] * self.n_docs
        for doc, score in rows:
            if score is not None:
                scores[doc] = score
        return sorted(range(self.n_docs), key=lambda i: -scores[i])


def evaluate(
    data: list[dict],
    lake: Lake,
    ks: list[int],
    expand_depth: int,
    vectors: bool | None = None,
    lambda_vector: float | None = None,
    overrides: dict | None = None,
) -> dict:
    """Recall@k per category for memctl (RecallConfig's defaults; `vectors`/`lambda_vector` override stage B)
    and the baseline; "per_qa": (conversation, {R@k: memctl}) per QA, for cross-validation."""
    per_cat: dict[str, dict[int, dict[str, list[float]]]] = {
        "memctl": defaultdict(lambda: defaultdict(list)),
        "baseline": defaultdict(lambda: defaultdict(list)),
    }
    baseline = TurnBaseline()
    cfg = make_config(overrides)
    if vectors is not None:
        cfg = replace(cfg, vectors_enabled=vectors)
    if lambda_vector is not None:
        cfg = replace(cfg, lambda_vector=lambda_vector)
    n_qa, t_recall = 0, 0.0
    per_qa: list[tuple[int, dict[str, float]]] = []
    for conv, sample in enumerate(data):
        ids, texts = turn_documents(sample)
        known = set(ids)
        baseline.fit(texts)
        tenant = sample["sample_id"]
        for qa, cat, evidence in scored_questions(sample, known):
            gold = set(evidence)
            n_qa += 1
            t = time.perf_counter()
            results = recall(qa["question"], tenant, k=RECALL_K, expand_depth=expand_depth, lake=lake, config=cfg)
            t_recall += time.perf_counter() - t
            ours = [msg for conv, msg in ranked_turns(results) if msg in known]
            base = [ids[i] for i in baseline.rank(qa["question"])]
            for name, ranked in (("memctl", ours), ("baseline", base)):
                for k in ks:
                    per_cat[name][cat][f"R@{k}"].append(len(gold & set(ranked[:k])) / len(gold))
            per_qa.append((conv, {"cat": cat, **{f"R@{k}": per_cat["memctl"][cat][f"R@{k}"][-1] for k in ks}}))
    return {"per_cat": per_cat, "n_qa": n_qa, "recall_ms": 1000 * t_recall / max(n_qa, 1), "per_qa": per_qa}


def make_config(overrides: dict | None) -> RecallConfig:
    """RecallConfig with `overrides`; a dotted key sets one entry of a mapping field over its default
    (`edge_type_weight.TEMPORAL_NEXT`: 0.6 keeps the other edge types' weights)."""
    flat: dict = {}
    base = RecallConfig()
    for key, value in (overrides or {}).items():
        name, _, entry = key.partition(".")
        if entry:
            merged = dict(flat.get(name, getattr(base, name)))
            merged[entry] = value
            flat[name] = merged
        else:
            flat[name] = value
    return replace(base, **flat)


def grid(axes: dict[str, list]) -> list[dict]:
    """Every combination of the axes' values (FIELD → values), as override dicts."""
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def cross_validate(
    data: list[dict],
    lake: Lake,
    ks: list[int],
    expand_depth: int,
    weights: list[float] | None,
    overrides: dict | None = None,
    axes: dict[str, list] | None = None,
) -> dict:
    """Leave-one-conversation-out over candidate settings: each conversation is scored with the setting that
    maximised R@5 + R@10 on the other conversations. Candidates: stage B's λ2 (`weights`; 0 = vectors off), or
    every combination of RecallConfig values in `axes` (`--cv FIELD=[V1,V2]`), on top of `overrides`. Prints each
    setting over all conversations, then the CV figures (overall and multi-hop) and each fold's setting."""
    candidates: list[tuple[str, dict]] = []
    if weights:
        candidates = [(f"λ2={w}", {"vectors": w > 0, "lambda_vector": w if w > 0 else None}) for w in weights]
    else:
        candidates = [
            (json.dumps(c, ensure_ascii=False), {"overrides": {**(overrides or {}), **c}}) for c in grid(axes or {})
        ]
    runs = {}
    for label, kw in candidates:
        kw.setdefault("overrides", overrides)
        r = evaluate(data, lake, ks, expand_depth, **kw)
        runs[label] = r["per_qa"]
        print(f"cv {label} (all conversations) {_figures(r['per_qa'])}  recall() {r['recall_ms']:.1f} ms", flush=True)
    labels = [label for label, _ in candidates]
    convs = sorted({c for c, _ in runs[labels[0]]})
    held: list[dict[str, float]] = []
    chosen = []
    for c in convs:

        def train(label: str, c: int = c) -> float:
            return sum(m["R@5"] + m["R@10"] for cc, m in runs[label] if cc != c)

        best = max(labels, key=lambda label: (train(label), -labels.index(label)))  # ties: the earlier candidate
        chosen.append(best)
        held += [m for cc, m in runs[best] if cc == c]
    print(f"cv leave-one-conversation-out: {_figures([(0, m) for m in held])}  per fold {chosen}", flush=True)
    return {"held": held, "chosen": chosen}


def _figures(per_qa: list[tuple[int, dict]]) -> str:
    """R@5 / R@10 overall and for multi-hop (category 1) questions."""
    qs = [m for _, m in per_qa]
    hop = [m for m in qs if m.get("cat") == 1]
    return (
        f"R@5 {_mean([m['R@5'] for m in qs]):.1f} R@10 {_mean([m['R@10'] for m in qs]):.1f}  "
        f"multi-hop R@5 {_mean([m['R@5'] for m in hop]):.1f} R@10 {_mean([m['R@10'] for m in hop]):.1f}"
    )


def _mean(xs: list[float]) -> float:
    return 100.0 * sum(xs) / len(xs) if xs else 0.0


def print_tables(result: dict, ks: list[int]) -> dict[str, dict[str, float]]:
    """Per-category Recall@k for both retrievers; returns the pooled (micro) overall per retriever."""
    overall: dict[str, dict[str, float]] = {}
    cols = [f"R@{k}" for k in ks]
    for name in ("memctl", "baseline"):
        per_cat = result["per_cat"][name]
        print(f"\n== {name}")
        head = f"{'category':<18}{'n':>6}" + "".join(f"{c:>9}" for c in cols)
        print(head)
        print("-" * len(head))
        pooled: dict[str, list[float]] = defaultdict(list)
        for c in CATEGORY_ORDER:
            if c not in per_cat:
                continue
            m = per_cat[c]
            print(
                f"{f'{c} {CATEGORY_NAMES[c]}':<18}{len(m[cols[0]]):>6}" + "".join(f"{_mean(m[x]):>9.1f}" for x in cols)
            )
            for x in cols:
                pooled[x] += m[x]
        print("-" * len(head))
        print(f"{'overall':<18}{len(pooled[cols[0]]):>6}" + "".join(f"{_mean(pooled[x]):>9.1f}" for x in cols))
        overall[name] = {x: _mean(pooled[x]) for x in cols}
    return overall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/eval/locomo_dev.json")
    ap.add_argument("--limit-convs", type=int, default=None)
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--expand-depth", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="build the lake here and keep it (default: a temp dir)")
    ap.add_argument(
        "--consolidated",
        action="store_true",
        help="recall over the consolidated graph (as `memctl materialize` builds it), not R2G's alone",
    )
    ap.add_argument(
        "--vectors",
        metavar="EMBEDDER",
        default="",
        help="stage B with this embedder ('static', 'hashing', module:callable, or 'off'); default: "
        "what `memctl recall` serves ($MEMCTL_VECTORS, else 'static')",
    )
    ap.add_argument(
        "--lambda-vector",
        type=float,
        default=None,
        help="λ2 for stage B on the scale of the other λ (default RecallConfig's)",
    )
    ap.add_argument(
        "--cv-lambda",
        type=float,
        nargs="+",
        default=None,
        metavar="W",
        help="cross-validate λ2 over these weights (0 = vectors off) by conversation, before the default run",
    )
    ap.add_argument(
        "--cv",
        nargs="+",
        default=[],
        metavar="FIELD=[V1,V2]",
        help="cross-validate every combination of these RecallConfig values (JSON lists) by conversation, "
        "before the default run; a dotted FIELD sets one entry of a mapping (edge_type_weight.ABOUT)",
    )
    ap.add_argument("--cv-only", action="store_true", help="stop after the cross-validation (no default run)")
    ap.add_argument("--reuse", action="store_true", help="with --keep: recall over the lake kept there, no rebuild")
    ap.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="FIELD=VALUE",
        help="RecallConfig fields for every run (JSON values), e.g. vector_seed=0 vector_minmax=true",
    )
    args = ap.parse_args(argv)
    overrides = {k: json.loads(v) for k, _, v in (x.partition("=") for x in args.set)}
    if args.vectors:
        os.environ["MEMCTL_VECTORS"] = args.vectors
    ks = sorted(set(args.k) | {5, 10})

    data = json.loads(args.data.read_text(encoding="utf-8"))[: args.limit_convs]
    with tempfile.TemporaryDirectory(prefix="memctl-locomo-") as tmp:
        root = args.keep or Path(tmp)
        t = time.perf_counter()
        if args.reuse and args.keep is not None and (root / "lake").exists():
            lake = Lake(root)
            print(f"lake reused from {root}")
        else:
            lake, stats = build_lake(data, root, consolidated=args.consolidated)
            print(
                f"lake built in {time.perf_counter() - t:.1f}s: {json.dumps(stats['tables'])} "
                f"timings={stats['timings']}"
            )
        if args.cv_lambda or args.cv:
            axes = {k: json.loads(v) for k, _, v in (x.partition("=") for x in args.cv)}
            cross_validate(data, lake, ks, args.expand_depth, args.cv_lambda, overrides, axes)
            if args.cv_only:
                return 0
        result = evaluate(
            data,
            lake,
            ks,
            args.expand_depth,
            vectors=(args.vectors.lower() not in OFF) if args.vectors else None,
            lambda_vector=args.lambda_vector,
            overrides=overrides,
        )
        print(f"qa={result['n_qa']} (categories 1-4)  recall() mean {result['recall_ms']:.1f} ms")
        overall = print_tables(result, ks)
    m, b = overall["memctl"], overall["baseline"]
    print(
        f"overall R@5 memctl={m['R@5']:.1f} baseline={b['R@5']:.1f} "
        f"R@10 memctl={m['R@10']:.1f} baseline={b['R@10']:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
