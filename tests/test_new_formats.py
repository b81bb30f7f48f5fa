"""The formats added for issue 19 — Telegram, Discord (JSON, CSV), Claude.ai, LINE, Messenger, WeChat CSV: fixtures
copied in shape from each exporter's documentation or a maintained parser's tests, damaged variants, and a
conservation fuzzer per format (messages + rejects = input records, never raising, same bytes → same result,
no message carrying another message's header)."""

from __future__ import annotations

import csv
import datetime as dt
import io
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
from raw_store.formats.messenger_json import fix_mojibake
from raw_store.ingest import ingest_bytes
from raw_store.readers import FORMATS, ReadResult, detect_format, read_bytes

FIXTURES = Path(__file__).parent / "fixtures" / "raw"
FUZZ = fuzz_settings(60)
d = dt.datetime
NEW = {
    "telegram_result.json": "telegram_json",
    "discord_export.json": "discord_json",
    "discord_export.csv": "discord_csv",
    "claude_conversations.json": "claude_json",
    "line_chat_en.txt": "line_txt",
    "line_chat_zh.txt": "line_txt",
    "line_chat_ja.txt": "line_txt",
    "messenger_message_1.json": "messenger_json",
    "wechat_msg.csv": "wechat_csv",
    "wechat_pywxdump.csv": "wechat_csv",
}


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _read(name: str) -> ReadResult:
    return read_bytes(_fixture(name), f"alice/{name}", "alice")


def _turns(r: ReadResult) -> list[tuple]:
    return [(m.line, m.speaker, m.role, m.ts, m.text) for m in r.messages]


def _reasons(r: ReadResult) -> list[tuple[int, str]]:
    return [(x.line, x.reason) for x in r.rejects]


# -- registry --------------------------------------------------------------------------------------


def test_every_format_is_registered_documented_and_small() -> None:
    import raw_store.readers as readers
    from raw_store.formats.registry import REGISTRY, Registry

    readme = (Path(__file__).parent.parent / "README.md").read_text("utf-8")
    assert len(FORMATS) >= 13 and FORMATS == REGISTRY.names
    for fmt in REGISTRY:
        assert fmt.kind in ("lines", "document") and fmt.record.strip()
        assert f"  {fmt.name} " in readers.__doc__, fmt.name  # what a record is, per format
        assert f"| `{fmt.name}` |" in readme, fmt.name  # the README's Input formats table
        module = Path(__file__).parent.parent / "raw_store" / "formats" / f"{fmt.name}.py"
        assert len(module.read_text("utf-8").splitlines()) <= 600
    with pytest.raises(ValueError):
        Registry([REGISTRY["qq"], REGISTRY["qq"]])


# -- detection and ingest --------------------------------------------------------------------------


@pytest.mark.parametrize("fixture, fmt", sorted(NEW.items()))
@pytest.mark.parametrize("name", ["original", "renamed.dat", "renamed.txt", "renamed.json"])
def test_new_fixtures_detected_from_content(fixture: str, fmt: str, name: str) -> None:
    assert fmt in FORMATS
    assert detect_format(_fixture(fixture), fixture if name == "original" else name) == fmt


@pytest.mark.parametrize("fixture", sorted(NEW))
def test_new_fixtures_ingest_and_conserve(fixture: str, tmp_path: Path) -> None:
    res = ingest_bytes(_fixture(fixture), f"alice/{fixture}", "alice", RawStore(tmp_path / "data"))
    read = _read(fixture)
    assert res.format == NEW[fixture]
    assert res.n_input == res.messages.num_rows + res.rejects.num_rows == len(read.messages) + len(read.rejects)
    assert set(res.messages.column("role").to_pylist()) <= {"user", "assistant", "system", "other"}
    assert all("\r" not in t for t in res.messages.column("text").to_pylist())


# -- Telegram --------------------------------------------------------------------------------------


def test_telegram_full_export() -> None:
    r = _read("telegram_result.json")
    assert r.format == "telegram_json"
    assert {(m.conv_id, m.seq) for m in r.messages if m.msg_id == "101"} == {("5550002", 0)}
    assert {m.conv_id for m in r.messages} == {"5550002", "1500000001"}
    utc = d(2023, 6, 15, 18, 4, 12)  # date_unixtime (UTC), not the exporting machine's local "date"
    assert _turns(r) == [
        (1, "王芳", "user", utc, "周末去爬山吗？"),
        (2, "Lin", "user", d(2023, 6, 15, 18, 5, 1), "好啊！ Check https://example.org/trail first 🥾"),
        (3, "王芳", "user", d(2023, 6, 15, 18, 6, 30), "[photo]"),
        (4, "王芳", "user", d(2023, 6, 15, 18, 6, 45), "[photo]\n这是路线图"),
        (5, "Lin", "user", d(2023, 6, 15, 18, 7, 10), "[sticker 👍]"),
        (6, "system", "system", d(2023, 6, 15, 18, 9), "Lin: phone_call duration_seconds=95"),
        (7, "王芳", "user", d(2023, 6, 15, 18, 11, 2), "[voice message]"),
        (8, "Lin", "user", d(2023, 6, 15, 18, 12), "Plan:\nmeet at 7, @wangfang"),
        (9, "system", "system", d(2023, 6, 16, 9), "Lin: create_group Lin, 王芳 title=周末爬山群 Weekend hikers"),
        (10, "system", "system", d(2023, 6, 16, 9, 0, 30), "Lin: invite_members Carol, Bob"),
        (11, "Carol", "user", d(2023, 6, 16, 9, 1, 10), "Hi all! Saturday at 7?"),
        (12, "user5550009", "user", d(2023, 6, 16, 9, 2), "(a message from a deleted account)"),
        (13, "Bob", "user", d(2023, 6, 16, 9, 3, 15), "[poll: Which trail?]"),
        (14, "system", "system", d(2023, 6, 16, 9, 4), "Carol: pin_message message_id=205"),
        (16, "王芳", "user", d(2023, 6, 16, 9, 6, 40), "带上水和防晒霜 ☀️"),
    ]
    assert _reasons(r) == [(15, E.E_TEXT_EMPTY)]  # a forward with neither text nor media


def test_telegram_single_chat_and_local_dates() -> None:
    chat = {
        "name": "Bob",
        "type": "personal_chat",
        "id": 700,
        "messages": [
            {
                "id": 1,
                "type": "service",
                "date": "2019-07-05T16:55:32",
                "actor": "Bob",
                "actor_id": "user700",
                "action": "joined_telegram",
                "text": "",
                "text_entities": [],
            },
            {
                "id": 2,
                "type": "message",
                "date": "2019-07-12T16:55:32",
                "from": "Bob",
                "from_id": "user700",
                "text": [{"type": "link", "text": "https://example.org"}, " 👀"],
                "text_entities": [{"type": "link", "text": "https://example.org"}, {"type": "plain", "text": " 👀"}],
            },
            {"id": 3, "type": "message", "date": "not a date", "from": "Bob", "from_id": "user700", "text": "x"},
            {"id": 4, "type": "message", "date": "2019-07-12T17:00:00", "from": "Bob", "text": {"bad": "shape"}},
        ],
    }
    r = read_bytes(json.dumps(chat, indent=1).encode(), "result.json", "t")
    assert [(m.conv_id, m.msg_id, m.role, m.ts, m.text) for m in r.messages] == [
        ("700", "1", "system", d(2019, 7, 5, 16, 55, 32), "Bob: joined_telegram"),
        ("700", "2", "user", d(2019, 7, 12, 16, 55, 32), "https://example.org 👀"),
    ]
    assert _reasons(r) == [(3, E.E_TS_PARSE), (4, E.E_JSON_SHAPE)]


def test_damaged_telegram_export_is_one_json_parse_reject() -> None:
    data = _fixture("telegram_result.json")[:3000]
    r = read_bytes(data, "result.json", "t")
    assert r.format == "telegram_json" and [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_JSON_PARSE, data)]


# -- Discord ---------------------------------------------------------------------------------------


def test_discord_json() -> None:
    r = _read("discord_export.json")
    assert {m.conv_id for m in r.messages} == {"900000000000000100"}
    assert _turns(r) == [
        (1, "system", "system", d(2023, 6, 15, 18, 0, 3, 120000), "carol_b: Joined the server."),
        (2, "Lin", "user", d(2023, 6, 15, 18, 4, 12, 345000), "Saturday hike to 香山? Start 7:00 🥾"),
        (3, "王芳", "user", d(2023, 6, 15, 18, 5, 40, 1000), "好啊！我带地图。"),
        (4, "王芳", "user", d(2023, 6, 15, 18, 6, 2, 500000), "[attachment: trail-map.png]"),
        (5, "system", "system", d(2023, 6, 15, 18, 6, 30), "Lin: Pinned a message."),
        (
            6,
            "TrailBot",
            "other",
            d(2023, 6, 15, 18, 7),
            "Forecast for Saturday: sunny, 24°C\n[link preview: Beijing weather]",
        ),
        (7, "carol_b", "user", d(2023, 6, 15, 18, 8, 11, 900000), "I'm in!\nCan I bring my dog? 🐕"),
        (8, "Lin", "user", d(2023, 6, 15, 18, 9), "[sticker: Wave]"),
        (10, "system", "system", d(2023, 6, 15, 18, 10), "王芳: Started a thread."),
    ]
    assert [m.msg_id for m in r.messages][:2] == ["1110000000000000001", "1110000000000000002"]
    assert _reasons(r) == [(9, E.E_TEXT_EMPTY)]


def test_discord_csv() -> None:
    data = _fixture("discord_export.csv")
    r = read_bytes(data, "alice/chats/saturday-hike.csv", "alice")
    assert {m.conv_id for m in r.messages} == {"chats/saturday-hike"}
    assert _turns(r) == [
        (2, "lin.hikes", "user", d(2023, 6, 15, 18, 4, 12, 345000), "Saturday hike to 香山? Start 7:00 🥾"),
        (3, "wangfang", "user", d(2023, 6, 15, 18, 5, 40, 1000), "好啊！我带地图。"),
        (
            4,
            "wangfang",
            "user",
            d(2023, 6, 15, 18, 6, 2, 500000),
            "[attachment: trail-map.png]\n[attachment: gpx-track.gpx]",
        ),
        (
            5,
            "carol_b",
            "user",
            d(2023, 6, 15, 18, 8, 11, 900000),
            "I'm in!\nCan I bring my dog? 🐕\nHe's \"very\" friendly.",
        ),
        (9, "lin.hikes", "user", d(2023, 6, 16, 9, 15), "Dogs welcome — bring water for him"),
    ]
    assert _reasons(r) == [(8, E.E_TEXT_EMPTY), (10, E.E_TS_PARSE)]
    for x in r.rejects:
        assert data[x.byte_offset : x.byte_offset + len(x.raw)] == x.raw and x.raw.startswith(b'"310000')


def test_discord_csv_old_date_style_and_broken_quote() -> None:
    head = "AuthorID,Author,Date,Content,Attachments,Reactions\n"
    rows = [
        '"310000000000000001","Ann","17-Jan-23 07:33 PM","hello","",""',
        '"310000000000000002","Bo","17-Jan-23 07:34 PM","unclosed, "quote","",""',
        '"310000000000000003","Cy","17-Jan-23 07:35 PM","next row is safe","",""',
    ]
    r = read_bytes((head + "\n".join(rows) + "\n").encode(), "d.csv", "t")
    assert [(m.line, m.speaker, m.ts) for m in r.messages] == [
        (2, "Ann", d(2023, 1, 17, 19, 33)),
        (4, "Cy", d(2023, 1, 17, 19, 35)),
    ]
    assert _reasons(r) == [(3, E.E_LINE_PARSE)]


# -- Claude.ai -------------------------------------------------------------------------------------


def test_claude_conversations() -> None:
    r = _read("claude_conversations.json")
    c1, c3 = "5b1f0a3e-0001-4c1d-9a53-1a2b3c4d5e01", "5b1f0a3e-0003-4c1d-9a53-1a2b3c4d5e03"
    assert [(m.conv_id, m.seq) for m in r.messages] == [(c1, 0), (c1, 1), (c1, 2), (c1, 3), (c3, 0)]
    assert _turns(r) == [
        (1, "user", "user", d(2024, 5, 3, 8, 12, 41, 1233), "What should I pack for a day hike? 我们周六去香山。"),
        (
            2,
            "assistant",
            "assistant",
            d(2024, 5, 3, 8, 12, 55, 734112),
            "For a day hike on 香山 bring:\n- 2 L of water\n- sunscreen\n- a light jacket\n\n"
            "Saturday looks sunny, so add a hat.",
        ),  # text blocks of `content` when `text` is empty; tool_use skipped
        (
            3,
            "user",
            "user",
            d(2024, 5, 3, 8, 15, 2, 100000),
            "[attachment: route.txt]\n[file: map.png]\nHere is the route, is it too long?",
        ),
        (
            4,
            "assistant",
            "assistant",
            d(2024, 5, 3, 8, 15, 20, 900000),
            "9 km with about 500 m of climbing is fine for most people: plan 4 hours.",
        ),
        (6, "user", "user", d(2024, 5, 5, 21, 30, 5), "把“see you at the trailhead”翻译成中文"),
    ]
    assert r.messages[0].msg_id == "c0a80001-0001-4000-8000-000000000001"
    assert _reasons(r) == [(5, E.E_TEXT_EMPTY), (7, E.E_TS_PARSE)]


# -- LINE ------------------------------------------------------------------------------------------


def test_line_english_group() -> None:
    r = _read("line_chat_en.txt")
    assert {m.conv_id for m in r.messages} == {"line_chat_en"}
    day = d(2023, 11, 6)
    assert _turns(r) == [
        (5, "Lin", "user", day.replace(hour=20, minute=4), "Saturday hike to 香山? Start 7:00 🥾"),
        (6, "王芳", "user", day.replace(hour=20, minute=5), "好啊！"),
        (7, "王芳", "user", day.replace(hour=20, minute=5), "I'll bring the map.\nAnd snacks.\n\nWho else is in?"),
        (11, "system", "system", day.replace(hour=20, minute=6), "Carol joined the group."),
        (12, "Carol", "user", day.replace(hour=20, minute=7), "[Sticker]"),
        (13, "Carol", "user", day.replace(hour=20, minute=8), "Can I bring my dog?"),
        (14, "Lin", "user", day.replace(hour=20, minute=9), "[Photo]"),
        (15, "system", "system", day.replace(hour=20, minute=10), "Lin unsent a message."),
        (18, "王芳", "user", d(2023, 11, 7, 8, 30), 'He said "sure"\ndogs welcome'),
    ]
    assert _reasons(r) == [(20, E.E_TEXT_EMPTY), (21, E.E_TS_PARSE)]


def test_line_chinese_and_japanese_headers() -> None:
    r = _read("line_chat_zh.txt")
    assert (
        _turns(r)
        == [
            (5, "小林", "user", d(2023, 6, 11, 20, 4), "明天几点出发？"),
            (6, "Yuki", "user", d(2023, 6, 11, 20, 5), "7点，东门见。Bring water!"),
            (7, "小林", "user", d(2023, 6, 11, 20, 6), "[照片]"),
            (8, "Yuki", "user", d(2023, 6, 11, 20, 7), "好的\n我带相机"),
            (12, "小林", "user", d(2023, 6, 12, 6, 58), "我到了"),
            (13, "system", "system", d(2023, 6, 12, 7, 1), "小林撤回了一条消息"),
        ]
        and r.rejects == []
    )
    r = _read("line_chat_ja.txt")
    assert [(m.speaker, m.ts, m.text) for m in r.messages] == [
        ("ゆき", d(2023, 6, 11, 20, 4), "明日の山登り、楽しみ！"),
        ("Lin", d(2023, 6, 11, 20, 5), "Me too 😊"),
        ("ゆき", d(2023, 6, 11, 20, 6), "[スタンプ]"),
    ] and r.rejects == []


def test_line_unclosed_quote_never_swallows_the_next_message() -> None:
    data = 'Sun, 06/11/2023\n20:04\tAnn\t"opened a quote\nnever closed\n20:05\tBo\tnext\n2023.06.12 Monday\n7:00PM\tBo\tpm\n'
    r = read_bytes(data.encode(), "chat.txt", "t")
    assert r.format == "line_txt"
    assert [(m.speaker, m.ts, m.text) for m in r.messages] == [
        ("Ann", d(2023, 6, 11, 20, 4), '"opened a quote\nnever closed'),
        ("Bo", d(2023, 6, 11, 20, 5), "next"),
        ("Bo", d(2023, 6, 12, 19), "pm"),
    ]


# -- Messenger -------------------------------------------------------------------------------------


def test_messenger_thread_oldest_first_without_mojibake() -> None:
    r = _read("messenger_message_1.json")
    assert {m.conv_id for m in r.messages} == {"inbox/zoemartin_10155"} and r.rejects == []
    assert [m.seq for m in r.messages] == list(range(8))
    assert _turns(r) == [
        (8, "Lin Chen", "user", d(2023, 6, 15, 18, 8, 20), "[sticker]"),
        (7, "system", "system", d(2023, 6, 15, 18, 10), "Lin Chen added Zoë Martín to the group."),
        (6, "Zoë Martín", "user", d(2023, 6, 15, 18, 15), "Shall we hike Xiangshan on Saturday? ¿Vamos?"),
        (5, "Lin Chen", "user", d(2023, 6, 15, 18, 18), "好啊！Is the café at the gate open that early?"),
        (4, "Zoë Martín", "user", d(2023, 6, 15, 18, 20), "[photo]"),
        (3, "Lin Chen", "user", d(2023, 6, 15, 18, 22), "[unsent message]"),
        (
            2,
            "Zoë Martín",
            "user",
            d(2023, 6, 15, 18, 23),
            "[share: https://example.org/trails/xiangshan]\nXiangshan loop — 9 km\nZoë Martín sent a link.",
        ),
        (1, "Lin Chen", "user", d(2023, 6, 15, 18, 25), "See you at 7 then 👋"),
    ]
    assert r.messages[0].msg_id == "messenger_message_1#8"


@pytest.mark.parametrize("text", ["café", "Zoë Martín", "你好", "👋🏽", "plain ascii", "ÿ"])
def test_fix_mojibake_round_trips(text: str) -> None:
    assert fix_mojibake(text.encode("utf-8").decode("latin-1")) == text
    assert fix_mojibake(text) == text  # already-right text (real accents, CJK) stays


# -- WeChat ----------------------------------------------------------------------------------------


def test_wechat_wechatmsg_csv() -> None:
    r = _read("wechat_msg.csv")
    assert {m.conv_id for m in r.messages} == {"wechat_msg"}
    assert _turns(r) == [
        (2, "system", "system", d(2023, 6, 15, 18, 4), "你已添加了王芳，现在可以开始聊天了。"),
        (3, "芳芳", "user", d(2023, 6, 15, 18, 4, 12), "周末去爬山吗？天气预报说是晴天"),  # Remark before NickName
        (4, "林", "user", d(2023, 6, 15, 18, 5, 1), "好啊！\n我带相机，you bring snacks?"),
        (6, "芳芳", "user", d(2023, 6, 15, 18, 6, 30), "[image]"),
        (7, "林", "user", d(2023, 6, 15, 18, 7, 10), "[sticker]"),
        (8, "芳芳", "user", d(2023, 6, 15, 18, 11, 2), "[voice]"),
        (9, "芳芳", "user", d(2023, 6, 15, 18, 12), "对，七点在东门集合"),  # a quote reply's own text
        (10, "林", "user", d(2023, 6, 15, 18, 13, 20), "[link]"),  # an app message's XML is not text
        (11, "system", "system", d(2023, 6, 15, 18, 15), '"王芳" 撤回了一条消息'),
    ]
    assert _reasons(r) == [(12, E.E_TEXT_EMPTY)]


def test_wechat_pywxdump_csv() -> None:
    r = _read("wechat_pywxdump.csv")
    assert _turns(r) == [
        (2, "system", "system", d(2023, 6, 16, 9), '"林"邀请"王芳"加入了群聊'),
        (3, "wxid_carol0003", "user", d(2023, 6, 16, 9, 1, 10), "Hi all! Saturday at 7?"),
        (4, "wxid_lin000001", "user", d(2023, 6, 16, 9, 2), "好的，东门见"),
        (5, "wxid_wangfang02", "user", d(2023, 6, 16, 9, 3, 15), "[image]"),
        (6, "wxid_carol0003", "user", d(2023, 6, 16, 9, 3, 40), "[sticker]"),
        (7, "wxid_wangfang02", "user", d(2023, 6, 16, 9, 6, 40), "带上水\n和防晒霜"),
    ]
    assert _reasons(r) == [(9, E.E_TS_PARSE)]


def test_wechat_csv_saved_as_gbk() -> None:
    """Excel on a Chinese Windows saves CSV as GBK: read in that encoding, not rejected whole."""
    text = _fixture("wechat_pywxdump.csv").decode("utf-8")
    r = read_bytes(text.encode("gbk"), "wechat.csv", "t")
    assert r.format == "wechat_csv" and _turns(r) == _turns(_read("wechat_pywxdump.csv"))


# -- conservation fuzzers --------------------------------------------------------------------------


def _check(data: bytes, name: str, fmt: str, records: list[int], head: re.Pattern | None = None) -> ReadResult:
    """Never raises, same bytes → same result; when `fmt` was read without a whole-file reject, the message and
    reject lines are exactly the `records`; no message's continuation line is another record's header."""
    r = read_bytes(data, name, "t")
    assert read_bytes(data, name, "t") == r
    assert r.messages or r.rejects
    for m in r.messages:
        assert m.text.strip() and m.speaker.strip() and "\r" not in m.text and m.format == r.format
        assert m.role in {"user", "assistant", "system", "other"}
        m.text.encode("utf-8")
        if head is not None:
            assert not any(head.match(ln) for ln in m.text.split("\n")[1:]), m.text
    if any(x.line == 0 for x in r.rejects):
        assert len(r.rejects) == 1 and not r.messages
        return r
    assert r.format == fmt
    got = Counter([m.line for m in r.messages] + [x.line for x in r.rejects])
    assert got == Counter(records), (got, records)
    ids = [(m.conv_id, m.msg_id) for m in r.messages]
    assert len(ids) == len(set(ids))
    assert all(x.byte_offset == 0 or data[x.byte_offset :].startswith(x.raw) for x in r.rejects)
    return r


_WORDS = st.sampled_from(
    ["hi", "你好", "周末去爬山吗？", "ok 👍", "multi\nline", "", "  ", "a: b", "🎉", 'say "hi"', "x,y", "line\r\nbreak"]
)
_TS_ISO = st.sampled_from(["2023-06-15T20:04:12.345+02:00", "2023-06-15T20:04:12Z", "garbage", "", None, 5])


def _jsonish(draw_value: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(draw_value, st.sampled_from([None, 3, [], {}, "text"]))


_TG_MESSAGES = st.fixed_dictionaries(
    {"id": st.integers(1, 10**6), "type": st.sampled_from(["message", "service", "message"])},
    optional={
        "date": st.sampled_from(["2023-06-15T20:04:12", "not a date", ""]),
        "date_unixtime": st.sampled_from(["1686852252", "x"]),
        "from": _jsonish(_WORDS),
        "from_id": st.sampled_from(["user1", "channel2", 5]),
        "actor": _WORDS,
        "action": st.sampled_from(["invite_members", "pin_message", 7]),
        "text": st.one_of(
            _WORDS,
            st.lists(
                st.one_of(_WORDS, st.fixed_dictionaries({"type": st.sampled_from(["bold", "link"]), "text": _WORDS})),
                max_size=3,
            ),
            st.just({"x": 1}),
        ),
        "photo": st.just("photos/p.jpg"),
        "media_type": st.sampled_from(["sticker", "voice_message", "weird"]),
        "sticker_emoji": st.sampled_from(["👍", ""]),
        "poll": st.just({"question": "Which?"}),
    },
) | st.sampled_from([None, 3, "str", []])


@given(st.lists(st.lists(_TG_MESSAGES, max_size=6), min_size=1, max_size=3), st.booleans(), st.sampled_from([1, None]))
@FUZZ
def test_fuzz_telegram_conserves_records(chats: list[list], full: bool, indent: int | None) -> None:
    if full:
        doc = {
            "about": "x",
            "chats": {
                "about": "y",
                "list": [
                    {"name": f"c{i}", "type": "private_group", "id": i, "messages": msgs}
                    for i, msgs in enumerate(chats)
                ],
            },
        }
    else:
        doc = {"name": "c", "type": "personal_chat", "id": 1, "messages": chats[0]}
    n = sum(len(m) for m in chats) if full else len(chats[0])
    _check(
        json.dumps(doc, indent=indent, ensure_ascii=False).encode(),
        "result.json",
        "telegram_json",
        list(range(1, n + 1)),
    )


_DISCORD_MESSAGES = st.fixed_dictionaries(
    {
        "id": st.uuids().map(str),
        "type": st.sampled_from(["Default", "Reply", "GuildMemberJoin", "Call", 3]),
        "timestamp": _TS_ISO,
        "content": _jsonish(_WORDS),
        "author": st.one_of(
            st.fixed_dictionaries(
                {"id": st.just("1"), "name": _WORDS}, optional={"nickname": _jsonish(_WORDS), "isBot": st.booleans()}
            ),
            st.sampled_from([None, "x"]),
        ),
    },
    optional={
        "attachments": st.lists(st.fixed_dictionaries({"fileName": _WORDS}), max_size=2),
        "stickers": st.lists(st.fixed_dictionaries({"name": _WORDS}), max_size=1),
        "embeds": st.lists(st.fixed_dictionaries({"title": _WORDS}), max_size=1),
    },
) | st.sampled_from([None, 1, "m"])


@given(st.lists(_DISCORD_MESSAGES, max_size=10), st.sampled_from([2, None]))
@FUZZ
def test_fuzz_discord_json_conserves_records(messages: list, indent: int | None) -> None:
    doc = {
        "guild": {"id": "1", "name": "g"},
        "channel": {"id": "2", "name": "c"},
        "messages": messages,
        "messageCount": len(messages),
    }
    _check(
        json.dumps(doc, indent=indent, ensure_ascii=False).encode(),
        "d.json",
        "discord_json",
        list(range(1, len(messages) + 1)),
    )


_CLAUDE_MESSAGES = st.fixed_dictionaries(
    {
        "uuid": st.uuids().map(str),
        "sender": st.sampled_from(["human", "assistant", "", 4]),
        "text": _jsonish(_WORDS),
        "created_at": _TS_ISO,
    },
    optional={
        "content": st.lists(
            st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_use"]), "text": _WORDS}), max_size=2
        ),
        "attachments": st.lists(st.fixed_dictionaries({"file_name": _WORDS}), max_size=1),
    },
) | st.sampled_from([None, "m"])


@given(st.lists(st.one_of(st.lists(_CLAUDE_MESSAGES, max_size=5), st.none()), min_size=1, max_size=3))
@FUZZ
def test_fuzz_claude_conserves_records(convs: list) -> None:
    doc = [
        {"uuid": f"c{i}", "name": "n", "chat_messages": msgs} if msgs is not None else {"uuid": f"c{i}"}
        for i, msgs in enumerate(convs)
    ]
    if not any(isinstance(c.get("chat_messages"), list) for c in doc):
        doc.append({"uuid": "last", "chat_messages": []})
    n = sum(len(c["chat_messages"]) if isinstance(c.get("chat_messages"), list) else 1 for c in doc)
    r = _check(json.dumps(doc, ensure_ascii=False).encode(), "conversations.json", "claude_json", list(range(1, n + 1)))
    assert n or [x.reason for x in r.rejects] == [E.E_NO_MESSAGES]


_MESSENGER_MESSAGES = st.fixed_dictionaries(
    {
        "sender_name": _jsonish(_WORDS.map(lambda w: w.encode("utf-8").decode("latin-1"))),
        "timestamp_ms": st.one_of(st.integers(1_400_000_000_000, 1_700_000_000_000), st.sampled_from(["x", None])),
    },
    optional={
        "content": _jsonish(_WORDS.map(lambda w: w.encode("utf-8").decode("latin-1"))),
        "photos": st.just([{"uri": "p.jpg"}]),
        "type": st.sampled_from(["Generic", "Subscribe", "Share"]),
        "is_unsent": st.booleans(),
        "share": st.just({"link": "https://x.y"}),
    },
) | st.sampled_from([None, "m"])


@given(st.lists(_MESSENGER_MESSAGES, max_size=10))
@FUZZ
def test_fuzz_messenger_conserves_records(messages: list) -> None:
    doc = {"participants": [{"name": "A"}], "messages": messages, "title": "t", "thread_path": "inbox/t_1"}
    r = _check(
        json.dumps(doc, indent=2).encode(), "message_1.json", "messenger_json", list(range(1, len(messages) + 1))
    )
    assert [m.seq for m in r.messages] == list(range(len(r.messages)))
    assert [m.line for m in r.messages] == sorted((m.line for m in r.messages), reverse=True)  # oldest (last) first


def _csv_rows(rows: list[list[str]]) -> tuple[str, list[int]]:
    """CSV text of `rows` (the first one the header) and the line number each data row starts on."""
    buf, starts, line = io.StringIO(), [], 1
    w = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    for i, row in enumerate(rows):
        before = buf.tell()
        w.writerow(row)
        if i:
            starts.append(line)
        line += buf.getvalue()[before:].count("\n")
    return buf.getvalue(), starts


_CSV_TEXT = st.sampled_from(["hello", "你好，明天见", 'multi\nline "quoted"', "a, b", "", "   ", "🎉"])
_CSV_DATE = st.sampled_from(["2023-06-15T20:04:12.345+02:00", "06/15/2023 8:04 PM", "17-Jan-23 07:33 PM", "garbage"])


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["1234567890", "42"]),
            _CSV_TEXT,
            _CSV_DATE,
            _CSV_TEXT,
            st.sampled_from(["", "https://cdn.example/a/b.png", "https://x/y.gif,https://x/z.jpg"]),
            st.booleans(),
        ),
        max_size=10,
    )
)
@FUZZ
def test_fuzz_discord_csv_conserves_records(rows: list[tuple]) -> None:
    table = [["AuthorID", "Author", "Date", "Content", "Attachments", "Reactions"]]
    table += [[a, au or "x", dt_, c, att, ""] + ([] if ok else ["extra"]) for a, au, dt_, c, att, ok in rows]
    text, starts = _csv_rows(table)
    if rows:
        _check(text.encode(), "d.csv", "discord_csv", starts)


_WECHAT_TYPES = st.sampled_from(["1", "3", "34", "47", "49", "10000", "x"])


@given(
    st.lists(
        st.tuples(
            _WECHAT_TYPES,
            st.sampled_from(["0", "1"]),
            st.sampled_from(["1686852252", "", "soon"]),
            _CSV_TEXT,
            st.sampled_from(["芳芳", ""]),
            st.booleans(),
        ),
        max_size=10,
    ),
    st.booleans(),
)
@FUZZ
def test_fuzz_wechat_csv_conserves_records(rows: list[tuple], bom: bool) -> None:
    table = [
        [
            "localId",
            "TalkerId",
            "Type",
            "SubType",
            "IsSender",
            "CreateTime",
            "Status",
            "StrContent",
            "StrTime",
            "Remark",
            "NickName",
            "Sender",
        ]
    ]
    table += [
        [str(i), "8", t, "0", s, ct, "2", c, "2023-06-15 20:04:12", r, "", "wxid_x"] + ([] if ok else ["?"])
        for i, (t, s, ct, c, r, ok) in enumerate(rows)
    ]
    text, starts = _csv_rows(table)
    if rows:
        _check((b"\xef\xbb\xbf" if bom else b"") + text.encode(), "w.csv", "wechat_csv", starts)


_LINE_HEAD = re.compile(r"^(?:上午|下午|午前|午後)?\s?\d{1,2}:\d{2}(?:\s?[AaPp][Mm])?\t")
_LINE_DATE = re.compile(
    r"^(?:[A-Za-z]{3,9},\s*\d{1,2}/\d{1,2}/\d{4}|\d{4}/\d{1,2}/\d{1,2}\s*(?:[（(][^）)]{1,12}[）)]|周.|星期.)?"
    r"|\d{4}\.\d{1,2}\.\d{1,2}(?:\s+[A-Za-z]+day)?)$"
)
_LINE_LINES = st.one_of(
    st.sampled_from(
        [
            "20:04\tAnn\thello",
            "20:05\tBo\t你好",
            "下午08:06\t小林\t好的",
            "7:00PM\tBo\tpm",
            "20:07\t\tBo joined.",
            '20:08\tAnn\t"quoted start',
            'still quoted"',
            "25:00\tAnn\tbad clock",
            "20:09\tAnn\t",
            "Sun, 06/11/2023",
            "2023/6/12周一",
            "2023.06.13 Tuesday",
            "2023/02/30(Thu)",
            "",
            "  ",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=15),
)


def _line_records(data: bytes) -> list[int]:
    """A message line starts a record; a stray non-blank line before any message is one; date lines and the
    `[LINE]` / `Saved on:` lines among the first three are header."""
    records, opened = [], False
    text = data.decode("utf-8").removeprefix("\ufeff")
    for no, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if no <= 3 and (line.startswith("[LINE]") or re.match(r"^(?:Saved on|保存日時|保存日期)\s*[:：]", line)):
            opened = False
        elif _LINE_DATE.match(line.strip()):
            opened = False
        elif _LINE_HEAD.match(line):
            records.append(no)
            opened = True
        elif not opened and line.strip():
            records.append(no)
    return records


@given(
    st.sampled_from(
        [
            "[LINE] Chat history with Ann\nSaved on: 2023/06/11 21:04\n\nSun, 06/11/2023",
            "[LINE] 与小林的聊天记录\n保存日期：2023/06/11 21:04\n\n2023/06/11周日",
        ]
    ),
    st.lists(_LINE_LINES, max_size=14),
    st.booleans(),
)
@FUZZ
def test_fuzz_line_conserves_records(header: str, lines: list[str], crlf: bool) -> None:
    text = "\n".join([header, *lines])
    data = (text.replace("\n", "\r\n") if crlf else text).encode()
    r = read_bytes(data, "chat.txt", "t")
    if r.format == "line_txt":
        _check(data, "chat.txt", "line_txt", _line_records(data), head=_LINE_HEAD)
