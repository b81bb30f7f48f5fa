"""Coded reasons for rejected input and raw-store failures (greppable, tested).

A code goes into `rejects.reason`; the human detail goes into `rejects.detail`.
"""

from __future__ import annotations

E_READ_UTF8 = "E_READ_UTF8"  # bytes are not valid UTF-8
E_READ_BINARY = "E_READ_BINARY"  # file looks binary (NUL bytes, control chars)
E_READ_EMPTY = "E_READ_EMPTY"  # empty or whitespace-only file
E_FORMAT_UNKNOWN = "E_FORMAT_UNKNOWN"  # content matches no known chat-log format
E_JSON_PARSE = "E_JSON_PARSE"  # a JSON line / document does not parse
E_JSON_SHAPE = "E_JSON_SHAPE"  # JSON parses but lacks required fields / has wrong types
E_LINE_PARSE = "E_LINE_PARSE"  # a line / CSV row is not a record of its format (e.g. not `Speaker: text`)
E_TS_PARSE = "E_TS_PARSE"  # a timestamp is present but cannot be parsed
E_TS_MISSING = "E_TS_MISSING"  # the format requires a timestamp and none is given
E_TEXT_EMPTY = "E_TEXT_EMPTY"  # a message with no text
E_MSG_TOO_LARGE = "E_MSG_TOO_LARGE"  # a message above MAX_MESSAGE_BYTES
E_NO_MESSAGES = "E_NO_MESSAGES"  # a file of a known format holds no message record (header only)

REASONS: dict[str, str] = {
    E_READ_UTF8: "invalid UTF-8",
    E_READ_BINARY: "binary content",
    E_READ_EMPTY: "empty file",
    E_FORMAT_UNKNOWN: "unknown chat-log format",
    E_JSON_PARSE: "malformed JSON",
    E_JSON_SHAPE: "JSON record lacks required fields",
    E_LINE_PARSE: "line is not a record of its format",
    E_TS_PARSE: "unparseable timestamp",
    E_TS_MISSING: "missing timestamp",
    E_TEXT_EMPTY: "empty message text",
    E_MSG_TOO_LARGE: "message too large",
    E_NO_MESSAGES: "no messages in the file",
}


class RawStoreError(Exception):
    """Base class of raw-store failures."""


class BlobCorrupt(RawStoreError):
    """A blob's bytes do not hash to its id: reported, never served."""


class BlobMissing(RawStoreError):
    """No blob at the expected path."""


class BlobForgotten(RawStoreError):
    """The blob was deleted on purpose; a tombstone records when and why."""
