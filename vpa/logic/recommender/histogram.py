"""Exponential-bucket histograms with exponential decay, bit-compatible with upstream's recommender.

Owns: `HistogramOptions` (bucket layout, `find_bucket`, `bucket_start`) and the two layouts upstream uses
(`CPU_HISTOGRAM_OPTIONS` in cores, `MEMORY_HISTOGRAM_OPTIONS` in bytes); `Histogram` (add, subtract,
merge, percentile, emptiness, scaling) and `DecayingHistogram` (weights multiplied by
2^((t − reference)/halfLife), reference re-based when the exponent passes 100); and `HistogramCheckpoint`,
the `{referenceTimestamp, bucketWeights, totalWeight}` form stored in VerticalPodAutoscalerCheckpoints,
with upstream's integer normalisation (largest bucket → 10000).

Must not: know about containers, resources or the API's JSON (see `checkpointing`), read the clock, log.
Times are Unix seconds; `None` stands for Go's zero `time.Time`.
"""

from __future__ import annotations

import bisect
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from vpa.logic.recommender.numerics import go_exp2, go_log, go_pow, go_round_time

MAX_CHECKPOINT_WEIGHT: Final = 10_000  # upstream MaxCheckpointWeight
MIN_SAMPLE_WEIGHT: Final = 0.1  # upstream minSampleWeight
EPSILON: Final = 0.001 * MIN_SAMPLE_WEIGHT  # evaluated as Go does: 0.00010000000000000002
MAX_DECAY_EXPONENT: Final = 100  # re-base the reference once a sample is this many half-lives past it


class HistogramError(ValueError):
    """A histogram checkpoint that cannot be loaded; the message says what is wrong with it."""


def _next_float(value: float) -> float:
    return math.nextafter(value, math.inf)


def _float_bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def _bits_float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


class BucketLayout(Protocol):
    """What a histogram needs of its bucket layout."""

    @property
    def num_buckets(self) -> int: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def bucket_starts(self) -> tuple[float, ...]: ...
    def find_bucket(self, value: float) -> int: ...


@dataclass(frozen=True, slots=True, eq=False)
class LinearHistogramOptions:
    """Equal-width buckets `[n·size, (n+1)·size)`, the last open-ended (upstream's linear layout, used by its
    own histogram tests; the recommender itself uses the exponential layouts below)."""

    max_value: float
    bucket_size: float
    epsilon: float
    num_buckets: int = field(init=False)
    bucket_starts: tuple[float, ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.bucket_size <= 0 or self.epsilon <= 0:
            raise ValueError(f"invalid linear histogram options: max={self.max_value} "
                             f"size={self.bucket_size} epsilon={self.epsilon}")
        num = math.ceil(self.max_value / self.bucket_size) + 1
        object.__setattr__(self, "num_buckets", num)
        object.__setattr__(self, "bucket_starts", tuple(float(n) * self.bucket_size for n in range(num)))

    def find_bucket(self, value: float) -> int:
        bucket = int(value / self.bucket_size)
        return min(max(bucket, 0), self.num_buckets - 1)


@dataclass(frozen=True, slots=True, eq=False)
class HistogramOptions:
    """An exponential bucket layout: bucket 0 is [0, first); bucket n ≥ 1 starts at
    `first × (ratio^n − 1)/(ratio − 1)`; the last bucket is open-ended.

    Bucket lookup reproduces Go's `int(log(v·(ratio−1)/first + 1) / log(ratio))` bit for bit: the
    smallest value landing in each bucket is found once (bisection over float bit patterns using
    Go's log), then lookups are a binary search.
    """

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float
    num_buckets: int = field(init=False)
    bucket_starts: tuple[float, ...] = field(init=False)
    _bucket_floors: tuple[float, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.first_bucket_size <= 0 or self.ratio <= 1 or self.epsilon <= 0:
            raise ValueError(
                f"invalid exponential histogram options: max={self.max_value} first={self.first_bucket_size} "
                f"ratio={self.ratio} epsilon={self.epsilon}")
        growth = self.ratio - 1
        span = go_log(self.max_value * growth / self.first_bucket_size + 1) / go_log(self.ratio)
        num = math.ceil(span) + 1
        object.__setattr__(self, "num_buckets", num)
        starts = [0.0] + [self.first_bucket_size * (go_pow(self.ratio, float(n)) - 1) / growth
                          for n in range(1, num)]
        object.__setattr__(self, "bucket_starts", tuple(starts))
        floors = [self._smallest_value_in(n, starts[n]) for n in range(1, num)]
        object.__setattr__(self, "_bucket_floors", tuple(floors))

    def _go_bucket(self, value: float) -> int:
        """Go's `FindBucket` formula (before clamping to the last bucket)."""
        if value < self.first_bucket_size:
            return 0
        return int(go_log(value * (self.ratio - 1) / self.first_bucket_size + 1) / go_log(self.ratio))

    def _smallest_value_in(self, bucket: int, estimate: float) -> float:
        lo_bits = _float_bits(estimate * (1 - 1e-9))
        hi_bits = _float_bits(estimate * (1 + 1e-9))
        while self._go_bucket(_bits_float(lo_bits)) >= bucket:
            lo_bits = _float_bits(_bits_float(lo_bits) * (1 - 1e-6))
        while self._go_bucket(_bits_float(hi_bits)) < bucket:
            hi_bits = _float_bits(_bits_float(hi_bits) * (1 + 1e-6))
        # Invariant: value(lo) maps below `bucket`, value(hi) maps to `bucket` or beyond.
        while hi_bits - lo_bits > 1:
            mid = (lo_bits + hi_bits) // 2
            if self._go_bucket(_bits_float(mid)) >= bucket:
                hi_bits = mid
            else:
                lo_bits = mid
        return _bits_float(hi_bits)

    def find_bucket(self, value: float) -> int:
        """The bucket a value falls into; values past the last bucket start go to the last bucket."""
        return bisect.bisect_right(self._bucket_floors, value)

    def bucket_start(self, bucket: int) -> float:
        if bucket < 0 or bucket >= self.num_buckets:
            raise IndexError(f"bucket {bucket} out of range [0, {self.num_buckets})")
        return self.bucket_starts[bucket]


# CPU in cores: first bucket 0.01 core, 5% growth, up to 1000 cores (176 buckets).
CPU_HISTOGRAM_OPTIONS: Final = HistogramOptions(1000.0, 0.01, 1.0 + 0.05, EPSILON)
# Memory in bytes: first bucket 1e7 bytes, 5% growth, up to 1e12 bytes (176 buckets).
MEMORY_HISTOGRAM_OPTIONS: Final = HistogramOptions(1e12, 1e7, 1.0 + 0.05, EPSILON)


@dataclass(frozen=True, slots=True)
class HistogramCheckpoint:
    """The stored form of a decaying histogram: integer bucket weights scaled so the largest is 10000,
    the true total weight, and the reference time (None = Go's zero time)."""

    reference_timestamp: float | None
    bucket_weights: Mapping[int, int]
    total_weight: float


class Histogram:
    """Bucket weights, their total, and the first/last non-empty bucket (weight ≥ epsilon)."""

    __slots__ = ("_max_bucket", "_min_bucket", "_total_weight", "_weights", "options")

    def __init__(self, options: BucketLayout) -> None:
        self.options = options
        self._weights = [0.0] * options.num_buckets
        self._total_weight = 0.0
        self._min_bucket = options.num_buckets - 1
        self._max_bucket = 0

    @property
    def total_weight(self) -> float:
        return self._total_weight

    @property
    def min_bucket(self) -> int:
        return self._min_bucket

    @property
    def max_bucket(self) -> int:
        return self._max_bucket

    def bucket_weights(self) -> tuple[float, ...]:
        return tuple(self._weights)

    def add_sample(self, value: float, weight: float) -> None:
        if weight < 0:
            raise ValueError(f"sample weight must be non-negative, got {weight}")
        bucket = self.options.find_bucket(value)
        weights = self._weights
        weights[bucket] += weight
        self._total_weight += weight
        if bucket < self._min_bucket and weights[bucket] >= self.options.epsilon:
            self._min_bucket = bucket
        if bucket > self._max_bucket and weights[bucket] >= self.options.epsilon:
            self._max_bucket = bucket

    def subtract_sample(self, value: float, weight: float) -> None:
        """Remove weight; anything left below epsilon (in the bucket or the total) becomes exactly 0."""
        if weight < 0:
            raise ValueError(f"sample weight must be non-negative, got {weight}")
        bucket = self.options.find_bucket(value)
        epsilon = self.options.epsilon
        total = self._total_weight - weight
        self._total_weight = total if total >= epsilon else 0.0
        remaining = self._weights[bucket] - weight
        self._weights[bucket] = remaining if remaining >= epsilon else 0.0
        self._update_min_and_max()

    def merge(self, other: Histogram) -> None:
        """Add every bucket of `other` (only its non-empty range, as upstream)."""
        if other.options is not self.options:
            raise ValueError("cannot merge histograms with different bucket layouts")
        weights, other_weights = self._weights, other._weights
        for bucket in range(other._min_bucket, other._max_bucket + 1):
            weights[bucket] += other_weights[bucket]
        self._total_weight += other._total_weight
        if other._min_bucket < self._min_bucket:
            self._min_bucket = other._min_bucket
        if other._max_bucket > self._max_bucket:
            self._max_bucket = other._max_bucket

    def percentile(self, p: float) -> float:
        """Upper edge of the bucket where the running weight (from the first non-empty bucket) reaches
        p × total; the start of the last bucket if that is where it ends; 0 for an empty histogram."""
        if self.is_empty():
            return 0.0
        threshold = p * self._total_weight
        weights = self._weights
        bucket = self._min_bucket
        last = self._max_bucket
        partial = 0.0
        while bucket < last:
            partial += weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.options.num_buckets - 1:
            return self.options.bucket_starts[bucket + 1]
        return self.options.bucket_starts[bucket]

    def is_empty(self) -> bool:
        return self._weights[self._min_bucket] < self.options.epsilon

    def scale(self, factor: float) -> None:
        """Multiply every weight by `factor` ≥ 0 (percentiles unchanged, tiny buckets may drop out)."""
        if factor < 0:
            raise ValueError(f"scale factor must be non-negative, got {factor}")
        weights = self._weights
        for bucket in range(self._min_bucket, self._max_bucket + 1):
            weights[bucket] *= factor
        self._total_weight *= factor
        self._update_min_and_max()

    def _update_min_and_max(self) -> None:
        epsilon = self.options.epsilon
        weights = self._weights
        last = self.options.num_buckets - 1
        while weights[self._min_bucket] < epsilon and self._min_bucket < last:
            self._min_bucket += 1
        while weights[self._max_bucket] < epsilon and self._max_bucket > 0:
            self._max_bucket -= 1

    def copy_into(self, target: Histogram) -> None:
        target._weights = self._weights.copy()
        target._total_weight = self._total_weight
        target._min_bucket = self._min_bucket
        target._max_bucket = self._max_bucket

    # --- checkpoint form -----------------------------------------------------------------------------

    def _save_weights(self) -> dict[int, int]:
        weights = self._weights
        largest = 0.0
        for bucket in range(self._min_bucket, self._max_bucket + 1):
            if weights[bucket] > largest:
                largest = weights[bucket]
        result: dict[int, int] = {}
        if largest == 0:
            return result
        ratio = float(MAX_CHECKPOINT_WEIGHT) / largest
        for bucket in range(self._min_bucket, self._max_bucket + 1):
            stored = math.floor(weights[bucket] * ratio + 0.5) & 0xFFFFFFFF  # Go: uint32(round(x))
            if stored > 0:
                result[bucket] = stored
        return result

    def _load_weights(self, bucket_weights: Mapping[int, int], total_weight: float) -> None:
        if total_weight < 0:
            raise HistogramError(
                f"cannot load a histogram checkpoint with negative total weight {total_weight}")
        stored_sum = 0
        for bucket, weight in bucket_weights.items():
            if bucket >= self.options.num_buckets:
                raise HistogramError(
                    f"checkpoint has bucket {bucket} beyond the histogram's "
                    f"{self.options.num_buckets} buckets")
            if bucket < 0:
                raise HistogramError(f"checkpoint has a negative bucket {bucket}")
            if weight < 0 or weight > 0xFFFFFFFF:
                raise HistogramError(f"checkpoint bucket {bucket} has weight {weight} outside uint32")
            stored_sum += weight
        if stored_sum == 0:
            return
        ratio = total_weight / float(stored_sum)
        for bucket, weight in bucket_weights.items():
            self._min_bucket = min(self._min_bucket, bucket)
            self._max_bucket = max(self._max_bucket, bucket)
            self._weights[bucket] += float(weight) * ratio
        self._total_weight += total_weight
        # Upstream fix for issue #7726: buckets that load below epsilon must not count as min/max.
        self._update_min_and_max()


class DecayingHistogram(Histogram):
    """A histogram whose sample weights grow by 2^((t − reference)/halfLife), so older samples count less.

    The reference is a multiple of the half-life (Go's `Time.Round`). When a sample arrives more than
    100 half-lives after it, the reference moves to that sample's (rounded) time and existing weights are
    scaled down by the matching power of two.
    """

    __slots__ = ("half_life_s", "reference_timestamp")

    def __init__(self, options: BucketLayout, half_life_s: float) -> None:
        super().__init__(options)
        if half_life_s <= 0:
            raise ValueError(f"half-life must be positive, got {half_life_s} s")
        self.half_life_s = half_life_s
        self.reference_timestamp: float | None = None

    def add_sample_at(self, value: float, weight: float, timestamp: float) -> None:
        self.add_sample(value, weight * self._decay_factor(timestamp))

    def subtract_sample_at(self, value: float, weight: float, timestamp: float) -> None:
        self.subtract_sample(value, weight * self._decay_factor(timestamp))

    def merge_decaying(self, other: DecayingHistogram) -> None:
        """Merge `other` into this histogram after aligning the older reference to the newer one.

        As upstream does, aligning may re-base `other` in place (its weights are scaled by a power of two,
        which leaves its percentiles unchanged).
        """
        if other.half_life_s != self.half_life_s:
            raise ValueError("cannot merge decaying histograms with different half-lives")
        mine, theirs = self.reference_timestamp, other.reference_timestamp
        if _before(mine, theirs):
            assert theirs is not None
            self._shift_reference(theirs)
        elif _before(theirs, mine):
            assert mine is not None
            other._shift_reference(mine)
        self.merge(other)

    def copy(self) -> DecayingHistogram:
        clone = DecayingHistogram(self.options, self.half_life_s)
        self.copy_into(clone)
        clone.reference_timestamp = self.reference_timestamp
        return clone

    def _shift_reference(self, new_reference: float) -> None:
        new_reference = go_round_time(new_reference, self.half_life_s)
        if self.reference_timestamp is None:
            # From Go's zero time the shift saturates at the minimum Duration; 2^-106752 is 0.
            factor = 0.0
        else:
            exponent = math.floor((self.reference_timestamp - new_reference) / self.half_life_s + 0.5)
            factor = math.ldexp(1.0, exponent)
        self.scale(factor)
        self.reference_timestamp = new_reference

    def _decay_factor(self, timestamp: float) -> float:
        reference = self.reference_timestamp
        if reference is None or timestamp > reference + self.half_life_s * MAX_DECAY_EXPONENT:
            self._shift_reference(timestamp)
            reference = self.reference_timestamp
            assert reference is not None
        return go_exp2((timestamp - reference) / self.half_life_s)

    # --- checkpoint form -----------------------------------------------------------------------------

    def save(self) -> HistogramCheckpoint:
        return HistogramCheckpoint(self.reference_timestamp, self._save_weights(), self._total_weight)

    def load(self, checkpoint: HistogramCheckpoint) -> None:
        """Add the checkpoint's weights (distributing `total_weight` over the stored integers) and take its
        reference time. Raises HistogramError for buckets out of range or a negative total."""
        self._load_weights(checkpoint.bucket_weights, checkpoint.total_weight)
        self.reference_timestamp = checkpoint.reference_timestamp


def _before(a: float | None, b: float | None) -> bool:
    """Go's `a.Before(b)` with None as the zero time (which is before every real time)."""
    if a is None:
        return b is not None
    if b is None:
        return False
    return a < b
