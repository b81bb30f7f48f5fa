"""locomo_json: LoCoMo samples, conversation.session_N turn lists + session_N_date_time."""

from __future__ import annotations

import json
import re

from raw_store import errors as E
from raw_store.formats.base import (
    DOCUMENT,
    MAX_MESSAGE_BYTES,
    NOT_JSON,
    Format,
    ReadResult,
    Sample,
    Source,
    dump,
    encodable,
    id_field,
)
from raw_store.timeparse import parse_ts

NAME = "locomo_json"
RECORD = "every turn of every session"
_SESSION_KEY = re.compile(r"^session_(\d+)$")


def sniff(s: Sample) -> bool:
    doc = s.doc
    if isinstance(doc, dict):
        return isinstance(doc.get("conversation"), dict)
    if isinstance(doc, list):
        return any(isinstance(x, dict) and "conversation" in x for x in doc)
    # a truncated or garbled document keeps its format, so its reject says E_JSON_PARSE
    return s.document and '"conversation"' in s.text and re.search(r'"session_\d+"', s.text) is not None


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    doc = src.doc
    if doc is NOT_JSON:
        try:
            doc = json.loads(src.text.lstrip())
        except (ValueError, RecursionError) as exc:
            b.reject(0, 0, E.E_JSON_PARSE, str(exc)[:200], src.data)
            return b.result()
    samples = doc if isinstance(doc, list) else [doc]
    default_conv = src.default_conv
    turn_no = 0
    for i, sample in enumerate(samples):
        conv = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conv, dict):
            b.reject(0, 0, E.E_JSON_SHAPE, f"sample {i} has no conversation object", dump(sample))
            continue
        conv_id = id_field(sample.get("sample_id")) or f"{default_conv}#{i}"
        sessions = sorted(
            (int(m.group(1)), k) for k in conv if (m := _SESSION_KEY.match(k)) and isinstance(conv[k], list)
        )
        for n, key in sessions:
            stamp = conv.get(f"{key}_date_time")
            try:
                ts, ts_error = parse_ts(stamp), None
            except ValueError as exc:
                ts, ts_error = None, str(exc)[:200]
            for turn in conv[key]:
                turn_no += 1
                problem = ts_error and (E.E_TS_PARSE, f"{key}_date_time: {ts_error}")
                problem = problem or _turn_problem(turn)
                if problem:
                    b.reject(turn_no, 0, problem[0], f"{key}: {problem[1]}", dump(turn))
                    continue
                utterance = (turn.get("text") or "").strip()
                caption = turn.get("blip_caption")
                caption = caption.strip() if isinstance(caption, str) and caption.strip() else None
                if caption:
                    utterance = f"{utterance} [image: {caption}]" if utterance else f"[image: {caption}]"
                b.message(
                    conv_id=conv_id,
                    msg_id=id_field(turn.get("dia_id")) or f"D{n}:{turn_no}",
                    speaker=turn["speaker"].strip(),
                    role="user",
                    ts=ts,
                    text=utterance,
                    caption=caption,
                    line=turn_no,
                )
    if not b.messages and not b.rejects:
        # a file never vanishes silently: no turns at all is itself a reject
        b.reject(0, 0, E.E_JSON_SHAPE, "no session_N turn lists in any sample", src.data)
    return b.result()


def _turn_problem(turn: object) -> tuple[str, str] | None:
    if not isinstance(turn, dict):
        return E.E_JSON_SHAPE, "turn is not an object"
    speaker, text, caption = turn.get("speaker"), turn.get("text"), turn.get("blip_caption")
    if not isinstance(speaker, str) or not speaker.strip() or not encodable(speaker):
        return E.E_JSON_SHAPE, "turn speaker must be a non-empty string"
    if (text is not None and not isinstance(text, str)) or (caption is not None and not isinstance(caption, str)):
        return E.E_JSON_SHAPE, "turn text / blip_caption must be strings"
    if not encodable(text or "") or not encodable(caption or "") or not encodable(str(turn.get("dia_id", ""))):
        return E.E_JSON_SHAPE, "turn holds unpaired surrogates"
    if not (text or "").strip() and not (caption or "").strip():
        return E.E_TEXT_EMPTY, "turn has no text"
    if len((text or "").encode("utf-8")) + len((caption or "").encode("utf-8")) > MAX_MESSAGE_BYTES:
        return E.E_MSG_TOO_LARGE, f"turn text above {MAX_MESSAGE_BYTES} bytes"
    return None


FORMAT = Format(NAME, DOCUMENT, RECORD, sniff, read)
