"""Promotion and decay (SPEC §8): tier, category, weight and status of every node, and the `promotions` table.

`promote(nodes, feedback, previous, as_of)` is a pure function of its tables and of `as_of` (naive UTC; the
clock is never read). Weight, activation, feedback and pinned are recomputed from the node and its FEEDBACK
rows up to `as_of` every run (never from the previous run's weight), so a re-run with the same inputs gives
the same table; `previous` (the last run's output) only makes three things sticky — a tier never falls back by
itself, core stays core, an archive stays archived — and is what the `promotions` rows are the difference to.

Rules, each with its seed source (numbers live in `TierConfig`):

Feedback (FEEDBACK rows with `at <= as_of`; kinds hit | pin | unpin | upvote | downvote)
- A *use* is a hit, an upvote or a pin. Uses closer than 2 h to the last counted use count once (seed 003
  "BOOST 防刷: 冷却期 2 小时内多次使用只算 1 次"); `activation` = counted uses.
- BOOST: every counted upvote adds +0.3 (seed 003 `[BOOST]` "+0.3"), at most +1.0 per node per UTC calendar day
  (seed 003 "每日上限 每条记忆每天最多 +1.0"; the boost that crosses the cap is cut to what is left). A recall hit
  alone does not boost (`boost_on_hit=False`): seed 003's first lesson is that being retrieved is not being used.
  Downvotes subtract 0.3 under the same cooldown and cap. `feedback` = boosts − penalties.
- `pinned`: the last pin/unpin event wins (unpin wins a tie); none → the node's own `pinned`, else False.

Category (seed 003 categories episode / fact / core)
- Episode → episode; Fact, Preference, Task → fact; Entity, Concept, Meta (and unknown types) → fact, but as
  structural nodes their weight never decays below 0.2 and they are never sent to review.
- → core when pinned; or (not an Episode) weight >= 0.8 and activation >= 3 (seed 003 upgrade review at
  importance 2.5 of its 3.0 core mark ≈ 0.8 of our [0, 1] scale; seed 002 activation threshold 3); or a
  Preference seen in >= 2 sessions (seed 003: "长期稳定的喜好" is core). Core is sticky (seed 003: core never
  decays or is deleted) until a net downvote (feedback < 0) or an unpin drops it back to its type's category.
  seed 003's `system` category has no counterpart here.

Weight (seed 003 "更新：衰减参数"; start = `importance`, 0.5 when null)
- Replayed in time order from `last_seen`: each *use* first applies the decay periods elapsed since the previous
  use (×factor per whole period), then its boost; at `as_of` the periods since the last use apply.
  episode: ×0.6 per 3 days; fact: ×0.85 per 5 days; core and pinned: never decay. Floored at 0.
- The continuous per-type recency exp(-Δt/τ) of SPEC §8 (τ_Episode 14 d, τ_Fact 90 d, τ_Concept 180 d) is
  applied by recall at query time (`recall.config.DEFAULT_TAU_DAYS`), not folded into this stored weight.

Tier (seed 004 §6.2 short 0–7 d / mid 7–30 d / long 30 d+; age = as_of − first_seen, else time_start, else
last_seen; an undated node has no age trigger)
- short → mid: age >= 7 d; or topic repetition >= 3 (frequency, or the most nodes ABOUT one of its Concepts
  when `edges` are given — seed 004 "同一 ABOUT/Concept … 累计 ≥ 3 次"); or activation >= 3 (seed 002: a block
  activated >= 3 times transfers).
- mid → long: age >= 30 d; or a stable pattern — >= 2 sessions and >= 2 sources and confidence >= 0.8, all three
  (seed 004 "跨 ≥ 2 个会话 … 且 confidence ≥ θ_conf … 且来自 ≥ 2 种不同来源"). From node columns alone:
  sessions = distinct raw_ids in raw_refs (a RawChunk lies in one conversation), sources = max(frequency,
  distinct raw_refs).
- Capacity (seed 002 short-term layer ≈ our mid tier, for Fact/Preference/Task): per tenant, when the mid tier
  holds >= 50% of `short_term_max_memories` (30), the ones with importance >= 0.6 move to long
  (`short_term_transfer_threshold`); when it holds >= 30, `transfer_all` (default) moves all of them to long,
  `selective_cleanup` moves the >= 0.6 ones and archives the rest (seed 002 deletes them; we never lose content).
- pinned → long. Otherwise the tier never falls below the previous run's, except a net downvote (feedback < 0),
  which sets it one level under the computed tier (reason "downvote"). That is the only way back.

Status (base: the node's own status, "active" when null; a status "archived" on the input is kept)
- Episode archived once as_of >= last_seen + 7 d and >= last use + 3 d (seed 003 "7 天强制删除" → archived, still
  citable; seed 004 access protection "访问 ≥ 1 次延长 3 天保护期"); never when core or pinned.
- An archive of ours is sticky: it stays archived unless pinned, core, or used within the last 3 d (restored).
- Facts (Fact/Preference/Task, not core, not pinned, not used in the last 3 d) whose weight < 0.2 stay active and
  go to the review queue, kind "fact_low_weight" (seed 003 "< 0.2 触发审核").

Promotions: one row per node whose tier, category or status differs from `previous` (every node when it has no
previous row: from_* null); reason = the triggers of what changed, "; "-joined — for a tier, those of the steps
crossed since the previous tier ("new" when nothing fired) — at = as_of.

`nodes` is the graph as upstream derives it (R2G merge, then the other consolidation steps), not this function's
own output: a status "archived" on it is someone else's decision and is kept as is, while an archive made here
lives in `previous` and can be restored.

What one node's output depends on (`tier_input` selects it): its row, its FEEDBACK rows, its previous row, the
number of nodes ABOUT each topic it takes part in (all ABOUT edges into those Concepts), `as_of` and the config
— and one coupling: the capacity rule counts a tenant's mid-tier Fact/Preference/Task nodes, so a run over part of
a tenant passes the full count (`tenant_mid_counts`, as TierResult.mid_counts reports it). Tested in
tests/test_consolidation_contracts.py::test_promote_of_some_nodes_with_the_tenants_mid_count_is_the_full_run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from jobs.decay import DecayRule, TierConfig, apply_boosts, boost_schedule, counted_events, decayed_weight
from jobs.promotions import promotions
from jobs.schema import REVIEW_QUEUE
from jobs.tier_weights import age_us, days_us, decay_rule, feedback_columns, plain_weights
from r2g.ids import stable_ids
from r2g.schema import NODES
from raw_store.frames import as_frame, key_order
from raw_store.lake import conform

TIERS = ("short", "mid", "long")
_RANK = {t: i for i, t in enumerate(TIERS)}
# the node columns the rules read, and the ones promote() sets
_RULE_COLUMNS = [
    "id",
    "tenant",
    "type",
    "importance",
    "confidence",
    "frequency",
    "first_seen",
    "last_seen",
    "time_start",
    "status",
    "pinned",
    "raw_refs",
    "conv_id",
]
_OUTPUT_COLUMNS = ("tier", "category", "weight", "activation", "feedback", "pinned", "status")

# Versioned rule id: the provenance of the review rows (REVIEW_QUEUE carries it once its schema has a provenance
# column; conform drops it until then). The promotions' is jobs.promotions.RULE_PROMOTION.
RULE_REVIEW = "jobs.tiers.review.v1"


@dataclass(frozen=True)
class TierResult:
    nodes: pa.Table  # NODES, every node with tier, category, weight, activation, feedback, pinned, status
    promotions: pa.Table  # PROMOTIONS, the changes against `previous`
    review: pa.Table  # REVIEW_QUEUE, kind fact_low_weight
    # tenant → mid-tier Fact/Preference/Task nodes before the capacity rule: what a run over part of a tenant's
    # nodes passes as `tenant_mid_counts` to decide exactly as this run did
    mid_counts: Mapping[str | None, int] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------- promote
#
# Vectorised: every rule is a polars expression over all nodes at once. Only the nodes with FEEDBACK rows (up to
# as_of) replay their events in Python (jobs.tier_weights._assess_feedback); for every other node the replay is a closed form —
# no use, so weight = importance × factor^(whole periods since last_seen) — evaluated once per distinct
# (importance, periods) pair, with the very same float operations as decayed_weight.


def _naive_utc(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo is not None else t


def _about_counts(edges: pa.Table | None) -> pl.DataFrame:
    """(tenant, id, about): the most nodes ABOUT one topic the node takes part in (as the topic or as one of them)."""
    schema = {"tenant": pl.String, "id": pl.String, "about": pl.Int64}
    if edges is None or not edges.num_rows:
        return pl.DataFrame(schema=schema)
    # the ABOUT edges picked in Arrow: a frame of every edge's ends would be ~1 GB at 1M messages
    about = edges.select(["tenant", "src", "dst"]).filter(pc.equal(edges.column("type"), "ABOUT"))
    pairs = as_frame(about).unique()
    per_topic = pairs.group_by(["tenant", "dst"]).agg(pl.len().cast(pl.Int64).alias("about"))
    members = pairs.join(per_topic, on=["tenant", "dst"], nulls_equal=True).select(
        "tenant", pl.col("src").alias("id"), "about"
    )
    return pl.concat([per_topic.rename({"dst": "id"}), members]).group_by(["tenant", "id"]).agg(pl.col("about").max())


def _previous_columns(previous: pa.Table | None) -> pl.DataFrame:
    schema = {
        "tenant": pl.String,
        "id": pl.String,
        "prev_tier": pl.String,
        "prev_category": pl.String,
        "prev_status": pl.String,
    }
    if previous is None or not previous.num_rows:
        return pl.DataFrame(schema=schema)
    # the five columns read, conformed alone: a NODE_STATE table is not widened to every NODES column first
    prev = as_frame(
        conform(previous, pa.schema([NODES.field(c) for c in ("tenant", "id", "tier", "category", "status")]))
    )
    # one row per node, the last one (as a dict keyed by node would keep it)
    return prev.unique(subset=["tenant", "id"], keep="last", maintain_order=True).rename(
        {"tier": "prev_tier", "category": "prev_category", "status": "prev_status"}
    )


def _sessions_sources(n: pl.DataFrame) -> pl.DataFrame:
    """(_row, sessions, sources): distinct raw_ids in raw_refs (else 1 with a conversation), and max(frequency,
    distinct raw_refs)."""
    refs = (
        n.select("_row", "raw_refs")
        .filter(pl.col("raw_refs").list.len() > 0)
        .explode("raw_refs")
        .unnest("raw_refs")
        .group_by("_row")
        .agg(pl.col("raw_id").n_unique().alias("s"), pl.struct("raw_id", "offset", "length").n_unique().alias("r"))
    )
    return (
        n.select("_row", "conv_id", "frequency")
        .join(refs, on="_row", how="left", maintain_order="left")
        .select(
            "_row",
            pl.when(pl.col("s").fill_null(0) > 0)
            .then(pl.col("s"))
            .otherwise((pl.col("conv_id").fill_null("") != "").cast(pl.Int64))
            .cast(pl.Int64)
            .alias("sessions"),
            pl.max_horizontal(pl.col("frequency").fill_null(0), pl.col("r").fill_null(0).cast(pl.Int64)).alias(
                "sources"
            ),
        )
    )


def promote(
    nodes: pa.Table,
    feedback: pa.Table | None,
    previous: pa.Table | None,
    as_of: datetime,
    config: TierConfig | None = None,
    *,
    edges: pa.Table | None = None,
    tenant_mid_counts: Mapping[str | None, int] | None = None,
) -> TierResult:
    """Tier, category, weight, activation, feedback, pinned and status of every node as of `as_of`.

    `feedback` is FEEDBACK (rows after `as_of` are ignored), `previous` the last run's output NODES or its
    NODE_STATE (or None), `edges` (optional) lends ABOUT edges to the topic-repetition trigger. Output sorted by
    (tenant, id).
    `tenant_mid_counts` (tenant → count) replaces the capacity rule's count of mid-tier Fact/Preference/Task
    nodes, which otherwise is taken over `nodes`: a run over some of a tenant's nodes passes the full count.
    """
    cfg, as_of = config or TierConfig(), _naive_utc(as_of)
    table = conform(nodes, NODES)
    order = key_order(table, ["tenant", "id"])
    if order is not None:  # nodes in key order already (GraphStage.sort_by_key): no sort, no copy of them
        table = table.take(order)
    n = (
        as_frame(table.select(_RULE_COLUMNS))
        .with_row_index("_row")
        .with_columns(
            pl.when(pl.col("type") == "Episode").then(pl.lit("episode")).otherwise(pl.lit("fact")).alias("_cat")
        )
    )
    n = (
        n.join(plain_weights(n, as_of, cfg), on="_row", how="left", maintain_order="left")
        .join(feedback_columns(n, feedback, as_of, cfg), on="_row", how="left", maintain_order="left")
        .join(_sessions_sources(n), on="_row", how="left", maintain_order="left")
        .join(_about_counts(edges), on=["tenant", "id"], how="left", maintain_order="left", nulls_equal=True)
        .join(
            _previous_columns(previous).with_columns(pl.lit(True).alias("has_prev")),
            on=["tenant", "id"],
            how="left",
            maintain_order="left",
            nulls_equal=True,
        )
    )
    ev = pl.col("f_activation").is_not_null()
    n = n.with_columns(
        pl.when(ev).then("f_pinned").otherwise(pl.col("pinned").fill_null(False)).alias("pinned"),
        (ev & pl.col("f_unpinned")).alias("unpinned"),
        pl.when(ev).then("f_activation").otherwise(0).alias("activation"),
        pl.when(ev).then("f_feedback").otherwise(0.0).alias("feedback"),
        (ev & pl.col("f_recent")).alias("recent"),
        pl.when(ev).then("f_w_none").otherwise("w_none").alias("w_none"),
        pl.when(ev).then("f_w_decay").otherwise("w_decay").alias("w_decay"),
        pl.col("has_prev").fill_null(False),
        pl.col("about").fill_null(0),
    )
    n = _decide_category(n, cfg)
    n = _decide_tier(n, as_of, cfg)
    n = _pre_archive(n, as_of, cfg)
    mid_counts = _mid_counts(n, cfg)
    n = _capacity(n, cfg, tenant_mid_counts)
    n = n.with_columns(
        pl.when(pl.col("archived"))
        .then(pl.lit("archived"))
        .when(pl.col("status").is_null() | (pl.col("status") == "archived"))
        .then(pl.lit("active"))
        .otherwise(pl.col("status"))
        .alias("new_status")
    )

    for col, src in (
        ("tier", "tier"),
        ("category", "category"),
        ("weight", "weight"),
        ("activation", "activation"),
        ("feedback", "feedback"),
        ("pinned", "pinned"),
        ("status", "new_status"),
    ):
        field = NODES.field(col)
        table = table.set_column(
            table.schema.get_field_index(col), field, n.get_column(src).to_arrow().cast(field.type)
        )
    return TierResult(
        nodes=table, promotions=promotions(n, as_of, cfg), review=_review(n, as_of, cfg), mid_counts=mid_counts
    )


def _decide_category(n: pl.DataFrame, cfg: TierConfig) -> pl.DataFrame:
    """Category, its reason and the weight (seed 003; see the module doc)."""
    rule_none = {c: decay_rule(cfg, c) is None for c in ("episode", "fact")}
    no_rule = pl.col("_cat").replace_strict(rule_none, return_dtype=pl.Boolean)
    structural = pl.col("type").is_in(sorted(cfg.structural_types)).fill_null(False)
    n = n.with_columns(
        pl.when(pl.col("pinned") | no_rule)
        .then("w_none")
        .when(structural)
        .then(pl.max_horizontal("w_decay", pl.min_horizontal(pl.lit(cfg.structural_floor), "w_none")))
        .otherwise("w_decay")
        .alias("w_base")
    )
    prev_core = (pl.col("prev_category") == "core").fill_null(False)
    c_pin, c_down = pl.col("pinned"), pl.col("feedback") < 0
    c_weight = (
        (pl.col("type") != "Episode").fill_null(True)
        & (pl.col("w_base") >= cfg.core_weight)
        & (pl.col("activation") >= cfg.core_activation)
    )
    c_pref = (pl.col("type") == "Preference").fill_null(False) & (pl.col("sessions") >= cfg.core_preference_sessions)
    c_sticky = prev_core & ~pl.col("unpinned")
    core = pl.lit("core")
    return n.with_columns(
        pl.when(c_pin)
        .then(core)
        .when(c_down)
        .then("_cat")
        .when(c_weight)
        .then(core)
        .when(c_pref)
        .then(core)
        .when(c_sticky)
        .then(core)
        .otherwise("_cat")
        .alias("category"),
        c_pin.alias("c_pin"),
        (~c_pin & c_down).alias("c_down"),
        (~c_pin & ~c_down & c_weight).alias("c_weight"),
        (~c_pin & ~c_down & ~c_weight & c_pref).alias("c_preference"),
        (~(c_pin | c_down | c_weight | c_pref | c_sticky) & prev_core).alias("c_unpin"),
    ).with_columns(pl.when(pl.col("category") == pl.col("_cat")).then("w_base").otherwise("w_none").alias("weight"))


def _decide_tier(n: pl.DataFrame, as_of: datetime, cfg: TierConfig) -> pl.DataFrame:
    """Tier and its reasons (seed 004 §6.2; see the module doc); sets `downvoted`."""
    age = age_us(pl.coalesce("first_seen", "time_start", "last_seen"), as_of).cast(pl.Float64) / 86_400e6
    m_age = (age >= cfg.short_days).fill_null(False)
    m_topic = pl.max_horizontal(pl.col("frequency").fill_null(0), "about") >= cfg.topic_repetition
    m_act = pl.col("activation") >= cfg.activation_threshold
    to_mid = m_age | m_topic | m_act
    l_age = to_mid & (age >= cfg.long_days).fill_null(False)
    l_consistent = (
        to_mid
        & (pl.col("sessions") >= cfg.min_sessions)
        & (pl.col("sources") >= cfg.min_sources)
        & (pl.col("confidence").fill_null(0.0) >= cfg.confidence_threshold)
    )
    computed = pl.when(l_age | l_consistent).then(2).when(to_mid).then(1).otherwise(0)
    prev_rank = pl.col("prev_tier").replace_strict(_RANK, default=None, return_dtype=pl.Int64)
    start = prev_rank.fill_null(0)
    pinned = pl.col("pinned")
    down = ~pinned & (pl.col("feedback") < 0)
    sticky = prev_rank.is_not_null() & (prev_rank >= computed)
    crossed = ~pinned & ~down & ~sticky  # the steps crossed since the previous tier name the reasons
    rank = (
        pl.when(pinned)
        .then(2)
        .when(down)
        .then(pl.max_horizontal(computed - 1, 0))
        .when(sticky)
        .then(prev_rank)
        .otherwise(computed)
    )
    return n.with_columns(
        rank.replace_strict(dict(enumerate(TIERS)), return_dtype=pl.String).alias("tier"),
        down.alias("downvoted"),
        pinned.alias("r_pin"),
        down.alias("r_down"),
        (crossed & m_age & (start < 1)).alias("r_age_mid"),
        (crossed & m_topic & (start < 1)).alias("r_topic"),
        (crossed & m_act & (start < 1)).alias("r_activation"),
        (crossed & l_age & (computed == 2)).alias("r_age_long"),
        (crossed & l_consistent & (computed == 2)).alias("r_consistent"),
    )


def _pre_archive(n: pl.DataFrame, as_of: datetime, cfg: TierConfig) -> pl.DataFrame:
    """Archive decisions that do not depend on the other nodes: input, sticky previous, episode age."""
    keep = pl.col("pinned") | (pl.col("category") == "core")
    given = (pl.col("status") == "archived").fill_null(False)
    prev_archived = ~given & (pl.col("prev_status") == "archived").fill_null(False)
    restore = prev_archived & (keep | pl.col("recent"))
    stays = prev_archived & ~(keep | pl.col("recent"))
    seen = pl.coalesce("last_seen", "first_seen", "time_start")
    aged = (
        ~given
        & ~stays
        & (pl.col("type") == "Episode").fill_null(False)
        & ~keep
        & seen.is_not_null()
        & (age_us(seen, as_of) >= days_us(cfg.episode_archive_days)).fill_null(False)
        & ~pl.col("recent")
    )
    core = pl.col("category") == "core"
    return n.with_columns(
        (given | stays | aged).alias("archived"),
        (restore & pl.col("pinned")).alias("s_restore_pin"),
        (restore & ~pl.col("pinned") & core).alias("s_restore_core"),
        (restore & ~pl.col("pinned") & ~core).alias("s_restore_access"),
        aged.alias("s_aged"),
    )


def _mid(cfg: TierConfig) -> pl.Expr:
    """The nodes the capacity rule counts: mid tier, live, neither downvoted nor pinned, of a capacity type."""
    return (
        (pl.col("tier") == "mid")
        & ~pl.col("archived")
        & ~pl.col("downvoted")
        & ~pl.col("pinned")
        & pl.col("type").is_in(sorted(cfg.capacity_types)).fill_null(False)
    )


def _mid_counts(n: pl.DataFrame, cfg: TierConfig) -> dict[str | None, int]:
    return dict(n.filter(_mid(cfg)).group_by("tenant").len().iter_rows())


def _capacity(n: pl.DataFrame, cfg: TierConfig, counts: Mapping[str | None, int] | None) -> pl.DataFrame:
    """seed 002 short-term capacity over each tenant's mid-tier Fact/Preference/Task nodes (the one rule that
    couples the nodes of a tenant: how many of them are mid decides what happens to each)."""
    if cfg.overflow_strategy is None:
        return n.with_columns(
            pl.lit(False).alias("r_overflow"), pl.lit(False).alias("r_occupancy"), pl.lit(False).alias("s_overflow")
        )
    n = n.with_columns(_mid(cfg).alias("_mid"))
    if counts is None:
        n = n.with_columns(pl.col("_mid").cast(pl.Int64).sum().over("tenant").alias("_count"))
    else:
        given = pl.DataFrame(
            {"tenant": list(counts), "_count": list(counts.values())}, schema={"tenant": pl.String, "_count": pl.Int64}
        )
        n = n.join(given, on="tenant", how="left", maintain_order="left", nulls_equal=True).with_columns(
            pl.col("_count").fill_null(0)
        )
    cap = cfg.short_term_max_memories
    high = pl.col("importance").fill_null(cfg.default_importance) >= cfg.transfer_threshold
    overflow = pl.col("_mid") & (pl.col("_count") >= cap)
    occupied = pl.col("_mid") & ~overflow & (pl.col("_count") >= cfg.transfer_occupancy * cap)
    move = high if cfg.overflow_strategy != "transfer_all" else pl.lit(True)
    to_long = (overflow & move) | (occupied & high)
    to_archive = overflow & ~move & (pl.col("category") != "core")
    # an overflow archive's reason replaces the status reasons before it
    return n.with_columns(
        pl.when(to_long).then(pl.lit("long")).otherwise("tier").alias("tier"),
        (overflow & move).alias("r_overflow"),
        (occupied & high).alias("r_occupancy"),
        (pl.col("archived") | to_archive).alias("archived"),
        to_archive.alias("s_overflow"),
        *(pl.col(c) & ~to_archive for c in ("s_restore_pin", "s_restore_core", "s_restore_access", "s_aged")),
    ).drop("_mid", "_count")


_LOW_WEIGHT = "fact_low_weight"


def _review(n: pl.DataFrame, as_of: datetime, cfg: TierConfig) -> pa.Table:
    """REVIEW_QUEUE kind fact_low_weight: live, non-core, unpinned, unused Facts whose weight fell below the mark."""
    due = n.filter(
        pl.col("type").is_in(sorted(cfg.review_types)).fill_null(False)
        & (pl.col("new_status") != "archived")
        & (pl.col("category") != "core")
        & ~pl.col("pinned")
        & ~pl.col("recent")
        & (pl.col("weight") < cfg.review_threshold)
    )
    if due.height == 0:
        return REVIEW_QUEUE.empty_table()
    ids = stable_ids("rq", due.select("tenant", pl.lit(_LOW_WEIGHT).alias("kind"), "id"))
    rows = due.select(
        ids,
        "tenant",
        pl.lit(_LOW_WEIGHT).alias("kind"),
        pl.concat_list("id").alias("node_ids"),
        pl.concat_list("weight").alias("scores"),
        pl.lit(f"weight<{cfg.review_threshold:g}").alias("reason"),
        pl.lit(as_of, dtype=pl.Datetime("us")).alias("created_at"),
        pl.lit(RULE_REVIEW).alias("provenance"),
    )
    return conform(rows.to_arrow(), REVIEW_QUEUE)


def tier_input(
    nodes: pa.Table, feedback: pa.Table | None, previous: pa.Table | None, edges: pa.Table | None, keys: pa.Table
) -> tuple[pa.Table, pa.Table | None, pa.Table | None, pa.Table | None]:
    """The rows promote needs to redo the nodes in `keys` (tenant, id): those nodes, their FEEDBACK rows, their
    previous rows, and the ABOUT edges into every topic they take part in (the topic-repetition count).

    Contract (tests/test_consolidation_contracts.py): promote over these rows, with `tenant_mid_counts` = the
    full run's TierResult.mid_counts, gives the full run's node, promotion and review rows of those nodes. Per
    node otherwise; the capacity count is the one coupling between the nodes of a tenant."""
    k = as_frame(keys.select(["tenant", "id"])).unique()

    def rows(table: pa.Table | None, id_col: str) -> pa.Table | None:
        if table is None:
            return None
        t = (
            as_frame(table.select(["tenant", id_col]))
            .with_row_index("_row")
            .join(k, left_on=["tenant", id_col], right_on=["tenant", "id"], how="semi", nulls_equal=True)
        )
        return table.take(t.get_column("_row").to_arrow())

    about = None
    if edges is not None:
        e = (
            as_frame(edges.select(["tenant", "src", "dst", "type"]))
            .with_row_index("_row")
            .filter(pl.col("type") == "ABOUT")
        )
        topics = pl.concat(
            [
                k,
                e.join(k, left_on=["tenant", "src"], right_on=["tenant", "id"], how="semi", nulls_equal=True).select(
                    "tenant", pl.col("dst").alias("id")
                ),
            ]
        ).unique()
        about = edges.take(
            e.join(topics, left_on=["tenant", "dst"], right_on=["tenant", "id"], how="semi", nulls_equal=True)
            .get_column("_row")
            .to_arrow()
        )
    return rows(nodes, "id"), rows(feedback, "node_id"), rows(previous, "id"), about


__all__ = [
    "TierConfig",
    "TierResult",
    "DecayRule",
    "promote",
    "tier_input",
    "apply_boosts",
    "boost_schedule",
    "counted_events",
    "decayed_weight",
    "TIERS",
]
