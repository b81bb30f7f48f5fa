"""CSV exports read as lines: rows (a quoted field may span lines) with the file's exact bytes of each row."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from raw_store.formats.base import Line


@dataclass
class Row:
    """One CSV row: its lines, its fields (None when it does not parse as one CSV row), the file's bytes."""

    lines: list[Line]
    fields: list[str] | None
    raw: bytes

    @property
    def no(self) -> int:
        return self.lines[0].no

    @property
    def offset(self) -> int:
        return self.lines[0].offset


def header(line: str) -> list[str] | None:
    """The column names of a CSV header line (a BOM and spaces around names dropped), None if it is no CSV line."""
    fields = _parse(line.lstrip("\ufeff"))
    return [f.strip() for f in fields] if fields else None


def _parse(text: str) -> list[str] | None:
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error:
        return None
    return rows[0] if len(rows) == 1 else None


def split_header(lines: list[Line]) -> tuple[list[str] | None, list[Line]]:
    """The column names of the first non-blank line, and the lines after it."""
    for i, ln in enumerate(lines):
        if ln.text is None or ln.text.strip():
            return (header(ln.text) if ln.text is not None else None), lines[i + 1 :]
    return None, []


def rows(lines: list[Line], data: bytes, starts_row: Callable[[str], bool]) -> Iterator[Row | Line]:
    """The rows of `lines` (those after the header), or a Line for an undecodable line (its own reject).

    A row ends at a line end outside quotes (quotes inside a field are doubled, so the count
    of `"` tells). An unclosed quote would swallow the rest of the file, so a line that
    `starts_row` (e.g. a Discord author id) always starts a new row: the broken one ends there.
    Blank lines between rows are skipped.
    """
    group: list[Line] = []
    quotes = 0

    def finish() -> Row:
        text = "\n".join(ln.text or "" for ln in group)
        last = group[-1]
        return Row(list(group), _parse(text + "\n"), data[group[0].offset : last.offset + len(last.raw)])

    for ln in lines:
        if ln.text is None:
            if group:
                yield finish()
                group, quotes = [], 0
            yield ln
            continue
        if group and quotes % 2 and starts_row(ln.text):
            yield finish()
            group, quotes = [], 0
        if not group and not ln.text.strip():
            continue
        group.append(ln)
        quotes += ln.text.count('"')
        if quotes % 2 == 0:
            yield finish()
            group, quotes = [], 0
    if group:
        yield finish()
