"""The search_memories tool: its JSON Schema, argument validation and mapping onto recall()."""

from __future__ import annotations

import json
from datetime import datetime

import jsonschema
import pytest

from recall.tools import MEMORY_TYPES, SEARCH_MEMORIES, parse_arguments, search_memories
from recall_fixtures import puppy_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Built once for the module: search_memories only reads it (the hits it logs are read by no test here)."""
    return puppy_lake(tmp_path_factory.mktemp("puppy"))


def test_definition_is_a_valid_function_tool():
    fn = SEARCH_MEMORIES["function"]
    assert SEARCH_MEMORIES["type"] == "function" and fn["name"] == "search_memories"
    jsonschema.Draft202012Validator.check_schema(fn["parameters"])
    assert fn["parameters"]["required"] == ["query"]
    # seed 000's four memory types are offered
    assert {"事件", "事实", "关系", "观点"} <= set(fn["parameters"]["properties"]["memory_types"]["items"]["enum"])
    json.dumps(SEARCH_MEMORIES, ensure_ascii=False)  # serialisable as is


def test_arguments_map_onto_recall():
    kw = parse_arguments(
        {
            "query": "puppy",
            "memory_types": ["观点", "fact"],
            "max_results": 3,
            "expand_depth": 2,
            "time_range": {"start": "2023-05-01", "end": "2023-05-31"},
            "as_of": "2023-06-01T12:00",
            "budget_tokens": 400,
        }
    )
    assert kw["types"] == sorted(set(MEMORY_TYPES["观点"]) | set(MEMORY_TYPES["fact"]))
    assert kw["k"] == 3 and kw["expand_depth"] == 2 and kw["budget_tokens"] == 400
    # a date-only end includes the whole day
    assert kw["time_range"] == (datetime(2023, 5, 1), datetime(2023, 5, 31, 23, 59, 59, 999999))
    assert kw["as_of"] == datetime(2023, 6, 1, 12, 0)
    assert parse_arguments('{"query": "puppy"}') == {
        "query": "puppy",
        "k": 10,
        "expand_depth": 1,
        "types": None,
        "time_range": None,
        "as_of": None,
        "budget_tokens": None,
    }


@pytest.mark.parametrize(
    "args, needle",
    [
        ({}, "'query' is a required property"),
        ({"query": "  "}, "blank"),
        ({"query": "x", "max_results": 0}, "max_results"),
        ({"query": "x", "expand_depth": 3}, "expand_depth"),
        ({"query": "x", "memory_types": ["gossip"]}, "memory_types/0"),
        ({"query": "x", "time_range": {"start": "May 7"}}, "ISO-8601"),
        ({"query": "x", "time_range": {"start": "2023-06-01", "end": "2023-05-01"}}, "start is after end"),
        ({"query": "x", "tenant": "someone-else"}, "Additional properties"),
        ("{not json", "not JSON"),
    ],
)
def test_bad_calls_come_back_as_errors_the_model_can_read(lake, args, needle):
    out = search_memories(args, tenant="t", lake=lake)
    assert out["error"]["code"] == "BAD_ARGS" and needle in out["error"]["message"], out


def test_a_call_returns_cited_results_within_its_filters(lake):
    out = search_memories(
        {"query": "Biscuit puppy", "memory_types": ["event"], "time_range": {"start": "2023-07-01"}},
        tenant="t",
        lake=lake,
    )
    assert out["results"], out
    assert {r["node_id"] for r in out["results"]} == {"ep_j1"}
    assert out["results"][0]["citations"][0]["excerpt"].startswith("Biscuit won")
    json.dumps(out, ensure_ascii=False)


def test_the_tenant_is_the_hosts_not_the_models(lake):
    with pytest.raises(ValueError):
        search_memories({"query": "Biscuit"}, tenant="", lake=lake)
    assert search_memories({"query": "Biscuit"}, tenant="nobody", lake=lake) == {"results": []}


def test_no_index_is_an_error_object(tmp_path):
    from raw_store.lake import Lake

    out = search_memories({"query": "Biscuit"}, tenant="t", lake=Lake(tmp_path))
    assert out["error"]["code"] == "NO_INDEX"
