"""discord_json: DiscordChatExporter JSON — {guild, channel, dateRange, messages[], messageCount}.

A message is {id, type, timestamp (ISO with offset), timestampEdited, isPinned, content,
author{id, name, discriminator, nickname, isBot}, attachments[{fileName, url}], embeds[],
stickers[{name}], reactions[], mentions[], reference?}. Types "Default" and "Reply" (and
application commands) are messages: role "user", or "other" for a bot's; every other type
("GuildMemberJoin", "ChannelPinnedMessage", "RecipientAdd", "Call", "ChannelNameChange", …)
is role "system", speaker "system", text "<author>: <content or type>". The speaker is the
server nickname when set, else the user name. Attachments, stickers and embeds become
bracketed notes after the content ("[attachment: map.png]", "[sticker: wave]", "[link preview: title]").
"""

from __future__ import annotations

from typing import Any, TypeGuard

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
from raw_store.formats.jsondoc import list_field, load_document, string
from raw_store.timeparse import parse_ts

NAME = "discord_json"
RECORD = "every element of messages[]"
MESSAGE_TYPES = frozenset({"Default", "Reply", "ChatInputCommand", "ContextMenuCommand", "ThreadStarterMessage"})


def _looks_discord(doc: object) -> TypeGuard[dict[str, Any]]:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("messages"), list)
        and isinstance(doc.get("channel"), dict)
        and isinstance(doc.get("guild"), dict)
    )


def sniff(s: Sample) -> bool:
    if _looks_discord(s.doc):
        return True
    return s.document and all(k in s.text for k in ('"guild"', '"channel"', '"messages"'))


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    doc = load_document(src, b)
    if doc is None:
        return b.result()
    if not _looks_discord(doc):
        b.reject(0, 0, E.E_JSON_SHAPE, "not a DiscordChatExporter object {guild, channel, messages[]}", src.data)
        return b.result()
    conv_id = id_field(doc["channel"].get("id")) or src.default_conv
    for record, msg in enumerate(doc["messages"], start=1):
        _message(b, record, msg, conv_id)
    if not b.messages and not b.rejects:
        b.reject(0, 0, E.E_NO_MESSAGES, "the export holds no message", src.data)
    return b.result()


def author_name(author: dict) -> str | None:
    return string(author, "nickname") or string(author, "name")


def notes(msg: dict) -> list[str]:
    """Bracketed notes for a message's attachments, stickers and embeds."""
    out = []
    for a in list_field(msg, "attachments"):
        name = string(a, "fileName") if isinstance(a, dict) else None
        out.append(f"[attachment: {name}]" if name else "[attachment]")
    for s in list_field(msg, "stickers"):
        name = string(s, "name") if isinstance(s, dict) else None
        out.append(f"[sticker: {name}]" if name else "[sticker]")
    for e in list_field(msg, "embeds"):
        title = (string(e, "title") or string(e, "url")) if isinstance(e, dict) else None
        out.append(f"[link preview: {title}]" if title else "[link preview]")
    return out


def _message(b: Builder, record: int, msg: object, conv_id: str) -> None:
    if not isinstance(msg, dict):
        b.reject(record, 0, E.E_JSON_SHAPE, "a message must be an object", dump(msg))
        return
    author = msg.get("author")
    name = author_name(author) if isinstance(author, dict) else None
    content, kind = msg.get("content", ""), msg.get("type", "Default")
    if name is None or not isinstance(author, dict) or not isinstance(content, str) or not isinstance(kind, str):
        b.reject(record, 0, E.E_JSON_SHAPE, "author.name, content and type must be strings", dump(msg))
        return
    if kind in MESSAGE_TYPES:
        speaker, role = name, "other" if author.get("isBot") is True else "user"
        text = "\n".join(p for p in [content.strip(), *notes(msg)] if p)
    else:
        speaker, role, text = "system", "system", f"{name}: {content.strip() or kind}"
    if not encodable(speaker) or not encodable(text):
        b.reject(record, 0, E.E_JSON_SHAPE, "unpaired surrogates", dump(msg))
        return
    problem = text_problem(text)
    if problem:
        b.reject(record, 0, problem[0], problem[1], dump(msg))
        return
    try:
        ts = parse_ts(msg.get("timestamp"))
    except ValueError as exc:
        b.reject(record, 0, E.E_TS_PARSE, str(exc)[:200], dump(msg))
        return
    b.message(
        conv_id=conv_id,
        msg_id=id_field(msg.get("id")) or f"R{record}",
        speaker=speaker.strip(),
        role=role,
        ts=ts,
        text=text,
        line=record,
    )


FORMAT = Format(NAME, DOCUMENT, RECORD, sniff, read)
