"""Random R2G-shaped graphs for the differential (library vs tests/legacy) and group-contract tests.

`random_graph(seed, …)` draws a small lake the way R2G shapes one: per tenant, Entities (people named like the
speakers, objects, places, dates), Episodes in conversations, Facts and Preferences derived from them with role
edges, Tasks, R2G's SUPPORTS / SAME_AS / CONTRADICTS between facts, MENTIONS, ABOUT edges to Concepts, texts that
sometimes hold PII, duplicate-looking values and nulls in every nullable column the steps read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa

from jobs.schema import FEEDBACK
from r2g.ids import edge_id
from r2g.schema import EDGES, NODES

T0 = datetime(2024, 3, 1, 9, 0)
PEOPLE = ["Alice", "Bob", "Caroline", "小明"]
OBJECTS = ["coffee", "tea", "soccer", "guitar", "Paris", "Berlin", "the park", "hiking"]
PREDICATES = [
    "like",
    "love",
    "hate",
    "dislike",
    "play_soccer",
    "live",
    "work",
    "go",
    "be",
    "have",
    "enjoy",
    "stop",
    "start",
    "喜欢",
    "讨厌",
    "want",
    "visit",
    "play",
]
MODALITIES = [None, None, None, "want", "can", "maybe"]
TEXTS = [
    "I love coffee. Really!",
    "我今天不开心，因为昨晚没睡好。",
    "Call me at 138 0013 8000 or a@b.io",
    "See you at 2023-05-08 12:30.",
    "Card 4111 1111 1111 1111; id 11010519491231002X.",
    "Plain words only",
    "",
    None,
    "[EMAIL] was here.",
    "+44 20 7946 0958 is the office",
    "v1.2.3 build 10.0.19045",
    "Mixed 小明 text. Second sentence. Third one? Yes!",
    "tel: (415) 555-2671",
    "done.\nnext line; more",
]


@dataclass
class RandomGraph:
    nodes: pa.Table
    edges: pa.Table
    feedback: pa.Table
    as_of: datetime


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)


def random_graph(
    seed: int, *, tenants: int = 2, episodes: int = 30, feedback: int = 20, time_span_days: int = 40
) -> RandomGraph:
    r = random.Random(seed)
    nodes: list[dict] = []
    edges: list[dict] = []
    edge_ids: set[str] = set()

    def t_at() -> datetime | None:
        if r.random() < 0.05:
            return None
        return T0 + timedelta(hours=r.randint(0, time_span_days * 24), minutes=r.choice([0, 0, 17]))

    def edge(
        tenant: str,
        src: str,
        etype: str,
        dst: str,
        prov: str = "r2g.rule.x.v1",
        w: float | None = None,
        since: datetime | None = None,
    ) -> None:
        eid = edge_id(tenant, src, etype, dst)
        if eid in edge_ids:  # the id is a hash of the edge's key: a lake holds one row per id, as the merge leaves it
            return
        edge_ids.add(eid)
        edges.append(
            {
                "id": eid,
                "tenant": tenant,
                "src": src,
                "dst": dst,
                "type": etype,
                "weight": r.random() if w is None else w,
                "confidence": r.random(),
                "valid_since": since,
                "raw_refs": [],
                "provenance": prov,
            }
        )

    for k in range(tenants):
        tenant = f"t{k}"
        ents = []
        for name in PEOPLE:
            i = f"{tenant}:p:{name}"
            ents.append(i)
            nodes.append(
                {
                    "id": i,
                    "tenant": tenant,
                    "type": "Entity",
                    "subtype": "PERSON",
                    "title": r.choice([name, name.lower(), f" {name} "]),
                    "mentions": r.randint(1, 9),
                    "keywords": [name.lower()],
                    "aliases": [name],
                    "lang": "en",
                    "first_seen": t_at(),
                    "last_seen": t_at(),
                    "status": "active",
                    "importance": r.random(),
                }
            )
        for name in OBJECTS:
            i = f"{tenant}:o:{name}"
            ents.append(i)
            nodes.append(
                {
                    "id": i,
                    "tenant": tenant,
                    "type": "Entity",
                    "subtype": r.choice(["OBJECT", "LOC", None]),
                    "title": name,
                    "mentions": r.choice([None, r.randint(1, 5)]),
                    "keywords": [name],
                    "lang": r.choice(["en", "zh", None]),
                    "first_seen": t_at(),
                    "last_seen": t_at(),
                    "status": "active",
                }
            )
        dates = [f"{tenant}:d:{d}" for d in range(3)]
        for i in dates:
            nodes.append(
                {"id": i, "tenant": tenant, "type": "Entity", "subtype": "TIME", "title": i[-1], "status": "active"}
            )
        concepts = [f"{tenant}:k:{c}" for c in range(3)]
        for i in concepts:
            nodes.append(
                {
                    "id": i,
                    "tenant": tenant,
                    "type": "Concept",
                    "subtype": r.choice(["topic", None]),
                    "title": i,
                    "status": "active",
                    "first_seen": t_at(),
                }
            )
        facts: list[dict] = []
        for e in range(episodes):
            conv = r.choice(["c1", "c2", "c3", None]) if r.random() < 0.95 else None
            ts = t_at()
            speaker = r.choice(PEOPLE + ["Somebody", None])
            ep = {
                "id": f"{tenant}:e{e}",
                "tenant": tenant,
                "type": "Episode",
                "subtype": "turn",
                "title": r.choice(TEXTS),
                "text": r.choice(TEXTS),
                "keywords": r.sample(OBJECTS, r.randint(0, 3)),
                "entities": r.sample(PEOPLE + ["2024-12-20"], r.randint(0, 2)),
                "lang": r.choice(["en", "zh", ""]),
                "time_start": ts,
                "first_seen": ts if r.random() < 0.9 else None,
                "last_seen": ts,
                "importance": r.choice([None, 0.0, 0.3, 0.5, 0.9, r.random()]),
                "confidence": r.random(),
                "frequency": r.choice([None, 0, 1, 2]),
                "conv_id": conv,
                "msg_id": f"m{e}",
                "speaker": speaker,
                "status": r.choice(["active"] * 8 + [None, "archived"]),
                "raw_refs": [{"raw_id": f"raw_{tenant}_{conv}", "offset": 100 * e, "length": 60}],
                "provenance": "r2g.rule.episode.v1",
            }
            nodes.append(ep)
            for who in r.sample(ents + dates, r.randint(0, 3)):
                edge(tenant, ep["id"], "MENTIONS", who)
            if r.random() < 0.3:
                edge(tenant, ep["id"], "ABOUT", r.choice(concepts))
            for f in range(r.choice([0, 1, 1, 2])):
                fid = f"{tenant}:f{e}_{f}"
                off = 100 * e + 10 * f
                fact = {
                    "id": fid,
                    "tenant": tenant,
                    "type": "Fact",
                    "subtype": r.choice(["event", "state"]),
                    "title": r.choice(TEXTS),
                    "text": r.choice(TEXTS),
                    "predicate_norm": r.choice(PREDICATES + [None]),
                    "negation": r.choice([True, False, None]),
                    "modality": r.choice(MODALITIES),
                    "time_start": ts if r.random() < 0.7 else t_at(),
                    "first_seen": ts,
                    "last_seen": ts,
                    "confidence": r.choice([None, 0.5, 0.8, 0.9]),
                    "frequency": r.choice([None, 1, 2, 3]),
                    "importance": r.choice([None, 0.2, 0.7]),
                    "speaker": speaker,
                    "conv_id": conv,
                    "msg_id": f"m{e}",
                    "status": "active",
                    "keywords": r.sample(OBJECTS, 2),
                    "raw_refs": [{"raw_id": f"raw_{tenant}_{conv}", "offset": off, "length": 20}]
                    + ([{"raw_id": f"raw_{tenant}_x", "offset": 5, "length": 5}] if r.random() < 0.2 else []),
                    "provenance": "r2g.rule.fact.en.v1",
                }
                nodes.append(fact)
                facts.append(fact)
                edge(tenant, fid, "DERIVED_FROM", ep["id"] if r.random() < 0.95 else f"raw_{tenant}_{conv}")
                if r.random() < 0.85:
                    edge(tenant, fid, "AGENT", r.choice(ents[: len(PEOPLE)] + [ents[-1]]))
                if r.random() < 0.5:
                    edge(tenant, fid, "PATIENT", r.choice(ents[len(PEOPLE) : len(PEOPLE) + 4]))
                if r.random() < 0.4:
                    edge(tenant, fid, "LOCATION", r.choice(ents[-4:]))
                if r.random() < 0.2:
                    edge(tenant, fid, "TIME", r.choice(dates))
                if r.random() < 0.3:
                    pid = f"{tenant}:pref{e}_{f}"
                    nodes.append(
                        {
                            "id": pid,
                            "tenant": tenant,
                            "type": "Preference",
                            "subtype": r.choice(["like", "dislike"]),
                            "title": "likes",
                            "text": r.choice(TEXTS),
                            "negation": r.choice([True, False, None]),
                            "time_start": fact["time_start"],
                            "first_seen": ts,
                            "last_seen": ts,
                            "confidence": 0.8,
                            "speaker": speaker,
                            "conv_id": conv,
                            "msg_id": f"m{e}",
                            "status": "active",
                            "raw_refs": [
                                {"raw_id": f"raw_{tenant}_{conv}", "offset": off - r.choice([0, 2]), "length": 30}
                            ],
                            "provenance": "r2g.rule.pref.v1",
                        }
                    )
                    edge(tenant, pid, "DERIVED_FROM", ep["id"])
                    if r.random() < 0.5:
                        edge(tenant, pid, "AGENT", r.choice(ents[: len(PEOPLE)]))
                if r.random() < 0.15:
                    tid = f"{tenant}:task{e}_{f}"
                    nodes.append(
                        {
                            "id": tid,
                            "tenant": tenant,
                            "type": "Task",
                            "title": "todo",
                            "text": "do it",
                            "first_seen": ts,
                            "last_seen": ts,
                            "status": r.choice(["open", "active"]),
                            "conv_id": conv,
                            "importance": 0.6,
                        }
                    )
                    edge(tenant, tid, "DERIVED_FROM", fid)
                    edge(tenant, tid, "PATIENT", r.choice(ents))
        for _ in range(len(facts) // 3):
            a, b = r.sample(facts, 2) if len(facts) > 1 else (None, None)
            if a is not None:
                edge(
                    tenant,
                    a["id"],
                    r.choice(["SUPPORTS", "SAME_AS", "CONTRADICTS"]),
                    b["id"],
                    prov=r.choice(["r2g.rule.support.v2", "r2g.rule.same_as.v2"]),
                )
        for _ in range(3):  # a few SIMILAR_TO and a fan-out hub for the degree caps
            a, b = r.sample(ents, 2)
            edge(tenant, a, "SIMILAR_TO", b, w=r.choice([0.5, 0.8, 0.9]))
        hub = ents[0]
        for other in r.sample(ents[1:] + dates, r.randint(0, 8)):
            edge(
                tenant,
                hub,
                r.choice(["SIMILAR_TO", "MENTIONS", "REFERS_TO"]),
                other,
                w=r.choice([0.8, 0.9, 1.0]),
                since=t_at(),
            )

    fb = []
    keys = [(n["tenant"], n["id"]) for n in nodes]
    picked = r.sample(keys, min(len(keys), max(1, feedback // 3)))
    as_of = T0 + timedelta(days=time_span_days + r.choice([0, 3, 10]))
    for i in range(feedback):
        tenant, nid = r.choice(picked)
        fb.append(
            {
                "tenant": tenant,
                "node_id": nid,
                "kind": r.choice(["hit", "hit", "upvote", "downvote", "pin", "unpin", "boost"]),
                "at": as_of - timedelta(hours=r.randint(-12, 24 * 20)),
                "source": "recall",
                "line": i,
            }
        )
    return RandomGraph(_table(nodes, NODES), _table(edges, EDGES), _table(fb, FEEDBACK), as_of)
