"""The `raise-on-overrun` recommender: `oom-averse`'s limit with a little headroom, raised at once when
usage has gone above it.

Owns: `RaiseOnOverrunConfig` (its parameters), `with_headroom` (the base limit plus its headroom),
`recent_peak` (the highest slot peak of a recent span), `overrun_raise` (the memory target and bounds
from the base limit and the recent peaks) and `RaiseOnOverrunPodRecommender`. `oom-averse` prices an
overrun per byte of limit, so it sizes a large container near its usual daily peak; a peak above that
limit then recurs for hours or days while the decaying histogram of daily peaks learns it, and a pod
updated less than 12 hours ago keeps its request (upstream's updater waits for the 12-hour rule unless
the request is outside the bounds). This recommender takes `oom-averse`'s limit (with its own price,
`RaiseOnOverrunConfig.oom_averse`) and adds three rules:

- headroom: the base limit is that limit plus `headroom` (10%) of it, counting at most
  `headroom_reference_bytes` (1 GiB) of it — 10% below 1 GiB, about 102 MiB above. The cost-optimal
  limit sits on an edge of the histogram's buckets, at the level of past daily peaks; many days on
  which a peak goes just above it are avoided by a few percent more on a large container, which holds
  little in bytes next to what `oom-averse` saved there;
- when the highest slot peak of the last `hold_s` (30 hours) is above the base limit, the target is
  that peak × `margin` (1.2): the raise is held for a day and the hours around the same time the next
  day, then the target falls back to the base and the request follows by the updater's ordinary rule
  (a pod older than 12 hours, 10% off);
- the memory lower bound is at least the highest slot peak of the last `trigger_s` (an hour): a pod whose
  request was overrun in the last hour is below its bounds, so the updater applies the target at its
  next pass; a pod that was not overrun is inside its bounds and left alone, so a raise costs an applied
  change only where an overrun happened.

The slot peaks are the aggregate's recent usage (`vpa.logic.recommender.recent_usage`; an OOM kill
enters it as its bumped amount, since usage above the limit is never seen). They are not checkpointed:
after a restart the container has the base limit (`oom-averse`'s with this price, plus the headroom)
until new samples arrive, and a raise in progress is forgotten. The current moment is the newest slot
held: this module never reads the clock. CPU, the other bounds, the per-pod minimum and post-processing
are `oom-averse`'s.

Must not: format quantities, apply VPA policies, read the clock, or log.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.cost_aware import OomAverseConfig, OomAversePodRecommender
from vpa.logic.recommender.estimation import (
    EstimatorConfig,
    RawRecommendation,
    filter_controlled,
    per_pod_minimum,
)
from vpa.logic.recommender.numerics import amount_from_float
from vpa.model.resources import Resources

__all__ = ["RaiseOnOverrunConfig", "RaiseOnOverrunPodRecommender", "overrun_raise", "recent_peak",
           "with_headroom"]

GIB = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RaiseOnOverrunConfig:
    """The `raise-on-overrun` recommender's parameters (see the module and docs/quality.md)."""

    margin: float = 1.2
    """The raise is the recent peak times this."""
    trigger_s: float = 3600.0
    """The memory lower bound is the highest slot peak of this much time up to the newest slot: a pod whose
    request is below it was overrun within it, and the updater applies the target."""
    hold_s: float = 30 * 3600.0
    """When the highest slot peak of this much time up to the newest slot is above the base limit, the
    target is that peak × `margin` (the raise lasts this long after the peak: a day, and the hours
    around the same time the next day, when a daily peak tends to come back)."""
    slot_s: float = 300.0
    """Length of one recent-usage slot (its peak is kept)."""
    headroom: float = 0.1
    """The base limit is `oom-averse`'s limit L plus `headroom` × min(L, `headroom_reference_bytes`)."""
    headroom_reference_bytes: float = float(GIB)
    """The most of L that earns headroom: above it the headroom is a constant number of bytes."""
    oom_averse: OomAverseConfig = field(default_factory=lambda: OomAverseConfig(overrun_cost=8.0))
    """The base limit's parameters: `oom-averse`'s with a lower price of an overrun (8 days of full
    slack at 1 GiB instead of 20), since the headroom and the raise answer much of what it lets through."""

    def __post_init__(self) -> None:
        if not self.headroom >= 0:
            raise ValueError(f"headroom must not be negative, got {self.headroom}")
        if not self.headroom_reference_bytes > 0:
            raise ValueError("headroom_reference_bytes must be greater than 0, got "
                             f"{self.headroom_reference_bytes}")
        if not self.margin >= 1:
            raise ValueError(f"margin must be at least 1, got {self.margin}")
        for name, value in (("trigger_s", self.trigger_s), ("hold_s", self.hold_s), ("slot_s", self.slot_s)):
            if not value > 0:
                raise ValueError(f"{name} must be greater than 0, got {value}")
        if self.hold_s < self.trigger_s:
            raise ValueError(f"hold_s ({self.hold_s}) must be at least trigger_s ({self.trigger_s})")


def with_headroom(limit: float, headroom: float, reference_bytes: float) -> float:
    """`limit` × (1 + `headroom` × min(1, `reference_bytes` / `limit`)): `headroom` of the limit, counting
    at most `reference_bytes` of it (so a constant `headroom` × `reference_bytes` above it); a limit of 0
    or less is returned as it is."""
    if limit <= 0:
        return limit
    return limit * (1 + headroom * min(1.0, reference_bytes / limit))


def recent_peak(slots: Sequence[int], peaks: Sequence[float], slot_s: float, span_s: float) -> float:
    """The highest peak among the slots within `span_s` up to and including the newest one (`slots`
    ascending slot numbers, slot `n` starting at `n × slot_s`); 0 without slots."""
    if not slots:
        return 0.0
    first = slots[-1] - max(1, math.ceil(span_s / slot_s - 1e-9)) + 1
    return max(peaks[bisect.bisect_left(slots, first):], default=0.0)


def overrun_raise(base: float, lower: float, upper: float, trigger_peak: float, hold_peak: float,
                  margin: float) -> tuple[float, float, float]:
    """(target, lower bound, upper bound) in bytes from the base limit and its bounds: the target is
    `margin` × `hold_peak` when `hold_peak` is above the base, else the base; the lower bound is `lower`
    (at most the target) or `trigger_peak` (at most the target), whichever is higher; the upper bound is
    at least the target."""
    target = margin * hold_peak if hold_peak > base else base
    low = max(min(lower, target), min(trigger_peak, target))
    return target, low, max(upper, target)


class RaiseOnOverrunPodRecommender(OomAversePodRecommender):
    """`oom-averse` (its own price) with headroom, and an overrun answered at the next pass by a raise
    held for 30 hours (see module)."""

    def __init__(self, config: EstimatorConfig | None = None,
                 raising: RaiseOnOverrunConfig | None = None) -> None:
        self.raising = raising if raising is not None else RaiseOnOverrunConfig()
        super().__init__(config, self.raising.oom_averse)

    def aggregation(self, config: AggregationConfig) -> AggregationConfig:
        """The aggregation settings this algorithm needs: slot peaks kept over `hold_s`."""
        r = self.raising
        return replace(config, recent_usage_slot_s=r.slot_s, recent_usage_window_s=r.hold_s,
                       recent_usage_lookback_slots=1)

    def recommend(self, states: Mapping[str, AggregateContainerState]) -> dict[str, RawRecommendation]:
        base = super().recommend(states)
        if not base:
            return base
        r = self.raising
        minimum = per_pod_minimum(self.config, len(states)).memory_bytes or 0
        result: dict[str, RawRecommendation] = {}
        for name, raw in base.items():
            recent = states[name].recent
            memory = raw.target.memory_bytes
            if memory is None:
                result[name] = raw
                continue
            trigger_peak = hold_peak = 0.0  # no recent usage (a restart): the base limit and its bounds
            if recent is not None and len(recent):
                slots, peaks = recent.slots(), recent.peaks()
                trigger_peak = recent_peak(slots, peaks, recent.slot_s, r.trigger_s)
                hold_peak = recent_peak(slots, peaks, recent.slot_s, r.hold_s)
            target, lower, upper = overrun_raise(
                with_headroom(float(memory), r.headroom, r.headroom_reference_bytes),
                float(raw.lower_bound.memory_bytes or memory),
                float(raw.upper_bound.memory_bytes or memory), trigger_peak, hold_peak, r.margin)
            memory_target = max(minimum, amount_from_float(target))
            memory_lower = min(memory_target, amount_from_float(lower))
            memory_upper = max(memory_target, amount_from_float(upper))
            controlled = states[name].controlled_resources
            result[name] = RawRecommendation(
                target=filter_controlled(Resources(raw.target.cpu_millicores, memory_target), controlled),
                lower_bound=filter_controlled(Resources(raw.lower_bound.cpu_millicores, memory_lower),
                                              controlled),
                upper_bound=filter_controlled(Resources(raw.upper_bound.cpu_millicores, memory_upper),
                                              controlled))
        return result
