"""Communities → Concepts (jobs.communities): co-occurrence graph, Leiden, stable ids, labels, Concept/ABOUT rows."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path

import igraph
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.communities import E_COMMUNITY_CONFIG, CommunityConfig, cooccurrence_graph, detect_communities
from jobs.community_concepts import PROVENANCE, community_id, concept_id, jaccard, match_previous
from r2g.ids import edge_id
from r2g.schema import COMMUNITIES, EDGES, NODES

T0 = datetime(2023, 5, 1, 10, 0)
HIKING = {"trail": 9, "mountain": 7, "Alps": 5, "boots": 5, "tent": 3}
PAINTING = {"canvas": 8, "brush": 6, "gallery": 4, "easel": 2, "oil paint": 2}
MUSIC = {"guitar": 6, "concert": 5, "band": 4, "song": 3, "drum": 1}


def nid(tenant: str, title: str) -> str:
    return f"{tenant}:{title}"


class Graph:
    """A hand-built NODES/EDGES pair: Episodes mentioning Entities, a Fact per Episode with its speaker AGENT."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.edges: list[dict] = []
        self.n_eps = 0

    def entity(self, tenant: str, title: str, mentions: int = 1, subtype: str = "OBJECT") -> str:
        i = nid(tenant, title)
        self.nodes.setdefault(
            i,
            {
                "id": i,
                "tenant": tenant,
                "type": "Entity",
                "subtype": subtype,
                "title": title,
                "keywords": [title.lower()],
                "lang": "en",
                "mentions": mentions,
                "first_seen": T0,
                "last_seen": T0,
                "status": "active",
            },
        )
        return i

    def edge(self, tenant: str, src: str, type: str, dst: str) -> None:
        self.edges.append(
            {
                "id": edge_id(tenant, src, type, dst),
                "tenant": tenant,
                "src": src,
                "dst": dst,
                "type": type,
                "weight": 1.0,
            }
        )

    def episode(self, tenant: str, titles: list[str], speaker: str | None = "Caroline", day: int = 0) -> str:
        self.n_eps += 1
        at = T0 + timedelta(days=day)
        ep = self.nodes.setdefault(
            f"{tenant}:ep{self.n_eps}",
            {
                "id": f"{tenant}:ep{self.n_eps}",
                "tenant": tenant,
                "type": "Episode",
                "title": "turn",
                "first_seen": at,
                "last_seen": at,
                "status": "active",
            },
        )["id"]
        for t in titles:
            e = nid(tenant, t)
            self.nodes[e]["first_seen"] = min(self.nodes[e]["first_seen"], at)
            self.nodes[e]["last_seen"] = max(self.nodes[e]["last_seen"], at)
            self.edge(tenant, ep, "MENTIONS", e)
        self.edge(tenant, ep, "DERIVED_FROM", f"raw_{self.n_eps}")  # to a RawChunk: not a node
        if speaker:
            fact = self.nodes.setdefault(
                f"{ep}:f", {"id": f"{ep}:f", "tenant": tenant, "type": "Fact", "title": "says", "status": "active"}
            )["id"]
            self.edge(tenant, fact, "DERIVED_FROM", ep)
            self.edge(tenant, fact, "AGENT", self.entity(tenant, speaker, 500, "PERSON"))
        return ep

    def cluster(self, tenant: str, titles: dict[str, int], day: int = 0) -> None:
        """Five Episodes, each mentioning a sliding window of three of the cluster's entities."""
        names = list(titles)
        for t, m in titles.items():
            self.entity(tenant, t, m)
        for k in range(len(names)):
            self.episode(tenant, [names[(k + d) % len(names)] for d in range(3)], day=day + k)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        return (
            pa.Table.from_pylist(list(self.nodes.values()), schema=NODES),
            pa.Table.from_pylist(self.edges, schema=EDGES),
        )


def two_tenants() -> Graph:
    g = Graph()
    g.cluster("t1", HIKING)
    g.cluster("t1", PAINTING, day=10)
    g.episode("t1", ["tent", "canvas"], day=20)  # one weak bridge
    g.entity("t1", "2023-05-01", 40, "TIME")
    g.episode("t1", ["trail", "2023-05-01", "canvas"], day=21)  # dates are never items
    g.entity("t1", "pair a", 1)
    g.entity("t1", "pair b", 1)
    g.episode("t1", ["pair a", "pair b"], speaker=None, day=22)  # a pair is below min_size
    g.cluster("t2", PAINTING)  # same titles, other tenant
    g.cluster("t2", MUSIC, day=5)
    g.edge("t1", "t1:ep1", "MENTIONS", nid("t2", "guitar"))  # a stray cross-tenant edge
    return g


@pytest.fixture(scope="module")
def tables() -> tuple[pa.Table, pa.Table]:
    return two_tenants().tables()


@pytest.fixture(scope="module")
def result(tables):
    return detect_communities(*tables)


def members(tenant: str, titles) -> list[str]:
    return sorted(nid(tenant, t) for t in titles)


def shuffled(table: pa.Table, seed: int) -> pa.Table:
    order = list(range(table.num_rows))
    random.Random(seed).shuffle(order)
    return table.take(order)


# ------------------------------------------------------------------------------------------ communities


def test_two_topic_communities_per_tenant_with_labels(result) -> None:
    rows = [{k: r[k] for k in ("tenant", "level", "members", "label", "size")} for r in result.communities.to_pylist()]
    expected = [
        {"tenant": "t1", "level": 0, "members": members("t1", HIKING), "label": "trail, mountain, Alps", "size": 5},
        {"tenant": "t1", "level": 0, "members": members("t1", PAINTING), "label": "canvas, brush, gallery", "size": 5},
        {"tenant": "t2", "level": 0, "members": members("t2", MUSIC), "label": "guitar, concert, band", "size": 5},
        {"tenant": "t2", "level": 0, "members": members("t2", PAINTING), "label": "canvas, brush, gallery", "size": 5},
    ]
    key = lambda r: (r["tenant"], r["members"])  # noqa: E731
    assert sorted(rows, key=key) == sorted(expected, key=key)
    assert result.communities.schema == COMMUNITIES
    for r in result.communities.to_pylist():
        assert r["id"] == community_id(r["tenant"], 0, r["members"])
        assert r["concept_id"] == concept_id(r["tenant"], r["id"])
        assert 0.3 < r["modularity"] < 1


def test_speaker_hub_dates_and_pairs_are_no_members(result) -> None:
    assert result.hubs == {"t1": (nid("t1", "Caroline"),), "t2": (nid("t2", "Caroline"),)}
    everyone = {m for ms in result.communities.column("members").to_pylist() for m in ms}
    assert not everyone & {nid("t1", "Caroline"), nid("t1", "2023-05-01"), nid("t1", "pair a"), nid("t1", "pair b")}


def test_without_the_hub_cap_the_speaker_joins_a_community(tables) -> None:
    res = detect_communities(*tables, config=CommunityConfig(hub_share=1.0, hub_min_degree=10_000))
    assert res.hubs == {}
    everyone = {m for ms in res.communities.column("members").to_pylist() for m in ms}
    assert nid("t1", "Caroline") in everyone


def test_concept_nodes(result) -> None:
    concepts = {r["title"] + "@" + r["tenant"]: r for r in result.nodes.to_pylist()}
    assert result.nodes.schema == NODES
    assert len(concepts) == 4
    c = concepts["trail, mountain, Alps@t1"]
    assert c["id"] == concept_id("t1", community_id("t1", 0, members("t1", HIKING)))
    assert (c["type"], c["subtype"], c["status"], c["provenance"]) == ("Concept", "community", "active", PROVENANCE)
    assert c["text"] == "Topic: trail, mountain, Alps (5 members)"
    assert c["keywords"] == ["trail", "mountain", "alps", "boots", "tent"]
    assert c["entities"] == ["trail", "mountain", "Alps", "boots", "tent"]
    assert (c["first_seen"], c["last_seen"]) == (T0, T0 + timedelta(days=21))  # trail recurs on day 21
    assert (c["time_start"], c["time_end"]) == (c["first_seen"], c["last_seen"])
    assert c["frequency"] == 7  # five cluster episodes, the bridge, the date episode
    assert c["lang"] == "en" and c["raw_refs"] == []
    assert 0.5 < c["importance"] <= 1 and 0.5 < c["confidence"] <= 1


def test_about_edges_member_to_concept(result) -> None:
    comm = result.communities.to_pylist()
    expected = sorted(edge_id(r["tenant"], m, "ABOUT", r["concept_id"]) for r in comm for m in r["members"])
    assert result.edges.column("id").to_pylist() == expected
    assert result.edges.schema == EDGES
    for e in result.edges.to_pylist():
        assert e["type"] == "ABOUT" and e["provenance"] == PROVENANCE
        assert e["src"].startswith(e["tenant"] + ":")
        assert 0 < e["weight"] == e["confidence"] <= 1
    by_src = {e["src"]: e for e in result.edges.to_pylist()}
    assert by_src[nid("t1", "boots")]["weight"] == 1.0  # all its co-occurrences inside its topic
    assert by_src[nid("t1", "tent")]["weight"] < 1.0  # the bridge to canvas


def test_nothing_links_two_tenants(tables, result) -> None:
    tenant_of = {r["id"]: r["tenant"] for r in tables[0].to_pylist() + result.nodes.to_pylist()}
    for c in result.communities.to_pylist():
        assert {tenant_of[m] for m in c["members"]} == {c["tenant"]}
        assert tenant_of[c["concept_id"]] == c["tenant"]
    for e in result.edges.to_pylist():
        assert tenant_of[e["src"]] == tenant_of[e["dst"]] == e["tenant"]


def test_tenants_are_computed_independently(tables, result) -> None:
    nodes, edges = tables
    for t in ("t1", "t2"):
        alone = detect_communities(
            nodes.filter(pa.compute.field("tenant") == t), edges.filter(pa.compute.field("tenant") == t)
        )
        assert alone.communities.equals(result.communities.filter(pa.compute.field("tenant") == t))
        assert alone.nodes.equals(result.nodes.filter(pa.compute.field("tenant") == t))
        assert alone.edges.equals(result.edges.filter(pa.compute.field("tenant") == t))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffled_rows_same_output(tables, result, seed) -> None:
    again = detect_communities(shuffled(tables[0], seed), shuffled(tables[1], seed + 100))
    assert again.communities.equals(result.communities)
    assert again.nodes.equals(result.nodes)
    assert again.edges.equals(result.edges)
    assert again.hubs == result.hubs


def test_rerun_over_its_own_output_changes_nothing(tables, result) -> None:
    nodes = pa.concat_tables([tables[0], result.nodes])
    edges = pa.concat_tables([tables[1], result.edges])
    again = detect_communities(
        nodes, edges, previous=result.communities, config=CommunityConfig(member_types=("Entity", "Concept"))
    )
    assert again.communities.equals(result.communities)
    assert again.nodes.equals(result.nodes)
    assert again.edges.equals(result.edges)


def test_igraph_rng_is_restored(tables) -> None:
    def draw() -> list:
        random.seed(7)
        return igraph.Graph.Erdos_Renyi(n=30, p=0.2).get_edgelist()

    before = draw()
    detect_communities(*tables)
    assert draw() == before  # igraph draws from the `random` module again


# ------------------------------------------------------------------------------------------ stable ids


def test_small_membership_change_keeps_ids(result) -> None:
    g = two_tenants()
    g.entity("t1", "compass", 2)
    g.episode("t1", ["trail", "mountain", "compass"], day=30)
    g.episode("t1", ["Alps", "compass", "boots"], day=31)
    res = detect_communities(*g.tables(), previous=result.communities)
    old = {r["label"] + r["tenant"]: r for r in result.communities.to_pylist()}
    new = {r["label"] + r["tenant"]: r for r in res.communities.to_pylist()}
    assert old.keys() == new.keys()
    hiking = new["trail, mountain, Alpst1"]
    assert hiking["members"] == members("t1", [*HIKING, "compass"])
    assert jaccard(frozenset(hiking["members"]), frozenset(old["trail, mountain, Alpst1"]["members"])) == 5 / 6
    for k in old:
        assert (new[k]["id"], new[k]["concept_id"]) == (old[k]["id"], old[k]["concept_id"])
    assert set(res.nodes.column("status").to_pylist()) == {"active"}
    assert res.nodes.column("id").to_pylist() == result.nodes.column("id").to_pylist()


def test_big_membership_change_gets_a_new_id_and_archives_the_old_concept(result) -> None:
    g = Graph()
    g.cluster("t1", HIKING)
    g.cluster("t1", {"canvas": 8, "brush": 6, "sculpture": 4, "clay": 3, "kiln": 2}, day=10)  # 2 of 8 shared
    g.cluster("t2", PAINTING)
    g.cluster("t2", MUSIC, day=5)
    res = detect_communities(*g.tables(), previous=result.communities)
    old = {r["label"] + r["tenant"]: r for r in result.communities.to_pylist()}
    new = {r["label"] + r["tenant"]: r for r in res.communities.to_pylist()}
    assert new["trail, mountain, Alpst1"]["id"] == old["trail, mountain, Alpst1"]["id"]
    fresh = new["canvas, brush, sculpturet1"]
    assert fresh["id"] == community_id("t1", 0, fresh["members"]) != old["canvas, brush, galleryt1"]["id"]
    archived = [r for r in res.nodes.to_pylist() if r["status"] == "archived"]
    assert [(r["id"], r["title"], r["tenant"]) for r in archived] == [
        (old["canvas, brush, galleryt1"]["concept_id"], "canvas, brush, gallery", "t1")
    ]
    assert not [e for e in res.edges.to_pylist() if e["dst"] == archived[0]["id"]]


def test_match_previous_is_one_to_one_best_first() -> None:
    cur = [frozenset("abcd"), frozenset("abce"), frozenset("xyz")]
    prev = [("p1", frozenset("abcd")), ("p2", frozenset("xy"))]
    assert match_previous(cur, prev, 0.5) == {0: "p1", 2: "p2"}  # abce (J=0.6) loses p1 to abcd (J=1)
    assert match_previous(cur, prev, 0.7) == {0: "p1"}


def test_fresh_id_never_reuses_a_retired_id() -> None:
    g = Graph()
    g.cluster("t1", HIKING)
    first = detect_communities(*g.tables())
    (row,) = first.communities.to_pylist()
    # the previous community now holds other members, so nothing matches it, but its id hashes HIKING's members
    prev = pa.Table.from_pylist([{**row, "members": members("t1", ["x", "y", "z"])}], schema=COMMUNITIES)
    res = detect_communities(*g.tables(), previous=prev)
    (new,) = res.communities.to_pylist()
    assert new["members"] == row["members"] and new["id"] != row["id"]
    assert sorted(res.nodes.column("status").to_pylist()) == ["active", "archived"]


# ------------------------------------------------------------------------------------------ graph and config


def test_cooccurrence_counts_shared_contexts() -> None:
    g = Graph()
    for t in ("a", "b", "c"):
        g.entity("t", t)
    g.episode("t", ["a", "b"], speaker=None)
    g.episode("t", ["a", "b", "c"], speaker=None)
    nodes, edges = g.tables()
    cg = cooccurrence_graph("t", nodes.to_pylist(), edges.to_pylist(), CommunityConfig(hub_min_degree=5))
    assert cg.vertices == ["t:a", "t:b", "t:c"]
    assert cg.weights == {(0, 1): 2, (0, 2): 1, (1, 2): 1}
    assert cg.contexts["t:a"] == frozenset({"t:ep1", "t:ep2"})


def test_facts_can_be_members() -> None:
    g = Graph()
    g.cluster("t", HIKING)
    res = detect_communities(*g.tables(), config=CommunityConfig(member_types=("Entity", "Fact")))
    everyone = {m for ms in res.communities.column("members").to_pylist() for m in ms}
    assert any(m.endswith(":f") for m in everyone)


@pytest.mark.parametrize(
    "bad",
    [
        dict(member_types=("Episode",)),
        dict(member_types=()),
        dict(hub_share=0),
        dict(keep_jaccard=1.5),
        dict(min_size=1),
    ],
)
def test_bad_config_is_refused(bad) -> None:
    with pytest.raises(ValueError, match=E_COMMUNITY_CONFIG):
        CommunityConfig(**bad)


def test_empty_input() -> None:
    res = detect_communities(NODES.empty_table(), EDGES.empty_table())
    assert (res.communities.num_rows, res.nodes.num_rows, res.edges.num_rows, res.hubs) == (0, 0, 0, {})


episodes = st.lists(
    st.tuples(st.sampled_from(["ta", "tb"]), st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True)),
    min_size=1,
    max_size=30,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes, st.integers(0, 1000))
def test_property_partition_is_sound_and_order_free(eps, seed) -> None:
    g = Graph()
    for tenant, ents in eps:
        for e in ents:
            g.entity(tenant, f"e{e}", e + 1)
        g.episode(tenant, [f"e{e}" for e in ents], speaker=None)
    nodes, edges = g.tables()
    cfg = CommunityConfig(min_size=2)
    res = detect_communities(nodes, edges, config=cfg)
    seen: set[str] = set()
    for c in res.communities.to_pylist():
        assert c["size"] == len(c["members"]) >= 2 and c["members"] == sorted(c["members"])
        assert all(m.startswith(c["tenant"] + ":") for m in c["members"])
        assert not seen & set(c["members"])
        seen |= set(c["members"])
    assert res.edges.num_rows == len(seen)
    assert res.nodes.num_rows == res.communities.num_rows
    again = detect_communities(shuffled(nodes, seed), shuffled(edges, seed), config=cfg)
    assert again.communities.equals(res.communities) and again.edges.equals(res.edges)
    assert again.nodes.equals(res.nodes)
    rerun = detect_communities(nodes, edges, previous=res.communities, config=cfg)
    assert rerun.communities.equals(res.communities)


# ------------------------------------------------------------------------------------------ real data

EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "locomo_dev.json"


def test_runs_on_a_locomo_slice(tmp_path) -> None:
    if not EVAL.exists():
        pytest.skip(f"{EVAL} is not beside the repository")
    from r2g.pipeline import run_partition
    from raw_store.cas import RawStore
    from raw_store.ingest import ingest_bytes

    msgs = ingest_bytes(EVAL.read_bytes(), "locomo_dev.json", "eval", RawStore(tmp_path)).messages
    msgs = msgs.sort_by([("tenant", "ascending"), ("conv_id", "ascending"), ("seq", "ascending")])
    tenant = msgs.column("tenant")[0].as_py()
    msgs = msgs.filter(pa.compute.field("tenant") == tenant).slice(0, 150)
    graph = run_partition(msgs, None)
    res = detect_communities(graph.nodes, graph.edges)
    names = set(msgs.column("speaker").to_pylist())
    speakers = {
        r["id"]
        for r in graph.nodes.select(["id", "type", "subtype", "title"]).to_pylist()
        if (r["type"], r["subtype"]) == ("Entity", "PERSON") and r["title"] in names
    }
    assert len(speakers) == 2 and set(res.hubs[tenant]) == speakers  # the two speakers of every turn
    assert res.communities.num_rows >= 2
    assert not speakers & {m for ms in res.communities.column("members").to_pylist() for m in ms}
    ids = set(graph.nodes.column("id").to_pylist())
    assert all(e["src"] in ids for e in res.edges.to_pylist())
