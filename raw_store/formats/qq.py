"""qq: QQ message-manager text export — a header block, then `date time nick(QQ)` lines each followed by text lines.

Header forms seen in real exports: `nick(12345678)`, `nick<someone@qq.com>`, a group card
before the nick (`大数据-李雪<someone@qq.com>`, `大数据 - 张伟<13800000000>`: a number in angle
brackets), and an empty nick (`2016-07-19 23:51:24 (747150918)`: the account number is then
the speaker). QQ saves these files as UTF-8 with a BOM, as GBK, or as UTF-16 (see
raw_store.formats.encoding); CRLF and bare CRs inside messages become LF in message text.
"""

from __future__ import annotations

import re

from raw_store import errors as E
from raw_store.formats.base import LINES, Format, Pending, ReadResult, Sample, Source
from raw_store.timeparse import parse_ts

NAME = "qq"
RECORD = (
    "a `date time nick(QQ)` line with its text lines, or a stray text line; the banner, `====` rules and "
    "`消息分组:` / `消息对象:` lines are header"
)
BANNER = re.compile(r"^消息记录[（(]此消息记录为文本格式，?不支持重新导入[）)]$")
RULE = re.compile(r"^={16,}$")
FIELD = re.compile(r"^(?P<key>消息分组|消息对象)[:：](?P<value>.*)$")
HEAD = re.compile(
    r"^(?P<date>\d{4}-\d{1,2}-\d{1,2})\s+(?P<time>\d{1,2}:\d{2}:\d{2})(?:\s+(?P<nick>.*?))?\s*"
    r"(?:\((?P<qq>\d{4,12})\)|<(?P<mail>[^<>\s@]+@[^<>\s]+)>|<(?P<number>\d{4,15})>)$"
)
_SYSTEM_ID = "10000"  # QQ's own account: "系统消息(10000)"


def sniff(s: Sample) -> bool:
    n = len(s.lines)
    heads = sum(1 for ln in s.lines if HEAD.match(ln.strip()))
    banner = any(BANNER.match(ln.strip()) for ln in s.lines)
    fields = any(FIELD.match(ln.strip()) for ln in s.lines)
    # each QQ message is a header line plus at least one text line
    return banner or bool(heads and (fields or 3 * heads >= n))


def _speaker(head: re.Match) -> str:
    """The nick (group card included), or the account (QQ number / mail) when the nick is empty."""
    nick = (head.group("nick") or "").strip()
    return nick or head.group("qq") or head.group("mail") or head.group("number")


def read(src: Source) -> ReadResult:
    """`date time nick(QQ)` (or `<mail>` / `<number>`) starts a message, its text on the lines below.

    The banner, `====` rules and `消息分组:` / `消息对象:` lines are header (consumed); a
    `消息对象:` line names the conversation of the messages after it (an export of all
    chats holds one block per contact or group). Blank lines inside a message's text
    are kept; a message ends at the next message or header line.
    """
    b = src.builder(NAME)
    default_conv = conv = src.default_conv
    pending: Pending | None = None

    def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        p, pending = pending, None
        more, raw = p.trimmed(src.data)
        b.record(
            p,
            raw,
            conv_id=conv,
            speaker=_speaker(p.match),
            role="system" if p.match.group("qq") == _SYSTEM_ID else "user",
            stamp=lambda: parse_ts(f"{p.match.group('date')} {p.match.group('time')}"),
            text="\n".join(more).strip(),
        )

    for ln in src.lines:
        if ln.text is None:
            flush()
            b.reject(ln.no, ln.offset, E.E_READ_UTF8, "invalid bytes in line", ln.raw)
            continue
        line = ln.text.strip()
        field = FIELD.match(line)
        if field or BANNER.match(line) or RULE.match(line):
            flush()
            if field and field.group("key") == "消息对象":
                conv = field.group("value").strip() or default_conv
            continue
        head = HEAD.match(line)
        if head:
            flush()
            pending = Pending(ln, head)
        elif pending is not None:
            pending.add(ln)
        elif line:
            b.reject(ln.no, ln.offset, E.E_LINE_PARSE, "text line outside any message", ln.raw)
    flush()
    return b.result()


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
