"""The settings of promotion and decay (`TierConfig`, each default naming its seed) and the arithmetic a node's
weight replays: BOOST anti-abuse (cooldown, per-day cap) and step decay per whole period without use. The rules
that use them, and their seed sources, are jobs.tiers'."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta


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
