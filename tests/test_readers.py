"""Input-format readers: fixtures per format, coded rejects, and fuzzing for never-raise + conservation."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import fuzz_settings
from raw_store import errors as E
from raw_store.readers import (
    FORMATS,
    MAX_MESSAGE_BYTES,
    ReadResult,
    default_conv_id,
    detect_format,
    read_bytes,
    read_file,
)
from raw_store.routing import DEFAULT_TENANT, tenant_for
from raw_store.timeparse import parse_ts

FIXTURES = Path(__file__).parent / "fixtures" / "raw"
FUZZ = fuzz_settings(150)


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _reasons(r: ReadResult) -> list[tuple[int, str]]:
    return [(x.line, x.reason) for x in r.rejects]


# -- timestamps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2024-01-02T10:00:00", dt.datetime(2024, 1, 2, 10)),
        ("2024-01-02T10:00:00Z", dt.datetime(2024, 1, 2, 10)),
        ("2024-01-02T12:00:00+02:00", dt.datetime(2024, 1, 2, 10)),
        ("2024-01-02 10:00:00", dt.datetime(2024, 1, 2, 10)),
        ("2024/01/02 10:00", dt.datetime(2024, 1, 2, 10)),
        ("2024-01-02", dt.datetime(2024, 1, 2)),
        (1704189600, dt.datetime(2024, 1, 2, 10)),
        (1704189600000, dt.datetime(2024, 1, 2, 10)),
        ("1704189600", dt.datetime(2024, 1, 2, 10)),
        (1704189600.5, dt.datetime(2024, 1, 2, 10, 0, 0, 500000)),
        ("1:56 pm on 8 May, 2023", dt.datetime(2023, 5, 8, 13, 56)),
        ("12:05 am on 1 January, 2023", dt.datetime(2023, 1, 1, 0, 5)),
        ("May 8, 2023 1:56 pm", dt.datetime(2023, 5, 8, 13, 56)),
        ("Sept 8, 2023", dt.datetime(2023, 9, 8)),
        ("8 May 2023", dt.datetime(2023, 5, 8)),
        ("1/2/24, 10:00:00 AM", dt.datetime(2024, 1, 2, 10)),
        (dt.datetime(2024, 1, 2, 10, tzinfo=dt.timezone(dt.timedelta(hours=1))), dt.datetime(2024, 1, 2, 9)),
        (None, None),
        ("", None),
        ("   ", None),
    ],
)
def test_parse_ts(value: object, expected: dt.datetime | None) -> None:
    assert parse_ts(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "10:00",
        "2024-13-01",
        "13:00 pm on 8 May, 2023",
        "1:56 pm on 8 Smarch, 2023",
        True,
        [2024],
        {"ts": 1},
        float("nan"),
        10**400,
    ],
)
def test_parse_ts_rejects_garbage(value: object) -> None:
    with pytest.raises(ValueError):
        parse_ts(value)


@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.none()))
@FUZZ
def test_parse_ts_only_raises_value_error(value: object) -> None:
    try:
        out = parse_ts(value)
    except ValueError:
        return
    assert out is None or (isinstance(out, dt.datetime) and out.tzinfo is None)


# -- paths -----------------------------------------------------------------------------------------


def test_tenant_and_conv_id_from_path(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    assert tenant_for(inbox / "alice" / "chats" / "day1.txt", inbox) == "alice"
    assert tenant_for(inbox / "x.txt", inbox) == DEFAULT_TENANT
    assert tenant_for(tmp_path / "elsewhere.txt", inbox) == DEFAULT_TENANT
    assert default_conv_id("alice/chats/day1.txt", "alice") == "chats/day1"
    assert default_conv_id("x.txt", DEFAULT_TENANT) == "x"


def test_read_file_uses_inbox_layout(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    f = inbox / "alice" / "chats" / "day1.txt"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"Alice: hi\nBob: hello\n")
    r = read_file(f, inbox)
    assert r.format == "transcript"
    assert {(m.tenant, m.conv_id, m.source_file) for m in r.messages} == {
        ("alice", "chats/day1", "alice/chats/day1.txt")
    }
    assert [m.seq for m in r.messages] == [0, 1]


# -- detection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture, fmt",
    [("canonical.jsonl", "canonical_jsonl"), ("transcript.txt", "transcript"), ("locomo.json", "locomo_json")],
)
def test_detect_fixture_formats(fixture: str, fmt: str) -> None:
    assert detect_format(_fixture(fixture), fixture) == fmt
    # content decides, not the extension
    assert detect_format(_fixture(fixture), "renamed.dat") == fmt


def test_detect_unknown_and_other_jsonl() -> None:
    assert detect_format(b"just some prose without any speaker\nmore prose\n", "a.txt") == "unknown"
    # SillyTavern message lines are read (tests/test_formats.py); a JSONL of some other app's shape is not
    assert (
        detect_format(b'{"name": "x", "is_user": true, "mes": "hi"}\n{"name": "y", "mes": "yo"}\n', "a.jsonl")
        == "sillytavern_jsonl"
    )
    assert detect_format(b'{"event": "click", "x": 1}\n{"event": "key", "k": "a"}\n', "a.jsonl") == "unknown"
    assert detect_format(b"", "a.txt") == "unknown"
    assert set(FORMATS) == {
        "canonical_jsonl",
        "transcript",
        "locomo_json",
        "sillytavern_jsonl",
        "chatgpt_json",
        "whatsapp",
        "qq",
        "claude_json",
        "telegram_json",
        "discord_json",
        "messenger_json",
        "wechat_csv",
        "discord_csv",
        "line_txt",
    }


# -- canonical JSONL -------------------------------------------------------------------------------


def test_canonical_jsonl_fixture() -> None:
    r = read_bytes(_fixture("canonical.jsonl"), "alice/canonical.jsonl", "alice")
    assert r.format == "canonical_jsonl"
    assert [(m.line, m.conv_id, m.msg_id, m.seq) for m in r.messages] == [
        (1, "c1", "m1", 0),
        (2, "c1", "2", 1),
        (6, "c1", "6", 2),
        (9, "c3", "9", 0),
    ]
    assert r.messages[1].role == "assistant" and r.messages[0].role == "user"
    assert r.messages[1].ts == dt.datetime(2024, 1, 2, 10, 0, 5)
    assert r.messages[3].tenant == "bob"  # the record's tenant wins over the path
    assert _reasons(r) == [
        (3, E.E_JSON_PARSE),
        (4, E.E_TS_PARSE),
        (7, E.E_TEXT_EMPTY),
        (8, E.E_TS_MISSING),
        (10, E.E_JSON_SHAPE),
    ]
    lines = _fixture("canonical.jsonl").split(b"\n")
    for rej in r.rejects:
        assert rej.raw == lines[rej.line - 1]
        assert _fixture("canonical.jsonl")[rej.byte_offset :].startswith(rej.raw)


def test_jsonl_oversized_message() -> None:
    big = json.dumps({"conv_id": "c", "speaker": "A", "ts": "2024-01-01", "text": "x" * (MAX_MESSAGE_BYTES + 1)})
    ok = json.dumps({"conv_id": "c", "speaker": "A", "ts": "2024-01-01", "text": "fine"})
    r = read_bytes(f"{ok}\n{big}\n".encode(), "f.jsonl", "t")
    assert [m.text for m in r.messages] == ["fine"]
    assert _reasons(r) == [(2, E.E_MSG_TOO_LARGE)]


def test_jsonl_bom_crlf_and_invalid_utf8_line() -> None:
    good = b'{"conv_id": "c", "speaker": "A", "ts": "2024-01-01", "text": "caf\xc3\xa9"}'
    bad = b'{"conv_id": "c", "speaker": "A", "ts": "2024-01-01", "text": "caf\xe9"}'
    data = b"\xef\xbb\xbf" + good + b"\r\n" + bad + b"\r\n" + good + b"\r\n"
    r = read_bytes(data, "f.jsonl", "t")
    assert [m.text for m in r.messages] == ["café", "café"]
    assert [m.line for m in r.messages] == [1, 3]
    assert _reasons(r) == [(2, E.E_READ_UTF8)]
    assert r.rejects[0].raw == bad
    assert data[r.rejects[0].byte_offset :].startswith(bad)


def test_jsonl_surrogate_escape_is_rejected_not_crashing() -> None:
    r = read_bytes(b'{"speaker": "A", "ts": "2024-01-01", "text": "\\ud800"}\n', "f.jsonl", "t")
    assert r.messages == [] and _reasons(r) == [(1, E.E_JSON_SHAPE)]


# -- transcripts -----------------------------------------------------------------------------------


def test_transcript_fixture() -> None:
    r = read_bytes(_fixture("transcript.txt"), "alice/chats/transcript.txt", "alice")
    assert r.format == "transcript"
    assert [(m.msg_id, m.speaker, m.role, m.conv_id) for m in r.messages] == [
        ("L1", "Caroline", "user", "chats/transcript"),
        ("L2", "Melanie", "user", "chats/transcript"),
        ("L7", "Assistant", "assistant", "chats/transcript"),
    ]
    assert r.messages[0].ts == dt.datetime(2023, 5, 8, 13, 56)
    assert r.messages[1].text == "That is wonderful!\nIt must have been moving."
    assert r.messages[2].ts is None
    assert _reasons(r) == [(5, E.E_LINE_PARSE), (6, E.E_TS_PARSE)]


def test_transcript_variants() -> None:
    data = (
        "Alice：你好，今天去公园了吗？\n"
        "[1/2/24, 10:00:00 AM] Bob: bracketed numeric stamp\n"
        "[1:56 pm on 8 May, 2023] Carol: locomo stamp\n"
        "bot: beep\n"
        "Alice: see https://example.com/a:b\n"
        "1/2/24, 10:00 - Bob: a lone WhatsApp line\n"
    ).encode()
    r = read_bytes(data, "x.txt", DEFAULT_TENANT)
    assert r.format == "transcript"
    assert [m.speaker for m in r.messages] == ["Alice", "Bob", "Carol", "bot", "Alice"]
    assert r.messages[0].text == "你好，今天去公园了吗？"
    assert r.messages[1].ts == dt.datetime(2024, 1, 2, 10)
    assert r.messages[2].ts == dt.datetime(2023, 5, 8, 13, 56)
    assert r.messages[3].role == "assistant"
    assert r.messages[4].text == "see https://example.com/a:b"
    assert {m.conv_id for m in r.messages} == {"x"}
    # the `date, time - Name:` prefix belongs to the whatsapp reader (a file mostly of such lines)
    assert _reasons(r) == [(6, E.E_LINE_PARSE)]


def test_transcript_empty_text_and_orphan_continuation() -> None:
    r = read_bytes(b"  orphan continuation\nAlice: hi\nBob:\nCarol:\n  text on next line\n", "t.txt", "t")
    assert [(m.speaker, m.text) for m in r.messages] == [("Alice", "hi"), ("Carol", "text on next line")]
    assert _reasons(r) == [(1, E.E_LINE_PARSE), (3, E.E_TEXT_EMPTY)]


# -- LoCoMo ----------------------------------------------------------------------------------------


def test_locomo_fixture() -> None:
    data = _fixture("locomo.json")
    r = read_bytes(data, "bench/locomo.json", "bench")
    assert r.format == "locomo_json" and r.rejects == []
    assert [m.msg_id for m in r.messages] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]  # sessions in numeric order
    assert [m.line for m in r.messages] == [1, 2, 3, 4, 5]
    assert [m.seq for m in r.messages] == [0, 1, 2, 3, 4]
    assert {m.conv_id for m in r.messages} == {"conv-26"}
    assert r.messages[0].ts == dt.datetime(2023, 5, 8, 13, 56)
    assert r.messages[3].ts == dt.datetime(2023, 5, 25, 13, 14)
    img = r.messages[3]
    assert img.caption == "a painting of a sunset over a lake"
    assert img.text == "Look at this painting I made! [image: a painting of a sunset over a lake]"
    # `query`, `img_url` and `qa` never leak into messages
    for m in r.messages:
        assert "SECRET_QUERY_TOKEN" not in repr(m) and "example.com" not in repr(m)
        assert "When did Caroline" not in repr(m)


def test_locomo_single_sample_and_bad_turns() -> None:
    doc = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "not a date",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "x"}],
            "session_2_date_time": "May 9, 2023",
            "session_2": [
                {"speaker": "A", "dia_id": "D2:1", "text": ""},
                "not a turn",
                {"speaker": "B", "dia_id": "D2:3", "text": "", "blip_caption": "a dog"},
            ],
        },
    }
    r = read_bytes(json.dumps(doc).encode(), "s.json", "t")
    assert [(m.msg_id, m.text) for m in r.messages] == [("D2:3", "[image: a dog]")]
    assert _reasons(r) == [(1, E.E_TS_PARSE), (2, E.E_TEXT_EMPTY), (3, E.E_JSON_SHAPE)]


def test_locomo_without_turns_is_a_reject() -> None:
    data = b'{"sample_id": "s", "conversation": {"speaker_a": "A", "session_1": []}}'
    r = read_bytes(data, "l.json", "t")
    assert [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_JSON_SHAPE, data)]


def test_truncated_locomo_is_a_json_parse_reject() -> None:
    data = _fixture("locomo.json")[:300]
    r = read_bytes(data, "l.json", "t")
    assert r.format == "locomo_json"
    assert [(x.line, x.reason, x.raw) for x in r.rejects] == [(0, E.E_JSON_PARSE, data)]


# -- whole-file rejects ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", E.E_READ_EMPTY),
        (b"  \n\t\r\n", E.E_READ_EMPTY),
        (b"\xef\xbb\xbf\n", E.E_READ_EMPTY),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", E.E_READ_BINARY),
        ("Alice: caf\xe9\nBob: na\xefve\n".encode("latin-1"), E.E_READ_UTF8),
        (b"\xff\xfe\xfa garbage \xc3\x28", E.E_READ_UTF8),
        (b"Lorem ipsum dolor sit amet\nconsectetur adipiscing elit\n", E.E_FORMAT_UNKNOWN),
    ],
)
def test_whole_file_rejects(data: bytes, reason: str) -> None:
    r = read_bytes(data, "f.txt", "t")
    assert r.messages == []
    assert [(x.line, x.byte_offset, x.reason, x.raw) for x in r.rejects] == [(0, 0, reason, data)]


# -- fuzzing ---------------------------------------------------------------------------------------


def _check_invariants(data: bytes, r: ReadResult) -> None:
    """Every message has text; for line formats every non-blank line is a message's or a reject's."""
    assert r.format in FORMATS or r.format == "unknown"
    assert all(m.text.strip() for m in r.messages)
    for m in r.messages:
        m.text.encode("utf-8")  # encodable: the chunker and Arrow need real UTF-8
        assert m.speaker.strip()
    if r.format not in ("canonical_jsonl", "transcript") or any(x.line == 0 for x in r.rejects):
        assert r.messages or r.rejects
        return
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    msg_lines = {m.line for m in r.messages}
    rej_lines = [x.line for x in r.rejects]
    assert len(set(rej_lines)) == len(rej_lines) and not msg_lines & set(rej_lines)
    in_message = False
    for no, raw in enumerate(body.split(b"\n"), start=1):
        s = raw.removesuffix(b"\r").decode("utf-8", errors="replace")
        if not s.strip():
            continue
        if no in rej_lines:
            in_message = False
        elif no in msg_lines:
            in_message = True
        else:
            # only a transcript continuation line may belong to the message above it
            assert r.format == "transcript" and in_message and s[0].isspace(), f"line {no} unaccounted: {s!r}"


@given(st.binary(max_size=400))
@FUZZ
def test_fuzz_binary_never_raises(data: bytes) -> None:
    _check_invariants(data, read_bytes(data, "fuzz.bin", "t"))


@given(st.text(max_size=300))
@FUZZ
def test_fuzz_text_never_raises(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    _check_invariants(data, read_bytes(data, "fuzz.txt", "t"))


_TRANSCRIPT_LINES = st.sampled_from(
    [
        "Alice: hello there",
        "[2024-01-02 10:00] Bob: hi",
        "[bad stamp] Bob: x",
        "  continued text",
        "",
        "   ",
        "no colon here",
        "Carol：中文",
        "http://x.y: z",
        "Dave:",
        "\ufeffEve: bom?",
        "[] Z: empty stamp",
    ]
) | st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30)

_JSONL_LINES = st.one_of(
    st.fixed_dictionaries(
        {
            "speaker": st.sampled_from(["A", "", 3]),
            "text": st.sampled_from(["hi", "", " ", None, "中文", 5]),
            "ts": st.sampled_from(["2024-01-01", "", "garbage", 1700000000, None, True]),
        },
        optional={
            "conv_id": st.sampled_from(["c1", "c2", 7, "", []]),
            "tenant": st.sampled_from(["x", "", 1]),
            "role": st.sampled_from(["user", "assistant", "weird", 1]),
            "msg_id": st.sampled_from(["m", 1, None]),
        },
    ).map(json.dumps),
    st.sampled_from(["{broken", "[]", "null", "", "  ", '"str"']),
    st.just('{"conv_id": "c1", "speaker": "A", "ts": "2024-01-01 10:00", "text": "hi there"}'),
)


@given(st.lists(_TRANSCRIPT_LINES, min_size=1, max_size=15), st.sampled_from(["\n", "\r\n"]))
@FUZZ
def test_fuzz_transcripts_conserve_lines(lines: list[str], eol: str) -> None:
    data = eol.join(lines).encode("utf-8")
    _check_invariants(data, read_bytes(data, "fuzz.txt", "t"))


@given(st.lists(_JSONL_LINES, min_size=1, max_size=15), st.booleans())
@FUZZ
def test_fuzz_jsonl_conserves_lines(lines: list[str], corrupt: bool) -> None:
    data = "\n".join(lines).encode("utf-8")
    if corrupt:
        data = data.replace(b"hi", b"h\xff", 1)
    r = read_bytes(data, "fuzz.jsonl", "t")
    _check_invariants(data, r)
    if r.format == "canonical_jsonl" and not any(x.line == 0 for x in r.rejects):
        assert len(r.messages) + len(r.rejects) == sum(1 for ln in data.split(b"\n") if ln.strip())


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "conversation",
                    "session_1",
                    "session_2",
                    "session_1_date_time",
                    "speaker",
                    "text",
                    "dia_id",
                    "blip_caption",
                    "sample_id",
                    "query",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@given(_JSON_VALUES)
@FUZZ
def test_fuzz_locomo_shapes_never_raise(doc: object) -> None:
    data = json.dumps(doc).encode()
    _check_invariants(data, read_bytes(data, "fuzz.json", "t"))


def test_loose_files_take_the_configured_tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inbox = tmp_path / "inbox"
    monkeypatch.setenv("MEMCTL_TENANT", "acme")
    assert tenant_for(inbox / "x.txt", inbox) == "acme"
    assert tenant_for(inbox / "alice" / "x.txt", inbox) == "alice"  # a tenant folder always wins
    monkeypatch.setenv("MEMCTL_TENANT", "  ")
    assert tenant_for(inbox / "x.txt", inbox) == DEFAULT_TENANT
