"""Bytes to text: byte-order marks, binary content, legacy encodings, and lines with their byte offsets.

UTF-8 is the default and the only encoding of JSON documents (RFC 8259). A UTF-16/32 file
is recognised by its byte-order mark. A file that is mostly not UTF-8 (QQ exports saved as
GBK, UTF-16 without a mark) gets its encoding guessed by charset-normalizer; only guesses
where a successful strict decode is evidence are taken (multi-byte CJK encodings and
UTF-16/32): a single-byte guess (cp1252, latin-1, …) decodes any bytes at all, so it
would turn a wrong guess into mojibake that looks right — those files stay E_READ_UTF8.

Offsets: a `Line` keeps its byte offset and its bytes in the file as given, so a reject
cites the original bytes in the original encoding. Messages are stored as text: a RawChunk
body is the UTF-8 rendering of the decoded messages (raw_store.chunker), and citations
(raw_refs) are byte ranges of that UTF-8 body, never of the GBK/UTF-16 file.
"""

from __future__ import annotations

import codecs

from raw_store.formats.base import Line

UTF8 = "utf-8"
_BINARY_SAMPLE = 1 << 16
# C0 controls other than tab, LF, VT, FF, CR and ESC (ANSI colours appear in terminal logs)
_CONTROL_BYTES = frozenset(range(0x20)) - {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B}
_CONTROL_CHARS = frozenset(chr(c) for c in _CONTROL_BYTES)
_BOMS = (  # longest first: the UTF-32-LE mark starts with the UTF-16-LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, UTF8),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# charset-normalizer's names → the codec we decode with (GB18030 is the superset of GBK / GB2312)
_TRUSTED_GUESSES = {
    "gb18030": "gb18030",
    "gbk": "gb18030",
    "gb2312": "gb18030",
    "big5": "big5",
    "big5hkscs": "big5hkscs",
    "cp950": "cp950",
    "shift_jis": "shift_jis",
    "cp932": "cp932",
    "euc_jp": "euc_jp",
    "euc_kr": "euc_kr",
    "cp949": "cp949",
    "utf_16_le": "utf-16-le",
    "utf_16_be": "utf-16-be",
    "utf_16": "utf-16-le",
    "utf_32_le": "utf-32-le",
    "utf_32_be": "utf-32-be",
    "utf_32": "utf-32-le",
}


def bom_codec(data: bytes) -> tuple[str, int]:
    """(codec, length of the byte-order mark) — UTF-8 without a mark when there is none."""
    for mark, codec in _BOMS:
        if data.startswith(mark):
            return codec, len(mark)
    return UTF8, 0


def is_binary(body: bytes) -> bool:
    """NUL bytes, or more than 5% control bytes in the first 64 KiB: not a text file in an 8-bit encoding."""
    if b"\x00" in body:
        return True
    head = body[:_BINARY_SAMPLE]
    return sum(1 for b in head if b in _CONTROL_BYTES) * 20 > len(head)


def text_is_binary(text: str) -> bool:
    """The same test on decoded text (for UTF-16/32, whose bytes are full of NULs)."""
    if "\x00" in text:
        return True
    head = text[:_BINARY_SAMPLE]
    return sum(1 for c in head if c in _CONTROL_CHARS) * 20 > len(head)


def guess_codec(body: bytes) -> str | None:
    """The encoding charset-normalizer finds for a body that is not UTF-8, when it is one we trust
    (see the module doc) and it decodes the whole body strictly; else None."""
    from charset_normalizer import from_bytes  # imported on first use: most files are UTF-8

    best = from_bytes(body).best()
    codec = _TRUSTED_GUESSES.get(best.encoding) if best is not None else None
    if codec is None:
        return None
    try:
        body.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None
    return codec


def split_lines(data: bytes, offset: int, codec: str) -> list[Line]:
    """The lines of data[offset:] in `codec`: LF ends a line, a CR before it is dropped; each keeps its
    byte offset in `data` and is decoded on its own (None when its bytes are not valid in `codec`)."""
    lf, cr = "\n".encode(codec), "\r".encode(codec)
    unit = len(lf)  # 1 for UTF-8 and the CJK encodings (LF never occurs inside their characters), 2 / 4 for UTF-16/32
    out: list[Line] = []
    start, end, no = offset, len(data), 1
    while True:
        pos = data.find(lf, start)
        while pos != -1 and (pos - offset) % unit:
            pos = data.find(lf, pos + 1)  # an LF byte inside a UTF-16/32 code unit
        stop = end if pos == -1 else pos
        raw = data[start:stop]
        if raw.endswith(cr) and (len(raw) % unit == 0):
            raw = raw[: -len(cr)]
        try:
            text: str | None = raw.decode(codec)
        except UnicodeDecodeError:
            text = None
        out.append(Line(no, start, raw, text))
        if pos == -1:
            return out
        start, no = pos + unit, no + 1
