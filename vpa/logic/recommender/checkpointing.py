"""VerticalPodAutoscalerCheckpoint `status` ⇄ `AggregateContainerState`, in upstream's `v3` format.

Owns: `checkpoint_status` (the JSON-ready status dict upstream writes: `lastUpdateTime`, `version: v3`,
`cpuHistogram` / `memoryHistogram` as `{referenceTimestamp, bucketWeights, totalWeight}`, first/last
sample start, `totalSamplesCount`, with Go's field order, `omitempty` and RFC 3339 second-precision
times, zero times as null), `aggregate_from_checkpoint_status` (the reverse, validating every field), the
checkpoint object name, and `CheckpointError`: a malformed or foreign-version checkpoint is reported
with a message the caller can log while skipping it — never a crash.

Beyond upstream: the in-progress memory peaks (`InProgressPeak`: one per live pod container, the peak of the
aggregation interval that has not ended yet, which the histogram does not hold) go into the checkpoint's
annotation `IN_PROGRESS_PEAKS_ANNOTATION` (`format_in_progress_peaks` / `parse_in_progress_peaks`). The
status keeps upstream's exact shape (the CRD's schema would prune an extra status field anyway) and
upstream's reader ignores annotations; a checkpoint without the annotation restores as upstream's does.

Must not: talk to the API (the kube layer writes and lists the objects), read the clock, or log.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.histogram import DecayingHistogram, HistogramCheckpoint, HistogramError

SUPPORTED_CHECKPOINT_VERSION: Final = "v3"
_UINT32_MAX: Final = 0xFFFFFFFF
IN_PROGRESS_PEAKS_ANNOTATION: Final = "vpa.dev/in-progress-memory-peaks"
# At most this many peaks per checkpoint (the largest kept): ~50 bytes each, well under the 256 KiB that all
# of an object's annotations may take together.
MAX_IN_PROGRESS_PEAKS: Final = 2000
_PEAKS_FORMAT_VERSION: Final = 1


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


# --- in-progress memory peaks (beyond upstream) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InProgressPeak:
    """The current interval's memory peak of one pod's container: stamped at `window_end` (unix seconds),
    `peak_bytes` from usage samples and `oom_peak_bytes` from an OOM bump (the larger one is in the
    histogram while the interval lasts)."""

    pod: str
    window_end: float
    peak_bytes: int
    oom_peak_bytes: int = 0

    @property
    def max_bytes(self) -> int:
        return max(self.peak_bytes, self.oom_peak_bytes)


def format_in_progress_peaks(peaks: Iterable[InProgressPeak]) -> str:
    """The annotation value: `{"v":1,"peaks":[[pod, windowEnd, peak, oomPeak], …]}`, sorted by pod, the
    largest `MAX_IN_PROGRESS_PEAKS` kept."""
    kept = sorted(peaks, key=lambda p: (-p.max_bytes, p.pod))[:MAX_IN_PROGRESS_PEAKS]
    rows = [[p.pod, p.window_end, p.peak_bytes, p.oom_peak_bytes] for p in sorted(kept, key=lambda p: p.pod)]
    return json.dumps({"v": _PEAKS_FORMAT_VERSION, "peaks": rows}, separators=(",", ":"))


def _is_peak_row(row: object) -> bool:
    return (
        isinstance(row, list) and len(row) == 4 and isinstance(row[0], str) and _is_number(row[1])
        and math.isfinite(row[1])
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63 for v in row[2:])
    )


def parse_in_progress_peaks(text: object) -> list[InProgressPeak]:
    """The peaks in an annotation value (None: none); raises CheckpointError naming the problem."""
    field = f"metadata.annotations[{IN_PROGRESS_PEAKS_ANNOTATION}]"
    if text is None:
        return []
    if not isinstance(text, str):
        raise CheckpointError(f"{field}: expected a string")
    try:
        value = json.loads(text)
    except ValueError:
        raise CheckpointError(f"{field}: not JSON") from None
    if not isinstance(value, dict) or value.get("v") != _PEAKS_FORMAT_VERSION:
        raise CheckpointError(f'{field}: expected an object with "v": {_PEAKS_FORMAT_VERSION}')
    rows = value.get("peaks")
    if not isinstance(rows, list) or len(rows) > MAX_IN_PROGRESS_PEAKS:
        raise CheckpointError(f"{field}.peaks: expected a list of at most {MAX_IN_PROGRESS_PEAKS} rows")
    peaks: list[InProgressPeak] = []
    for index, row in enumerate(rows):
        if not _is_peak_row(row):
            raise CheckpointError(
                f"{field}.peaks[{index}]: expected [pod, windowEnd seconds, peak bytes, OOM peak bytes]")
        peaks.append(InProgressPeak(row[0], float(row[1]), row[2], row[3]))
    return peaks
