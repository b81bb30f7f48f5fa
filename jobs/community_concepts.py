"""The Concepts of communities (jobs.communities, steps 6–7 of its module doc): stable community and Concept ids
across runs (a previous community matched by Jaccard keeps its id) and the Concept node row of a community."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime

from r2g.ids import stable_id

PROVENANCE = "jobs.communities.leiden.v1"
CONCEPT_SUBTYPE = "community"


def community_id(tenant: str | None, level: int, members: Iterable[str]) -> str:
    """Fresh id of a community: a hash of tenant, level and its sorted members."""
    return stable_id("c", tenant, str(level), *sorted(members))


def concept_id(tenant: str | None, cid: str) -> str:
    """Id of the Concept node standing for community `cid`."""
    return stable_id("n", tenant, "Concept", CONCEPT_SUBTYPE, cid)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0 for two empty sets)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def match_previous(
    current: list[frozenset[str]], previous: list[tuple[str, frozenset[str]]], threshold: float
) -> dict[int, str]:
    """One-to-one matching current community index → previous id: pairs with Jaccard ≥ threshold taken
    best first (ties: previous id, then current index)."""
    by_member: dict[str, list[int]] = defaultdict(list)
    for k, (_, mem) in enumerate(previous):
        for m in mem:
            by_member[m].append(k)
    cands = []
    for i, mem in enumerate(current):
        for k in sorted({k for m in mem for k in by_member.get(m, ())}):
            j = jaccard(mem, previous[k][1])
            if j >= threshold:
                cands.append((-j, previous[k][0], i))
    taken: dict[int, str] = {}
    used: set[str] = set()
    for _, pid, i in sorted(cands):
        if i not in taken and pid not in used:
            taken[i] = pid
            used.add(pid)
    return taken


# ------------------------------------------------------------------------------------------ rows


def _rank_key(row: dict) -> tuple:
    count = row.get("mentions") or row.get("frequency") or 1
    return (-count, (row.get("title") or "").casefold(), row.get("title") or "", row["id"])


def ranked_members(members: Iterable[str], info: dict[str, dict]) -> list[dict]:
    """Member rows, most mentioned first (mentions, else frequency, else 1), ties by title then id."""
    return sorted((info.get(m) or {"id": m, "title": m} for m in members), key=_rank_key)


def _importance(total_mentions: int) -> float:
    """r2g.partition_graph.concept_importance's curve: in [0.5, 1], growing with the log of the members' mentions."""
    return round(min(1.0, 0.5 + 0.05 * math.log2(1 + max(0, total_mentions))), 6)


def _most_common(values: Iterable[str | None]) -> str | None:
    counts = Counter(v for v in values if v)
    return min(counts, key=lambda v: (-counts[v], v)) if counts else None


def _ts(values: Iterable[datetime | None], pick: Callable[[list[datetime]], datetime]) -> datetime | None:
    vals = [v for v in values if v is not None]
    return pick(vals) if vals else None


def concept_row(
    tenant: str | None,
    nid: str,
    label: str,
    keywords: list[str],
    ranked: list[dict],
    frequency: int,
    confidence: float | None,
    status: str,
) -> dict:
    """A NODES row for the Concept of a community (members given ranked, as rows)."""
    titles = [r.get("title") for r in ranked if r.get("type") == "Entity" and r.get("title")]
    first = _ts((r.get("first_seen") or r.get("time_start") for r in ranked), min)
    last = _ts((r.get("last_seen") or r.get("time_end") or r.get("time_start") for r in ranked), max)
    return {
        "id": nid,
        "tenant": tenant,
        "type": "Concept",
        "subtype": CONCEPT_SUBTYPE,
        "title": label,
        "text": f"Topic: {label} ({len(ranked)} members)",
        "keywords": keywords,
        "entities": list(dict.fromkeys(titles)),
        "lang": _most_common(r.get("lang") for r in ranked),
        "time_start": first,
        "time_end": last,
        "time_granularity": "unspecified",
        "importance": _importance(sum(r.get("mentions") or r.get("frequency") or 1 for r in ranked)),
        "confidence": confidence,
        "frequency": frequency,
        "first_seen": first,
        "last_seen": last,
        "status": status,
        "raw_refs": [],
        "provenance": PROVENANCE,
        "aliases": [],
    }
