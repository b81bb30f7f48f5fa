"""Materialization metadata shared by the assets: row count, column schema, markdown preview, PNG charts and the
"what changed in this run" summary.

Dagster 1.13 has no image metadata type; its UI renders a markdown entry's inline `data:image/png;base64,…`
image, so each chart is a small PNG (600×300) embedded in `dg.MetadataValue.md`. Charts are drawn with
matplotlib's Agg canvas (no pyplot state, no display) with fixed fonts and sizes and no timestamp, so the same
table gives the same bytes; matplotlib is imported on first use, keeping `import assets.definitions` fast. A chart
is a function of its figures alone, so a process keeps the last ones it drew (`_memo`: ~0.1 s each to draw).
"""

from __future__ import annotations

import base64
import functools
import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
import polars as pl
import pyarrow as pa

from raw_store.frames import as_frame

if TYPE_CHECKING:  # matplotlib loads only when a chart is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

CHART_SIZE = (6.0, 3.0)  # inches at CHART_DPI: 600×300 px
CHART_DPI = 100
MAX_BARS = 12  # the rest is one "other" bar
MEMO_CHARTS = 32  # charts a process keeps (see _memo)
TIER_ORDER = ("new", "short", "mid", "long")
_STYLE: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "memctl",
    "path.simplify": True,
}
BLUE, RED, _GREY = "#3b75af", "#c0504d", "#8c8c8c"
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


def png_markdown(png: bytes, alt: str, caption: str = "") -> dg.MetadataValue:
    """A PNG as a markdown metadata entry (inline data URI), with an optional caption line under it."""
    image = f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"
    return dg.MetadataValue.md(image + (f"\n\n{caption}" if caption else ""))


def _memo(draw: Callable[..., bytes]) -> Callable[..., bytes]:
    """`draw` with the PNGs of its last MEMO_CHARTS argument sets kept (mappings are keyed by their items in order)."""
    kept: OrderedDict[Hashable, bytes] = OrderedDict()
    lock = threading.Lock()

    def frozen(value: object) -> Hashable:
        if isinstance(value, Mapping):
            return tuple((k, frozen(v)) for k, v in value.items())
        return tuple(frozen(v) for v in value) if isinstance(value, list | tuple) else value

    @functools.wraps(draw)
    def cached(*args: Any, **kwargs: Any) -> bytes:
        key = (frozen(args), frozen(sorted(kwargs.items())))
        with lock:
            if key in kept:
                kept.move_to_end(key)
                return kept[key]
        png = draw(*args, **kwargs)
        with lock:
            kept[key] = png
            while len(kept) > MEMO_CHARTS:
                kept.popitem(last=False)
        return png

    return cached


@_memo
def bar_chart_png(
    counts: Mapping[str, int], title: str, xlabel: str, colour: str = BLUE, empty: str = "nothing to show"
) -> bytes:
    """Horizontal bars, largest on top, each labelled with its count; past MAX_BARS the rest is "other"."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) > MAX_BARS:
        items = items[: MAX_BARS - 1] + [("other", sum(v for _, v in items[MAX_BARS - 1 :]))]
    return _bars(items, title, xlabel, [colour] * len(items), empty)


def tier_flow_png(promotions: pa.Table, tiers_now: Mapping[str, int]) -> bytes:
    """Tier flow short → mid → long: a box per tier (nodes in it now), new nodes entering from above, promotions
    to the next tier as arrows between boxes (demotions under them, in grey), any other move as a footnote."""
    return _tier_flow_png(tier_flows(promotions), tiers_now)


@_memo
def _tier_flow_png(flows: Mapping[tuple[str, str], int], tiers_now: Mapping[str, int]) -> bytes:
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    x = {"short": 2.0, "mid": 5.0, "long": 8.0}
    with _style():
        fig = Figure(figsize=CHART_SIZE, dpi=CHART_DPI)
        ax = fig.subplots()
        ax.set_xlim(0, 10)
        ax.set_ylim(0, 5)
        ax.set_axis_off()
        for tier, cx in x.items():
            ax.add_patch(
                FancyBboxPatch(
                    (cx - 1, 1.5),
                    2,
                    1.3,
                    boxstyle="round,pad=0.05,rounding_size=0.15",
                    facecolor=_TIER_COLOURS[tier],
                    edgecolor="none",
                )
            )
            ink = "white" if tier != "short" else "#08306b"
            ax.text(cx, 2.35, tier, ha="center", va="center", fontsize=11, fontweight="bold", color=ink)
            ax.text(cx, 1.85, f"{tiers_now.get(tier, 0):,} nodes now", ha="center", va="center", fontsize=8, color=ink)
            _arrow(
                ax,
                (cx, 4.1),
                (cx, 2.9),
                flows.get(("new", tier), 0),
                f"+{flows.get(('new', tier), 0):,} new",
                (cx, 4.35),
                BLUE,
            )
        for a, b in (("short", "mid"), ("mid", "long")):
            n, back = flows.get((a, b), 0), flows.get((b, a), 0)
            _arrow(ax, (x[a] + 1.1, 2.45), (x[b] - 1.1, 2.45), n, f"{n:,}", (x[a] + 1.5, 2.75), BLUE)
            _arrow(ax, (x[b] - 1.1, 1.8), (x[a] + 1.1, 1.8), back, f"{back:,}", (x[a] + 1.5, 1.45), _GREY)
        adjacent = {("short", "mid"), ("mid", "long"), ("mid", "short"), ("long", "mid")}
        others = [f"{a} → {b}: {n:,}" for (a, b), n in flows.items() if a != "new" and (a, b) not in adjacent]
        footnote = (
            "other moves:  " + "   ·   ".join(others) if others else "promotions move right, demotions (grey) left"
        )
        ax.text(5, 0.55, footnote, ha="center", va="center", fontsize=8, color="#444444")
        ax.set_title("Tier flow short → mid → long (promotions over all runs)")
        return _png(fig)


def _arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    n: int,
    label: str,
    at: tuple[float, float],
    colour: str,
) -> None:
    width = 0.8 + min(6.0, n**0.5 / 2) if n else 0.8
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        arrowprops={"arrowstyle": "-|>", "lw": width, "color": colour if n else "#cccccc", "mutation_scale": 12},
    )
    ax.text(*at, label, ha="center", va="center", fontsize=9, color=colour if n else "#aaaaaa")


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
    ids = as_frame(nodes.select(["id"])).select(pl.col("id").hash(seed=3)).unique()
    e = as_frame(edges.select(["src", "dst"]))
    ends = pl.concat([e.select(pl.col(end).hash(seed=3).alias("id")) for end in ("src", "dst")])
    per_node = ends.join(ids, on="id", how="semi").group_by("id").len()
    hist = dict(per_node.group_by("len").len(name="n").iter_rows())
    isolated = ids.height - per_node.height
    return dict(sorted(({0: isolated} if isolated else {}).items() | hist.items()))


@_memo
def degree_chart_png(hist: Mapping[int, int]) -> bytes:
    """Log-log degree distribution: how many nodes have k edges (isolated nodes are counted in the title)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    with _style():
        fig = Figure(figsize=CHART_SIZE, dpi=CHART_DPI)
        ax = fig.subplots()
        points = sorted((k, n) for k, n in hist.items() if k > 0)
        isolated = hist.get(0, 0)
        total = sum(hist.values())
        if points:
            ks, ns = zip(*points)
            ax.loglog(ks, ns, marker="o", markersize=4, linewidth=0.8, color=BLUE)
            for axis in (ax.xaxis, ax.yaxis):
                axis.set_major_locator(LogLocator(base=10))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("edges per node (degree k, log scale)")
            ax.set_ylabel("nodes with degree k (log)")
            ax.grid(True, which="major", linewidth=0.4, color="#dddddd")
        else:
            _empty(ax, "no edges yet")
        ax.set_title(f"Degree distribution: {total} nodes, max degree {max(hist, default=0)}, {isolated} without edges")
        return _png(fig)


def _bars(
    items: list[tuple[str, int]], title: str, xlabel: str, colours: list[str], empty: str, keep_order: bool = False
) -> bytes:
    from matplotlib.figure import Figure

    with _style():
        fig = Figure(figsize=CHART_SIZE, dpi=CHART_DPI)
        ax = fig.subplots()
        if items:
            labels = [_ascii(k) for k, _ in items][::-1]  # first item on top
            values = [v for _, v in items][::-1]
            bars = ax.barh(labels, values, color=colours[::-1], height=0.7)
            ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3, fontsize=8)
            ax.set_xlim(0, max(values) * 1.15 or 1)
            ax.set_xlabel(xlabel)
        else:
            _empty(ax, empty)
        ax.set_title(f"{title} — {sum(v for _, v in items):,} in all" if items and not keep_order else title)
        return _png(fig)


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, color=_GREY, transform=ax.transAxes)
    ax.set_axis_off()


def _ascii(label: str) -> str:
    """Chart labels are codes and type names; anything else (e.g. CJK) would draw as boxes in DejaVu Sans."""
    return "".join(c if c.isascii() or c == "→" else "?" for c in label)


def _style() -> AbstractContextManager[None]:
    import matplotlib

    return matplotlib.rc_context(_STYLE)


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.tight_layout()
    buf = io.BytesIO()
    # no "Software"/date chunks: the same table gives the same bytes
    fig.savefig(buf, format="png", dpi=CHART_DPI, metadata={"Software": None})
    return buf.getvalue()


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
    """KEYS rows of a graph table (kind "n" nodes, "e" edges), sorted by hash."""
    import polars as pl

    refs = pl.col("raw_refs").list.len().fill_null(0) if "raw_refs" in table.column_names else pl.lit(0)
    frame = as_frame(table.select([c for c in ("tenant", "id", "raw_refs") if c in table.column_names]))
    out = frame.select(
        pl.lit(kind).alias("kind"),
        (pl.struct("tenant", "id").hash(seed=7) // (1 << 32)).cast(pl.UInt32).alias("h"),
        refs.cast(pl.Int32).alias("refs"),
    ).sort("h")
    return out.to_arrow().cast(KEYS)


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
    """Compare the `kind` rows of two KEYS tables (previous None: first run, everything is added)."""
    import polars as pl

    now = as_frame(current).filter(pl.col("kind") == kind)
    if previous is None or previous.num_rows == 0:
        return TableChange(now.height, now.height, 0, 0)
    before = as_frame(previous).filter(pl.col("kind") == kind)
    now, before = (t.group_by("h").agg(pl.col("refs").max()) for t in (now, before))  # (colliding keys: one)
    joined = now.join(before, on="h", how="full", suffix="_before", coalesce=True)
    added = joined.filter(pl.col("refs_before").is_null()).height
    removed = joined.filter(pl.col("refs").is_null()).height
    merged = joined.filter(pl.col("refs") > pl.col("refs_before")).height
    return TableChange(now.height, added, merged, removed)


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
