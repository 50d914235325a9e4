"""Histogram layout, percentiles, decay and checkpoint form, against values derived by hand from spec §3.6."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpa.logic.recommender.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    EPSILON,
    MEMORY_HISTOGRAM_OPTIONS,
    DecayingHistogram,
    Histogram,
    HistogramCheckpoint,
    HistogramError,
    HistogramOptions,
)

MIDNIGHT = 1_767_225_600.0  # 2026-01-01T00:00:00Z, a multiple of a 24 h half-life counted from year 1
HOUR = 3600.0
DAY = 86_400.0


def test_both_layouts_have_176_buckets() -> None:
    # ceil(log(max·0.05/first + 1) / log 1.05) + 1 = ceil(log(5001)/log(1.05)) + 1 = ceil(174.57) + 1
    assert CPU_HISTOGRAM_OPTIONS.num_buckets == 176
    assert MEMORY_HISTOGRAM_OPTIONS.num_buckets == 176


@pytest.mark.parametrize(
    ("options", "bucket", "expected"),
    [
        # start(n) = first × (1.05^n − 1) / 0.05
        (CPU_HISTOGRAM_OPTIONS, 0, 0.0),
        (CPU_HISTOGRAM_OPTIONS, 1, 0.01),  # 0.01 × 0.05/0.05
        (CPU_HISTOGRAM_OPTIONS, 2, 0.0205),  # 0.01 × 0.1025/0.05
        (CPU_HISTOGRAM_OPTIONS, 3, 0.031525),  # 0.01 × 0.157625/0.05
        (CPU_HISTOGRAM_OPTIONS, 26, 0.51113454),  # 0.2 × (3.5556727 − 1)
        (CPU_HISTOGRAM_OPTIONS, 175, 1021.10941),  # the last bucket starts past max (1000 cores)
        (MEMORY_HISTOGRAM_OPTIONS, 1, 1e7),
        (MEMORY_HISTOGRAM_OPTIONS, 2, 2.05e7),
        (MEMORY_HISTOGRAM_OPTIONS, 15, 215_785_635.88),  # 2e8 × (2.0789282 − 1)
    ],
    ids=["cpu-0", "cpu-1", "cpu-2", "cpu-3", "cpu-26", "cpu-last", "mem-1", "mem-2", "mem-15"],
)
def test_bucket_starts(options: HistogramOptions, bucket: int, expected: float) -> None:
    assert options.bucket_start(bucket) == pytest.approx(expected, rel=1e-8)


def test_memory_bucket_four_truncates_like_go() -> None:
    # Spec §3.8: Go's Pow gives 43101249.99999.. for bucket 4, which truncates to 43101249 bytes.
    assert int(MEMORY_HISTOGRAM_OPTIONS.bucket_start(4)) == 43_101_249


@pytest.mark.parametrize(
    ("options", "value", "bucket"),
    [
        (CPU_HISTOGRAM_OPTIONS, 0.0, 0),
        (CPU_HISTOGRAM_OPTIONS, 0.0099, 0),
        (CPU_HISTOGRAM_OPTIONS, 0.01, 1),  # exactly the start of bucket 1
        (CPU_HISTOGRAM_OPTIONS, 0.1, 8),  # log(1.5)/log(1.05) = 8.31
        (CPU_HISTOGRAM_OPTIONS, 0.5, 25),  # log(3.5)/log(1.05) = 25.68
        (CPU_HISTOGRAM_OPTIONS, 1.0, 36),  # log(6)/log(1.05) = 36.72
        (CPU_HISTOGRAM_OPTIONS, 5000.0, 175),  # beyond the last start: last bucket
        (MEMORY_HISTOGRAM_OPTIONS, 209_715_200.0, 14),  # 200 MiB: log(2.048576)/log(1.05) = 14.70
        (MEMORY_HISTOGRAM_OPTIONS, 1_073_741_824.0, 37),  # 1 GiB: log(6.3687)/log(1.05) = 37.95
    ],
    ids=["zero", "below-first", "first-edge", "100m", "500m", "1core", "huge", "200Mi", "1Gi"],
)
def test_find_bucket(options: HistogramOptions, value: float, bucket: int) -> None:
    assert options.find_bucket(value) == bucket


def _histogram(samples: list[tuple[float, float]]) -> Histogram:
    histogram = Histogram(CPU_HISTOGRAM_OPTIONS)
    for value, weight in samples:
        histogram.add_sample(value, weight)
    return histogram


# 0.5 core (w 1) in bucket 25, 1 core (w 1) in bucket 36, 2 cores (w 2) in bucket 49; total weight 4.
KNOWN = [(0.5, 1.0), (1.0, 1.0), (2.0, 2.0)]


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.0, 0.51113454),  # threshold 0: the first non-empty bucket's upper edge, start(26)
        (0.25, 0.51113454),  # threshold 1 reached in bucket 25
        (0.5, 1.01628139),  # threshold 2 reached in bucket 36 → start(37)
        (0.51, 2.09348),  # threshold 2.04 → bucket 49 → start(50) = 0.2 × (1.05^50 − 1)
        (1.0, 2.09348),  # the walk stops at the last non-empty bucket
    ],
    ids=["p0", "p25", "p50", "p51", "p100"],
)
def test_percentile_of_a_known_histogram(p: float, expected: float) -> None:
    assert _histogram(KNOWN).percentile(p) == pytest.approx(expected, rel=1e-6)


def test_empty_histogram() -> None:
    histogram = Histogram(CPU_HISTOGRAM_OPTIONS)
    assert histogram.is_empty()
    assert histogram.percentile(0.9) == 0.0
    histogram.add_sample(1.0, EPSILON / 2)  # below epsilon: still empty
    assert histogram.is_empty()


def test_subtract_clamps_to_zero_below_epsilon() -> None:
    histogram = _histogram([(0.5, 1.0), (2.0, 1.0)])
    histogram.subtract_sample(2.0, 1.0 - EPSILON / 2)
    assert histogram.bucket_weights()[49] == 0.0
    assert histogram.max_bucket == 25
    assert histogram.percentile(1.0) == pytest.approx(0.51113454)


def test_last_bucket_percentile_is_its_start() -> None:
    histogram = _histogram([(5000.0, 1.0)])
    assert histogram.percentile(0.5) == CPU_HISTOGRAM_OPTIONS.bucket_start(175)


@pytest.mark.parametrize(
    ("elapsed_half_lives", "old_weight", "new_weight", "reference"),
    [
        # one half-life later a sample weighs twice as much: 1 and 2, reference unchanged
        (1, 1.0, 2.0, MIDNIGHT),
        # 150 half-lives (> 100) later the reference moves to the new sample: old 2^-150, new 1
        (150, 2.0**-150, 1.0, MIDNIGHT + 150 * HOUR),
    ],
    ids=["one-half-life", "150-half-lives"],
)
def test_decay(elapsed_half_lives: int, old_weight: float, new_weight: float, reference: float) -> None:
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, HOUR)
    histogram.add_sample_at(0.5, 1.0, MIDNIGHT)
    histogram.add_sample_at(2.0, 1.0, MIDNIGHT + elapsed_half_lives * HOUR)
    weights = histogram.bucket_weights()
    assert histogram.reference_timestamp == reference
    assert weights[25] == old_weight
    assert weights[49] == new_weight
    assert histogram.total_weight == pytest.approx(old_weight + new_weight)


def test_decay_after_150_half_lives_forgets_the_old_sample() -> None:
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, HOUR)
    histogram.add_sample_at(0.5, 1.0, MIDNIGHT)
    histogram.add_sample_at(2.0, 1.0, MIDNIGHT + 150 * HOUR)
    assert histogram.min_bucket == 49  # 2^-150 is below epsilon: no longer counted
    assert histogram.percentile(0.0) == pytest.approx(2.09348, rel=1e-6)


def test_first_sample_sets_a_rounded_reference() -> None:
    histogram = DecayingHistogram(MEMORY_HISTOGRAM_OPTIONS, DAY)
    histogram.add_sample_at(1e8, 1.0, MIDNIGHT + 13 * HOUR)  # rounds up to the next midnight
    assert histogram.reference_timestamp == MIDNIGHT + DAY
    assert histogram.total_weight == pytest.approx(2.0 ** (-11 / 24))


def test_merging_aligns_the_older_reference() -> None:
    old = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    old.add_sample_at(0.5, 1.0, MIDNIGHT)
    new = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    new.add_sample_at(1.0, 1.0, MIDNIGHT + 3 * DAY)
    assert new.reference_timestamp == MIDNIGHT + 3 * DAY
    old.merge_decaying(new)
    assert old.reference_timestamp == MIDNIGHT + 3 * DAY
    assert old.bucket_weights()[25] == 2.0**-3  # re-based by 2^-3
    assert old.bucket_weights()[36] == 1.0


# --- properties ---------------------------------------------------------------------------------------

samples = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=2000.0, allow_nan=False),
              st.floats(min_value=0.001, max_value=100.0, allow_nan=False)),
    min_size=1, max_size=60)
percentiles = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(samples, percentiles, percentiles)
def test_percentile_is_monotonic_in_p(data: list[tuple[float, float]], p: float, q: float) -> None:
    histogram = _histogram(data)
    low, high = min(p, q), max(p, q)
    assert histogram.percentile(low) <= histogram.percentile(high)


@given(samples, samples, percentiles)
def test_merge_equals_adding_all_samples(first: list[tuple[float, float]], second: list[tuple[float, float]],
                                         p: float) -> None:
    merged = _histogram(first)
    merged.merge(_histogram(second))
    together = _histogram(first + second)
    assert merged.min_bucket == together.min_bucket
    assert merged.max_bucket == together.max_bucket
    assert merged.total_weight == pytest.approx(together.total_weight)
    assert merged.bucket_weights() == pytest.approx(together.bucket_weights())
    assert merged.percentile(p) == together.percentile(p) or _within_one_bucket(
        merged.percentile(p), together.percentile(p))


def _bucket_of_percentile(value: float) -> int:
    starts = CPU_HISTOGRAM_OPTIONS.bucket_starts
    return starts.index(value)


def _within_one_bucket(a: float, b: float) -> bool:
    return abs(_bucket_of_percentile(a) - _bucket_of_percentile(b)) <= 1


def _decaying(data: list[tuple[float, float]]) -> DecayingHistogram:
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    for offset, (value, weight) in enumerate(data):
        histogram.add_sample_at(value, weight, MIDNIGHT + offset * 60.0)
    return histogram


def _round_trip(original: DecayingHistogram) -> DecayingHistogram:
    restored = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    restored.load(original.save())
    assert restored.reference_timestamp == original.reference_timestamp
    assert restored.total_weight == pytest.approx(original.total_weight)
    return restored


similar_weight_samples = st.lists(
    # below the last bucket (which starts at 1021 cores), so a percentile's value names its bucket
    st.tuples(st.floats(min_value=0.0, max_value=1000.0, allow_nan=False),
              st.floats(min_value=1.0, max_value=2.0, allow_nan=False)),
    min_size=1, max_size=40)


@settings(max_examples=200)
@given(similar_weight_samples, percentiles)
def test_checkpoint_round_trip_moves_no_percentile_by_more_than_one_bucket(
        data: list[tuple[float, float]], p: float) -> None:
    # Stored weights are integers with the heaviest bucket at 10000, so each bucket's share of the total
    # moves by at most ~0.5/10000 per bucket. When every occupied bucket holds a noticeable share (here
    # ≥ 1/80), a percentile can only move to a neighbouring occupied bucket.
    original = _decaying(data)
    restored = _round_trip(original)
    occupied = [bucket for bucket, weight in enumerate(original.bucket_weights()) if weight >= EPSILON]
    before = CPU_HISTOGRAM_OPTIONS.bucket_starts.index(original.percentile(p)) - 1  # upper edge → bucket
    after = CPU_HISTOGRAM_OPTIONS.bucket_starts.index(restored.percentile(p)) - 1
    assert abs(occupied.index(before) - occupied.index(after)) <= 1


@settings(max_examples=200)
@given(samples, percentiles)
def test_checkpoint_round_trip_keeps_every_percentile_within_two_percent_of_rank(
        data: list[tuple[float, float]], p: float) -> None:
    # For arbitrary weights upstream's format may drop buckets lighter than 1/20000 of the heaviest, so the
    # guarantee is on ranks: the restored P(p) lies between the original P(p − 2%) and P(p + 2%).
    original = _decaying(data)
    restored = _round_trip(original)
    assert original.percentile(max(0.0, p - 0.02)) <= restored.percentile(p) <= original.percentile(
        min(1.0, p + 0.02))


def test_checkpoint_normalises_the_largest_bucket_to_10000() -> None:
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    histogram.add_sample_at(0.5, 3.0, MIDNIGHT)
    histogram.add_sample_at(1.0, 1.0, MIDNIGHT)
    histogram.add_sample_at(2.0, 0.00001, MIDNIGHT)  # below epsilon: outside the saved range
    saved = histogram.save()
    # 3 → 10000, 1 → round(3333.33) = 3333
    assert (saved.reference_timestamp, saved.bucket_weights) == (MIDNIGHT, {25: 10000, 36: 3333})
    assert saved.total_weight == pytest.approx(4.00001)


def test_loading_distributes_total_weight_proportionally() -> None:
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    histogram.load(HistogramCheckpoint(MIDNIGHT, {25: 10000, 36: 5000}, 3.0))
    assert histogram.bucket_weights()[25] == 2.0
    assert histogram.bucket_weights()[36] == 1.0
    assert (histogram.min_bucket, histogram.max_bucket) == (25, 36)


def test_loading_recomputes_min_and_max_for_tiny_buckets() -> None:
    # Upstream issue #7726: a bucket that loads below epsilon must not become min/max.
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    histogram.load(HistogramCheckpoint(MIDNIGHT, {3: 1, 25: 10000}, 0.5))  # bucket 3 gets 0.00005
    assert histogram.min_bucket == 25


@pytest.mark.parametrize(
    ("checkpoint", "message"),
    [
        (HistogramCheckpoint(MIDNIGHT, {176: 1}, 1.0), "beyond"),
        (HistogramCheckpoint(MIDNIGHT, {-1: 1}, 1.0), "negative bucket"),
        (HistogramCheckpoint(MIDNIGHT, {1: 1}, -1.0), "negative total"),
    ],
    ids=["bucket-too-large", "bucket-negative", "negative-total"],
)
def test_bad_histogram_checkpoints(checkpoint: HistogramCheckpoint, message: str) -> None:
    with pytest.raises(HistogramError, match=message):
        DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY).load(checkpoint)
