"""sillytavern_jsonl: SillyTavern / Luker chat, a header object line, then {name, is_user, send_date, mes} lines."""

from __future__ import annotations

import json

from raw_store import errors as E
from raw_store.formats.base import LINES, Format, ReadResult, Sample, Source, encodable, text_problem
from raw_store.formats.canonical_jsonl import canonical_count, jsonl_like
from raw_store.timeparse import parse_ts

NAME = "sillytavern_jsonl"
RECORD = "every non-blank line, except the header (the first non-blank line, when it is chat metadata)"
_HEADER_KEYS = ("user_name", "character_name", "create_date", "chat_metadata")


def is_header(obj: object) -> bool:
    """SillyTavern's first line: chat metadata (user_name, character_name, create_date, chat_metadata), no `mes`."""
    return isinstance(obj, dict) and "mes" not in obj and any(k in obj for k in _HEADER_KEYS)


def sniff(s: Sample) -> bool:
    tavern = sum(1 for d in s.json_dicts if "mes" in d or is_header(d))
    return jsonl_like(s) and tavern > canonical_count(s)


def read(src: Source) -> ReadResult:
    """One message per line after the header; swipes (alternative replies) are ignored, the text is `mes`.

    conv_id is the file's path: the header's character_name repeats across chats and
    its ids differ between app versions, while the path names this chat file.
    """
    b = src.builder(NAME)
    conv = src.default_conv
    first = True
    for no, off, raw, s in src.lines:
        if s is not None and not s.strip():
            continue
        is_first, first = first, False
        if s is None:
            b.reject(no, off, E.E_READ_UTF8, "invalid UTF-8 in line", raw)
            continue
        try:
            rec = json.loads(s)
        except (ValueError, RecursionError) as exc:
            b.reject(no, off, E.E_JSON_PARSE, str(exc)[:200], raw)
            continue
        if is_first and is_header(rec):
            continue  # chat metadata, not a message: consumed, not an input record
        problem = _problem(rec)
        if problem:
            b.reject(no, off, problem[0], problem[1], raw)
            continue
        try:
            ts = parse_ts(rec.get("send_date"))
        except ValueError as exc:
            b.reject(no, off, E.E_TS_PARSE, f"send_date: {str(exc)[:200]}", raw)
            continue
        b.message(
            conv_id=conv,
            msg_id=f"L{no}",
            speaker=rec["name"].strip(),
            role=_role(rec),
            ts=ts,
            text=rec["mes"].strip(),
            line=no,
        )
    return b.result()


def _problem(rec: object) -> tuple[str, str] | None:
    if not isinstance(rec, dict):
        return E.E_JSON_SHAPE, f"a line must be a JSON object, not {type(rec).__name__}"
    if is_header(rec):
        return E.E_JSON_SHAPE, "a chat header object after the first line"
    name, mes = rec.get("name"), rec.get("mes")
    if not isinstance(name, str) or not name.strip() or not encodable(name):
        return E.E_JSON_SHAPE, "name must be a non-empty string"
    if not isinstance(mes, str) or not encodable(mes):
        return E.E_JSON_SHAPE, "mes must be a string"
    for key in ("is_user", "is_system"):
        if rec.get(key) is not None and not isinstance(rec[key], bool):
            return E.E_JSON_SHAPE, f"{key} must be a boolean"
    return text_problem(mes)


def _role(rec: dict) -> str:
    """system for hidden (is_system) and narrator messages, else user / assistant by is_user."""
    extra = rec.get("extra")
    extra = extra if isinstance(extra, dict) else {}
    if rec.get("is_system") or extra.get("type") == "narrator":
        return "system"
    return "user" if rec.get("is_user") else "assistant"


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
