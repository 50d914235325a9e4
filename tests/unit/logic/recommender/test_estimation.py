"""Estimators: percentiles, margin, confidence multipliers, per-pod minimum and controlled resources."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.estimation import (
    ConfidenceMultiplier,
    EstimatorConfig,
    MarginEstimator,
    PercentilePodRecommender,
    confidence,
    confidence_factor,
    per_pod_minimum,
)
from vpa.logic.recommender.numerics import GO_NAN_AS_INT64
from vpa.model.resources import Resources

MIDNIGHT = 1_767_225_600.0
HOUR = 3600.0
DAY = 86_400.0
MIB = 1024 * 1024
CONFIG = AggregationConfig()


def _state(span_s: float, every_s: float = 60.0, cpu_millicores: int = 500,
           memory_bytes: int | None = 200 * MIB) -> AggregateContainerState:
    """CPU samples every `every_s` from midnight to midnight + span (inclusive), one memory peak."""
    state = AggregateContainerState(CONFIG, MIDNIGHT)
    count = int(span_s // every_s) + 1
    for index in range(count):
        state.add_cpu_sample(cpu_millicores, MIDNIGHT + index * every_s)
    if memory_bytes is not None:
        state.add_memory_peak(memory_bytes, MIDNIGHT + DAY)
    return state


class _Fixed:
    """A base estimator returning fixed amounts (so multipliers can be checked alone)."""

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def estimate(self, state: AggregateContainerState) -> Resources:
        return self.resources


@pytest.mark.parametrize(
    ("span_s", "expected_confidence", "upper", "lower"),
    [
        # 1 h of minutely samples: lifespan 1/24 d, 61 samples/1440 = 0.0424 → confidence 1/24.
        # upper ×(1 + 24) = 25; lower ×(1 + 0.024)^-2 = 0.953674 → trunc(953.67) = 953
        (HOUR, 1 / 24, 25_000, 953),
        # 1 day: confidence 1 → upper ×2, lower ×1.001^-2 = 0.998003 → 998
        (DAY, 1.0, 2_000, 998),
        # 8 days: confidence 8 → upper ×1.125, lower ×1.000125^-2 = 0.99975 → 999
        (8 * DAY, 8.0, 1_125, 999),
    ],
    ids=["1h", "1d", "8d"],
)
def test_confidence_multipliers(span_s: float, expected_confidence: float, upper: int, lower: int) -> None:
    state = _state(span_s)
    assert confidence(state, DAY) == pytest.approx(expected_confidence)
    base = _Fixed(Resources(1000, 1000))
    assert ConfidenceMultiplier(1.0, 1.0, base).estimate(state) == Resources(upper, upper)
    assert ConfidenceMultiplier(0.001, -2.0, base).estimate(state) == Resources(lower, lower)


def test_confidence_uses_the_sample_count_when_samples_are_sparse() -> None:
    # One sample an hour for 2 days: lifespan 2, but 49 samples / 1440 = 0.034 → the count decides.
    state = _state(2 * DAY, every_s=HOUR)
    assert confidence(state, DAY) == pytest.approx(49 / 1440)


def test_confidence_interval_flag_rescales() -> None:
    state = _state(DAY)
    # With a 12 h interval one day of minutely samples is 2 units of confidence.
    assert confidence(state, 12 * HOUR) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("history", "multiplier", "exponent", "expected"),
    [(0.0, 1.0, 1.0, float("inf")), (0.0, 0.001, -2.0, 0.0), (0.5, 1.0, 1.0, 3.0)],
    ids=["no-history-upper", "no-history-lower", "12h-upper"],
)
def test_confidence_factor(history: float, multiplier: float, exponent: float, expected: float) -> None:
    assert confidence_factor(multiplier, exponent, history) == expected


@pytest.mark.parametrize(
    ("amount", "expected"),
    [(100, 115), (511, 587), (215_785_635, 248_153_480), (1, 1)],
    ids=["100", "511", "bucket-15", "tiny"],
)
def test_margin_is_added_truncated(amount: int, expected: int) -> None:
    # x + trunc(0.15·x): 511 + 76 = 587; 215785635 + trunc(32367845.25) = 248153480
    estimate = MarginEstimator(0.15, _Fixed(Resources(amount, amount))).estimate(_state(DAY))
    assert estimate == Resources(expected, expected)


@pytest.mark.parametrize(
    ("containers", "cpu", "memory"),
    [
        (1, 25, 262_144_000),  # 25 m and 250 MiB whole
        (2, 12, 131_072_000),  # trunc(12.5)
        (3, 8, 87_381_333),  # trunc(25/3), trunc(262144000/3)
    ],
    ids=["one", "two", "three"],
)
def test_per_pod_minimum_split(containers: int, cpu: int, memory: int) -> None:
    assert per_pod_minimum(EstimatorConfig(), containers) == Resources(cpu, memory)


def test_recommender_end_to_end_on_a_constant_container() -> None:
    # 8 days of 0.5 core: P50/P90/P95 all at start(26) = 0.51113 core → 511 m → +76 → 587 m.
    # Memory peak 200 MiB → start(15) = 215785635 → +15% = 248153480 < 250 MiB per-pod minimum.
    state = _state(8 * DAY)
    result = PercentilePodRecommender().recommend({"app": state})["app"]
    assert result.target == Resources(587, 262_144_000)
    assert result.lower_bound == Resources(586, 262_144_000)  # trunc(587 × 0.99975) = 586
    assert result.upper_bound == Resources(660, 279_172_665)  # trunc(587 × 1.125), trunc(248153480 × 1.125)


def test_minimum_is_split_across_three_containers() -> None:
    states = {name: _state(8 * DAY, cpu_millicores=5, memory_bytes=None) for name in ("a", "b", "c")}
    result = PercentilePodRecommender().recommend(states)
    # 5 m sits in bucket 0 → start(1) = 10 m + 1 = 11 m, above 25/3 = 8 m; memory empty → 0 → 87381333
    assert {name: item.target for name, item in result.items()} == {
        name: Resources(11, 87_381_333) for name in ("a", "b", "c")}


def test_empty_memory_histogram_with_no_history_takes_the_minimum() -> None:
    # One CPU sample: confidence 0, memory 0 × Inf = NaN → Go's int64 minimum → raised to the minimum.
    state = _state(0.0, memory_bytes=None)
    upper = PercentilePodRecommender().upper_bound_estimator.estimate(state)
    assert upper.memory_bytes == GO_NAN_AS_INT64
    result = PercentilePodRecommender().recommend({"app": state})["app"]
    assert result.upper_bound.memory_bytes == 262_144_000
    assert result.upper_bound.cpu_millicores == 100_000_000_000_000  # 587 × Inf clamps to 1e14
    assert result.lower_bound.cpu_millicores == 25  # 587 × 0 → 0, raised to the minimum


def test_only_controlled_resources_are_kept() -> None:
    state = _state(DAY)
    state.controlled_resources = ("memory",)
    result = PercentilePodRecommender().recommend({"app": state})["app"]
    assert result.target.cpu_millicores is None
    assert result.target.memory_bytes == 262_144_000


def test_custom_percentiles_and_margin() -> None:
    config = EstimatorConfig(target_cpu_percentile=0.5, margin_fraction=0.0, pod_min_cpu_millicores=0)
    state = _state(DAY)
    assert PercentilePodRecommender(config).recommend({"app": state})["app"].target.cpu_millicores == 511
