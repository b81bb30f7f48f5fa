"""Graph-level invariants of build_graph / merge_graph: determinism, stable ids, schema, no orphans, merge order."""

from __future__ import annotations

import hashlib
import itertools
from datetime import datetime, timedelta
from unittest import mock

import pyarrow as pa
import pytest

from r2g import ids
from r2g.extract import build_graph
from r2g.ids import edge_id, edge_ids, stable_id, stable_ids
from r2g.merge import COUNTED_TYPES, merge_graph
from r2g.message_refs import Msg, span_refs
from r2g.nlp import annotate, english
from r2g.pipeline import run_partition
from r2g.schema import EDGES, NODES
from raw_store.schema import MESSAGES
from raw_store.text import detect_lang

T0 = datetime(2023, 5, 8, 13, 56)

CONV = [
    ("Caroline", "Hey Mel! I went to an LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "That's great, Caroline! I went hiking with my kids last Saturday."),
    ("Caroline", "I don't like coffee, but I love painting."),
    ("小王", "我今天不开心，因为昨晚没睡好"),
    ("小王", "以后优先用中文回答"),
    ("小红", "小明在公园里踢足球"),
]


def messages(conv=CONV, conv_id: str = "c1", tenant: str = "t1", chunk: str = "raw_aa", start: int = 0) -> pa.Table:
    """Messages packed into one chunk the way the chunker lays them out: texts separated by newlines."""
    rows, offset = [], 0
    for i, (spk, text) in enumerate(conv):
        n = len(text.encode("utf-8"))
        rows.append(
            dict(
                tenant=tenant,
                conv_id=conv_id,
                msg_id=f"{conv_id}-m{start + i}",
                seq=start + i,
                speaker=spk,
                role="user",
                ts=T0 + timedelta(minutes=start + i),
                lang=detect_lang(text),
                text=text,
                caption=None,
                text_sha=hashlib.sha256(text.encode()).hexdigest(),
                raw_id=chunk,
                offset=offset,
                length=n,
                raw_refs=[dict(raw_id=chunk, offset=offset, length=n)],
                source_file="f.jsonl",
                line=i + 1,
                format="jsonl",
            )
        )
        offset += n + 1
    return pa.Table.from_pylist(rows, schema=MESSAGES)


@pytest.fixture(scope="module")
def graph() -> tuple[pa.Table, pa.Table, pa.Table]:
    english()
    msgs = messages()
    res = run_partition(msgs, None)
    return msgs, res.nodes, res.edges


def test_schema_conformity(graph) -> None:
    _, nodes, edges = graph
    assert nodes.schema.equals(NODES) and edges.schema.equals(EDGES)
    for col in ("id", "tenant", "type", "title", "provenance"):
        assert nodes.column(col).null_count == 0
    for col in ("id", "tenant", "src", "dst", "type", "weight", "confidence", "provenance"):
        assert edges.column(col).null_count == 0


def test_sorted_unique_ids_and_known_types(graph) -> None:
    _, nodes, edges = graph
    from r2g.schema import EDGE_TYPES, NODE_TYPES

    for t in (nodes, edges):
        ids = t.column("id").to_pylist()
        assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert set(nodes.column("type").to_pylist()) <= set(NODE_TYPES)
    assert set(edges.column("type").to_pylist()) <= set(EDGE_TYPES)
    assert all(
        p.startswith("r2g.rule.")
        for p in nodes.column("provenance").to_pylist() + edges.column("provenance").to_pylist()
    )


def test_determinism_same_input_twice(graph) -> None:
    msgs, nodes, edges = graph
    again = run_partition(msgs, None)
    assert again.nodes.equals(nodes) and again.edges.equals(edges)
    shuffled = msgs.take(list(reversed(range(msgs.num_rows))))
    again = run_partition(shuffled, None)
    assert again.nodes.equals(nodes) and again.edges.equals(edges)


def test_ids_are_stable_hashes_of_natural_keys(graph) -> None:
    _, nodes, edges = graph
    by_id = {n["id"]: n for n in nodes.to_pylist()}
    assert stable_id("n", "t1", "Episode", "c1", "c1-m0") in by_id
    assert stable_id("n", "t1", "Entity", "PERSON", "caroline") in by_id
    assert stable_id("n", "t1", "Entity", "TIME", "2023-05-07") in by_id
    for e in edges.to_pylist():
        assert e["id"] == edge_id(e["tenant"], e["src"], e["type"], e["dst"])
    assert stable_id("n", "a", "bc") != stable_id("n", "ab", "c")
    assert stable_id("n", "x").startswith("n_") and len(stable_id("n", "x")) == 26


def test_no_orphan_edges(graph) -> None:
    msgs, nodes, edges = graph
    ids = set(nodes.column("id").to_pylist())
    raw_ids = {r["raw_id"] for refs in msgs.column("raw_refs").to_pylist() for r in refs}
    for e in edges.to_pylist():
        assert e["src"] in ids, e
        if e["type"] == "DERIVED_FROM" and e["dst"] not in ids:
            assert e["dst"] in raw_ids, e
        else:
            assert e["dst"] in ids, e


def test_raw_refs_point_at_the_cited_text(graph) -> None:
    msgs, nodes, edges = graph
    chunk = "\n".join(t for _, t in CONV).encode("utf-8")
    for n in nodes.to_pylist():
        for r in n["raw_refs"]:
            assert r["raw_id"] == "raw_aa" and 0 <= r["offset"] and r["offset"] + r["length"] <= len(chunk)
            piece = chunk[r["offset"] : r["offset"] + r["length"]].decode("utf-8")  # never cuts a character
            if n["type"] == "Entity" and n["subtype"] not in ("TIME",) and n["mentions"] and piece in n["aliases"]:
                assert piece in n["aliases"]
    ent = next(n for n in nodes.to_pylist() if n["type"] == "Entity" and n["title"] == "公园")
    r = ent["raw_refs"][0]
    assert chunk[r["offset"] : r["offset"] + r["length"]].decode() == "公园"


def test_span_refs_across_chunk_pieces() -> None:
    text = "ab公园cd"
    msg = Msg("t", "c", "m", 0, "s", None, "zh", text, "x", (("raw_1", 100, 4), ("raw_2", 0, 6)), text.isascii())
    # 公园 is bytes 2..8: 2 bytes in the first piece, 4 in the second
    assert span_refs(msg, 2, 4) == [("raw_1", 102, 2), ("raw_2", 0, 4)]
    assert span_refs(msg, -1, -1) == [("raw_1", 100, 4), ("raw_2", 0, 6)]
    assert span_refs(msg, 0, 1) == [("raw_1", 100, 1)]


def test_span_refs_of_an_ascii_message_in_one_chunk() -> None:
    text = "met Anna at noon"
    msg = Msg("t", "c", "m", 0, "s", None, "en", text, "x", (("raw_1", 40, len(text)),), True)
    assert span_refs(msg, 4, 8) == [("raw_1", 44, 4)]
    assert span_refs(msg, -1, -1) == [("raw_1", 40, len(text))]


def test_temporal_next_chain(graph) -> None:
    _, nodes, edges = graph
    eps = sorted((n for n in nodes.to_pylist() if n["type"] == "Episode"), key=lambda n: n["time_start"])
    nxt = {e["src"]: e["dst"] for e in edges.to_pylist() if e["type"] == "TEMPORAL_NEXT"}
    assert len(nxt) == len(eps) - 1
    assert [nxt[a["id"]] for a in eps[:-1]] == [b["id"] for b in eps[1:]]


def test_temporal_next_stays_within_conversation() -> None:
    english()
    t = pa.concat_tables([messages(CONV[:2], conv_id="a"), messages(CONV[2:4], conv_id="b", chunk="raw_bb")])
    res = run_partition(t, None)
    conv_of = {n["id"]: n["conv_id"] for n in res.nodes.to_pylist()}
    links = [e for e in res.edges.to_pylist() if e["type"] == "TEMPORAL_NEXT"]
    assert len(links) == 2 and all(conv_of[e["src"]] == conv_of[e["dst"]] for e in links)


def test_entities_dedup_within_partition(graph) -> None:
    _, nodes, _ = graph
    carolines = [n for n in nodes.to_pylist() if n["type"] == "Entity" and n["title"] == "Caroline"]
    assert len(carolines) == 1
    c = carolines[0]
    assert c["subtype"] == "PERSON" and c["conv_id"] is None
    assert c["mentions"] >= 3 and c["frequency"] >= 2  # speaker of two turns and named in a third
    assert c["first_seen"] <= c["last_seen"]


def test_edge_weights_follow_r2g4(graph) -> None:
    _, _, edges = graph
    for e in edges.to_pylist():
        assert e["weight"] == pytest.approx(0.5 * e["confidence"] + 0.3 + 0.2)


def test_build_graph_with_cached_annotations(tmp_path) -> None:
    from r2g.nlp_cache import NlpCache

    english()
    msgs = messages()
    cache = NlpCache(tmp_path / "nlp.sqlite")
    first = run_partition(msgs, cache)
    second = run_partition(msgs, cache)
    assert second.stats.misses == 0 and second.stats.hits == first.stats.misses
    assert second.nodes.equals(first.nodes) and second.edges.equals(first.edges)


def test_build_graph_requires_annotations_by_text_sha() -> None:
    msgs = messages(CONV[:1])
    anns, _ = annotate(msgs.column("text").to_pylist(), msgs.column("lang").to_pylist())
    nodes, edges = build_graph(msgs, {msgs.column("text_sha")[0].as_py(): anns[0]})
    assert nodes.num_rows > 0 and edges.num_rows > 0
    with pytest.raises(KeyError):
        build_graph(msgs, {})


def test_empty_partition() -> None:
    res = run_partition(MESSAGES.empty_table(), None)
    assert res.nodes.num_rows == 0 and res.edges.num_rows == 0 and res.nodes.schema.equals(NODES)


# ---------------------------------------------------------------- merge_graph


@pytest.fixture(scope="module")
def partitions():
    english()
    a = run_partition(messages(CONV[:3], chunk="raw_aa"), None)
    b = run_partition(messages(CONV[2:], chunk="raw_bb", start=2), None)
    c = run_partition(
        messages([("Caroline", "Caroline went to the park yesterday.")], conv_id="c2", chunk="raw_cc"), None
    )
    return [(a.nodes, a.edges), (b.nodes, b.edges), (c.nodes, c.edges)]


def test_merge_is_order_independent(partitions) -> None:
    results = []
    for perm in itertools.permutations(partitions):
        results.append(merge_graph([p[0] for p in perm], [p[1] for p in perm]))
    first = results[0]
    for nodes, edges in results[1:]:
        assert nodes.equals(first[0]) and edges.equals(first[1])


def test_merge_unions_entities(partitions) -> None:
    nodes, edges = merge_graph([p[0] for p in partitions], [p[1] for p in partitions])
    assert nodes.schema.equals(NODES) and edges.schema.equals(EDGES)
    ids = nodes.column("id").to_pylist()
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    eid = stable_id("n", "t1", "Entity", "PERSON", "caroline")
    parts = [r for p in partitions for r in p[0].to_pylist() if r["id"] == eid]
    assert len(parts) == 3
    (merged,) = [r for r in nodes.to_pylist() if r["id"] == eid]
    assert merged["mentions"] == sum(r["mentions"] for r in parts)
    assert merged["frequency"] == sum(r["frequency"] for r in parts)
    assert merged["first_seen"] == min(r["first_seen"] for r in parts)
    assert merged["last_seen"] == max(r["last_seen"] for r in parts)
    refs = [(r["raw_id"], r["offset"], r["length"]) for r in merged["raw_refs"]]
    assert refs == sorted(set(refs)) and len(refs) <= 20
    assert set(merged["aliases"]) == {a for r in parts for a in r["aliases"]}


def test_merge_dedups_edges_by_id(partitions) -> None:
    _, edges = merge_graph([p[0] for p in partitions], [p[1] for p in partitions])
    ids = edges.column("id").to_pylist()
    assert len(ids) == len(set(ids))
    all_ids = {e for p in partitions for e in p[1].column("id").to_pylist()}
    assert set(ids) == all_ids


def test_merge_twice_keeps_rows_and_sums_counts(partitions) -> None:
    """merge_graph unions partitions: a repeated partition re-counts the counted nodes (Entity, Concept and the
    fingerprint-deduplicated Fact/Preference/Task), and leaves Episodes and edges unchanged."""
    nodes, edges = merge_graph([p[0] for p in partitions], [p[1] for p in partitions])
    n2, e2 = merge_graph([nodes, nodes], [edges, edges])
    assert e2.equals(edges)
    assert n2.column("id").equals(nodes.column("id"))
    for a, b in zip(nodes.to_pylist(), n2.to_pylist()):
        if a["type"] in COUNTED_TYPES:
            assert b["frequency"] == 2 * a["frequency"] and b["aliases"] == a["aliases"]
            if a["mentions"] is not None:
                assert b["mentions"] == 2 * a["mentions"]
            assert {k: v for k, v in b.items() if k not in ("frequency", "mentions", "importance")} == {
                k: v for k, v in a.items() if k not in ("frequency", "mentions", "importance")
            }
        else:
            assert a == b


def test_merge_empty() -> None:
    nodes, edges = merge_graph([], [])
    assert nodes.num_rows == 0 and edges.num_rows == 0 and nodes.schema.equals(NODES)


# ---------------------------------------------------------------- robustness

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_WORDS = [
    "I",
    "went",
    "to",
    "the",
    "park",
    "yesterday",
    "because",
    "so",
    "not",
    "Mel",
    "我",
    "今天",
    "不",
    "在",
    "公园",
    "里",
    "踢足球",
    "因为",
    "所以",
    "，",
    "。",
    "!",
    "?",
    " ",
    "\n",
    "2023-05-07",
    "上周六",
    "喜欢",
    "以后",
    "from now on",
    "😀",
    "没有",
    "去",
    "北京",
    "always",
    "coffee",
    "I'm",
    "we",
    "和",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(_WORDS), min_size=0, max_size=14).map(" ".join), min_size=1, max_size=4))
def test_any_text_yields_a_valid_graph(texts: list[str]) -> None:
    msgs = messages([("S", t) for t in texts])
    res = run_partition(msgs, None)
    ids = set(res.nodes.column("id").to_pylist())
    assert len(ids) == res.nodes.num_rows
    assert sum(1 for t in res.nodes.column("type").to_pylist() if t == "Episode") == len(texts)
    raw_ids = {"raw_aa"}
    for e in res.edges.to_pylist():
        assert e["src"] in ids and (e["dst"] in ids or (e["type"] == "DERIVED_FROM" and e["dst"] in raw_ids))
    total = len("\n".join(texts).encode("utf-8"))
    for refs in res.nodes.column("raw_refs").to_pylist():
        for r in refs:
            assert 0 <= r["offset"] and r["length"] >= 0 and r["offset"] + r["length"] <= total


def test_message_without_ts_or_speaker() -> None:
    msgs = messages([("", "I went hiking yesterday."), ("", "2023年5月7日我们去了上海")])
    msgs = msgs.set_column(msgs.schema.get_field_index("ts"), "ts", pa.nulls(2, MESSAGES.field("ts").type))
    res = run_partition(msgs, None)
    nodes = res.nodes.to_pylist()
    assert all(n["type"] != "Entity" or n["subtype"] != "PERSON" or n["title"] for n in nodes)
    times = {n["title"] for n in nodes if n["type"] == "Entity" and n["subtype"] == "TIME"}
    assert times == {"2023-05-07"}  # relative "yesterday" needs an anchor; the absolute date does not
    ep = next(n for n in nodes if n["type"] == "Episode")
    assert ep["time_start"] is None and ep["time_granularity"] == "unspecified"


# --------------------------------------------------------------------------- ids (property tests)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_parts = st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=5)


@given(_parts, _parts)
@settings(max_examples=300, deadline=None)
def test_stable_id_is_deterministic_and_injective(a: list, b: list) -> None:
    assert stable_id("n", *a) == stable_id("n", *a)
    if a != b:
        assert stable_id("n", *a) != stable_id("n", *b)


@given(_parts)
@settings(max_examples=100, deadline=None)
def test_stable_id_format(parts: list) -> None:
    ident = stable_id("n", *parts)
    assert ident.startswith("n_") and len(ident) == 26 and all(c in "0123456789abcdef" for c in ident[2:])


def test_separator_characters_in_user_text_do_not_collide() -> None:
    assert stable_id("n", "a\x1fb", "c") != stable_id("n", "a", "b\x1fc")
    assert stable_id("n", "", "x") != stable_id("n", None, "x")


@given(
    st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8), st.text(max_size=8), st.text(max_size=8)), max_size=6)
)
@settings(max_examples=100, deadline=None)
def test_edge_ids_in_bulk_equal_edge_id(keys: list) -> None:
    assert edge_ids(keys) == [edge_id(*k) for k in keys]


@given(
    st.integers(1, 4).flatmap(
        lambda width: st.lists(st.lists(st.one_of(st.none(), st.text(max_size=10)), min_size=width, max_size=width))
    )
)
@settings(max_examples=100, deadline=None)
def test_stable_ids_in_duckdb_equal_stable_id(rows: list) -> None:
    """Any text: combining marks and astral characters (DuckDB's length() must count code points as len() does),
    NUL, the framing's own ':' and '~', None apart from ""."""
    import polars as pl

    width = len(rows[0]) if rows else 2
    frame = pl.DataFrame(rows, schema={f"c{i}": pl.String for i in range(width)}, orient="row")
    with mock.patch.object(ids, "DUCKDB_MIN_ROWS", 0):  # DuckDB whatever the size
        assert stable_ids("e", frame).to_list() == [stable_id("e", *r) for r in rows]


def test_stable_ids_of_characters_that_len_and_bytes_count_differently() -> None:
    import polars as pl

    rows = [("e\u0301", "👍🏽"), ("租户", "节点"), ("\x00", "~"), ("3:c", None), ("", "")]
    frame = pl.DataFrame(rows, schema={"a": pl.String, "b": pl.String}, orient="row")
    with mock.patch.object(ids, "DUCKDB_MIN_ROWS", 0):
        assert stable_ids("rq", frame.with_columns(pl.lit("k").alias("k")).select("a", "k", "b")).to_list() == [
            stable_id("rq", a, "k", b) for a, b in rows
        ]


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_stable_ids_on_either_side_of_duckdbs_threshold_equal_stable_id(extra: int) -> None:
    import polars as pl

    n = ids.DUCKDB_MIN_ROWS + extra
    frame = pl.DataFrame({"t": ["租户" if i % 3 else None for i in range(n)], "i": [f"n_{i}\u0301" for i in range(n)]})
    assert stable_ids("e", frame).to_list() == [stable_id("e", *r) for r in frame.iter_rows()]
