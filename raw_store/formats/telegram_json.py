"""telegram_json: Telegram Desktop "Export chat history" result.json — one chat, or a full export (chats.list[]).

A chat is {name, type, id, messages[]}; a message {id, type: "message" | "service", date,
date_unixtime, from, from_id, text, text_entities, …}. `text` is a string or a list of
strings and entity objects {type, text} (bold, link, mention, …), joined here as written.
Service messages (type "service": actor, action — "invite_members", "pin_message",
"phone_call", …) are role "system". Media become a bracketed note before any caption
("[photo]", "[sticker 😀]", "[voice message]", "[file: report.pdf]", "[poll: question]").
Times: date_unixtime (UTC) when present, else `date` (the exporting machine's local time).
"""

from __future__ import annotations

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
from raw_store.formats.jsondoc import load_document
from raw_store.timeparse import parse_ts

NAME = "telegram_json"
RECORD = "every element of every chat's messages[] (chats.list[] and left_chats.list[] in a full export)"
_MEDIA_TYPES = {
    "sticker": "sticker",
    "voice_message": "voice message",
    "video_message": "video message",
    "audio_file": "audio",
    "video_file": "video",
    "animation": "GIF",
}


def _chat_like(obj: object) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("messages"), list)
        and ("type" in obj or "id" in obj or "name" in obj)
    )


def _chats(doc: object) -> list[object] | None:
    """The chats of a result.json: itself (one chat), or chats.list + left_chats.list (full export)."""
    if _chat_like(doc):
        return [doc]
    if isinstance(doc, dict) and isinstance(doc.get("chats"), dict) and isinstance(doc["chats"].get("list"), list):
        left = doc.get("left_chats")
        return doc["chats"]["list"] + (
            left["list"] if isinstance(left, dict) and isinstance(left.get("list"), list) else []
        )
    return None


def sniff(s: Sample) -> bool:
    chats = _chats(s.doc)
    if chats is not None:
        msgs = [m for c in chats if isinstance(c, dict) for m in c.get("messages") or [] if isinstance(m, dict)]
        # Telegram's own keys (or an empty export); other apps' {messages: [...]} are not ours
        return not msgs or any(
            "from_id" in m or "date_unixtime" in m or m.get("type") in ("message", "service") for m in msgs[:50]
        )
    return (
        s.document
        and '"messages"' in s.text
        and any(k in s.text for k in ('"from_id"', '"date_unixtime"', '"text_entities"'))
    )


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    doc = load_document(src, b)
    if doc is None:
        return b.result()
    chats = _chats(doc)
    if chats is None:
        b.reject(0, 0, E.E_JSON_SHAPE, "neither a chat with messages[] nor a full export with chats.list[]", src.data)
        return b.result()
    record = 0
    for i, chat in enumerate(chats):
        if not isinstance(chat, dict) or not isinstance(chat.get("messages"), list):
            record += 1
            b.reject(record, 0, E.E_JSON_SHAPE, f"chat {i} has no messages[]", dump(chat))
            continue
        conv_id = id_field(chat.get("id")) or f"{src.default_conv}#{i}"
        for msg in chat["messages"]:
            record += 1
            _message(b, record, msg, conv_id)
    if not b.messages and not b.rejects:
        b.reject(0, 0, E.E_NO_MESSAGES, "the export holds no message", src.data)
    return b.result()


def text_of(value: object) -> str | None:
    """`text` / `text_entities` as written: a string, or strings and {type, text} entities joined; None if neither."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    parts = []
    for part in value:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            return None
    return "".join(parts)


def _note(msg: dict) -> str | None:
    """A bracketed note for the media or attachment of a message, or None."""
    if "photo" in msg:
        return "[photo]"
    media = msg.get("media_type")
    if media == "sticker":
        emoji = msg.get("sticker_emoji")
        return f"[sticker {emoji}]" if isinstance(emoji, str) and emoji.strip() else "[sticker]"
    if isinstance(media, str) and media:
        return f"[{_MEDIA_TYPES.get(media, media.replace('_', ' '))}]"
    if "file" in msg:
        name = msg.get("file_name")
        return f"[file: {name}]" if isinstance(name, str) and name.strip() else "[file]"
    poll = msg.get("poll")
    if isinstance(poll, dict):
        q = poll.get("question")
        return f"[poll: {q}]" if isinstance(q, str) and q.strip() else "[poll]"
    if "location_information" in msg or "place_name" in msg:
        place = msg.get("place_name")
        return f"[location: {place}]" if isinstance(place, str) and place.strip() else "[location]"
    if "contact_information" in msg:
        return "[contact]"
    return None


def _service_text(msg: dict) -> str:
    """A service message as a sentence of its fields: "Alice: invite_members Bob, Carol"."""
    actor = msg.get("actor")
    actor = actor if isinstance(actor, str) else None
    action = msg.get("action")
    action = action if isinstance(action, str) else "service"
    details = []
    members = msg.get("members")
    if isinstance(members, list):
        details.append(", ".join(m for m in members if isinstance(m, str)))
    for key in ("title", "message_id", "duration_seconds"):
        if isinstance(msg.get(key), (str, int)) and not isinstance(msg.get(key), bool):
            details.append(f"{key}={msg[key]}")
    head = f"{actor}: {action}" if actor and actor.strip() else action
    return " ".join([head, *[d for d in details if d]])


def _message(b: Builder, record: int, msg: object, conv_id: str) -> None:
    if not isinstance(msg, dict):
        b.reject(record, 0, E.E_JSON_SHAPE, "a message must be an object", dump(msg))
        return
    kind = msg.get("type", "message")
    text = text_of(msg.get("text"))
    if text is None:
        text = text_of(msg.get("text_entities"))
    if text is None or not encodable(text):
        b.reject(record, 0, E.E_JSON_SHAPE, "text must be a string or a list of strings and entities", dump(msg))
        return
    if kind == "service":
        speaker, role, text = "system", "system", (text.strip() or _service_text(msg))
    else:
        sender = msg.get("from") if isinstance(msg.get("from"), str) and msg["from"].strip() else None
        speaker = sender or id_field(msg.get("from_id")) or "unknown"
        role = "user"
        note = _note(msg)
        text = f"{note}\n{text}" if note and text.strip() else (note or text)
    if not encodable(speaker) or not encodable(text):
        b.reject(record, 0, E.E_JSON_SHAPE, "unpaired surrogates", dump(msg))
        return
    problem = text_problem(text)
    if problem:
        b.reject(record, 0, problem[0], problem[1], dump(msg))
        return
    try:
        ts = parse_ts(msg.get("date_unixtime")) if msg.get("date_unixtime") is not None else parse_ts(msg.get("date"))
    except ValueError as exc:
        b.reject(record, 0, E.E_TS_PARSE, str(exc)[:200], dump(msg))
        return
    b.message(
        conv_id=conv_id,
        msg_id=id_field(msg.get("id")) or f"R{record}",
        speaker=speaker.strip(),
        role=role,
        ts=ts,
        text=text.strip(),
        line=record,
    )


FORMAT = Format(NAME, DOCUMENT, RECORD, sniff, read)
