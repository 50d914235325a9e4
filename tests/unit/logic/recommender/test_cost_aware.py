"""The cost-aware recommender: the cost-optimal memory limit, everything else as upstream's, and state
that is nothing but the checkpointed aggregate."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.checkpointing import aggregate_from_checkpoint_status, checkpoint_status
from vpa.logic.recommender.cost_aware import (
    BUILTIN_RECOMMENDERS,
    CostAwareConfig,
    CostAwarePodRecommender,
    OomAverseConfig,
    OomAversePodRecommender,
    cost_optimal_limit,
    pod_recommender_for,
)
from vpa.logic.recommender.estimation import PercentilePodRecommender
from vpa.logic.recommender.histogram import MEMORY_HISTOGRAM_OPTIONS, Histogram
from vpa.logic.recommender.moving_window import MovingWindowPodRecommender
from vpa.logic.recommender.raise_on_overrun import RaiseOnOverrunPodRecommender
from vpa.model.resources import CPU

MIB = 1024 * 1024
GIB = 1024 * MIB
DAY = 86_400.0
MIDNIGHT = 1_767_225_600.0
CONFIG = AggregationConfig()
OPTIONS = MEMORY_HISTOGRAM_OPTIONS


def edge_above(value: float) -> float:
    """The upper edge of the bucket `value` falls in (what a limit covering it must be)."""
    return OPTIONS.bucket_starts[OPTIONS.find_bucket(value) + 1]


def histogram(*peaks: tuple[float, float]) -> Histogram:
    h = Histogram(OPTIONS)
    for value, weight in peaks:
        h.add_sample(value, weight)
    return h


@pytest.mark.parametrize(("peaks", "overrun_cost", "expected"), [
    # Nothing seen: no limit.
    ((), 10.0, 0.0),
    # One steady peak: the edge just above it, whatever the price of an overrun.
    (((GIB, 5.0),), 10.0, edge_above(GIB)),
    (((GIB, 5.0),), 0.01, edge_above(GIB)),
    # A rare outlier (1 day in 20) at twice the usual peak: covering it costs about half a day of slack on
    # the other 19 days; at 10× a full day it is covered, at 1× it is not (5% × 1 < ~0.45 slack).
    (((GIB, 19.0), (2 * GIB, 1.0)), 10.0, edge_above(2 * GIB)),
    (((GIB, 19.0), (2 * GIB, 1.0)), 1.0, edge_above(GIB)),
    # Even weight on two close peaks: the higher one is covered (overrun on half the days is dear).
    (((GIB, 1.0), (1.2 * GIB, 1.0)), 10.0, edge_above(1.2 * GIB)),
])
def test_cost_optimal_limit(peaks: tuple[tuple[float, float], ...], overrun_cost: float,
                            expected: float) -> None:
    assert cost_optimal_limit(histogram(*peaks), overrun_cost) == expected


def test_overrun_cost_must_be_positive() -> None:
    with pytest.raises(ValueError, match="overrun_cost"):
        CostAwareConfig(overrun_cost=0)


def _state(peaks: list[int]) -> AggregateContainerState:
    state = AggregateContainerState(CONFIG, MIDNIGHT)
    for minute in range(len(peaks) * 1440):
        state.add_cpu_sample(300 + (minute % 5) * 50, MIDNIGHT + minute * 60)
    for day, peak in enumerate(peaks, start=1):
        state.add_memory_peak(peak, MIDNIGHT + day * DAY)
    return state


def test_cpu_is_upstreams_and_bounds_bracket_the_memory_target() -> None:
    state = _state([GIB] * 9 + [3 * GIB])
    cost_aware = CostAwarePodRecommender().recommend({"app": state})["app"]
    default = PercentilePodRecommender().recommend({"app": state})["app"]
    assert cost_aware.target.cpu_millicores == default.target.cpu_millicores
    assert cost_aware.lower_bound.cpu_millicores == default.lower_bound.cpu_millicores
    assert cost_aware.upper_bound.cpu_millicores == default.upper_bound.cpu_millicores
    memory = cost_aware.target.memory_bytes
    assert memory is not None
    assert default.target.memory_bytes is not None
    assert (cost_aware.lower_bound.memory_bytes or 0) <= memory <= (cost_aware.upper_bound.memory_bytes or 0)
    # No 15% margin on a steady container: the edge above its peak, below upstream's target.
    assert memory < default.target.memory_bytes


def test_pod_minimum_and_controlled_resources_apply() -> None:
    state = _state([100 * MIB] * 3)
    state.controlled_resources = (CPU,)
    only_cpu = CostAwarePodRecommender().recommend({"app": state})["app"]
    assert only_cpu.target.memory_bytes is None
    assert only_cpu.target.cpu_millicores is not None
    tiny = CostAwarePodRecommender().recommend({"app": _state([100 * MIB] * 3)})["app"]
    assert tiny.target.memory_bytes == 250 * MIB  # --pod-recommendation-min-memory-mb, as upstream


def test_recommendation_survives_a_checkpoint_round_trip() -> None:
    state = _state([GIB, int(1.3 * GIB), GIB, int(1.1 * GIB), int(2.2 * GIB), GIB])
    status = checkpoint_status(state, MIDNIGHT + 6 * DAY)
    restored = aggregate_from_checkpoint_status(status, CONFIG, MIDNIGHT)
    recommender = CostAwarePodRecommender()
    assert recommender.recommend({"app": restored}) == recommender.recommend({"app": state})


@pytest.mark.parametrize(("name", "kind"), [
    ("default", PercentilePodRecommender),
    ("cost-aware", CostAwarePodRecommender),
    ("moving-window", MovingWindowPodRecommender),
    ("oom-averse", OomAversePodRecommender),
    ("raise-on-overrun", RaiseOnOverrunPodRecommender),
    ("performance", PercentilePodRecommender),  # any other name runs upstream's algorithm, as upstream does
])
def test_pod_recommender_for(name: str, kind: type) -> None:
    assert type(pod_recommender_for(name)) is kind


def test_builtin_names_start_with_default() -> None:
    assert BUILTIN_RECOMMENDERS == ("default", "cost-aware", "moving-window", "oom-averse",
                                    "raise-on-overrun")


# --- oom-averse -----------------------------------------------------------------------------------------


def test_size_exponent_zero_is_cost_awares_limit() -> None:
    h = histogram((GIB, 19.0), (2 * GIB, 1.0), (1.3 * GIB, 3.0))
    for cost in (1.0, 5.0, 10.0):
        assert cost_optimal_limit(h, cost, 0.0, GIB) == cost_optimal_limit(h, cost)


@pytest.mark.parametrize(("scale", "covered"), [
    # The same shape of daily peaks (19 days at the level, one at twice it) at three sizes. At 1 GiB the
    # price of an overrun is `overrun_cost` (5 here): 5% × 5 = 0.25 < ~0.45 slack, the outlier is not
    # covered. At 64 MiB it is 5 × 4 = 20: covered. At 16 GiB it is 5 / 4: not covered.
    (1 / 16, True),
    (1.0, False),
    (16.0, False),
])
def test_oom_averse_covers_outliers_in_small_containers(scale: float, covered: bool) -> None:
    level, outlier = scale * GIB, 2 * scale * GIB
    h = histogram((level, 19.0), (outlier, 1.0))
    limit = cost_optimal_limit(h, 5.0, 0.5, GIB)
    assert limit == (edge_above(outlier) if covered else edge_above(level))
    assert cost_optimal_limit(h, 5.0) == edge_above(level)  # cost-aware, whatever the size


def test_oom_averse_holds_less_than_cost_aware_in_a_large_container_and_more_in_a_small_one() -> None:
    averse, cost_aware = OomAversePodRecommender(), CostAwarePodRecommender()
    peaks = [1.0, 1.6, 1.0, 1.0, 1.3, 1.0, 1.0]  # daily peaks relative to the level, the newest last
    for scale, larger in ((0.6, True), (8.0, False)):  # a level of 0.6 GiB and one of 8 GiB
        state = _state([int(scale * p * GIB) for p in peaks])
        mine = averse.recommend({"app": state})["app"]
        theirs = cost_aware.recommend({"app": state})["app"]
        assert mine.target.cpu_millicores == theirs.target.cpu_millicores  # upstream's CPU
        assert ((mine.target.memory_bytes or 0) > (theirs.target.memory_bytes or 0)) is larger
        assert (mine.lower_bound.memory_bytes or 0) <= (mine.target.memory_bytes or 0)
        assert (mine.target.memory_bytes or 0) <= (mine.upper_bound.memory_bytes or 0)


@pytest.mark.parametrize(("field", "value"), [("overrun_cost", 0.0), ("size_exponent", -1.0),
                                              ("reference_bytes", 0.0)])
def test_oom_averse_config_is_checked(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        OomAverseConfig(**{field: value})
