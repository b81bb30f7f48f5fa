"""Helpers of the JSON-document readers (the export formats that are one JSON value)."""

from __future__ import annotations

import json

from raw_store import errors as E
from raw_store.formats.base import NOT_JSON, Builder, Source


def load_document(src: Source, b: Builder) -> object | None:
    """The file's JSON value (parsed at detection when it could be), or None after one whole-file
    E_JSON_PARSE reject for a damaged document."""
    if src.doc is not NOT_JSON:
        return src.doc
    try:
        return json.loads(src.text.lstrip())
    except (ValueError, RecursionError) as exc:
        b.reject(0, 0, E.E_JSON_PARSE, str(exc)[:200], src.data)
        return None


def string(obj: dict, key: str) -> str | None:
    """obj[key] when it is a non-blank string, else None."""
    value = obj.get(key)
    return value if isinstance(value, str) and value.strip() else None


def list_field(obj: dict, key: str) -> list:
    """obj[key] when it is a list, else []."""
    value = obj.get(key)
    return value if isinstance(value, list) else []
