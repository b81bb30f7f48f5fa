"""Read API (seed 001): contracts of each function over a real two-tenant lake (DuckDB FTS + igraph)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from r2g.schema import EDGE_TYPES, EDGES, NODE_TYPES, NODES
from raw_store.lake import Lake
from recall.read_api import BAD_ARGS, ReadApi, ReadApiError
from recall.read_views import CompactionGroup, EdgeSummary
from recall.store import tenant_reader
from recall_fixtures import LakeBuilder

T0 = datetime(2023, 5, 8, 10, 0)
MIN = timedelta(minutes=1)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    b = LakeBuilder(tmp_path_factory.mktemp("read_api"))
    ra = b.conversation(
        "alice",
        "conv-a",
        [("m1", "Caroline", "I went hiking in the Alps"), ("m2", "Mum", "小明在公园里踢足球")],
        start=T0,
    )
    a = "alice"
    b.node(
        a,
        "ent_car",
        "Entity",
        "Caroline",
        subtype="PERSON",
        aliases=["Caro", "卡罗琳"],
        first_seen=T0 - timedelta(days=1),
        category="fact",
    )
    b.node(a, "ent_old", "Entity", "Carol Old", status="archived", first_seen=T0 - timedelta(days=2))
    b.node(a, "con_hike", "Concept", "hiking / 徒步", "Topic: hiking", ("hiking", "徒步"), subtype="topic")
    b.node(a, "ep0", "Episode", "archived turn", status="archived", time=T0, conv_id="conv-a", category="episode")
    titles = {1: "Caroline went hiking in the Alps", 2: "小明在公园里踢足球", 3: "talk about hiking boots"}
    for i in range(1, 8):
        b.node(
            a,
            f"ep{i}",
            "Episode",
            titles.get(i, f"small talk {i}"),
            titles.get(i, f"small talk {i}"),
            refs=(ra["m1"],) if i == 1 else (),
            time=T0 + i * MIN,
            conv_id="conv-a",
            msg_id=f"m{i}",
            category="episode",
        )
    b.node(
        a,
        "fact1",
        "Fact",
        "Caroline go hiking",
        "Caroline went hiking",
        ("hiking", "alps"),
        (ra["m1"],),
        T0 - timedelta(hours=12),
        predicate_norm="go_hike",
        negation=False,
        category="fact",
    )
    b.node(a, "fact2", "Fact", "archived hiking fact", "hiking", ("hiking",), time=T0 + MIN / 2, status="archived")
    b.node(a, "fact3", "Fact", "below the archived fact", time=T0 + MIN * 2 / 3)
    b.node(
        a,
        "task1",
        "Task",
        "book the Alps hut",
        "book the Alps hut",
        ("book", "alps"),
        time=T0 + timedelta(days=1),
        status="open",
    )
    for i in range(1, 7):
        b.edge(a, f"ep{i}", f"ep{i + 1}", "TEMPORAL_NEXT", 0.3)
    b.edge(a, "ep1", ra["m1"]["raw_id"], "DERIVED_FROM")
    for child, parent in (("fact1", "ep1"), ("fact2", "ep1"), ("fact3", "fact2"), ("task1", "fact1")):
        b.edge(a, child, parent, "DERIVED_FROM")
    b.edge(a, "fact1", "ent_car", "AGENT", 0.9)
    b.edge(a, "ep1", "ent_car", "MENTIONS", 0.8)
    b.edges.append({"id": "e_dup", "tenant": a, "src": "ep1", "dst": "ent_car", "type": "MENTIONS", "weight": 0.6})
    b.edge(a, "ep2", "ent_old", "MENTIONS")
    for src in ("ep1", "ep3", "fact1"):
        b.edge(a, src, "con_hike", "ABOUT")

    rb = b.conversation("bob", "conv-a", [("m1", "Bob", "hiking is boring")], start=T0)
    b.node(
        "bob",
        "bep1",
        "Episode",
        "hiking is boring",
        "hiking is boring",
        ("hiking", "boring"),
        (rb["m1"],),
        T0,
        conv_id="conv-a",
        msg_id="m1",
        category="episode",
    )
    b.node("bob", "ent_car", "Entity", "Caroline of Bob", aliases=["Caro"])  # same id as alice's, other tenant
    b.node("bob", "bfact", "Fact", "bob fact under an alice id", time=T0)
    b.edge("bob", "bep1", "ent_car", "MENTIONS")
    b.edge("bob", "bfact", "ep1", "DERIVED_FROM")  # dst is alice's Episode id: must never link across
    return b.write()


@pytest.fixture
def api(lake):
    with ReadApi.open(lake, "alice") as handle:
        yield handle


def _ids(views) -> list[str]:
    return [v.id for v in views]


def _bad_args(fn, *args, **kwargs) -> None:
    with pytest.raises(ReadApiError) as err:
        fn(*args, **kwargs)
    assert err.value.code == BAD_ARGS


def test_open_requires_tenant_and_unknown_tenant_reads_empty(lake):
    for blank in ("", "   "):
        with pytest.raises(ValueError):
            ReadApi.open(lake, blank)
    with ReadApi.open(lake, "carol") as nobody:
        assert nobody.list_nodes() == () and nobody.list_edges() == ()
        assert nobody.get_node("ep1") is None
        assert nobody.keyword_search("hiking") == () and nobody.get_neighbors("ep1") == ()
        assert nobody.get_edge_summary("ep1") == EdgeSummary(0, (), ())


def test_list_nodes_timeline_order_and_filters(api):
    nodes = api.list_nodes()
    # time (time_start, else first_seen) ascending, then id; the undated Concept last; archived left out
    assert _ids(nodes) == [
        "ent_car",
        "fact1",
        "fact3",
        "ep1",
        "ep2",
        "ep3",
        "ep4",
        "ep5",
        "ep6",
        "ep7",
        "task1",
        "con_hike",
    ]
    assert "task1" in _ids(nodes)  # a Task's 'open' status is live, not archived
    everything = _ids(api.list_nodes(active_only=False))
    assert everything[:3] == ["ent_old", "ent_car", "fact1"] and {"ep0", "fact2"} <= set(everything)
    assert _ids(api.list_nodes(types=["Entity", "Concept"])) == ["ent_car", "con_hike"]
    assert _ids(api.list_nodes(levels=["episodic"])) == [f"ep{i}" for i in range(1, 8)]
    assert "ep1" not in _ids(api.list_nodes(levels=["semantic"]))
    assert _ids(api.list_nodes(types=["Episode"], time_from=T0 + 2 * MIN, time_to=T0 + 4 * MIN)) == [
        "ep2",
        "ep3",
        "ep4",
    ]  # inclusive bounds
    assert api.list_nodes(types=["NoSuchType"]) == ()
    _bad_args(api.list_nodes, levels=["episode"])
    _bad_args(api.list_nodes, types="Episode")


def test_get_node_none_for_blank_or_unknown_and_keeps_archived(api):
    for missing in ("", "   ", None, "nope", "bep1"):
        assert api.get_node(missing) is None
    ep1 = api.get_node("ep1")
    assert (ep1.type, ep1.level, ep1.time, ep1.archived) == ("Episode", "episodic", T0 + MIN, False)
    assert ep1.children_ids == ("fact1", "fact2") and ep1.parent_ids == ()  # RawChunks are no parents
    assert api.get_node("task1").parent_ids == ("fact1",)
    assert api.get_node("ep1").fields["raw_refs"][0]["offset"] == 0
    archived = api.get_node("fact2")
    assert archived is not None and archived.archived and archived.level == "semantic"


def test_views_are_immutable(api):
    ep1 = api.get_node("ep1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ep1.title = "changed"
    with pytest.raises(TypeError):
        ep1.fields["text"] = "changed"
    with pytest.raises(TypeError):
        ep1.fields["raw_refs"][0]["offset"] = 99  # nested structs are read-only too
    assert isinstance(ep1.children_ids, tuple) and isinstance(ep1.fields["keywords"], tuple)
    brief = api.get_node_brief("ep1")
    with pytest.raises(TypeError):
        brief.key_values["conv_id"] = "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        brief.edge_summary.degree = 0
    for result in (
        api.list_nodes(),
        api.list_edges(),
        api.get_neighbors("ep1"),
        api.get_descendants("ep1"),
        api.expand_from_seeds(["ep1"]),
        api.keyword_search("hiking"),
        api.find_by_name("caro"),
        api.compaction_candidates("Episode"),
        api.get_schema().node_types,
    ):
        assert isinstance(result, tuple)
    assert api.get_node("ep1").fields["text"] == "Caroline went hiking in the Alps"


def test_list_edges_order_filters_and_exclude_internal(api):
    edges = api.list_edges()
    assert [(e.src, e.type, e.dst, e.id) for e in edges] == sorted((e.src, e.type, e.dst, e.id) for e in edges)
    assert "bfact" not in {e.src for e in edges}
    assert any(e.type == "DERIVED_FROM" and e.dst.startswith("raw_") for e in edges)
    assert [e.src for e in api.list_edges(dst="ep1", types=["DERIVED_FROM"])] == ["fact1", "fact2"]
    assert {e.id for e in api.list_edges(src="ep1", dst="ent_car")} == {"e_dup", "e_ep1_MENTIONS_ent_car"}
    semantic = api.list_edges(exclude_internal=True)
    assert semantic and all(e.type != "DERIVED_FROM" for e in semantic)
    assert len(semantic) == len(edges) - 5
    assert api.list_edges(src="") == () and api.list_edges(src="  ") == ()


def test_get_neighbors_direction_types_archived_and_dedup(api):
    ring = api.get_neighbors("ep1")
    # MENTIONS ent_car appears once although two edges hold it; archived fact2 is dropped
    assert [(n.node.id, n.edge_type, n.direction) for n in ring] == [
        ("ent_car", "MENTIONS", "out"),
        ("fact1", "DERIVED_FROM", "in"),
        ("ep2", "TEMPORAL_NEXT", "out"),
        ("con_hike", "ABOUT", "out"),
    ]
    assert _ids(n.node for n in api.get_neighbors("ep1", direction="in")) == ["fact1"]
    assert _ids(n.node for n in api.get_neighbors("ep1", edge_types=["TEMPORAL_NEXT", "ABOUT"])) == ["ep2", "con_hike"]
    assert "ent_old" not in _ids(n.node for n in api.get_neighbors("ep2"))
    assert api.get_neighbors("") == () and api.get_neighbors("nope") == ()
    _bad_args(api.get_neighbors, "ep1", direction="sideways")


def test_get_descendants_bfs_depth_and_active_only(api):
    assert _ids(api.get_descendants("ep1")) == ["fact1", "task1"]  # fact2 archived: it and fact3 hidden
    assert _ids(api.get_descendants("ep1", active_only=False)) == ["fact1", "fact2", "fact3", "task1"]
    assert _ids(api.get_descendants("ep1", max_depth=1)) == ["fact1"]
    assert api.get_descendants("ep1", max_depth=0) == ()
    assert api.get_descendants("task1") == () and api.get_descendants("") == ()
    _bad_args(api.get_descendants, "ep1", max_depth=-1)


def test_expand_from_seeds_hops_children_and_exclude_internal(api):
    assert _ids(api.expand_from_seeds(["ep3"], hops=0)) == ["ep3"]
    assert _ids(api.expand_from_seeds(["ep3"])) == ["ep3", "ep2", "ep4", "con_hike"]
    one_hop = _ids(api.expand_from_seeds(["ep1"]))
    assert one_hop[0] == "ep1" and set(one_hop) == {"ep1", "ent_car", "fact1", "ep2", "con_hike"}
    assert "task1" not in one_hop and "task1" in _ids(api.expand_from_seeds(["ep1"], hops=2))
    # excluding DERIVED_FROM drops the children, even with include_children
    assert "fact1" not in _ids(api.expand_from_seeds(["ep1"], exclude_internal=True))
    assert _ids(api.expand_from_seeds(["ep1"], hops=2, edge_types=["TEMPORAL_NEXT"], include_children=False)) == [
        "ep1",
        "ep2",
        "ep3",
    ]
    assert _ids(api.expand_from_seeds(["ep1"], within={"ep2"})) == ["ep1", "ep2"]
    assert _ids(api.expand_from_seeds(["nope", "ep1", "ep1", "", "bep1"], hops=0)) == ["ep1"]
    _bad_args(api.expand_from_seeds, "ep1")
    _bad_args(api.expand_from_seeds, ["ep1"], hops=-1)


def test_keyword_search_scores_order_and_empty_query(api):
    hits = api.keyword_search("hiking Alps")
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    assert {h.node.id for h in hits if h.score == 1.0} == {"ep1", "fact1"}
    by_id = {h.node.id: h.score for h in hits}
    assert by_id["con_hike"] == 0.5 and by_id["task1"] == 0.5 and by_id["ep3"] == 0.5
    assert "fact2" not in by_id and "bep1" not in by_id  # archived; other tenant
    assert all(h.score_mode == "keyword" and h.bm25 > 0 for h in hits)
    assert len(api.keyword_search("hiking Alps", k=1)) == 1
    assert _ids(h.node for h in api.keyword_search("hiking", types=["Concept"])) == ["con_hike"]
    assert _ids(h.node for h in api.keyword_search("足球")) == ["ep2"]
    for empty in ("", "   ", "the of and"):
        assert api.keyword_search(empty) == ()
    _bad_args(api.keyword_search, "hiking", k=-1)


def test_find_by_name_title_and_aliases_in_timeline_order(api):
    assert _ids(api.find_by_name("CAROL")) == ["ent_car", "fact1", "ep1"]  # ent_old is archived
    assert _ids(api.find_by_name("卡罗琳")) == ["ent_car"]
    assert _ids(api.find_by_name("caro", types=["Entity"])) == ["ent_car"]
    assert api.find_by_name("") == () and api.find_by_name("  ") == () and api.find_by_name("nobody") == ()


def test_get_edge_summary_counts_and_recent_sample(api):
    s = api.get_edge_summary("ep1")
    assert s.degree == 5
    assert [(r.relation, r.direction, r.count) for r in s.relations] == [
        ("MENTIONS", "out", 2),
        ("ABOUT", "out", 1),
        ("DERIVED_FROM", "in", 1),
        ("TEMPORAL_NEXT", "out", 1),
    ]
    assert [n.id for n in s.sample_neighbors] == ["ep2", "fact1", "ent_car", "con_hike"]
    assert s.sample_neighbors[0].to_time == T0 + 2 * MIN
    assert [n.id for n in api.get_edge_summary("ep1", limit=2).sample_neighbors] == ["ep2", "fact1"]
    assert api.get_edge_summary("ep1", edge_types=["ABOUT"]).degree == 1
    assert api.get_edge_summary("nope") == EdgeSummary(0, (), ()) == api.get_edge_summary("")
    _bad_args(api.get_edge_summary, "ep1", limit=-1)


def test_get_node_brief(api):
    brief = api.get_node_brief("ep1")
    assert (brief.id, brief.type, brief.level, brief.table_name) == ("ep1", "Episode", "episodic", "nodes")
    assert brief.summary == "Caroline went hiking in the Alps"
    assert dict(brief.key_values) == {"conv_id": "conv-a", "msg_id": "m1"}
    assert "raw_refs" not in brief.row_values and brief.row_values["category"] == "episode"
    assert brief.child_count == 1  # fact2 is archived
    assert brief.edge_summary == api.get_edge_summary("ep1")
    assert api.get_node_brief("ep1", include_edge_summary=False).edge_summary is None
    assert dict(api.get_node_brief("ent_car").key_values) == {
        "subtype": "PERSON",
        "title": "Caroline",
        "aliases": ("Caro", "卡罗琳"),
    }
    for missing in ("", "nope", "fact2", "bep1"):
        assert api.get_node_brief(missing) is None


def test_compaction_candidates_groups_and_thresholds(api):
    groups = api.compaction_candidates("Episode")
    assert groups == (
        CompactionGroup("conv-a", 0, ("ep1", "ep2", "ep3"), 3),
        CompactionGroup("conv-a", 0, ("ep4", "ep5", "ep6"), 3),
    )  # ep7 waits; ep0 archived; no bob
    assert api.compaction_candidates("Episode", keep_recent_leaves=1) == groups
    assert api.compaction_candidates("Episode", keep_recent_leaves=2) == ()  # 5 left < threshold 6
    assert api.compaction_candidates("Episode", threshold=8) == ()
    assert [g.child_ids for g in api.compaction_candidates("Episode", fan_in=2)] == [
        ("ep1", "ep2"),
        ("ep3", "ep4"),
        ("ep5", "ep6"),
    ]
    assert api.compaction_candidates("Episode", group_by="concept", threshold=2, fan_in=2) == (
        CompactionGroup("con_hike", 0, ("ep1", "ep3"), 2),
    )
    for node_type, depth in (("Entity", 0), ("Bogus", 0), ("Episode", 1), ("Episode", 6)):
        assert api.compaction_candidates(node_type, depth) == ()
    _bad_args(api.compaction_candidates, "Episode", -1)
    _bad_args(api.compaction_candidates, "Episode", fan_in=1)
    _bad_args(api.compaction_candidates, "Episode", group_by="day")


def test_get_schema_matches_table_schemas(api):
    schema = api.get_schema()
    assert schema.node_columns == tuple(NODES.names) and schema.edge_columns == tuple(EDGES.names)
    assert [s.type for s in schema.node_types] == list(NODE_TYPES) and schema.edge_types == EDGE_TYPES
    assert schema.internal_edge_types == ("DERIVED_FROM", "SEMANTIC_CONTAINS")
    for spec in schema.node_types:
        assert {"id", "tenant", "type", "title"} <= set(spec.required_columns) <= set(NODES.names)
        assert set(spec.primary_key_columns) <= set(NODES.names) and spec.table_columns == tuple(NODES.names)
    modes = {s.type: s.compression_mode for s in schema.node_types}
    assert modes["Episode"] == "hierarchical" and set(modes.values()) == {"hierarchical", "none"}


def test_tenant_isolation(lake, api):
    with ReadApi.open(lake, "bob") as bob:
        assert _ids(bob.list_nodes()) == ["bep1", "bfact", "ent_car"]
        assert bob.get_node("ep1") is None and bob.get_node("ent_car").title == "Caroline of Bob"
        assert _ids(n.node for n in bob.get_neighbors("ent_car")) == ["bep1"]
        assert bob.get_descendants("ep1") == ()
        assert _ids(h.node for h in bob.keyword_search("hiking")) == ["bep1"]
        assert _ids(bob.find_by_name("caro")) == ["ent_car"] and bob.compaction_candidates("Episode") == ()
    assert api.get_node("ent_car").title == "Caroline"  # same id, alice's row
    assert _ids(n.node for n in api.get_neighbors("ent_car")) == ["fact1", "ep1"]
    assert "bfact" not in api.get_node("ep1").children_ids
    assert api.keyword_search("boring") == ()
    assert not {"bep1", "bfact"} & set(_ids(api.list_nodes(active_only=False)))


def test_scoped_reader_sees_only_its_tenant(lake):
    reader = tenant_reader(lake, "bob")
    try:
        assert reader.scoped("SELECT count(*) FROM nodes")[0][0] == 3
        assert reader.scoped("WITH x AS (SELECT id FROM edges) SELECT count(*) FROM x")[0][0] == 2
        with pytest.raises(ValueError):
            reader.scoped("SELECT 1", tables=("nodes; DROP",))
        with pytest.raises(ValueError):
            reader.scoped("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r")
    finally:
        reader.close()
