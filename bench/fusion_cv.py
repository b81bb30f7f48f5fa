#!/usr/bin/env python3
"""Learned fusion, cross-validated by conversation: can a model fitted on recall()'s own signals rank its results
better than RecallConfig's fixed formula?

For every dev question (categories 1–4, as bench/locomo_recall.py) it takes recall()'s top 50 with the default
configuration over a lake `bench/locomo_recall.py --keep DIR` built, describes each result by 18 features (the
final score, each breakdown term, MMR's cut and similarity, the rank, the number of citations, the share of the
question's keywords in the cited lines, whether a cited line's speaker is named in the question, whether BM25
matched it, its node type), labels it 1 when it cites an evidence turn, and for each conversation in turn fits a
model on the other conversations' results (logistic regression on standardised features, or gradient-boosted
trees) and re-ranks the held-out conversation's results by the model's probability. Turn-level R@5 / R@10 (turns in
order of first citation) of the re-ranking against the default ranking, overall and per category, plus the share
of evidence turns cited anywhere in the 50 results (the ceiling of any re-ranking).

Usage: python bench/fusion_cv.py --data ../shared/eval/locomo_dev.json --lake DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo_data import CATEGORY_NAMES, scored_questions, turn_documents  # noqa: E402
from bench.locomo_recall import RECALL_K  # noqa: E402
from r2g.tokens import search_tokens  # noqa: E402
from raw_store.lake import Lake  # noqa: E402
from recall import RecallResult, recall  # noqa: E402
from recall.query import query_keywords  # noqa: E402
from recall.scoring import names_speaker  # noqa: E402

TYPES = ("Episode", "Fact", "Entity", "Preference", "Concept", "Task", "RawChunk")
Item = tuple[list[float], list[str], int]  # features, cited turns in order, label


def features(question: str, keywords: list[str], rank: int, r: RecallResult) -> list[float]:
    b = r.breakdown
    cited = set(search_tokens(" ".join(c.excerpt for c in r.citations).lower()))
    q = question.lower()
    return [
        r.score,
        b.get("bm25", 0.0),
        b.get("graph", 0.0),
        b.get("weight", 0.0),
        b.get("recency", 0.0),
        b.get("mmr", 0.0),
        b.get("mmr_similarity", 0.0),
        1.0 / (1 + rank),
        float(len(r.citations)),
        sum(1 for k in keywords if k in cited) / max(1, len(keywords)),
        float(any(c.speaker and names_speaker(q, c.speaker.lower()) for c in r.citations)),
        float(b.get("bm25", 0.0) > 0),
        *(float(r.type == t) for t in TYPES),
    ]


def collect(data: list[dict], lake: Lake) -> list[tuple[int, int, set[str], list[Item]]]:
    """(conversation, category, evidence turns, items of the top RECALL_K) per question."""
    rows = []
    for conv, sample in enumerate(data):
        ids, _ = turn_documents(sample)
        known = set(ids)
        for qa, cat, evidence in scored_questions(sample, known):
            gold = set(evidence)
            results = recall(qa["question"], sample["sample_id"], k=RECALL_K, lake=lake)
            keywords = [k.lower() for k in query_keywords(qa["question"])]
            items: list[Item] = []
            for i, r in enumerate(results):
                turns = [c.msg_id for c in r.citations if c.msg_id in known]
                items.append((features(qa["question"], keywords, i, r), turns, int(bool(set(turns) & gold))))
            rows.append((conv, cat, gold, items))
    return rows


def recall_at(items: list[Item], gold: set[str], k: int) -> float:
    turns: dict[str, None] = {}
    for _, cited, _ in items:
        turns.update(dict.fromkeys(cited))
    return len(gold & set(list(turns)[:k])) / len(gold)


def cross_validate(rows: list[tuple[int, int, set[str], list[Item]]], model: str) -> dict[str, dict[int, list[float]]]:
    """R@5 / R@10 per question, default ranking and re-ranked, each conversation's model fitted on the others."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for held in sorted({c for c, *_ in rows}):
        train = [(f, y) for c, _, _, items in rows if c != held for f, _, y in items]
        x, y = np.array([f for f, _ in train]), np.array([y for _, y in train])
        scaler = StandardScaler().fit(x)
        fitted = (
            LogisticRegression(max_iter=2000).fit(scaler.transform(x), y)
            if model == "logistic"
            else HistGradientBoostingClassifier(
                max_iter=200, learning_rate=0.05, max_leaf_nodes=15, random_state=0
            ).fit(scaler.transform(x), y)
        )
        for c, cat, gold, items in rows:
            if c != held:
                continue
            order = items
            if items:
                p = fitted.predict_proba(scaler.transform(np.array([f for f, _, _ in items])))[:, 1]
                order = [items[i] for i in sorted(range(len(items)), key=lambda i: (-p[i], i))]
            for key in ("all", f"cat {cat}"):
                for k in (5, 10):
                    out[f"default {key}"][k].append(recall_at(items, gold, k))
                    out[f"{model} {key}"][k].append(recall_at(order, gold, k))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--lake", type=Path, required=True, help="the folder `bench/locomo_recall.py --keep` built")
    args = ap.parse_args(argv)
    data = json.loads(args.data.read_text("utf-8"))
    rows = collect(data, Lake(args.lake))
    ceiling = [recall_at(items, gold, 10**6) for *_, gold, items in rows]
    print(f"{len(rows)} questions; evidence cited anywhere in the top {RECALL_K}: {100 * np.mean(ceiling):.1f} %")
    for model in ("logistic", "boosted"):
        res = cross_validate(rows, model)
        for key in ["all", *(f"cat {c}" for c in sorted(CATEGORY_NAMES))]:
            if f"default {key}" in res:
                d, m = res[f"default {key}"], res[f"{model} {key}"]
                print(
                    f"{model:<9} {key:<6} n={len(d[5]):>4}  default R@5 {100 * np.mean(d[5]):5.1f} "
                    f"R@10 {100 * np.mean(d[10]):5.1f}  re-ranked R@5 {100 * np.mean(m[5]):5.1f} R@10 {100 * np.mean(m[10]):5.1f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
