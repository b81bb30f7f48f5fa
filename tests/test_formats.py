"""Chat-export readers (SillyTavern, ChatGPT, WhatsApp, QQ): fixtures, malformed variants, and fuzzing.

Conservation is checked per format against an independent statement of what an input
record is (see raw_store/readers.py's module doc): every record is exactly one message
or one reject, header lines are neither.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from raw_store import errors as E
from raw_store.cas import RawStore
from raw_store.ingest import ingest_bytes
from raw_store.readers import FORMATS, ReadResult, detect_format, read_bytes
from raw_store.timeparse import parse_ts

FIXTURES = Path(__file__).parent / "fixtures" / "raw"
FUZZ = fuzz_settings(60)
LRM, NNBSP = "\u200e", "\u202f"
NEW_FIXTURES = ["sillytavern.jsonl", "chatgpt_conversations.json", "whatsapp_ios.txt", "whatsapp_android.txt", "qq.txt"]


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _reasons(r: ReadResult) -> list[tuple[int, str]]:
    return [(x.line, x.reason) for x in r.rejects]


def _turns(r: ReadResult) -> list[tuple]:
    return [(m.msg_id, m.speaker, m.role, m.ts, m.text) for m in r.messages]


def lines_of(data: bytes, first: int, last: int) -> bytes:
    """Lines first..last (1-based) of `data` as the file holds them, without the last line's terminator."""
    body = data.removeprefix(b"\xef\xbb\xbf")
    return b"\n".join(body.split(b"\n")[first - 1 : last]).removesuffix(b"\r")


def _utc(epoch: float) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(seconds=epoch)


# -- timestamps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, dayfirst, expected",
    [
        # SillyTavern send_date / create_date styles
        ("June 15, 2023 8:04pm", None, dt.datetime(2023, 6, 15, 20, 4)),
        ("June 15, 2023 12:30am", None, dt.datetime(2023, 6, 15, 0, 30)),
        ("2023-06-15T20:04:12.345Z", None, dt.datetime(2023, 6, 15, 20, 4, 12, 345000)),
        ("2023-6-15 @20h 04m 12s 345ms", None, dt.datetime(2023, 6, 15, 20, 4, 12, 345000)),
        ("2023-6-15 @20h 4m 12s", None, dt.datetime(2023, 6, 15, 20, 4, 12)),
        ("2023-06-15@20h04m12s", None, dt.datetime(2023, 6, 15, 20, 4, 12)),
        ("2023-6-15 @9h 5m", None, dt.datetime(2023, 6, 15, 9, 5)),
        (1686859452345, None, dt.datetime(2023, 6, 15, 20, 4, 12, 345000)),
        # WhatsApp: the reader passes the file's day/month order
        ("15/06/2023, 20:04:12", None, dt.datetime(2023, 6, 15, 20, 4, 12)),
        ("15/06/2023, 20:04:12", True, dt.datetime(2023, 6, 15, 20, 4, 12)),
        ("01/02/2023, 10:00", True, dt.datetime(2023, 2, 1, 10)),
        ("01/02/2023, 10:00", False, dt.datetime(2023, 1, 2, 10)),
        ("01/02/2023, 10:00", None, dt.datetime(2023, 1, 2, 10)),
        (f"6/15/23, 8:04{NNBSP}PM", False, dt.datetime(2023, 6, 15, 20, 4)),
        ("6/15/23, 8:04\u00a0pm", None, dt.datetime(2023, 6, 15, 20, 4)),
        ("15.06.23, 20:04", True, dt.datetime(2023, 6, 15, 20, 4)),
        ("15-06-2023 20:04", None, dt.datetime(2023, 6, 15, 20, 4)),
        # QQ message manager
        ("2024-01-02 10:00:00", None, dt.datetime(2024, 1, 2, 10)),
        ("2011-4-20 9:44:19", None, dt.datetime(2011, 4, 20, 9, 44, 19)),
        # ChatGPT create_time
        (1718000001.5, None, dt.datetime(2024, 6, 10, 6, 13, 21, 500000)),
        (None, True, None),
    ],
)
def test_parse_ts_export_styles(value: object, dayfirst: bool | None, expected: dt.datetime | None) -> None:
    assert parse_ts(value, dayfirst=dayfirst) == expected


@pytest.mark.parametrize(
    "value, dayfirst",
    [
        ("15/06/2023, 20:04", False),  # day-first data read month-first: month 15
        ("13/13/2023, 10:00", True),
        ("2023-6-15 @25h 00m", None),
        ("2023-6-15 @", None),
        ("2023-13-15 @20h 04m 12s", None),
        ("June 31, 2023 8:04pm", None),
        ("2024-01-02 24:00:00", None),
    ],
)
def test_parse_ts_export_styles_garbage(value: object, dayfirst: bool | None) -> None:
    with pytest.raises(ValueError):
        parse_ts(value, dayfirst=dayfirst)


_NUMERIC_STAMPS = st.from_regex(r"\d{1,2}[/.\-]\d{1,2}[/.\-]\d{2,4},? \d{1,2}:\d{2}", fullmatch=True)
_HUMANIZED_STAMPS = st.from_regex(
    r"\d{4}-\d{1,2}-\d{1,2} ?@\d{1,2}h ?\d{1,2}m( ?\d{1,2}s)?( ?\d{1,3}ms)?", fullmatch=True
)


@given(st.one_of(st.text(max_size=40), _NUMERIC_STAMPS, _HUMANIZED_STAMPS), st.sampled_from([None, True, False]))
@FUZZ
def test_parse_ts_export_styles_only_raise_value_error(value: str, dayfirst: bool | None) -> None:
    try:
        out = parse_ts(value, dayfirst=dayfirst)
    except ValueError:
        return
    assert out is None or (isinstance(out, dt.datetime) and out.tzinfo is None)


# -- detection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture, fmt",
    [
        ("canonical.jsonl", "canonical_jsonl"),
        ("transcript.txt", "transcript"),
        ("locomo.json", "locomo_json"),
        ("sillytavern.jsonl", "sillytavern_jsonl"),
        ("chatgpt_conversations.json", "chatgpt_json"),
        ("whatsapp_ios.txt", "whatsapp"),
        ("whatsapp_android.txt", "whatsapp"),
        ("qq.txt", "qq"),
    ],
)
@pytest.mark.parametrize("name", ["original", "renamed.dat", "renamed.jsonl", "renamed.txt"])
def test_detect_every_fixture_from_content(fixture: str, fmt: str, name: str) -> None:
    data = _fixture(fixture)
    assert detect_format(data, fixture if name == "original" else name) == fmt
    assert read_bytes(data, fixture, "t").format == fmt


def test_unknown_format_reject_lists_the_formats_read() -> None:
    data = b'{"event": "click"}\n{"event": "scroll"}\n'
    r = read_bytes(data, "events.jsonl", "t")
    assert r.messages == [] and [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_FORMAT_UNKNOWN, data)]
    for fmt in FORMATS:
        assert fmt in r.rejects[0].detail


def test_whatsapp_detected_despite_many_continuation_lines() -> None:
    data = (
        "15/06/2023, 20:04 - Alice: a long story\n"
        + "line of the story\n" * 3
        + "15/06/2023, 20:05 - Bob: and another\n"
        + "more\n" * 2
    ).encode()
    assert detect_format(data, "chat.txt") == "whatsapp"


# -- SillyTavern -----------------------------------------------------------------------------------


def test_sillytavern_fixture() -> None:
    data = _fixture("sillytavern.jsonl")
    r = read_bytes(data, "alice/chats/Seraphina - 2023-6-15 @20h 04m 12s 345ms.jsonl", "alice")
    assert r.format == "sillytavern_jsonl"
    assert {(m.conv_id, m.format, m.tenant) for m in r.messages} == {
        ("chats/Seraphina - 2023-6-15 @20h 04m 12s 345ms", "sillytavern_jsonl", "alice")
    }
    assert _turns(r) == [
        (
            "L2",
            "Seraphina",
            "assistant",
            dt.datetime(2023, 6, 15, 20, 4),
            "*Seraphina looks up from her book and smiles.* Welcome back, traveller! 🌿\n\n"
            "The forest has been quiet today.",
        ),
        ("L3", "Lin", "user", dt.datetime(2023, 6, 15, 20, 5), "你好！我今天在山上迷路了，能帮我找到回村子的路吗？"),
        # swipe_id 1 picked the second swipe; the text is always `mes`
        (
            "L4",
            "Seraphina",
            "assistant",
            dt.datetime(2023, 6, 15, 20, 6, 41, 512000),
            "当然可以。\n沿着溪流往下走，你会看到一座石桥。过了桥就是村子 🏡",
        ),
        ("L5", "System", "system", dt.datetime(2023, 6, 15, 20, 7, 2, 118000), "*The sun sets behind the mountains.*"),
        ("L6", "Lin", "system", dt.datetime(2023, 6, 15, 20, 8), "(OOC: hidden from the prompt — 这条不要发给模型)"),
        ("L8", "Lin", "user", dt.datetime(2023, 6, 15, 20, 10), "Thanks! 谢谢你 🙏 I'll head out at dawn."),
        (
            "L9",
            "Seraphina",
            "assistant",
            dt.datetime(2023, 6, 15, 20, 10, 30, 1000),
            "Safe travels, Lin.\nTake this lantern — it never goes out. ✨",
        ),
    ]
    assert [m.seq for m in r.messages] == list(range(7))
    assert _reasons(r) == [(7, E.E_TEXT_EMPTY)]  # a failed generation saved with an empty mes
    rej = r.rejects[0]
    assert rej.raw == data.split(b"\n")[6] and data[rej.byte_offset :].startswith(rej.raw)


def _tavern(*records: object) -> bytes:
    header = {
        "user_name": "Lin",
        "character_name": "Seraphina",
        "create_date": "2023-6-15 @20h 04m 12s 345ms",
        "chat_metadata": {},
    }
    lines = [json.dumps(header)] + [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    return "\n".join(lines).encode() + b"\n"


GOOD_ST = {"name": "Lin", "is_user": True, "send_date": "June 15, 2023 8:05pm", "mes": "hello 你好"}


def test_sillytavern_malformed_records_are_coded_rejects() -> None:
    data = _tavern(
        GOOD_ST,
        {**GOOD_ST, "send_date": "the day after tomorrow"},
        {"name": "Lin", "is_user": True, "send_date": "June 15, 2023 8:05pm"},
        {**GOOD_ST, "is_user": "yes"},
        {**GOOD_ST, "name": ""},
        {"user_name": "Lin", "character_name": "Other", "chat_metadata": {}},
        {**GOOD_ST, "mes": "   "},
        "[1, 2]",
        {**GOOD_ST, "mes": "still fine"},
        json.dumps(GOOD_ST)[:30],
    )  # truncated last line
    data = data.replace(b"still fine", b"still fine \xff", 1)
    r = read_bytes(data, "c.jsonl", "t")
    assert r.format == "sillytavern_jsonl"
    assert [(m.line, m.text) for m in r.messages] == [(2, "hello 你好")]
    assert _reasons(r) == [
        (3, E.E_TS_PARSE),
        (4, E.E_JSON_SHAPE),
        (5, E.E_JSON_SHAPE),
        (6, E.E_JSON_SHAPE),
        (7, E.E_JSON_SHAPE),
        (8, E.E_TEXT_EMPTY),
        (9, E.E_JSON_SHAPE),
        (10, E.E_READ_UTF8),
        (11, E.E_JSON_PARSE),
    ]
    lines = data.split(b"\n")
    assert all(x.raw == lines[x.line - 1] and data[x.byte_offset :].startswith(x.raw) for x in r.rejects)


def test_sillytavern_swipes_ignored_and_date_styles() -> None:
    data = _tavern(
        {
            "name": "Seraphina",
            "is_user": False,
            "send_date": 1686859452345,
            "mes": "the chosen reply",
            "swipe_id": 1,
            "swipes": ["first try", "another try"],
            "extra": {"api": "openai"},
        },
        {"name": "Lin", "is_user": True, "send_date": "2023-06-15T20:04:13Z", "mes": "ok"},
        {"name": "Lin", "is_user": True, "mes": "no send_date at all"},
    )
    r = read_bytes(data, "c.jsonl", "t")
    assert [(m.text, m.role, m.ts) for m in r.messages] == [
        ("the chosen reply", "assistant", dt.datetime(2023, 6, 15, 20, 4, 12, 345000)),
        ("ok", "user", dt.datetime(2023, 6, 15, 20, 4, 13)),
        ("no send_date at all", "user", None),
    ]
    assert r.rejects == []


def test_sillytavern_header_only_and_headerless() -> None:
    header_only = _tavern()
    r = read_bytes(header_only, "c.jsonl", "t")
    assert r.format == "sillytavern_jsonl"
    assert [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_NO_MESSAGES, header_only)]
    headerless = b"\n".join(json.dumps(x).encode() for x in (GOOD_ST, {**GOOD_ST, "is_user": False, "name": "Bot"}))
    r = read_bytes(headerless, "c.jsonl", "t")
    assert [(m.msg_id, m.role) for m in r.messages] == [("L1", "user"), ("L2", "assistant")] and r.rejects == []


# -- ChatGPT ---------------------------------------------------------------------------------------

A = "6667e1a0-1c2d-800c-9b7e-3a4f5e6d7c8b"
B = "66680b12-77aa-800c-a1b2-c3d4e5f60718"


def test_chatgpt_fixture_follows_the_current_branch() -> None:
    data = _fixture("chatgpt_conversations.json")
    r = read_bytes(data, "alice/conversations.json", "alice")
    assert r.format == "chatgpt_json" and r.rejects == []
    assert [(m.conv_id, m.seq, m.line) for m in r.messages] == [
        (A, 0, 2),
        (A, 1, 3),
        (A, 2, 4),
        (A, 3, 5),
        (A, 4, 6),
        (A, 5, 7),
        (B, 0, 10),
        (B, 1, 11),
    ]
    assert _turns(r) == [
        (
            "aaa2d4f6-0002-4000-8000-000000000002",
            "user",
            "user",
            _utc(1718000001.5),
            "这个周末想去爬山，推荐一条北京附近的路线？",
        ),
        # the regenerated first answer (c3f5…) is on another branch: not a turn, not a reject
        (
            "d4a6b8c0-0004-4000-8000-000000000004",
            "assistant",
            "assistant",
            _utc(1718000030.25),
            "推荐两条路线：\n1. 香山 — 适合新手，约 2 小时 🌲\n2. 箭扣长城 — 风景壮观，但比较陡。",
        ),
        ("aaa5c7e9-0005-4000-8000-000000000005", "user", "user", _utc(1718000100.0), "[image]\n这张地图上的路线对吗？"),
        (
            "e6b8d0f2-0006-4000-8000-000000000006",
            "assistant",
            "assistant",
            _utc(1718000110.0),
            "distance_km = 4.2 + 3.8\nprint(distance_km)",
        ),
        ("f7c9e1a3-0007-4000-8000-000000000007", "python", "other", _utc(1718000111.0), "8.0"),
        (
            "a8d0f2b4-0008-4000-8000-000000000008",
            "assistant",
            "assistant",
            _utc(1718000115.75),
            "对，路线没问题，全程大约 8 公里。Have a great hike! 🥾",
        ),
        # create_time null stays None (no guessed time); the blank system prompt and the hidden
        # user profile before it are not turns
        (
            "aaa3e4f5-1003-4000-8000-000000000013",
            "user",
            "user",
            None,
            "Help me write a short email to my landlord.\nThe heating has been broken since Monday.",
        ),
        (
            "d0e1f2a3-1004-4000-8000-000000000014",
            "assistant",
            "assistant",
            dt.datetime(2024, 6, 11, 7, 14, 2),
            "Subject: Heating repair\n\nDear Mr. Weber,\n\nthe heating in my flat has not worked since Monday. "
            "Could you arrange a repair this week?\n\nBest regards,\nLin",
        ),
    ]
    assert "c3f5a7b9-0003-4000-8000-000000000003" not in {m.msg_id for m in r.messages}


def _node(
    nid: str,
    parent: str | None,
    role: str | None = "user",
    text: object = "hi",
    t: object = 1718000000.0,
    **extra: object,
) -> dict:
    message = (
        None
        if role is None
        else {
            "id": nid,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": t,
            "content": {"content_type": "text", "parts": [text]},
            "metadata": {},
            **extra,
        }
    )
    return {"id": nid, "message": message, "parent": parent, "children": []}


def _conv(cid: str, nodes: list[dict], current: str | None = None) -> dict:
    mapping = {n["id"]: n for n in nodes}
    for n in nodes:
        if n["parent"] in mapping:
            mapping[n["parent"]]["children"].append(n["id"])
    return {
        "title": cid,
        "create_time": 1718000000.0,
        "mapping": mapping,
        "current_node": current if current is not None else nodes[-1]["id"],
        "conversation_id": cid,
        "id": cid,
    }


def _simple_conv(cid: str, n: int = 2) -> dict:
    return _conv(
        cid,
        [_node(f"{cid}-root", None, None)]
        + [
            _node(
                f"{cid}-{i}",
                f"{cid}-{i - 1}" if i else f"{cid}-root",
                "user" if i % 2 == 0 else "assistant",
                f"{cid} turn {i}",
            )
            for i in range(n)
        ],
    )


def test_chatgpt_malformed_conversations_and_nodes() -> None:
    no_current = _simple_conv("c2")
    del no_current["current_node"]
    cycle = _conv("c3", [_node("x", "y"), _node("y", "x")], current="x")
    bad_nodes = _conv(
        "c4",
        [
            _node("r", None, None),
            _node("n1", "r", text="fine"),
            _node("n2", "n1", role="assistant", text=7),
            _node("n3", "n2", t="yesterday"),
            {"id": "n4", "message": {"author": "user", "content": {}}, "parent": "n3", "children": []},
            _node("n5", "n4", role="assistant", text="still here"),
        ],
    )
    doc = [_simple_conv("c1"), no_current, "not a conversation", cycle, bad_nodes]
    data = json.dumps(doc, ensure_ascii=False, indent=1).encode()
    r = read_bytes(data, "conversations.json", "t")
    assert r.format == "chatgpt_json"
    # without current_node the conversation's single path is read (issue 19: older exports lack it)
    assert [(m.conv_id, m.msg_id, m.text) for m in r.messages] == [
        ("c1", "c1-0", "c1 turn 0"),
        ("c1", "c1-1", "c1 turn 1"),
        ("c2", "c2-0", "c2 turn 0"),
        ("c2", "c2-1", "c2 turn 1"),
        ("c4", "n1", "fine"),
        ("c4", "n5", "still here"),
    ]
    assert _reasons(r) == [
        (5, E.E_JSON_SHAPE),
        (6, E.E_JSON_SHAPE),
        (8, E.E_JSON_SHAPE),
        (9, E.E_TS_PARSE),
        (10, E.E_JSON_SHAPE),
    ]
    # a malformed conversation is rejected with its own bytes, at its offset
    for rej, conv in zip(r.rejects[:2], ["not a conversation", cycle]):
        assert data[rej.byte_offset : rej.byte_offset + len(rej.raw)] == rej.raw and json.loads(rej.raw) == conv
    assert json.loads(r.rejects[2].raw)["id"] == "n2"


def test_chatgpt_truncated_export_keeps_whole_conversations() -> None:
    full = json.dumps([_simple_conv("c1"), _simple_conv("c2", 3)], indent=1).encode()
    cut = full[: len(full) - 200]
    r = read_bytes(cut, "conversations.json", "t")
    assert r.format == "chatgpt_json"
    assert [m.msg_id for m in r.messages] == ["c1-0", "c1-1"]
    assert _reasons(r) == [(3, E.E_JSON_PARSE)]
    assert cut[r.rejects[0].byte_offset :] == r.rejects[0].raw and r.rejects[0].raw.lstrip().startswith(b",")
    # cut before the first conversation is complete: nothing to keep, the file is the reject
    early = full[:150]
    r = read_bytes(early, "conversations.json", "t")
    assert r.format == "chatgpt_json" and r.messages == []
    assert [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_JSON_PARSE, early)]


def test_chatgpt_single_object_hidden_and_dangling_parent() -> None:
    conv = _conv(
        "solo",
        [
            _node("a", "gone-from-mapping", text="first kept"),
            _node("b", "a", role="assistant", text="  ", t=None),
            _node("c", "b", text="hidden", metadata={"is_visually_hidden_from_conversation": True}),
            _node("d", "c", role="tool", text="result"),
        ],
    )
    conv["mapping"]["d"]["message"]["author"]["name"] = "browser"
    r = read_bytes(json.dumps(conv).encode(), "one.json", "t")
    assert [(m.msg_id, m.speaker, m.role, m.line) for m in r.messages] == [
        ("a", "user", "user", 1),
        ("d", "browser", "other", 4),
    ]
    assert r.rejects == []
    only_hidden = json.dumps([_conv("h", [_node("r", None, None), _node("s", "r", "system", "")])]).encode()
    r = read_bytes(only_hidden, "h.json", "t")
    assert [(x.line, x.reason) for x in r.rejects] == [(0, E.E_NO_MESSAGES)]


# -- WhatsApp --------------------------------------------------------------------------------------


def test_whatsapp_ios_fixture() -> None:
    r = read_bytes(_fixture("whatsapp_ios.txt"), "alice/WhatsApp Chat - 周末爬山群.txt", "alice")
    assert r.format == "whatsapp" and r.rejects == []
    assert {m.conv_id for m in r.messages} == {"WhatsApp Chat - 周末爬山群"}
    d = dt.datetime
    assert _turns(r) == [
        (
            "L1",
            "system",
            "system",
            d(2023, 6, 15, 20, 4, 12),
            "Messages and calls are end-to-end encrypted. "
            "No one outside of this chat, not even WhatsApp, can read or listen to them.",
        ),
        ("L2", "system", "system", d(2023, 6, 15, 20, 4, 12), 'Alice created group "周末爬山群 🏔️"'),
        ("L3", "system", "system", d(2023, 6, 15, 20, 4, 30), "Alice added Bob and 王芳"),
        ("L4", "Alice", "user", d(2023, 6, 15, 20, 5, 1), "Hi all! Saturday hike to Mount Tam? 🥾"),
        ("L5", "王芳", "user", d(2023, 6, 15, 20, 6, 45), "好啊！我周六有空。\n需要带午饭吗？"),
        ("L7", "Bob", "user", d(2023, 6, 15, 20, 7, 10), "I'm in. Here's the trail map:"),
        ("L8", "Bob", "user", d(2023, 6, 15, 20, 7, 15), "<attached: 00000007-PHOTO-2023-06-15-20-07-15.jpg>"),
        ("L9", "王芳", "user", d(2023, 6, 15, 20, 8, 2), "[image]"),  # a placeholder is a note, not words
        ("L10", "Carol", "user", d(2023, 6, 16, 9, 15, 33), "Can I join? I'm Alice's cousin 😊"),
        ("L11", "Alice", "user", d(2023, 6, 16, 9, 16), "Of course!\n\nMeet at the parking lot at 8."),
        ("L14", "system", "system", d(2023, 6, 16, 9, 20, 41), f"Alice added ~{NNBSP}Carol"),
    ]


def test_whatsapp_android_us_fixture() -> None:
    r = read_bytes(_fixture("whatsapp_android.txt"), "alice/WhatsApp Chat with Bob.txt", "alice")
    assert r.format == "whatsapp" and r.rejects == []
    d = dt.datetime
    assert _turns(r) == [
        (
            "L1",
            "system",
            "system",
            d(2023, 6, 15, 20, 4),
            "Messages and calls are end-to-end encrypted. No one outside "
            "of this chat, not even WhatsApp, can read or listen to them. Tap to learn more.",
        ),
        ("L2", "Alice", "user", d(2023, 6, 15, 20, 4), "Hey! Did you get the tickets? 🎟️"),
        ("L3", "Bob", "user", d(2023, 6, 15, 20, 5), "Yes!! Two for Saturday"),
        ("L4", "Bob", "user", d(2023, 6, 15, 20, 5), "[media]"),
        ("L5", "Alice", "user", d(2023, 6, 15, 20, 6), "太好了 🎉\n我们几点见？"),
        ("L7", "Bob", "user", d(2023, 6, 15, 20, 7), "7pm at the north gate:\n- bring your ID\n- bring a jacket"),
        ("L10", "system", "system", d(2023, 6, 15, 20, 12), "Your security code with Bob changed. Tap to learn more."),
        ("L11", "Alice", "user", d(2023, 6, 16, 9, 2), "See you 👋"),
    ]
    assert {m.conv_id for m in r.messages} == {"WhatsApp Chat with Bob"}


@pytest.mark.parametrize(
    "lines, expected",
    [
        # ambiguous throughout: the style decides — d/m/yyyy and dd.mm.yy are day-first, US m/d/yy month-first
        (
            ["01/02/2023, 10:00 - A: x", "03/02/2023, 11:00 - B: y"],
            [dt.datetime(2023, 2, 1, 10), dt.datetime(2023, 2, 3, 11)],
        ),
        (["[01/02/2023, 10:00:00] A: x"], [dt.datetime(2023, 2, 1, 10)]),
        (["01.02.23, 10:00 - A: x"], [dt.datetime(2023, 2, 1, 10)]),
        (["1/2/24, 10:00 AM - A: x"], [dt.datetime(2024, 1, 2, 10)]),
        # one unambiguous date decides the whole file, whichever line it is on
        (
            ["1/2/24, 10:00 AM - A: x", "13/2/24, 10:00 AM - A: y"],
            [dt.datetime(2024, 2, 1, 10), dt.datetime(2024, 2, 13, 10)],
        ),
        (
            ["01/02/2023, 10:00 - A: x", "02/13/2023, 10:00 - A: y"],
            [dt.datetime(2023, 1, 2, 10), dt.datetime(2023, 2, 13, 10)],
        ),
        (["2023-06-15 20:04 - A: x"], [dt.datetime(2023, 6, 15, 20, 4)]),
    ],
)
def test_whatsapp_day_month_order_is_decided_per_file(lines: list[str], expected: list[dt.datetime]) -> None:
    r = read_bytes("\n".join(lines).encode(), "chat.txt", "t")
    assert r.format == "whatsapp" and r.rejects == []
    assert [m.ts for m in r.messages] == expected


def test_whatsapp_malformed_records() -> None:
    data = (
        (
            "stray line before any date\n"
            "13/06/2023, 20:04 - Alice: day first, so this file is D/M\n"
            "06/13/2023, 20:05 - Bob: month 13 in a D/M file\n"
            "continued under the bad date\n"
            "14/06/2023, 09:00 - Carol: \n"
            "14/06/2023, 09:01 - Carol:\n"
            "but the text comes on the next line\n"
            "14/06/2023, 09:02 - Dave: caf\xe9\n"
            "a continuation after the undecodable line\n"
            '14/06/2023, 09:03 - Alice changed the subject from "plans" to "Trip: day 2"\n'
            "14/06/2023, 09:04 - Alice: ok\n"
        )
        .encode()
        .replace("caf\xe9".encode(), b"caf\xe9")
    )
    crlf = data.replace(b"\n", b"\r\n")
    r_crlf = read_bytes(crlf, "chat.txt", "t")
    assert all(crlf[x.byte_offset :].startswith(x.raw) for x in r_crlf.rejects)
    assert r_crlf.rejects[1].raw == lines_of(crlf, 3, 4)
    r = read_bytes(data, "chat.txt", "t")
    assert _turns(r) == _turns(r_crlf)
    assert r.format == "whatsapp"
    assert [(m.line, m.speaker, m.role, m.text) for m in r.messages] == [
        (2, "Alice", "user", "day first, so this file is D/M"),
        (6, "Carol", "user", "but the text comes on the next line"),
        (10, "system", "system", 'Alice changed the subject from "plans" to "Trip: day 2"'),
        (11, "Alice", "user", "ok"),
    ]
    assert _reasons(r) == [
        (1, E.E_LINE_PARSE),
        (3, E.E_TS_PARSE),
        (5, E.E_TEXT_EMPTY),
        (8, E.E_READ_UTF8),
        (9, E.E_LINE_PARSE),
    ]
    lines = data.split(b"\n")
    assert r.rejects[1].raw == lines[2] + b"\n" + lines[3]  # the bad record keeps its continuation
    assert all(data[x.byte_offset :].startswith(x.raw) for x in r.rejects)


# -- QQ --------------------------------------------------------------------------------------------


def test_qq_fixture() -> None:
    data = _fixture("qq.txt")
    r = read_bytes(data, "alice/qq/全部消息记录.txt", "alice")
    assert r.format == "qq"
    d = dt.datetime
    assert [(m.conv_id, m.seq) + t for m, t in zip(r.messages, _turns(r))] == [
        ("小明", 0, "L9", "小明", "user", d(2024, 1, 2, 10), "周末去爬山吗？天气预报说是晴天☀️"),
        ("小明", 1, "L12", "林", "user", d(2024, 1, 2, 10, 1, 12), "好啊！\n我带相机 📷"),
        ("小明", 2, "L16", "小明", "user", d(2024, 1, 2, 10, 5, 40), "[图片]\n这是路线图"),
        ("周末爬山群", 0, "L26", "系统消息", "system", d(2024, 1, 3, 9, 30, 5), "林 邀请 王芳 加入了本群"),
        ("周末爬山群", 1, "L29", "王芳", "user", d(2024, 1, 3, 9, 31), "大家好，I'm Fang 👋\nNice to meet you all."),
        ("周末爬山群", 2, "L35", "林", "user", d(2024, 1, 3, 9, 33), "欢迎欢迎！"),
    ]
    assert _reasons(r) == [(33, E.E_TEXT_EMPTY)]
    rej = r.rejects[0]
    assert rej.raw == "2024-01-03 9:32:18 小明(10001234)".encode() and data[rej.byte_offset :].startswith(rej.raw)


def test_qq_malformed_records() -> None:
    data = (
        "消息记录（此消息记录为文本格式，不支持重新导入）\n\n"
        "text before any message\n"
        "2024-13-02 10:00:00 小明(10001234)\n"
        "月份不对\n"
        "\n"
        "2024-01-02 10:00:00 (10001234)\n"
        "no nickname\n"
        "\n"
        "2024-01-02 10:01:00 小明(10001234)\n"
        "第一段\n"
        "\n"
        "第二段 after a blank line\n"
        "\n"
    ).encode()
    crlf = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    r_crlf = read_bytes(crlf, "chats/qq.txt", "t")
    bad_date = r_crlf.rejects[1]
    assert bad_date.raw == lines_of(crlf, 4, 5) and crlf[bad_date.byte_offset :].startswith(bad_date.raw)
    r = read_bytes(data, "chats/qq.txt", "t")
    assert _turns(r) == _turns(r_crlf)
    assert r.format == "qq"
    # an empty nickname is the account speaking (issue 19: these were E_LINE_PARSE rejects)
    assert [(m.line, m.conv_id, m.speaker, m.text) for m in r.messages] == [
        (7, "chats/qq", "10001234", "no nickname"),
        (10, "chats/qq", "小明", "第一段\n\n第二段 after a blank line"),
    ]
    assert _reasons(r) == [(3, E.E_LINE_PARSE), (4, E.E_TS_PARSE)]
    assert r.rejects[1].raw == "2024-13-02 10:00:00 小明(10001234)\n月份不对".encode()
    banner_only = "消息记录（此消息记录为文本格式，不支持重新导入）\n\n消息对象:小明\n".encode()
    r = read_bytes(banner_only, "qq.txt", "t")
    assert r.format == "qq" and [(x.line, x.reason) for x in r.rejects] == [(0, E.E_NO_MESSAGES)]


# -- ingest ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_new_formats_ingest(name: str, tmp_path: Path) -> None:
    data = _fixture(name)
    res = ingest_bytes(data, f"alice/{name}", "alice", RawStore(tmp_path / "data"))
    read = read_bytes(data, f"alice/{name}", "alice")
    assert res.format == read.format
    assert res.n_input == res.messages.num_rows + res.rejects.num_rows == len(read.messages) + len(read.rejects)
    assert sorted(res.messages.column("text").to_pylist()) == sorted(m.text for m in read.messages)
    assert set(res.messages.column("role").to_pylist()) <= {"user", "assistant", "system", "other"}


# -- fuzzing ---------------------------------------------------------------------------------------


def _body_lines(data: bytes) -> list[tuple[int, str | None]]:
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    out = []
    for no, raw in enumerate(body.split(b"\n"), start=1):
        try:
            out.append((no, raw.removesuffix(b"\r").decode("utf-8")))
        except UnicodeDecodeError:
            out.append((no, None))
    return out


def _tavern_records(data: bytes) -> list[int]:
    """Every non-blank line, except a header object on the first non-blank line."""
    records = [(no, s) for no, s in _body_lines(data) if s is None or s.strip()]
    if records and records[0][1] is not None:
        try:
            first = json.loads(records[0][1])
        except (ValueError, RecursionError):
            first = None
        if (
            isinstance(first, dict)
            and "mes" not in first
            and {"user_name", "character_name", "create_date", "chat_metadata"} & set(first)
        ):
            records = records[1:]
    return [no for no, _ in records]


_T_CLOCK = r"\d{1,2}:\d{2}(:\d{2})?(\s?[AaPp]\.?\s?[Mm]\.?)?"
_T_DATE = r"\d{1,2}[/.-]\d{1,2}[/.-](\d{4}|\d{2})"
_T_WA = re.compile(
    rf"^\u200e?(\[{_T_DATE},?\s+{_T_CLOCK}\]"
    rf"|({_T_DATE}|\d{{4}}-\d{{1,2}}-\d{{1,2}}),?\s+{_T_CLOCK}\s[-–]\s)"
)
_T_QQ_HEAD = re.compile(
    r"^\d{4}-\d{1,2}-\d{1,2}\s+\d{1,2}:\d{2}:\d{2}(\s.*)?(\(\d{4,12}\)|<[^<>\s@]+@[^<>\s]+>|<\d{4,15}>)$"
)
_T_QQ_HEADER = re.compile(
    r"^(消息记录[（(]此消息记录为文本格式，?不支持重新导入[）)]|={16,}|(消息分组|消息对象)[:：].*)$"
)


def _grouped_records(data: bytes, starts_record, is_header) -> list[int]:
    """Record-start lines of a multi-line format: a head line, or a stray non-blank line when no record is open."""
    records, open_ = [], False
    for no, s in _body_lines(data):
        if s is None:
            records.append(no)
            open_ = False
        elif is_header(s.strip()):
            open_ = False
        elif starts_record(s):
            records.append(no)
            open_ = True
        elif not open_ and s.strip():
            records.append(no)
    return records


def _whatsapp_records(data: bytes) -> list[int]:
    return _grouped_records(data, lambda s: _T_WA.match(s) is not None, lambda s: False)


def _qq_records(data: bytes) -> list[int]:
    return _grouped_records(
        data, lambda s: _T_QQ_HEAD.match(s.strip()) is not None, lambda s: _T_QQ_HEADER.match(s) is not None
    )


_RECORDS = {"sillytavern_jsonl": _tavern_records, "whatsapp": _whatsapp_records, "qq": _qq_records}


def _check(data: bytes, name: str) -> ReadResult:
    """read_bytes never raises, is deterministic, and conserves the records of the format it detected."""
    r = read_bytes(data, name, "t")
    assert read_bytes(data, name, "t") == r
    assert r.format in FORMATS or r.format == "unknown"
    assert r.messages or r.rejects
    for m in r.messages:
        assert m.text.strip() and m.speaker.strip() and m.format == r.format
        m.text.encode("utf-8")
        assert m.role in {"user", "assistant", "system", "other"}
    if any(x.line == 0 for x in r.rejects):
        assert len(r.rejects) == 1 and not r.messages
        return r
    heads = {"whatsapp": _T_WA, "qq": _T_QQ_HEAD}
    if r.format in heads:  # no message carries another message's header (issue 19: QQ merged 66 of them)
        for m in r.messages:
            assert not any(
                heads[r.format].match(ln.strip() if r.format == "qq" else ln) for ln in m.text.split("\n")[1:]
            ), m.text
    if r.format in _RECORDS:
        got = Counter([m.line for m in r.messages] + [x.line for x in r.rejects])
        assert got == Counter(_RECORDS[r.format](data)), (got, data)
        assert all(c == 1 for c in got.values())
        ids = [(m.conv_id, m.msg_id) for m in r.messages]
        assert len(ids) == len(set(ids))
        assert all(data[x.byte_offset :].startswith(x.raw) for x in r.rejects)  # rejects keep the file's bytes
    return r


def _corrupt(data: bytes, how: int) -> bytes:
    """0: as is; 1: an invalid UTF-8 byte; 2: a CRLF file with a BOM; 3: truncated."""
    if how == 1:
        return data[: len(data) // 2] + b"\xff" + data[len(data) // 2 :]
    if how == 2:
        return b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    if how == 3:
        return data[: max(1, len(data) * 2 // 3)]
    return data


_WORDS = st.sampled_from(["hi", "你好", "周末去爬山吗？", "ok 👍", "multi\nline", "", "  ", "a: b", "🎉"])
_TAVERN_RECORDS = st.one_of(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["Lin", "Seraphina", "", 3, "System"]), "mes": _WORDS | st.sampled_from([None, 5])},
        optional={
            "is_user": st.sampled_from([True, False, "yes"]),
            "is_system": st.sampled_from([True, False, None]),
            "send_date": st.sampled_from(
                [
                    "June 15, 2023 8:04pm",
                    "2023-06-15T20:04:12.345Z",
                    1686859452345,
                    "2023-6-15 @20h 04m 12s 345ms",
                    "garbage",
                    "",
                    None,
                    True,
                ]
            ),
            "swipes": st.lists(_WORDS, max_size=2),
            "swipe_id": st.integers(0, 3),
            "extra": st.sampled_from([{}, {"type": "narrator"}, [], None]),
        },
    ).map(lambda d: json.dumps(d, ensure_ascii=False)),
    st.sampled_from(
        ["{broken", "[]", "null", "", "  ", '"str"', '{"user_name": "Lin", "character_name": "S", "chat_metadata": {}}']
    ),
)
_TAVERN_HEADER = st.sampled_from(
    [
        '{"user_name": "Lin", "character_name": "Seraphina", "create_date": "2023-6-15 @20h 04m 12s 345ms", '
        '"chat_metadata": {}}',
        '{"chat_metadata": {"integrity": "x"}, "user_name": "unused", "character_name": "unused"}',
        "",
    ]
)


@given(_TAVERN_HEADER, st.lists(_TAVERN_RECORDS, max_size=12), st.integers(0, 3))
@FUZZ
def test_fuzz_sillytavern_conserves_records(header: str, records: list[str], how: int) -> None:
    data = _corrupt("\n".join([header, *records]).encode(), how)
    if data.strip():
        _check(data, "chat.jsonl")


_CG_KINDS = st.sampled_from(["ok", "ok", "hidden", "empty", "bad_shape", "bad_ts", "image"])


def _cg_node(nid: str, parent: str, kind: str, i: int) -> dict:
    if kind == "hidden":
        return _node(nid, parent, "system", "secret", metadata={"is_visually_hidden_from_conversation": True})
    if kind == "empty":
        return _node(nid, parent, "system", "")
    if kind == "bad_shape":
        return {"id": nid, "message": {"author": None, "content": []}, "parent": parent, "children": []}
    if kind == "bad_ts":
        return _node(nid, parent, "user", f"turn {i}", t="not a time")
    if kind == "image":
        node = _node(nid, parent, "user", f"look {i}")
        node["message"]["content"] = {
            "content_type": "multimodal_text",
            "parts": [{"content_type": "image_asset_pointer"}, f"look {i}"],
        }
        return node
    return _node(nid, parent, "assistant" if i % 2 else "user", f"turn {i} 中文 🎉")


@given(
    st.lists(
        st.tuples(st.lists(_CG_KINDS, min_size=1, max_size=6), st.integers(0, 2), st.booleans()), min_size=1, max_size=4
    ),
    st.integers(0, 3),
    st.integers(0, 10**6),
)
@FUZZ
def test_fuzz_chatgpt_conserves_records(convs: list[tuple[list[str], int, bool]], how: int, cut: int) -> None:
    doc, expected = [], Counter()
    for c, (kinds, branches, broken) in enumerate(convs):
        nodes = [_node(f"{c}-root", None, None)]
        for i, kind in enumerate(kinds):
            nodes.append(_cg_node(f"{c}-{i}", nodes[-1]["id"], kind, i))
        current = nodes[-1]["id"]
        for j in range(branches):  # regenerations hang off the branch; they are neither turns nor rejects
            nodes.append(_node(f"{c}-alt{j}", nodes[1 + j % len(kinds)]["id"], "assistant", "an older answer"))
        conv = _conv(f"conv-{c}", nodes, current=current)
        if broken:
            conv["current_node"] = "missing"
            expected[E.E_JSON_SHAPE] += 1
        else:
            expected["message"] += sum(k in ("ok", "image") for k in kinds)
            expected[E.E_JSON_SHAPE] += kinds.count("bad_shape")
            expected[E.E_TS_PARSE] += kinds.count("bad_ts")
        doc.append(conv)
    data = json.dumps(doc, ensure_ascii=False).encode()
    r = _check(data, "conversations.json")
    if sum(expected.values()) == 0:
        assert [x.reason for x in r.rejects] == [E.E_NO_MESSAGES]
    else:
        assert Counter(["message"] * len(r.messages) + [x.reason for x in r.rejects]) == expected
        lines = [m.line for m in r.messages] + [x.line for x in r.rejects]
        assert len(lines) == len(set(lines))
    assert not any(m.msg_id.startswith(tuple(f"{c}-alt" for c in range(len(convs)))) for m in r.messages)
    # damage: never raises; what is kept of a truncated export is a prefix of the whole one's turns
    damaged = _corrupt(data, how)
    if how == 3:
        damaged = data[: cut % len(data)] or data[:1]
    d = _check(damaged, "conversations.json")
    if how == 3 and d.format == "chatgpt_json":
        assert _turns(d) == _turns(r)[: len(d.messages)]


_WA_HEADS = st.sampled_from(
    [
        "[15/06/2023, 20:04:12] ",
        "\u200e[15/06/2023, 20:04:13] ",
        "[01/02/2023, 10:00:00] ",
        "15/06/2023, 20:04 - ",
        f"6/15/23, 8:04{NNBSP}PM - ",
        "1/2/24, 10:00 AM - ",
        "15.06.23, 20:04 - ",
        "2023-06-15 20:04 - ",
        "31/02/2023, 10:00 - ",
        "[6/13/23, 9:00:00 AM] ",
        "02/13/2023, 10:00 - ",
    ]
)
_WA_RESTS = st.sampled_from(
    [
        "Alice: hi",
        "王芳: 好啊！",
        "~\u202fCarol: 😊",
        "Bob: \u200eimage omitted",
        "Bob: \u200e<attached: 0001-PHOTO.jpg>",
        "Group: \u200eAlice added Bob",
        "Messages and calls are end-to-end encrypted.",
        "Alice: ",
        "",
        "Wandergruppe: \u200eLeon hat Mia hinzugefügt",
        "Leon: \u200eBild weggelassen",
        "Mia: <Medien ausgeschlossen>",
        "Leon hat Mia hinzugefügt",
        "Mia: \u200eDiese Nachricht wurde gelöscht.",
        'Alice changed the subject to "a: b"',
        "Bob added Carol",
    ]
)
_WA_LINES = st.one_of(
    st.tuples(_WA_HEADS, _WA_RESTS).map("".join),
    st.sampled_from(["continued line", "", "   ", "- bullet", "需要带午饭吗？", "http://x.y: z"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20),
)


@given(st.tuples(_WA_HEADS, _WA_RESTS).map("".join), st.lists(_WA_LINES, max_size=14), st.integers(0, 3))
@FUZZ
def test_fuzz_whatsapp_conserves_records(first: str, lines: list[str], how: int) -> None:
    data = _corrupt("\n".join([first, *lines]).encode(), how)
    _check(data, "chat.txt")


_QQ_LINES = st.one_of(
    st.sampled_from(
        [
            "2024-01-02 10:00:00 小明(10001234)",
            "2024-1-2 9:44:19 张三<zhangsan@example.com>",
            "2016-07-19 15:27:19 大数据-李雪<lixue@example.com>",
            "2016-07-19 15:28:02 大数据 - 张伟<13800000000>",
            "2016-07-19 23:51:24 (747150918)",
            "会议室在几楼？\r我第一次来。",
            "2024-01-03 9:30:05 系统消息(10000)",
            "2024-13-02 10:00:00 小明(10001234)",
            "2024-01-02 10:00:00 (12345)",
            "=" * 64,
            "消息分组:我的好友",
            "消息对象:小明",
            "消息对象:",
            "消息记录（此消息记录为文本格式，不支持重新导入）",
        ]
    ),
    st.sampled_from(["周末去爬山吗？", "[图片]", "I'm in 👍", "", "", "  "]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20),
)


@given(st.lists(_QQ_LINES, min_size=1, max_size=16), st.integers(0, 3))
@FUZZ
def test_fuzz_qq_conserves_records(lines: list[str], how: int) -> None:
    data = _corrupt("\n".join(["消息记录（此消息记录为文本格式，不支持重新导入）", *lines]).encode(), how)
    _check(data, "qq.txt")
