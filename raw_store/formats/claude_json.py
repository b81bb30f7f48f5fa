"""claude_json: Claude.ai data export conversations.json — a list of conversations.

A conversation is {uuid, name, created_at, updated_at, account{uuid}, chat_messages[]}; a
message {uuid, sender: "human" | "assistant", text, content[] (blocks {type: "text", text},
tool_use, tool_result, thinking …), created_at, updated_at, attachments[{file_name,
file_type, extracted_content}], files[{file_name}]}. The text is `text`, else the text
blocks of `content` joined; attachments and files become notes ("[attachment: notes.pdf]").
"human" is the user (speaker "user"), "assistant" the assistant.
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
from raw_store.formats.jsondoc import list_field, load_document, string
from raw_store.timeparse import parse_ts

NAME = "claude_json"
RECORD = "every element of every conversation's chat_messages[] (a conversation without it is one reject)"
_ROLES = {"human": "user", "user": "user", "assistant": "assistant", "system": "system"}


def _conversations(doc: object) -> list | None:
    if isinstance(doc, dict) and isinstance(doc.get("chat_messages"), list):
        return [doc]
    if isinstance(doc, list) and any(isinstance(c, dict) and "chat_messages" in c for c in doc):
        return doc
    return None


def sniff(s: Sample) -> bool:
    if _conversations(s.doc) is not None:
        return True
    return s.document and '"chat_messages"' in s.text


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    doc = load_document(src, b)
    if doc is None:
        return b.result()
    convs = _conversations(doc)
    if convs is None:
        b.reject(0, 0, E.E_JSON_SHAPE, "no conversation with chat_messages[]", src.data)
        return b.result()
    record = 0
    for i, conv in enumerate(convs):
        if not isinstance(conv, dict) or not isinstance(conv.get("chat_messages"), list):
            record += 1
            b.reject(record, 0, E.E_JSON_SHAPE, f"conversation {i} has no chat_messages[]", dump(conv))
            continue
        conv_id = id_field(conv.get("uuid")) or f"{src.default_conv}#{i}"
        for msg in conv["chat_messages"]:
            record += 1
            _message(b, record, msg, conv_id)
    if not b.messages and not b.rejects:
        b.reject(0, 0, E.E_NO_MESSAGES, "no conversation holds a message", src.data)
    return b.result()


def _text(msg: dict) -> str | None:
    """`text`, else the text blocks of `content`; None when neither is well-formed."""
    text = msg.get("text")
    content = msg.get("content")
    if isinstance(text, str) and text.strip():
        return text
    if isinstance(content, list):
        return "\n\n".join(
            c["text"]
            for c in content
            if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str)
        )
    return text if isinstance(text, str) else None


def _notes(msg: dict) -> list[str]:
    out = []
    for key, label in (("attachments", "attachment"), ("files", "file")):
        for a in list_field(msg, key):
            name = string(a, "file_name") if isinstance(a, dict) else None
            out.append(f"[{label}: {name}]" if name else f"[{label}]")
    return out


def _message(b: Builder, record: int, msg: object, conv_id: str) -> None:
    if not isinstance(msg, dict):
        b.reject(record, 0, E.E_JSON_SHAPE, "a chat message must be an object", dump(msg))
        return
    sender, text = msg.get("sender"), _text(msg)
    if not isinstance(sender, str) or not sender.strip() or text is None:
        b.reject(record, 0, E.E_JSON_SHAPE, "sender and text (or content) are required", dump(msg))
        return
    text = "\n".join(p for p in [*_notes(msg), text.strip()] if p)
    role = _ROLES.get(sender.strip().lower(), "other")
    speaker = role if role in ("user", "assistant") else sender.strip()
    if not encodable(text) or not encodable(speaker):
        b.reject(record, 0, E.E_JSON_SHAPE, "unpaired surrogates", dump(msg))
        return
    problem = text_problem(text)
    if problem:
        b.reject(record, 0, problem[0], problem[1], dump(msg))
        return
    try:
        ts = parse_ts(msg.get("created_at"))
    except ValueError as exc:
        b.reject(record, 0, E.E_TS_PARSE, f"created_at: {str(exc)[:200]}", dump(msg))
        return
    b.message(
        conv_id=conv_id,
        msg_id=id_field(msg.get("uuid")) or f"R{record}",
        speaker=speaker,
        role=role,
        ts=ts,
        text=text,
        line=record,
    )


FORMAT = Format(NAME, DOCUMENT, RECORD, sniff, read)
