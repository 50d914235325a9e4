"""Estimators: from an aggregate's histograms to target, lower-bound and upper-bound resources.

Owns: the small `ResourceEstimator` protocol and upstream's building blocks (percentile, safety margin,
confidence multiplier, minimum resources), `EstimatorConfig` (the recommender flags that shape them),
and `PercentilePodRecommender`, upstream's default recommender: P90/P50/P95 plus 15% margin, the upper
bound widened and the lower bound narrowed by confidence in the history length, then the per-pod minimum
split evenly across the VPA's containers, then only the controlled resources kept. The
`PodRecommender` protocol is what named recommenders with other algorithms or settings implement.

Must not: format quantities, apply VPA policies (see `postprocessing`), read the clock, or log.
All amounts are integer millicores / bytes computed with upstream's float-to-int truncation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from vpa.logic.recommender.aggregation import AggregateContainerState
from vpa.logic.recommender.numerics import (
    amount_from_float,
    cpu_amount_from_cores,
    go_pow,
    scale_amount,
)
from vpa.model.resources import CPU, MEMORY, Resources

_MIB: Final = 1024 * 1024


class ResourceEstimator(Protocol):
    """Turns one aggregate into CPU millicores and memory bytes."""

    def estimate(self, state: AggregateContainerState) -> Resources: ...


@dataclass(frozen=True, slots=True)
class EstimatorConfig:
    """Upstream's recommender flags for estimation, with their defaults."""

    target_cpu_percentile: float = 0.9
    lower_bound_cpu_percentile: float = 0.5
    upper_bound_cpu_percentile: float = 0.95
    target_memory_percentile: float = 0.9
    lower_bound_memory_percentile: float = 0.5
    upper_bound_memory_percentile: float = 0.95
    margin_fraction: float = 0.15  # --recommendation-margin-fraction
    confidence_interval_cpu_s: float = 24 * 3600.0  # --confidence-interval-cpu
    confidence_interval_memory_s: float = 24 * 3600.0  # --confidence-interval-memory
    pod_min_cpu_millicores: float = 25.0  # --pod-recommendation-min-cpu-millicores
    pod_min_memory_mb: float = 250.0  # --pod-recommendation-min-memory-mb (really MiB)


@dataclass(frozen=True, slots=True)
class PercentileEstimator:
    """The given percentile of the CPU usage histogram and of the memory-peak histogram."""

    cpu_percentile: float
    memory_percentile: float
    per_container: bool = False
    """The target estimator: a container's own AEP-9970 percentile (on its aggregate's settings) wins."""

    def estimate(self, state: AggregateContainerState) -> Resources:
        cpu, memory = self.cpu_percentile, self.memory_percentile
        if self.per_container:
            own = state.settings
            cpu = cpu if own.target_cpu_percentile is None else own.target_cpu_percentile
            memory = memory if own.target_memory_percentile is None else own.target_memory_percentile
        return Resources(
            cpu_millicores=cpu_amount_from_cores(state.cpu.percentile(cpu)),
            memory_bytes=amount_from_float(state.memory.percentile(memory)),
        )


@dataclass(frozen=True, slots=True)
class MarginEstimator:
    """`x + trunc(x × fraction)` for each resource (not `trunc(x × (1 + fraction))`)."""

    margin_fraction: float
    base: ResourceEstimator

    def estimate(self, state: AggregateContainerState) -> Resources:
        raw = self.base.estimate(state)
        return Resources(
            cpu_millicores=_with_margin(raw.cpu_millicores, self.margin_fraction),
            memory_bytes=_with_margin(raw.memory_bytes, self.margin_fraction),
        )


def _with_margin(amount: int | None, fraction: float) -> int | None:
    if amount is None:
        return None
    return amount + scale_amount(amount, fraction)


def confidence(state: AggregateContainerState, interval_s: float) -> float:
    """How much history backs the aggregate, in `interval_s` units: the smaller of the first-to-last CPU
    sample span and the CPU sample count at one sample a minute. 1 day of minutely samples → 1.0."""
    first = state.first_sample_start
    last = state.last_sample_start
    lifespan = 0.0 if first is None or last is None else (last - first) / interval_s
    samples = state.total_samples_count / (interval_s / 60.0)
    return min(lifespan, samples)


def confidence_factor(multiplier: float, exponent: float, history: float) -> float:
    """`(1 + multiplier/history)^exponent` as Go evaluates it (division by zero gives +Inf)."""
    base = 1.0 + (multiplier / history if history != 0 else math.copysign(math.inf, multiplier))
    return go_pow(base, exponent)


@dataclass(frozen=True, slots=True)
class ConfidenceMultiplier:
    """Scales each resource by `(1 + multiplier/confidence)^exponent`, confidence measured per resource
    with its own `--confidence-interval-*`."""

    multiplier: float
    exponent: float
    base: ResourceEstimator
    cpu_interval_s: float = 24 * 3600.0
    memory_interval_s: float = 24 * 3600.0

    def estimate(self, state: AggregateContainerState) -> Resources:
        raw = self.base.estimate(state)
        return Resources(
            cpu_millicores=self._scaled(raw.cpu_millicores, state, self.cpu_interval_s),
            memory_bytes=self._scaled(raw.memory_bytes, state, self.memory_interval_s),
        )

    def _scaled(self, amount: int | None, state: AggregateContainerState, interval_s: float) -> int | None:
        if amount is None:
            return None
        factor = confidence_factor(self.multiplier, self.exponent, confidence(state, interval_s))
        return scale_amount(amount, factor)


@dataclass(frozen=True, slots=True)
class MinResourcesEstimator:
    """Raises each resource to at least the given minimum."""

    minimum: Resources
    base: ResourceEstimator

    def estimate(self, state: AggregateContainerState) -> Resources:
        raw = self.base.estimate(state)
        return Resources(
            cpu_millicores=_at_least(raw.cpu_millicores, self.minimum.cpu_millicores),
            memory_bytes=_at_least(raw.memory_bytes, self.minimum.memory_bytes),
        )


def _at_least(amount: int | None, minimum: int | None) -> int | None:
    if amount is None or minimum is None:
        return amount
    return minimum if amount < minimum else amount


@dataclass(frozen=True, slots=True)
class RawRecommendation:
    """One container's estimate before formatting and policies; only controlled resources are set."""

    target: Resources
    lower_bound: Resources
    upper_bound: Resources


class PodRecommender(Protocol):
    """Computes raw recommendations for all (non-Off, sampled) containers of one VPA."""

    def recommend(self, states: Mapping[str, AggregateContainerState]) -> dict[str, RawRecommendation]: ...


def per_pod_minimum(config: EstimatorConfig, container_count: int) -> Resources:
    """The per-pod minimum split evenly over `container_count` containers, with upstream's float steps:
    `trunc(trunc(mcores × 0.001 × 1000) × 1/N)` and `trunc(trunc(MiB × 1024 × 1024) × 1/N)`."""
    fraction = 1.0 / float(container_count)
    return Resources(
        cpu_millicores=scale_amount(cpu_amount_from_cores(config.pod_min_cpu_millicores * 0.001), fraction),
        memory_bytes=scale_amount(amount_from_float(config.pod_min_memory_mb * 1024 * 1024), fraction),
    )


def filter_controlled(resources: Resources, controlled: tuple[str, ...]) -> Resources:
    return Resources(
        cpu_millicores=resources.cpu_millicores if CPU in controlled else None,
        memory_bytes=resources.memory_bytes if MEMORY in controlled else None,
    )


class PercentilePodRecommender:
    """Upstream's default recommender (`CreatePodResourceRecommender` with the flags in `config`)."""

    def __init__(self, config: EstimatorConfig | None = None) -> None:
        self.config = config if config is not None else EstimatorConfig()
        c = self.config
        target: ResourceEstimator = PercentileEstimator(c.target_cpu_percentile, c.target_memory_percentile,
                                                        per_container=True)
        lower: ResourceEstimator = PercentileEstimator(c.lower_bound_cpu_percentile,
                                                       c.lower_bound_memory_percentile)
        upper: ResourceEstimator = PercentileEstimator(c.upper_bound_cpu_percentile,
                                                       c.upper_bound_memory_percentile)
        target = MarginEstimator(c.margin_fraction, target)
        lower = MarginEstimator(c.margin_fraction, lower)
        upper = MarginEstimator(c.margin_fraction, upper)
        # Short history: the upper bound grows by (1 + 1/days) (×2 after a day, ×1.14 after a week) ...
        upper = ConfidenceMultiplier(1.0, 1.0, upper, c.confidence_interval_cpu_s,
                                     c.confidence_interval_memory_s)
        # ... and the lower bound shrinks by (1 + 0.001/days)^-2 (×0.6 after 5 min, ×0.95 after an hour).
        lower = ConfidenceMultiplier(0.001, -2.0, lower, c.confidence_interval_cpu_s,
                                     c.confidence_interval_memory_s)
        self.target_estimator = target
        self.lower_bound_estimator = lower
        self.upper_bound_estimator = upper

    def recommend(self, states: Mapping[str, AggregateContainerState]) -> dict[str, RawRecommendation]:
        if not states:
            return {}
        minimum = per_pod_minimum(self.config, len(states))
        target = MinResourcesEstimator(minimum, self.target_estimator)
        lower = MinResourcesEstimator(minimum, self.lower_bound_estimator)
        upper = MinResourcesEstimator(minimum, self.upper_bound_estimator)
        result: dict[str, RawRecommendation] = {}
        for name, state in states.items():
            controlled = state.controlled_resources
            result[name] = RawRecommendation(
                target=filter_controlled(target.estimate(state), controlled),
                lower_bound=filter_controlled(lower.estimate(state), controlled),
                upper_bound=filter_controlled(upper.estimate(state), controlled),
            )
        return result
