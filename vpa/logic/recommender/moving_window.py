"""The `moving-window` recommender: a memory target that follows usage within the day.

Owns: `MovingWindowConfig` (its parameters), `moving_window_limit` (the memory limit from recent slot
peaks), `ladder_step_up` (rounding onto a geometric ladder, the update threshold) and
`MovingWindowPodRecommender`. Upstream's recommender holds one memory value derived from the
distribution of daily peaks; on memory that moves within the day that leaves much of the limit unused
most of the day. This one recomputes, from the recent usage the aggregate keeps
(`vpa.logic.recommender.recent_usage`: the peak of each 5-minute slot over the last two days), the
largest of three
moving-window models, after Autopilot's moving-window recommenders (Rzadca et al., EuroSys 2020):

- recent: the slot peaks decayed with a half-life (one hour), times a margin chosen per container from
  its own history — the 99th percentile of its jumps (each slot's peak over the largest of the hour
  before it, that hour floored at the per-pod minimum), clamped to [1.05, 2] — so a steady container
  gets a small margin and a spiky one a large one (Autopilot's per-container choice among margins,
  evaluated on the history the recommender keeps);
- same time yesterday: the largest slot peak from 30 minutes before to one decrease interval plus an
  hour after this time of day, a day ago (daily jobs recur), × 1.1;
- level: the 98th percentile of the window's slot peaks (the level the container often reaches), × 1.1.

Increases are immediate, decreases come at most once per `decrease_interval_s` (one hour): time is cut
into intervals, and everything but the current interval's own peaks is evaluated as of the interval's
start, so within an interval the target can only grow. The result is rounded up onto a geometric ladder
(10% steps: the smallest change, so the update threshold) and never falls below upstream's per-pod
minimum. The memory bounds equal the target: every change of target is one the updater applies (an
in-place resize where supported). CPU target and bounds are upstream's, unchanged. Until an aggregate
holds `min_history_s` of recent usage (a new container, or any container after a restart: recent usage
is not checkpointed) and a jump can be measured before the current interval (an hour of slots), the
container gets upstream's recommendation.

Must not: format quantities, apply VPA policies, read the clock, or log.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.estimation import (
    EstimatorConfig,
    PercentilePodRecommender,
    RawRecommendation,
    filter_controlled,
    per_pod_minimum,
)
from vpa.logic.recommender.numerics import amount_from_float
from vpa.model.resources import Resources

DAY_S: Final = 86_400.0
LADDER_BASE_BYTES: Final = 1024 * 1024
"""The ladder's rungs are 1 MiB × (1 + step)^k."""


@dataclass(frozen=True, slots=True)
class MovingWindowConfig:
    """The moving-window recommender's parameters (see the module and docs/quality.md)."""

    slot_s: float = 300.0
    """Length of one recent-usage slot (its peak is kept)."""
    window_s: float = 2 * DAY_S
    """How much recent usage is kept; the level and the margin are taken over it."""
    lookback_s: float = 3600.0
    """A jump is a slot's peak over the largest peak of this much time before it."""
    half_life_s: float = 3600.0
    """Half-life of the recent model's decay."""
    margin_quantile: float = 0.99
    """The recent model's margin is this quantile of the container's jumps ..."""
    min_margin: float = 1.05
    max_margin: float = 2.0
    """... clamped to [min_margin, max_margin] (max_margin while fewer than `lookback` slots are held)."""
    daily_margin: float = 1.1
    daily_before_s: float = 1800.0
    daily_after_s: float = 3600.0
    level_quantile: float = 0.98
    level_margin: float = 1.1
    decrease_interval_s: float = 3600.0
    """The target falls at most once per interval of this length (rises at once)."""
    step: float = 0.1
    """Relative size of a ladder step: the smallest change of target, so the update threshold."""
    min_history_s: float = 3600.0
    """Recent usage needed before this algorithm takes over from upstream's for a container (it also
    waits until a jump can be measured before the current interval)."""

    def __post_init__(self) -> None:
        positive = {"slot_s": self.slot_s, "half_life_s": self.half_life_s, "lookback_s": self.lookback_s,
                    "min_margin": self.min_margin, "daily_margin": self.daily_margin,
                    "level_margin": self.level_margin, "decrease_interval_s": self.decrease_interval_s}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be greater than 0, got {value}")
        if self.max_margin < self.min_margin:
            raise ValueError(f"max_margin ({self.max_margin}) must be at least min_margin "
                             f"({self.min_margin})")
        if not self.window_s >= DAY_S + self.daily_after_s + self.decrease_interval_s:
            raise ValueError("window_s must cover a day plus daily_after_s plus decrease_interval_s "
                             f"({DAY_S + self.daily_after_s + self.decrease_interval_s:g} s), "
                             f"got {self.window_s}")
        quantiles = (("level_quantile", self.level_quantile), ("margin_quantile", self.margin_quantile))
        for name, value in quantiles:
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        for name, value in (("daily_before_s", self.daily_before_s), ("daily_after_s", self.daily_after_s),
                            ("step", self.step), ("min_history_s", self.min_history_s)):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")

    @property
    def lookback_slots(self) -> int:
        return max(1, round(self.lookback_s / self.slot_s))


def _quantile(values: list[float], quantile: float) -> float:
    """The smallest value with at least `quantile` of `values` at or below it (values not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def past_models(slots: Sequence[int], peaks: Sequence[float], before: Sequence[float], start: int,
                slot_s: float, config: MovingWindowConfig,
                minimum: float = 0.0) -> tuple[float, float, float]:
    """(recent, margin, level) from the slots before slot `start` and no older than `window_s` before it:
    the decayed maximum as of `start` (the slot just before it at age 0), the container's margin (its
    jumps' `margin_quantile`, clamped; 0 while it has no jump to measure: no slot `lookback` after the
    oldest) and the level quantile (0 without slots). A pure function of those slots, so it may be
    memoised per `start`."""
    split = bisect.bisect_left(slots, start)
    first = bisect.bisect_left(slots, start - math.ceil(config.window_s / slot_s - 1e-9))
    if split <= first:
        return 0.0, 0.0, 0.0
    decay = math.log(2) * slot_s / config.half_life_s
    highest = max(peaks[first:split])
    recent = 0.0
    for index in range(split - 1, first - 1, -1):  # newest first, until no older peak could win
        factor = math.exp(-decay * (start - 1 - slots[index]))
        if highest * factor <= recent:
            break
        value = peaks[index] * factor
        if value > recent:
            recent = value
    margin = 0.0
    lookback = config.lookback_slots
    oldest = slots[first]
    jumps = [peaks[i] / max(before[i], minimum, 1.0)
             for i in range(first, split) if slots[i] - oldest >= lookback]
    if jumps:
        margin = min(config.max_margin, max(config.min_margin, _quantile(jumps, config.margin_quantile)))
    return recent, margin, _quantile(list(peaks[first:split]), config.level_quantile)


def moving_window_limit(slots: Sequence[int], peaks: Sequence[float], before: Sequence[float], slot_s: float,
                        config: MovingWindowConfig, minimum: float = 0.0,
                        past: tuple[float, float, float] | None = None) -> float:
    """The largest of the three models (see module) over slot peaks: `slots` ascending slot numbers
    (slot `n` starts at `n × slot_s`), `before` each slot's lookback maximum (`RecentUsage.before`),
    `minimum` the floor of a jump's reference; `past` is `past_models` for the current interval's first
    slot when already known. With no jump to measure the margin is `max_margin`. 0 when there is no
    slot."""
    if not peaks:
        return 0.0
    start = interval_start(slots[-1], slot_s, config)
    if past is None:
        past = past_models(slots, peaks, before, start, slot_s, config, minimum)
    recent, margin, level = past
    margin = margin or config.max_margin
    current = max(peaks[bisect.bisect_left(slots, start):])
    # Same time yesterday: slots in [start − 1 day − before, start − 1 day + interval + after).
    per_interval = max(1, round(config.decrease_interval_s / slot_s))
    low = start - math.ceil((DAY_S + config.daily_before_s) / slot_s - 1e-9)
    high = start + per_interval + math.floor((config.daily_after_s - DAY_S) / slot_s + 1e-9)
    daily = max(peaks[bisect.bisect_left(slots, low):bisect.bisect_left(slots, high)], default=0.0)
    return max(margin * max(recent, current), config.daily_margin * daily, config.level_margin * level)


def interval_start(newest: int, slot_s: float, config: MovingWindowConfig) -> int:
    """The first slot of the decrease interval that slot `newest` falls in."""
    per_interval = max(1, round(config.decrease_interval_s / slot_s))
    return newest // per_interval * per_interval


def ladder_step_up(value: float, step: float) -> float:
    """`value` rounded up to the next rung 1 MiB × (1 + step)^k (unchanged for step 0 or value ≤ 0)."""
    if step <= 0 or value <= 0:
        return value
    rungs = math.ceil(math.log(value / LADDER_BASE_BYTES) / math.log1p(step) - 1e-9)
    return float(LADDER_BASE_BYTES * (1 + step) ** rungs)


def aggregation_for(config: AggregationConfig, window: MovingWindowConfig) -> AggregationConfig:
    """`config` with recent usage kept as this algorithm needs it."""
    return replace(config, recent_usage_slot_s=window.slot_s,
                   recent_usage_window_s=window.window_s + window.decrease_interval_s,
                   recent_usage_lookback_slots=window.lookback_slots)


class MovingWindowPodRecommender:
    """Upstream's recommender with the memory target from recent usage (see module)."""

    def __init__(self, config: EstimatorConfig | None = None,
                 window: MovingWindowConfig | None = None) -> None:
        self.default = PercentilePodRecommender(config)
        self.config = self.default.config
        self.window = window if window is not None else MovingWindowConfig()

    def aggregation(self, config: AggregationConfig) -> AggregationConfig:
        """The aggregation settings this algorithm needs (recent usage kept)."""
        return aggregation_for(config, self.window)

    def recommend(self, states: Mapping[str, AggregateContainerState]) -> dict[str, RawRecommendation]:
        base = self.default.recommend(states)
        if not base:
            return base
        minimum = per_pod_minimum(self.config, len(states)).memory_bytes or 0
        window = self.window
        result: dict[str, RawRecommendation] = {}
        for name, state in states.items():
            raw = base[name]
            recent = state.recent
            if recent is None or recent.covered_s() < window.min_history_s:
                result[name] = raw
                continue
            slots, peaks, before = recent.slots(), recent.peaks(), recent.before()
            start = interval_start(slots[-1], recent.slot_s, window)
            key = (start, float(minimum))
            past = recent.memo.get(key)
            if past is None:
                past = past_models(slots, peaks, before, start, recent.slot_s, window, minimum)
                recent.memo.clear()
                recent.memo[key] = past
            if not past[1]:  # no jump measurable before this interval yet: upstream's, as before
                result[name] = raw
                continue
            limit = ladder_step_up(moving_window_limit(slots, peaks, before, recent.slot_s, window, minimum,
                                                       past), window.step)
            memory = max(minimum, amount_from_float(limit))
            target = Resources(cpu_millicores=raw.target.cpu_millicores, memory_bytes=memory)
            lower = Resources(cpu_millicores=raw.lower_bound.cpu_millicores, memory_bytes=memory)
            upper = Resources(cpu_millicores=raw.upper_bound.cpu_millicores, memory_bytes=memory)
            controlled = state.controlled_resources
            result[name] = RawRecommendation(target=filter_controlled(target, controlled),
                                             lower_bound=filter_controlled(lower, controlled),
                                             upper_bound=filter_controlled(upper, controlled))
        return result
