"""The `promotions` table of promotion and decay (SPEC §8, jobs.tiers.promote): one row per node whose tier,
category or status differs from its previous row, with the triggers of what changed as its reason."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pyarrow as pa

from jobs.decay import TierConfig
from jobs.schema import PROMOTIONS
from raw_store.lake import conform

# Versioned rule id: the provenance of the PROMOTIONS rows (carried once its schema has a provenance column;
# conform drops it until then). jobs.tiers' review rows have their own, RULE_REVIEW.
RULE_PROMOTION = "jobs.tiers.promotion.v1"


# Reasons are boolean columns, one per reason text ("slot"); promotions joins the texts of the slots that hold,
# in this order (tier, then category, then status), each text once.
def _tier_slots(cfg: TierConfig) -> list[tuple[str, str]]:
    return [
        ("r_pin", "pin"),
        ("r_down", "downvote"),
        ("r_age_mid", f"age>={cfg.short_days:g}d"),
        ("r_topic", f"topic_repetition>={cfg.topic_repetition}"),
        ("r_activation", f"activation>={cfg.activation_threshold}"),
        ("r_age_long", f"age>={cfg.long_days:g}d"),
        (
            "r_consistent",
            f"consistent:sessions>={cfg.min_sessions},sources>={cfg.min_sources},"
            f"confidence>={cfg.confidence_threshold:g}",
        ),
        ("r_overflow", f"overflow:{cfg.overflow_strategy}"),
        ("r_occupancy", f"importance>={cfg.transfer_threshold:g}:occupancy>={cfg.transfer_occupancy:.0%}"),
    ]


def _category_slots(cfg: TierConfig) -> list[tuple[str, str]]:
    return [
        ("c_pin", "core:pin"),
        ("c_down", "downvote"),
        ("c_weight", f"core:weight>={cfg.core_weight:g},activation>={cfg.core_activation}"),
        ("c_preference", f"core:preference_sessions>={cfg.core_preference_sessions}"),
        ("c_unpin", "unpin"),
    ]


def _status_slots(cfg: TierConfig) -> list[tuple[str, str]]:
    return [
        ("s_restore_pin", "restore:pin"),
        ("s_restore_core", "restore:core"),
        ("s_restore_access", "restore:access"),
        ("s_aged", f"archive:episode_age>={cfg.episode_archive_days:g}d"),
        ("s_overflow", f"overflow:{cfg.overflow_strategy}"),
    ]


def promotions(n: pl.DataFrame, as_of: datetime, cfg: TierConfig) -> pa.Table:
    """PROMOTIONS: one row per node whose tier, category or status differs from its previous row (all: none)."""
    new = ~pl.col("has_prev")
    ch_tier = new | pl.col("prev_tier").ne_missing(pl.col("tier"))
    ch_cat = new | pl.col("prev_category").ne_missing(pl.col("category"))
    ch_status = new | pl.col("prev_status").ne_missing(pl.col("new_status"))
    pieces: list[pl.Expr] = []
    said: dict[str, pl.Expr] = {}  # a text said by an earlier slot is not said again (several slots may share one)
    for changed, slots in (
        (ch_tier, _tier_slots(cfg)),
        (ch_cat, _category_slots(cfg)),
        (ch_status, _status_slots(cfg)),
    ):
        for col, text in slots:
            holds = changed & pl.col(col)
            pieces.append(pl.when(holds & ~said[text] if text in said else holds).then(pl.lit(text)))
            said[text] = said[text] | holds if text in said else holds
    reasons = pl.concat_str(pieces, separator="; ", ignore_nulls=True)
    rows = n.filter(ch_tier | ch_cat | ch_status).select(
        "tenant",
        pl.col("id").alias("node_id"),
        pl.col("prev_tier").alias("from_tier"),
        pl.col("tier").alias("to_tier"),
        pl.col("prev_category").alias("from_category"),
        pl.col("category").alias("to_category"),
        pl.col("prev_status").alias("from_status"),
        pl.col("new_status").alias("to_status"),
        pl.when(reasons != "")
        .then(reasons)
        .when(new)
        .then(pl.lit("new"))
        .otherwise(pl.lit("input_changed"))
        .alias("reason"),
        pl.lit(as_of, dtype=pl.Datetime("us")).alias("at"),
        pl.lit(RULE_PROMOTION).alias("provenance"),
    )
    if rows.height == 0:
        return PROMOTIONS.empty_table()
    return conform(rows.to_arrow(), PROMOTIONS)
