# Frozen reference: jobs/tiers.py as of commit 9d258c2, before vectorisation. The golden harness
# (bench/consolidation_golden.py) and the differential tests compare the library against it; not library code.
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
  applied by recall at query time (`recall.engine.DEFAULT_TAU_DAYS`), not folded into this stored weight.

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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from jobs.integrity import CheckOutcome
from jobs.schema import FEEDBACK, PROMOTIONS, REVIEW_QUEUE
from r2g.ids import stable_id
from r2g.schema import NODES
from raw_store.lake import conform

TIERS = ("short", "mid", "long")
_RANK = {t: i for i, t in enumerate(TIERS)}
USE_KINDS = frozenset({"hit", "upvote", "pin"})
FEEDBACK_KINDS = frozenset({"hit", "pin", "unpin", "upvote", "downvote"})
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

# Versioned rule ids: the provenance of the rows this module writes (PROMOTIONS / REVIEW_QUEUE carry it once
# their schemas have a provenance column; conform drops it until then).
RULE_PROMOTION = "jobs.tiers.promotion.v1"
RULE_REVIEW = "jobs.tiers.review.v1"


@dataclass(frozen=True)
class DecayRule:
    """×`factor` per whole `period_days` without use (seed 003 step decay)."""

    period_days: float
    factor: float


@dataclass(frozen=True)
class TierConfig:
    """Knobs of promotion and decay; each default names its seed (see the module docstring)."""

    short_days: float = 7.0  # seed 004 §6.2: short 0–7 d
    long_days: float = 30.0  # seed 004 §6.2: long 30 d+
    topic_repetition: int = 3  # seed 004 §6.2: 主题重复 ≥ 3
    activation_threshold: int = 3  # seed 002: perceptual_activation_threshold = 3
    confidence_threshold: float = 0.8  # seed 004 §6.2: θ_conf 0.8
    min_sessions: int = 2  # seed 004 §6.2: 跨 ≥ 2 个会话
    min_sources: int = 2  # seed 004 §6.2: ≥ 2 种不同来源
    access_protection_days: float = 3.0  # seed 004 §6.2: 访问 ≥ 1 次延长 3 天保护期
    decay: Mapping[str, DecayRule] = field(
        default_factory=lambda: {
            "episode": DecayRule(3.0, 0.6),  # seed 003 更新：episode 3 天 ×0.6
            "fact": DecayRule(5.0, 0.85),  # seed 003 更新：fact 5 天 ×0.85 (core: never)
        }
    )
    episode_archive_days: float = 7.0  # seed 003 更新：episode 7 天强制删除 → archived
    review_threshold: float = 0.2  # seed 003 更新：fact < 0.2 触发审核
    structural_types: frozenset[str] = frozenset({"Entity", "Concept", "Meta"})
    structural_floor: float = 0.2  # ours: hubs keep at least the review mark, never reviewed
    default_importance: float = 0.5  # ours: a node without importance starts mid-scale
    boost: float = 0.3  # seed 003 [BOOST] +0.3
    boost_on_hit: bool = False  # seed 003: retrieved ≠ used
    downvote_penalty: float = 0.3  # ours: the mirror of BOOST
    cooldown_hours: float = 2.0  # seed 003 BOOST 防刷: 2 h
    daily_cap: float = 1.0  # seed 003 BOOST 防刷: +1.0 per memory per day
    core_weight: float = 0.8  # seed 003 upgrade review at 2.5 / 3.0
    core_activation: int = 3  # seed 002 activation threshold
    core_preference_sessions: int = 2  # seed 003: 长期稳定的喜好
    short_term_max_memories: int = 30  # seed 002
    transfer_occupancy: float = 0.5  # seed 002: 占用率 ≥ 50% 时开始批量转移
    transfer_threshold: float = 0.6  # seed 002: short_term_transfer_threshold
    overflow_strategy: str | None = "transfer_all"  # seed 002: transfer_all (default) | selective_cleanup; None: off
    capacity_types: frozenset[str] = frozenset({"Fact", "Preference", "Task"})  # seed 002 short-term memories
    review_types: frozenset[str] = frozenset({"Fact", "Preference", "Task"})  # seed 003 fact category
    demotion_reasons: tuple[str, ...] = ("downvote",)

    def __post_init__(self) -> None:
        if self.overflow_strategy not in (None, "transfer_all", "selective_cleanup"):
            raise ValueError(
                f"overflow_strategy must be transfer_all, selective_cleanup or None, not {self.overflow_strategy!r}"
            )


@dataclass(frozen=True)
class TierResult:
    nodes: pa.Table  # NODES, every node with tier, category, weight, activation, feedback, pinned, status
    promotions: pa.Table  # PROMOTIONS, the changes against `previous`
    review: pa.Table  # REVIEW_QUEUE, kind fact_low_weight


# ----------------------------------------------------------------------------------------------- boosts


def counted_events(events: Iterable[datetime], cooldown: timedelta) -> list[datetime]:
    """The events (sorted) that count: each at least `cooldown` after the last counted one (seed 003)."""
    out: list[datetime] = []
    for t in sorted(events):
        if not out or t - out[-1] >= cooldown:
            out.append(t)
    return out


def boost_schedule(
    events: Iterable[datetime], config: TierConfig = TierConfig(), amount: float | None = None
) -> list[tuple[datetime, float]]:
    """(time, amount) of each boost the events earn after the cooldown and the per-UTC-day cap."""
    amount = config.boost if amount is None else amount
    spent: dict = defaultdict(float)
    out: list[tuple[datetime, float]] = []
    for t in counted_events(events, timedelta(hours=config.cooldown_hours)):
        give = round(min(amount, config.daily_cap - spent[t.date()]), 9)
        if give > 0:
            spent[t.date()] += give
            out.append((t, give))
    return out


def apply_boosts(events: Iterable[datetime], config: TierConfig = TierConfig(), amount: float | None = None) -> float:
    """Total boost the events earn: `amount` (default BOOST +0.3) per counted use, capped per day."""
    return round(sum(g for _, g in boost_schedule(events, config, amount)), 9)


# ----------------------------------------------------------------------------------------------- weight


def _periods(start: datetime | None, end: datetime, rule: DecayRule | None) -> int:
    if rule is None or start is None or end <= start:
        return 0
    return (end - start) // timedelta(days=rule.period_days)


def decayed_weight(
    base: float,
    start: datetime | None,
    events: Iterable[tuple[datetime, float, bool]],
    as_of: datetime,
    rule: DecayRule | None,
) -> float:
    """Replay (time, delta, is_use) events from `start`: a use first applies the decay since the last use, then
    every delta adds; at `as_of` the periods since the last use apply. `rule` None: no decay. Floored at 0."""
    value, clock = base, start
    for t, delta, is_use in sorted(events):
        if t > as_of:
            continue
        if is_use:
            if clock is None or t > clock:
                if rule is not None:
                    value *= rule.factor ** _periods(clock, t, rule)
                clock = t
        value = max(0.0, value + delta)
    if rule is not None:
        value *= rule.factor ** _periods(clock, as_of, rule)
    return round(max(0.0, value), 9)


# ----------------------------------------------------------------------------------------------- promote


@dataclass
class _Node:
    row: dict
    prev: dict | None
    pinned: bool
    unpinned: bool  # the last pin-state event is an unpin
    activation: int
    feedback: float
    last_use: datetime | None
    recent_use: bool
    base_category: str
    replay: list[tuple[datetime, float, bool]] = field(default_factory=list)  # decayed_weight's events
    category: str = ""
    category_reasons: list[str] = field(default_factory=list)
    weight: float = 0.0
    tier: str = "short"
    tier_reasons: list[str] = field(default_factory=list)
    downvoted: bool = False
    archived: bool = False
    status_reasons: list[str] = field(default_factory=list)


def _naive_utc(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo is not None else t


def _base_category(node_type: str | None) -> str:
    return "episode" if node_type == "Episode" else "fact"


def _feedback_by_node(feedback: pa.Table | None, as_of: datetime) -> dict[tuple[str, str], list[tuple[datetime, str]]]:
    out: dict[tuple[str, str], list[tuple[datetime, str]]] = defaultdict(list)
    if feedback is None or not feedback.num_rows:
        return out
    for r in conform(feedback, FEEDBACK).select(["tenant", "node_id", "kind", "at"]).to_pylist():
        if r["at"] is not None and r["at"] <= as_of and r["kind"] in FEEDBACK_KINDS:
            out[(r["tenant"], r["node_id"])].append((r["at"], r["kind"]))
    return out


def _previous_by_node(previous: pa.Table | None) -> dict[tuple[str, str], dict]:
    if previous is None or not previous.num_rows:
        return {}
    cols = ["tenant", "id", "tier", "category", "status"]
    return {(r["tenant"], r["id"]): r for r in conform(previous, NODES).select(cols).to_pylist()}


def _about_counts(edges: pa.Table | None) -> dict[tuple[str, str], int]:
    """(tenant, node) → the most nodes ABOUT one topic it takes part in (as the topic or as one of them)."""
    if edges is None or not edges.num_rows:
        return {}
    pairs = {
        (r["tenant"], r["src"], r["dst"])
        for r in edges.select(["tenant", "src", "dst", "type"]).to_pylist()
        if r["type"] == "ABOUT"
    }
    per_topic: dict[tuple[str, str], int] = defaultdict(int)
    for tenant, _, dst in pairs:
        per_topic[(tenant, dst)] += 1
    out: dict[tuple[str, str], int] = dict(per_topic)
    for tenant, src, dst in pairs:
        out[(tenant, src)] = max(out.get((tenant, src), 0), per_topic[(tenant, dst)])
    return out


def _sessions_sources(row: dict) -> tuple[int, int]:
    refs = row.get("raw_refs") or []
    sessions = len({r["raw_id"] for r in refs}) or (1 if row.get("conv_id") else 0)
    sources = max(row.get("frequency") or 0, len({(r["raw_id"], r["offset"], r["length"]) for r in refs}))
    return sessions, sources


def _assess_feedback(row: dict, events: list[tuple[datetime, str]], as_of: datetime, cfg: TierConfig) -> _Node:
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
    node = _Node(
        row=row,
        prev=None,
        pinned=pinned,
        unpinned=bool(pin_events) and pin_events[-1][1],
        activation=len(uses),
        feedback=fb,
        last_use=last_use,
        recent_use=recent,
        base_category=_base_category(row.get("type")),
        replay=[(t, 0.0, True) for t in uses]
        + [(t, g, False) for t, g in boosts]
        + [(t, -g, False) for t, g in penalties],
    )
    return node


def _weight(n: _Node, as_of: datetime, cfg: TierConfig, category: str) -> float:
    row = n.row
    base = row.get("importance")
    base = cfg.default_importance if base is None else float(base)
    start = row.get("last_seen") or row.get("first_seen") or row.get("time_start")
    rule = None if (category == "core" or n.pinned) else cfg.decay.get(category)
    w = decayed_weight(base, start, n.replay, as_of, rule)
    if rule is not None and row.get("type") in cfg.structural_types:
        w = max(w, min(cfg.structural_floor, decayed_weight(base, start, n.replay, as_of, None)))
    return w


def _decide_category(n: _Node, as_of: datetime, cfg: TierConfig) -> None:
    row, prev_cat = n.row, (n.prev or {}).get("category")
    base_weight = _weight(n, as_of, cfg, n.base_category)
    sessions, _ = _sessions_sources(row)
    if n.pinned:
        n.category, n.category_reasons = "core", ["core:pin"]
    elif n.feedback < 0:
        n.category, n.category_reasons = n.base_category, ["downvote"]
    elif row.get("type") != "Episode" and base_weight >= cfg.core_weight and n.activation >= cfg.core_activation:
        n.category = "core"
        n.category_reasons = [f"core:weight>={cfg.core_weight:g},activation>={cfg.core_activation}"]
    elif row.get("type") == "Preference" and sessions >= cfg.core_preference_sessions:
        n.category, n.category_reasons = "core", [f"core:preference_sessions>={cfg.core_preference_sessions}"]
    elif prev_cat == "core" and not n.unpinned:
        n.category = "core"  # sticky: seed 003 core never decays
    else:
        n.category = n.base_category
        n.category_reasons = ["unpin"] if prev_cat == "core" else []
    n.weight = base_weight if n.category == n.base_category else _weight(n, as_of, cfg, n.category)


def _decide_tier(n: _Node, as_of: datetime, cfg: TierConfig, about: int) -> None:
    row = n.row
    born = row.get("first_seen") or row.get("time_start") or row.get("last_seen")
    age = (as_of - born) / timedelta(days=1) if born is not None else None
    sessions, sources = _sessions_sources(row)
    to_mid = []
    if age is not None and age >= cfg.short_days:
        to_mid.append(f"age>={cfg.short_days:g}d")
    if max(row.get("frequency") or 0, about) >= cfg.topic_repetition:
        to_mid.append(f"topic_repetition>={cfg.topic_repetition}")
    if n.activation >= cfg.activation_threshold:
        to_mid.append(f"activation>={cfg.activation_threshold}")
    to_long = []
    if to_mid:
        if age is not None and age >= cfg.long_days:
            to_long.append(f"age>={cfg.long_days:g}d")
        if (
            sessions >= cfg.min_sessions
            and sources >= cfg.min_sources
            and (row.get("confidence") or 0.0) >= cfg.confidence_threshold
        ):
            to_long.append(
                f"consistent:sessions>={cfg.min_sessions},sources>={cfg.min_sources},"
                f"confidence>={cfg.confidence_threshold:g}"
            )
    computed = "long" if to_long else "mid" if to_mid else "short"
    prev_tier = (n.prev or {}).get("tier")
    if n.pinned:
        n.tier, n.tier_reasons = "long", ["pin"]
    elif n.feedback < 0:
        n.downvoted = True
        n.tier, n.tier_reasons = TIERS[max(0, _RANK[computed] - 1)], ["downvote"]
    elif prev_tier in _RANK and _RANK[prev_tier] >= _RANK[computed]:
        n.tier, n.tier_reasons = prev_tier, []
    else:
        # name the triggers of the steps crossed since the previous tier (short → mid, mid → long)
        start = _RANK.get(prev_tier, 0)
        n.tier = computed
        n.tier_reasons = (to_mid if start < 1 else []) + (to_long if computed == "long" else [])


def _pre_archive(n: _Node, as_of: datetime, cfg: TierConfig) -> None:
    """Archive decisions that do not depend on the other nodes: input, sticky previous, episode age."""
    row, prev_status = n.row, (n.prev or {}).get("status")
    keep = n.pinned or n.category == "core"
    if row.get("status") == "archived":
        n.archived = True
        return
    if prev_status == "archived":
        if keep or n.recent_use:
            n.status_reasons = [
                "restore:pin" if n.pinned else "restore:core" if n.category == "core" else "restore:access"
            ]
        else:
            n.archived = True
            return
    seen = row.get("last_seen") or row.get("first_seen") or row.get("time_start")
    if (
        row.get("type") == "Episode"
        and not keep
        and seen is not None
        and as_of - seen >= timedelta(days=cfg.episode_archive_days)
        and not n.recent_use
    ):
        n.archived = True
        n.status_reasons = [f"archive:episode_age>={cfg.episode_archive_days:g}d"]


def _capacity(tenant_nodes: list[_Node], cfg: TierConfig) -> None:
    """seed 002 short-term capacity over one tenant's mid-tier Fact/Preference/Task nodes."""
    if cfg.overflow_strategy is None:
        return
    mid = [
        n
        for n in tenant_nodes
        if n.tier == "mid"
        and not n.archived
        and not n.downvoted
        and not n.pinned
        and n.row.get("type") in cfg.capacity_types
    ]
    cap = cfg.short_term_max_memories

    def high(n: _Node) -> bool:
        imp = n.row.get("importance")
        return (cfg.default_importance if imp is None else imp) >= cfg.transfer_threshold

    if len(mid) >= cap:
        reason = f"overflow:{cfg.overflow_strategy}"
        for n in mid:
            if cfg.overflow_strategy == "transfer_all" or high(n):
                n.tier, n.tier_reasons = "long", n.tier_reasons + [reason]
            elif n.category != "core":
                n.archived, n.status_reasons = True, [reason]
    elif len(mid) >= cfg.transfer_occupancy * cap:
        for n in mid:
            if high(n):
                n.tier = "long"
                n.tier_reasons = n.tier_reasons + [
                    f"importance>={cfg.transfer_threshold:g}:occupancy>={cfg.transfer_occupancy:.0%}"
                ]


def promote(
    nodes: pa.Table,
    feedback: pa.Table | None,
    previous: pa.Table | None,
    as_of: datetime,
    config: TierConfig = TierConfig(),
    *,
    edges: pa.Table | None = None,
) -> TierResult:
    """Tier, category, weight, activation, feedback, pinned and status of every node as of `as_of`.

    `feedback` is FEEDBACK (rows after `as_of` are ignored), `previous` the last run's output NODES (or None),
    `edges` (optional) lends ABOUT edges to the topic-repetition trigger. Output sorted by (tenant, id).
    """
    cfg, as_of = config, _naive_utc(as_of)
    fb = _feedback_by_node(feedback, as_of)
    prev = _previous_by_node(previous)
    about = _about_counts(edges)
    table = conform(nodes, NODES)
    table = table.take(pc.sort_indices(table, sort_keys=[("tenant", "ascending"), ("id", "ascending")]))
    assessed: list[_Node] = []
    by_tenant: dict[str, list[_Node]] = defaultdict(list)
    for row in table.select(_RULE_COLUMNS).to_pylist():
        key = (row["tenant"], row["id"])
        n = _assess_feedback(row, fb.get(key, []), as_of, cfg)
        n.prev = prev.get(key)
        _decide_category(n, as_of, cfg)
        _decide_tier(n, as_of, cfg, about.get(key, 0))
        _pre_archive(n, as_of, cfg)
        assessed.append(n)
        by_tenant[row["tenant"]].append(n)
    for tenant_nodes in by_tenant.values():  # tenants never share a capacity
        _capacity(tenant_nodes, cfg)

    out: dict[str, list] = {c: [] for c in _OUTPUT_COLUMNS}
    promotions, review = [], []
    for n in assessed:
        row = n.row
        status = (
            "archived"
            if n.archived
            else (row.get("status") if row.get("status") not in (None, "archived") else "active")
        )
        for col, value in (
            ("tier", n.tier),
            ("category", n.category),
            ("weight", n.weight),
            ("activation", n.activation),
            ("feedback", n.feedback),
            ("pinned", n.pinned),
            ("status", status),
        ):
            out[col].append(value)
        p = n.prev
        changed_tier = p is None or p.get("tier") != n.tier
        changed_cat = p is None or p.get("category") != n.category
        changed_status = p is None or p.get("status") != status
        if changed_tier or changed_cat or changed_status:
            reasons = (
                (n.tier_reasons if changed_tier else [])
                + (n.category_reasons if changed_cat else [])
                + (n.status_reasons if changed_status else [])
            )
            promotions.append(
                {
                    "tenant": row["tenant"],
                    "node_id": row["id"],
                    "from_tier": p and p.get("tier"),
                    "to_tier": n.tier,
                    "from_category": p and p.get("category"),
                    "to_category": n.category,
                    "from_status": p and p.get("status"),
                    "to_status": status,
                    "reason": "; ".join(dict.fromkeys(reasons)) or ("new" if p is None else "input_changed"),
                    "at": as_of,
                    "provenance": RULE_PROMOTION,
                }
            )
        if (
            row.get("type") in cfg.review_types
            and status != "archived"
            and n.category != "core"
            and not n.pinned
            and not n.recent_use
            and n.weight < cfg.review_threshold
        ):
            review.append(
                {
                    "id": stable_id("rq", row["tenant"], "fact_low_weight", row["id"]),
                    "tenant": row["tenant"],
                    "kind": "fact_low_weight",
                    "node_ids": [row["id"]],
                    "scores": [n.weight],
                    "reason": f"weight<{cfg.review_threshold:g}",
                    "created_at": as_of,
                    "provenance": RULE_REVIEW,
                }
            )
    for col, values in out.items():
        i = table.schema.get_field_index(col)
        table = table.set_column(i, NODES.field(col), pa.array(values, type=NODES.field(col).type))
    return TierResult(nodes=table, promotions=_table(promotions, PROMOTIONS), review=_table(review, REVIEW_QUEUE))


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    if not rows:
        return schema.empty_table()
    return conform(pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema), schema)


# ----------------------------------------------------------------------------------------------- check


def tiers_monotone(nodes: pa.Table, promotions: pa.Table, config: TierConfig = TierConfig()) -> CheckOutcome:
    """Tiers only move up: a promotions row going back (long → mid …) names a demotion reason ("downvote");
    each node's history chains (a row's from_tier is the previous row's to_tier) and ends at the node's tier."""
    bad: list[dict] = []
    history: dict[tuple[str, str], list[dict]] = defaultdict(list)
    rows = promotions.select(["tenant", "node_id", "from_tier", "to_tier", "reason", "at"]).to_pylist()
    for r in rows:
        history[(r["tenant"], r["node_id"])].append(r)
        if r["to_tier"] not in _RANK or (r["from_tier"] is not None and r["from_tier"] not in _RANK):
            bad.append({**r, "problem": "unknown_tier"})
        elif (
            r["from_tier"] is not None
            and _RANK[r["to_tier"]] < _RANK[r["from_tier"]]
            and not any(word in (r["reason"] or "") for word in config.demotion_reasons)
        ):
            bad.append({**r, "problem": "demoted_without_reason"})
    for key, hist in history.items():
        hist.sort(key=lambda r: r["at"] or datetime.min)
        for before, after in zip(hist, hist[1:]):
            if after["from_tier"] != before["to_tier"]:
                bad.append({**after, "problem": "broken_chain"})
    for r in nodes.select(["tenant", "id", "tier"]).to_pylist():
        hist = history.get((r["tenant"], r["id"]))
        if hist and hist[-1]["to_tier"] != r["tier"]:
            bad.append(
                {
                    "tenant": r["tenant"],
                    "node_id": r["id"],
                    "tier": r["tier"],
                    "last_to_tier": hist[-1]["to_tier"],
                    "problem": "tier_not_last_promotion",
                }
            )
    return CheckOutcome(passed=not bad, checked=len(rows) + nodes.num_rows, failures=len(bad), examples=bad[:5])


__all__ = [
    "TierConfig",
    "TierResult",
    "DecayRule",
    "promote",
    "apply_boosts",
    "boost_schedule",
    "counted_events",
    "decayed_weight",
    "tiers_monotone",
    "TIERS",
]
