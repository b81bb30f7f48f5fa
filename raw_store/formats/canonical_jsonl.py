"""canonical_jsonl: one JSON object per line {tenant?, conv_id?, msg_id?, speaker, role?, ts, text}."""

from __future__ import annotations

import json

from raw_store import errors as E
from raw_store.formats.base import LINES, MAX_MESSAGE_BYTES, Format, ReadResult, Sample, Source, encodable, id_field
from raw_store.formats.transcript import speaker_line
from raw_store.timeparse import parse_ts

NAME = "canonical_jsonl"
RECORD = "every non-blank line"
ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "bot": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "system": "system",
    "other": "other",
}


def jsonl_like(s: Sample) -> bool:
    """Most sample lines are JSON objects (or, for a .jsonl name, at least as many as `Speaker: text` lines)."""
    n, json_lines = len(s.lines), s.json_lines
    if not n or not json_lines:
        return False
    return 2 * len(json_lines) >= n or (
        s.suffix == ".jsonl" and len(json_lines) >= sum(1 for ln in s.lines if speaker_line(ln))
    )


def canonical_count(s: Sample) -> int:
    return sum(1 for d in s.json_dicts if "text" in d or "speaker" in d)


def sniff(s: Sample) -> bool:
    if not s.document and isinstance(s.doc, dict) and ("text" in s.doc or "speaker" in s.doc):
        return True  # a single one-line record
    # a JSONL of some other app's shape is not ours to half-accept; lines that all fail to parse are ours to reject
    return jsonl_like(s) and (canonical_count(s) > 0 or not s.json_dicts)


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    default_conv = src.default_conv
    for no, off, raw, s in src.lines:
        if s is None:
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
            continue
        if not s.strip():
            continue
        try:
            rec = json.loads(s)
        except (ValueError, RecursionError) as exc:
            b.reject(no, off, E.E_JSON_PARSE, str(exc)[:200], raw)
            continue
        problem = _problem(rec)
        if problem:
            b.reject(no, off, problem[0], problem[1], raw)
            continue
        try:
            ts = parse_ts(rec["ts"])
        except ValueError as exc:
            b.reject(no, off, E.E_TS_PARSE, str(exc)[:200], raw)
            continue
        if ts is None:
            b.reject(no, off, E.E_TS_MISSING, "ts is empty", raw)
            continue
        role = rec.get("role")
        role = ROLES.get(role.strip().lower(), "other") if isinstance(role, str) and role.strip() else "user"
        b.message(
            tenant=(rec.get("tenant") or "").strip() or src.tenant,
            conv_id=id_field(rec.get("conv_id")) or default_conv,
            msg_id=id_field(rec.get("msg_id")) or str(no),
            speaker=rec["speaker"].strip(),
            role=role,
            ts=ts,
            text=rec["text"],
            line=no,
        )
    return b.result()


def _problem(rec: object) -> tuple[str, str] | None:
    """(code, detail) when a parsed JSONL record is not a usable message (timestamps checked apart)."""
    if not isinstance(rec, dict):
        return E.E_JSON_SHAPE, f"a line must be a JSON object, not {type(rec).__name__}"
    speaker, text = rec.get("speaker"), rec.get("text")
    if not isinstance(speaker, str) or not speaker.strip() or not encodable(speaker):
        return E.E_JSON_SHAPE, "speaker must be a non-empty string"
    if "text" not in rec or (text is not None and not isinstance(text, str)) or (text and not encodable(text)):
        return E.E_JSON_SHAPE, "text must be a string"
    tenant = rec.get("tenant")
    if tenant is not None and (not isinstance(tenant, str) or not encodable(tenant)):
        return E.E_JSON_SHAPE, "tenant must be a string"
    for key in ("conv_id", "msg_id"):
        if rec.get(key) is not None and id_field(rec[key]) is None:
            return E.E_JSON_SHAPE, f"{key} must be a non-empty string or integer"
    if rec.get("role") is not None and not isinstance(rec["role"], str):
        return E.E_JSON_SHAPE, "role must be a string"
    if not text or not text.strip():
        return E.E_TEXT_EMPTY, "text is empty"
    if len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
        return E.E_MSG_TOO_LARGE, f"text above {MAX_MESSAGE_BYTES} bytes"
    if rec.get("ts") is None or (isinstance(rec["ts"], str) and not rec["ts"].strip()):
        return E.E_TS_MISSING, "ts is missing"
    return None


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
