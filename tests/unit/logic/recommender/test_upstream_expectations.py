"""The expectations of upstream's own unit tests (histogram, decaying histogram, container, estimator),
re-stated as tables: same inputs, same expected outputs, exercised through our implementation.

Upstream's histogram tests use a linear layout (10 buckets of width 1, epsilon 1e-15), so percentiles are
whole numbers: the upper edge of the bucket where the running weight reaches p × total.
"""

from __future__ import annotations

import pytest

from vpa.logic.recommender.aggregation import (
    AggregateContainerState,
    AggregationConfig,
    ContainerState,
    OomRejected,
)
from vpa.logic.recommender.estimation import (
    ConfidenceMultiplier,
    MarginEstimator,
    MinResourcesEstimator,
    confidence,
)
from vpa.logic.recommender.histogram import DecayingHistogram, Histogram, LinearHistogramOptions
from vpa.model.resources import Resources

WEIGHT_EPSILON = 1e-15
LINEAR = LinearHistogramOptions(10.0, 1.0, WEIGHT_EPSILON)
START = 1_234_567_890.0  # upstream's arbitrary start time
HOUR = 3600.0
ON_THE_HOUR = 1_234_566_000.0
MB = 1024 * 1024


def _linear(samples: list[tuple[float, float]], options: LinearHistogramOptions = LINEAR) -> Histogram:
    histogram = Histogram(options)
    for value, weight in samples:
        histogram.add_sample(value, weight)
    return histogram


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0.0, 2), (0.1, 2), (0.2, 3), (0.3, 3), (0.4, 4), (0.5, 4), (0.6, 4), (0.7, 5), (0.8, 5), (0.9, 5),
     (1.0, 5)],
    ids=lambda value: str(value),
)
def test_percentiles(p: float, expected: float) -> None:  # TestPercentiles: {1: 1, 2: 2, 3: 3, 4: 4}
    assert _linear([(1, 1), (2, 2), (3, 3), (4, 4)]).percentile(p) == expected


def test_percentile_out_of_bounds() -> None:  # TestPercentileOutOfBounds
    options = LinearHistogramOptions(1.0, 0.1, WEIGHT_EPSILON)
    histogram = _linear([(0.1, 0.1), (0.2, 0.2)], options)
    assert histogram.percentile(-0.1) == pytest.approx(0.2)
    assert histogram.percentile(1.1) == pytest.approx(0.3)
    histogram.add_sample(0.0, 0.1)
    histogram.add_sample(1.0, 0.2)
    assert histogram.percentile(-0.1) == pytest.approx(0.1)
    assert histogram.percentile(1.1) == pytest.approx(1.0)


def test_empty_histogram() -> None:  # TestEmptyHistogram, TestNonEmptyOnEpsilonAddition
    options = LinearHistogramOptions(1.0, 0.1, WEIGHT_EPSILON)
    histogram = Histogram(options)
    assert histogram.is_empty()
    histogram.add_sample(0.1, WEIGHT_EPSILON * 2.5)
    assert not histogram.is_empty()
    histogram.subtract_sample(0.1, WEIGHT_EPSILON)
    assert not histogram.is_empty()
    histogram.subtract_sample(0.1, WEIGHT_EPSILON)
    assert histogram.is_empty()
    other = Histogram(options)
    other.add_sample(9.9, WEIGHT_EPSILON * 3)
    other.add_sample(0.1, WEIGHT_EPSILON * 0.3)
    other.add_sample(999.9, WEIGHT_EPSILON * 0.3)
    assert not other.is_empty()


@pytest.mark.parametrize(
    ("samples", "total", "stored"),
    [
        ([], None, {}),  # TestHistogramSaveToCheckpointEmpty
        ([(1.0, 1.0)], 1.0, {1: 10000}),  # TestHistogramSaveToCheckpoint
        ([(1.0, 1.0), (2.0, 100000.0)], 100001.0, {2: 10000}),  # ...DropsRelativelySmallValues
        ([(1.0, 1.0), (2.0, 10000.0), (3.0, 50.0)], 10051.0, {1: 1, 2: 10000, 3: 50}),  # ...ForMultipleValues
    ],
    ids=["empty", "one", "drops-small", "multiple"],
)
def test_save_to_checkpoint(samples: list[tuple[float, float]], total: float | None,
                            stored: dict[int, int]) -> None:
    histogram = DecayingHistogram(LINEAR, HOUR)
    for value, weight in samples:
        histogram.add_sample_at(value, weight, ON_THE_HOUR)  # decay factor exactly 1
    saved = histogram.save()
    assert dict(saved.bucket_weights) == stored
    assert saved.total_weight == (total or 0.0)


def test_load_from_checkpoint() -> None:  # TestHistogramLoadFromCheckpoint
    from vpa.logic.recommender.histogram import HistogramCheckpoint

    histogram = DecayingHistogram(LINEAR, HOUR)
    histogram.load(HistogramCheckpoint(None, {0: 1, 1: 2}, 6.0))
    assert histogram.total_weight == 6.0
    assert histogram.bucket_weights()[:2] == (2.0, 4.0)


def _decaying(samples: list[tuple[float, float, float]]) -> DecayingHistogram:
    histogram = DecayingHistogram(LINEAR, HOUR)
    for value, weight, hours in samples:
        histogram.add_sample_at(value, weight, START + hours * HOUR)
    return histogram


def test_simple_decay() -> None:  # TestSimpleDecay: 20 half-lives make the late sample 1000× heavier
    histogram = _decaying([(2, 1000, 0), (1, 1, 20)])
    assert histogram.percentile(0.999) == 2
    assert histogram.percentile(1.0) == 3


def test_long_term_decay() -> None:  # TestLongtermDecay: past 2^100 the old sample is re-based away
    assert _decaying([(2, 1, 0), (1, 1, 101)]).percentile(1.0) == 2


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0.00, 2), (0.02, 2), (0.03, 3), (0.10, 3), (0.11, 4), (0.34, 4), (0.35, 5), (1.00, 5)],
    ids=lambda value: str(value),
)
def test_decaying_percentiles(p: float, expected: float) -> None:  # TestDecayingHistogramPercentiles
    histogram = _decaying([(1, 1, 0), (2, 2, 1), (3, 3, 2), (4, 4, 3)])
    assert histogram.percentile(p) == expected


def test_decaying_merge() -> None:  # TestDecayingHistogramMerge
    first = _decaying([(1, 1, 0), (2, 1, 1)])
    first.merge_decaying(_decaying([(2, 1, 2), (3, 1, 1)]))
    expected = _decaying([(2, 1, 2), (2, 1, 1), (3, 1, 1), (1, 1, 0)])
    assert first.reference_timestamp == expected.reference_timestamp
    assert first.bucket_weights() == pytest.approx(expected.bucket_weights(), abs=1e-15)


# --- container (memory peaks and OOMs), with a recording aggregate ------------------------------------


class _Recording(AggregateContainerState):
    def __init__(self) -> None:
        super().__init__(AggregationConfig(), START)
        self.calls: list[tuple[str, float, float]] = []

    def add_memory_peak(self, peak_bytes: int, timestamp: float) -> None:
        self.calls.append(("add", peak_bytes / MB, timestamp))

    def subtract_memory_peak(self, peak_bytes: int, timestamp: float) -> None:
        self.calls.append(("subtract", peak_bytes / MB, timestamp))


DAY = 86_400.0
T = 1_492_536_905.0  # upstream's testTimestamp, 2017-04-18 17:35:05 UTC


def _container() -> tuple[ContainerState, _Recording]:
    aggregate = _Recording()
    return ContainerState(lambda now: aggregate), aggregate


def test_oom_increased_by_bump_up() -> None:  # TestRecordOOMIncreasedByBumpUp
    container, aggregate = _container()
    container.record_oom(T, 1000 * MB)
    assert aggregate.calls == [("add", 1200.0, T + DAY)]


def test_oom_does_not_run_away() -> None:  # TestRecordOOMDontRunAway
    container, aggregate = _container()
    container.record_oom(T, 1000 * MB)
    container.record_oom(T, 999 * MB)  # smaller OOMs do not change the OOM peak
    container.record_oom(T, 999 * MB)
    container.record_oom(T, 2000 * MB)
    assert aggregate.calls == [("add", 1200.0, T + DAY), ("subtract", 1200.0, T + DAY),
                               ("add", 2400.0, T + DAY)]


def test_oom_increased_by_min() -> None:  # TestRecordOOMIncreasedByMin
    container, aggregate = _container()
    container.record_oom(T, 1 * MB)
    assert aggregate.calls == [("add", 101.0, T + DAY)]


def test_oom_maxed_with_known_sample() -> None:  # TestRecordOOMMaxedWithKnownSample
    container, aggregate = _container()
    container.add_memory_sample(3000 * MB, T)
    container.record_oom(T, 1000 * MB)
    assert aggregate.calls == [("add", 3000.0, T + DAY), ("subtract", 3000.0, T + DAY),
                               ("add", 3600.0, T + DAY)]


def test_oom_discards_old_sample() -> None:  # TestRecordOOMDiscardsOldSample
    container, aggregate = _container()
    container.add_memory_sample(1000 * MB, T)
    with pytest.raises(OomRejected):
        container.record_oom(T - 30 * HOUR, 1000 * MB)
    assert aggregate.calls == [("add", 1000.0, T + DAY)]


def test_oom_in_new_window() -> None:  # TestRecordOOMInNewWindow
    container, aggregate = _container()
    container.add_memory_sample(2000 * MB, T)
    container.record_oom(T + 2 * DAY, 1000 * MB)
    assert aggregate.calls == [("add", 2000.0, T + DAY), ("add", 2400.0, T + 3 * DAY)]


def test_memory_peaks_per_window() -> None:  # TestAggregateContainerUsageSamples (memory part)
    container, aggregate = _container()
    step = DAY / 2
    assert container.add_memory_sample(5, T)
    assert container.add_memory_sample(10, T + step)
    assert container.add_memory_sample(2, T + 2 * step)
    assert not container.add_memory_sample(-1000, T + 4 * step)
    assert [(kind, round(value * MB), when) for kind, value, when in aggregate.calls] == [
        ("add", 5, T + DAY), ("subtract", 5, T + DAY), ("add", 10, T + DAY), ("add", 2, T + 2 * DAY)]


# --- estimators ---------------------------------------------------------------------------------------


class _Const:
    def estimate(self, state: AggregateContainerState) -> Resources:
        return Resources(3140, 3_140_000_000)  # CPUAmountFromCores(3.14), MemoryAmountFromBytes(3.14e9)


def test_confidence_multiplier() -> None:  # TestConfidenceMultiplier
    state = AggregateContainerState(AggregationConfig(), 0.0)
    for index in range(9):  # 9 samples every 2 minutes
        state.add_cpu_sample(1000, index * 120.0)
    assert confidence(state, DAY) == 0.00625  # 9 / 1440
    # 3.14 × (1 + 0.1/0.00625)^2 = 3.14 × 289 = 907.46 cores
    assert ConfidenceMultiplier(0.1, 2.0, _Const()).estimate(state).cpu_millicores == 907_460


def test_confidence_multiplier_without_history() -> None:  # TestConfidenceMultiplierNoHistory
    state = AggregateContainerState(AggregationConfig(), 0.0)
    assert ConfidenceMultiplier(1.0, 1.0, _Const()).estimate(state).cpu_millicores == 100_000_000_000_000
    assert ConfidenceMultiplier(1.0, -1.0, _Const()).estimate(state).cpu_millicores == 0


def test_margin_and_minimum() -> None:  # TestMarginEstimator, TestMinResourcesEstimator
    state = AggregateContainerState(AggregationConfig(), 0.0)
    assert MarginEstimator(0.1, _Const()).estimate(state) == Resources(3454, 3_454_000_000)
    minimum = MinResourcesEstimator(Resources(200, 400_000_000), _Const()).estimate(state)
    assert minimum == Resources(3140, 3_140_000_000)
    below = MinResourcesEstimator(Resources(200, 4_000_000_000), _Const()).estimate(state)
    assert below == Resources(3140, 4_000_000_000)
