"""messenger_json: Facebook Messenger / Instagram "Download your information" message_N.json.

{participants[{name}], messages[{sender_name, timestamp_ms, content, photos, videos,
audio_files, gifs, files, sticker, share{link, share_text}, reactions, type, is_unsent}],
title, is_still_participant, thread_type, thread_path}. Messages are listed newest first:
they are read oldest first (seq follows time; `line` stays the position in the file).
Meta writes every string as its UTF-8 bytes escaped one by one as latin-1 code points
("caf\\u00c3\\u00a9" for "café"): undone here wherever the string round-trips. Types
"Subscribe" / "Unsubscribe" (joins and leaves) and "Call" are role "system"; media and
shares become notes ("[photo]", "[share: https://…]").
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, TypeGuard

from raw_store import errors as E
from raw_store.formats.base import DOCUMENT, Builder, Format, ReadResult, Sample, Source, dump, encodable, text_problem
from raw_store.formats.jsondoc import load_document, string
from raw_store.timeparse import parse_ts

NAME = "messenger_json"
RECORD = "every element of messages[]"
_MEDIA = (
    ("photos", "[photo]"),
    ("videos", "[video]"),
    ("audio_files", "[audio]"),
    ("gifs", "[GIF]"),
    ("files", "[file]"),
)
_SYSTEM_TYPES = frozenset({"Subscribe", "Unsubscribe", "Call"})


def fix_mojibake(s: str) -> str:
    """Meta's latin-1-escaped UTF-8 back to text; a string that is not such (real accents, CJK) stays as it is."""
    try:
        return s.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return s


def _looks_messenger(doc: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(doc, dict) and isinstance(doc.get("participants"), list) and isinstance(doc.get("messages"), list)


def sniff(s: Sample) -> bool:
    if _looks_messenger(s.doc):
        return True
    return s.document and '"participants"' in s.text and '"sender_name"' in s.text and '"timestamp_ms"' in s.text


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    doc = load_document(src, b)
    if doc is None:
        return b.result()
    if not _looks_messenger(doc):
        b.reject(0, 0, E.E_JSON_SHAPE, "not a Messenger thread {participants[], messages[]}", src.data)
        return b.result()
    conv_id = fix_mojibake(string(doc, "thread_path") or "") or src.default_conv
    messages = doc["messages"]
    for record in range(len(messages), 0, -1):  # newest first in the file: read oldest first
        _message(b, record, messages[record - 1], conv_id)
    b.rejects.sort(key=lambda r: r.line)
    if not b.messages and not b.rejects:
        b.reject(0, 0, E.E_NO_MESSAGES, "the thread holds no message", src.data)
    return b.result()


def _text(msg: dict) -> str:
    parts = [note for key, note in _MEDIA if isinstance(msg.get(key), list) and msg[key]]
    if isinstance(msg.get("sticker"), dict):
        parts.append("[sticker]")
    share = msg.get("share")
    if isinstance(share, dict):
        link = string(share, "link")
        parts.append(f"[share: {fix_mojibake(link)}]" if link else "[share]")
        if string(share, "share_text"):
            parts.append(fix_mojibake(share["share_text"]))
    content = msg.get("content")
    if isinstance(content, str) and content.strip():
        parts.append(fix_mojibake(content))
    return "\n".join(parts)


def _message(b: Builder, record: int, msg: object, conv_id: str) -> None:
    if not isinstance(msg, dict):
        b.reject(record, 0, E.E_JSON_SHAPE, "a message must be an object", dump(msg))
        return
    sender = msg.get("sender_name")
    if (
        not isinstance(sender, str)
        or not sender.strip()
        or (msg.get("content") is not None and not isinstance(msg["content"], str))
    ):
        b.reject(record, 0, E.E_JSON_SHAPE, "sender_name must be a non-empty string, content a string", dump(msg))
        return
    sender = fix_mojibake(sender).strip()
    text = _text(msg)
    if msg.get("is_unsent") is True and not text.strip():
        text = "[unsent message]"
    system = msg.get("type") in _SYSTEM_TYPES
    if system and not text.strip():  # a join / leave / call names its actor in its content; else say who
        text = f"{sender}: {msg['type']}"
    if not encodable(text) or not encodable(sender):
        b.reject(record, 0, E.E_JSON_SHAPE, "unpaired surrogates", dump(msg))
        return
    problem = text_problem(text)
    if problem:
        b.reject(record, 0, problem[0], problem[1], dump(msg))
        return
    try:
        ts = parse_ts(msg.get("timestamp_ms"))
    except ValueError as exc:
        b.reject(record, 0, E.E_TS_PARSE, f"timestamp_ms: {str(exc)[:200]}", dump(msg))
        return
    # message_1.json, message_2.json … hold one thread: the file and the position name a message
    b.message(
        conv_id=conv_id,
        msg_id=f"{PurePosixPath(b.source_file).stem}#{record}",
        speaker="system" if system else sender,
        role="system" if system else "user",
        ts=ts,
        text=text.strip(),
        line=record,
    )


FORMAT = Format(NAME, DOCUMENT, RECORD, sniff, read)
