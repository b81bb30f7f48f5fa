"""Reading an ops file: JSONL lines of either shape (seed 000 tool calls, seed 001 ops) → validated Ops, and
OPS_REJECTED rows for the lines that are not; looks_like_ops tells an ops batch from a chat log."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from jobs.ops.schema import (
    _DEFINES_REF,
    _NODE_TYPE_BY_LOWER,
    _REF_RE,
    BAD_ARGS,
    DEFAULT_CONFIG,
    OP_NAMES,
    OpsConfig,
    _naive,
    _Reject,
    check_args,
    parse_when,
)
from r2g.schema import OPS_REJECTED
from raw_store.cas import raw_id_for


@dataclass(frozen=True)
class Op:
    """One validated op of a batch."""

    tenant: str
    index: int  # op_index: the op's 1-based line in the ops file
    name: str  # one of OP_NAMES
    args: Mapping[str, Any]  # validated arguments (envelope keys lifted out)
    ref: str | None = None  # the batch-local name this op defines
    ts: datetime | None = None  # when the agent made the call (naive UTC); anchors relative times
    raw: str = ""  # the line as given
    raw_ref: Mapping[str, Any] | None = field(default=None, compare=False)  # the line in the ops file's blob


def batch_id_for(data: bytes) -> str:
    """The batch id of an ops file: the sha256 hex of its bytes (its blob in the CAS is raw_id_for(it))."""
    return hashlib.sha256(data).hexdigest()


def _reject_row(tenant: str, batch_id: str, index: int, op: str | None, code: str, message: str, raw: str) -> dict:
    return {
        "tenant": tenant,
        "batch_id": batch_id,
        "op_index": index,
        "op": op,
        "code": code,
        "message": message,
        "raw": raw,
    }


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constants)


_ENVELOPE = frozenset(
    {"op", "tool", "name", "args", "arguments", "function", "ref", "ts", "tenant", "id", "call_id", "type"}
)


def _unwrap(obj: dict) -> tuple[str, Any, dict]:
    """(op name, arguments, envelope) of one decoded line; raises _Reject(BAD_ARGS)."""
    if "op" in obj:
        name = obj["op"]
        nested = "args" in obj or "arguments" in obj
        args = (
            obj.get("args", obj.get("arguments"))
            if nested
            else {k: v for k, v in obj.items() if k not in ("op", "ref", "ts", "tenant")}
        )
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
            rejected.append(
                _reject_row(
                    tenant,
                    bid,
                    n,
                    None,
                    BAD_ARGS,
                    f"{source_file}:{n}: line is not valid UTF-8",
                    line.decode("utf-8", "backslashreplace"),
                )
            )
            continue
        try:
            ops.append(parse_line(text, tenant, n, {"raw_id": raw_id, "offset": start, "length": len(line)}))
        except _Reject as r:
            rejected.append(
                _reject_row(tenant, bid, n, _op_name_of(text), r.code, f"{source_file}:{n}: {r.message}", text)
            )
    return ops, rejected


@dataclass(frozen=True)
class OpsBatch:
    """One ops file, parsed: what apply_ops takes, plus the lines parsing rejected."""

    tenant: str
    source_file: str
    batch_id: str  # batch_id_for(the file's bytes)
    at: datetime  # when the batch is applied (naive UTC), from the caller — never the clock
    ops: tuple[Op, ...]
    parse_rejects: pa.Table  # OPS_REJECTED


def read_batch(data: bytes, source_file: str, tenant: str, at: datetime) -> OpsBatch:
    """parse_ops of one ops file, bundled for apply_ops(nodes, edges, b.ops, b.batch_id, b.at, resolve)."""
    ops, rejects = parse_ops(data, source_file, tenant)
    return OpsBatch(
        tenant=tenant,
        source_file=source_file,
        batch_id=batch_id_for(data),
        at=_naive(at),
        ops=tuple(ops),
        parse_rejects=pa.Table.from_pylist(rejects, schema=OPS_REJECTED),
    )


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
