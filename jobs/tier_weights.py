"""A node's weight and what its FEEDBACK rows make of it (SPEC §8, jobs.tiers.promote; the rules and their seeds
are in jobs.tiers' module doc): pinned, activation, net feedback and recent use, replayed in Python for the nodes
with FEEDBACK rows up to as_of, and the closed-form decayed weight of every other node."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl
import pyarrow as pa

from jobs.decay import DecayRule, TierConfig, boost_schedule, counted_events, decayed_weight
from jobs.schema import FEEDBACK
from raw_store.frames import as_frame
from raw_store.lake import conform

USE_KINDS = frozenset({"hit", "upvote", "pin"})
FEEDBACK_KINDS = frozenset({"hit", "pin", "unpin", "upvote", "downvote"})


@dataclass
class _Feedback:
    """What one node's FEEDBACK rows make of it (the defaults: a node with none)."""

    pinned: bool
    unpinned: bool  # the last pin-state event is an unpin
    activation: int
    feedback: float
    recent_use: bool
    replay: list[tuple[datetime, float, bool]]  # decayed_weight's events


def _base_category(node_type: str | None) -> str:
    return "episode" if node_type == "Episode" else "fact"


def _assess_feedback(row: dict, events: list[tuple[datetime, str]], as_of: datetime, cfg: TierConfig) -> _Feedback:
    """Pinned, activation, net feedback and the weight's replay events of one node."""
    pin_events = sorted((t, k == "unpin") for t, k in events if k in ("pin", "unpin"))
    pinned = (not pin_events[-1][1]) if pin_events else bool(row.get("pinned"))
    uses = counted_events((t for t, k in events if k in USE_KINDS), timedelta(hours=cfg.cooldown_hours))
    boosted = [t for t, k in events if k == "upvote" or (cfg.boost_on_hit and k == "hit")]
    boosts = boost_schedule(boosted, cfg)
    penalties = boost_schedule([t for t, k in events if k == "downvote"], cfg, cfg.downvote_penalty)
    fb = round(sum(g for _, g in boosts) - sum(g for _, g in penalties), 9)
    last_use = max((t for t, k in events if k in USE_KINDS), default=None)
    recent = last_use is not None and as_of - last_use < timedelta(days=cfg.access_protection_days)
    return _Feedback(
        pinned=pinned,
        unpinned=bool(pin_events) and pin_events[-1][1],
        activation=len(uses),
        feedback=fb,
        recent_use=recent,
        replay=[(t, 0.0, True) for t in uses]
        + [(t, g, False) for t, g in boosts]
        + [(t, -g, False) for t, g in penalties],
    )


def days_us(days: float) -> int:
    """timedelta(days=…) in whole microseconds, as datetime rounds it."""
    return timedelta(days=days) // timedelta(microseconds=1)


def age_us(col: str | pl.Expr, as_of: datetime) -> pl.Expr:
    t = pl.col(col) if isinstance(col, str) else col
    return (pl.lit(as_of, dtype=pl.Datetime("us")) - t).dt.total_microseconds()


def decay_rule(cfg: TierConfig, category: str) -> DecayRule | None:
    return cfg.decay.get(category)


def feedback_columns(n: pl.DataFrame, feedback: pa.Table | None, as_of: datetime, cfg: TierConfig) -> pl.DataFrame:
    """(_row, pinned, unpinned, activation, feedback, recent_use, w_none, w_decay) of the nodes with FEEDBACK rows
    up to `as_of`, replayed in Python: w_none without decay, w_decay with their base category's rule."""
    schema = {
        "_row": pl.UInt32,
        "f_pinned": pl.Boolean,
        "f_unpinned": pl.Boolean,
        "f_activation": pl.Int64,
        "f_feedback": pl.Float64,
        "f_recent": pl.Boolean,
        "f_w_none": pl.Float64,
        "f_w_decay": pl.Float64,
    }
    if feedback is None or not feedback.num_rows:
        return pl.DataFrame(schema=schema)
    fb = as_frame(conform(feedback, FEEDBACK).select(["tenant", "node_id", "kind", "at"])).filter(
        pl.col("at").is_not_null()
        & (pl.col("at") <= pl.lit(as_of, dtype=pl.Datetime("us")))
        & pl.col("kind").is_in(sorted(FEEDBACK_KINDS))
    )
    events = {
        (t, i): list(zip(ats, kinds))
        for t, i, ats, kinds in fb.group_by(["tenant", "node_id"], maintain_order=True).agg("at", "kind").iter_rows()
    }
    if not events:
        return pl.DataFrame(schema=schema)
    keys = fb.select("tenant", pl.col("node_id").alias("id")).unique()
    rows = n.join(keys, on=["tenant", "id"], how="semi", nulls_equal=True).select(
        "_row", "tenant", "id", "type", "importance", "pinned", "last_seen", "first_seen", "time_start"
    )
    out: dict[str, list] = {k: [] for k in schema}
    for row in rows.iter_rows(named=True):
        f = _assess_feedback(row, events[(row["tenant"], row["id"])], as_of, cfg)
        base = cfg.default_importance if row["importance"] is None else float(row["importance"])
        start = row["last_seen"] or row["first_seen"] or row["time_start"]
        rule = decay_rule(cfg, _base_category(row["type"]))
        w_none = decayed_weight(base, start, f.replay, as_of, None)
        for k, v in (
            ("_row", row["_row"]),
            ("f_pinned", f.pinned),
            ("f_unpinned", f.unpinned),
            ("f_activation", f.activation),
            ("f_feedback", float(f.feedback)),
            ("f_recent", f.recent_use),
            ("f_w_none", w_none),
            ("f_w_decay", w_none if rule is None else decayed_weight(base, start, f.replay, as_of, rule)),
        ):
            out[k].append(v)
    return pl.DataFrame(out, schema=schema)


def plain_weights(n: pl.DataFrame, as_of: datetime, cfg: TierConfig) -> pl.DataFrame:
    """(_row, w_none, w_decay) of every node as if it had no feedback: decayed_weight with no events, i.e.
    round(max(0, importance × factor^periods), 9), computed once per distinct (category, importance, periods)."""
    start = pl.coalesce("last_seen", "first_seen", "time_start")
    age = age_us(start, as_of)
    periods = pl.lit(0, dtype=pl.Int64)
    for category in ("episode", "fact"):
        rule = decay_rule(cfg, category)
        if rule is not None:
            periods = (
                pl.when((pl.col("_cat") == category) & start.is_not_null() & (age > 0))
                .then(age // days_us(rule.period_days))
                .otherwise(periods)
            )
    w = n.select(
        "_row",
        "_cat",
        pl.col("importance").fill_null(cfg.default_importance).cast(pl.Float64).alias("b"),
        periods.alias("p"),
    ).with_columns(pl.col("b").cast(pl.String).alias("b_key"))
    distinct = w.group_by(["_cat", "b_key", "p"]).agg(pl.col("b").first())
    none, decay = [], []
    for cat, b, p in distinct.select("_cat", "b", "p").iter_rows():
        rule = decay_rule(cfg, cat)
        none.append(round(max(0.0, b), 9))
        decay.append(none[-1] if rule is None else round(max(0.0, b * rule.factor**p), 9))
    distinct = distinct.with_columns(
        pl.Series("w_none", none, dtype=pl.Float64), pl.Series("w_decay", decay, dtype=pl.Float64)
    )
    return w.join(distinct.drop("b"), on=["_cat", "b_key", "p"], how="left", maintain_order="left").select(
        "_row", "w_none", "w_decay"
    )
