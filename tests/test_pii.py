"""jobs.pii: PII detection (email, phone, id_card, card) in Chinese and English text, redaction, node flags."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.pii import PiiHit, find_pii, flag_nodes, id_card_valid, luhn_valid, redact
from r2g.schema import NODES

# (text, redacted text, kinds). Each valid number is valid for real (Luhn / GB 11643 checked by hand).
CASES = [
    # e-mail
    ("mail me at alice.w@example.com please", "mail me at [EMAIL] please", ["email"]),
    ("邮箱是alice@example.com。", "邮箱是[EMAIL]。", ["email"]),
    ("john.doe+tag@mail.example.co.uk.", "[EMAIL].", ["email"]),
    ("13812345678@qq.com 是我的QQ邮箱", "[EMAIL] 是我的QQ邮箱", ["email"]),
    # Chinese mobile
    ("我的手机号是13812345678，记一下", "我的手机号是[PHONE]，记一下", ["phone"]),
    ("电话:+86 138-1234-5678", "电话:[PHONE]", ["phone"]),
    ("call 0086 139 1234 5678 today", "call [PHONE] today", ["phone"]),
    ("+8615912345678", "[PHONE]", ["phone"]),
    # Chinese landline
    ("北京办公室 010-62345678", "北京办公室 [PHONE]", ["phone"]),
    # international / US
    ("London office: +44 20 7946 0958.", "London office: [PHONE].", ["phone"]),
    ("Call me at (415) 555-2671 tonight", "Call me at [PHONE] tonight", ["phone"]),
    ("my number is 415-555-2671", "my number is [PHONE]", ["phone"]),
    ("+1 (415) 555-2671 is Caroline's", "[PHONE] is Caroline's", ["phone"]),
    ("reach me on 415.555.2671", "reach me on [PHONE]", ["phone"]),
    # Chinese resident ID (check digit and check X)
    ("身份证号11010519491231002X，请保密", "身份证号[ID_CARD]，请保密", ["id_card"]),
    ("ID 440304199001011233 on file", "ID [ID_CARD] on file", ["id_card"]),
    ("她的身份证 520103200002294560", "她的身份证 [ID_CARD]", ["id_card"]),
    # payment cards
    ("visa 4111 1111 1111 1111 exp 2025", "visa [CARD] exp 2025", ["card"]),
    ("卡号5500-0000-0000-0004", "卡号[CARD]", ["card"]),
    ("Amex 3782 822463 10005", "Amex [CARD]", ["card"]),
    ("银联 6222021234567894 已绑定", "银联 [CARD] 已绑定", ["card"]),
    # several kinds in one sentence
    (
        "Email bob@corp.io or text 13900001111; card 4111111111111111",
        "Email [EMAIL] or text [PHONE]; card [CARD]",
        ["card", "email", "phone"],
    ),
    # negatives: dates, times, years, versions, order numbers, invalid checksums
    ("We met on 2023-05-08 at 12:30:45.", None, []),
    ("2023年5月8日下午3点见，2023.05.08", None, []),
    ("from 1999 to 2023, i.e. 1999-2023", None, []),
    ("upgrade to v1.2.3 or 10.0.19045.2965", None, []),
    ("订单号 202305081234567 已发货", None, []),
    ("order #1234567890 shipped", None, []),
    ("身份证 11010519491231002Y 是错的", None, []),  # wrong check character
    ("身份证 110105194902301234 日期不存在", None, []),  # 1949-02-30
    ("card 4111 1111 1111 1112", None, []),  # Luhn fails
    ("6222 0212 3456 7890", None, []),  # Luhn fails
    ("dates 2023-05-08 2023-05-09", None, []),
    ("timezone +08:00 and UTC-5", None, []),
    ("ISBN 978-3-16-148410-0", None, []),
    ("server 192.168.100.200 port 8080", None, []),
    ("12345678901 is not a mobile (starts 12)", None, []),
    ("手机号 1381234567 少一位", None, []),
    ("", None, []),
]


@pytest.mark.parametrize(("text", "redacted", "kinds"), CASES)
def test_redact_table(text: str, redacted: str | None, kinds: list[str]) -> None:
    assert redact(text) == (text if redacted is None else redacted, kinds)


def test_find_pii_spans_are_exact_and_ordered() -> None:
    text = "邮箱 a@b.cn，电话 13812345678，卡 4111 1111 1111 1111"
    hits = find_pii(text)
    assert hits == [PiiHit("email", 3, 9), PiiHit("phone", 13, 24), PiiHit("card", 27, 46)]
    assert [text[h.start : h.end] for h in hits] == ["a@b.cn", "13812345678", "4111 1111 1111 1111"]


def test_checksums() -> None:
    assert id_card_valid("11010519491231002X") and id_card_valid("11010519491231002x")
    assert not id_card_valid("110105194912310021")
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")


def test_id_card_beats_card_and_phone_on_overlap() -> None:
    # 18 digits; whatever else the run could be read as, the validated ID wins.
    assert [h.kind for h in find_pii("440304199001011233")] == ["id_card"]


def _nodes(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{c: r.get(c) for c in NODES.names} for r in rows], schema=NODES)


ROWS: list[dict[str, Any]] = [
    {
        "id": "n1",
        "tenant": "t1",
        "type": "Episode",
        "title": "Caroline: my mail is c@x.org",
        "text": "Caroline shared c@x.org",
        "keywords": ["c@x.org", "mail"],
        "raw_refs": [{"raw_id": "raw_a", "offset": 0, "length": 10}],
    },
    {
        "id": "n2",
        "tenant": "t1",
        "type": "Entity",
        "title": "小明",
        "text": "小明",
        "aliases": ["小明", "13812345678"],
        "entities": None,
    },
    {
        "id": "n3",
        "tenant": "t2",
        "type": "Fact",
        "title": "plays soccer",
        "text": "小明在公园里踢足球",
        "keywords": ["足球"],
        "entities": ["小明"],
    },
    {"id": "n4", "tenant": "t2", "type": "Episode", "title": None, "text": None, "entities": ["ID 11010519491231002X"]},
]


def test_flag_nodes_sets_pii_and_keeps_text_by_default() -> None:
    out = flag_nodes(_nodes(ROWS))
    assert out.schema == NODES
    assert out.column("pii").to_pylist() == [["email"], ["phone"], None, ["id_card"]]
    assert out.column("text").to_pylist() == [r.get("text") for r in ROWS]
    assert out.column("id").to_pylist() == ["n1", "n2", "n3", "n4"]


def test_flag_nodes_redacts_graph_text_only() -> None:
    out = flag_nodes(_nodes(ROWS), redact_text=True)
    rows = out.to_pylist()
    assert rows[0]["title"] == "Caroline: my mail is [EMAIL]"
    assert rows[0]["text"] == "Caroline shared [EMAIL]"
    assert rows[0]["keywords"] == ["[EMAIL]", "mail"]
    assert rows[0]["raw_refs"] == ROWS[0]["raw_refs"]  # citations untouched
    assert rows[1]["aliases"] == ["小明", "[PHONE]"]
    assert rows[2]["text"] == "小明在公园里踢足球"
    assert rows[3]["entities"] == ["ID [ID_CARD]"]
    assert [r["pii"] for r in rows] == [["email"], ["phone"], None, ["id_card"]]


def test_flag_nodes_is_idempotent_after_redaction() -> None:
    once = flag_nodes(_nodes(ROWS), redact_text=True)
    assert flag_nodes(once, redact_text=True).equals(once)
    assert flag_nodes(once).column("pii").equals(once.column("pii"))


def test_flag_nodes_is_row_wise_deterministic() -> None:
    rows = ROWS[:]
    random.Random(5).shuffle(rows)
    shuffled = flag_nodes(_nodes(rows), redact_text=True).to_pylist()
    base = {r["id"]: r for r in flag_nodes(_nodes(ROWS), redact_text=True).to_pylist()}
    assert all(r == base[r["id"]] for r in shuffled)


def test_flag_nodes_empty_table() -> None:
    assert flag_nodes(NODES.empty_table()).num_rows == 0


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789 -+.:()@abc年月日号", max_size=40))
def test_redaction_is_stable_and_spans_disjoint(text: str) -> None:
    hits = find_pii(text)
    assert all(a.end <= b.start for a, b in zip(hits, hits[1:]))
    red, kinds = redact(text)
    assert kinds == sorted({h.kind for h in hits})
    assert redact(red) == (red, [])  # placeholders contain nothing to find
