"""The `search_memories` tool (seed 000 §4.4 / App. A) for an LLM agent, mapped onto recall().

SEARCH_MEMORIES is the function-tool definition to hand to a chat-completions API;
search_memories(arguments, tenant=…) runs one call. The tenant is bound by the host,
never chosen by the model. Arguments are validated against the same JSON Schema the
model sees; a bad call returns {"error": {"code", "message"}} instead of raising, so
the agent can read what was wrong and retry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from functools import cache
from typing import Any

from raw_store.lake import Lake
from recall.engine import recall
from recall.hits import log_hits
from recall.store import IndexNotBuilt

# Seed 000's memory types (events, facts, relations, opinions) → node types; English names accepted too.
MEMORY_TYPES: Mapping[str, tuple[str, ...]] = {
    "事件": ("Episode", "Fact", "Task", "RawChunk"),
    "事实": ("Fact", "Entity"),
    "关系": ("Entity", "Concept"),
    "观点": ("Preference",),
    "event": ("Episode", "Fact", "Task", "RawChunk"),
    "fact": ("Fact", "Entity"),
    "relation": ("Entity", "Concept"),
    "opinion": ("Preference",),
}

_DATE = {"type": "string", "description": "ISO-8601 date or date-time, e.g. 2023-05-07 or 2023-05-07T18:00"}

SEARCH_MEMORIES: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": "search_memories",
        "description": "搜索相关记忆，用于回答问题或回忆往事。Search the user's long-term memory (what was said, "
        "by whom, when) to answer a question or recall the past; every result cites the original line.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "搜索查询，可以是问题或关键词。A question or keywords, e.g. '我什么时候吃过饭?'",
                },
                "memory_types": {
                    "type": "array",
                    "items": {"enum": sorted(MEMORY_TYPES)},
                    "uniqueItems": True,
                    "description": "限定搜索的记忆类型 / limit to these kinds of memory",
                },
                "time_range": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"start": _DATE, "end": _DATE},
                    "description": "时间范围过滤 / only memories within this time (either end open; a "
                    "date-only end includes that whole day)",
                },
                "as_of": {**_DATE, "description": "only what was known on this date (a date-only value: by its end)"},
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 10,
                    "description": "最多返回多少条记忆 / at most this many results",
                },
                "expand_depth": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 2,
                    "default": 1,
                    "description": "关联扩展深度：0=仅直接匹配，1=扩展1跳，2=扩展2跳 / graph hops",
                },
                "budget_tokens": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "fit the results and their citations into this many tokens",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}


@cache
def _validator() -> Any:
    """The arguments' JSON Schema validator, made with the first call: jsonschema takes ~90 ms to import, which every
    `memctl recall` paid for parse_when alone."""
    import jsonschema

    return jsonschema.Draft202012Validator(SEARCH_MEMORIES["function"]["parameters"])


class ToolArgumentError(ValueError):
    pass


def parse_when(value: str | None, field: str, end_of_day: bool) -> datetime | None:
    """A datetime from an ISO date or date-time; a bare date is its start (or, for an end, its last microsecond)."""
    if value is None:
        return None
    try:
        if "T" not in value and " " not in value.strip():
            d = date.fromisoformat(value.strip())
            start = datetime(d.year, d.month, d.day)
            return start + timedelta(days=1, microseconds=-1) if end_of_day else start
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise ToolArgumentError(f"{field}: {value!r} is not an ISO-8601 date or date-time") from None


def parse_arguments(arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """Validated search_memories arguments (a dict, or the JSON string a model returns) → recall() keywords.

    Raises ToolArgumentError naming the first problem.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as e:
            raise ToolArgumentError(f"arguments are not JSON: {e.msg}") from None
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError("arguments must be a JSON object")
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(arguments))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        raise ToolArgumentError(f"{where}: {error.message}")
    if not arguments["query"].strip():
        raise ToolArgumentError("query: must not be blank")
    tr = arguments.get("time_range") or {}
    start = parse_when(tr.get("start"), "time_range/start", False)
    end = parse_when(tr.get("end"), "time_range/end", True)
    if start is not None and end is not None and start > end:
        raise ToolArgumentError("time_range: start is after end")
    kinds = arguments.get("memory_types")
    types = sorted({t for kind in kinds for t in MEMORY_TYPES[kind]}) if kinds else None
    return {
        "query": arguments["query"],
        "k": arguments.get("max_results", 10),
        "expand_depth": arguments.get("expand_depth", 1),
        "types": types,
        "time_range": (start, end) if tr else None,
        "as_of": parse_when(arguments.get("as_of"), "as_of", True),
        "budget_tokens": arguments.get("budget_tokens"),
    }


def search_memories(
    arguments: Mapping[str, Any] | str, *, tenant: str, lake: Lake | None = None, log: bool = True
) -> dict:
    """Run one search_memories call for `tenant`: {"results": [...]} (RecallResult.to_json each, best first),
    or {"error": {"code": "BAD_ARGS" | "NO_INDEX", "message": …}}. The memories returned are logged as hits
    (recall.hits) unless `log` is False: an agent using a memory is access feedback."""
    if not tenant:
        raise ValueError("tenant is required")  # the host's mistake, not the model's
    try:
        kw = parse_arguments(arguments)
    except ToolArgumentError as e:
        return {"error": {"code": "BAD_ARGS", "message": str(e)}}
    query = kw.pop("query")
    try:
        results = recall(query, tenant, lake=lake, **kw)
    except IndexNotBuilt as e:
        return {"error": {"code": "NO_INDEX", "message": str(e)}}
    if log:
        log_hits(lake or Lake.from_env(), tenant, [r.node_id for r in results], query)
    return {"results": [r.to_json() for r in results]}
