"""Input-format readers: raw chat-log bytes → `Message`s and coded `Reject`s.

The public entry of raw_store.formats: one module per format, registered in
raw_store.formats.registry and detected from content (the extension only breaks ties).
What one input record is, per format (anything else is consumed, neither message nor reject):

  locomo_json        LoCoMo samples: every turn of every session (conversation.session_N + session_N_date_time)
  chatgpt_json       ChatGPT conversations.json: every message node on each conversation's current branch
                     (current_node up to the root; without current_node, the path to the newest leaf) with
                     visible, non-empty text — root, hidden and empty nodes and other branches are not
                     messages of the chat; a malformed conversation is one record
  claude_json        Claude.ai conversations.json: every element of every conversation's chat_messages[]
  telegram_json      Telegram Desktop result.json (one chat or chats.list[]): every element of messages[];
                     service messages are role "system"
  discord_json       DiscordChatExporter JSON: every element of messages[]; non-message types are "system"
  messenger_json     Facebook Messenger / Instagram message_N.json: every element of messages[] (read oldest first)
  sillytavern_jsonl  SillyTavern / Luker JSONL: every non-blank line except the header (first line, chat metadata)
  canonical_jsonl    {tenant?, conv_id?, msg_id?, speaker, role?, ts, text} per line: every non-blank line
  wechat_csv         WeChatMsg / PyWxDump CSV: every row after the header
  discord_csv        DiscordChatExporter CSV: every row after the header
  line_txt           LINE chat history .txt: a `HH:MM<TAB>Name<TAB>text` (or name-less system) line with its
                     continuation lines, or a stray line; title, `Saved on:` and date lines are header
  qq                 QQ message manager .txt: a `date time nick(QQ)` line with its text lines, or a stray text
                     line; the banner, `====` rules and `消息分组:` / `消息对象:` lines are header
  whatsapp           WhatsApp export .txt: a dated line with its undated continuation lines (system lines are
                     role "system" messages), or a stray line before the first dated line
  transcript         `Speaker: text` lines: such a line with its indented continuation lines, or a stray line

Contract: `read_bytes` never raises on bad input. Every input record ends up in
exactly one message or one reject (or the whole file is one line-0 reject); every
message has non-empty text without raw CRs; same bytes → same result. A recognised
file that yields no record at all (a header only) is one E_NO_MESSAGES reject, never
nothing; a JSON document no format recognises is one E_FORMAT_UNKNOWN reject.

Encodings (raw_store.formats.encoding): UTF-8 (a BOM is skipped); UTF-16/32 with a BOM;
a file mostly not UTF-8 is read in the encoding charset-normalizer finds when it is a
multi-byte CJK one or UTF-16/32 and the file then reads as a known text format (QQ
saved as GBK). Rejects cite the file's own bytes at their byte offset; messages are text,
stored and cited as UTF-8 RawChunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from raw_store import errors as E
from raw_store.formats import encoding as enc
from raw_store.formats.base import (  # noqa: F401
    DOCUMENT,
    MAX_MESSAGE_BYTES,
    NOT_JSON,
    UNKNOWN,
    Line,
    Message,
    ReadResult,
    Reject,
    Sample,
    Source,
    default_conv_id,
    whole_file,
)
from raw_store.formats.registry import REGISTRY
from raw_store.routing import as_path, source_file_for, tenant_for

FORMATS = REGISTRY.names

__all__ = [
    "FORMATS",
    "MAX_MESSAGE_BYTES",
    "UNKNOWN",
    "Message",
    "ReadResult",
    "Reject",
    "default_conv_id",
    "detect_format",
    "read_bytes",
    "read_file",
]


@dataclass
class _Plan:
    """How to read one file: its format and decoded body — or, with a reason, the whole-file reject it is."""

    fmt: str
    reason: str | None = None
    detail: str = ""
    codec: str = enc.UTF8
    offset: int = 0
    text: str = ""  # DOCUMENT formats
    doc: object = NOT_JSON  # DOCUMENT formats: the JSON value detection parsed
    lines: list[Line] = field(default_factory=list)  # LINES formats

    def source(self, data: bytes, source_file: str, tenant: str) -> Source:
        return Source(
            data,
            source_file,
            tenant,
            codec=self.codec,
            text=self.text,
            doc=self.doc,
            offset=self.offset,
            lines=self.lines,
        )


def _decoded(data: bytes, codec: str, offset: int, text: str, name: str) -> _Plan:
    """The plan for a body decoded in `codec` (text: the body, undecodable bytes replaced)."""
    sample = Sample(text, name)
    fmt = REGISTRY.detect(sample)
    if fmt == UNKNOWN:
        return _Plan(
            fmt, E.E_FORMAT_UNKNOWN, "content matches none of the chat-log formats read here: " + ", ".join(FORMATS)
        )
    if REGISTRY[fmt].kind == DOCUMENT:
        if codec != enc.UTF8:
            return _Plan(fmt, E.E_READ_UTF8, f"a JSON document must be UTF-8, not {codec}")
        return _Plan(fmt, codec=codec, offset=offset, text=text, doc=sample.doc)
    return _Plan(fmt, codec=codec, offset=offset, lines=enc.split_lines(data, offset, codec))


def _other_encoding(data: bytes, codec: str | None, offset: int, name: str) -> _Plan | None:
    """The plan in `codec` (a byte-order mark's, else the one charset-normalizer finds), taken only when the
    file then reads as a known text format; None otherwise (the file is rejected as UTF-8 reading rejects it)."""
    body = data[offset:]
    codec = codec or enc.guess_codec(body)
    if codec is None:
        return None
    try:
        text = body.decode(codec)
    except UnicodeDecodeError:
        return None
    if not text.strip() or enc.text_is_binary(text):
        return None
    plan = _decoded(data, codec, offset, text, name)
    return plan if plan.reason is None and REGISTRY[plan.fmt].kind != DOCUMENT else None


def _plan(data: bytes, name: str) -> _Plan:
    codec, offset = enc.bom_codec(data)
    if codec != enc.UTF8:  # UTF-16/32 by its byte-order mark (FF FE may also start plain garbage)
        plan = _other_encoding(data, codec, offset, name)
        if plan is not None:
            return plan
        codec, offset = enc.UTF8, 0
    body = data[offset:]
    if not body.strip():
        return _Plan(UNKNOWN, E.E_READ_EMPTY, "empty or whitespace-only file")
    if enc.is_binary(body):
        return _other_encoding(data, None, offset, name) or _Plan(
            UNKNOWN, E.E_READ_BINARY, "NUL or control bytes: not a text file"
        )
    try:
        return _decoded(data, codec, offset, body.decode("utf-8"), name)
    except UnicodeDecodeError as exc:
        utf8_error = exc
    plan = _decoded(data, codec, offset, body.decode("utf-8", errors="replace"), name)
    if plan.reason is None and plan.lines:
        bad = sum(1 for ln in plan.lines if ln.text is None)
        nonblank = sum(1 for ln in plan.lines if ln.text is None or ln.text.strip())
        if 2 * bad <= nonblank:
            return plan  # a few damaged lines: each is its own E_READ_UTF8 reject
    # mostly undecodable: the file is in another encoding, not a few damaged lines
    return _other_encoding(data, None, offset, name) or _Plan(plan.fmt, E.E_READ_UTF8, f"invalid UTF-8: {utf8_error}")


def detect_format(data: bytes, name: str) -> str:
    """The chat-log format of `data` from its content (extension of `name` only a tie-breaker); "unknown" if none fits."""
    plan = _plan(data, name)
    return plan.fmt if plan.reason in (None, E.E_READ_UTF8) else UNKNOWN


def read_bytes(data: bytes, source_file: str, tenant: str) -> ReadResult:
    """Read one chat log. Never raises on bad input: problems become coded rejects (see module doc)."""
    plan = _plan(data, source_file)
    if plan.reason is not None:
        return whole_file(data, source_file, tenant, plan.fmt, plan.reason, plan.detail)
    result = REGISTRY[plan.fmt].read(plan.source(data, source_file, tenant))
    if not result.messages and not result.rejects:
        # a file never vanishes silently: e.g. a SillyTavern header or a QQ banner with no message after it
        return whole_file(data, source_file, tenant, plan.fmt, E.E_NO_MESSAGES, "the file holds no message records")
    return result


def read_file(path: Path, inbox: Path) -> ReadResult:
    """Read an inbox file; source_file is its posix path relative to the inbox, tenant its first folder."""
    return read_bytes(as_path(path).read_bytes(), source_file_for(path, inbox), tenant_for(path, inbox))
