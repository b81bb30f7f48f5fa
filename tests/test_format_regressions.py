"""Regressions of issue 19, found by running real exports through memctl: QQ header forms, BOM + CRLF + bare CR,
GBK / UTF-16 files, unknown pretty-printed JSON, ChatGPT without current_node, WhatsApp in other languages."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from raw_store import errors as E
from raw_store.cas import RawStore
from raw_store.ingest import ingest_bytes
from raw_store.readers import ReadResult, detect_format, read_bytes

FIXTURES = Path(__file__).parent / "fixtures" / "raw"
LRM = "\u200e"
d = dt.datetime


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _turns(r: ReadResult) -> list[tuple]:
    return [(m.line, m.speaker, m.role, m.ts, m.text) for m in r.messages]


# -- QQ --------------------------------------------------------------------------------------------

QQ_GROUP = [
    (9, "大数据-李雪", "user", d(2016, 7, 19, 15, 27, 19), "大家好，今天下午的分享会改到三点。"),
    (12, "大数据 - 张伟", "user", d(2016, 7, 19, 15, 28, 2), "收到，I'll bring the slides."),
    (15, "王芳", "user", d(2016, 7, 19, 15, 30, 45), "会议室在几楼？\n我第一次来。"),  # a bare CR inside
    (18, "系统消息", "system", d(2016, 7, 19, 15, 31, 10), "大数据-李雪 修改了群名片"),
    (21, "大数据-李雪", "user", d(2016, 7, 19, 15, 33, 27), "三楼 301，出电梯右转。\nSee you there."),
    (25, "747150918", "user", d(2016, 7, 19, 23, 51, 24), "明天的资料发群文件了"),  # empty nickname
    (28, "大数据 - 张伟", "user", d(2016, 7, 20, 9, 2, 5), "[图片]"),
]


@pytest.mark.parametrize("name", ["qq_group.txt", "qq_group_gbk.txt", "qq_group_utf16.txt"])
def test_qq_group_header_forms_in_every_encoding(name: str) -> None:
    """`card-nick<mail>`, `card - nick<number>` and `(number)` headers start messages: none is merged into the
    message before it (66 were, in a real export), none is rejected. BOM + CRLF, GBK and UTF-16 read alike."""
    data = _fixture(name)
    assert detect_format(data, name) == "qq"
    r = read_bytes(data, f"alice/{name}", "alice")
    assert r.format == "qq" and r.rejects == []
    assert _turns(r) == QQ_GROUP
    assert {m.conv_id for m in r.messages} == {"大数据交流群"}
    for m in r.messages:
        assert "\r" not in m.text and "2016-07-" not in m.text  # no raw CR, no other message's header


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_qq_utf16_without_byte_order_mark(codec: str) -> None:
    data = _fixture("qq_group.txt").decode("utf-8-sig").encode(codec)
    assert _turns(read_bytes(data, "qq.txt", "t")) == QQ_GROUP


def test_qq_encodings_cite_the_file_bytes() -> None:
    """A reject in a GBK / UTF-16 file keeps the file's own bytes at their offset; messages are stored as UTF-8
    RawChunks whose raw_refs cite the rendered text exactly."""
    text = _fixture("qq_group.txt").decode("utf-8-sig").replace("2016-07-19 23:51:24", "2016-13-19 23:51:24")
    for codec in ("gbk", "utf-16"):
        data = text.encode(codec)
        r = read_bytes(data, "qq.txt", "t")
        assert [(x.line, x.reason) for x in r.rejects] == [(25, E.E_TS_PARSE)]
        rej = r.rejects[0]
        assert (
            rej.raw.decode("utf-16-le" if codec == "utf-16" else codec)
            == "2016-13-19 23:51:24 (747150918)\r\n明天的资料发群文件了"
        )
        assert data[rej.byte_offset : rej.byte_offset + len(rej.raw)] == rej.raw


def test_qq_gbk_ingest_stores_utf8_chunks_that_cite_exactly(tmp_path: Path) -> None:
    store = RawStore(tmp_path / "data")
    res = ingest_bytes(_fixture("qq_group_gbk.txt"), "alice/qq.txt", "alice", store)
    assert res.format == "qq" and res.n_input == 7 and res.rejects.num_rows == 0
    chunks = {row["id"]: row["text"].encode("utf-8") for row in res.raw_chunks.to_pylist()}
    for row in res.messages.to_pylist():
        for ref in row["raw_refs"]:
            assert chunks[ref["raw_id"]][ref["offset"] : ref["offset"] + ref["length"]].decode("utf-8") in row["text"]


def test_latin1_is_not_guessed_into_mojibake() -> None:
    """Single-byte encodings decode any bytes: a guess would be wrong data that looks right, so it stays a reject."""
    data = "Alice: caf\xe9 cr\xe8me\nBob: na\xefve r\xe9sum\xe9\n".encode("latin-1")
    r = read_bytes(data, "t.txt", "t")
    assert r.messages == [] and [x.reason for x in r.rejects] == [E.E_READ_UTF8]


def test_utf16_without_a_chat_format_stays_a_reject() -> None:
    r = read_bytes("just prose, no speakers\nat all\n".encode("utf-16"), "p.txt", "t")
    assert r.messages == [] and len(r.rejects) == 1 and r.rejects[0].line == 0


# -- unknown JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "Team", "type": "private_group", "events": [{"id": i, "who": "a", "what": "b"} for i in range(40)]},
        [{"ts": "1686859452.000100", "user": "U1", "text": f"hi {i}"} for i in range(40)],
        {"version": 3, "data": {"rows": [[1, 2], [3, 4]]}},
    ],
)
@pytest.mark.parametrize("indent", [2, 4, None])
def test_unknown_json_document_is_one_reject(doc: object, indent: int | None) -> None:
    """Not one E_JSON_PARSE per line (a pretty-printed export became 278 and 990 line rejects)."""
    data = json.dumps(doc, indent=indent).encode()
    r = read_bytes(data, "export.json", "t")
    assert r.format == "unknown" and r.messages == []
    assert [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_FORMAT_UNKNOWN, data)]


def test_truncated_unknown_json_document_is_one_reject() -> None:
    data = json.dumps({"events": [{"id": i, "kind": "x"} for i in range(30)]}, indent=2).encode()[:500]
    r = read_bytes(data, "export.json", "t")
    assert [(x.line, x.reason) for x in r.rejects] == [(0, E.E_FORMAT_UNKNOWN)] and r.messages == []


def test_transcript_with_bracketed_stamps_is_not_a_json_document() -> None:
    data = b"[2024-01-02 10:00] Bob: hi\n[2024-01-02 10:01] Alice: hello\n"
    assert [m.speaker for m in read_bytes(data, "t.txt", "t").messages] == ["Bob", "Alice"]


# -- ChatGPT without current_node ------------------------------------------------------------------


def _node(nid: str, parent: str | None, role: str | None, text: str = "", t: float | None = None) -> dict:
    msg = (
        None
        if role is None
        else {
            "id": nid,
            "author": {"role": role, "name": None},
            "create_time": t,
            "content": {"content_type": "text", "parts": [text]},
            "metadata": {},
        }
    )
    return {"id": nid, "message": msg, "parent": parent, "children": []}


def test_chatgpt_without_current_node_follows_the_newest_leaf() -> None:
    nodes = [
        _node("r", None, None),
        _node("u1", "r", "user", "推荐一本书？", 1.0),
        _node("a-old", "u1", "assistant", "an older answer", 2.0),
        _node("a-new", "u1", "assistant", "《三体》, or The Left Hand of Darkness.", 5.0),
        _node("u2", "a-old", "user", "thanks", 3.0),
    ]
    conv = {"id": "c", "title": "books", "mapping": {n["id"]: n for n in nodes}}
    r = read_bytes(json.dumps([conv], ensure_ascii=False).encode(), "conversations.json", "t")
    assert r.format == "chatgpt_json" and r.rejects == []
    assert [(m.msg_id, m.text) for m in r.messages] == [
        ("u1", "推荐一本书？"),
        ("a-new", "《三体》, or The Left Hand of Darkness."),
    ]


def test_chatgpt_without_current_node_or_times_reads_its_single_path() -> None:
    nodes = [_node("r", None, None), _node("u", "r", "user", "hi"), _node("a", "u", "assistant", "hello")]
    conv = {"id": "c", "mapping": {n["id"]: n for n in nodes}, "current_node": None}
    r = read_bytes(json.dumps(conv).encode(), "one.json", "t")
    assert [(m.msg_id, m.role, m.ts) for m in r.messages] == [("u", "user", None), ("a", "assistant", None)]


# -- WhatsApp in other languages -------------------------------------------------------------------


def test_whatsapp_german_ios_fixture() -> None:
    r = read_bytes(_fixture("whatsapp_ios_de.txt"), "alice/WhatsApp Chat - Wandergruppe.txt", "alice")
    assert r.format == "whatsapp" and r.rejects == []
    assert _turns(r) == [
        (
            1,
            "system",
            "system",
            d(2023, 6, 15, 20, 4, 12),
            "Nachrichten und Anrufe sind Ende-zu-Ende-verschlüsselt. "
            "Niemand außerhalb dieses Chats kann sie lesen oder anhören, nicht einmal WhatsApp.",
        ),
        (2, "system", "system", d(2023, 6, 15, 20, 4, 12), "Leon hat die Gruppe „Wandergruppe Feldberg“ erstellt"),
        (3, "system", "system", d(2023, 6, 15, 20, 4, 30), "Leon hat Mia hinzugefügt"),
        (4, "Leon", "user", d(2023, 6, 15, 20, 5, 1), "Samstag wandern am Feldberg? 🥾"),
        (5, "Mia", "user", d(2023, 6, 15, 20, 6, 45), "Gerne! Ich bringe Brötchen mit.\nUnd Kaffee ☕"),
        (7, "Leon", "user", d(2023, 6, 15, 20, 7, 15), "[image]"),
        (8, "Mia", "user", d(2023, 6, 15, 20, 7, 20), "[sticker]"),
        (9, "Leon", "user", d(2023, 6, 15, 20, 8, 2), "[document: Wanderkarte.pdf • 2 Seiten]"),
        (10, "system", "system", d(2023, 6, 15, 20, 9, 10), "Leon hat Jonas hinzugefügt"),
        (
            11,
            "Jonas",
            "user",
            d(2023, 6, 16, 9, 15, 33),
            "Hallo zusammen! I only speak a little German, 我也会说中文 😊",
        ),
        (12, "Mia", "user", d(2023, 6, 16, 9, 16), "[deleted message]"),
        (13, "system", "system", d(2023, 6, 16, 9, 17, 12), "Leon hat Jonas zum Gruppenadmin gemacht"),
        (14, "Leon", "user", d(2023, 6, 16, 9, 18, 40), "Treffpunkt 8 Uhr am Parkplatz."),
        (15, "system", "system", d(2023, 6, 16, 9, 20, 41), "Jonas hat die Gruppe verlassen."),
    ]


# (language, iOS media placeholder, its note, an iOS group event, Android media line, deleted notice)
LANGUAGES = [
    ("en", "image omitted", "[image]", "Leon added Mia", "<Media omitted>", "This message was deleted"),
    (
        "de",
        "Sticker weggelassen",
        "[sticker]",
        "Leon hat Mia hinzugefügt",
        "<Medien ausgeschlossen>",
        "Diese Nachricht wurde gelöscht.",
    ),
    ("es", "imagen omitida", "[image]", "Leon añadió a Mia", "<Multimedia omitido>", "Se eliminó este mensaje."),
    ("fr", "vidéo absente", "[video]", "Leon a ajouté Mia", "<Médias omis>", "Ce message a été supprimé"),
    ("pt", "figurinha omitida", "[sticker]", "Leon adicionou Mia", "<Mídia oculta>", "Esta mensagem foi apagada"),
    (
        "it",
        "immagine omessa",
        "[image]",
        "Leon ha aggiunto Mia",
        "<Media omessi>",
        "Questo messaggio è stato eliminato",
    ),
    (
        "nl",
        "afbeelding weggelaten",
        "[image]",
        "Leon heeft Mia toegevoegd",
        "<Media weggelaten>",
        "Dit bericht is verwijderd",
    ),
    (
        "ru",
        "изображение отсутствует",
        "[image]",
        "Leon добавил(-а) Mia",
        "<Без медиафайлов>",
        "Данное сообщение удалено",
    ),
    (
        "tr",
        "görüntü dahil edilmedi",
        "[image]",
        "Leon, Mia adlı kişiyi ekledi",
        "<Medya dahil edilmedi>",
        "Bu mesaj silindi",
    ),
    ("zh", "照片已忽略", "[image]", "Leon添加了Mia", "<省略多媒体文件>", "此訊息已刪除"),
    (
        "ja",
        "スタンプは含まれていません",
        "[sticker]",
        "LeonがMiaを追加しました",
        "<メディアなし>",
        "このメッセージは削除されました",
    ),
    (
        "id",
        "gambar tidak disertakan",
        "[image]",
        "Leon menambahkan Mia",
        "<Media tidak disertakan>",
        "Pesan ini dihapus",
    ),
]


@pytest.mark.parametrize("lang, media, note, event, android_media, deleted", LANGUAGES, ids=[x[0] for x in LANGUAGES])
def test_whatsapp_system_lines_and_placeholders_per_language(
    lang: str, media: str, note: str, event: str, android_media: str, deleted: str
) -> None:
    ios = "\n".join(
        [
            "[15/06/2023, 20:04:12] Leon: hello",
            f"[15/06/2023, 20:04:30] Leon: {LRM}{media}",
            f"[15/06/2023, 20:04:40] Mia: {LRM}{deleted}",
            f"[15/06/2023, 20:05:00] Leon: {LRM}{event}",
            "[15/06/2023, 20:05:10] Mia: ok",
        ]
    ).encode()
    r = read_bytes(ios, "chat.txt", "t")
    assert [(m.speaker, m.role, m.text) for m in r.messages] == [
        ("Leon", "user", "hello"),
        ("Leon", "user", note),
        ("Mia", "user", "[deleted message]"),
        ("system", "system", event),
        ("Mia", "user", "ok"),
    ]
    android = "\n".join(
        [
            f"15/06/2023, 20:04 - Leon: {android_media}",
            f"15/06/2023, 20:05 - {event}",
            f"15/06/2023, 20:06 - Mia: {deleted}",
        ]
    ).encode()
    r = read_bytes(android, "chat.txt", "t")
    assert [(m.speaker, m.role, m.text) for m in r.messages] == [
        ("Leon", "user", "[media]"),
        ("system", "system", event),
        ("Mia", "user", "[deleted message]"),
    ]


def test_whatsapp_group_sender_is_structural_in_any_language() -> None:
    """An iOS group writes `GroupName: ‎<event>`; once one line shows the sender is the group, its other marked
    lines are system too, even in a language without a phrase list (Swedish here)."""
    data = "\n".join(
        [
            f"[15/06/2023, 20:04:12] Vandring: {LRM}Leon added Mia",
            f"[15/06/2023, 20:04:30] Vandring: {LRM}Leon lade till Jonas",
            "[15/06/2023, 20:05:00] Leon: Hej!",
            f"[15/06/2023, 20:05:30] Leon: {LRM}Leon lade till Ida",  # a person's marked line: no phrase, not the group
        ]
    ).encode()
    r = read_bytes(data, "chat.txt", "t")
    assert [(m.speaker, m.role) for m in r.messages] == [
        ("system", "system"),
        ("system", "system"),
        ("Leon", "user"),
        ("Leon", "user"),
    ]


def test_whatsapp_text_that_merely_mentions_media_stays_text() -> None:
    data = (
        b"[15/06/2023, 20:04:12] Leon: the image omitted from the report was mine\n"
        b"[15/06/2023, 20:04:13] Leon: I found the document omitted\n"
    )
    assert [m.text for m in read_bytes(data, "chat.txt", "t").messages] == [
        "the image omitted from the report was mine",
        "I found the document omitted",
    ]
