"""Tenant isolation, as a property: over random multi-tenant inboxes, nothing one tenant can ask — recall,
the search_memories tool, any Read API call, tenant-scoped SQL — returns another tenant's node, edge or
excerpt.

Each tenant's messages carry a secret word no other tenant uses, beside names, places and whole
messages the tenants share (same bytes → same raw_id in both tenants). A leak is any foreign secret in
any output, or any returned id, edge or citation that is not the asking tenant's own.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from r2g.lake_graph import read_lake_table
from r2g.link import with_fact_links
from r2g.merge import merge_graph
from r2g.pipeline import annotate_messages, partition_graph
from r2g.schema import EDGES, NODES
from raw_store.cas import RawStore
from raw_store.ingest import ingest_bytes
from raw_store.lake import Lake
from raw_store.schema import MESSAGES, RAW_CHUNKS, REJECTS
from raw_store.tables import part_paths, write_import
from recall.engine import recall
from recall.index import build_indexes
from recall.read_api import ReadApi
from recall.store import tenant_sql
from recall.tools import search_memories

TENANTS = ["alice", "bob", "Alice", "团队", "t_0123456789abcdef", "x.y-z"]
NAMES = ["Melanie", "Caroline", "Xiaoming", "小红"]
PLACES = ["Oslo", "Riverside Park", "北京", "the library"]
SHARED = ["Melanie went hiking in Oslo last Saturday.", "小明昨天在北京踢足球。", "I love painting sunsets."]
TEMPLATES = [
    "{name} met me at {place} and we talked about {secret}.",
    "Yesterday {name} said the {secret} project in {place} is late.",
    "{name}在{place}说了{secret}的事情。",
    "I really like {secret}, {name} hates it.",
]

_messages = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(TEMPLATES), st.sampled_from(NAMES), st.sampled_from(PLACES)), st.sampled_from(SHARED)
    ),
    min_size=1,
    max_size=6,
)
INBOXES = st.dictionaries(st.sampled_from(TENANTS), _messages, min_size=2, max_size=3)


def secret_of(tenant: str) -> str:
    return f"zorblax{TENANTS.index(tenant)}q"


def _jsonl(tenant: str, messages: list) -> bytes:
    lines = []
    for i, m in enumerate(messages):
        text = m if isinstance(m, str) else m[0].format(name=m[1], place=m[2], secret=secret_of(tenant))
        lines.append(
            json.dumps(
                {
                    "conv_id": "chat",
                    "speaker": ["Ann", "Ben"][i % 2],
                    "ts": f"2024-03-0{1 + i % 9} 10:00:00",
                    "text": text,
                },
                ensure_ascii=False,
            )
        )
    return ("\n".join(lines) + "\n").encode("utf-8")


def build_lake(root: Path, inbox: dict[str, list]) -> Lake:
    """The pipeline's stages as plain functions (what the Dagster assets wire): ingest, NLP, R2G, merge, index."""
    lake, store = Lake(root), RawStore(root)
    parts: dict[str, list[pa.Table]] = {k: [] for k in ("messages", "raw_chunks", "rejects", "nodes", "edges")}
    for tenant, msgs in sorted(inbox.items()):
        res = ingest_bytes(_jsonl(tenant, msgs), f"{tenant}/chat.jsonl", tenant, store)
        annotations, _ = annotate_messages(res.messages, None, workers=1)
        nodes, edges = partition_graph(res.messages, annotations)
        for name, table in (
            ("messages", res.messages),
            ("raw_chunks", res.raw_chunks),
            ("rejects", res.rejects),
            ("nodes", nodes),
            ("edges", edges),
        ):
            parts[name].append(table)
    nodes, edges = merge_graph(parts["nodes"], parts["edges"])
    edges = with_fact_links(nodes, edges)
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
    build_indexes(lake)
    return lake


def _dump(value: object) -> str:
    def plain(v: object) -> object:
        if is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in fields(v)}
        if isinstance(v, Mapping):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            return [plain(x) for x in v]
        return v if isinstance(v, (str, int, float, bool, type(None))) else str(v)

    return json.dumps(plain(value), ensure_ascii=False, default=str)


class Owned:
    """What belongs to one tenant, from the lake tables themselves."""

    def __init__(self, lake: Lake, tenant: str) -> None:
        def mine(name: str, column: str) -> list:
            t = read_lake_table(lake, name, ["tenant", column])
            return [v for t_, v in zip(t.column("tenant").to_pylist(), t.column(column).to_pylist()) if t_ == tenant]

        self.nodes, self.edges = set(mine("nodes", "id")), set(mine("edges", "id"))
        self.chunks, self.texts = set(mine("raw_chunks", "id")), mine("messages", "text")


def _leaks(lake: Lake, tenant: str, others: list[str], queries: list[str]) -> list[str]:
    """Every way `tenant`'s view shows something that is not its own (empty list: isolated)."""
    own = Owned(lake, tenant)
    foreign_secrets = [secret_of(o) for o in others]
    foreign_nodes = set().union(*(Owned(lake, o).nodes for o in others)) - own.nodes
    leaks: list[str] = []

    def check_text(where: str, value: object) -> None:
        text = _dump(value)
        leaks.extend(f"{where}: shows {s}" for s in foreign_secrets if s in text)

    def check_nodes(where: str, ids) -> None:
        leaks.extend(f"{where}: node {i} is not {tenant}'s" for i in ids if i not in own.nodes)

    for q in queries:
        results = recall(q, tenant, k=10, expand_depth=2, lake=lake)
        check_text(f"recall {q!r}", [r.to_json() for r in results])
        check_nodes(f"recall {q!r}", [r.node_id for r in results if r.type != "RawChunk"])
        for r in results:
            for c in r.citations:
                if c.raw_id not in own.chunks:
                    leaks.append(f"recall {q!r}: cites chunk {c.raw_id} of another tenant")
                if not any(c.excerpt in t or t in c.excerpt for t in own.texts):
                    leaks.append(f"recall {q!r}: excerpt {c.excerpt[:40]!r} is no message of {tenant}")
        tool = search_memories({"query": q, "max_results": 10}, tenant=tenant, lake=lake)
        check_text(f"search_memories {q!r}", tool)

    api = ReadApi.open(lake, tenant)
    try:
        nodes = api.list_nodes()
        check_nodes("list_nodes", [v.id for v in nodes])
        check_text("list_nodes", nodes)
        edges = api.list_edges()
        leaks.extend(f"list_edges: edge {e.id} is not {tenant}'s" for e in edges if e.id not in own.edges)
        for q in queries:
            hits = api.keyword_search(q)
            check_nodes(f"keyword_search {q!r}", [h.node.id for h in hits])
            check_text(f"keyword_search {q!r}", hits)
            named = api.find_by_name(q)
            check_nodes(f"find_by_name {q!r}", [v.id for v in named])
        probe = sorted(foreign_nodes)[:15]
        for nid in probe:
            if api.get_node(nid) is not None:
                leaks.append(f"get_node({nid}) answers for another tenant's node")
            if api.get_neighbors(nid) or api.get_descendants(nid) or api.get_edge_summary(nid).degree:
                leaks.append(f"topology of another tenant's node {nid} is visible")
            if api.list_edges(src=nid) or api.list_edges(dst=nid):
                leaks.append(f"list_edges exposes edges of another tenant's node {nid}")
        reached = api.expand_from_seeds(probe + sorted(own.nodes)[:3], hops=2)
        check_nodes("expand_from_seeds", [v.id for v in reached])
        check_text("expand_from_seeds", reached)
        for group in api.compaction_candidates("Episode", threshold=2, fan_in=2, keep_recent_leaves=0):
            check_nodes("compaction_candidates", group.child_ids)
    finally:
        api.close()

    con = tenant_sql(lake, tenant)
    try:
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
            rows = con.execute(f"SELECT * FROM {table}").fetchall()
            cols = [d[0] for d in con.description]
            ti = cols.index("tenant")
            leaks.extend(f"sql {table}: a row of tenant {r[ti]!r}" for r in rows if r[ti] != tenant)
            check_text(f"sql {table}", rows)
        for escape in (
            f"ATTACH '{lake.duckdb_path}' AS x",
            f"SELECT * FROM read_parquet('{part_paths(lake, 'nodes')[0]}')",
        ):
            try:
                con.execute(escape).fetchall()
                leaks.append(f"sql sandbox lets {escape!r} through")
            except duckdb.Error:
                pass
    finally:
        con.close()
    return leaks


@fuzz_settings(4)  # each example builds a lake; MEMCTL_FUZZ_SCALE=20 runs 80 of them
@given(INBOXES)
def test_no_tenant_ever_sees_another(inbox: dict[str, list]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lake = build_lake(Path(tmp), inbox)
        tenants = sorted(inbox)
        queries = [*(secret_of(t) for t in tenants), "Melanie", "Oslo", "painting", "北京", "project late"]
        for tenant in tenants:
            leaks = _leaks(lake, tenant, [t for t in tenants if t != tenant], queries)
            assert leaks == [], leaks[:10]
        # the property is not vacuous: each tenant finds its own secret
        for tenant in tenants:
            own = recall(secret_of(tenant), tenant, k=5, lake=lake)
            if any(not isinstance(m, str) for m in inbox[tenant]):
                assert own and secret_of(tenant) in _dump([r.to_json() for r in own])


def test_sql_sandbox_holds_only_the_tenant(tmp_path: Path) -> None:
    lake = build_lake(
        tmp_path,
        {
            "alice": [SHARED[0], (TEMPLATES[0], "Caroline", "Oslo")],
            "bob": [SHARED[0], (TEMPLATES[1], "Xiaoming", "北京")],
        },
    )
    con = tenant_sql(lake, "alice")
    assert {r[0] for r in con.execute("SELECT DISTINCT tenant FROM nodes").fetchall()} == {"alice"}
    assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    with pytest.raises(duckdb.Error):
        con.execute("SET enable_external_access = true")
    with pytest.raises(ValueError):
        tenant_sql(lake, "")
    # an unknown tenant sees empty tables, not an error
    assert tenant_sql(lake, "mallory").execute("SELECT count(*) FROM nodes").fetchone()[0] == 0
