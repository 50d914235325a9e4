"""Checkpoint status ⇄ aggregate in upstream's v3 format; malformed checkpoints are clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.checkpointing import (
    CheckpointError,
    aggregate_from_checkpoint_status,
    checkpoint_name,
    checkpoint_status,
)

MIDNIGHT = 1_767_225_600.0
DAY = 86_400.0
MIB = 1024 * 1024
CONFIG = AggregationConfig()

# A status in the shape upstream's recommender writes (field order, RFC 3339 seconds, string bucket keys).
UPSTREAM_STATUS: dict[str, Any] = {
    "lastUpdateTime": "2026-01-09T00:00:30Z",
    "version": "v3",
    "cpuHistogram": {
        "referenceTimestamp": "2026-01-01T00:00:00Z",
        "bucketWeights": {"25": 10000, "36": 5000},
        "totalWeight": 3.0,
    },
    "memoryHistogram": {
        "referenceTimestamp": "2026-01-02T00:00:00Z",
        "bucketWeights": {"14": 10000},
        "totalWeight": 255.0,
    },
    "firstSampleStart": "2026-01-01T00:00:00Z",
    "lastSampleStart": "2026-01-09T00:00:00Z",
    "totalSamplesCount": 11521,
}


def test_upstream_checkpoint_restores() -> None:
    state = aggregate_from_checkpoint_status(UPSTREAM_STATUS, CONFIG, MIDNIGHT)
    assert state.total_samples_count == 11521
    assert state.first_sample_start == MIDNIGHT
    assert state.last_sample_start == MIDNIGHT + 8 * DAY
    assert state.cpu.reference_timestamp == MIDNIGHT
    assert state.memory.reference_timestamp == MIDNIGHT + DAY
    # totalWeight 3 spread over 10000:5000 → 2 and 1
    assert state.cpu.bucket_weights()[25] == 2.0
    assert state.cpu.bucket_weights()[36] == 1.0
    assert state.cpu.percentile(0.5) == pytest.approx(0.51113454)
    assert state.memory.percentile(0.9) == pytest.approx(215_785_635.88)


def test_written_checkpoint_is_upstream_shaped_and_round_trips() -> None:
    state = aggregate_from_checkpoint_status(UPSTREAM_STATUS, CONFIG, MIDNIGHT)
    written = checkpoint_status(state, MIDNIGHT + 8 * DAY + 30.7)  # fraction truncated in lastUpdateTime
    assert written == UPSTREAM_STATUS
    assert list(written) == list(UPSTREAM_STATUS)  # Go's field order


def test_empty_aggregate_checkpoint_has_nulls_and_omits_zeros() -> None:
    written = checkpoint_status(AggregateContainerState(CONFIG, MIDNIGHT), MIDNIGHT)
    assert written == {
        "lastUpdateTime": "2026-01-01T00:00:00Z",
        "version": "v3",
        "cpuHistogram": {"referenceTimestamp": None},
        "memoryHistogram": {"referenceTimestamp": None},
        "firstSampleStart": None,
        "lastSampleStart": None,
    }
    restored = aggregate_from_checkpoint_status(written, CONFIG, MIDNIGHT)
    assert restored.is_empty()
    assert restored.cpu.is_empty()
    assert restored.memory.is_empty()


def test_live_aggregate_round_trip_keeps_recommendation_inputs() -> None:
    state = AggregateContainerState(CONFIG, MIDNIGHT)
    for minute in range(3 * 1440):
        state.add_cpu_sample(200 + (minute % 7) * 100, MIDNIGHT + minute * 60)
    for day in range(1, 4):
        state.add_memory_peak(day * 100 * MIB, MIDNIGHT + day * DAY)
    status = checkpoint_status(state, MIDNIGHT + 3 * DAY)
    restored = aggregate_from_checkpoint_status(status, CONFIG, MIDNIGHT)
    for p in (0.5, 0.9, 0.95):
        assert restored.cpu.percentile(p) == state.cpu.percentile(p)
        assert restored.memory.percentile(p) == state.memory.percentile(p)


def test_checkpoint_name() -> None:
    assert checkpoint_name("web", "nginx") == "web-nginx"


def _with(**changes: Any) -> dict[str, Any]:
    status = {**UPSTREAM_STATUS, "cpuHistogram": dict(UPSTREAM_STATUS["cpuHistogram"])}
    for key, value in changes.items():
        if key.startswith("cpu_"):
            status["cpuHistogram"][key[4:]] = value
        else:
            status[key] = value
    return status


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ("not an object", "status: expected an object"),
        (_with(version="v2"), "unsupported checkpoint version 'v2'"),
        ({k: v for k, v in UPSTREAM_STATUS.items() if k != "version"}, "unsupported checkpoint version ''"),
        (_with(totalSamplesCount=-1), "totalSamplesCount"),
        (_with(totalSamplesCount=1.5), "totalSamplesCount"),
        (_with(totalSamplesCount="12"), "totalSamplesCount"),
        (_with(firstSampleStart="yesterday"), "firstSampleStart: 'yesterday' is not an RFC 3339 time"),
        (_with(lastSampleStart=12), "lastSampleStart: expected an RFC 3339 time"),
        (_with(cpu_bucketWeights={"x": 1}), "cpuHistogram.bucketWeights: key 'x'"),
        (_with(cpu_bucketWeights={"3": -1}), r"cpuHistogram.bucketWeights\[3\]"),
        (_with(cpu_bucketWeights={"3": 2**32}), r"cpuHistogram.bucketWeights\[3\]"),
        (_with(cpu_bucketWeights={"3": 0.5}), r"cpuHistogram.bucketWeights\[3\]"),
        (_with(cpu_bucketWeights={"176": 1}), "cpuHistogram: checkpoint has bucket 176 beyond"),
        (_with(cpu_bucketWeights={"-2": 1}), "cpuHistogram: checkpoint has a negative bucket -2"),
        (_with(cpu_bucketWeights=[1, 2]), "cpuHistogram.bucketWeights: expected an object"),
        (_with(cpu_totalWeight=-3.0), "cpuHistogram: cannot load a histogram checkpoint with negative"),
        (_with(cpu_totalWeight="3"), "cpuHistogram.totalWeight: expected a number"),
        (_with(cpu_totalWeight=float("inf")), "cpuHistogram.totalWeight"),
        (_with(memoryHistogram="full"), "memoryHistogram: expected an object"),
    ],
    ids=["not-object", "old-version", "no-version", "negative-count", "fractional-count", "string-count",
         "bad-time", "numeric-time", "bad-key", "negative-weight", "weight-overflow", "fractional-weight",
         "bucket-too-large", "bucket-negative", "weights-list", "negative-total", "string-total",
         "infinite-total", "histogram-string"],
)
def test_malformed_checkpoint_is_a_clear_error(status: object, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        aggregate_from_checkpoint_status(status, CONFIG, MIDNIGHT)
