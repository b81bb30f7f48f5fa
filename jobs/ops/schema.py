"""The contract of an op: error codes, op names, OpsConfig, and the JSON Schemas every op's arguments are
validated against (check_args), with the relation words an edge type may go by (edge_type_for)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonschema

from r2g.schema import EDGE_TYPES, NODE_TYPES
from r2g.time_values import GRANULARITIES

# -- error codes (OPS_REJECTED.code) -------------------------------------------------------------
BAD_ARGS = "BAD_ARGS"  # seed 001: the op does not parse or breaks its contract
NOT_FOUND = "NOT_FOUND"  # a named node/ref/link does not exist in the op's tenant (or is archived)
CHILD_NOT_FOUND = "CHILD_NOT_FOUND"  # seed 001 compactNodes: a childId is not in the store
CHILD_HAS_PARENT = "CHILD_HAS_PARENT"  # seed 001 compactNodes: a child already has a rollup parent of that type
OP_FAILED = "OP_FAILED"  # seed 001: the batch could not apply the op (here: `resolve` raised)
CODES = (BAD_ARGS, NOT_FOUND, CHILD_NOT_FOUND, CHILD_HAS_PARENT, OP_FAILED)

SEED000_OPS = ("create_memory", "link_memories")
SEED001_OPS = ("create", "edit", "delete", "link_upsert", "link_delete", "compact")
OP_NAMES = SEED000_OPS + SEED001_OPS
_DEFINES_REF = frozenset({"create_memory", "create", "compact"})
DIRECTIONS = ("outgoing", "incoming", "bidirectional")  # seed 001 LinkSpec.direction


def provenance(op: str) -> str:
    """The provenance of every node/edge an op creates, e.g. jobs.ops.create_memory.v1."""
    return f"jobs.ops.{op}.v1"


@dataclass(frozen=True)
class OpsConfig:
    # seed 000 App. A: create_memory.importance default 0.5.
    memory_importance: float = 0.5
    # seed 000 App. A: link_memories.importance default 0.6 (used as the edge weight).
    link_importance: float = 0.6
    # seed 001 upsertLinks / deleteLinks: direction defaults to 'bidirectional'.
    link_direction: str = "bidirectional"
    # Ours: an explicit agent write is taken as stated, like R2G's direct units (CONF[EPISODE] = 1.0).
    confidence: float = 1.0
    # Ours: a link_memories description matches a node this batch created when it shares at least
    # half of the description's character bigrams (seed 000 §4.3 links what §4.2 just created).
    match_threshold: float = 0.5
    # r2g.rules.TITLE_MAX_CHARS: titles are cut to 60 characters (the text keeps everything).
    title_max_chars: int = 60
    # Ours: looks_like_ops samples the first 20 non-blank lines (raw_store.readers samples likewise).
    sample_lines: int = 20

    def __post_init__(self) -> None:
        if self.link_direction not in DIRECTIONS:
            raise ValueError(f"link_direction must be one of {DIRECTIONS}")
        if not 0 < self.match_threshold <= 1:
            raise ValueError("match_threshold must be in (0, 1]")


DEFAULT_CONFIG = OpsConfig()


class _Reject(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- argument schemas ----------------------------------------------------------------------------
# Seed 000's memory types → (node type, subtype). 事件 is event-centred, hence a Fact (SPEC §5), like 事实.
MEMORY_TYPES: Mapping[str, tuple[str, str]] = {
    "事件": ("Fact", "event"),
    "事实": ("Fact", "state"),
    "关系": ("Fact", "relation"),
    "观点": ("Preference", "opinion"),
    "event": ("Fact", "event"),
    "fact": ("Fact", "state"),
    "relation": ("Fact", "relation"),
    "opinion": ("Preference", "opinion"),
}
# Seed 000's link relations → edge type, oriented source → target. The seed's examples put the cause
# (因为 / 所以 / 导致) and the basis (基于) as source; causal links also get the CAUSED_BY inverse, as R2G
# writes them, and 相关 is symmetric.
LINK_RELATIONS: Mapping[str, str] = {
    "因为": "CAUSES",
    "所以": "CAUSES",
    "导致": "CAUSES",
    "引用": "REFERS_TO",
    "基于": "SUPPORTS",
    "相关": "SIMILAR_TO",
    "because": "CAUSES",
    "so": "CAUSES",
    "causes": "CAUSES",
    "refers_to": "REFERS_TO",
    "based_on": "SUPPORTS",
    "related": "SIMILAR_TO",
}
# Seed 001 relations are free words: an edge type's name in any case, these aliases, or a seed 000 relation.
RELATION_ALIASES: Mapping[str, str] = {
    "related": "SIMILAR_TO",
    "similar": "SIMILAR_TO",
    "references": "REFERS_TO",
    "cites": "REFERS_TO",
    "located_in": "LOCATION",
    "located_at": "LOCATION",
    "contains": "SEMANTIC_CONTAINS",
}
INVERSE: Mapping[str, str] = {"CAUSES": "CAUSED_BY", "CAUSED_BY": "CAUSES"}
SYMMETRIC = frozenset({"SIMILAR_TO", "SAME_AS", "CONTRADICTS"})
_TEXT = {"type": "string", "pattern": r"\S"}
_STRS = {"type": "array", "items": {"type": "string"}}
_UNIT = {"type": "number", "minimum": 0, "maximum": 1}
_WHEN = {"type": "string", "pattern": r"\S", "description": "ISO-8601 date or date-time, or a time expression"}
REF_NAME = {"type": "string", "pattern": r"^\$?[A-Za-z0-9_.:-]{1,64}$"}
_REF_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
NODE_REF = {
    "oneOf": [
        {"type": "string", "minLength": 1},
        {"type": "object", "properties": {"ref": REF_NAME}, "required": ["ref"], "additionalProperties": False},
        {
            "type": "object",
            "properties": {"id": {"type": "string", "minLength": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
    ]
}
# Seed 001's free `fields`, mapped onto the NODES columns an agent may write.
NODE_FIELDS: Mapping[str, Any] = {
    "title": _TEXT,
    "text": {"type": "string"},
    "subtype": {"type": "string"},
    "keywords": _STRS,
    "entities": _STRS,
    "aliases": _STRS,
    "lang": {"enum": ["zh", "en", "und"]},
    "time_start": _WHEN,
    "time_end": _WHEN,
    "time_granularity": {"enum": list(GRANULARITIES)},
    "time_text": {"type": "string"},
    "importance": _UNIT,
    "confidence": _UNIT,
    "sentiment": {"type": "number", "minimum": -1, "maximum": 1},
    "predicate_norm": {"type": "string"},
    "negation": {"type": "boolean"},
    "modality": {"type": "string"},
    "speaker": {"type": "string"},
}
CLEARABLE = tuple(f for f in NODE_FIELDS if f != "title")
_FIELDS_OBJ = {"type": "object", "properties": dict(NODE_FIELDS), "additionalProperties": False}
_LINK_SPEC = {
    "type": "object",
    "properties": {
        "targetNodeId": NODE_REF,
        "targetRef": REF_NAME,
        "relation": _TEXT,
        "direction": {"enum": list(DIRECTIONS)},
    },
    "required": ["relation"],
    "oneOf": [{"required": ["targetNodeId"]}, {"required": ["targetRef"]}],
    "additionalProperties": False,
}

CREATE_MEMORY: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": "create_memory",
        "description": "创建一条新的记忆。Save one memory: who (subject), what kind, what about (topic), optionally "
        "the object, attributes such as 时间/地点/原因/方式, and importance 0–1.",
        "parameters": {
            "type": "object",
            "properties": {
                "subject": {**_TEXT, "description": "记忆的主体(谁), e.g. '我'、'小明'"},
                "memory_type": {
                    "enum": sorted(MEMORY_TYPES),
                    "description": "事件=有时间的动作;事实=稳定状态;关系=人际关系;观点=主观评价",
                },
                "topic": {**_TEXT, "description": "记忆的主题(做什么/是什么状态), e.g. '吃饭'"},
                "object": {"type": "string", "description": "记忆的客体, e.g. '白米饭'"},
                "attributes": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "额外属性,如 时间/地点/原因/方式 (时间 is normalised to ISO-8601)",
                },
                "importance": {
                    **_UNIT,
                    "default": 0.5,
                    "description": "0.3=日常琐事, 0.5=一般事件, 0.8=重要事件, 1.0=关键记忆",
                },
            },
            "required": ["subject", "memory_type", "topic"],
            "additionalProperties": False,
        },
    },
}

LINK_MEMORIES: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": "link_memories",
        "description": "在两条记忆之间建立关联。Link two memories, each named by a description (found among this "
        'batch\'s new memories, then by recall), an id {"id": …} or a batch ref {"ref": …}.',
        "parameters": {
            "type": "object",
            "properties": {
                "source_memory_description": {**NODE_REF, "description": "源记忆, e.g. '我今天不开心'"},
                "target_memory_description": {**NODE_REF, "description": "目标记忆, e.g. '我摔东西'"},
                "relation_type": {"enum": sorted(LINK_RELATIONS)},
                "importance": {**_UNIT, "default": 0.6},
            },
            "required": ["source_memory_description", "target_memory_description", "relation_type"],
            "additionalProperties": False,
        },
    },
}

# Seed 001 applyExtractionBatch ops (ref / ts are envelope keys, lifted out before validation).
SEED001_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "create": {
        "type": "object",
        "properties": {
            "type": {"enum": list(NODE_TYPES)},
            "title": _TEXT,
            "fields": _FIELDS_OBJ,
            "links": {"type": "array", "items": _LINK_SPEC},
        },
        "required": ["type"],
        "additionalProperties": False,
    },
    "edit": {
        "type": "object",
        "properties": {
            "nodeId": NODE_REF,
            "setFields": {**_FIELDS_OBJ, "minProperties": 1},
            "clearFields": {"type": "array", "items": {"enum": list(CLEARABLE)}, "minItems": 1, "uniqueItems": True},
            "title": _TEXT,
        },
        "required": ["nodeId"],
        "additionalProperties": False,
        "anyOf": [{"required": ["setFields"]}, {"required": ["clearFields"]}, {"required": ["title"]}],
    },
    "delete": {
        "type": "object",
        "properties": {"nodeId": NODE_REF},
        "required": ["nodeId"],
        "additionalProperties": False,
    },
    "link_upsert": {
        "type": "object",
        "properties": {
            "sourceNodeId": NODE_REF,
            "sourceRef": REF_NAME,
            "links": {"type": "array", "items": _LINK_SPEC, "minItems": 1},
        },
        "required": ["links"],
        "additionalProperties": False,
        "oneOf": [{"required": ["sourceNodeId"]}, {"required": ["sourceRef"]}],
    },
    "link_delete": {
        "type": "object",
        "properties": {
            "sourceNodeId": NODE_REF,
            "targetNodeId": NODE_REF,
            "relation": _TEXT,
            "direction": {"enum": list(DIRECTIONS)},
        },
        "required": ["sourceNodeId", "targetNodeId", "relation"],
        "additionalProperties": False,
    },
    "compact": {
        "type": "object",
        "properties": {
            "type": {"enum": list(NODE_TYPES)},
            "childIds": {"type": "array", "items": NODE_REF, "minItems": 1, "uniqueItems": True},
            "summary": _TEXT,
            "fields": _FIELDS_OBJ,
        },
        "required": ["type", "childIds", "summary"],
        "additionalProperties": False,
    },
}

ARG_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "create_memory": CREATE_MEMORY["function"]["parameters"],
    "link_memories": LINK_MEMORIES["function"]["parameters"],
    **SEED001_SCHEMAS,
}
_VALIDATORS = {name: jsonschema.Draft202012Validator(s) for name, s in ARG_SCHEMAS.items()}
_NODE_TYPE_BY_LOWER = {t.lower(): t for t in NODE_TYPES}


def parse_when(value: str) -> datetime:
    """A naive-UTC datetime from an ISO-8601 date or date-time (aware values are converted to UTC)."""
    s = value.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    dt = datetime.fromisoformat(s)
    return _naive(dt)


def _naive(dt: datetime) -> datetime:
    """`dt` as naive UTC; ValueError when UTC falls outside datetime's range (year 1 with a + offset)."""
    try:
        return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo is not None else dt
    except OverflowError:
        raise ValueError(f"{dt.isoformat()} is out of range in UTC") from None


def check_args(name: str, args: Mapping[str, Any]) -> str | None:
    """The first problem with `args` for op `name` (JSON Schema, then the contract beyond it), or None."""
    validator = _VALIDATORS.get(name)
    if validator is None:
        return f"unknown op {name!r}"
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    except RecursionError:
        return "arguments nest too deeply"
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        return f"{where}: {error.message}"
    for key in ("fields", "setFields"):
        for f in ("time_start", "time_end"):
            v = (args.get(key) or {}).get(f)
            if v is not None:
                try:
                    parse_when(v)
                except ValueError:
                    return f"{key}/{f}: {v!r} is not an ISO-8601 date or date-time"
    if name == "edit" and set(args.get("setFields") or ()) & set(args.get("clearFields") or ()):
        return "edit: a field is both set and cleared"
    if name == "create" and not (
        args.get("title")
        or (args.get("fields") or {}).get("title")
        or ((args.get("fields") or {}).get("text") or "").strip()
    ):
        return "create: a memory needs a title or a text"
    relations = [args.get("relation")] + [link.get("relation") for link in args.get("links") or ()]
    for rel in relations:
        if rel is not None and edge_type_for(rel) is None:
            return f"relation {rel!r} names no edge type (use one of {', '.join(EDGE_TYPES)})"
    return None


def edge_type_for(relation: str) -> str | None:
    """The edge type a seed 001 relation word (or a seed 000 relation_type) stands for; None if none."""
    r = relation.strip()
    if r in LINK_RELATIONS:
        return LINK_RELATIONS[r]
    key = re.sub(r"[\s-]+", "_", r).lower()
    if key.upper() in EDGE_TYPES:
        return key.upper()
    return RELATION_ALIASES.get(key) or LINK_RELATIONS.get(key)
