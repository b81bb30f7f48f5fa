"""Agent write-ops (jobs/ops/, SPEC §9): parsing both op shapes, every op kind, every error code,
refs across ops, idempotence, tenant separation, and a fuzz of random op lines."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import jsonschema
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs import ops as O
from jobs.ops import (
    BAD_ARGS,
    CHILD_HAS_PARENT,
    CHILD_NOT_FOUND,
    NOT_FOUND,
    OP_FAILED,
    Op,
    apply_ops,
    batch_id_for,
    looks_like_ops,
    parse_ops,
)
from r2g.ids import edge_id, stable_id
from r2g.schema import COLD_EDGES, EDGES, NODES, OPS_APPLIED, OPS_REJECTED
from raw_store.cas import raw_id_for
from tests.fuzzing import fuzz_settings

AT = datetime(2025, 11, 5, 10, 0)


# -- helpers -------------------------------------------------------------------------------------


def node(tenant: str, nid: str, type: str = "Fact", title: str = "", **extra) -> dict:
    return {
        "id": nid,
        "tenant": tenant,
        "type": type,
        "title": title or nid,
        "text": title or nid,
        "status": "active",
        "provenance": "r2g.rule.fact.en.v1",
        **extra,
    }


def edge(tenant: str, src: str, type: str, dst: str, **extra) -> dict:
    return {
        "id": edge_id(tenant, src, type, dst),
        "tenant": tenant,
        "src": src,
        "dst": dst,
        "type": type,
        "weight": 0.9,
        "provenance": "r2g.rule.cause.v1",
        **extra,
    }


def table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def lake() -> tuple[pa.Table, pa.Table]:
    """Tenant "a": two Episodes, a Fact, an archived Fact and the Entity 小明; tenant "b": one Fact."""
    nodes = table(
        [
            node(
                "a",
                "ep1",
                "Episode",
                "小明 踢足球",
                time_start=datetime(2025, 11, 1),
                raw_refs=[{"raw_id": "raw_1", "offset": 0, "length": 10}],
            ),
            node(
                "a",
                "ep2",
                "Episode",
                "小明 去公园",
                time_start=datetime(2025, 11, 2),
                raw_refs=[{"raw_id": "raw_1", "offset": 11, "length": 12}],
            ),
            node("a", "f1", "Fact", "Ann adopted a puppy"),
            node("a", "f_old", "Fact", "old fact", status="archived"),
            node("a", "ent_xm", "Entity", "小明", subtype="PERSON", aliases=["Xiaoming"]),
            node("b", "fb", "Fact", "tenant b secret"),
        ],
        NODES,
    )
    edges = table([edge("a", "f1", "CAUSES", "ep1"), edge("b", "fb", "MENTIONS", "fb")], EDGES)
    return nodes, edges


def lines(*objs: object) -> bytes:
    return "\n".join(o if isinstance(o, str) else json.dumps(o, ensure_ascii=False) for o in objs).encode()


def run(data: bytes, tenant: str = "a", nodes=None, edges=None, resolve=None, cold=None):
    if nodes is None:
        nodes, edges = lake()
    parsed, parse_rejects = parse_ops(data, "inbox/a/ops.jsonl", tenant)
    result = apply_ops(nodes, edges, parsed, batch_id_for(data), AT, resolve, cold_edges=cold)
    return parsed, parse_rejects, result


def rows(t: pa.Table) -> list[dict]:
    return t.to_pylist()


def by_id(t: pa.Table) -> dict[str, dict]:
    return {r["id"]: r for r in t.to_pylist()}


def codes(result) -> list[tuple[int, str]]:
    return [(r["op_index"], r["code"]) for r in rows(result.rejected)]


def nid(data: bytes, index: int, tenant: str = "a") -> str:
    return stable_id("n", tenant, "jobs.ops", batch_id_for(data), str(index))


# -- parsing -------------------------------------------------------------------------------------


def test_both_shapes_parse_to_the_same_ops_and_blank_lines_are_not_ops():
    args = {"subject": "我", "memory_type": "事件", "topic": "吃饭", "object": "白米饭"}
    data = lines(
        {"tool": "create_memory", "arguments": args, "ref": "m1"},
        {"name": "create_memory", "args": args},
        "",
        {"type": "function", "id": "call_1", "function": {"name": "create_memory", "arguments": json.dumps(args)}},
        {"op": "create_memory", "args": args},
        "   ",
        {"op": "create", "type": "fact", "title": "Eileen", "fields": {"aliases": ["艾琳"]}, "ref": "c1"},
        {"op": "edit", "nodeId": "f1", "setFields": {"importance": 0.9}},
    )
    parsed, rejects = parse_ops(data, "inbox/a/ops.jsonl", "a")
    assert rejects == []
    assert [(o.index, o.name, o.ref) for o in parsed] == [
        (1, "create_memory", "m1"),
        (2, "create_memory", None),
        (4, "create_memory", None),
        (5, "create_memory", None),
        (7, "create", "c1"),
        (8, "edit", None),
    ]
    assert all(o.args == args for o in parsed[:4])
    assert parsed[4].args == {"type": "Fact", "title": "Eileen", "fields": {"aliases": ["艾琳"]}}
    assert all(o.tenant == "a" for o in parsed)


def test_raw_ref_points_at_the_exact_line_bytes_with_bom_and_crlf():
    first = json.dumps({"op": "delete", "nodeId": "f1"})
    second = json.dumps({"op": "delete", "nodeId": "ep1"}, ensure_ascii=False)
    data = b"\xef\xbb\xbf" + first.encode() + b"\r\n\r\n" + second.encode() + b"\r\n"
    parsed, rejects = parse_ops(data, "ops.jsonl", "a")
    assert rejects == []
    assert [o.index for o in parsed] == [1, 3]
    for o, text in zip(parsed, (first, second)):
        ref = o.raw_ref
        assert ref["raw_id"] == raw_id_for(batch_id_for(data))
        assert data[ref["offset"] : ref["offset"] + ref["length"]].decode() == text == o.raw


@pytest.mark.parametrize(
    "line, op, needle",
    [
        ("not json", None, "not JSON"),
        ("[1, 2]", None, "JSON object"),
        ('{"text": "hello", "speaker": "Ann"}', None, "not an op"),
        ('{"op": "explode"}', None, "unknown op"),
        ('{"tool": "search_memories", "arguments": {"query": "x"}}', None, "unknown op"),
        ('{"tool": "create_memory", "arguments": {"memory_type": "事件", "topic": "x"}}', "create_memory", "subject"),
        (
            '{"tool": "create_memory", "arguments": {"subject": "我", "memory_type": "心情", "topic": "x"}}',
            "create_memory",
            "memory_type",
        ),
        (
            '{"tool": "create_memory", "arguments": {"subject": "  ", "memory_type": "事件", "topic": "x"}}',
            "create_memory",
            "subject",
        ),
        (
            '{"tool": "create_memory", "arguments": {"subject": "我", "memory_type": "事件", "topic": "x", '
            '"importance": NaN}}',
            "create_memory",
            "not a JSON number",
        ),
        (
            '{"tool": "create_memory", "arguments": {"subject": "我", "memory_type": "事件", "topic": "x", '
            '"importance": 1.5}}',
            "create_memory",
            "importance",
        ),
        ('{"tool": "create_memory", "arguments": "{broken"}', "create_memory", "not JSON"),
        (
            '{"tool": "link_memories", "arguments": {"source_memory_description": "a", "target_memory_description": "b", '
            '"relation_type": "喜欢"}}',
            "link_memories",
            "relation_type",
        ),
        ('{"op": "edit", "nodeId": "f1", "ref": "x", "title": "t"}', "edit", "cannot define a ref"),
        ('{"op": "edit", "nodeId": "f1"}', "edit", "arguments"),
        ('{"op": "edit", "nodeId": "f1", "setFields": {"status": "active"}}', "edit", "status"),
        ('{"op": "edit", "nodeId": "f1", "setFields": {"text": "x"}, "clearFields": ["text"]}', "edit", "both set"),
        ('{"op": "edit", "nodeId": "f1", "setFields": {"time_start": "yesterday-ish"}}', "edit", "ISO-8601"),
        ('{"op": "create", "type": "character_sheet", "title": "x"}', "create", "type"),
        ('{"op": "create", "type": "Fact"}', "create", "title or a text"),
        (
            '{"op": "link_upsert", "sourceNodeId": "f1", "links": [{"targetNodeId": "ep1", "relation": "loves"}]}',
            "link_upsert",
            "names no edge type",
        ),
        ('{"op": "compact", "type": "Episode", "childIds": [], "summary": "s"}', "compact", "childIds"),
        ('{"op": "compact", "type": "Episode", "childIds": ["ep1"], "summary": " "}', "compact", "summary"),
        ('{"op": "compact", "childIds": ["ep1"], "summary": "s"}', "compact", "type"),
        ('{"op": "delete", "nodeId": "f1", "tenant": "b"}', "delete", "tenant is bound"),
        ('{"op": "delete", "nodeId": "f1", "ts": "last tuesday"}', "delete", "ts"),
        ('{"tool": "create_memory", "arguments": {}, "extra": 1}', "create_memory", "unknown keys"),
    ],
)
def test_bad_lines_are_bad_args_rows_keeping_the_raw_line(line, op, needle):
    data = lines({"op": "delete", "nodeId": "f1"}, line)
    parsed, rejects = parse_ops(data, "inbox/a/ops.jsonl", "a")
    assert [o.index for o in parsed] == [1]
    assert len(rejects) == 1
    r = rejects[0]
    assert (r["tenant"], r["batch_id"], r["op_index"], r["op"], r["code"], r["raw"]) == (
        "a",
        batch_id_for(data),
        2,
        op,
        BAD_ARGS,
        line,
    )
    assert r["message"].startswith("inbox/a/ops.jsonl:2: ") and needle in r["message"], r["message"]
    assert table(rejects, OPS_REJECTED).num_rows == 1


def test_invalid_utf8_line_is_kept_backslash_escaped():
    data = b'{"op": "delete", "nodeId": "f1"}\n{"op": "delete", "nodeId": "\xff\xfe"}\n'
    parsed, rejects = parse_ops(data, "x.jsonl", "a")
    assert len(parsed) == 1
    assert rejects[0]["code"] == BAD_ARGS and rejects[0]["op_index"] == 2
    assert rejects[0]["raw"] == '{"op": "delete", "nodeId": "\\xff\\xfe"}'


def test_looks_like_ops_routes_op_files_and_not_chat_logs():
    ops_file = lines({"tool": "create_memory", "arguments": {}}, {"op": "link_upsert"}, "oops").decode()
    assert looks_like_ops(ops_file.split("\n"))
    assert looks_like_ops(['\ufeff{"op": "delete", "nodeId": "x"}'])
    chat = ['{"conv_id": "c", "speaker": "Ann", "ts": "2023-05-08", "text": "hi"}'] * 3
    tavern = ['{"user_name": "u", "character_name": "c"}', '{"name": "Ann", "is_user": true, "mes": "hi"}']
    assert not looks_like_ops(chat)
    assert not looks_like_ops(tavern)
    assert not looks_like_ops(["Ann: hello", "Bob: create_memory please"])
    assert not looks_like_ops([])
    assert not looks_like_ops(['{"op": "create"}', "x", "y", "z"])  # one op line in four: not ours


def test_tool_definitions_accept_the_seed_000_examples():
    v_create = jsonschema.Draft202012Validator(O.CREATE_MEMORY["function"]["parameters"])
    v_link = jsonschema.Draft202012Validator(O.LINK_MEMORIES["function"]["parameters"])
    for example in (  # seed 000 §4.2.2 examples 1–3 and §4.5.1
        {
            "subject": "我",
            "memory_type": "事件",
            "topic": "吃饭",
            "object": "白米饭",
            "attributes": {"时间": "今天"},
            "importance": 0.3,
        },
        {"subject": "小明", "memory_type": "事实", "topic": "喜好", "object": "打篮球", "importance": 0.5},
        {
            "subject": "我",
            "memory_type": "观点",
            "topic": "认为撒谎",
            "object": "小明的陈述",
            "attributes": {"时间": "昨天", "基于": "他的话前后矛盾"},
            "importance": 0.7,
        },
        {
            "subject": "我",
            "memory_type": "关系",
            "topic": "朋友关系",
            "object": "小明",
            "attributes": {"程度": "好朋友"},
            "importance": 0.7,
        },
    ):
        v_create.validate(example)
    v_link.validate(
        {"source_memory_description": "我今天不开心", "target_memory_description": "我摔东西", "relation_type": "导致"}
    )
    assert O.CREATE_MEMORY["function"]["parameters"]["required"] == ["subject", "memory_type", "topic"]


# -- create_memory / link_memories (seed 000) ----------------------------------------------------


def test_create_memory_makes_one_staged_fact_with_normalised_time():
    data = lines(
        {
            "tool": "create_memory",
            "arguments": {
                "subject": "我",
                "memory_type": "事件",
                "topic": "吃饭",
                "object": "白米饭",
                "attributes": {"时间": "今天"},
                "importance": 0.3,
            },
        }
    )
    parsed, _, res = run(data)
    new = by_id(res.nodes)[nid(data, 1)]
    expected = {c: None for c in NODES.names}
    expected.update(
        {
            "id": nid(data, 1),
            "tenant": "a",
            "type": "Fact",
            "subtype": "event",
            "title": "我 吃饭 白米饭",
            "text": "我 吃饭 白米饭; 时间: 今天",
            "keywords": ["我", "吃饭", "白米饭"],
            "entities": ["我"],
            "aliases": [],
            "lang": "zh",
            "time_start": datetime(2025, 11, 5),
            "time_end": datetime(2025, 11, 6),
            "time_granularity": "day",
            "time_text": "今天",
            "importance": 0.3,
            "confidence": 1.0,
            "frequency": 1,
            "first_seen": AT,
            "last_seen": AT,
            "status": "active",
            "raw_refs": [parsed[0].raw_ref],
            "provenance": "jobs.ops.create_memory.v1",
            "predicate_norm": "吃饭",
        }
    )
    assert new == expected
    assert rows(res.applied) == [
        {
            "tenant": "a",
            "batch_id": batch_id_for(data),
            "op_index": 1,
            "op": "create_memory",
            "ref": None,
            "target_ids": [nid(data, 1)],
            "result": json.dumps({"edges": [], "id": nid(data, 1)}),
            "at": AT,
        }
    ]
    assert res.rejected.num_rows == 0 and res.nodes.num_rows == 7


def test_create_memory_time_is_relative_to_the_call_ts_and_roles_link_known_entities():
    data = lines(
        {
            "tool": "create_memory",
            "ts": "2025-11-03T09:00:00+08:00",
            "arguments": {
                "subject": "小明",
                "memory_type": "事实",
                "topic": "喜好",
                "object": "打篮球",
                "attributes": {"时间": "昨天"},
            },
        }
    )
    _, _, res = run(data)
    new = by_id(res.nodes)[nid(data, 1)]
    assert (new["time_start"], new["first_seen"], new["importance"]) == (
        datetime(2025, 11, 2),
        datetime(2025, 11, 3, 1, 0),
        0.5,
    )
    agent = edge_id("a", nid(data, 1), "AGENT", "ent_xm")
    assert by_id(res.edges)[agent]["provenance"] == "jobs.ops.create_memory.v1"
    assert json.loads(rows(res.applied)[0]["result"])["edges"] == [agent]


def test_link_memories_finds_this_batchs_memories_by_description():
    """seed 000 §12.5: 睡眠不好 导致 心情不好, both created in the same batch."""
    data = lines(
        {
            "tool": "create_memory",
            "arguments": {
                "subject": "我",
                "memory_type": "事实",
                "topic": "心情",
                "object": "不好",
                "attributes": {"时间": "今天"},
            },
        },
        {
            "tool": "create_memory",
            "arguments": {
                "subject": "我",
                "memory_type": "事件",
                "topic": "睡眠",
                "object": "不好",
                "attributes": {"时间": "昨晚"},
            },
        },
        {
            "tool": "link_memories",
            "arguments": {"source": "昨晚睡眠不好", "target": "我今天心情不好", "relation_type": "导致"},
        },
    )
    _, _, res = run(data)
    sleep, mood = nid(data, 2), nid(data, 1)
    link = rows(res.applied)[2]
    assert json.loads(link["result"]) == {
        "source": sleep,
        "target": mood,
        "found_by": ["batch", "batch"],
        "edges": [edge_id("a", sleep, "CAUSES", mood), edge_id("a", mood, "CAUSED_BY", sleep)],
    }
    e = by_id(res.edges)[edge_id("a", sleep, "CAUSES", mood)]
    assert (e["weight"], e["confidence"], e["valid_since"], e["provenance"]) == (
        0.6,
        1.0,
        AT,
        "jobs.ops.link_memories.v1",
    )


def test_link_memories_by_id_ref_and_recall():
    calls = []

    def resolve(tenant: str, text: str) -> str | None:
        calls.append((tenant, text))
        return {"the puppy": "f1", "b's secret": "fb"}.get(text)

    data = lines(
        {
            "tool": "create_memory",
            "ref": "m1",
            "arguments": {"subject": "我", "memory_type": "观点", "topic": "讨厌", "object": "下雨天"},
        },
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": {"ref": "m1"},
                "target_memory_description": "the puppy",
                "relation_type": "相关",
                "importance": 0.9,
            },
        },
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": "$m1",
                "target_memory_description": {"id": "ep1"},
                "relation_type": "引用",
            },
        },
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": "ep2",
                "target_memory_description": "f1",
                "relation_type": "基于",
            },
        },
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": "$m1",
                "target_memory_description": "b's secret",
                "relation_type": "相关",
            },
        },
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": "$m1",
                "target_memory_description": "nothing like it",
                "relation_type": "相关",
            },
        },
    )
    _, _, res = run(data, resolve=resolve)
    m1 = nid(data, 1)
    results = [json.loads(r["result"]) for r in rows(res.applied)]
    assert [r.get("found_by") for r in results] == [None, ["ref", "recall"], ["ref", "id"], ["id", "id"]]
    assert results[1]["edges"] == [edge_id("a", m1, "SIMILAR_TO", "f1"), edge_id("a", "f1", "SIMILAR_TO", m1)]
    assert results[2]["edges"] == [edge_id("a", m1, "REFERS_TO", "ep1")]
    assert results[3]["edges"] == [edge_id("a", "ep2", "SUPPORTS", "f1")]
    assert by_id(res.edges)[edge_id("a", m1, "SIMILAR_TO", "f1")]["weight"] == 0.9
    # recall handed back tenant b's node: treated as no match, never linked
    assert codes(res) == [(5, NOT_FOUND), (6, NOT_FOUND)]
    assert ("a", "b's secret") in calls and all(t == "a" for t, _ in calls)


def test_a_failing_resolver_rejects_the_op_not_the_batch():
    def resolve(tenant, text):
        raise RuntimeError("index not built")

    data = lines(
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": "something",
                "relation_type": "相关",
                "target_memory_description": "f1",
            },
        },
        {"op": "delete", "nodeId": "f1"},
    )
    _, _, res = run(data, resolve=resolve)
    assert codes(res) == [(1, OP_FAILED)]
    assert "index not built" in rows(res.rejected)[0]["message"]
    assert [r["op"] for r in rows(res.applied)] == ["delete"]


# -- seed 001 ops --------------------------------------------------------------------------------


def test_create_with_links_by_ref_and_id_default_bidirectional():
    data = lines(
        {
            "op": "create",
            "type": "Entity",
            "ref": "c1",
            "title": "Eileen",
            "fields": {"aliases": ["艾琳"], "subtype": "PERSON", "time_start": "2025-11-01T08:00:00Z"},
        },
        {
            "op": "create",
            "type": "Fact",
            "fields": {"text": "Eileen heals people in the garden"},
            "links": [
                {"targetRef": "c1", "relation": "agent", "direction": "outgoing"},
                {"targetNodeId": "ep1", "relation": "mentions"},
            ],
        },
    )
    _, _, res = run(data)
    c1, f = nid(data, 1), nid(data, 2)
    nodes = by_id(res.nodes)
    assert (
        nodes[c1]["type"],
        nodes[c1]["title"],
        nodes[c1]["text"],
        nodes[c1]["aliases"],
        nodes[c1]["subtype"],
        nodes[c1]["time_start"],
        nodes[c1]["time_granularity"],
        nodes[c1]["lang"],
    ) == ("Entity", "Eileen", "Eileen", ["艾琳"], "PERSON", datetime(2025, 11, 1, 8), "unspecified", "en")
    assert (nodes[f]["title"], nodes[f]["provenance"]) == ("Eileen heals people in the garden", "jobs.ops.create.v1")
    expected_edges = [
        edge_id("a", f, "AGENT", c1),
        edge_id("a", f, "MENTIONS", "ep1"),
        edge_id("a", "ep1", "MENTIONS", f),
    ]
    assert json.loads(rows(res.applied)[1]["result"]) == {"id": f, "edges": expected_edges}
    assert all(by_id(res.edges)[e]["provenance"] == "jobs.ops.create.v1" for e in expected_edges)


def test_create_is_all_or_nothing():
    data = lines(
        {
            "op": "create",
            "type": "Fact",
            "title": "x",
            "ref": "x",
            "links": [{"targetNodeId": "ep1", "relation": "about"}, {"targetNodeId": "nope", "relation": "about"}],
        },
        {"op": "delete", "nodeId": "$x"},
    )
    before_nodes, before_edges = lake()
    _, _, res = run(data)
    assert codes(res) == [(1, NOT_FOUND), (2, NOT_FOUND)]
    untouched = apply_ops(before_nodes, before_edges, [], "b", AT, None)
    assert res.nodes.equals(untouched.nodes) and res.edges.equals(untouched.edges)
    assert "not defined" in rows(res.rejected)[1]["message"]


def test_edit_sets_clears_and_retitles():
    data = lines(
        {
            "op": "edit",
            "nodeId": "f1",
            "title": "Ann adopted Biscuit",
            "setFields": {"importance": 0.9, "keywords": ["puppy"], "time_start": "2023-05-08"},
            "clearFields": ["text"],
        }
    )
    _, _, res = run(data)
    before = by_id(lake()[0])["f1"]
    after = by_id(res.nodes)["f1"]
    assert after == {
        **before,
        "title": "Ann adopted Biscuit",
        "importance": 0.9,
        "keywords": ["puppy"],
        "time_start": datetime(2023, 5, 8),
        "time_granularity": "unspecified",
        "text": None,
    }
    assert json.loads(rows(res.applied)[0]["result"]) == {
        "id": "f1",
        "set": ["importance", "keywords", "time_start", "title"],
        "cleared": ["text"],
    }


def test_edit_of_a_missing_or_archived_node_is_not_found():
    data = lines(
        {"op": "edit", "nodeId": "nope", "title": "x"},
        {"op": "edit", "nodeId": "f_old", "title": "x"},
        {"op": "edit", "nodeId": {"ref": "never"}, "title": "x"},
    )
    _, _, res = run(data)
    assert codes(res) == [(1, NOT_FOUND), (2, NOT_FOUND), (3, NOT_FOUND)]
    assert res.nodes.equals(apply_ops(*lake(), [], "b", AT, None).nodes)


def test_delete_archives_and_keeps_content_and_edges():
    data = lines({"op": "delete", "nodeId": "f1"}, {"op": "delete", "nodeId": "f_old"}, {"op": "delete", "nodeId": "x"})
    _, _, res = run(data)
    assert by_id(res.nodes)["f1"] == {**by_id(lake()[0])["f1"], "status": "archived"}
    assert by_id(res.nodes)["f_old"] == by_id(lake()[0])["f_old"]  # already archived: a no-op, applied
    assert [json.loads(r["result"]) for r in rows(res.applied)] == [
        {"id": "f1", "status": "archived"},
        {"id": "f_old", "status": "archived"},
    ]
    assert codes(res) == [(3, NOT_FOUND)]
    assert res.nodes.num_rows == 6 and res.edges.equals(apply_ops(*lake(), [], "b", AT, None).edges)


def test_link_upsert_keeps_an_existing_edge_and_is_all_or_nothing():
    data = lines(
        {
            "op": "link_upsert",
            "sourceNodeId": "f1",
            "links": [
                {"targetNodeId": "ep1", "relation": "causes", "direction": "outgoing"},
                {"targetNodeId": "ep2", "relation": "CAUSES"},
            ],
        },
        {
            "op": "link_upsert",
            "sourceNodeId": "f1",
            "links": [{"targetNodeId": "ep2", "relation": "about"}, {"targetNodeId": "fb", "relation": "about"}],
        },
        {"op": "link_upsert", "sourceNodeId": "f1", "links": [{"targetNodeId": "f1", "relation": "about"}]},
    )
    _, _, res = run(data)
    kept = edge_id("a", "f1", "CAUSES", "ep1")
    assert by_id(res.edges)[kept] == by_id(lake()[1])[kept]  # upsert of an existing edge leaves it
    new = [edge_id("a", "f1", "CAUSES", "ep2"), edge_id("a", "ep2", "CAUSED_BY", "f1")]
    assert json.loads(rows(res.applied)[0]["result"]) == {"applied": 3, "edges": [kept, *new]}
    assert by_id(res.edges)[new[0]]["provenance"] == "jobs.ops.link_upsert.v1"
    assert codes(res) == [(2, NOT_FOUND), (3, BAD_ARGS)]
    assert res.edges.num_rows == 4


def test_link_delete_moves_the_edge_to_cold_and_not_found_otherwise():
    data = lines(
        {"op": "link_delete", "sourceNodeId": "f1", "targetNodeId": "ep1", "relation": "Causes"},
        {"op": "link_delete", "sourceNodeId": "f1", "targetNodeId": "ep2", "relation": "causes"},
    )
    _, _, res = run(data)
    gone = edge_id("a", "f1", "CAUSES", "ep1")
    assert gone not in by_id(res.edges)
    cold = rows(res.cold_edges)
    assert cold == [
        {
            **by_id(lake()[1])[gone],
            "reason": f"jobs.ops.link_delete.v1 batch={batch_id_for(data)} op=1",
            "capped_at": AT,
        }
    ]
    assert json.loads(rows(res.applied)[0]["result"]) == {"removed": 1, "edges": [gone]}
    assert codes(res) == [(2, NOT_FOUND)]
    assert res.cold_edges.schema == COLD_EDGES


def test_compact_rolls_children_into_a_parent():
    data = lines(
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "ep2"], "summary": "小明的周末", "ref": "r1"},
        {"op": "edit", "nodeId": "$r1", "setFields": {"importance": 0.8}},
    )
    parsed, _, res = run(data)
    pid = nid(data, 1)
    parent = by_id(res.nodes)[pid]
    assert (
        parent["type"],
        parent["subtype"],
        parent["title"],
        parent["text"],
        parent["time_start"],
        parent["time_end"],
        parent["importance"],
        parent["provenance"],
    ) == (
        "Episode",
        "rollup",
        "小明的周末",
        "小明的周末",
        datetime(2025, 11, 1),
        datetime(2025, 11, 2),
        0.8,
        "jobs.ops.compact.v1",
    )
    assert parent["raw_refs"] == [
        parsed[0].raw_ref,
        {"raw_id": "raw_1", "offset": 0, "length": 10},
        {"raw_id": "raw_1", "offset": 11, "length": 12},
    ]
    contains = [edge_id("a", pid, "SEMANTIC_CONTAINS", c) for c in ("ep1", "ep2")]
    assert json.loads(rows(res.applied)[0]["result"]) == {
        "rollupNodeId": pid,
        "children": ["ep1", "ep2"],
        "edges": contains,
    }
    assert {(e["src"], e["dst"]) for e in rows(res.edges) if e["type"] == "SEMANTIC_CONTAINS"} == {
        (pid, "ep1"),
        (pid, "ep2"),
    }
    assert by_id(res.nodes)["ep1"]["status"] == "active"  # children are re-parented, not archived


def test_compact_error_codes():
    nodes, edges = lake()
    nodes = pa.concat_tables(
        [
            nodes,
            table([node("a", "roll_old", "Episode", "old rollup"), node("a", "concept", "Concept", "a topic")], NODES),
        ]
    )
    edges = pa.concat_tables(
        [
            edges,
            table(
                [edge("a", "roll_old", "SEMANTIC_CONTAINS", "ep2"), edge("a", "concept", "SEMANTIC_CONTAINS", "ep1")],
                EDGES,
            ),
        ]
    )
    data = lines(
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "missing"], "summary": "s"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "f_old"], "summary": "s"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "$nope"], "summary": "s"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "ep2"], "summary": "s"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "fb"], "summary": "s"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1", {"id": "ep1"}], "summary": "s"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1"], "summary": "s"},  # Concept parent: other type
        {
            "op": "compact",
            "type": "Episode",
            "childIds": ["ep1", "f1"],
            "summary": "s",
        },  # ep1 now has an Episode parent
    )
    _, _, res = run(data, nodes=nodes, edges=edges)
    assert codes(res) == [
        (1, CHILD_NOT_FOUND),
        (2, CHILD_NOT_FOUND),
        (3, CHILD_NOT_FOUND),
        (4, CHILD_HAS_PARENT),
        (5, CHILD_NOT_FOUND),
        (6, BAD_ARGS),
        (8, CHILD_HAS_PARENT),
    ]
    assert [r["op_index"] for r in rows(res.applied)] == [7]


# -- refs ----------------------------------------------------------------------------------------


def test_refs_resolve_in_later_ops_only_and_are_defined_once():
    data = lines(
        {"op": "delete", "nodeId": "$m1"},  # before its definition
        {"tool": "create_memory", "ref": "m1", "arguments": {"subject": "我", "memory_type": "事件", "topic": "跑步"}},
        {"op": "create", "type": "Fact", "title": "dup", "ref": "m1"},  # defined twice
        {
            "op": "create",
            "type": "Fact",
            "title": "x",
            "ref": "bad",
            "links": [{"targetNodeId": "zz", "relation": "about"}],
        },
        {
            "op": "link_upsert",
            "sourceRef": "m1",
            "links": [{"targetRef": "bad", "relation": "about"}],
        },  # rejected op's ref
        {
            "op": "link_upsert",
            "sourceRef": "$m1",
            "links": [{"targetNodeId": {"id": "ep1"}, "relation": "about", "direction": "incoming"}],
        },
        {"op": "edit", "nodeId": {"ref": "m1"}, "setFields": {"importance": 1}},
    )
    _, _, res = run(data)
    m1 = nid(data, 2)
    assert codes(res) == [(1, NOT_FOUND), (3, BAD_ARGS), (4, NOT_FOUND), (5, NOT_FOUND)]
    assert [(r["op_index"], r["ref"]) for r in rows(res.applied)] == [(2, "m1"), (6, None), (7, None)]
    assert json.loads(rows(res.applied)[1]["result"])["edges"] == [edge_id("a", "ep1", "ABOUT", m1)]
    assert by_id(res.nodes)[m1]["importance"] == 1.0
    assert nid(data, 3) not in by_id(res.nodes) and nid(data, 4) not in by_id(res.nodes)


# -- idempotence, determinism, tenants -----------------------------------------------------------

BATCH = lines(
    {
        "tool": "create_memory",
        "ref": "m1",
        "arguments": {
            "subject": "小明",
            "memory_type": "事件",
            "topic": "踢足球",
            "object": "足球",
            "attributes": {"时间": "今天", "地点": "公园"},
        },
    },
    {"tool": "create_memory", "arguments": {"subject": "我", "memory_type": "观点", "topic": "羡慕", "object": "小明"}},
    {"tool": "link_memories", "arguments": {"source": "小明踢足球", "target": "我羡慕小明", "relation_type": "所以"}},
    {
        "op": "create",
        "type": "Preference",
        "title": "answer in Chinese",
        "ref": "p1",
        "links": [{"targetRef": "m1", "relation": "related"}],
    },
    {"op": "edit", "nodeId": "f1", "setFields": {"importance": 0.7}},
    {"op": "delete", "nodeId": "ep2"},
    {"op": "link_delete", "sourceNodeId": "f1", "targetNodeId": "ep1", "relation": "causes", "direction": "outgoing"},
    {"op": "link_upsert", "sourceRef": "p1", "links": [{"targetNodeId": "f1", "relation": "contradicts"}]},
    {"op": "compact", "type": "Fact", "childIds": ["$m1", "f1"], "summary": "sports"},
    {"op": "edit", "nodeId": "fb", "title": "hijack"},
    "{not json",
)


def test_applying_the_same_batch_twice_changes_nothing():
    _, rejects, first = run(BATCH)
    assert len(rejects) == 1 and codes(first) == [(10, NOT_FOUND)]
    assert first.applied.num_rows == 9
    again = apply_ops(
        first.nodes,
        first.edges,
        parse_ops(BATCH, "inbox/a/ops.jsonl", "a")[0],
        batch_id_for(BATCH),
        AT,
        None,
        cold_edges=first.cold_edges,
    )
    for name in ("nodes", "edges", "applied", "rejected", "cold_edges"):
        assert getattr(again, name).equals(getattr(first, name)), name
    assert first.nodes.num_rows == 6 + 4 and first.cold_edges.num_rows == 1


def test_output_is_independent_of_input_row_order():
    nodes, edges = lake()
    _, _, ref = run(BATCH, nodes=nodes, edges=edges)
    rng = random.Random(7)
    for _ in range(3):
        n_idx, e_idx = list(range(nodes.num_rows)), list(range(edges.num_rows))
        rng.shuffle(n_idx)
        rng.shuffle(e_idx)
        _, _, res = run(BATCH, nodes=nodes.take(n_idx), edges=edges.take(e_idx))
        for name in ("nodes", "edges", "applied", "rejected", "cold_edges"):
            assert getattr(res, name).equals(getattr(ref, name)), name


def test_a_tenant_never_touches_another_tenants_nodes():
    """Tenant b's agent names tenant a's ids: every op is NOT_FOUND (CHILD_NOT_FOUND for compact)."""
    data = lines(
        {"op": "edit", "nodeId": "f1", "title": "pwned"},
        {"op": "delete", "nodeId": "ep1"},
        {"op": "link_upsert", "sourceNodeId": "fb", "links": [{"targetNodeId": "f1", "relation": "about"}]},
        {"op": "link_delete", "sourceNodeId": "f1", "targetNodeId": "ep1", "relation": "causes"},
        {"op": "compact", "type": "Episode", "childIds": ["ep1", "ep2"], "summary": "s"},
        {
            "tool": "link_memories",
            "arguments": {
                "source_memory_description": "fb",
                "target_memory_description": "f1",
                "relation_type": "相关",
            },
        },
    )
    nodes, edges = lake()
    _, _, res = run(data, tenant="b", resolve=lambda tenant, text: "f1")  # a resolver leaking a's id
    assert codes(res) == [
        (1, NOT_FOUND),
        (2, NOT_FOUND),
        (3, NOT_FOUND),
        (4, NOT_FOUND),
        (5, CHILD_NOT_FOUND),
        (6, NOT_FOUND),
    ]
    assert all(r["tenant"] == "b" for r in rows(res.rejected))
    assert res.nodes.equals(apply_ops(nodes, edges, [], "x", AT, None).nodes)
    assert res.edges.equals(apply_ops(nodes, edges, [], "x", AT, None).edges)


def test_same_batch_in_two_tenants_stays_apart():
    data = lines(
        {
            "tool": "create_memory",
            "ref": "m",
            "arguments": {"subject": "我", "memory_type": "事实", "topic": "住在", "object": "上海"},
        },
        {"op": "edit", "nodeId": "$m", "title": "我 住在 北京"},
    )
    ops_a, _ = parse_ops(data, "inbox/a/ops.jsonl", "a")
    ops_b = [Op(tenant="b", index=o.index, name=o.name, args=o.args, ref=o.ref, raw=o.raw) for o in ops_a[:1]]
    ops_b.append(Op(tenant="b", index=2, name="edit", args={"nodeId": nid(data, 1, "a"), "title": "x"}))
    res = apply_ops(*lake(), ops_a + ops_b, batch_id_for(data), AT, None)
    a_id, b_id = nid(data, 1, "a"), nid(data, 1, "b")
    assert a_id != b_id
    got = {(r["tenant"], r["id"]): r for r in rows(res.nodes)}
    assert got[("a", a_id)]["title"] == "我 住在 北京" and got[("b", b_id)]["title"] == "我 住在 上海"
    assert codes(res) == [(2, NOT_FOUND)] and rows(res.rejected)[0]["tenant"] == "b"
    assert [(r["tenant"], r["op_index"]) for r in rows(res.applied)] == [("a", 1), ("a", 2), ("b", 1)]
    node_tenant = {(r["tenant"], r["id"]) for r in rows(res.nodes)}
    assert all(
        (e["tenant"], e["src"]) in node_tenant and (e["tenant"], e["dst"]) in node_tenant for e in rows(res.edges)
    )


def test_config_defaults_come_from_the_seeds():
    c = O.OpsConfig()
    assert (c.memory_importance, c.link_importance, c.link_direction) == (0.5, 0.6, "bidirectional")
    with pytest.raises(ValueError):
        O.OpsConfig(link_direction="sideways")


# -- fuzz ----------------------------------------------------------------------------------------

_NAMES = st.sampled_from([*O.OP_NAMES, "search_memories", "nope"])
_IDS = st.sampled_from(["f1", "ep1", "ep2", "f_old", "ent_xm", "fb", "$m1", "$m2", "zz", "", "小明"])
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    _IDS,
    st.text(max_size=8),
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    [
        "subject",
        "memory_type",
        "topic",
        "object",
        "attributes",
        "importance",
        "source_memory_description",
        "target_memory_description",
        "relation_type",
        "source",
        "target",
        "type",
        "title",
        "fields",
        "links",
        "nodeId",
        "setFields",
        "clearFields",
        "sourceNodeId",
        "sourceRef",
        "targetNodeId",
        "relation",
        "direction",
        "childIds",
        "summary",
    ]
)
_GOOD = {
    "memory_type": st.sampled_from(["事件", "事实", "关系", "观点"]),
    "relation_type": st.sampled_from(["导致", "相关"]),
    "type": st.sampled_from(["Fact", "Episode", "episode"]),
    "relation": st.sampled_from(["about", "causes"]),
    "childIds": st.lists(_IDS, max_size=3),
    "links": st.lists(
        st.fixed_dictionaries({"targetNodeId": _IDS, "relation": st.sampled_from(["about", "causes"])}), max_size=2
    ),
}
_ARGS = st.dictionaries(_KEYS, _VALUE, max_size=6).flatmap(
    lambda d: st.fixed_dictionaries({k: _GOOD.get(k, st.just(v)) for k, v in d.items()})
)
_OP_LINE = st.one_of(
    st.builds(
        lambda n, a, r: {"op": n, **a, **({"ref": r} if r else {})},
        _NAMES,
        _ARGS,
        st.sampled_from([None, "m1", "m2", "$m1", "bad ref"]),
    ),
    st.builds(lambda n, a: {"tool": n, "arguments": a}, _NAMES, _ARGS),
    st.builds(lambda n, a: {"type": "function", "function": {"name": n, "arguments": json.dumps(a)}}, _NAMES, _ARGS),
)
# well-formed ops over the fixture's ids and batch refs, so the fuzz reaches every apply path
_REFS = st.sampled_from(["m1", "m2"])
_WORD = st.one_of(st.sampled_from(["小明", "踢足球", "Ann", "puppy", "我"]), st.text(min_size=1, max_size=6))
_TARGET = st.one_of(_IDS, _REFS.map(lambda r: {"ref": r}), st.sampled_from([{"id": "f1"}, {"id": "fb"}]))
_REL = st.sampled_from(["about", "causes", "Caused_By", "related", "mentions", "因为"])
_DIR = st.sampled_from(["outgoing", "incoming", "bidirectional"])
_LINKS = st.lists(
    st.one_of(
        st.fixed_dictionaries({"targetNodeId": _TARGET, "relation": _REL}, optional={"direction": _DIR}),
        st.fixed_dictionaries({"targetRef": _REFS, "relation": _REL}),
    ),
    min_size=1,
    max_size=2,
)
_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "title": _WORD,
        "text": _WORD,
        "importance": st.floats(0, 1),
        "keywords": st.lists(_WORD, max_size=2),
        "time_start": st.sampled_from(["2025-11-01", "2025-11-01T08:00:00+08:00", "0001-01-01T00:00:00+01:00", "soon"]),
    },
)
_WELL_FORMED = st.one_of(
    st.fixed_dictionaries(
        {
            "tool": st.just("create_memory"),
            "arguments": st.fixed_dictionaries(
                {"subject": _WORD, "memory_type": st.sampled_from(sorted(O.MEMORY_TYPES)), "topic": _WORD},
                optional={
                    "object": _WORD,
                    "importance": st.floats(0, 1),
                    "attributes": st.dictionaries(
                        st.sampled_from(["时间", "地点", "time"]),
                        st.sampled_from(["今天", "昨晚", "2025-11-04 夜间", "", "?"]),
                    ),
                },
            ),
        },
        optional={"ref": _REFS},
    ),
    st.fixed_dictionaries(
        {
            "tool": st.just("link_memories"),
            "arguments": st.fixed_dictionaries(
                {
                    "source_memory_description": st.one_of(_TARGET, _WORD),
                    "target_memory_description": st.one_of(_TARGET, _WORD),
                    "relation_type": st.sampled_from(sorted(O.LINK_RELATIONS)),
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {"op": st.just("create"), "type": st.sampled_from(["Fact", "entity"]), "title": _WORD},
        optional={"fields": _FIELDS, "links": _LINKS, "ref": _REFS},
    ),
    st.fixed_dictionaries(
        {"op": st.just("edit"), "nodeId": _TARGET},
        optional={
            "setFields": _FIELDS,
            "title": _WORD,
            "clearFields": st.sampled_from([["text"], ["keywords", "time_start"]]),
        },
    ),
    st.fixed_dictionaries({"op": st.just("delete"), "nodeId": _TARGET}),
    st.fixed_dictionaries({"op": st.just("link_upsert"), "sourceNodeId": _TARGET, "links": _LINKS}),
    st.fixed_dictionaries({"op": st.just("link_upsert"), "sourceRef": _REFS, "links": _LINKS}),
    st.fixed_dictionaries(
        {"op": st.just("link_delete"), "sourceNodeId": _TARGET, "targetNodeId": _TARGET, "relation": _REL},
        optional={"direction": _DIR},
    ),
    st.fixed_dictionaries(
        {
            "op": st.just("compact"),
            "type": st.sampled_from(["Episode", "Fact"]),
            "childIds": st.lists(_TARGET, min_size=1, max_size=3),
            "summary": _WORD,
        },
        optional={"ref": _REFS},
    ),
)
_LINE = st.one_of(
    _WELL_FORMED.map(lambda o: json.dumps(o, ensure_ascii=False).encode()),
    _WELL_FORMED.map(lambda o: json.dumps(o, ensure_ascii=False).encode()),
    _OP_LINE.map(lambda o: json.dumps(o, ensure_ascii=False).encode()),
    st.binary(max_size=20),
    st.text(max_size=20).map(str.encode),
)


@fuzz_settings(150)
@given(st.lists(_LINE, max_size=12), st.sampled_from(["a", "b"]))
def test_fuzz_random_op_lines_never_raise_and_every_line_is_accounted_for(lines_, tenant):
    data = b"\n".join(ln.replace(b"\n", b" ") for ln in lines_)
    parsed, rejects, res = run(data, tenant=tenant, resolve=lambda t, text: "f1" if "小明" in text else None)
    chunks = data.split(b"\n")
    chunks[0] = chunks[0].removeprefix(b"\xef\xbb\xbf")
    n_lines = sum(1 for ln in chunks if ln.rstrip(b"\r").strip())
    seen = sorted(
        [r["op_index"] for r in rejects]
        + [r["op_index"] for r in rows(res.applied)]
        + [r["op_index"] for r in rows(res.rejected)]
    )
    assert len(seen) == len(set(seen))
    assert len(seen) == n_lines
    assert OP_FAILED not in {r["code"] for r in rows(res.rejected)}
    assert res.nodes.schema == NODES and res.edges.schema == EDGES
    assert res.applied.schema == OPS_APPLIED and res.rejected.schema == OPS_REJECTED
    node_keys = {(r["tenant"], r["id"]) for r in rows(res.nodes)}
    assert all((e["tenant"], e["src"]) in node_keys and (e["tenant"], e["dst"]) in node_keys for e in rows(res.edges))
    other = "b" if tenant == "a" else "a"
    base = lake()[0]
    assert [r for r in rows(res.nodes) if r["tenant"] == other] == sorted(
        (r for r in rows(base) if r["tenant"] == other), key=lambda r: r["id"]
    )
    assert len(node_keys) >= base.num_rows  # nothing is ever removed


@fuzz_settings(100)
@given(st.lists(_WELL_FORMED, min_size=1, max_size=8))
def test_fuzz_reapplying_a_batch_leaves_the_graph_unchanged(objs):
    data = lines(*objs)
    parsed, _, first = run(data)
    again = apply_ops(first.nodes, first.edges, parsed, batch_id_for(data), AT, None, cold_edges=first.cold_edges)
    for name in ("nodes", "edges", "cold_edges"):
        assert getattr(again, name).equals(getattr(first, name)), name


def test_read_batch_bundles_a_parsed_file_for_apply_ops():
    b = O.read_batch(BATCH, "inbox/a/ops.jsonl", "a", datetime(2025, 11, 5, 18, 0, tzinfo=UTC))
    assert (b.tenant, b.batch_id, b.at, len(b.ops)) == ("a", batch_id_for(BATCH), datetime(2025, 11, 5, 18), 10)
    assert b.parse_rejects.schema == OPS_REJECTED and b.parse_rejects.column("op_index").to_pylist() == [11]
    res = apply_ops(*lake(), b.ops, b.batch_id, b.at, None)
    assert res.applied.num_rows == 9 and set(res.applied.column("at").to_pylist()) == {datetime(2025, 11, 5, 18)}
