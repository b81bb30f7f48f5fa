"""recall(): BM25 seeds, graph expansion, tenant isolation, verified citations, trace."""

from __future__ import annotations

from datetime import datetime

import pytest

from raw_store.lake import Lake
from recall import IndexNotBuilt, RecallConfig, ranked_turns, recall
from recall.engine import query_keywords
from recall_fixtures import LakeBuilder

T0 = datetime(2023, 5, 8, 13, 56)


def _world(root) -> tuple[Lake, dict]:
    b = LakeBuilder(root)
    ra = b.conversation(
        "alice",
        "conv-a",
        [
            ("D1:1", "Caroline", "I went to an LGBTQ support group yesterday and it was powerful."),
            ("D1:2", "Melanie", "That sounds great! I painted a sunrise over the lake last week."),
            ("D1:3", "Caroline", "小明在公园里踢足球。"),
            ("D1:4", "Melanie", "My kids love dinosaurs and camping."),
        ],
        start=T0,
    )
    b.node(
        "alice",
        "ep1",
        "Episode",
        "support group",
        "Caroline went to an LGBTQ support group",
        ("lgbtq", "support", "group"),
        (ra["D1:1"],),
        T0,
        conv_id="conv-a",
        msg_id="D1:1",
    )
    b.node(
        "alice",
        "ep2",
        "Episode",
        "painting sunrise",
        "Melanie painted a sunrise",
        ("paint", "sunrise"),
        (ra["D1:2"],),
        T0,
        conv_id="conv-a",
        msg_id="D1:2",
    )
    b.node("alice", "ep3", "Episode", "小明踢足球", "小明在公园里踢足球", ("小明", "足球", "公园"), (ra["D1:3"],), T0)
    b.node("alice", "ep4", "Episode", "kids", "Melanie's kids", ("kids",), (ra["D1:4"],), T0)
    b.node(
        "alice",
        "fact1",
        "Fact",
        "go support group",
        "Caroline attend LGBTQ support group",
        ("attend", "lgbtq"),
        (ra["D1:1"],),
        T0,
        predicate_norm="attend",
    )
    b.node("alice", "ent_car", "Entity", "Caroline", subtype="PERSON")
    b.node("alice", "ent_dino", "Entity", "dinosaurs", subtype="OBJECT")
    b.edge("alice", "fact1", "ent_car", "AGENT", 0.9)
    b.edge("alice", "ep1", "fact1", "SUPPORTS", 0.9)
    b.edge("alice", "ep4", "ent_dino", "MENTIONS", 0.8)
    b.edge("alice", "ep1", "ep2", "TEMPORAL_NEXT", 0.3)
    b.edge("alice", "ep1", ra["D1:1"]["raw_id"], "DERIVED_FROM", 1.0)
    rb = b.conversation(
        "bob",
        "conv-b",
        [
            ("D1:1", "Bob", "I also went to an LGBTQ support group, it was awful."),
            ("D1:2", "Bob", "error 0x00000709 when printing from D:\\photos\\cat.png"),
        ],
        start=T0,
    )
    b.node(
        "bob",
        "bep1",
        "Episode",
        "support group",
        "Bob went to an LGBTQ support group",
        ("lgbtq", "support", "group"),
        (rb["D1:1"],),
        T0,
    )
    b.node("bob", "bent", "Entity", "Caroline")
    b.edge("bob", "bep1", "bent", "MENTIONS", 1.0)
    return b.write(), {"alice": ra, "bob": rb}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Lake, dict]:
    """Built once for the module: the tests only read it (the one that corrupts a blob builds its own)."""
    return _world(tmp_path_factory.mktemp("world"))


@pytest.fixture
def lake(world) -> Lake:
    return world[0]


@pytest.fixture
def refs(world) -> dict:
    """tenant → msg_id → raw_ref of the stored turns."""
    return world[1]


def _ids(results) -> list[str]:
    return [r.node_id for r in results]


def test_query_keywords_drop_stopwords_and_segment_chinese():
    assert query_keywords("When did Caroline go to the LGBTQ support group?") == [
        "caroline",
        "go",
        "lgbtq",
        "support",
        "group",
    ]
    assert "足球" in query_keywords("小明在哪里踢足球")
    assert query_keywords("what is the") == []


def test_english_bm25_seed_with_verified_byte_exact_citation(lake, refs):
    results = recall("LGBTQ support group", "alice", k=5, lake=lake)
    assert results[0].node_id in ("ep1", "fact1")
    top = next(r for r in results if r.node_id == "ep1")
    assert top.breakdown["bm25"] > 0
    c = top.citations[0]
    ref = refs["alice"]["D1:1"]
    assert (c.raw_id, c.offset, c.length) == (ref["raw_id"], ref["offset"], ref["length"])
    assert c.excerpt == "I went to an LGBTQ support group yesterday and it was powerful."
    assert (c.conv_id, c.msg_id, c.speaker, c.verified) == ("conv-a", "D1:1", "Caroline", True)
    assert c.ts == T0.isoformat()


def test_chinese_bm25_seed(lake):
    results = recall("小明在哪里踢足球？", "alice", k=3, lake=lake)
    assert results[0].node_id == "ep3"
    assert results[0].citations[0].excerpt == "小明在公园里踢足球。"


def test_one_hop_expansion_brings_neighbour_with_evidence(lake):
    results = recall("dinosaurs kids", "alice", k=10, lake=lake, expand_depth=0, types=["Entity", "Episode"])
    assert "ent_dino" in _ids(results)  # found by BM25 on its title
    results = recall("kids", "alice", k=10, lake=lake, expand_depth=0)
    assert "ent_dino" not in _ids(results)
    results = recall("kids", "alice", k=10, lake=lake, expand_depth=1)
    dino = next(r for r in results if r.node_id == "ent_dino")
    assert dino.breakdown["graph"] > 0 and dino.breakdown["bm25"] == 0
    assert dino.evidence == [{"src": "ep4", "type": "MENTIONS", "dst": "ent_dino"}]


@pytest.mark.parametrize("method", ["ppr", "spread"])
def test_two_hops_reach_further_and_hubs_are_not_expanded(lake, method):
    # the hops of stage C alone: session seeds (recall.hop) would make ep1, ep2's neighbour, a seed
    one = recall(
        "sunrise",
        "alice",
        k=20,
        lake=lake,
        expand_depth=1,
        config=RecallConfig(graph_method=method, session_weight=0.0),
    )
    assert "fact1" not in _ids(one)
    two = recall(
        "sunrise",
        "alice",
        k=20,
        lake=lake,
        expand_depth=2,
        config=RecallConfig(graph_method=method, session_weight=0.0),
    )
    fact = next(r for r in two if r.node_id == "fact1")  # ep2 -TEMPORAL_NEXT- ep1 -SUPPORTS- fact1
    assert fact.evidence == [{"src": "ep1", "type": "SUPPORTS", "dst": "fact1"}]
    cfg = RecallConfig(hub_degree=0, session_weight=0.0)  # every node counts as a hub: nothing expands
    hubs = recall("sunrise", "alice", k=20, lake=lake, expand_depth=2, config=cfg)
    assert all(r.breakdown["graph"] == 0 for r in hubs)


def test_hub_is_neither_reached_nor_walked_through(lake):
    # ep1 touches two nodes: with hub_degree=1 it is a hub, so ep2's walk stops before it.
    results = recall(
        "sunrise", "alice", k=20, lake=lake, expand_depth=2, config=RecallConfig(hub_degree=1, session_weight=0.0)
    )
    assert "ep1" not in _ids(results) and "fact1" not in _ids(results)


def test_edge_type_filter(lake):
    cfg = RecallConfig(expand_edge_types=frozenset({"AGENT"}))
    assert "ent_dino" not in _ids(recall("kids", "alice", k=10, lake=lake, config=cfg))


def test_tenant_isolation(lake, refs):
    a = recall("LGBTQ support group Caroline", "alice", k=20, lake=lake, expand_depth=2)
    b = recall("LGBTQ support group Caroline", "bob", k=20, lake=lake, expand_depth=2)
    a_raw = refs["alice"]["D1:1"]["raw_id"]
    b_raw = refs["bob"]["D1:1"]["raw_id"]
    assert set(_ids(a)) <= {"ep1", "ep2", "ep3", "ep4", "fact1", "ent_car", "ent_dino", a_raw}
    assert set(_ids(b)) <= {"bep1", "bent", b_raw} and "bep1" in _ids(b)
    assert all(c.raw_id == a_raw for r in a for c in r.citations)
    assert all(c.raw_id == b_raw for r in b for c in r.citations)
    assert all("Bob" not in c.excerpt and "awful" not in c.excerpt for r in a for c in r.citations)
    for r in a:
        for e in r.evidence:
            assert not {e["src"], e["dst"]} & {"bep1", "bent"}


def test_corrupted_blob_is_never_served(tmp_path):
    lake, refs = _world(tmp_path)
    ref = refs["alice"]["D1:1"]
    path = next(p for p in lake.raw.rglob("*.blob.zst") if ref["raw_id"][4:] in p.name)
    import zstandard

    path.write_bytes(zstandard.ZstdCompressor().compress(b"I went to an LGBTQ rally, forged bytes here."))
    results = recall("LGBTQ support group", "alice", k=5, lake=lake)
    assert results and results[0].node_id in ("ep1", "fact1")
    assert all(r.citations == [] for r in results)  # every alice ref lives in the corrupt chunk
    path.unlink()
    results = recall("LGBTQ support group", "alice", k=5, lake=lake)
    assert all(r.citations == [] for r in results)


def test_empty_query_and_unknown_tenant_and_bad_input(lake, tmp_path):
    assert recall("", "alice", lake=lake) == []
    assert recall("the of and", "alice", lake=lake) == []
    assert recall("support group", "nobody", lake=lake) == []
    with pytest.raises(ValueError):
        recall("support group", "", lake=lake)
    with pytest.raises(IndexNotBuilt):
        recall("support group", "alice", lake=Lake(tmp_path / "empty"))


def test_trace_has_every_stage(lake):
    trace: list = []
    recall("LGBTQ support group", "alice", k=3, lake=lake, trace=trace)
    stages = [t["stage"] for t in trace]
    assert stages == ["keywords", "analyze", "seeds", "vectors", "raw", "session", "expand", "score", "mmr", "cite"]
    trace = []
    recall("LGBTQ support group", "alice", k=3, lake=lake, trace=trace, budget_tokens=500)
    assert [t["stage"] for t in trace] == [
        "keywords",
        "analyze",
        "seeds",
        "vectors",
        "raw",
        "session",
        "expand",
        "score",
        "mmr",
        "cite",
        "budget",
    ]
    assert all({"stage", "ms", "n", "detail"} <= set(t) for t in trace)
    assert trace[0]["detail"]["keywords"] == ["lgbtq", "support", "group"]


def test_raw_fallback_for_code_tokens(lake):
    trace: list = []
    results = recall("printer error 0x00000709", "bob", k=5, lake=lake, trace=trace)
    assert "raw" in [t["stage"] for t in trace]
    raw = next(r for r in results if r.type == "RawChunk")
    assert raw.citations[0].excerpt == "error 0x00000709 when printing from D:\\photos\\cat.png"
    assert raw.citations[0].msg_id == "D1:2"


def test_types_filter_and_json(lake):
    results = recall("LGBTQ support group", "alice", k=10, lake=lake, types=["Fact"])
    assert _ids(results) == ["fact1"]
    j = results[0].to_json()
    assert {"node_id", "type", "title", "score", "breakdown", "citations", "evidence"} <= set(j)
    assert {"raw_id", "conv_id", "msg_id", "speaker", "ts", "excerpt"} <= set(j["citations"][0])


def test_ranked_turns_distinct_in_citation_order(lake):
    results = recall("LGBTQ support group sunrise", "alice", k=10, lake=lake)
    turns = ranked_turns(results)
    assert len(turns) == len(set(turns))
    assert turns[0] == ("conv-a", "D1:1")
    assert ("conv-a", "D1:2") in turns


def test_recency_is_relative_to_newest_node_not_wall_clock(lake):
    r = recall("LGBTQ support group", "alice", k=1, lake=lake)[0]
    assert r.breakdown["recency"] == pytest.approx(1.0)


def test_entity_cites_the_mention_the_query_matched_first(tmp_path):
    b = LakeBuilder(tmp_path)
    r = b.conversation("t", "c", [("m1", "A", "Luna is my cat."), ("m2", "B", "Luna won the agility contest.")])
    b.node("t", "ent", "Entity", "Luna", refs=(r["m1"], r["m2"]), time=T0)
    b.node(
        "t", "ep2", "Episode", "agility contest", "Luna won the agility contest", ("agility", "contest"), (r["m2"],), T0
    )
    b.edge("t", "ep2", "ent", "MENTIONS")
    lake = b.write()
    results = recall("Luna agility contest", "t", k=5, lake=lake)
    ent = next(x for x in results if x.node_id == "ent")
    # only the line the query matched: the cat line is no evidence for this query
    assert [c.msg_id for c in ent.citations] == ["m2"]
    # the line itself ranks above the entity card that merely names Luna
    assert [x.node_id for x in results].index("ep2") < [x.node_id for x in results].index("ent")
    wide = recall("Luna agility contest", "t", k=5, lake=lake, config=RecallConfig(aggregate_citations=3))
    assert [c.msg_id for c in next(x for x in wide if x.node_id == "ent").citations] == ["m2"]
    # asked about something no line holds, the card cites one sample mention
    only = recall("Luna", "t", k=5, lake=lake, types=["Entity"])
    assert len(only[0].citations) == 1


def test_a_rollup_summary_is_cited_like_a_card(tmp_path):
    b = LakeBuilder(tmp_path)
    r = b.conversation(
        "t",
        "c",
        [
            ("m1", "A", "We planned the garden."),
            ("m2", "B", "The tomatoes need stakes."),
            ("m3", "A", "Luis brings the stakes on Friday."),
        ],
    )
    b.node(
        "t",
        "ep3",
        "Episode",
        "Luis stakes Friday",
        "Luis brings the stakes on Friday",
        ("stakes", "friday"),
        (r["m3"],),
        T0,
        conv_id="c",
        msg_id="m3",
    )
    b.node(
        "t",
        "roll",
        "Episode",
        "garden · tomatoes · stakes",
        "We planned the garden. The tomatoes need stakes. Luis brings the stakes on Friday.",
        ("garden", "tomatoes", "stakes"),
        (r["m1"], r["m2"], r["m3"]),
        T0,
        subtype="rollup",
    )
    lake = b.write()
    results = recall("stakes Friday", "t", k=5, lake=lake)
    ids = [x.node_id for x in results]
    roll = next(x for x in results if x.node_id == "roll")
    # the summary cites the one line the query matched, not all the turns it holds, and ranks below that line
    assert [c.msg_id for c in roll.citations] == ["m3"] and ids.index("ep3") < ids.index("roll")


@pytest.mark.parametrize(
    "query",
    [
        "lgbtq support group",
        "support",
        "painted sunrise lake",
        "小明 足球 公园",
        "dinosaurs camping kids",
        "nothing matches this",
        "the and of",
    ],
)
def test_bm25_over_postings_ranks_exactly_like_duckdbs_match_bm25(lake, query):
    from recall.store import node_docs_table, raw_docs_table, tenant_reader

    reader = tenant_reader(lake, "alice")
    try:
        info = reader.info()
        for table, n in ((node_docs_table(info.slug), info.n_nodes), (raw_docs_table(info.slug), info.n_chunks)):
            fast = reader._bm25(table, n, query, 50)
            # DuckDB's own macro, evaluated per row: the reference
            ref = reader.select(
                table,
                f"id, fts_main_{table}.match_bm25(id, ?) AS score",
                "score IS NOT NULL",
                column_params=[query],
                order="score DESC, id",
                limit=50,
            )
            assert [i for i, _ in fast] == [i for i, _ in sorted(ref, key=lambda x: (-round(x[1], 9), x[0]))]
            assert [s for _, s in fast] == pytest.approx(sorted((s for _, s in ref), reverse=True), abs=1e-9)
            assert all(i.startswith(("ep", "fact", "ent", "raw_")) for i, _ in fast)  # alice's rows only
    finally:
        reader.close()
