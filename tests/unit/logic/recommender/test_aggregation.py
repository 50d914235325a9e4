"""Sample intake: CPU de-duplication, one memory peak per interval, OOM bumps, per-VPA settings, expiry."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.aggregation import (
    AggregateContainerState,
    AggregationConfig,
    ContainerAggregationSettings,
    ContainerState,
    OomRejected,
    oom_bumped_memory,
)
from vpa.model.vpa import ContainerResourcePolicy, ContainerScalingMode

MIDNIGHT = 1_767_225_600.0
DAY = 86_400.0
MIB = 1024 * 1024
GIB = 1024 * MIB
CONFIG = AggregationConfig()


def _container() -> tuple[ContainerState, AggregateContainerState]:
    aggregate = AggregateContainerState(CONFIG, MIDNIGHT)
    return ContainerState(lambda now: aggregate), aggregate


def _memory_weights(aggregate: AggregateContainerState) -> dict[int, float]:
    return {bucket: weight for bucket, weight in enumerate(aggregate.memory.bucket_weights()) if weight}


@pytest.mark.parametrize(
    ("times", "accepted"),
    [
        ([0, 60, 120], [True, True, True]),
        ([0, 0, 60], [True, False, True]),  # duplicate time dropped
        ([60, 0, 120], [True, False, True]),  # out of order dropped
    ],
    ids=["in-order", "duplicate", "out-of-order"],
)
def test_cpu_samples_are_deduplicated(times: list[int], accepted: list[bool]) -> None:
    container, aggregate = _container()
    results = [container.add_cpu_sample(500, MIDNIGHT + t) for t in times]
    assert results == accepted
    assert aggregate.total_samples_count == sum(accepted)
    first_accepted = min(t for t, ok in zip(times, accepted, strict=True) if ok)
    assert aggregate.first_sample_start == MIDNIGHT + first_accepted


def test_cpu_sample_weight_is_the_constant_minimum_weight() -> None:
    container, aggregate = _container()
    container.add_cpu_sample(500, MIDNIGHT)  # reference = midnight, decay factor 1
    assert aggregate.cpu.bucket_weights()[25] == 0.1
    assert aggregate.cpu.total_weight == 0.1


def test_negative_cpu_usage_is_discarded() -> None:
    container, aggregate = _container()
    assert not container.add_cpu_sample(-1, MIDNIGHT)
    assert aggregate.total_samples_count == 0


def test_one_memory_peak_per_interval_stamped_at_the_window_end() -> None:
    container, aggregate = _container()
    # First sample at midnight opens the window [midnight, midnight + 1 d), peak stamped at its end.
    container.add_memory_sample(100 * MIB, MIDNIGHT)
    assert container.window_end == MIDNIGHT + DAY
    # A larger sample in the same window replaces the peak: the old one is subtracted.
    container.add_memory_sample(200 * MIB, MIDNIGHT + 3600)
    # A smaller one changes nothing.
    container.add_memory_sample(150 * MIB, MIDNIGHT + 7200)
    assert container.memory_peak == 200 * MIB
    # Reference = round(midnight + 1 d) = midnight + 1 d, so the peak weighs exactly 1.
    assert _memory_weights(aggregate) == {14: 1.0}  # 200 MiB is in bucket 14
    # At the window end a new window opens: a second peak, one day later (weight 2).
    container.add_memory_sample(100 * MIB, MIDNIGHT + DAY)
    assert container.window_end == MIDNIGHT + 2 * DAY
    assert _memory_weights(aggregate) == {8: 2.0, 14: 1.0}  # 100 MiB: log(1.524288)/log(1.05) = 8.64


def test_window_skips_whole_intervals_after_a_gap() -> None:
    container, _ = _container()
    container.add_memory_sample(100 * MIB, MIDNIGHT)
    container.add_memory_sample(100 * MIB, MIDNIGHT + 3.5 * DAY)
    # shift = truncate(3.5 d − 1 d, 1 d) + 1 d = 3 d → window end at 4 d
    assert container.window_end == MIDNIGHT + 4 * DAY


def test_old_memory_samples_are_discarded() -> None:
    container, _ = _container()
    container.add_memory_sample(100 * MIB, MIDNIGHT + 60)
    assert not container.add_memory_sample(200 * MIB, MIDNIGHT)
    assert container.memory_peak == 100 * MIB


@pytest.mark.parametrize(
    ("request_bytes", "peak_bytes", "expected"),
    [
        # used = 100 MiB: max(100 MiB + 100 MiB, trunc(100 MiB × 1.2)) = 200 MiB (min bump wins)
        (100 * MIB, 0, 209_715_200),
        # used = 1 GiB: max(1 GiB + 100 MiB = 1178599424, trunc(1288490188.8) = 1288490188) (ratio wins)
        (GIB, 0, 1_288_490_188),
        # the usage peak counts when it is above the request
        (100 * MIB, GIB, 1_288_490_188),
        # break-even at 500 MiB: 0.2 × 500 MiB = 100 MiB
        (500 * MIB, 0, 629_145_600),
    ],
    ids=["small", "large", "peak-above-request", "break-even"],
)
def test_oom_bump(request_bytes: int, peak_bytes: int, expected: int) -> None:
    assert oom_bumped_memory(request_bytes, peak_bytes, ContainerAggregationSettings()) == expected


def test_oom_replaces_the_window_peak_and_is_not_compounded() -> None:
    container, aggregate = _container()
    container.add_memory_sample(200 * MIB, MIDNIGHT)
    bumped = container.record_oom(MIDNIGHT + 3600, 256 * MIB)
    # used = max(256 MiB request, 200 MiB peak) → 256 MiB + 100 MiB = 373293056 (bucket 21)
    assert bumped == 373_293_056
    assert container.oom_peak == bumped
    assert _memory_weights(aggregate) == {21: 1.0}
    # A second OOM uses the usage peak (200 MiB), not the OOM peak: 256 MiB request again → same bump.
    assert container.record_oom(MIDNIGHT + 7200, 256 * MIB) == 373_293_056


def test_too_old_oom_is_rejected() -> None:
    container, _ = _container()
    container.add_memory_sample(200 * MIB, MIDNIGHT + 3 * DAY)
    with pytest.raises(OomRejected, match="too old"):
        container.record_oom(MIDNIGHT + DAY, 256 * MIB)


def test_per_vpa_settings_need_the_gate() -> None:
    policy = ContainerResourcePolicy("app", oom_bump_up_ratio=2.0, oom_min_bump_up_bytes=0,
                                     memory_aggregation_interval_s=3600, memory_aggregation_interval_count=2)
    assert AggregationConfig().settings_for(policy) == ContainerAggregationSettings()
    gated = AggregationConfig(per_vpa_config=True).settings_for(policy)
    assert gated == ContainerAggregationSettings(3600.0, 2, 2.0, 0.0)
    assert gated.memory_aggregation_window_s == 7200.0
    assert oom_bumped_memory(GIB, 0, gated) == 2 * GIB


def test_update_from_policy_sets_mode_and_controlled_resources() -> None:
    aggregate = AggregateContainerState(CONFIG, MIDNIGHT)
    aggregate.update_from_policy(ContainerResourcePolicy("app", mode=ContainerScalingMode.OFF,
                                                         controlled_resources=("memory",)), CONFIG)
    assert aggregate.scaling_mode is ContainerScalingMode.OFF
    assert aggregate.controlled_resources == ("memory",)
    aggregate.update_from_policy(None, CONFIG)
    assert set(aggregate.controlled_resources) == {"cpu", "memory"}


@pytest.mark.parametrize(
    ("samples", "now", "expired"),
    [
        ([], MIDNIGHT + 8 * DAY - 1, False),  # empty: measured from creation
        ([], MIDNIGHT + 8 * DAY, True),
        ([MIDNIGHT + DAY], MIDNIGHT + 9 * DAY - 1, False),  # used: measured from the last CPU sample
        ([MIDNIGHT + DAY], MIDNIGHT + 9 * DAY, True),
    ],
    ids=["empty-young", "empty-old", "used-recent", "used-stale"],
)
def test_expiry(samples: list[float], now: float, expired: bool) -> None:
    aggregate = AggregateContainerState(CONFIG, MIDNIGHT)
    for timestamp in samples:
        aggregate.add_cpu_sample(100, timestamp)
    assert aggregate.is_expired(now) is expired


def test_merge_widens_times_and_adds_counts() -> None:
    first = AggregateContainerState(CONFIG, MIDNIGHT)
    first.add_cpu_sample(500, MIDNIGHT + 60)
    second = AggregateContainerState(CONFIG, MIDNIGHT)
    second.add_cpu_sample(1000, MIDNIGHT)
    second.add_cpu_sample(1000, MIDNIGHT + 120)
    merged = AggregateContainerState(CONFIG, MIDNIGHT)
    merged.merge(first)
    merged.merge(second)
    assert (merged.first_sample_start, merged.last_sample_start) == (MIDNIGHT, MIDNIGHT + 120)
    assert merged.total_samples_count == 3
    assert merged.cpu.percentile(0.3) == pytest.approx(0.51113454)  # 1 of 3 samples at 0.5 core
    assert merged.cpu.percentile(0.5) == pytest.approx(1.01628139)
