"""discord_csv: DiscordChatExporter CSV — `AuthorID,Author,Date,Content,Attachments,Reactions` (newer: `,Embeds`).

Every field is quoted; Content may span lines. Date is ISO 8601 with an offset in current
versions, a locale date ("1/17/2023 7:33 PM", "17-Jan-23 07:33 PM") in older ones.
Attachments is a comma-separated list of URLs, each becoming a note "[attachment: <file name>]".
The CSV has no message types or bot flags: every row is a role "user" message.
"""

from __future__ import annotations

import re
from datetime import datetime

from raw_store import errors as E
from raw_store.formats import csvrows
from raw_store.formats.base import LINES, Format, ReadResult, Sample, Source, text_problem
from raw_store.timeparse import parse_ts

NAME = "discord_csv"
RECORD = "every CSV row after the header (a quoted Content may span lines)"
COLUMNS = ["AuthorID", "Author", "Date", "Content", "Attachments", "Reactions"]
_ROW_START = re.compile(r'^"?\d{4,20}"?,')  # an author id: a row starts here even after an unclosed quote


def sniff(s: Sample) -> bool:
    names = csvrows.header(s.lines[0]) if s.lines else None
    return names is not None and names[: len(COLUMNS)] == COLUMNS


def parse_date(value: str) -> datetime | None:
    try:
        return parse_ts(value)
    except ValueError:
        pass
    try:
        return datetime.strptime(value.strip(), "%d-%b-%y %I:%M %p")  # DiscordChatExporter before 2.30
    except ValueError as exc:
        raise ValueError(f"unrecognised timestamp: {value[:80]!r}") from exc


def attachment_notes(cell: str) -> list[str]:
    return [
        f"[attachment: {url.rstrip('/').rsplit('/', 1)[-1].split('?', 1)[0]}]"
        for url in (u.strip() for u in cell.split(","))
        if url
    ]


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    names, lines = csvrows.split_header(src.lines)
    conv = src.default_conv
    width = len(names or COLUMNS)
    for row in csvrows.rows(lines, src.data, lambda t: _ROW_START.match(t) is not None):
        if not isinstance(row, csvrows.Row):
            b.reject(row.no, row.offset, E.E_READ_UTF8, "invalid bytes in line", row.raw)
            continue
        if row.fields is None or len(row.fields) != width:
            b.reject(row.no, row.offset, E.E_LINE_PARSE, f"not a CSV row of {width} fields", row.raw)
            continue
        author_id, author, date, content, attachments = row.fields[:5]
        text = "\n".join(p for p in [content.strip(), *attachment_notes(attachments)] if p)
        problem = text_problem(text) or (None if author.strip() else (E.E_LINE_PARSE, "Author is empty"))
        if problem:
            b.reject(row.no, row.offset, problem[0], problem[1], row.raw)
            continue
        try:
            ts = parse_date(date)
        except ValueError as exc:
            b.reject(row.no, row.offset, E.E_TS_PARSE, str(exc)[:200], row.raw)
            continue
        b.message(conv_id=conv, msg_id=f"L{row.no}", speaker=author.strip(), role="user", ts=ts, text=text, line=row.no)
    return b.result()


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
