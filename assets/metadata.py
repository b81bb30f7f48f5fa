"""Materialization metadata shared by the assets: row count, column schema, markdown preview, SVG charts and the
"what changed in this run" summary.

Dagster 1.13 has no image metadata type; its UI renders a markdown entry's inline `data:image/…;base64,…` image,
so each chart is a small SVG (600×300) embedded in `dg.MetadataValue.md`. The charts are bars, a log-log line and
boxes with arrows: written as SVG text they cost well under a millisecond and no import, where matplotlib's Agg
PNGs cost ~0.1 s each plus ~1 s to import (a tenth of a small `memctl materialize`). The viewer's browser draws
the text, so Chinese labels show as they are; the same figures give the same bytes.
"""

from __future__ import annotations

import base64
import html
import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from raw_store.frames import as_frame, sliced

CHART_W, CHART_H = 600, 300  # px
MAX_BARS = 12  # the rest is one "other" bar
TIER_ORDER = ("new", "short", "mid", "long")
# the viewer's fonts: DejaVu Sans where installed (Debian's default), a CJK face for Chinese labels, else any sans
FONTS = "DejaVu Sans, Noto Sans CJK SC, WenQuanYi Zen Hei, sans-serif"
FONT_PX, TICK_PX, TITLE_PX = 12, 11, 13
PLOT_TOP = 34  # px under the title
LABEL_MAX_PX = 180  # a bar label longer than this is cut with an ellipsis
GRID, AXIS = "#e4e4e4", "#555555"
BLUE, RED, _GREY, _FAINT = "#3b75af", "#c0504d", "#8c8c8c", "#cccccc"
_TIER_COLOURS = {"short": "#9ecae1", "mid": "#4292c6", "long": "#08519c", "new": _GREY}


def table_metadata(table: pa.Table, preview_columns: Sequence[str] = (), rows: int = 5) -> dict:
    """Row count, column schema and a small markdown preview of `table`."""
    schema = dg.TableSchema(columns=[dg.TableColumn(f.name, str(f.type)) for f in table.schema])
    meta = {"dagster/row_count": table.num_rows, "dagster/column_schema": schema}
    cols = [c for c in preview_columns if c in table.column_names]
    if cols and table.num_rows:
        meta["preview"] = dg.MetadataValue.md(markdown_table(table.select(cols).slice(0, rows).to_pylist(), cols))
    return meta


def markdown_table(rows: list[dict], cols: Sequence[str], width: int = 60) -> str:
    def cell(v: object) -> str:
        s = "" if v is None else str(v)
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"

    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(cell(r.get(c)) for c in cols) + " |\n" for r in rows)


# -- pictures -----------------------------------------------------------------------------------------------


def svg_markdown(svg: str, alt: str, caption: str = "") -> dg.MetadataValue:
    """An SVG chart as a markdown metadata entry (inline data URI), with an optional caption line under it."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return dg.MetadataValue.md(f"![{alt}](data:image/svg+xml;base64,{data})" + (f"\n\n{caption}" if caption else ""))


def bar_chart_svg(
    counts: Mapping[str, int], title: str, xlabel: str, colour: str = BLUE, empty: str = "nothing to show"
) -> str:
    """Horizontal bars, largest on top, each labelled with its count; past MAX_BARS the rest is "other"."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) > MAX_BARS:
        items = items[: MAX_BARS - 1] + [("other", sum(v for _, v in items[MAX_BARS - 1 :]))]
    svg = _Svg(f"{title} — {sum(v for _, v in items):,} in all" if items else title)
    if not items:
        return svg.empty(empty)
    left = min(LABEL_MAX_PX, max(_text_px(k, FONT_PX) for k, _ in items)) + 12
    plot = _Box(left, PLOT_TOP, CHART_W - 56, CHART_H - 44)  # right: room for the longest count label
    top = max(v for _, v in items)
    ticks = _nice_ticks(top)
    scale = plot.width / ticks[-1]
    for t in ticks:
        x = plot.x0 + t * scale
        svg.line(x, plot.y0, x, plot.y1, GRID)
        svg.text(x, plot.y1 + 13, f"{t:,g}", size=TICK_PX, anchor="middle")
    band = plot.height / len(items)
    for i, (label, value) in enumerate(items):
        y = plot.y0 + i * band
        svg.rect(plot.x0, y + band * 0.15, value * scale, band * 0.7, colour)
        mid = y + band / 2 + TICK_PX * 0.35
        svg.text(plot.x0 - 6, mid, _fit(label, left - 12, FONT_PX), anchor="end")
        svg.text(plot.x0 + value * scale + 4, mid, f"{value:,}", size=TICK_PX)
    svg.line(plot.x0, plot.y0, plot.x0, plot.y1, AXIS)
    svg.line(plot.x0, plot.y1, plot.x1, plot.y1, AXIS)
    svg.text((plot.x0 + plot.x1) / 2, CHART_H - 8, xlabel, anchor="middle")
    return svg.done()


def tier_flow_svg(promotions: pa.Table, tiers_now: Mapping[str, int]) -> str:
    """Tier flow short → mid → long: a box per tier (nodes in it now), new nodes entering from above, promotions
    to the next tier as arrows between boxes (demotions under them, in grey), any other move as a footnote."""
    flows = tier_flows(promotions)
    svg = _Svg("Tier flow short → mid → long (promotions over all runs)")
    centre = {"short": 110.0, "mid": 300.0, "long": 490.0}
    box_w, box_y, box_h = 120.0, 130.0, 70.0
    for tier, cx in centre.items():
        ink = "white" if tier != "short" else "#08306b"
        svg.rect(cx - box_w / 2, box_y, box_w, box_h, _TIER_COLOURS[tier], rx=8)
        svg.text(cx, box_y + 30, tier, size=15, anchor="middle", colour=ink, bold=True)
        svg.text(cx, box_y + 52, f"{tiers_now.get(tier, 0):,} nodes now", size=TICK_PX, anchor="middle", colour=ink)
        n = flows.get(("new", tier), 0)
        svg.text(cx, 52, f"+{n:,} new", anchor="middle", colour=BLUE if n else _FAINT)
        svg.arrow(cx, 60, cx, box_y - 4, n, BLUE)
    for a, b in (("short", "mid"), ("mid", "long")):
        x0, x1 = centre[a] + box_w / 2 + 6, centre[b] - box_w / 2 - 6
        n, back = flows.get((a, b), 0), flows.get((b, a), 0)
        svg.arrow(x0, box_y + 20, x1, box_y + 20, n, BLUE)
        svg.text((x0 + x1) / 2, box_y + 8, f"{n:,}", anchor="middle", colour=BLUE if n else _FAINT)
        svg.arrow(x1, box_y + 52, x0, box_y + 52, back, _GREY)
        svg.text((x0 + x1) / 2, box_y + 72, f"{back:,}", anchor="middle", colour=_GREY if back else _FAINT)
    adjacent = {("short", "mid"), ("mid", "long"), ("mid", "short"), ("long", "mid")}
    others = [f"{a} → {b}: {n:,}" for (a, b), n in flows.items() if a != "new" and (a, b) not in adjacent]
    footnote = "other moves:  " + "   ·   ".join(others) if others else "promotions move right, demotions (grey) left"
    svg.text(CHART_W / 2, 262, footnote, size=TICK_PX, anchor="middle", colour="#444444")
    return svg.done()


def tier_flows(promotions: pa.Table) -> dict[tuple[str, str], int]:
    """{(from_tier, to_tier): rows} over the rows that change tier, ordered new/short/mid/long → short/mid/long."""
    moves = (
        as_frame(promotions.select(["from_tier", "to_tier"]))
        .with_columns(pl.col("from_tier").fill_null("new"))
        .filter(pl.col("to_tier").is_not_null() & (pl.col("from_tier") != pl.col("to_tier")))
        .group_by("from_tier", "to_tier")
        .len()
    )
    counts = {(a, b): n for a, b, n in moves.iter_rows()}
    rank = {t: i for i, t in enumerate(TIER_ORDER)}
    return dict(sorted(counts.items(), key=lambda kv: (rank.get(kv[0][0], 9), rank.get(kv[0][1], 9), kv[0])))


def degrees(nodes: pa.Table, edges: pa.Table) -> dict[int, int]:
    """{degree: number of nodes} over `nodes`; an edge end that is not a node (a RawChunk) is not counted. Ids are
    matched by a 64-bit hash (a chart's figures: a collision would merge two nodes' counts, ~1e-8 at 1M nodes), 3x
    cheaper than joining and grouping the id strings of every edge end (~2 CPU-s at 100k messages)."""
    ids = sliced(nodes.select(["id"]), _id_hashes).unique()
    # the ends' hashes (a slice at a time) sorted and counted as runs: 3x cheaper than grouping them (7 s of a
    # 1M-message append)
    ends = pl.concat([sliced(edges.select([end]), _id_hashes) for end in ("src", "dst")]).sort()
    runs = ends.rle().struct.unnest()  # (len, value)
    per_node = runs.filter(pl.col("value").is_in(ids.implode()))
    hist = dict(per_node.group_by("len").len(name="n").iter_rows())
    isolated = ids.len() - per_node.height
    return dict(sorted(({0: isolated} if isolated else {}).items() | hist.items()))


def _id_hashes(frame: pl.DataFrame) -> pl.Series:
    return frame.to_series().hash(seed=3)


def degree_chart_svg(hist: Mapping[int, int]) -> str:
    """Log-log degree distribution: how many nodes have k edges (isolated nodes are counted in the title)."""
    points = sorted((k, n) for k, n in hist.items() if k > 0 and n > 0)
    total, isolated = sum(hist.values()), hist.get(0, 0)
    svg = _Svg(f"Degree distribution: {total} nodes, max degree {max(hist, default=0)}, {isolated} without edges")
    if not points:
        return svg.empty("no edges yet")
    plot = _Box(64, PLOT_TOP, CHART_W - 20, CHART_H - 44)
    xs = _Decades([k for k, _ in points], plot.x0, plot.x1)
    ys = _Decades([n for _, n in points], plot.y1, plot.y0)  # upwards
    for p in xs.powers:
        svg.line(xs.at(p), plot.y0, xs.at(p), plot.y1, GRID)
        svg.text(xs.at(p), plot.y1 + 13, f"{p:g}", size=TICK_PX, anchor="middle")
    for p in ys.powers:
        svg.line(plot.x0, ys.at(p), plot.x1, ys.at(p), GRID)
        svg.text(plot.x0 - 5, ys.at(p) + TICK_PX * 0.35, f"{p:g}", size=TICK_PX, anchor="end")
    svg.line(plot.x0, plot.y0, plot.x0, plot.y1, AXIS)
    svg.line(plot.x0, plot.y1, plot.x1, plot.y1, AXIS)
    at = [(xs.at(k), ys.at(n)) for k, n in points]
    svg.polyline(at, BLUE)
    for x, y in at:
        svg.circle(x, y, 2.5, BLUE)
    svg.text((plot.x0 + plot.x1) / 2, CHART_H - 8, "edges per node (degree k, log scale)", anchor="middle")
    svg.text(14, (plot.y0 + plot.y1) / 2, "nodes with degree k (log)", anchor="middle", rotate=True)
    return svg.done()


@dataclass(frozen=True)
class _Box:
    """A plot area in pixels (y grows downwards, as in SVG)."""

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0


class _Decades:
    """A log10 axis over whole decades that hold `values`, mapped onto pixels lo..hi."""

    def __init__(self, values: Sequence[int], lo: float, hi: float) -> None:
        first, last = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
        self.first, self.last = first, max(last, first + 1)
        self.lo, self.hi = lo, hi
        self.powers = [10.0**e for e in range(self.first, self.last + 1)]

    def at(self, value: float) -> float:
        return self.lo + (math.log10(value) - self.first) / (self.last - self.first) * (self.hi - self.lo)


class _Svg:
    """A 600×300 chart as SVG text: a title, then shapes and text in pixels. Coordinates are rounded to 0.1 px and
    nothing depends on the time or the machine, so the same figures give the same bytes."""

    def __init__(self, title: str) -> None:
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_W}" height="{CHART_H}" '
            f'viewBox="0 0 {CHART_W} {CHART_H}" font-family="{FONTS}" font-size="{FONT_PX}">',
            f'<rect width="{CHART_W}" height="{CHART_H}" fill="white"/>',
        ]
        self.text(CHART_W / 2, 20, title, size=TITLE_PX, anchor="middle")

    def text(
        self,
        x: float,
        y: float,
        text: str,
        *,
        size: int = FONT_PX,
        anchor: str = "start",
        colour: str = "#222222",
        bold: bool = False,
        rotate: bool = False,
    ) -> None:
        attrs = f'x="{x:.1f}" y="{y:.1f}" fill="{colour}"'
        attrs += f' font-size="{size}"' if size != FONT_PX else ""
        attrs += f' text-anchor="{anchor}"' if anchor != "start" else ""
        attrs += ' font-weight="bold"' if bold else ""
        attrs += f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
        self.parts.append(f"<text {attrs}>{html.escape(text, quote=False)}</text>")

    def line(self, x0: float, y0: float, x1: float, y1: float, colour: str, width: float = 1.0) -> None:
        self.parts.append(
            f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{colour}" '
            f'stroke-width="{width:.1f}"/>'
        )

    def rect(self, x: float, y: float, w: float, h: float, colour: str, rx: float = 0) -> None:
        corner = f' rx="{rx:g}"' if rx else ""
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"{corner} fill="{colour}"/>')

    def circle(self, x: float, y: float, r: float, colour: str) -> None:
        self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:g}" fill="{colour}"/>')

    def polyline(self, points: Sequence[tuple[float, float]], colour: str) -> None:
        at = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polyline points="{at}" fill="none" stroke="{colour}" stroke-width="1.2"/>')

    def arrow(self, x0: float, y0: float, x1: float, y1: float, n: int, colour: str) -> None:
        """A shaft as wide as the flow (~sqrt n) ending in a fixed-size head at (x1, y1); a flow of 0 is faint."""
        colour = colour if n else _FAINT
        width = 1.1 + min(8.0, n**0.5 / 1.5) if n else 1.1
        length = math.hypot(x1 - x0, y1 - y0)
        ux, uy = (x1 - x0) / length, (y1 - y0) / length
        head = 10.0
        self.line(x0, y0, x1 - ux * head, y1 - uy * head, colour, width)
        half = max(5.0, width * 0.9)
        points = [(x1, y1), (x1 - ux * head - uy * half, y1 - uy * head + ux * half)]
        points.append((x1 - ux * head + uy * half, y1 - uy * head - ux * half))
        at = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polygon points="{at}" fill="{colour}"/>')

    def empty(self, text: str) -> str:
        self.text(CHART_W / 2, CHART_H / 2, text, size=TITLE_PX, anchor="middle", colour=_GREY)
        return self.done()

    def done(self) -> str:
        return "\n".join([*self.parts, "</svg>"]) + "\n"


def _nice_ticks(top: float) -> list[float]:
    """0 and 3–6 round steps (1, 2 or 5 × 10^k) whose last is at least `top`."""
    raw = max(top, 1) / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(max(top, 1) / step) + 1)]


def _text_px(text: str, size: int) -> float:
    """Rough rendered width: East Asian wide characters ~1 em, others ~0.6 em (label columns only need a bound)."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else size * 0.6 for c in text)


def _fit(text: str, px: float, size: int) -> str:
    """`text` cut with an ellipsis to fit `px`."""
    if _text_px(text, size) <= px:
        return text
    while text and _text_px(text + "…", size) > px:
        text = text[:-1]
    return text + "…"


# -- what changed in this run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TableChange:
    """Rows of a graph table vs the previous run's, keyed by (tenant, id)."""

    total: int
    added: int  # ids not there before
    merged: int  # ids kept whose raw_refs grew: new evidence merged into an existing memory
    removed: int  # ids gone (forgotten, superseded, or no longer derived)


# A row's key as a 32-bit hash of (tenant, id), with its raw_refs count: the previous build's keys, ~2 bytes a row
# (sorted, delta-encoded). A hash collision makes one added row count as kept: at 2 million rows ~0.05 % of them, well
# inside what a "what changed" summary needs.
KEYS = pa.schema([("kind", pa.string()), ("h", pa.uint32()), ("refs", pa.int32())])


def row_keys(table: pa.Table, kind: str) -> pa.Table:
    """KEYS rows of a graph table (kind "n" nodes, "e" edges), sorted by hash. The raw_refs counts are read from the
    lists' offsets in Arrow: only the key columns are taken to polars (the edges' raw_refs are ~0.9 GB at 1M)."""
    if "raw_refs" in table.column_names:
        refs = pl.Series(pc.fill_null(pc.list_value_length(table.column("raw_refs")), 0)).cast(pl.Int32)
    else:
        refs = pl.repeat(0, table.num_rows, dtype=pl.Int32, eager=True)
    out = as_frame(table.select(["tenant", "id"])).select(
        pl.lit(kind).alias("kind"),
        (pl.struct("tenant", "id").hash(seed=7) // (1 << 32)).cast(pl.UInt32).alias("h"),
        refs.alias("refs"),
    )
    return out.sort("h").to_arrow().cast(KEYS)


def write_keys(table: pa.Table, path: Path) -> None:
    """KEYS rows, delta-encoded (sorted hashes differ by little), written atomically."""
    import io

    import pyarrow.parquet as pq

    from raw_store.lake import write_bytes_atomic

    buf = io.BytesIO()
    pq.write_table(
        table.cast(KEYS),
        buf,
        compression="zstd",
        use_dictionary=["kind"],
        column_encoding={"h": "DELTA_BINARY_PACKED", "refs": "DELTA_BINARY_PACKED"},
    )
    write_bytes_atomic(path, buf.getvalue())


def key_change(previous: pa.Table | None, current: pa.Table, kind: str) -> TableChange:
    """Compare the `kind` rows of two KEYS tables (previous None: first run, everything is added).

    On the sorted hashes (row_keys writes them sorted) with numpy: grouping and fully joining the edges' 15M hashes
    at 1M messages took ~20 CPU-s, a merge of two sorted arrays takes well under one."""
    if previous is None or previous.num_rows == 0:
        n = int(pc.sum(pc.equal(current.column("kind"), kind)).as_py() or 0)
        return TableChange(n, n, 0, 0)
    now_h, now_refs = _max_refs_by_hash(current, kind)
    before_h, before_refs = _max_refs_by_hash(previous, kind)
    at = np.minimum(np.searchsorted(before_h, now_h), max(len(before_h) - 1, 0))
    found = before_h[at] == now_h if len(before_h) else np.zeros(len(now_h), bool)
    matched = int(found.sum())
    merged = int((now_refs[found] > before_refs[at[found]]).sum())
    return TableChange(len(now_h), len(now_h) - matched, merged, len(before_h) - matched)


def _max_refs_by_hash(keys: pa.Table, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct hashes of the `kind` rows of a KEYS table, ascending, and the largest refs of each (colliding
    keys count as one)."""
    rows = keys.filter(pc.equal(keys.column("kind"), kind))
    h = rows.column("h").to_numpy()
    refs = pc.fill_null(rows.column("refs"), 0).to_numpy()
    if len(h) > 1 and not (h[1:] >= h[:-1]).all():  # a file written otherwise: sorted here
        order = np.argsort(h, kind="stable")
        h, refs = h[order], refs[order]
    if not len(h):
        return h, refs
    starts = np.flatnonzero(np.concatenate([[True], h[1:] != h[:-1]]))
    return h[starts], np.maximum.reduceat(refs, starts)


def table_change(previous: pa.Table | None, current: pa.Table) -> TableChange:
    """Compare `current` with `previous` (None: first run, everything is added) by (tenant, id) and raw_refs."""
    return key_change(None if previous is None else row_keys(previous, "n"), row_keys(current, "n"), "n")


@dataclass(frozen=True)
class RunChanges:
    """What one lake build changed: inbox files and messages since the previous build, graph rows, forgetting."""

    files: int  # inbox files (partitions) in the lake
    files_ingested: int  # … (re-)ingested since the previous complete lake build
    messages: int  # messages in the lake
    messages_ingested: int  # … of them in the files ingested since
    nodes: TableChange
    edges: TableChange
    forget_requests: int
    messages_forgotten: int  # messages held back by the forget requests, lake-wide

    def metadata(self) -> dict:
        """A markdown summary plus one number per figure (numbers are plotted across runs by the UI)."""
        return {
            "what_changed": dg.MetadataValue.md(self.markdown()),
            "files_ingested": self.files_ingested,
            "messages_ingested": self.messages_ingested,
            "nodes_added": self.nodes.added,
            "nodes_merged": self.nodes.merged,
            "nodes_removed": self.nodes.removed,
            "edges_added": self.edges.added,
            "edges_merged": self.edges.merged,
            "edges_removed": self.edges.removed,
        }

    def markdown(self) -> str:
        def signed(n: int, sign: str) -> str:
            return f"{sign}{n:,}" if n else "0"

        rows = "".join(
            f"| {name} | {c.total:,} | {signed(c.added, '+')} | {c.merged:,} | {signed(c.removed, '−')} |\n"
            for name, c in (("nodes", self.nodes), ("edges", self.edges))
        )
        return (
            f"**What changed in this run** (vs the previous lake build)\n\n"
            f"- files ingested: **{self.files_ingested}** of {self.files} in the inbox\n"
            f"- messages in them: **{self.messages_ingested:,}** ({self.messages:,} in the lake)\n"
            f"- forgotten: **{self.messages_forgotten:,}** messages held back by "
            f"{self.forget_requests} forget request{'s' if self.forget_requests != 1 else ''}\n\n"
            "| table | rows | added | merged (more evidence) | removed |\n|---|---|---|---|---|\n" + rows
        )
