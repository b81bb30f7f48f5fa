"""Agent write-ops (SPEC §9): JSONL op batches from external agents, validated and applied to nodes/edges.

An ops file is JSONL, one op per line. Two shapes are read (both may mix in one file):

  seed 000 tool calls (App. A)  {"tool": "create_memory", "arguments": {...}}
                                also "name" for "tool", "args" for "arguments", arguments as a JSON
                                string, and the chat-completions form {"type": "function",
                                "function": {"name": …, "arguments": "<json>"}}
  seed 001 ops (Write API)      {"op": "create", "type": "Fact", "fields": {...}, "ref": "c1"}  (flat, as
                                applyExtractionBatch takes them) or {"op": "create", "args": {...}}

Op names: create_memory, link_memories (seed 000); create, edit, delete, link_upsert, link_delete,
compact (seed 001). Envelope keys besides the op name and its arguments: `ref` (a batch-local name the
op defines: create_memory, create and compact only), `ts` (ISO-8601 time of the agent's call; anchors
relative times such as 今天, else `at`), `tenant` (must equal the inbox tenant: the host binds it, the
agent never picks it), `id` / `call_id` / `type: "function"` of a tool call (ignored).

Naming a node where an op expects one (nodeId, sourceNodeId, targetNodeId, childIds[], and
link_memories' source/target):
  "n_…" or {"id": "n_…"}   a node id of the op's tenant
  "$m1" or {"ref": "m1"}   the node an earlier op of the same batch defined with "ref": "m1"
                           (seed 001's sourceRef / targetRef take the bare name "m1")
  free text                link_memories only (seed 000 `*_memory_description`): first the nodes this
                           batch created (best share of the text's character bigrams ≥ match_threshold,
                           latest op on ties), then `resolve(tenant, text)` (the pipeline wires recall)

Applying (`apply_ops`): ops run in order; each is all-or-nothing and an error never aborts the
batch — the op becomes an OPS_REJECTED row with a coded reason (seed 001's BAD_ARGS,
CHILD_NOT_FOUND, CHILD_HAS_PARENT; NOT_FOUND for a node that is missing, archived, forgotten or
another tenant's — which one is never revealed; OP_FAILED when `resolve` raises). New node ids
hash (tenant, batch_id, op_index) and edge ids (tenant, src, type, dst), so applying a batch again
creates nothing new: nodes, edges and cold edges come out identical (pass the cold edges back in),
and so do the applied and rejected rows — except for an op writing to a node that a later op of the
same batch archived, which the re-run rejects NOT_FOUND (the graph is still unchanged). To make a
re-run see what the first run saw, a node a create op of the batch makes is invisible until that op
has run, and a create op whose node exists already is replayed: reported as applied, writing nothing
(not even an edge deleted since), its targets allowed to be archived by now.

Nothing is dropped: `delete` archives (status "archived"); `link_delete` moves the edge to the
COLD_EDGES table (reason names the op) rather than deleting it. Seed 000 §12's "staged" memories
are plain active nodes with tier/category null (consolidation fills them), so recall finds them at
once and the read API does not treat them as archived.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping

import jsonschema
import pyarrow as pa
import pyarrow.compute as pc

from jobs.schema import COLD_EDGES, OPS_APPLIED, OPS_REJECTED
from r2g.ids import edge_id, stable_id
from r2g.schema import EDGE_TYPES, EDGES, NODE_TYPES, NODES
from r2g.time_norm import GRANULARITIES, find_times, resolve as resolve_time
from raw_store.cas import raw_id_for
from raw_store.lake import conform
from raw_store.text import detect_lang

# -- error codes (OPS_REJECTED.code) -------------------------------------------------------------
BAD_ARGS = "BAD_ARGS"                    # seed 001: the op does not parse or breaks its contract
NOT_FOUND = "NOT_FOUND"                  # a named node/ref/link does not exist in the op's tenant (or is archived)
CHILD_NOT_FOUND = "CHILD_NOT_FOUND"      # seed 001 compactNodes: a childId is not in the store
CHILD_HAS_PARENT = "CHILD_HAS_PARENT"    # seed 001 compactNodes: a child already has a rollup parent of that type
OP_FAILED = "OP_FAILED"                  # seed 001: the batch could not apply the op (here: `resolve` raised)
CODES = (BAD_ARGS, NOT_FOUND, CHILD_NOT_FOUND, CHILD_HAS_PARENT, OP_FAILED)

SEED000_OPS = ("create_memory", "link_memories")
SEED001_OPS = ("create", "edit", "delete", "link_upsert", "link_delete", "compact")
OP_NAMES = SEED000_OPS + SEED001_OPS
_DEFINES_REF = frozenset({"create_memory", "create", "compact"})
DIRECTIONS = ("outgoing", "incoming", "bidirectional")   # seed 001 LinkSpec.direction


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

# -- argument schemas ----------------------------------------------------------------------------
# Seed 000's memory types → (node type, subtype). 事件 is event-centred, hence a Fact (SPEC §5), like 事实.
MEMORY_TYPES: Mapping[str, tuple[str, str]] = {
    "事件": ("Fact", "event"), "事实": ("Fact", "state"), "关系": ("Fact", "relation"), "观点": ("Preference", "opinion"),
    "event": ("Fact", "event"), "fact": ("Fact", "state"), "relation": ("Fact", "relation"),
    "opinion": ("Preference", "opinion"),
}
# Seed 000's link relations → edge type, oriented source → target. The seed's examples put the cause
# (因为 / 所以 / 导致) and the basis (基于) as source; causal links also get the CAUSED_BY inverse, as R2G
# writes them, and 相关 is symmetric.
LINK_RELATIONS: Mapping[str, str] = {
    "因为": "CAUSES", "所以": "CAUSES", "导致": "CAUSES", "引用": "REFERS_TO", "基于": "SUPPORTS", "相关": "SIMILAR_TO",
    "because": "CAUSES", "so": "CAUSES", "causes": "CAUSES", "refers_to": "REFERS_TO", "based_on": "SUPPORTS",
    "related": "SIMILAR_TO",
}
# Seed 001 relations are free words: an edge type's name in any case, these aliases, or a seed 000 relation.
RELATION_ALIASES: Mapping[str, str] = {
    "related": "SIMILAR_TO", "similar": "SIMILAR_TO", "references": "REFERS_TO", "cites": "REFERS_TO",
    "located_in": "LOCATION", "located_at": "LOCATION", "contains": "SEMANTIC_CONTAINS",
}
INVERSE: Mapping[str, str] = {"CAUSES": "CAUSED_BY", "CAUSED_BY": "CAUSES"}
SYMMETRIC = frozenset({"SIMILAR_TO", "SAME_AS", "CONTRADICTS"})
_TEXT = {"type": "string", "pattern": r"\S"}
_STRS = {"type": "array", "items": {"type": "string"}}
_UNIT = {"type": "number", "minimum": 0, "maximum": 1}
_WHEN = {"type": "string", "pattern": r"\S", "description": "ISO-8601 date or date-time, or a time expression"}
REF_NAME = {"type": "string", "pattern": r"^\$?[A-Za-z0-9_.:-]{1,64}$"}
_REF_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
NODE_REF = {"oneOf": [
    {"type": "string", "minLength": 1},
    {"type": "object", "properties": {"ref": REF_NAME}, "required": ["ref"], "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "string", "minLength": 1}}, "required": ["id"],
     "additionalProperties": False},
]}
# Seed 001's free `fields`, mapped onto the NODES columns an agent may write.
NODE_FIELDS: Mapping[str, Any] = {
    "title": _TEXT, "text": {"type": "string"}, "subtype": {"type": "string"},
    "keywords": _STRS, "entities": _STRS, "aliases": _STRS, "lang": {"enum": ["zh", "en", "und"]},
    "time_start": _WHEN, "time_end": _WHEN, "time_granularity": {"enum": list(GRANULARITIES)},
    "time_text": {"type": "string"}, "importance": _UNIT, "confidence": _UNIT,
    "sentiment": {"type": "number", "minimum": -1, "maximum": 1},
    "predicate_norm": {"type": "string"}, "negation": {"type": "boolean"}, "modality": {"type": "string"},
    "speaker": {"type": "string"},
}
CLEARABLE = tuple(f for f in NODE_FIELDS if f != "title")
_FIELDS_OBJ = {"type": "object", "properties": dict(NODE_FIELDS), "additionalProperties": False}
_LINK_SPEC = {
    "type": "object",
    "properties": {"targetNodeId": NODE_REF, "targetRef": REF_NAME, "relation": _TEXT,
                   "direction": {"enum": list(DIRECTIONS)}},
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
                "memory_type": {"enum": sorted(MEMORY_TYPES),
                                "description": "事件=有时间的动作;事实=稳定状态;关系=人际关系;观点=主观评价"},
                "topic": {**_TEXT, "description": "记忆的主题(做什么/是什么状态), e.g. '吃饭'"},
                "object": {"type": "string", "description": "记忆的客体, e.g. '白米饭'"},
                "attributes": {"type": "object", "additionalProperties": {"type": "string"},
                               "description": "额外属性,如 时间/地点/原因/方式 (时间 is normalised to ISO-8601)"},
                "importance": {**_UNIT, "default": 0.5,
                               "description": "0.3=日常琐事, 0.5=一般事件, 0.8=重要事件, 1.0=关键记忆"},
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
                       "batch's new memories, then by recall), an id {\"id\": …} or a batch ref {\"ref\": …}.",
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
        "properties": {"type": {"enum": list(NODE_TYPES)}, "title": _TEXT, "fields": _FIELDS_OBJ,
                       "links": {"type": "array", "items": _LINK_SPEC}},
        "required": ["type"], "additionalProperties": False,
    },
    "edit": {
        "type": "object",
        "properties": {"nodeId": NODE_REF, "setFields": {**_FIELDS_OBJ, "minProperties": 1},
                       "clearFields": {"type": "array", "items": {"enum": list(CLEARABLE)}, "minItems": 1,
                                       "uniqueItems": True},
                       "title": _TEXT},
        "required": ["nodeId"], "additionalProperties": False,
        "anyOf": [{"required": ["setFields"]}, {"required": ["clearFields"]}, {"required": ["title"]}],
    },
    "delete": {
        "type": "object", "properties": {"nodeId": NODE_REF}, "required": ["nodeId"], "additionalProperties": False,
    },
    "link_upsert": {
        "type": "object",
        "properties": {"sourceNodeId": NODE_REF, "sourceRef": REF_NAME,
                       "links": {"type": "array", "items": _LINK_SPEC, "minItems": 1}},
        "required": ["links"], "additionalProperties": False,
        "oneOf": [{"required": ["sourceNodeId"]}, {"required": ["sourceRef"]}],
    },
    "link_delete": {
        "type": "object",
        "properties": {"sourceNodeId": NODE_REF, "targetNodeId": NODE_REF, "relation": _TEXT,
                       "direction": {"enum": list(DIRECTIONS)}},
        "required": ["sourceNodeId", "targetNodeId", "relation"], "additionalProperties": False,
    },
    "compact": {
        "type": "object",
        "properties": {"type": {"enum": list(NODE_TYPES)},
                       "childIds": {"type": "array", "items": NODE_REF, "minItems": 1, "uniqueItems": True},
                       "summary": _TEXT, "fields": _FIELDS_OBJ},
        "required": ["type", "childIds", "summary"], "additionalProperties": False,
    },
}

ARG_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "create_memory": CREATE_MEMORY["function"]["parameters"],
    "link_memories": LINK_MEMORIES["function"]["parameters"],
    **SEED001_SCHEMAS,
}
_VALIDATORS = {name: jsonschema.Draft202012Validator(s) for name, s in ARG_SCHEMAS.items()}
_NODE_TYPE_BY_LOWER = {t.lower(): t for t in NODE_TYPES}


# -- parsed ops ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    """One validated op of a batch."""
    tenant: str
    index: int                          # op_index: the op's 1-based line in the ops file
    name: str                           # one of OP_NAMES
    args: Mapping[str, Any]             # validated arguments (envelope keys lifted out)
    ref: str | None = None              # the batch-local name this op defines
    ts: datetime | None = None          # when the agent made the call (naive UTC); anchors relative times
    raw: str = ""                       # the line as given
    raw_ref: Mapping[str, Any] | None = field(default=None, compare=False)  # the line in the ops file's blob


@dataclass(frozen=True)
class OpsResult:
    nodes: pa.Table          # NODES: input nodes with created / edited / archived rows
    edges: pa.Table          # EDGES: input edges with created rows, minus the ones moved to cold_edges
    applied: pa.Table        # OPS_APPLIED
    rejected: pa.Table       # OPS_REJECTED (apply-time rejects; parse_ops returns the parse-time ones)
    cold_edges: pa.Table     # COLD_EDGES: the input cold edges plus the edges link_delete moved out


class _Reject(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def batch_id_for(data: bytes) -> str:
    """The batch id of an ops file: the sha256 hex of its bytes (its blob in the CAS is raw_id_for(it))."""
    return hashlib.sha256(data).hexdigest()


def _reject_row(tenant: str, batch_id: str, index: int, op: str | None, code: str, message: str, raw: str) -> dict:
    return {"tenant": tenant, "batch_id": batch_id, "op_index": index, "op": op, "code": code, "message": message,
            "raw": raw}


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constants)


def parse_when(value: str) -> datetime:
    """A naive-UTC datetime from an ISO-8601 date or date-time (aware values are converted to UTC)."""
    s = value.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    dt = datetime.fromisoformat(s)
    return _naive(dt)


_ENVELOPE = frozenset({"op", "tool", "name", "args", "arguments", "function", "ref", "ts", "tenant", "id", "call_id",
                       "type"})


def _unwrap(obj: dict) -> tuple[str, Any, dict]:
    """(op name, arguments, envelope) of one decoded line; raises _Reject(BAD_ARGS)."""
    if "op" in obj:
        name = obj["op"]
        nested = "args" in obj or "arguments" in obj
        args = obj.get("args", obj.get("arguments")) if nested else {
            k: v for k, v in obj.items() if k not in ("op", "ref", "ts", "tenant")}
        envelope = {k: v for k, v in obj.items() if k in ("ref", "ts", "tenant")}
        extra = sorted(k for k in obj if k not in _ENVELOPE) if nested else []
    elif isinstance(obj.get("function"), dict):
        fn = obj["function"]
        name, args = fn.get("name"), fn.get("arguments", {})
        envelope = {k: v for k, v in obj.items() if k in ("ref", "ts", "tenant")}
        extra = sorted(k for k in obj if k not in _ENVELOPE)
    elif "tool" in obj or "name" in obj:
        name = obj.get("tool", obj.get("name"))
        args = obj.get("arguments", obj.get("args", {}))
        envelope = {k: v for k, v in obj.items() if k in ("ref", "ts", "tenant")}
        extra = sorted(k for k in obj if k not in _ENVELOPE)
    else:
        raise _Reject(BAD_ARGS, "not an op: expected an `op`, `tool` or `function` key")
    if not isinstance(name, str) or name not in OP_NAMES:
        raise _Reject(BAD_ARGS, f"unknown op {name!r}; known: {', '.join(OP_NAMES)}")
    if extra:
        raise _Reject(BAD_ARGS, f"unknown keys {extra}")
    if isinstance(args, str):
        try:
            args = _loads(args)
        except (ValueError, RecursionError):
            raise _Reject(BAD_ARGS, "arguments are not JSON") from None
    if not isinstance(args, dict):
        raise _Reject(BAD_ARGS, "arguments must be a JSON object")
    if "ref" in args and "ref" not in envelope and name in _DEFINES_REF:
        args = dict(args)
        envelope["ref"] = args.pop("ref")
    return name, args, envelope


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
    if name == "create" and not (args.get("title") or (args.get("fields") or {}).get("title")
                                 or ((args.get("fields") or {}).get("text") or "").strip()):
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


def _normalise(name: str, args: dict) -> dict:
    """Tolerated spellings, rewritten before validation: link_memories' `source`/`target` (seed 000 §4.5's
    own shorthand) and node types in any case."""
    args = dict(args)
    if name == "link_memories":
        for short, full in (("source", "source_memory_description"), ("target", "target_memory_description")):
            if short in args and full not in args:
                args[full] = args.pop(short)
    if name in ("create", "compact") and isinstance(args.get("type"), str):
        args["type"] = _NODE_TYPE_BY_LOWER.get(args["type"].lower(), args["type"])
    return args


def parse_line(text: str, tenant: str, index: int, raw_ref: Mapping[str, Any] | None = None) -> Op:
    """One ops-file line → a validated Op; raises _Reject(BAD_ARGS) naming the problem."""
    try:
        obj = _loads(text)
    except (ValueError, RecursionError) as e:
        raise _Reject(BAD_ARGS, f"not JSON: {getattr(e, 'msg', e)}") from None
    if not isinstance(obj, dict):
        raise _Reject(BAD_ARGS, "an op line must be a JSON object")
    name, args, env = _unwrap(obj)
    if "tenant" in env and env["tenant"] != tenant:
        raise _Reject(BAD_ARGS, "tenant is bound by the inbox folder, not by the op")
    ref = env.get("ref")
    if ref is not None:
        if name not in _DEFINES_REF:
            raise _Reject(BAD_ARGS, f"{name} defines no node, so it cannot define a ref")
        if not isinstance(ref, str) or not _REF_RE.match(ref.removeprefix("$")):
            raise _Reject(BAD_ARGS, "ref must be 1–64 letters, digits or _.:-")
        ref = ref.removeprefix("$")
    ts = None
    if env.get("ts") is not None:
        try:
            ts = parse_when(env["ts"]) if isinstance(env["ts"], str) else None
        except ValueError:
            ts = None
        if ts is None:
            raise _Reject(BAD_ARGS, f"ts: {env['ts']!r} is not an ISO-8601 date-time")
    args = _normalise(name, args)
    problem = check_args(name, args)
    if problem is not None:
        raise _Reject(BAD_ARGS, problem)
    return Op(tenant=tenant, index=index, name=name, args=args, ref=ref, ts=ts, raw=text, raw_ref=raw_ref)


def parse_ops(data: bytes, source_file: str, tenant: str) -> tuple[list[Op], list[dict]]:
    """An ops file's bytes → (valid ops in file order, OPS_REJECTED rows for the lines that are not).

    op_index is the 1-based line number; blank lines are not ops. A line that is not UTF-8, not JSON,
    not an op or breaks its op's schema is a BAD_ARGS row holding the raw line (undecodable bytes
    backslash-escaped) and, in `message`, `source_file:line`. batch_id = batch_id_for(data); each Op's
    raw_ref points at its line inside the file's blob (raw_id_for(batch_id)), so the pipeline must
    put the file's bytes in the CAS for created nodes to cite their op. Never raises on bad input.
    """
    bid = batch_id_for(data)
    raw_id = raw_id_for(bid)
    ops: list[Op] = []
    rejected: list[dict] = []
    offset = 0
    for n, chunk in enumerate(data.split(b"\n"), start=1):
        start, offset = offset, offset + len(chunk) + 1
        line = chunk.rstrip(b"\r")
        if n == 1 and line.startswith(b"\xef\xbb\xbf"):
            line, start = line[3:], start + 3
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            rejected.append(_reject_row(tenant, bid, n, None, BAD_ARGS, f"{source_file}:{n}: line is not valid UTF-8",
                                        line.decode("utf-8", "backslashreplace")))
            continue
        try:
            ops.append(parse_line(text, tenant, n, {"raw_id": raw_id, "offset": start, "length": len(line)}))
        except _Reject as r:
            rejected.append(_reject_row(tenant, bid, n, _op_name_of(text), r.code, f"{source_file}:{n}: {r.message}",
                                        text))
    return ops, rejected


@dataclass(frozen=True)
class OpsBatch:
    """One ops file, parsed: what apply_ops takes, plus the lines parsing rejected."""
    tenant: str
    source_file: str
    batch_id: str                # batch_id_for(the file's bytes)
    at: datetime                 # when the batch is applied (naive UTC), from the caller — never the clock
    ops: tuple[Op, ...]
    parse_rejects: pa.Table      # OPS_REJECTED


def read_batch(data: bytes, source_file: str, tenant: str, at: datetime) -> OpsBatch:
    """parse_ops of one ops file, bundled for apply_ops(nodes, edges, b.ops, b.batch_id, b.at, resolve)."""
    ops, rejects = parse_ops(data, source_file, tenant)
    return OpsBatch(tenant=tenant, source_file=source_file, batch_id=batch_id_for(data), at=_naive(at),
                    ops=tuple(ops), parse_rejects=pa.Table.from_pylist(rejects, schema=OPS_REJECTED))


def _op_name_of(text: str) -> str | None:
    """The op name a rejected line claims, when it names a known one (for the rejected row's `op`)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    name = obj.get("op", obj.get("tool", obj.get("name", fn.get("name") if isinstance(fn, dict) else None)))
    return name if isinstance(name, str) and name in OP_NAMES else None


def _is_op_object(obj: object) -> bool:
    if not isinstance(obj, dict):
        return False
    fn = obj.get("function")
    name = obj.get("op", obj.get("tool", obj.get("name", fn.get("name") if isinstance(fn, dict) else None)))
    return isinstance(name, str) and name in OP_NAMES


def looks_like_ops(lines: Iterable[str], config: OpsConfig = DEFAULT_CONFIG) -> bool:
    """True when a file's lines are an agent ops batch: among the first non-blank lines, at least half
    are JSON objects naming a known op (and at least one is). Chat JSONL never names one."""
    sample: list[str] = []
    for ln in lines:
        if ln.strip():
            sample.append(ln.strip().lstrip("\ufeff"))
            if len(sample) >= config.sample_lines:
                break
    hits = 0
    for ln in sample:
        if not ln.startswith("{"):
            continue
        try:
            hits += _is_op_object(_loads(ln))
        except (ValueError, RecursionError):
            pass
    return hits > 0 and 2 * hits >= len(sample)


# -- applying ------------------------------------------------------------------------------------

_LIVE = (None, "active", "open")


def _bigrams(text: str) -> set[str]:
    s = "".join(ch for ch in text.lower() if ch.isalnum())
    return {s[i:i + 2] for i in range(len(s) - 1)} or ({s} if s else set())


def _naive(dt: datetime) -> datetime:
    """`dt` as naive UTC; ValueError when UTC falls outside datetime's range (year 1 with a + offset)."""
    try:
        return dt.astimezone(timezone.utc).replace(tzinfo=None) if dt.tzinfo is not None else dt
    except OverflowError:
        raise ValueError(f"{dt.isoformat()} is out of range in UTC") from None


def _time_of(expr: str, anchor: datetime, lang: str) -> tuple[datetime | None, datetime | None, str | None]:
    """(start, end, granularity) of a time attribute: a time expression (r2g.time_norm, relative to the
    op's time) or an ISO-8601 date-time; unresolved → (None, None, None), the text kept in time_text."""
    v = resolve_time(expr, anchor, lang)
    if v is not None:
        return v.start, v.end, v.granularity
    try:
        dt = parse_when(expr)
        return dt, dt + timedelta(minutes=1), "minute"
    except (ValueError, OverflowError):
        pass
    found = find_times(expr, lang, anchor)
    if found:
        v = found[0].value
        return v.start, v.end, v.granularity
    return None, None, None


class _Graph:
    """The op tenants' nodes and edges, indexed by (tenant, id); rows are copied out only when an op touches them."""

    def __init__(self, nodes: pa.Table, edges: pa.Table, cold: pa.Table, tenants: set[str]) -> None:
        keep = pa.array(sorted(tenants), pa.string())
        n_mask = pc.fill_null(pc.is_in(nodes.column("tenant"), keep), False)
        e_mask = pc.fill_null(pc.is_in(edges.column("tenant"), keep), False)
        self.other_nodes, self.mine_nodes = nodes.filter(pc.invert(n_mask)), nodes.filter(n_mask)
        self.other_edges, self.mine_edges = edges.filter(pc.invert(e_mask)), edges.filter(e_mask)
        self.node_pos = {k: i for i, k in enumerate(zip(self.mine_nodes.column("tenant").to_pylist(),
                                                        self.mine_nodes.column("id").to_pylist()))}
        self.edge_pos = {k: i for i, k in enumerate(zip(self.mine_edges.column("tenant").to_pylist(),
                                                        self.mine_edges.column("id").to_pylist()))}
        self.cold_in = cold
        self.cold_ids = set(zip(cold.column("tenant").to_pylist(), cold.column("id").to_pylist()))
        self.node_rows: dict[tuple[str, str], dict] = {}    # changed or new
        self.edge_rows: dict[tuple[str, str], dict] = {}    # new
        self.edges_gone: set[tuple[str, str]] = set()       # moved to cold by this batch
        self.cold_new: list[dict] = []
        self.parents: dict[tuple[str, str], set[str]] = {}  # (tenant, child) → rollup parents
        sc = self.mine_edges.filter(pc.equal(self.mine_edges.column("type"), "SEMANTIC_CONTAINS"))
        for t, s, d in zip(sc.column("tenant").to_pylist(), sc.column("src").to_pylist(), sc.column("dst").to_pylist()):
            self.parents.setdefault((t, d), set()).add(s)
        self._entities: dict[str, dict[str, str]] = {}

    def node(self, tenant: str, nid: str) -> dict | None:
        key = (tenant, nid)
        if key in self.node_rows:
            return self.node_rows[key]
        i = self.node_pos.get(key)
        return None if i is None else self.mine_nodes.slice(i, 1).to_pylist()[0]

    def live(self, tenant: str, nid: str) -> dict | None:
        row = self.node(tenant, nid)
        return row if row is not None and row.get("status") in _LIVE else None

    def edge(self, tenant: str, eid: str) -> dict | None:
        key = (tenant, eid)
        if key in self.edges_gone:
            return None
        if key in self.edge_rows:
            return self.edge_rows[key]
        i = self.edge_pos.get(key)
        return None if i is None else self.mine_edges.slice(i, 1).to_pylist()[0]

    def entities(self, tenant: str, exclude: set[tuple[str, str]]) -> dict[str, str]:
        """casefolded title / alias → id of the tenant's live Entity nodes in the input, but those in
        `exclude` (the smallest id on a clash)."""
        if tenant not in self._entities:
            t = self.mine_nodes
            mask = pc.and_(pc.equal(t.column("tenant"), tenant), pc.equal(t.column("type"), "Entity"))
            index: dict[str, str] = {}
            for r in t.filter(pc.fill_null(mask, False)).select(["id", "title", "aliases", "status"]).to_pylist():
                if r["status"] not in _LIVE or (tenant, r["id"]) in exclude:
                    continue
                for name in [r["title"], *(r["aliases"] or [])]:
                    if name and (name.casefold() not in index or r["id"] < index[name.casefold()]):
                        index[name.casefold()] = r["id"]
            self._entities[tenant] = index
        return self._entities[tenant]

    def commit(self, plan: "_Plan") -> None:
        for row in plan.nodes:
            self.node_rows[(row["tenant"], row["id"])] = row
        for row in plan.edges:
            key = (row["tenant"], row["id"])
            self.edges_gone.discard(key)
            self.edge_rows[key] = row
            if row["type"] == "SEMANTIC_CONTAINS":
                self.parents.setdefault((row["tenant"], row["dst"]), set()).add(row["src"])
        for row, reason, at in plan.cold:
            key = (row["tenant"], row["id"])
            self.edges_gone.add(key)
            self.edge_rows.pop(key, None)
            if key not in self.cold_ids:
                self.cold_ids.add(key)
                self.cold_new.append({**row, "reason": reason, "capped_at": at})
            if row["type"] == "SEMANTIC_CONTAINS":
                self.parents.get((row["tenant"], row["dst"]), set()).discard(row["src"])

    def tables(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        changed = {self.node_pos[k] for k in self.node_rows if k in self.node_pos}
        kept = self.mine_nodes.filter(pa.array([i not in changed for i in range(self.mine_nodes.num_rows)],
                                               pa.bool_()))
        nodes = pa.concat_tables([conform(self.other_nodes, NODES), conform(kept, NODES),
                                  pa.Table.from_pylist(list(self.node_rows.values()), schema=NODES)])
        dropped = {self.edge_pos[k] for k in (self.edges_gone | set(self.edge_rows)) if k in self.edge_pos}
        kept_e = self.mine_edges.filter(pa.array([i not in dropped for i in range(self.mine_edges.num_rows)],
                                                 pa.bool_()))
        edges = pa.concat_tables([conform(self.other_edges, EDGES), conform(kept_e, EDGES),
                                  pa.Table.from_pylist(list(self.edge_rows.values()), schema=EDGES)])
        cold = pa.concat_tables([conform(self.cold_in, COLD_EDGES),
                                 pa.Table.from_pylist(self.cold_new, schema=COLD_EDGES)])
        return _sorted(nodes, ["tenant", "id"]), _sorted(edges, ["tenant", "id"]), _sorted(cold, ["tenant", "id"])


def _sorted(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys]))


@dataclass
class _Plan:
    """What one op would write; committed only when the whole op succeeds."""
    nodes: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    cold: list[tuple[dict, str, datetime]] = field(default_factory=list)
    target_ids: list[str] = field(default_factory=list)
    result: dict = field(default_factory=dict)
    ref_node: str | None = None


class _Batch:
    def __init__(self, graph: _Graph, batch_id: str, at: datetime,
                 resolve: Callable[[str, str], str | None] | None, config: OpsConfig) -> None:
        self.g, self.batch_id, self.at, self.resolve, self.cfg = graph, batch_id, at, resolve, config
        self.refs: dict[tuple[str, str], tuple[str, int]] = {}    # (tenant, ref) → (node id, op index)
        self.created: dict[str, list[tuple[int, str]]] = {}      # tenant → [(op index, node id)] in op order
        # The ids this batch's create ops will make. Until its op has run, such a node is invisible
        # (a re-run finds it in the input already), so a re-run sees what the first run saw.
        self.batch_nodes: set[tuple[str, str]] = set()
        self.made: set[tuple[str, str]] = set()
        # A create op whose node exists already ran before (a re-applied batch): it is replayed — its
        # targets may since have been archived, and it writes nothing, not even an edge deleted since.
        self.replaying = False

    # -- naming nodes --
    def node_id(self, op: Op) -> str:
        return stable_id("n", op.tenant, "jobs.ops", self.batch_id, str(op.index))

    def visible(self, tenant: str, nid: str) -> dict | None:
        """The node as this point of the batch sees it: a node of a later create op of the batch is not there yet."""
        if (tenant, nid) in self.batch_nodes and (tenant, nid) not in self.made:
            return None
        return self.g.node(tenant, nid)

    def visible_live(self, tenant: str, nid: str) -> dict | None:
        row = self.visible(tenant, nid)
        return row if row is not None and row.get("status") in _LIVE else None

    def by_ref(self, op: Op, name: str, code: str) -> str:
        hit = self.refs.get((op.tenant, name.removeprefix("$")))
        if hit is None:
            raise _Reject(code, f"ref {name!r} is not defined by an earlier op of this batch")
        return hit[0]

    def target(self, op: Op, value: Any, code: str = NOT_FOUND, ref_key: bool = False,
               archived_ok: bool = False) -> str:
        """The live (or, with `archived_ok`, archived) node of op's tenant that `value` names (id, "$ref",
        {"ref"}, {"id"}; a bare ref name when `ref_key`)."""
        if ref_key:
            nid = self.by_ref(op, value, code)
        elif isinstance(value, dict):
            nid = self.by_ref(op, value["ref"], code) if "ref" in value else value["id"]
        elif value.startswith("$") and _REF_RE.match(value[1:]):
            nid = self.by_ref(op, value, code)
        else:
            nid = value
        row = self.visible(op.tenant, nid)
        archived_ok = archived_ok or self.replaying
        if row is None or not (row.get("status") in _LIVE or (archived_ok and row.get("status") == "archived")):
            raise _Reject(code, f"no live node {nid!r} in this tenant")
        return nid

    def memory(self, op: Op, value: Any) -> tuple[str, str]:
        """link_memories' end: (node id, how it was found: ref | id | batch | recall)."""
        if isinstance(value, dict) or (value.startswith("$") and _REF_RE.match(value[1:])):
            return self.target(op, value), "ref" if isinstance(value, str) or "ref" in value else "id"
        if self.visible_live(op.tenant, value) is not None:
            return value, "id"
        want = _bigrams(value)
        best: tuple[float, int, str] | None = None
        for index, nid in self.created.get(op.tenant, ()):
            row = self.g.live(op.tenant, nid)
            if row is None or not want:
                continue
            share = len(want & _bigrams(f"{row['title'] or ''} {row['text'] or ''}")) / len(want)
            if share >= self.cfg.match_threshold and (best is None or (share, index) > best[:2]):
                best = (share, index, nid)
        if best is not None:
            return best[2], "batch"
        if self.resolve is not None:
            try:
                nid = self.resolve(op.tenant, value)
            except Exception as e:  # the host's resolver: reported on the op, never aborting the batch
                raise _Reject(OP_FAILED, f"resolve failed: {type(e).__name__}: {e}") from None
            if nid is not None and self.visible_live(op.tenant, nid) is not None:
                return nid, "recall"
        raise _Reject(NOT_FOUND, f"no memory of this tenant matches {value!r}")

    # -- rows --
    def anchor(self, op: Op) -> datetime:
        return op.ts or self.at

    def new_node(self, op: Op, node_id: str, type_: str, fields: Mapping[str, Any], title: str | None = None) -> dict:
        f = dict(fields)
        text = f.pop("text", None)
        title = title or f.pop("title", None) or (text or "").strip()
        f.pop("title", None)
        t = self.anchor(op)
        row = {c: None for c in NODES.names}
        row.update({
            "id": node_id, "tenant": op.tenant, "type": type_, "title": title[: self.cfg.title_max_chars],
            "text": text if text is not None else title, "keywords": [], "entities": [], "aliases": [],
            "importance": self.cfg.memory_importance, "confidence": self.cfg.confidence, "frequency": 1,
            "first_seen": t, "last_seen": t, "status": "active", "raw_refs": [op.raw_ref] if op.raw_ref else [],
            "provenance": provenance(op.name),
        })
        row["lang"] = detect_lang(f"{row['title']} {row['text']}")
        self.set_fields(op, row, f)
        return row

    def set_fields(self, op: Op, row: dict, fields: Mapping[str, Any]) -> None:
        for k, v in fields.items():
            if k in ("time_start", "time_end"):
                v = _naive(parse_when(v))
            elif k == "title":
                v = v[: self.cfg.title_max_chars]
            row[k] = list(v) if isinstance(v, list) else v
        if row.get("time_start") is not None and row.get("time_granularity") is None:
            row["time_granularity"] = "unspecified"

    def new_edge(self, op: Op, src: str, type_: str, dst: str, weight: float) -> dict:
        row = {c: None for c in EDGES.names}
        row.update({"id": edge_id(op.tenant, src, type_, dst), "tenant": op.tenant, "src": src, "dst": dst,
                    "type": type_, "weight": weight, "confidence": self.cfg.confidence,
                    "valid_since": self.anchor(op), "raw_refs": [op.raw_ref] if op.raw_ref else [],
                    "provenance": provenance(op.name)})
        return row

    def link_edges(self, op: Op, plan: _Plan, src: str, dst: str, type_: str, direction: str, weight: float) -> None:
        """Plan the edges of one link; an edge that already exists is kept as it is (upsert by id)."""
        if src == dst:
            raise _Reject(BAD_ARGS, "a memory cannot be linked to itself")
        pairs = []
        if direction in ("outgoing", "bidirectional"):
            pairs.append((src, type_, dst))
        if direction in ("incoming", "bidirectional"):
            pairs.append((dst, INVERSE.get(type_, type_), src))
        for s, t, d in pairs:
            row = self.g.edge(op.tenant, edge_id(op.tenant, s, t, d))
            if row is None and self.replaying:
                row = {"id": edge_id(op.tenant, s, t, d)}
            elif row is None:
                row = self.new_edge(op, s, t, d, weight)
                plan.edges.append(row)
            if row["id"] not in plan.target_ids:
                plan.target_ids.append(row["id"])

    # -- ops --
    def create_memory(self, op: Op, plan: _Plan) -> None:
        a = op.args
        type_, subtype = MEMORY_TYPES[a["memory_type"]]
        parts = [a["subject"].strip(), a["topic"].strip(), (a.get("object") or "").strip()]
        title = " ".join(p for p in parts if p)
        attrs = dict(sorted((a.get("attributes") or {}).items()))
        text = title + "".join(f"; {k}: {v}" for k, v in attrs.items())
        nid = self.node_id(op)
        row = self.g.node(op.tenant, nid)
        if row is None:
            row = self.new_node(op, nid, type_, {"text": text, "subtype": subtype}, title=title)
            row.update({"importance": a.get("importance", self.cfg.memory_importance),
                        "keywords": list(dict.fromkeys(p for p in parts if p)), "entities": [parts[0]],
                        "predicate_norm": parts[1]})
            when = next((attrs[k] for k in ("时间", "time", "when") if attrs.get(k, "").strip()), None)
            if when is not None:
                start, end, gran = _time_of(when, self.anchor(op), row["lang"])
                row.update({"time_text": when, "time_start": start, "time_end": end, "time_granularity": gran})
            plan.nodes.append(row)
        plan.target_ids.append(nid)
        # the subject and object, when the tenant knows them as Entities, fill the AGENT / PATIENT roles
        known = self.g.entities(op.tenant, exclude=self.batch_nodes)   # the same on a re-run
        for part, role in ((parts[0], "AGENT"), (parts[2], "PATIENT")):
            ent = known.get(part.casefold()) if part else None
            if ent is not None:
                self.link_edges(op, plan, nid, ent, role, "outgoing", self.cfg.confidence)
        plan.result, plan.ref_node = {"id": nid, "edges": plan.target_ids[1:]}, nid

    def link_memories(self, op: Op, plan: _Plan) -> None:
        a = op.args
        src, how_src = self.memory(op, a["source_memory_description"])
        dst, how_dst = self.memory(op, a["target_memory_description"])
        type_ = LINK_RELATIONS[a["relation_type"]]
        direction = "bidirectional" if type_ in INVERSE or type_ in SYMMETRIC else "outgoing"
        self.link_edges(op, plan, src, dst, type_, direction, a.get("importance", self.cfg.link_importance))
        plan.result = {"source": src, "target": dst, "found_by": [how_src, how_dst], "edges": list(plan.target_ids)}

    def _links(self, op: Op, plan: _Plan, src: str, links: list[Mapping[str, Any]]) -> None:
        ends = []
        for link in links:   # every target must resolve before any edge is planned: all-or-nothing
            if "targetRef" in link:
                dst = self.target(op, link["targetRef"], ref_key=True)
            else:
                dst = self.target(op, link["targetNodeId"])
            ends.append((dst, edge_type_for(link["relation"]), link.get("direction", self.cfg.link_direction)))
        for dst, type_, direction in ends:
            self.link_edges(op, plan, src, dst, type_, direction, self.cfg.link_importance)

    def create(self, op: Op, plan: _Plan) -> None:
        a = op.args
        nid = self.node_id(op)
        row = self.g.node(op.tenant, nid)
        if row is None:
            row = self.new_node(op, nid, a["type"], a.get("fields") or {}, title=a.get("title"))
            plan.nodes.append(row)
            self.g.node_rows[(op.tenant, nid)] = row   # visible to its own links; dropped if the op fails
        try:
            plan.target_ids.append(nid)
            self._links(op, plan, nid, a.get("links") or [])
        finally:
            if plan.nodes:
                del self.g.node_rows[(op.tenant, nid)]
        plan.result, plan.ref_node = {"id": nid, "edges": plan.target_ids[1:]}, nid

    def edit(self, op: Op, plan: _Plan) -> None:
        a = op.args
        nid = self.target(op, a["nodeId"])
        row = dict(self.g.node(op.tenant, nid))
        fields = dict(a.get("setFields") or {})
        if "title" in a:
            fields["title"] = a["title"]
        self.set_fields(op, row, fields)
        for f in a.get("clearFields") or ():
            row[f] = [] if f in ("keywords", "entities", "aliases") else None
        plan.nodes.append(row)
        plan.target_ids.append(nid)
        plan.result = {"id": nid, "set": sorted(fields), "cleared": sorted(a.get("clearFields") or ())}

    def delete(self, op: Op, plan: _Plan) -> None:
        nid = self.target(op, op.args["nodeId"], archived_ok=True)   # archiving again is a no-op
        row = dict(self.g.node(op.tenant, nid))
        if row.get("status") != "archived":
            row["status"] = "archived"
            plan.nodes.append(row)
        plan.target_ids.append(nid)
        plan.result = {"id": nid, "status": "archived"}

    def link_upsert(self, op: Op, plan: _Plan) -> None:
        a = op.args
        src = self.target(op, a["sourceRef"], ref_key=True) if "sourceRef" in a else self.target(op, a["sourceNodeId"])
        self._links(op, plan, src, a["links"])
        plan.result = {"applied": len(plan.target_ids), "edges": list(plan.target_ids)}

    def link_delete(self, op: Op, plan: _Plan) -> None:
        a = op.args
        src, dst = self.target(op, a["sourceNodeId"]), self.target(op, a["targetNodeId"])
        type_ = edge_type_for(a["relation"].lower())
        direction = a.get("direction", self.cfg.link_direction)
        keys = []
        if direction in ("outgoing", "bidirectional"):
            keys.append(edge_id(op.tenant, src, type_, dst))
        if direction in ("incoming", "bidirectional"):
            keys.append(edge_id(op.tenant, dst, INVERSE.get(type_, type_), src))
        reason = f"{provenance(op.name)} batch={self.batch_id} op={op.index}"
        for eid in keys:
            row = self.g.edge(op.tenant, eid)
            if row is not None:
                plan.cold.append((row, reason, self.at))
                plan.target_ids.append(eid)
            elif (op.tenant, eid) in self.g.cold_ids:   # moved out already (this batch, applied before)
                plan.target_ids.append(eid)
        if not plan.target_ids:
            raise _Reject(NOT_FOUND, f"no {type_} link between {src!r} and {dst!r}")
        plan.result = {"removed": len(plan.target_ids), "edges": list(plan.target_ids)}

    def compact(self, op: Op, plan: _Plan) -> None:
        a = op.args
        pid = self.node_id(op)
        children = [self.target(op, c, code=CHILD_NOT_FOUND) for c in a["childIds"]]
        if len(set(children)) != len(children):
            raise _Reject(BAD_ARGS, "childIds name the same node twice")
        for c in [] if self.replaying else children:
            for p in sorted(self.g.parents.get((op.tenant, c), ())):
                prow = self.visible_live(op.tenant, p)
                if p != pid and prow is not None and prow["type"] == a["type"]:
                    raise _Reject(CHILD_HAS_PARENT, f"{c!r} already has the {a['type']} rollup parent {p!r}")
        if self.g.node(op.tenant, pid) is None:
            rows = [self.g.node(op.tenant, c) for c in children]
            fields = {"subtype": "rollup", "text": a["summary"], **(a.get("fields") or {})}
            row = self.new_node(op, pid, a["type"], fields)
            starts = [r["time_start"] for r in rows if r.get("time_start") is not None]
            ends = [r.get("time_end") or r["time_start"] for r in rows if r.get("time_start") is not None]
            if starts and row.get("time_start") is None:
                row.update({"time_start": min(starts), "time_end": max(ends), "time_granularity": "unspecified"})
            refs = {json.dumps(r, sort_keys=True, default=str): r for x in rows for r in (x.get("raw_refs") or ())}
            row["raw_refs"] = row["raw_refs"] + [refs[k] for k in sorted(refs)]
            plan.nodes.append(row)
        plan.target_ids.append(pid)
        for c in children:
            self.link_edges(op, plan, pid, c, "SEMANTIC_CONTAINS", "outgoing", 1.0)
        plan.result, plan.ref_node = {"rollupNodeId": pid, "children": children, "edges": plan.target_ids[1:]}, pid

    def run(self, op: Op) -> _Plan:
        if op.ref is not None and (op.tenant, op.ref) in self.refs:
            raise _Reject(BAD_ARGS, f"ref {op.ref!r} is already defined at line {self.refs[(op.tenant, op.ref)][1]}")
        problem = check_args(op.name, op.args)
        if problem is not None:
            raise _Reject(BAD_ARGS, problem)
        plan = _Plan()
        self.replaying = op.name in _DEFINES_REF and self.g.node(op.tenant, self.node_id(op)) is not None
        try:
            getattr(self, op.name)(op, plan)
        finally:
            self.replaying = False
        return plan


def apply_ops(nodes: pa.Table, edges: pa.Table, ops: Iterable[Op], batch_id: str, at: datetime,
              resolve: Callable[[str, str], str | None] | None, *, cold_edges: pa.Table | None = None,
              config: OpsConfig = DEFAULT_CONFIG) -> OpsResult:
    """Apply a batch's ops in order to nodes/edges (any tenants mixed); see the module docstring.

    `at` (naive UTC) is when the batch is applied: OPS_APPLIED.at, COLD_EDGES.capped_at, and the time
    of new rows whose op carries no `ts`. `resolve(tenant, text)` → node id finds a link_memories
    description in the lake (the pipeline wires recall); an id of another tenant is ignored.
    Pass the current COLD_EDGES as `cold_edges` so a re-applied link_delete finds its edge there.
    Output tables are conformed and sorted by (tenant, id) / (tenant, op_index).
    """
    ops = list(ops)
    at = _naive(at)
    nodes, edges = conform(nodes, NODES), conform(edges, EDGES)
    cold = conform(cold_edges, COLD_EDGES) if cold_edges is not None else COLD_EDGES.empty_table()
    graph = _Graph(nodes, edges, cold, {op.tenant for op in ops})
    batch = _Batch(graph, batch_id, at, resolve, config)
    batch.batch_nodes = {(op.tenant, batch.node_id(op)) for op in ops if op.name in _DEFINES_REF}
    applied, rejected = [], []
    for op in ops:
        try:
            plan = batch.run(op)
        except _Reject as r:
            rejected.append(_reject_row(op.tenant, batch_id, op.index, op.name, r.code, r.message, op.raw))
            continue
        except Exception as e:  # noqa: BLE001 — a planning bug rejects this op (nothing was written), never the batch
            rejected.append(_reject_row(op.tenant, batch_id, op.index, op.name, OP_FAILED,
                                        f"{type(e).__name__}: {e}", op.raw))
            continue
        graph.commit(plan)
        if op.ref is not None:
            batch.refs[(op.tenant, op.ref)] = (plan.ref_node, op.index)
        if plan.ref_node is not None:
            batch.made.add((op.tenant, plan.ref_node))
            batch.created.setdefault(op.tenant, []).append((op.index, plan.ref_node))
        applied.append({"tenant": op.tenant, "batch_id": batch_id, "op_index": op.index, "op": op.name,
                        "ref": op.ref, "target_ids": plan.target_ids,
                        "result": json.dumps(plan.result, ensure_ascii=False, sort_keys=True), "at": at})
    nodes_out, edges_out, cold_out = graph.tables()
    key = lambda r: (r["tenant"], r["op_index"])  # noqa: E731
    return OpsResult(nodes=nodes_out, edges=edges_out,
                     applied=pa.Table.from_pylist(sorted(applied, key=key), schema=OPS_APPLIED),
                     rejected=pa.Table.from_pylist(sorted(rejected, key=key), schema=OPS_REJECTED),
                     cold_edges=cold_out)


__all__ = ["Op", "OpsBatch", "read_batch", "OpsResult", "OpsConfig", "DEFAULT_CONFIG", "parse_ops", "parse_line", "apply_ops", "looks_like_ops",
           "batch_id_for", "check_args", "edge_type_for", "provenance", "CREATE_MEMORY", "LINK_MEMORIES",
           "SEED001_SCHEMAS", "ARG_SCHEMAS", "CODES", "BAD_ARGS", "NOT_FOUND", "CHILD_NOT_FOUND", "CHILD_HAS_PARENT",
           "OP_FAILED"]
