"""VerticalPodAutoscalerCheckpoint `status` ⇄ `AggregateContainerState`, in upstream's `v3` format.

Owns: `checkpoint_status` (the JSON-ready status dict upstream writes: `lastUpdateTime`, `version: v3`,
`cpuHistogram` / `memoryHistogram` as `{referenceTimestamp, bucketWeights, totalWeight}`, first/last
sample start, `totalSamplesCount`, with Go's field order, `omitempty` and RFC 3339 second-precision
times, zero times as null), `aggregate_from_checkpoint_status` (the reverse, validating every field), the
checkpoint object name, and `CheckpointError`: a malformed or foreign-version checkpoint is reported
with a message the caller can log while skipping it — never a crash.

Must not: talk to the API (the kube layer writes and lists the objects), read the clock, or log.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Final

from vpa.logic.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.histogram import DecayingHistogram, HistogramCheckpoint, HistogramError

SUPPORTED_CHECKPOINT_VERSION: Final = "v3"
_UINT32_MAX: Final = 0xFFFFFFFF


class CheckpointError(ValueError):
    """A checkpoint status that cannot be restored; the message names the field and the problem."""


def checkpoint_name(vpa_name: str, container_name: str) -> str:
    """Upstream's object name for a container's checkpoint: `<vpaName>-<containerName>`."""
    return f"{vpa_name}-{container_name}"


# --- times ----------------------------------------------------------------------------------------------


def format_time(unix_s: float | None) -> str | None:
    """metav1.Time as JSON: RFC 3339 in UTC, whole seconds (fraction truncated); the zero time is null."""
    if unix_s is None:
        return None
    moment = dt.datetime.fromtimestamp(math.floor(unix_s), tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object, field: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise CheckpointError(
            f"{field}: expected an RFC 3339 time string or null, got {type(value).__name__}")
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise CheckpointError(f"{field}: {value!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise CheckpointError(f"{field}: {value!r} has no time zone")
    return moment.timestamp()


# --- histograms -----------------------------------------------------------------------------------------


def histogram_checkpoint_dict(checkpoint: HistogramCheckpoint) -> dict[str, object]:
    """`HistogramCheckpoint` JSON: keys in Go's field order, empty map and zero total omitted."""
    out: dict[str, object] = {"referenceTimestamp": format_time(checkpoint.reference_timestamp)}
    if checkpoint.bucket_weights:
        out["bucketWeights"] = {str(bucket): int(weight)
                                for bucket, weight in sorted(checkpoint.bucket_weights.items())}
    if checkpoint.total_weight != 0:
        out["totalWeight"] = checkpoint.total_weight
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_histogram_checkpoint(value: object, field: str) -> HistogramCheckpoint:
    if value is None:
        return HistogramCheckpoint(None, {}, 0.0)
    if not isinstance(value, Mapping):
        raise CheckpointError(f"{field}: expected an object, got {type(value).__name__}")
    reference = parse_time(value.get("referenceTimestamp"), f"{field}.referenceTimestamp")
    raw_total = value.get("totalWeight", 0.0)
    if raw_total is None:
        raw_total = 0.0
    if not _is_number(raw_total):
        raise CheckpointError(f"{field}.totalWeight: expected a number, got {type(raw_total).__name__}")
    total = float(raw_total)
    if not math.isfinite(total):
        raise CheckpointError(f"{field}.totalWeight: {total} is not a finite number")
    raw_weights = value.get("bucketWeights")
    weights: dict[int, int] = {}
    if raw_weights is not None:
        if not isinstance(raw_weights, Mapping):
            raise CheckpointError(
                f"{field}.bucketWeights: expected an object, got {type(raw_weights).__name__}")
        for key, weight in raw_weights.items():
            try:
                bucket = int(str(key), 10)
            except ValueError:
                raise CheckpointError(
                    f"{field}.bucketWeights: key {key!r} is not an integer bucket index") from None
            if not _is_number(weight) or not 0 <= weight <= _UINT32_MAX or weight != int(weight):
                raise CheckpointError(
                    f"{field}.bucketWeights[{key}]: {weight!r} is not an unsigned 32-bit integer weight")
            weights[bucket] = int(weight)
    return HistogramCheckpoint(reference, weights, total)


def _load_histogram(histogram: DecayingHistogram, checkpoint: HistogramCheckpoint, field: str) -> None:
    try:
        histogram.load(checkpoint)
    except HistogramError as err:
        raise CheckpointError(f"{field}: {err}") from None


# --- aggregates -----------------------------------------------------------------------------------------


def checkpoint_status(state: AggregateContainerState, now: float) -> dict[str, object]:
    """The checkpoint `status` for an aggregate (already stripped of in-progress memory peaks)."""
    status: dict[str, object] = {
        "lastUpdateTime": format_time(now),
        "version": SUPPORTED_CHECKPOINT_VERSION,
        "cpuHistogram": histogram_checkpoint_dict(state.cpu.save()),
        "memoryHistogram": histogram_checkpoint_dict(state.memory.save()),
        "firstSampleStart": format_time(state.first_sample_start),
        "lastSampleStart": format_time(state.last_sample_start),
    }
    if state.total_samples_count:
        status["totalSamplesCount"] = state.total_samples_count
    return status


def aggregate_from_checkpoint_status(status: object, config: AggregationConfig,
                                     creation_time: float) -> AggregateContainerState:
    """Restore an aggregate from a checkpoint `status`; raises CheckpointError if it is malformed or of
    another version (the caller skips it with a warning, as upstream does)."""
    if not isinstance(status, Mapping):
        raise CheckpointError(f"status: expected an object, got {type(status).__name__}")
    version = status.get("version", "")
    if version != SUPPORTED_CHECKPOINT_VERSION:
        raise CheckpointError(
            f"unsupported checkpoint version {version!r} (expected {SUPPORTED_CHECKPOINT_VERSION!r})")
    count = status.get("totalSamplesCount", 0)
    if count is None:
        count = 0
    if not _is_number(count) or not 0 <= count < 2**63 or count != int(count):
        raise CheckpointError(f"totalSamplesCount: {count!r} is not a non-negative integer")
    first = parse_time(status.get("firstSampleStart"), "firstSampleStart")
    last = parse_time(status.get("lastSampleStart"), "lastSampleStart")
    cpu = parse_histogram_checkpoint(status.get("cpuHistogram"), "cpuHistogram")
    memory = parse_histogram_checkpoint(status.get("memoryHistogram"), "memoryHistogram")
    state = AggregateContainerState(config, creation_time)
    state.total_samples_count = int(count)
    state.first_sample_start = first
    state.last_sample_start = last
    _load_histogram(state.memory, memory, "memoryHistogram")
    _load_histogram(state.cpu, cpu, "cpuHistogram")
    return state
