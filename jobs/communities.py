"""Communities → Concepts (SPEC §8; seed 004 §4 step 6, §6.3, §23): Leiden over an entity co-occurrence graph.

Seed 004 §23: "without vectors, build a co-occurrence graph from keywords and entities and
run community detection"; §4 step 6 and §6.3: "community detection/clustering → create or
update Concept nodes". Per tenant, pure, deterministic:

1. **Contexts.** An Episode is a context. A Fact / Preference / Task belongs to the
   Episode(s) it is DERIVED_FROM (followed through at most `jobs.community_contexts._DERIVE_DEPTH` hops, e.g.
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

Per tenant (nothing crosses tenants), and incremental up to Leiden: `context_items` (steps 1–2) gives each
context's rows from its Episode, what derives from it and their links, so a batch of new Episodes (an inbox file)
adds contexts without touching old ones; `context_pairs` of a batch, summed with `aggregate_pairs`, is the lake's
pair table; `communities_from_pairs` runs steps 4–7 (hubs, Leiden, ids, rows) from that table and the items.
A batch whose rows change an old context (a merged Fact gaining a link) must recompute that context's rows.
Tested in tests/test_consolidation_contracts.py::test_communities_are_per_tenant_and_pairs_add_over_batches_of_contexts
and ::test_context_items_of_a_file_batch_are_its_contexts_rows.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from jobs.community_concepts import (
    CONCEPT_SUBTYPE,
    PROVENANCE,
    community_id,
    concept_id,
    concept_row,
    match_previous,
    ranked_members,
)
from jobs.community_contexts import ContextCodes, context_pairs
from jobs.schema import COMMUNITIES
from r2g.ids import edge_id
from r2g.schema import EDGES, NODES
from raw_store.frames import as_frame
from raw_store.lake import conform

LEVEL = 0
E_COMMUNITY_CONFIG = "E_COMMUNITY_CONFIG"  # a CommunityConfig value outside its documented range

MEMBER_TYPES = ("Entity", "Fact", "Preference", "Task", "Concept")
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
    hubs: dict[str | None, tuple[str, ...]] = field(default_factory=dict)


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


def context_items(nodes: pa.Table, edges: pa.Table, config: CommunityConfig = CommunityConfig()) -> pa.Table:
    """(tenant, context, item): steps 1–2 of the module doc for every tenant at once, one row per item of a context.

    A context's rows depend only on its Episode, the Facts/Preferences/Tasks derived from it (≤ 3 DERIVED_FROM
    hops) and their MENTIONS / role / ABOUT edges to member nodes: a batch of new Episodes (one inbox file) gives
    new contexts without touching the old ones, so this table can be kept per batch and concatenated."""
    return ContextCodes.of(nodes, edges, config.member_types, config.skip_subtypes).items()


@dataclass
class _TenantGraph:
    """One tenant's hub-free graph: sorted vertex ids, edges (i < j, sorted) with integer weights, hubs."""

    vertices: list[str]
    edges: list[tuple[int, int]]
    weights: list[int]
    hubs: tuple[str, ...]


def _tenant_graph(pairs: pl.DataFrame, config: CommunityConfig) -> _TenantGraph:
    """Step 4 on one tenant's pairs (a < b, unique): hubs out, vertices sorted, edges by (i, j)."""
    degree = pl.concat([pairs.select(pl.col("a").alias("v")), pairs.select(pl.col("b").alias("v"))]).group_by("v").len()
    cap = max(config.hub_min_degree, config.hub_share * (degree.height - 1))
    hubs = tuple(sorted(degree.filter(pl.col("len") > cap).get_column("v").to_list()))
    kept = pairs.filter(~pl.col("a").is_in(list(hubs)) & ~pl.col("b").is_in(list(hubs)))
    vertices = pl.concat([kept.get_column("a"), kept.get_column("b")]).unique().sort()
    index = pl.DataFrame({"v": vertices, "i": pl.int_range(vertices.len(), eager=True, dtype=pl.Int64)})
    ij = kept.join(index.rename({"v": "a"}), on="a").join(index.rename({"v": "b", "i": "j"}), on="b").sort(["i", "j"])
    return _TenantGraph(
        vertices.to_list(),
        list(zip(ij.get_column("i").to_list(), ij.get_column("j").to_list())),
        ij.get_column("weight").to_list(),
        hubs,
    )


def cooccurrence_graph(
    tenant: str, nodes: list[dict], edges: list[dict], config: CommunityConfig = CommunityConfig()
) -> CooccurrenceGraph:
    """Build one tenant's co-occurrence graph from its node rows (id, type, subtype, …) and edge rows
    (src, dst, type); rows of other tenants must already be filtered out."""
    n = pa.Table.from_pylist(
        [{"tenant": tenant, **{k: r.get(k) for k in ("id", "type", "subtype")}} for r in nodes],
        schema=NODES.empty_table().select(["tenant", "id", "type", "subtype"]).schema,
    )
    e = pa.Table.from_pylist(
        [{"tenant": tenant, **{k: r.get(k) for k in ("src", "dst", "type")}} for r in edges],
        schema=EDGES.empty_table().select(["tenant", "src", "dst", "type"]).schema,
    )
    items = context_items(n, e, config)
    g = _tenant_graph(as_frame(context_pairs(items)), config)
    seen_in: dict[str, set[str]] = defaultdict(set)
    for c, x in as_frame(items).select("context", "item").iter_rows():
        seen_in[x].add(c)
    return CooccurrenceGraph(
        tenant, g.vertices, dict(zip(g.edges, g.weights)), {v: frozenset(seen_in[v]) for v in g.vertices}, g.hubs
    )


def leiden(graph: CooccurrenceGraph, config: CommunityConfig = CommunityConfig()) -> tuple[list[int], float]:
    """Leiden (modularity) membership of each vertex, renumbered by each community's first vertex, and the
    partition's modularity. Deterministic: igraph's RNG is a fresh random.Random(config.seed) for the call."""
    return _leiden(len(graph.vertices), list(graph.weights), list(graph.weights.values()), config)


def _leiden(
    n: int, edges: list[tuple[int, int]], weights: list[int], config: CommunityConfig
) -> tuple[list[int], float]:
    import igraph  # on first use: with matplotlib installed, igraph imports it (~1 s)

    if not n:
        return [], 0.0
    g = igraph.Graph(n=n, edges=edges, directed=False)
    g.es["weight"] = [float(w) for w in weights]
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


# ------------------------------------------------------------------------------------------ labels
# (the ids and Concept rows: jobs.community_concepts)


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
    nodes and ABOUT edges; `previous` is the last run's COMMUNITIES table (ids are carried over from it).

    Vectorised: context_items → context_pairs → communities_from_pairs (polars joins, igraph's Leiden)."""
    nodes = conform(nodes, NODES)
    codes = ContextCodes.of(nodes, edges, config.member_types, config.skip_subtypes)
    items = codes.items()
    pairs = codes.item_pairs() if codes.by_code else context_pairs(items)
    return communities_from_pairs(pairs, items, nodes, previous, config)


def communities_from_pairs(
    pairs: pa.Table,
    items: pa.Table,
    nodes: pa.Table,
    previous: pa.Table | None = None,
    config: CommunityConfig = CommunityConfig(),
) -> CommunityResult:
    """Steps 4–7 from an aggregated pair table (context_pairs / aggregate_pairs) and the context items
    (context_items: each community's frequency is the number of distinct contexts of its members). `nodes`
    gives the tenants, the member rows (labels, Concept times) and nothing else; per tenant, independent."""
    nodes = conform(nodes, NODES)
    p = as_frame(pairs.select(["tenant", "a", "b", "weight"]))
    inc = as_frame(items.select(["tenant", "context", "item"]))
    info_cols = as_frame(nodes.select(list(_NODE_COLS)))
    prev_rows: dict[str | None, list[dict]] = defaultdict(list)
    if previous is not None:
        for r in conform(previous, COMMUNITIES).to_pylist():
            if r["level"] == LEVEL:
                prev_rows[r["tenant"]].append(r)
    tenants = set(info_cols.get_column("tenant").unique().to_list()) | set(prev_rows)
    communities: list[dict] = []
    concepts: list[dict] = []
    abouts: list[dict] = []
    hubs: dict[str | None, tuple[str, ...]] = {}
    for tenant in sorted(tenants, key=lambda t: (t is None, t or "")):
        mine = pl.col("tenant").is_null() if tenant is None else pl.col("tenant") == tenant
        c, n, e, h = _tenant(
            tenant, p.filter(mine), inc.filter(mine), info_cols.filter(mine), prev_rows.get(tenant, []), config
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


def _contexts_per_group(inc: pl.DataFrame, groups: dict[int, list[str]]) -> dict[int, int]:
    """{group: number of distinct contexts any of its members appears in}."""
    rows = [(k, m) for k, ms in groups.items() for m in ms]
    if not rows:
        return {}
    g = pl.DataFrame(rows, schema={"_k": pl.Int64, "item": pl.String}, orient="row")
    counts = inc.join(g, on="item").group_by("_k").agg(pl.col("context").n_unique())
    return dict(counts.iter_rows())


def _tenant(
    tenant: str | None,
    pairs: pl.DataFrame,
    inc: pl.DataFrame,
    node_info: pl.DataFrame,
    previous: list[dict],
    config: CommunityConfig,
) -> tuple[list[dict], list[dict], list[dict], tuple[str, ...]]:
    graph = _tenant_graph(pairs, config)
    membership, modularity = _leiden(len(graph.vertices), graph.edges, graph.weights, config)
    groups: dict[int, list[int]] = defaultdict(list)
    for v, m in enumerate(membership):
        groups[m].append(v)
    kept = [g for _, g in sorted(groups.items()) if len(g) >= config.min_size]
    current = [frozenset(graph.vertices[v] for v in g) for g in kept]

    prev = sorted(((r["id"], frozenset(r["members"] or ())) for r in previous), key=lambda p: p[0])
    prev_by_id = {r["id"]: r for r in previous}
    matched = match_previous(current, prev, config.keep_jaccard)
    used_ids = set(prev_by_id)

    wanted = sorted(set().union(*current, *(m for _, m in prev)))
    info = {r["id"]: r for r in node_info.filter(pl.col("id").is_in(wanted)).to_dicts()}  # the last row wins
    strength = [0.0] * len(graph.vertices)
    weights_of: dict[int, list[tuple[int, int]]] = defaultdict(list)
    in_community = {v: k for k, g in enumerate(kept) for v in g}
    for (i, j), w in zip(graph.edges, graph.weights):
        strength[i] += w
        strength[j] += w
        if in_community.get(i, -1) == in_community.get(j, -2):
            weights_of[i].append((j, w))
            weights_of[j].append((i, w))
    vertex_set = set(graph.vertices)
    freq = _contexts_per_group(
        inc.filter(pl.col("item").is_in(graph.vertices)), {k: sorted(mem) for k, mem in enumerate(current)}
    )
    prev_freq = _contexts_per_group(
        inc.filter(pl.col("item").is_in(graph.vertices)),
        {k: sorted(m for m in mem if m in vertex_set) for k, (_, mem) in enumerate(prev)},
    )

    communities: list[dict] = []
    concepts: list[dict] = []
    abouts: list[dict] = []
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
        concepts.append(concept_row(tenant, nid, label, keywords, ranked, freq.get(k, 0), cohesion, "active"))
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
    for k, (pid, mem) in enumerate(prev):
        if pid in taken:
            continue
        r = prev_by_id[pid]
        ranked = ranked_members(mem, info)
        fresh_label, keywords = label_of(ranked, config)
        label = r.get("label") or fresh_label
        concepts.append(
            concept_row(
                tenant,
                r.get("concept_id") or concept_id(tenant, pid),
                label,
                keywords,
                ranked,
                prev_freq.get(k, 0),
                None,
                "archived",
            )
        )
    return communities, concepts, abouts, graph.hubs


def community_group_keys(nodes: pa.Table) -> pa.Table:
    """(tenant, id) → tenant: communities are computed per tenant (one Leiden per tenant, nothing shared across
    tenants), so the group of every node is its tenant."""
    return conform(nodes, NODES).select(["tenant", "id"])
