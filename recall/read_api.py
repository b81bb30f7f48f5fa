"""Read API (seed 001 Layers A–C, SPEC §7): immutable views of one tenant's memory graph.

Open a session per tenant, `with ReadApi.open(lake, "demo") as api: ...`. Every
SQL read goes through the session's `TenantReader` (tenant-filtered in SQL) and
every neighbourhood through the tenant's own graph (recall.tenant_index), so nothing another
tenant wrote can come back. Views (recall.read_views) are frozen dataclasses whose collections are
tuples and `MappingProxyType`s; each call builds them afresh.

Seed 001 wrote this API for a JS store; its notions map onto our tables so:
  level episodic | semantic     node `category` episode | fact, core (Episode when null)
  archived                      `status` set to anything but 'active' or 'open' (a Task's live state)
  seq / timeline order          coalesce(time_start, first_seen) ascending, nulls last, then id
  parent / children             DERIVED_FROM (a Fact is a child of the Episode it came from) and
                                SEMANTIC_CONTAINS (a rollup summary is the parent of the Episodes it holds)
  internal edges                DERIVED_FROM, SEMANTIC_CONTAINS (seed: contains / semantic_contains)
  hierarchical compression      Episodes; every other type is 'none'
Unknown or blank ids give None (single views) or empty tuples; unknown type names
filter to nothing; malformed arguments raise ReadApiError(BAD_ARGS, ...).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from raw_store.lake import Lake
from recall.engine import query_keywords
from recall.graph_csr import CsrGraph
from recall.read_views import (
    DERIVED_FROM,
    INTERNAL_EDGE_TYPES,
    SCHEMA,
    SEMANTIC_CONTAINS,
    TABLE_NAME,
    VIEW_COLUMNS,
    CompactionGroup,
    EdgeSummary,
    EdgeView,
    NeighborView,
    NodeBrief,
    NodeView,
    RankedView,
    RelationCount,
    SampleNeighbor,
    SchemaView,
    node_view,
    recency_order,
    timeline_key,
)
from recall.store import IDS, IndexNotBuilt, TenantInfo, TenantReader, id_param, node_docs_table, tenant_reader
from recall.tenant_index import open_tenant_index

# Error codes, named as in seed 001 (compactNodes' argument errors).
BAD_ARGS = "BAD_ARGS"

LEVELS = ("episodic", "semantic")
DIRECTIONS = ("in", "out", "both")
GROUP_BY = ("conversation", "concept")

# Compression defaults for compactionCandidates: seed 001 names threshold, fanIn, maxDepth and
# keepRecentLeaves but gives no values; these are what Luker's read API (the seed's host) fills in
# for a type that sets none of them.
COMPACTION_THRESHOLD = 6
COMPACTION_FAN_IN = 3
COMPACTION_MAX_DEPTH = 6
COMPACTION_KEEP_RECENT_LEAVES = 0

_SPECS = {s.type: s for s in SCHEMA.node_types}


class ReadApiError(ValueError):
    """A rejected argument: `code` is one of this module's error codes (BAD_ARGS)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# SQL over the alias `n` of the tenant's nodes.
_TIME = "coalesce(n.time_start, n.first_seen)"
_LEVEL = (
    "CASE WHEN coalesce(n.category, CASE WHEN n.type = 'Episode' THEN 'episode' END) = 'episode' "
    "THEN 'episodic' ELSE 'semantic' END"
)
_LIVE = "coalesce(n.status, 'active') IN ('active', 'open')"
_TIMELINE = "t ASC NULLS LAST, n.id ASC"
_VIEW_SELECT = (
    f"SELECT {', '.join(f'n.{c}' for c in VIEW_COLUMNS)}, {_TIME} AS t, {_LEVEL} AS level, "
    "(SELECT list_sort(list_distinct(list(CASE WHEN e.type = 'DERIVED_FROM' THEN e.dst ELSE e.src END))) "
    "FROM edges e JOIN nodes p ON p.id = CASE WHEN e.type = 'DERIVED_FROM' THEN e.dst ELSE e.src END "
    f" WHERE (e.type = '{DERIVED_FROM}' AND e.src = n.id) OR (e.type = '{SEMANTIC_CONTAINS}' AND e.dst = n.id)) "
    "AS parents, "
    "(SELECT list_sort(list_distinct(list(CASE WHEN e.type = 'DERIVED_FROM' THEN e.src ELSE e.dst END))) "
    f"FROM edges e WHERE (e.type = '{DERIVED_FROM}' AND e.dst = n.id) "
    f" OR (e.type = '{SEMANTIC_CONTAINS}' AND e.src = n.id)) AS children "
    "FROM nodes n"
)
_NOT_IN_BRIEF = frozenset({"id", "type", "title", "text", "raw_refs"})


def _blank(node_id: Any) -> bool:
    return not isinstance(node_id, str) or not node_id.strip()


def _names(arg: Iterable[str] | None, what: str) -> tuple[str, ...] | None:
    """A names filter: None or empty → no filter; a bare string is a caller bug, not a collection."""
    if arg is None:
        return None
    if isinstance(arg, str):
        raise ReadApiError(BAD_ARGS, f"{what} must be a collection of names, not the string {arg!r}")
    names = tuple(arg)
    if not all(isinstance(x, str) for x in names):
        raise ReadApiError(BAD_ARGS, f"{what} must hold strings")
    return names or None


def _count(value: Any, what: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ReadApiError(BAD_ARGS, f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _choice(value: Any, what: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ReadApiError(BAD_ARGS, f"{what} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _graph(lake: Lake, tenant: str) -> CsrGraph | None:
    """The tenant's graph from recall's index; None when it has none (neighbourhoods are then empty)."""
    try:
        index = open_tenant_index(lake.index_dir, tenant)
        return index.graph() if index is not None else None
    except (IndexNotBuilt, OSError, ValueError):
        return None


class ReadApi:
    """One tenant's read session over the lake's current index; use as a context manager."""

    def __init__(self, reader: TenantReader, info: TenantInfo | None, graph: CsrGraph | None) -> None:
        self._reader = reader
        self._info = info
        self._graph = graph

    @classmethod
    def open(cls, lake: Lake, tenant: str) -> ReadApi:
        """A session on `tenant` (ValueError when blank; IndexNotBuilt when the lake has no index).

        A tenant the index does not hold gets a session whose reads are all empty.
        """
        if not isinstance(tenant, str) or not tenant.strip():
            raise ValueError("tenant is required")
        reader = tenant_reader(lake, tenant)
        try:
            info = reader.info()
            graph = _graph(lake, tenant) if info is not None else None
        except BaseException:
            reader.close()
            raise
        return cls(reader, info, graph)

    @property
    def tenant(self) -> str:
        return self._reader.tenant

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> ReadApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Layer A: data access

    def list_nodes(
        self,
        *,
        types: Collection[str] | None = None,
        levels: Collection[str] | None = None,
        active_only: bool = True,
        time_from: datetime | None = None,
        time_to: datetime | None = None,
    ) -> tuple[NodeView, ...]:
        """Nodes in timeline order (time ascending, undated last, then id); archived ones only if not active_only.

        time_from / time_to bound the timeline time inclusively (undated nodes drop out).
        """
        types = _names(types, "types")
        levels = _names(levels, "levels")
        for level in levels or ():
            _choice(level, "levels", LEVELS)
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if types is not None:
            where.append("n.type IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(types))
        if levels is not None:
            where.append(f"{_LEVEL} IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(levels))
        if active_only:
            where.append(_LIVE)
        if time_from is not None:
            where.append(f"{_TIME} >= ?")
            params.append(time_from)
        if time_to is not None:
            where.append(f"{_TIME} <= ?")
            params.append(time_to)
        return self._scan(" AND ".join(where), params)

    def get_node(self, node_id: str) -> NodeView | None:
        """The node, archived or not; None for a blank id or one this tenant does not have."""
        if _blank(node_id):
            return None
        return self._views([node_id]).get(node_id)

    def list_edges(
        self,
        *,
        src: str | None = None,
        dst: str | None = None,
        types: Collection[str] | None = None,
        exclude_internal: bool = False,
    ) -> tuple[EdgeView, ...]:
        """Stored edges ordered by (src, type, dst, id); exclude_internal drops DERIVED_FROM."""
        types = _names(types, "types")
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        for column, value in (("src", src), ("dst", dst)):
            if value is None:
                continue
            if _blank(value):
                return ()
            where.append(f"e.{column} = ?")
            params.append(value)
        if types is not None:
            where.append("e.type IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(types))
        if exclude_internal:
            where.append("e.type NOT IN (SELECT unnest(?::VARCHAR[]))")
            params.append(sorted(INTERNAL_EDGE_TYPES))
        rows = self._reader.scoped(
            f"SELECT e.id, e.src, e.dst, e.type, e.weight, e.confidence FROM edges e "
            f"WHERE {' AND '.join(where)} ORDER BY e.src, e.type, e.dst, e.id",
            params,
        )
        return tuple(EdgeView(*r) for r in rows)

    def get_schema(self) -> SchemaView:
        """NODES / EDGES columns, node and edge types, and per node type its required and key columns."""
        return SCHEMA

    # Layer B: topology

    def get_neighbors(
        self, node_id: str, *, edge_types: Collection[str] | None = None, direction: str = "both"
    ) -> tuple[NeighborView, ...]:
        """Active neighbours over graph edges, one per (neighbour, edge type, direction).

        Ordered by the neighbour's timeline position, then edge type, then direction.
        """
        edge_types = _names(edge_types, "edge_types")
        _choice(direction, "direction", DIRECTIONS)
        if _blank(node_id):
            return ()
        hits = dict.fromkeys((u, et, d) for _, u, et, d in self._edges_at([node_id], direction, edge_types))
        views = self._views({u for u, _, _ in hits})
        out = [NeighborView(views[u], et, d) for u, et, d in hits if u in views and not views[u].archived]
        out.sort(key=lambda nb: (timeline_key(nb.node), nb.edge_type, nb.direction))
        return tuple(out)

    def get_descendants(
        self, node_id: str, *, active_only: bool = True, max_depth: int | None = None
    ) -> tuple[NodeView, ...]:
        """Nodes DERIVED_FROM this one, transitively, breadth first (each depth in timeline order).

        The node itself is not included; an archived child is left out with what lies
        below it unless active_only is False. max_depth None is unlimited.
        """
        if max_depth is not None:
            _count(max_depth, "max_depth")
        if _blank(node_id):
            return ()
        seen, frontier, out, depth = {node_id}, [node_id], [], 0
        while frontier and (max_depth is None or depth < max_depth):
            depth += 1
            found = {u for _, u, _, _ in self._edges_at(frontier, "in", (DERIVED_FROM,))} - seen
            seen |= found
            level = sorted(
                (v for v in self._views(found).values() if not (active_only and v.archived)), key=timeline_key
            )
            out.extend(level)
            frontier = [v.id for v in level]
        return tuple(out)

    def expand_from_seeds(
        self,
        seed_ids: Iterable[str],
        *,
        hops: int = 1,
        edge_types: Collection[str] | None = None,
        include_children: bool = True,
        exclude_internal: bool = False,
        within: Collection[str] | None = None,
    ) -> tuple[NodeView, ...]:
        """The seeds, then what each hop of a breadth-first drill reaches (each hop in timeline order).

        A hop follows graph edges both ways (edge_types filters them) and, with
        include_children, also adds the DERIVED_FROM children of the frontier.
        exclude_internal keeps DERIVED_FROM out of both. Archived nodes are never
        reached; `within` limits the reached nodes to a set. Every known seed is kept
        (an archived one is not expanded from); unknown or blank seeds are dropped.
        """
        if isinstance(seed_ids, str):
            raise ReadApiError(BAD_ARGS, "seed_ids must be a collection of ids, not a string")
        _count(hops, "hops")
        edge_types = _names(edge_types, "edge_types")
        allowed = None if within is None else set(_names(within, "within") or ())
        seeds = [s for s in dict.fromkeys(seed_ids) if not _blank(s)]
        known = self._views(seeds)
        out = [known[s] for s in seeds if s in known]
        seen = {v.id for v in out}
        frontier = [v.id for v in out if not v.archived]
        for _ in range(hops):
            if not frontier:
                break
            found = []
            if include_children and not exclude_internal:
                found += [u for _, u, _, _ in self._edges_at(frontier, "in", (DERIVED_FROM,))]
            skip = INTERNAL_EDGE_TYPES if exclude_internal else frozenset()
            found += [u for _, u, et, _ in self._edges_at(frontier, "both", edge_types) if et not in skip]
            fresh = {u for u in found if u not in seen and (allowed is None or u in allowed)}
            seen |= fresh
            level = sorted((v for v in self._views(fresh).values() if not v.archived), key=timeline_key)
            out.extend(level)
            frontier = [v.id for v in level]
        return tuple(out)

    # Layer C: recall primitives

    def keyword_search(
        self, query: str, *, types: Collection[str] | None = None, k: int = 20
    ) -> tuple[RankedView, ...]:
        """Active nodes whose FTS document shares query tokens, best first, at most k.

        score = distinct query stems found in the node / distinct query stems (title,
        text and keywords; porter stems; Chinese segmented by jieba; stop-words out);
        ties by BM25, then id. An empty or stop-word-only query gives ().
        """
        types = _names(types, "types")
        _count(k, "k")
        keywords = query_keywords(query) if isinstance(query, str) else []
        if not keywords or k == 0 or self._info is None or not self._info.n_nodes:
            return ()
        # every node the FTS index matches, with its BM25 (the reader's postings-based scorer), then the share
        # of query stems each one holds
        bm25 = dict(self._reader.node_bm25(self._info, " ".join(keywords), self._info.n_nodes))
        if not bm25:
            return ()
        docs = node_docs_table(self._info.slug)
        type_filter, params = "", [keywords, id_param(list(bm25))]
        if types is not None:
            type_filter = "AND d.type IN (SELECT unnest(?::VARCHAR[]))"
            params.append(list(types))
        rows = self._reader.scoped(
            "WITH q AS (SELECT list_distinct(list_transform(?::VARCHAR[], w -> stem(w, 'porter'))) AS stems) "
            "SELECT d.id, len(list_intersect(list_transform(string_split(d.doc, ' '), w -> stem(w, 'porter')), "
            f"q.stems)) / len(q.stems) AS score FROM {docs} d, q WHERE d.id IN (SELECT {IDS}) {type_filter} "
            f"AND d.id IN (SELECT n.id FROM nodes n WHERE {_LIVE})",
            params,
            tables=("nodes", docs),
        )
        rows = sorted(rows, key=lambda r: (-r[1], -bm25[r[0]], r[0]))[:k]
        views = self._views([r[0] for r in rows])
        return tuple(RankedView(views[i], float(score), float(bm25[i])) for i, score in rows if i in views)

    def find_by_name(self, query: str, *, types: Collection[str] | None = None) -> tuple[NodeView, ...]:
        """Active nodes whose title or an alias contains `query` (case-insensitive), in timeline order.

        An empty or blank query gives ().
        """
        types = _names(types, "types")
        if _blank(query):
            return ()
        q = query.strip().lower()
        where = (
            f"{_LIVE} AND (contains(lower(n.title), ?) "
            "OR len(list_filter(coalesce(n.aliases, []), a -> contains(lower(a), ?))) > 0)"
        )
        params: list = [q, q]
        if types is not None:
            where += " AND n.type IN (SELECT unnest(?::VARCHAR[]))"
            params.append(list(types))
        return self._scan(where, params)

    def get_edge_summary(
        self, node_id: str, *, edge_types: Collection[str] | None = None, limit: int = 8
    ) -> EdgeSummary:
        """Degree, (relation, direction) counts and up to `limit` distinct neighbours, most recent first.

        Counts graph edges to active nodes only. Never None: an unknown or blank id
        gives a zero summary.
        """
        edge_types = _names(edge_types, "edge_types")
        _count(limit, "limit")
        if _blank(node_id):
            return EdgeSummary(0, (), ())
        hits = self._edges_at([node_id], "both", edge_types)
        views = self._views({u for _, u, _, _ in hits})
        live = [(u, et, d) for _, u, et, d in hits if u in views and not views[u].archived]
        counts: dict[tuple[str, str], int] = {}
        for _, et, d in live:
            counts[(et, d)] = counts.get((et, d), 0) + 1
        relations = tuple(
            RelationCount(et, d, c) for (et, d), c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        recent = recency_order({u: views[u] for u, _, _ in live}.values())[:limit]
        sample = tuple(SampleNeighbor(v.id, v.type, v.title, v.time) for v in recent)
        return EdgeSummary(len(live), relations, sample)

    def get_node_brief(
        self, node_id: str, *, include_edge_summary: bool = True, edge_summary_limit: int = 8
    ) -> NodeBrief | None:
        """The node as one candidate row (key / row values, summary, child count, edge summary).

        None for a blank, unknown or archived id.
        """
        _count(edge_summary_limit, "edge_summary_limit")
        view = self.get_node(node_id)
        if view is None or view.archived:
            return None
        spec = _SPECS.get(view.type)
        keys = spec.primary_key_columns if spec else ()
        values = {"title": view.title, **view.fields}
        present = {c: v for c, v in values.items() if v is not None and v != "" and v != ()}
        children = self._views(view.children_ids)
        return NodeBrief(
            id=view.id,
            level=view.level,
            type=view.type,
            table_name=TABLE_NAME,
            title=view.title,
            summary=view.fields.get("text") or "",
            key_values=MappingProxyType({c: present[c] for c in keys if c in present}),
            row_values=MappingProxyType({c: v for c, v in present.items() if c not in keys and c not in _NOT_IN_BRIEF}),
            time=view.time,
            child_count=sum(1 for c in children.values() if not c.archived),
            edge_summary=self.get_edge_summary(view.id, limit=edge_summary_limit) if include_edge_summary else None,
        )

    def compaction_candidates(
        self,
        node_type: str,
        depth: int = 0,
        *,
        group_by: str = "conversation",
        threshold: int = COMPACTION_THRESHOLD,
        fan_in: int = COMPACTION_FAN_IN,
        max_depth: int = COMPACTION_MAX_DEPTH,
        keep_recent_leaves: int = COMPACTION_KEEP_RECENT_LEAVES,
    ) -> tuple[CompactionGroup, ...]:
        """Groups of `fan_in` active nodes ready to be rolled up into one summary node (no LLM).

        Candidates share a conversation (group_by="conversation") or an ABOUT Concept
        (group_by="concept"; an Episode about two topics may then sit in two groups).
        Per shared key: timeline order, the newest keep_recent_leaves left out (at depth 0),
        nothing when fewer than `threshold` remain, else consecutive runs of fan_in (a
        short tail waits). Only roots are candidates (nodes no rollup holds yet); depth 0
        means the leaves, depth d the rollups (jobs.rollup) d levels above them. () when
        node_type is unknown or not hierarchical (only Episode is), or depth >= max_depth.
        """
        _count(depth, "depth")
        _choice(group_by, "group_by", GROUP_BY)
        _count(threshold, "threshold", 1)
        _count(fan_in, "fan_in", 2)
        _count(max_depth, "max_depth", 1)
        _count(keep_recent_leaves, "keep_recent_leaves")
        spec = _SPECS.get(node_type)
        if spec is None or spec.compression_mode != "hierarchical" or depth >= max_depth:
            return ()
        at_depth = self._rollup_depths(depth)
        if at_depth is not None and not at_depth:
            return ()
        level = f"n.id IN (SELECT {IDS})" if at_depth is not None else "coalesce(n.subtype, '') <> 'rollup'"
        roots = f"n.id NOT IN (SELECT e.dst FROM edges e WHERE e.type = '{SEMANTIC_CONTAINS}')"
        if group_by == "conversation":
            pool = (
                f"SELECT n.id, n.conv_id AS key, {_TIME} AS t FROM nodes n "
                f"WHERE n.type = ? AND {_LIVE} AND n.conv_id IS NOT NULL AND {level} AND {roots}"
            )
        else:
            pool = (
                f"SELECT n.id, e.dst AS key, {_TIME} AS t FROM nodes n JOIN edges e ON e.src = n.id "
                f"AND e.type = 'ABOUT' WHERE n.type = ? AND {_LIVE} AND {level} AND {roots} "
                f"AND e.dst IN (SELECT c.id FROM nodes c WHERE c.type = 'Concept')"
            )
        params = [
            node_type,
            *([id_param(sorted(at_depth))] if at_depth is not None else []),
            keep_recent_leaves if depth == 0 else 0,
            fan_in,
            threshold,
            fan_in,
        ]
        rows = self._reader.scoped(
            f"WITH pool AS ({pool}), ranked AS ("
            " SELECT id, key, t, row_number() OVER (PARTITION BY key ORDER BY t ASC NULLS LAST, id) - 1 AS pos,"
            "  count(*) OVER (PARTITION BY key) - ? AS kept FROM pool) "
            "SELECT key, pos // ? AS g, list(id ORDER BY pos) AS ids, min(t) AS t0 FROM ranked "
            "WHERE pos < kept AND kept >= ? GROUP BY key, g HAVING count(*) = ? "
            "ORDER BY t0 ASC NULLS LAST, key, g",
            params,
        )
        return tuple(CompactionGroup(key, depth, tuple(ids), len(ids)) for key, _, ids, _ in rows)

    # internals

    def _rollup_depths(self, depth: int) -> set[str] | None:
        """Ids of the rollups `depth` levels above the leaves (None for depth 0: the leaves, by subtype)."""
        if depth == 0:
            return None
        children: dict[str, list[str]] = {}
        for src, dst in self._reader.scoped(f"SELECT e.src, e.dst FROM edges e WHERE e.type = '{SEMANTIC_CONTAINS}'"):
            children.setdefault(src, []).append(dst)
        memo: dict[str, int] = {}

        def level(node: str, guard: int = 0) -> int:
            if node not in children or guard > COMPACTION_MAX_DEPTH * 4:
                return 0
            if node not in memo:
                memo[node] = 1 + max(level(c, guard + 1) for c in children[node])
            return memo[node]

        return {p for p in children if level(p) == depth}

    def _scan(self, where: str, params: Sequence[Any]) -> tuple[NodeView, ...]:
        rows = self._reader.scoped(f"{_VIEW_SELECT} WHERE {where} ORDER BY {_TIMELINE}", params)
        return tuple(node_view(r) for r in rows)

    def _views(self, ids: Iterable[str]) -> dict[str, NodeView]:
        """Views by id, this tenant's only (unknown ids are absent)."""
        ids = list(ids)
        if not ids:
            return {}
        return {v.id: v for v in self._scan(f"n.id IN (SELECT {IDS})", [id_param(ids)])}

    def _edges_at(
        self, node_ids: Iterable[str], direction: str, edge_types: Collection[str] | None
    ) -> list[tuple[str, str, str, str]]:
        """(node, neighbour, edge type, direction) for each graph edge at the nodes (direction seen from node)."""
        g = self._graph
        if g is None:
            return []
        wanted = None if edge_types is None else frozenset(edge_types)
        modes = ("out", "in") if direction == "both" else (direction,)
        node_ids = list(node_ids)
        found = []
        for node_id, v in zip(node_ids, g.slots(node_ids).tolist()):
            if v < 0:
                continue
            nbr, code, _ = g.incident(v)
            for mode in modes:
                bit = 0 if mode == "out" else 1
                for u, c in zip(nbr.tolist(), code.tolist()):
                    if c & 1 == bit and u != v and (wanted is None or g.type_of(c) in wanted):
                        found.append((node_id, u, g.type_of(c), mode))
        names = dict(zip(sorted({u for _, u, _, _ in found}), g.ids(sorted({u for _, u, _, _ in found}))))
        return [(node_id, names[u], etype, mode) for node_id, u, etype, mode in found]
