"""PII detection and redaction for Chinese and English text (SPEC §8, seed 004 §8 "PII 检测与脱敏").

Kinds (the NODES `pii` column's vocabulary): email, phone, id_card, card.

- email    local@domain.tld (ASCII; the text around it may be Chinese).
- phone    Chinese mobile 1[3-9]x xxxx xxxx (optional +86/0086, spaces or dashes between groups),
           Chinese landline 0xx(x)-xxxxxxx(x) (dash required), international "+CC …" with 8–15
           digits, US (NXX) NXX-XXXX / NXX-NXX-XXXX / NXX.NXX.XXXX (separators required: a bare
           10-digit run is as likely an order number).
- id_card  Chinese resident ID (GB 11643-1999): 6-digit region, a real birth date 18xx–20xx,
           3-digit sequence, check character validated (weights 7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2).
- card     payment card: 13–19 digits, single spaces/dashes allowed between digits, first digit
           2–6 (Visa, Mastercard, Amex, JCB/Diners, Discover, UnionPay 62), Luhn-valid.

Dates (2023-05-08, 2023.05.08), times (12:30:45), years, version strings (1.2.3, 10.0.19045)
and plain order numbers match none of these. Every pattern refuses to start or end inside a
longer run of ASCII letters/digits, so it never cuts a number in two. When candidates overlap,
the stronger evidence wins: email > id_card (checksum + date) > card (Luhn) > phone.

`flag_nodes` and `redact` touch only graph text: the raw store keeps its bytes, so
citations still verify against the original lines.

Per row: a node's `pii` (and redacted text) depends on its own title/text/keywords/aliases/entities only
(`pii_group_keys`; tests/test_consolidation_contracts.py::test_pii_flags_are_per_row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

import polars as pl
import pyarrow as pa

from r2g.schema import NODES
from raw_store.frames import as_frame
from raw_store.lake import conform

EMAIL, PHONE, ID_CARD, CARD = "email", "phone", "id_card", "card"
KINDS = (EMAIL, PHONE, ID_CARD, CARD)
PLACEHOLDERS = {EMAIL: "[EMAIL]", PHONE: "[PHONE]", ID_CARD: "[ID_CARD]", CARD: "[CARD]"}
_PRIORITY = {EMAIL: 0, ID_CARD: 1, CARD: 2, PHONE: 3}

# Node columns scanned (and, with redact_text, rewritten): the ones holding user text.
TEXT_COLUMNS = ("title", "text")
LIST_COLUMNS = ("keywords", "aliases", "entities")

_L = r"(?<![0-9A-Za-z])"  # not inside an ASCII word/number (Chinese may touch it)
_R = r"(?![0-9A-Za-z])"

_EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]*[A-Za-z0-9_%+-])?"
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,24}" + _R
)
_PHONE_RES = (
    # Chinese mobile, optional +86 / 0086 / 86 prefix, groups 3-4-4 with optional single separators.
    re.compile(_L + r"(?:(?:\+|00)86[ -]?)?(?<!\+)1[3-9]\d(?:[ -]?\d{4}){2}" + _R),
    # Chinese landline: area code 0xx/0xxx, dash required, 7–8 digit number.
    re.compile(_L + r"0\d{2,3}-[2-9]\d{6,7}" + _R),
    # International: leading +, country code, then digit groups (checked for 8–15 digits below).
    re.compile(r"(?<![\w+])\+[1-9]\d{0,2}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,4})){2,6}" + _R),
    # US: (NXX) NXX-XXXX, NXX-NXX-XXXX, NXX.NXX.XXXX, NXX NXX XXXX, optional 1- prefix; separators required.
    re.compile(
        _L + r"(?:1[ .-])?(?:\([2-9]\d{2}\) ?|[2-9]\d{2}(?P<sep>[ .-]))"
        r"[2-9]\d{2}(?(sep)(?P=sep)|[ .-])\d{4}" + _R
    ),
)
_ID_CARD_RE = re.compile(_L + r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]" + _R)
_CARD_RE = re.compile(_L + r"[2-6](?:[ -]?\d){12,18}" + _R)

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


@dataclass(frozen=True)
class PiiHit:
    kind: str  # one of KINDS
    start: int  # character offsets into the text, end exclusive
    end: int


def id_card_valid(number: str) -> bool:
    """GB 11643: 18 characters, a real birth date, and the check character of the first 17 digits."""
    if len(number) != 18 or not number[:17].isdigit():
        return False
    try:
        date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS))
    return _ID_CHECK[total % 11] == number[17].upper()


def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) checksum over a digit string."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _digits(s: str) -> str:
    return "".join(ch for ch in s if ch.isdigit())


def _card_valid(s: str) -> bool:
    """13–19 digits, grouped as cards are printed (one run, groups of 4 with a shorter tail, or Amex 4-6-5),
    Luhn-valid. The grouping rule keeps runs of dates ("2023-05-08 2023-05-09") out."""
    digits = _digits(s)
    if not 13 <= len(digits) <= 19:
        return False
    groups = [len(g) for g in re.split(r"[ -]", s)]
    grouped = (
        len(groups) == 1
        or groups in ([4, 6, 5], [4, 6, 4])
        or (all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4)
    )
    return grouped and luhn_valid(digits)


def _candidates(text: str) -> list[PiiHit]:
    out = [PiiHit(EMAIL, m.start(), m.end()) for m in _EMAIL_RE.finditer(text)]
    out += [PiiHit(ID_CARD, m.start(), m.end()) for m in _ID_CARD_RE.finditer(text) if id_card_valid(m.group())]
    out += [PiiHit(CARD, m.start(), m.end()) for m in _CARD_RE.finditer(text) if _card_valid(m.group())]
    for k, rx in enumerate(_PHONE_RES):
        for m in rx.finditer(text):
            if k == 2 and not 8 <= len(_digits(m.group())) <= 15:
                continue
            out.append(PiiHit(PHONE, m.start(), m.end()))
    return out


def find_pii(text: str) -> list[PiiHit]:
    """Non-overlapping PII spans of `text`, in text order (character offsets, end exclusive)."""
    if not text:
        return []
    chosen: list[PiiHit] = []
    for hit in sorted(_candidates(text), key=lambda h: (_PRIORITY[h.kind], h.start - h.end, h.start)):
        if all(hit.end <= c.start or hit.start >= c.end for c in chosen):
            chosen.append(hit)
    return sorted(chosen, key=lambda h: (h.start, h.end))


def redact(text: str) -> tuple[str, list[str]]:
    """`text` with every PII span replaced by its placeholder ("[EMAIL]", …), and the sorted distinct kinds found."""
    hits = find_pii(text)
    if not hits:
        return text, []
    parts, pos = [], 0
    for h in hits:
        parts += [text[pos : h.start], PLACEHOLDERS[h.kind]]
        pos = h.end
    parts.append(text[pos:])
    return "".join(parts), sorted({h.kind for h in hits})


def _kinds(text: str | None) -> set[str]:
    """PII kinds in `text`, counting placeholders left by an earlier redaction (so flagging is idempotent)."""
    if not text:
        return set()
    found = {h.kind for h in find_pii(text)}
    found |= {k for k, p in PLACEHOLDERS.items() if p in text}
    return found


# Every detectable span needs an "@" (email), a "+" and at least 8 digits (an international phone), or at least 10
# digits (US and landline phones 10, mobile 11, card 13, ID card 17); a placeholder needs a "[". Strings with none
# of these (most text, and dates: "2024-12-20" has 8 digits) are never scanned. Rust's \d is \p{Nd}, a superset of
# what Python's re counts as a digit, so the prefilter never drops a hit.
def _maybe_pii(value: pl.Expr) -> pl.Expr:
    """True where `value` could hold PII or a placeholder (cheap, vectorised; exact check in Python after)."""
    digits = value.str.count_matches(r"\d")
    return (
        value.str.contains("@", literal=True)
        | value.str.contains("[", literal=True)
        | (digits >= 10)
        | (value.str.contains("+", literal=True) & (digits >= 8))
    ).fill_null(False)


def _candidates_of(nodes: pa.Table) -> pl.DataFrame:
    """(row, col, pos, value) of every title/text string and keywords/aliases/entities element that may hold PII;
    pos is the element's index in its list (0 for the text columns)."""
    df = as_frame(nodes.select([*TEXT_COLUMNS, *LIST_COLUMNS])).with_row_index("row")
    parts = [
        df.select("row", pl.lit(c).alias("col"), pl.lit(0, pl.Int64).alias("pos"), pl.col(c).alias("value")).filter(
            _maybe_pii(pl.col("value"))
        )
        for c in TEXT_COLUMNS
    ]
    for c in LIST_COLUMNS:
        items = (
            df.select("row", pl.col(c).alias("value"))
            .filter(pl.col("value").list.len() > 0)
            .with_columns(pl.int_ranges(pl.col("value").list.len()).alias("pos"))
            .explode("value", "pos")
        )
        # one keyword or entity name recurs on many nodes (100k messages: 1.7M keywords, 2,065 distinct), so the
        # prefilter runs on the distinct strings
        maybe = items.select(pl.col("value").unique()).filter(_maybe_pii(pl.col("value"))).get_column("value")
        parts.append(
            items.filter(pl.col("value").is_in(maybe)).select(
                "row", pl.lit(c).alias("col"), pl.col("pos").cast(pl.Int64), "value"
            )
        )
    return pl.concat(parts)


def flag_nodes(nodes: pa.Table, redact_text: bool = False) -> pa.Table:
    """NODES with `pii` set to the sorted distinct kinds found in title/text/keywords/aliases/entities (null: none).

    With `redact_text`, those fields are rewritten with placeholders too. Rows keep their order and every
    other column; the raw store is not touched, so citations (raw_refs) still verify byte-exact.
    Per node: a row's output depends on that row alone (group key: the row; see pii_group_keys).
    Vectorised: a polars prefilter ("@", "[", "+" and 8 digits, or 10 digits) picks the distinct strings the
    regexes run on.
    """
    nodes = conform(nodes, NODES)
    cand = _candidates_of(nodes)
    distinct = cand.select("value").unique()  # the same string (an entity title, a date) recurs a lot
    values = distinct.get_column("value").to_list()
    found = {"kinds": pl.Series([sorted(_kinds(v)) for v in values], dtype=pl.List(pl.String))}
    if redact_text:
        found["redacted"] = pl.Series([redact(v)[0] for v in values], dtype=pl.String)
    cand = cand.join(distinct.with_columns(**found), on="value", how="left")
    flags = (
        cand.select("row", "kinds")
        .explode("kinds")
        .drop_nulls("kinds")
        .unique()
        .group_by("row")
        .agg(pl.col("kinds").sort())
    )
    rows = pl.DataFrame({"row": pl.int_range(0, nodes.num_rows, dtype=pl.UInt32, eager=True)})
    pii = rows.join(flags, on="row", how="left").sort("row").get_column("kinds")
    field = NODES.field("pii")
    out = nodes.set_column(nodes.schema.get_field_index("pii"), field, pii.to_arrow().cast(field.type))
    if redact_text:
        out = _redacted(out, cand)
    return out


def _redacted(nodes: pa.Table, cand: pl.DataFrame) -> pa.Table:
    """`nodes` with each candidate string replaced by its redaction (only rows holding a candidate change)."""
    changed = cand.filter(pl.col("redacted") != pl.col("value"))
    for c in (*TEXT_COLUMNS, *LIST_COLUMNS):
        mine = changed.filter(pl.col("col") == c)
        if mine.height == 0:
            continue
        col = as_frame(nodes.select([c])).with_row_index("row")
        if c in TEXT_COLUMNS:
            new = (
                col.join(mine.select("row", "redacted"), on="row", how="left")
                .sort("row")
                .select(pl.coalesce("redacted", c))
                .to_series()
            )
        else:
            touched = mine.select("row").unique()
            rebuilt = (
                col.join(touched, on="row", how="semi")
                .with_columns(pl.int_ranges(pl.col(c).list.len()).alias("pos"))
                .explode(c, "pos")
                .with_columns(pl.col("pos").cast(pl.Int64))
                .join(mine.select("row", "pos", "redacted"), on=["row", "pos"], how="left")
                .group_by("row", maintain_order=True)
                .agg(pl.coalesce("redacted", c).alias("rebuilt"))
            )
            new = col.join(rebuilt, on="row", how="left").sort("row").select(pl.coalesce("rebuilt", c)).to_series()
        field = NODES.field(c)
        nodes = nodes.set_column(nodes.schema.get_field_index(c), field, new.to_arrow().cast(field.type))
    return nodes


def pii_group_keys(nodes: pa.Table) -> pa.Table:
    """(tenant, id) of each row: flag_nodes is row-local, so any subset of rows flags exactly as in a full run."""
    return conform(nodes, NODES).select(["tenant", "id"])
