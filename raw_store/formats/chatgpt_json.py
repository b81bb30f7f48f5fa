"""chatgpt_json: ChatGPT export conversations.json, conversations holding a message tree."""

from __future__ import annotations

import json
import math

from raw_store import errors as E
from raw_store.formats.base import (
    DOCUMENT,
    Builder,
    Format,
    ReadResult,
    Sample,
    Source,
    dump,
    encodable,
    id_field,
    text_problem,
)
from raw_store.timeparse import parse_ts

NAME = "chatgpt_json"
RECORD = (
    "every message node on each conversation's current branch (current_node up to the root; without "
    "current_node, the path to the newest leaf by create_time) with visible, non-empty text — the root "
    "(message null), hidden and empty nodes (e.g. the blank system prompt) are not messages of the chat, and "
    "other branches (regenerated answers, edits) are not the conversation; a malformed conversation is one "
    "reject"
)
_JSON_WS = " \t\n\r"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system"}  # tool and others → "other"
PART_NOTES = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "video_container_asset_pointer": "[video]",
}


def sniff(s: Sample) -> bool:
    doc = s.doc
    if isinstance(doc, dict):
        return isinstance(doc.get("mapping"), dict)
    if isinstance(doc, list):
        return any(isinstance(c, dict) and "mapping" in c for c in doc)
    return (
        s.document
        and '"mapping"' in s.text
        and any(k in s.text for k in ('"current_node"', '"children"', '"message"', '"parent"'))
    )


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _JSON_WS:
        i += 1
    return i


def json_items(text: str) -> tuple[list[tuple[int, int, object]], str | None]:
    """The items of a top-level JSON array (or one top-level object) as (start, end, value) character spans.

    Items are decoded one by one, so a truncated or damaged array still yields the
    items before the damage; the second value says why decoding stopped (None: it didn't).
    """
    decoder = json.JSONDecoder()
    items: list[tuple[int, int, object]] = []
    i = _skip_ws(text, 0)
    lone = text.startswith("{", i)
    if not lone:
        if not text.startswith("[", i):
            return items, "not a JSON array of conversations"
        i = _skip_ws(text, i + 1)
        if text.startswith("]", i):
            return items, None if _skip_ws(text, i + 1) == len(text) else "extra data after the array"
    while True:
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError) as exc:
            return items, str(exc)[:200]
        items.append((i, end, value))
        j = _skip_ws(text, end)
        if lone:
            return items, None if j == len(text) else "extra data after the conversation"
        if text.startswith(",", j):
            i = _skip_ws(text, j + 1)
        elif text.startswith("]", j):
            return items, None if _skip_ws(text, j + 1) == len(text) else "extra data after the array"
        else:
            return items, "expected ',' or ']' after a conversation"


class ByteOffsets:
    """UTF-8 byte offsets of increasing character positions in `text`, computed incrementally."""

    def __init__(self, text: str) -> None:
        self.text, self.char, self.byte = text, 0, 0

    def __call__(self, pos: int) -> int:
        if pos < self.char:
            self.char = self.byte = 0
        self.byte += len(self.text[self.char : pos].encode("utf-8", "surrogatepass"))
        self.char = pos
        return self.byte


def read(src: Source) -> ReadResult:
    """Each conversation's current branch (current_node → parent → … → root, reversed) as its turns.

    `line` is the record number in the file; a malformed conversation and a damaged
    tail are one reject each, with their original bytes. A message whose create_time
    is null keeps ts None: the export does not know it, and we do not guess.
    """
    b = src.builder(NAME)
    text, body, base = src.text, src.body, src.offset
    items, stop = json_items(text)
    if not items:
        b.reject(0, 0, E.E_JSON_PARSE, stop or "no conversation in the array", src.data)
        return b.result()
    at = ByteOffsets(text)
    default_conv = src.default_conv
    record = 0
    for i, (start, end, conv) in enumerate(items):
        raw_start, raw_end = at(start), at(end)
        branch = _branch(conv)
        if isinstance(branch, str) or not isinstance(conv, dict):  # (_branch found conv is no object)
            record += 1
            b.reject(record, base + raw_start, E.E_JSON_SHAPE, f"conversation {i}: {branch}", body[raw_start:raw_end])
            continue
        conv_id = id_field(conv.get("conversation_id")) or id_field(conv.get("id")) or f"{default_conv}#{i}"
        for node_id, node in branch:
            if node.get("message") is None:
                continue  # the root: a placeholder node, not a message
            record += 1
            _node(b, record, node_id, node, conv_id)
    if stop is not None:
        tail = at(items[-1][1])
        b.reject(record + 1, base + tail, E.E_JSON_PARSE, f"after conversation {len(items) - 1}: {stop}", body[tail:])
    if not b.messages and not b.rejects:
        b.reject(0, 0, E.E_NO_MESSAGES, "no visible message on any conversation's current branch", src.data)
    return b.result()


def _branch(conv: object) -> list[tuple[str, dict]] | str:
    """The (node id, node) pairs from the root to the current node, or why the conversation is malformed."""
    if not isinstance(conv, dict):
        return "not a JSON object"
    mapping, current = conv.get("mapping"), conv.get("current_node")
    if not isinstance(mapping, dict):
        return "mapping must be an object"
    if current is None:
        # older exports and some tools' output: the newest leaf is the branch the user saw last
        current = _newest_leaf(mapping)
        if current is None:
            return "no current_node and no leaf to follow"
    if not isinstance(current, str) or current not in mapping:
        return "current_node is not a node of mapping"
    path: list[tuple[str, dict]] = []
    seen: set[str] = set()
    node_id: object = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            return "parent links form a cycle"
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            return "a node on the current branch is not an object"
        path.append((node_id, node))
        node_id = node.get("parent")
    if node_id is not None and not isinstance(node_id, str):
        return "parent must be a node id or null"
    # a parent id absent from mapping ends the branch as the root does
    return path[::-1]


def _newest_leaf(mapping: dict) -> str | None:
    """The leaf (a node no other node names as parent) with the latest create_time; the first leaf in mapping
    order among equals, so a tree without branches gives its single path."""
    parents = {p for n in mapping.values() if isinstance(n, dict) and isinstance(p := n.get("parent"), str)}
    best: tuple[float, int] | None = None
    best_id = None
    for k, (node_id, node) in enumerate(mapping.items()):
        if node_id in parents or not isinstance(node, dict):
            continue
        msg = node.get("message")
        t = msg.get("create_time") if isinstance(msg, dict) else None
        key = (_seconds(t), -k)
        if best is None or key > best:
            best, best_id = key, node_id
    return best_id


def _seconds(t: object) -> float:
    """create_time as a number to compare (-inf when absent or not a finite number)."""
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        return float("-inf")
    try:
        x = float(t)
    except OverflowError:
        return float("-inf")
    return x if math.isfinite(x) else float("-inf")


def _node(b: Builder, record: int, node_id: str, node: dict, conv_id: str) -> None:
    """One message node of the current branch → a message, a reject, or nothing (hidden / no visible text)."""
    msg = node["message"]
    problem = _message_problem(node_id, msg)
    if problem:
        b.reject(record, 0, problem[0], problem[1], dump(node))
        return
    meta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
    if meta.get("is_visually_hidden_from_conversation") is True:
        return
    text = _text(msg["content"])
    if not text:
        return
    problem = (E.E_JSON_SHAPE, "text holds unpaired surrogates") if not encodable(text) else text_problem(text)
    if problem:
        b.reject(record, 0, problem[0], problem[1], dump(node))
        return
    try:
        ts = parse_ts(msg.get("create_time"))
    except ValueError as exc:
        b.reject(record, 0, E.E_TS_PARSE, f"create_time: {str(exc)[:200]}", dump(node))
        return
    role, name = msg["author"]["role"].strip(), msg["author"].get("name")
    b.message(
        conv_id=conv_id,
        msg_id=node_id,
        speaker=name.strip() if name and name.strip() else role,
        role=_ROLES.get(role, "other"),
        ts=ts,
        text=text,
        line=record,
    )


def _message_problem(node_id: str, msg: object) -> tuple[str, str] | None:
    if not isinstance(msg, dict):
        return E.E_JSON_SHAPE, "message must be an object or null"
    if id_field(node_id) is None:
        return E.E_JSON_SHAPE, "node id must be a non-empty string"
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str) or not role.strip() or not encodable(role):
        return E.E_JSON_SHAPE, "author.role must be a non-empty string"
    name = author.get("name") if isinstance(author, dict) else None
    if name is not None and (not isinstance(name, str) or not encodable(name)):
        return E.E_JSON_SHAPE, "author.name must be a string or null"
    content = msg.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("content_type"), str):
        return E.E_JSON_SHAPE, "content must be an object with a content_type"
    parts = content.get("parts")
    if parts is not None and (not isinstance(parts, list) or not all(isinstance(p, (str, dict)) for p in parts)):
        return E.E_JSON_SHAPE, "content.parts must be a list of strings and objects"
    for key in ("text", "result"):
        if content.get(key) is not None and not isinstance(content[key], str):
            return E.E_JSON_SHAPE, f"content.{key} must be a string"
    return None


def _text(content: dict) -> str:
    """The visible text of a message: its string parts (attachments noted, e.g. "[image]"), else its text / result.

    Content without either (model reasoning, user profiles, …) has no text and is not a turn.
    """
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = [p if isinstance(p, str) else _part_note(p) for p in parts]
        return "\n".join(p for p in pieces if p.strip()).strip()
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return content[key].strip()
    return ""


def _part_note(part: dict) -> str:
    """A non-text part of a multimodal message: its transcription when it has one, else a marker."""
    if isinstance(part.get("text"), str) and part["text"].strip():
        return part["text"]
    kind = part.get("content_type")
    return PART_NOTES.get(kind, "[attachment]") if isinstance(kind, str) else "[attachment]"


FORMAT = Format(NAME, DOCUMENT, RECORD, sniff, read)
