"""The `cost-aware` and `oom-averse` recommenders and the table of built-in recommender algorithms.

Owns: `CostAwarePodRecommender` — upstream's CPU estimate unchanged, and a memory target chosen per
container as the candidate limit with the lowest cost of overrun plus slack over that container's own
decaying histogram of daily memory peaks (the idea of Autopilot's per-container model choice, EuroSys
2020, evaluated on the distribution the recommender already keeps rather than on a replayed past);
`OomAversePodRecommender` — the same choice with the price of an overrun falling with the limit's size
(`overrun_cost × (1 GiB / L)`), so that memory is spent where it is cheap in bytes (small containers)
and saved where it is dear (large ones): fewer OOM kills for the same memory held in total;
and `pod_recommender_for`, which maps a
recommender name to its algorithm (`moving-window` lives in `vpa.logic.recommender.moving_window`,
`raise-on-overrun` in `vpa.logic.recommender.raise_on_overrun`).

The cost-aware recommender reads nothing but the aggregate state that checkpoints store (the memory-peak
histogram and the CPU histogram), so it keeps no state of its own and survives restarts exactly as the
default one does. Bounds, the per-pod minimum and controlled resources follow the default recommender;
post-processing and policies are applied by the caller, the same for every algorithm.

Must not: format quantities, apply VPA policies, read the clock, or log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vpa.logic.recommender.aggregation import AggregateContainerState
from vpa.logic.recommender.estimation import (
    EstimatorConfig,
    PercentilePodRecommender,
    PodRecommender,
    RawRecommendation,
    filter_controlled,
    per_pod_minimum,
)
from vpa.logic.recommender.histogram import Histogram
from vpa.logic.recommender.moving_window import MovingWindowPodRecommender
from vpa.logic.recommender.numerics import amount_from_float
from vpa.model.resources import Resources
from vpa.model.vpa import (
    BUILTIN_RECOMMENDERS,
    COST_AWARE_RECOMMENDER_NAME,
    MOVING_WINDOW_RECOMMENDER_NAME,
    OOM_AVERSE_RECOMMENDER_NAME,
    RAISE_ON_OVERRUN_RECOMMENDER_NAME,
)

__all__ = ["BUILTIN_RECOMMENDERS", "COST_AWARE_RECOMMENDER_NAME", "OOM_AVERSE_RECOMMENDER_NAME",
           "CostAwareConfig", "CostAwarePodRecommender", "OomAverseConfig", "OomAversePodRecommender",
           "cost_optimal_limit",
           "pod_recommender_for"]

GIB = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CostAwareConfig:
    """The cost-aware recommender's one parameter.

    `overrun_cost`: the price of one daily memory peak above the limit (a likely OOM kill that day),
    in units of one day at 100% relative slack. At 10 a limit that is overrun on one day in ten must
    save at least a full day of slack to be preferred; it lands near upstream's 90th percentile for a
    steady container and lower for containers whose peaks cluster tightly below a few outliers.
    """

    overrun_cost: float = 10.0

    def __post_init__(self) -> None:
        if not self.overrun_cost > 0:
            raise ValueError(f"overrun_cost must be greater than 0, got {self.overrun_cost}")


def cost_optimal_limit(histogram: Histogram, overrun_cost: float, size_exponent: float = 0.0,
                       reference_bytes: float = 1.0) -> float:
    """The bucket upper edge L minimising `overrun_cost × P(peak > L) + E[(L − peak)⁺ / L]` over the
    histogram's weights (each bucket's peaks taken at its start: slack is never understated); ties go
    to the smaller limit. 0 for an empty histogram. With `size_exponent` e > 0 the price of an overrun
    at limit L is `overrun_cost × (reference_bytes / L)^e` (`oom-averse`); at 0 it is `overrun_cost`."""
    if histogram.is_empty():
        return 0.0
    weights = histogram.bucket_weights()
    starts = histogram.options.bucket_starts
    lowest, highest = histogram.min_bucket, histogram.max_bucket
    total = sum(weights[lowest:highest + 1])
    if total <= 0:
        return 0.0
    best_cost = float("inf")
    best_limit = 0.0
    below_weight = 0.0  # weight of buckets lowest..edge
    below_sum = 0.0  # Σ weight × start over the same buckets
    for edge in range(lowest, highest + 1):
        below_weight += weights[edge]
        below_sum += weights[edge] * starts[edge]
        limit = starts[edge + 1] if edge + 1 < len(starts) else starts[edge]
        if limit <= 0:
            continue
        over = (total - below_weight) / total
        slack = (below_weight * limit - below_sum) / (limit * total)
        price = overrun_cost
        if size_exponent:
            price *= (reference_bytes / limit) ** size_exponent
        cost = price * over + slack
        if cost < best_cost:
            best_cost, best_limit = cost, limit
    return best_limit


class CostAwarePodRecommender:
    """Upstream's recommender with the memory target replaced by the cost-optimal limit (see module)."""

    def __init__(self, config: EstimatorConfig | None = None, cost: CostAwareConfig | None = None) -> None:
        self.default = PercentilePodRecommender(config)
        self.config = self.default.config
        self.cost = cost if cost is not None else CostAwareConfig()

    def memory_limit(self, state: AggregateContainerState) -> float:
        """The memory target before the per-pod minimum (bytes)."""
        return cost_optimal_limit(state.memory, self.cost.overrun_cost)

    def recommend(self, states: Mapping[str, AggregateContainerState]) -> dict[str, RawRecommendation]:
        base = self.default.recommend(states)
        if not base:
            return base
        minimum = per_pod_minimum(self.config, len(states)).memory_bytes or 0
        result: dict[str, RawRecommendation] = {}
        for name, state in states.items():
            raw = base[name]
            memory = max(minimum, amount_from_float(self.memory_limit(state)))
            target = Resources(cpu_millicores=raw.target.cpu_millicores, memory_bytes=memory)
            lower = Resources(cpu_millicores=raw.lower_bound.cpu_millicores,
                              memory_bytes=min(memory, raw.lower_bound.memory_bytes or memory))
            upper = Resources(cpu_millicores=raw.upper_bound.cpu_millicores,
                              memory_bytes=max(memory, raw.upper_bound.memory_bytes or memory))
            controlled = state.controlled_resources
            result[name] = RawRecommendation(target=filter_controlled(target, controlled),
                                             lower_bound=filter_controlled(lower, controlled),
                                             upper_bound=filter_controlled(upper, controlled))
        return result


@dataclass(frozen=True, slots=True)
class OomAverseConfig:
    """The `oom-averse` recommender's parameters: the price of an overrun day at limit L is
    `overrun_cost × (reference_bytes / L)^size_exponent` days of 100% relative slack.

    Chosen on the VMs at even positions of the Bitbrains development half (docs/quality.md), as the
    largest price that held no more memory than `default` there: at 1 GiB an overrun day costs as much
    as 20 days of full slack, at 2 GiB 10, at 512 MiB 40.
    """

    overrun_cost: float = 20.0
    size_exponent: float = 1.0
    reference_bytes: float = float(GIB)

    def __post_init__(self) -> None:
        if not self.overrun_cost > 0:
            raise ValueError(f"overrun_cost must be greater than 0, got {self.overrun_cost}")
        if not self.size_exponent >= 0:
            raise ValueError(f"size_exponent must not be negative, got {self.size_exponent}")
        if not self.reference_bytes > 0:
            raise ValueError(f"reference_bytes must be greater than 0, got {self.reference_bytes}")


class OomAversePodRecommender(CostAwarePodRecommender):
    """`cost-aware` with the price of an overrun falling with the container's size (see module): small
    containers, whose memory is cheap in bytes, are covered further; large ones, which hold most of the
    bytes, are sized closer to their peaks. CPU, bounds, minimum and state are `cost-aware`'s."""

    def __init__(self, config: EstimatorConfig | None = None, averse: OomAverseConfig | None = None) -> None:
        super().__init__(config)
        self.averse = averse if averse is not None else OomAverseConfig()

    def memory_limit(self, state: AggregateContainerState) -> float:
        a = self.averse
        return cost_optimal_limit(state.memory, a.overrun_cost, a.size_exponent, a.reference_bytes)


def pod_recommender_for(name: str, config: EstimatorConfig | None = None) -> PodRecommender:
    """The algorithm a recommender called `name` runs: `cost-aware`, `moving-window`
    (`vpa.logic.recommender.moving_window`), `oom-averse` and `raise-on-overrun`
    (`vpa.logic.recommender.raise_on_overrun`) for those names, upstream's for any other (upstream runs
    its one algorithm under whatever `--recommender-name` it is given)."""
    if name == COST_AWARE_RECOMMENDER_NAME:
        return CostAwarePodRecommender(config)
    if name == MOVING_WINDOW_RECOMMENDER_NAME:
        return MovingWindowPodRecommender(config)
    if name == OOM_AVERSE_RECOMMENDER_NAME:
        return OomAversePodRecommender(config)
    if name == RAISE_ON_OVERRUN_RECOMMENDER_NAME:
        # Imported here: that module builds on this one's `oom-averse`.
        from vpa.logic.recommender.raise_on_overrun import RaiseOnOverrunPodRecommender
        return RaiseOnOverrunPodRecommender(config)
    return PercentilePodRecommender(config)
