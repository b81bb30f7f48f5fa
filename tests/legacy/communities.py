# Frozen reference: jobs/communities.py as of commit 9d258c2, before vectorisation. The golden harness
# (bench/consolidation_golden.py) and the differential tests compare the library against it; not library code.
"""Communities → Concepts (SPEC §8; seed 004 §4 step 6, §6.3, §23): Leiden over an entity co-occurrence graph.

Seed 004 §23: "without vectors, build a co-occurrence graph from keywords and entities and
run community detection"; §4 step 6 and §6.3: "community detection/clustering → create or
update Concept nodes". Per tenant, pure, deterministic:

1. **Contexts.** An Episode is a context. A Fact / Preference / Task belongs to the
   Episode(s) it is DERIVED_FROM (followed through at most `_DERIVE_DEPTH` hops, e.g.
   Task → Fact → Episode); one that reaches no Episode is its own context.
2. **Items.** A context holds every member-type node (`CommunityConfig.member_types`,
   default Entities) that its Episode or one of its Facts/Preferences/Tasks points to by
   MENTIONS, a role edge (AGENT, PATIENT, LOCATION, …) or ABOUT, plus those carriers
   themselves when their type is a member type. Entities of a skipped subtype (TIME: dates
   co-occur by session, not by topic) and Concepts this job made are never items. Archived
   nodes still count: they stay citable, and what they co-occurred with is still evidence.
3. **Graph.** Two items of one context are linked; the weight is the number of contexts
   they share (a count, not PMI: modularity's null model k_i·k_j/2m already discounts pairs
   of frequent nodes, and PMI on counts of 1–2 is noise).
4. **Hubs.** A vertex whose number of distinct neighbours exceeds
   max(hub_min_degree, hub_share·(V−1)) is a hub (a speaker present in every turn) and is
   left out of the graph, so it cannot glue every topic into one community. It stays a
   node of the graph tables, untouched; `CommunityResult.hubs` lists it.
5. **Leiden** (igraph, modularity, weights = counts) on the hub-free graph, vertices in
   id order and edges sorted, igraph's RNG seeded with `random.Random(seed)` afresh for
   every tenant and set back to igraph's default (the `random` module) afterwards.
   Communities smaller than `min_size` are no Concepts and are not written.
6. **Stable ids.** A community overlapping a previous-run community of its tenant with
   Jaccard ≥ `keep_jaccard` (best pair first, one-to-one) keeps that community's id and
   Concept id; any other gets stable_id("c", tenant, level, *sorted members). A previous
   community no current one takes over is retired: its Concept comes back with status
   "archived" (never lost; still citable).
7. **Output.** The COMMUNITIES table (jobs.schema), one Concept node per community
   (type Concept, subtype "community", title = label) and one ABOUT edge member → Concept.

Only level 0 (the Leiden partition itself) is built; COMMUNITIES.level leaves room for
coarser levels.
"""

from __future__ import annotations

import itertools
import math
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import igraph
import pyarrow as pa

from jobs.schema import COMMUNITIES
from r2g.ids import edge_id, stable_id
from r2g.schema import EDGES, NODES, ROLE_EDGES
from raw_store.lake import conform

PROVENANCE = "jobs.communities.leiden.v1"
CONCEPT_SUBTYPE = "community"
LEVEL = 0
E_COMMUNITY_CONFIG = "E_COMMUNITY_CONFIG"  # a CommunityConfig value outside its documented range

MEMBER_TYPES = ("Entity", "Fact", "Preference", "Task", "Concept")
_CARRIER_TYPES = ("Fact", "Preference", "Task")  # attach to the Episode they derive from
_LINK_EDGES = frozenset({"MENTIONS", "ABOUT"}) | ROLE_EDGES  # context → item
_DERIVE_DEPTH = 3  # Task → Fact → Episode is the longest R2G chain
_RNG_LOCK = threading.Lock()  # igraph's RNG is process-global


@dataclass(frozen=True)
class CommunityConfig:
    """Knobs of the community job; defaults and where each number comes from."""

    # What a community is made of. Entities: seed 004 §23 "entity co-occurrence"; §22.2 L2 takes
    # Concept/Entity/Task as its super-nodes. Facts etc. may be added (they then join their Episode's context).
    member_types: tuple[str, ...] = ("Entity",)
    # Entity subtypes that are never items: dates co-occur by session, and a topic named "2023-05-08" says nothing.
    skip_subtypes: tuple[str, ...] = ("TIME",)
    # Hub cap: more distinct neighbours than hub_share·(V−1) (and than hub_min_degree) → left out.
    # Measured on LoCoMo dev (conv-26, conv-41): the two speakers reach 0.79–0.91 of all vertices, the next
    # entity 0.27; 0.5 sits in that gap. hub_min_degree keeps tiny tenants from losing every vertex.
    hub_share: float = 0.5
    hub_min_degree: int = 8
    # Fewer members than this: no Concept (a pair is an edge, not a topic; seed 004 §6.2 counts a topic as
    # repeated from 3 occurrences, and a Concept is a "hub" node, §2).
    min_size: int = 3
    # Leiden (igraph): modularity at the standard resolution 1.0; igraph's default beta 0.01;
    # n_iterations −1 = iterate until an iteration no longer improves the partition.
    resolution: float = 1.0
    beta: float = 0.01
    n_iterations: int = -1
    seed: int = 0
    # Stable ids: Jaccard ≥ 0.5 with a previous community keeps its id (the brief's threshold: more than
    # half of the union is shared, so at most one previous community can qualify from each side).
    keep_jaccard: float = 0.5
    # Label: the top 3 member titles; keywords: up to 10 terms (titles first, then the members' keywords).
    label_terms: int = 3
    keyword_count: int = 10

    def __post_init__(self) -> None:
        bad = [t for t in self.member_types if t not in MEMBER_TYPES]
        if bad or not self.member_types:
            raise ValueError(
                f"{E_COMMUNITY_CONFIG}: member_types must be a non-empty subset of {MEMBER_TYPES}, "
                f"got {self.member_types}"
            )
        if not 0.0 < self.hub_share <= 1.0 or not 0.0 < self.keep_jaccard <= 1.0:
            raise ValueError(f"{E_COMMUNITY_CONFIG}: hub_share and keep_jaccard must lie in (0, 1]")
        if self.min_size < 2 or self.label_terms < 1 or self.keyword_count < 1 or self.resolution <= 0:
            raise ValueError(f"{E_COMMUNITY_CONFIG}: min_size ≥ 2, label_terms ≥ 1, keyword_count ≥ 1, resolution > 0")


@dataclass
class CommunityResult:
    """communities: COMMUNITIES rows (level 0, size ≥ min_size), sorted by tenant, level, id.
    nodes: NODES rows — one active Concept per community, plus an archived one per retired previous
    community — sorted by id. edges: EDGES rows, ABOUT member → Concept, sorted by id.
    hubs: per tenant, the node ids left out of the graph as hubs (sorted)."""

    communities: pa.Table
    nodes: pa.Table
    edges: pa.Table
    hubs: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class CooccurrenceGraph:
    """One tenant's co-occurrence graph: vertex ids (sorted), weighted pairs (i < j, counts), the contexts
    each vertex appears in, and the hubs left out."""

    tenant: str
    vertices: list[str]
    weights: dict[tuple[int, int], int]
    contexts: dict[str, frozenset[str]]
    hubs: tuple[str, ...]

    def strength(self) -> list[float]:
        """Sum of each vertex's edge weights."""
        s = [0.0] * len(self.vertices)
        for (i, j), w in self.weights.items():
            s[i] += w
            s[j] += w
        return s


# ------------------------------------------------------------------------------------------ graph


def _is_own_concept(row: dict) -> bool:
    return row["type"] == "Concept" and row.get("subtype") == CONCEPT_SUBTYPE


def cooccurrence_graph(
    tenant: str, nodes: list[dict], edges: list[dict], config: CommunityConfig = CommunityConfig()
) -> CooccurrenceGraph:
    """Build one tenant's co-occurrence graph from its node rows (id, type, subtype, …) and edge rows
    (src, dst, type); rows of other tenants must already be filtered out."""
    kind = {r["id"]: r for r in nodes if not _is_own_concept(r)}
    members = {
        i
        for i, r in kind.items()
        if r["type"] in config.member_types and not (r["type"] == "Entity" and r.get("subtype") in config.skip_subtypes)
    }

    derived: dict[str, set[str]] = defaultdict(set)
    links: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        src, dst, etype = e["src"], e["dst"], e["type"]
        if src not in kind or dst not in kind or src == dst:
            continue
        if etype == "DERIVED_FROM":
            derived[src].add(dst)
        elif etype in _LINK_EDGES and dst in members:
            links[src].add(dst)

    def contexts_of(nid: str) -> list[str]:
        if kind[nid]["type"] == "Episode":
            return [nid]
        found, seen, frontier = set(), {nid}, [nid]
        for _ in range(_DERIVE_DEPTH):
            nxt = []
            for x in frontier:
                for d in derived.get(x, ()):
                    if d in seen:
                        continue
                    seen.add(d)
                    (found.add(d) if kind[d]["type"] == "Episode" else nxt.append(d))
            frontier = nxt
        return sorted(found) or [nid]

    items: dict[str, set[str]] = defaultdict(set)
    carriers = set(links) | {i for i in members if kind[i]["type"] in _CARRIER_TYPES}
    for nid in carriers:
        ctxs = contexts_of(nid)
        attached = links.get(nid, set()) | ({nid} if nid in members else set())
        for c in ctxs:
            items[c] |= attached

    pairs: Counter[tuple[str, str]] = Counter()
    seen_in: dict[str, set[str]] = defaultdict(set)
    for c, its in items.items():
        for x in its:
            seen_in[x].add(c)
        for a, b in itertools.combinations(sorted(its), 2):
            pairs[a, b] += 1

    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    cap = max(config.hub_min_degree, config.hub_share * (len(neighbours) - 1))
    hubs = tuple(sorted(v for v, nb in neighbours.items() if len(nb) > cap))
    hub_set = set(hubs)
    kept = {p: w for p, w in pairs.items() if p[0] not in hub_set and p[1] not in hub_set}
    vertices = sorted({v for p in kept for v in p})
    index = {v: i for i, v in enumerate(vertices)}
    weights = dict(sorted(((index[a], index[b]), w) for (a, b), w in kept.items()))
    return CooccurrenceGraph(tenant, vertices, weights, {v: frozenset(seen_in[v]) for v in vertices}, hubs)


def leiden(graph: CooccurrenceGraph, config: CommunityConfig = CommunityConfig()) -> tuple[list[int], float]:
    """Leiden (modularity) membership of each vertex, renumbered by each community's first vertex, and the
    partition's modularity. Deterministic: igraph's RNG is a fresh random.Random(config.seed) for the call."""
    if not graph.vertices:
        return [], 0.0
    g = igraph.Graph(n=len(graph.vertices), edges=list(graph.weights), directed=False)
    g.es["weight"] = [float(w) for w in graph.weights.values()]
    with _RNG_LOCK:
        igraph.set_random_number_generator(random.Random(config.seed))
        try:
            part = g.community_leiden(
                objective_function="modularity",
                weights="weight",
                resolution=config.resolution,
                beta=config.beta,
                n_iterations=config.n_iterations,
            )
        finally:
            igraph.set_random_number_generator(random)  # igraph's default generator
    renumber: dict[int, int] = {}
    membership = [renumber.setdefault(m, len(renumber)) for m in part.membership]
    return membership, float(g.modularity(membership, weights="weight", resolution=config.resolution))


# ------------------------------------------------------------------------------------------ ids


def community_id(tenant: str, level: int, members: Iterable[str]) -> str:
    """Fresh id of a community: a hash of tenant, level and its sorted members."""
    return stable_id("c", tenant, str(level), *sorted(members))


def concept_id(tenant: str, cid: str) -> str:
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


# ------------------------------------------------------------------------------------------ labels and rows


def _rank_key(row: dict) -> tuple:
    count = row.get("mentions") or row.get("frequency") or 1
    return (-count, (row.get("title") or "").casefold(), row.get("title") or "", row["id"])


def ranked_members(members: Iterable[str], info: dict[str, dict]) -> list[dict]:
    """Member rows, most mentioned first (mentions, else frequency, else 1), ties by title then id."""
    return sorted((info.get(m) or {"id": m, "title": m} for m in members), key=_rank_key)


def label_of(ranked: list[dict], config: CommunityConfig = CommunityConfig()) -> tuple[str, list[str]]:
    """The label (top `label_terms` distinct titles, joined by ", ") and keywords of a ranked community."""
    titles: list[str] = []
    seen: set[str] = set()
    for r in ranked:
        t = (r.get("title") or r["id"]).strip()
        if t and t.casefold() not in seen:
            seen.add(t.casefold())
            titles.append(t)
    keywords = list(
        dict.fromkeys(
            [t.casefold() for t in titles] + [k.casefold() for r in ranked for k in (r.get("keywords") or []) if k]
        )
    )
    return ", ".join(titles[: config.label_terms]), keywords[: config.keyword_count]


def _importance(total_mentions: int) -> float:
    """r2g.extract.concept_importance's curve: in [0.5, 1], growing with the log of the members' mentions."""
    return round(min(1.0, 0.5 + 0.05 * math.log2(1 + max(0, total_mentions))), 6)


def _most_common(values: Iterable[str | None]) -> str | None:
    counts = Counter(v for v in values if v)
    return min(counts, key=lambda v: (-counts[v], v)) if counts else None


def _ts(values: Iterable[datetime | None], pick: Callable[[list[datetime]], datetime]) -> datetime | None:
    vals = [v for v in values if v is not None]
    return pick(vals) if vals else None


def concept_row(
    tenant: str,
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


# ------------------------------------------------------------------------------------------ the job


_NODE_COLS = (
    "id",
    "tenant",
    "type",
    "subtype",
    "title",
    "keywords",
    "lang",
    "mentions",
    "frequency",
    "first_seen",
    "last_seen",
    "time_start",
    "time_end",
)


def detect_communities(
    nodes: pa.Table, edges: pa.Table, previous: pa.Table | None = None, config: CommunityConfig = CommunityConfig()
) -> CommunityResult:
    """Communities of every tenant in `nodes`/`edges` (NODES/EDGES schemas, tenants mixed), their Concept
    nodes and ABOUT edges; `previous` is the last run's COMMUNITIES table (ids are carried over from it)."""
    nodes = conform(nodes, NODES)
    edges = conform(edges, EDGES)
    node_rows: dict[str, list[dict]] = defaultdict(list)
    for r in nodes.select(list(_NODE_COLS)).to_pylist():
        node_rows[r["tenant"]].append(r)
    edge_rows: dict[str, list[dict]] = defaultdict(list)
    for r in edges.select(["tenant", "src", "dst", "type"]).to_pylist():
        edge_rows[r["tenant"]].append(r)
    prev_rows: dict[str, list[dict]] = defaultdict(list)
    if previous is not None:
        for r in conform(previous, COMMUNITIES).to_pylist():
            if r["level"] == LEVEL:
                prev_rows[r["tenant"]].append(r)

    communities, concepts, abouts, hubs = [], [], [], {}
    for tenant in sorted(set(node_rows) | set(prev_rows), key=lambda t: (t is None, t or "")):
        c, n, e, h = _tenant(
            tenant, node_rows.get(tenant, []), edge_rows.get(tenant, []), prev_rows.get(tenant, []), config
        )
        communities += c
        concepts += n
        abouts += e
        if h:
            hubs[tenant] = h
    communities.sort(key=lambda r: (r["tenant"], r["level"], r["id"]))
    concepts.sort(key=lambda r: r["id"])
    abouts.sort(key=lambda r: r["id"])
    return CommunityResult(
        communities=pa.Table.from_pylist(communities, schema=COMMUNITIES),
        nodes=pa.Table.from_pylist(concepts, schema=NODES),
        edges=pa.Table.from_pylist(abouts, schema=EDGES),
        hubs=hubs,
    )


def _tenant(
    tenant: str, nodes: list[dict], edges: list[dict], previous: list[dict], config: CommunityConfig
) -> tuple[list[dict], list[dict], list[dict], tuple[str, ...]]:
    info = {r["id"]: r for r in nodes}
    graph = cooccurrence_graph(tenant, nodes, edges, config)
    membership, modularity = leiden(graph, config)
    groups: dict[int, list[int]] = defaultdict(list)
    for v, m in enumerate(membership):
        groups[m].append(v)
    kept = [g for _, g in sorted(groups.items()) if len(g) >= config.min_size]
    current = [frozenset(graph.vertices[v] for v in g) for g in kept]

    prev = sorted(((r["id"], frozenset(r["members"] or ())) for r in previous), key=lambda p: p[0])
    prev_by_id = {r["id"]: r for r in previous}
    matched = match_previous(current, prev, config.keep_jaccard)
    used_ids = set(prev_by_id)

    strength = graph.strength()
    weights_of: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (i, j), w in graph.weights.items():
        weights_of[i].append((j, w))
        weights_of[j].append((i, w))

    communities, concepts, abouts = [], [], []
    for k in sorted(range(len(current)), key=lambda k: sorted(current[k])):
        mem, verts = current[k], set(kept[k])
        if k in matched:
            cid = matched[k]
            nid = prev_by_id[cid].get("concept_id") or concept_id(tenant, cid)
        else:
            cid, salt = community_id(tenant, LEVEL, mem), 0
            while cid in used_ids:  # a retired community once had exactly these members: never reuse its id
                salt += 1
                cid = community_id(tenant, LEVEL, [*mem, f"#{salt}"])
            used_ids.add(cid)
            nid = concept_id(tenant, cid)
        inside = {v: sum(w for u, w in weights_of[v] if u in verts) for v in verts}
        total = sum(strength[v] for v in verts)
        cohesion = round(sum(inside.values()) / total, 6) if total else 0.0
        ranked = ranked_members(mem, info)
        label, keywords = label_of(ranked, config)
        frequency = len(frozenset().union(*(graph.contexts[m] for m in mem)))
        communities.append(
            {
                "id": cid,
                "tenant": tenant,
                "level": LEVEL,
                "members": sorted(mem),
                "label": label,
                "size": len(mem),
                "modularity": round(modularity, 6),
                "concept_id": nid,
            }
        )
        concepts.append(concept_row(tenant, nid, label, keywords, ranked, frequency, cohesion, "active"))
        for v in sorted(verts):
            share = round(inside[v] / strength[v], 6) if strength[v] else 0.0
            src = graph.vertices[v]
            abouts.append(
                {
                    "id": edge_id(tenant, src, "ABOUT", nid),
                    "tenant": tenant,
                    "src": src,
                    "dst": nid,
                    "type": "ABOUT",
                    "weight": share,
                    "confidence": share,
                    "raw_refs": [],
                    "provenance": PROVENANCE,
                }
            )

    taken = set(matched.values())
    for pid, mem in prev:
        if pid in taken:
            continue
        r = prev_by_id[pid]
        ranked = ranked_members(mem, info)
        fresh_label, keywords = label_of(ranked, config)
        label = r.get("label") or fresh_label
        frequency = len(frozenset().union(*(graph.contexts.get(m, frozenset()) for m in mem)))
        concepts.append(
            concept_row(
                tenant,
                r.get("concept_id") or concept_id(tenant, pid),
                label,
                keywords,
                ranked,
                frequency,
                None,
                "archived",
            )
        )
    return communities, concepts, abouts, graph.hubs
