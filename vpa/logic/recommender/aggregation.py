"""Usage aggregation: per-container sample intake and the per-key aggregate the estimators read.

Owns: `AggregationConfig` (histogram half-lives, memory aggregation interval and count, OOM bump
defaults) and the per-container override from a VPA container policy when `PerVPAConfig` is on;
`AggregateContainerState` (decaying CPU histogram, decaying memory-peak histogram, first/last CPU sample
time, CPU sample count, creation time, merging, and — only for an algorithm that asks for it — recent
usage slot peaks, `vpa.logic.recommender.recent_usage`); `ContainerState` (one running container: CPU
de-duplication, one memory peak per aggregation interval with upstream's window rules, OOM bumps).

Must not: hold cluster-wide maps (see `recommender_cluster`), read the clock, log, or emit metrics.
Times are Unix seconds; CPU amounts are integer millicores and memory amounts integer bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Protocol

from vpa.logic.recommender.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    MEMORY_HISTOGRAM_OPTIONS,
    MIN_SAMPLE_WEIGHT,
    DecayingHistogram,
)
from vpa.logic.recommender.numerics import (
    amount_from_float,
    cores_from_cpu_amount,
    go_truncate_duration,
    scale_amount,
)
from vpa.logic.recommender.recent_usage import RecentUsage
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.vpa import ContainerResourcePolicy, ContainerScalingMode, UpdateMode

DAY_S: Final = 24 * 3600
DEFAULT_CONTROLLED_RESOURCES: Final[tuple[str, ...]] = (CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class ContainerAggregationSettings:
    """What one aggregate uses for memory peaks and OOMs: the flags, or its container policy's overrides."""

    memory_aggregation_interval_s: float = DAY_S
    memory_aggregation_interval_count: int = 8
    oom_bump_up_ratio: float = 1.2
    oom_min_bump_up_bytes: float = 100 * 1024 * 1024
    target_cpu_percentile: float | None = None
    """AEP-9970 (gate `PerVPAConfig`): the container's own CPU target percentile; None = the flag."""
    target_memory_percentile: float | None = None
    """AEP-9970: the container's own memory target percentile; None = the flag."""

    @property
    def memory_aggregation_window_s(self) -> float:
        """History kept for memory peaks and the expiry age of an idle aggregate (default 8 days)."""
        return self.memory_aggregation_interval_s * self.memory_aggregation_interval_count


@dataclass(frozen=True, slots=True)
class AggregationConfig:
    """The recommender flags that shape aggregation (upstream defaults)."""

    cpu_histogram_decay_half_life_s: float = DAY_S
    memory_histogram_decay_half_life_s: float = DAY_S
    defaults: ContainerAggregationSettings = ContainerAggregationSettings()
    per_vpa_config: bool = False  # feature gate PerVPAConfig
    # Recent memory usage per aggregate (slot peaks over a window), kept only for an algorithm that reads
    # it (`moving-window`); 0 keeps none, as upstream.
    recent_usage_slot_s: float = 0.0
    recent_usage_window_s: float = 0.0
    recent_usage_lookback_slots: int = 12

    @property
    def tracks_recent_usage(self) -> bool:
        return self.recent_usage_window_s > 0

    def settings_for(self, policy: ContainerResourcePolicy | None) -> ContainerAggregationSettings:
        """The container policy's `oomBumpUpRatio`, `oomMinBumpUp` and `memoryAggregationInterval*`
        override the flags only when the PerVPAConfig gate is on."""
        if not self.per_vpa_config or policy is None:
            return self.defaults
        base = self.defaults
        return replace(
            base,
            memory_aggregation_interval_s=(
                base.memory_aggregation_interval_s if policy.memory_aggregation_interval_s is None
                else float(policy.memory_aggregation_interval_s)),
            memory_aggregation_interval_count=(
                base.memory_aggregation_interval_count if policy.memory_aggregation_interval_count is None
                else policy.memory_aggregation_interval_count),
            oom_bump_up_ratio=(
                base.oom_bump_up_ratio if policy.oom_bump_up_ratio is None else policy.oom_bump_up_ratio),
            oom_min_bump_up_bytes=(
                base.oom_min_bump_up_bytes if policy.oom_min_bump_up_bytes is None
                else float(policy.oom_min_bump_up_bytes)),
        )


class AggregateContainerState:
    """Aggregated usage of every container sharing one key (or of a VPA's containers with one name).

    `first_sample_start`, `last_sample_start` and `total_samples_count` count CPU samples only, as
    upstream. `scaling_mode` and `controlled_resources` come from the container policy of the VPA that
    uses the aggregate.
    """

    __slots__ = (
        "controlled_resources",
        "cpu",
        "creation_time",
        "first_sample_start",
        "last_recommendation",
        "last_sample_start",
        "memory",
        "recent",
        "scaling_mode",
        "settings",
        "total_samples_count",
        "under_vpa",
        "update_mode",
    )

    def __init__(self, config: AggregationConfig, creation_time: float,
                 settings: ContainerAggregationSettings | None = None) -> None:
        self.cpu = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, config.cpu_histogram_decay_half_life_s)
        self.memory = DecayingHistogram(MEMORY_HISTOGRAM_OPTIONS, config.memory_histogram_decay_half_life_s)
        # Not checkpointed: refills from new samples after a restart (vpa.logic.recommender.recent_usage).
        self.recent: RecentUsage | None = (
            RecentUsage(config.recent_usage_slot_s, config.recent_usage_window_s,
                        config.recent_usage_lookback_slots)
            if config.tracks_recent_usage else None)
        self.first_sample_start: float | None = None
        self.last_sample_start: float | None = None
        self.total_samples_count = 0
        self.creation_time = creation_time
        self.settings = settings if settings is not None else config.defaults
        self.scaling_mode = ContainerScalingMode.AUTO
        self.controlled_resources: tuple[str, ...] = DEFAULT_CONTROLLED_RESOURCES
        # What upstream's quality metrics read: whether a VPA uses the aggregate, that VPA's update mode,
        # and the uncapped target last recommended for it.
        self.under_vpa = False
        self.update_mode: UpdateMode | None = None
        self.last_recommendation: Resources | None = None

    def needs_recommendation(self) -> bool:
        """Upstream `NeedsRecommendation`: used by a VPA, and its container policy's mode is not Off."""
        return self.under_vpa and self.scaling_mode is not ContainerScalingMode.OFF

    def mark_not_autoscaled(self) -> None:
        """Upstream `MarkNotAutoscaled`: its VPA is gone."""
        self.under_vpa = False
        self.update_mode = None
        self.last_recommendation = None

    # --- samples ---------------------------------------------------------------------------------------

    def add_cpu_sample(self, usage_millicores: int, timestamp: float) -> None:
        """One CPU sample with upstream's constant weight (requests are not weights since Feb 2025)."""
        self.cpu.add_sample_at(cores_from_cpu_amount(usage_millicores), MIN_SAMPLE_WEIGHT, timestamp)
        if self.last_sample_start is None or timestamp > self.last_sample_start:
            self.last_sample_start = timestamp
        if self.first_sample_start is None or timestamp < self.first_sample_start:
            self.first_sample_start = timestamp
        self.total_samples_count += 1

    def add_memory_peak(self, peak_bytes: int, timestamp: float) -> None:
        self.memory.add_sample_at(float(peak_bytes), 1.0, timestamp)

    def subtract_memory_peak(self, peak_bytes: int, timestamp: float) -> None:
        self.memory.subtract_sample_at(float(peak_bytes), 1.0, timestamp)

    # --- policy ----------------------------------------------------------------------------------------

    def update_from_policy(self, policy: ContainerResourcePolicy | None, config: AggregationConfig) -> None:
        """Take scaling mode, controlled resources and (gate permitting) per-container settings."""
        self.scaling_mode = ContainerScalingMode.AUTO
        if policy is not None and policy.mode is not None:
            self.scaling_mode = policy.mode
        self.controlled_resources = (DEFAULT_CONTROLLED_RESOURCES if policy is None
                                     else tuple(r for r in policy.effective_controlled_resources
                                                if r in (CPU, MEMORY)))
        self.settings = config.settings_for(policy)

    # --- combining -------------------------------------------------------------------------------------

    def merge(self, other: AggregateContainerState) -> None:
        """Add `other`'s histograms and counts; first/last sample times widen. May re-base `other`'s
        histogram references in place (see `DecayingHistogram.merge_decaying`)."""
        self.cpu.merge_decaying(other.cpu)
        self.memory.merge_decaying(other.memory)
        if self.recent is not None and other.recent is not None:
            self.recent.merge(other.recent)
        if self.first_sample_start is None or (
                other.first_sample_start is not None and other.first_sample_start < self.first_sample_start):
            self.first_sample_start = other.first_sample_start
        if other.last_sample_start is not None and (
                self.last_sample_start is None or other.last_sample_start > self.last_sample_start):
            self.last_sample_start = other.last_sample_start
        self.total_samples_count += other.total_samples_count

    def copy(self) -> AggregateContainerState:
        clone = AggregateContainerState.__new__(AggregateContainerState)
        clone.cpu = self.cpu.copy()
        clone.memory = self.memory.copy()
        clone.recent = None if self.recent is None else self.recent.copy()
        clone.first_sample_start = self.first_sample_start
        clone.last_sample_start = self.last_sample_start
        clone.total_samples_count = self.total_samples_count
        clone.creation_time = self.creation_time
        clone.settings = self.settings
        clone.scaling_mode = self.scaling_mode
        clone.controlled_resources = self.controlled_resources
        return clone

    # --- lifetime --------------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """No CPU sample was ever aggregated (upstream's GC notion of empty)."""
        return self.total_samples_count == 0

    def is_expired(self, now: float) -> bool:
        """An empty aggregate expires one memory window after creation, a used one a window after its
        last CPU sample."""
        window = self.settings.memory_aggregation_window_s
        if self.is_empty():
            return now - self.creation_time >= window
        assert self.last_sample_start is not None
        return now - self.last_sample_start >= window


class AggregateLookup(Protocol):
    """How a container reaches its (current) aggregate; the cluster re-creates it if it was collected."""

    def __call__(self, now: float) -> AggregateContainerState: ...


class OomRejected(ValueError):
    """An OOM that upstream discards (too old); the message says why."""


class ContainerState:
    """One container of one pod: the de-duplication and memory-window bookkeeping upstream keeps.

    `aggregate(now)` is called for every sample, so that a pod whose labels changed, or whose aggregate was
    garbage-collected, feeds the right (possibly new, created at the sample's time) aggregate.
    """

    __slots__ = ("aggregate", "last_cpu_sample_start", "last_memory_sample_start", "memory_peak", "oom_peak",
                 "request_cpu_millicores", "request_memory_bytes", "track_recent", "window_end")

    def __init__(self, aggregate: AggregateLookup, request_cpu_millicores: int | None = None,
                 request_memory_bytes: int | None = None, track_recent: bool = False) -> None:
        self.aggregate = aggregate
        # Also feed every accepted memory sample (an OOM as its bumped amount) to the aggregate's recent
        # usage; off for upstream's algorithm, whose sample path stays exactly upstream's.
        self.track_recent = track_recent
        self.request_cpu_millicores = request_cpu_millicores
        self.request_memory_bytes = request_memory_bytes
        self.last_cpu_sample_start: float | None = None
        self.memory_peak = 0
        self.oom_peak = 0
        self.window_end: float | None = None
        self.last_memory_sample_start: float | None = None

    @property
    def max_memory_peak(self) -> int:
        """The current interval's peak, counting an OOM-derived peak."""
        return max(self.memory_peak, self.oom_peak)

    def add_cpu_sample(self, usage_millicores: int, timestamp: float) -> bool:
        """False (discarded) for negative usage or a sample not strictly newer than the last one."""
        if usage_millicores < 0 or (
                self.last_cpu_sample_start is not None and timestamp <= self.last_cpu_sample_start):
            return False
        self.aggregate(timestamp).add_cpu_sample(usage_millicores, timestamp)
        self.last_cpu_sample_start = timestamp
        return True

    def add_memory_sample(self, usage_bytes: int, timestamp: float, is_oom: bool = False) -> bool:
        """Keep one peak per aggregation interval, stamped at the interval's end.

        A sample inside the current interval that beats the current peak replaces it (old peak
        subtracted, new one added); a sample at or past the interval's end moves the window forward by
        whole intervals and starts a new peak. Non-OOM samples older than the last one are discarded.
        """
        if usage_bytes < 0 or (not is_oom and self.last_memory_sample_start is not None
                               and timestamp < self.last_memory_sample_start):
            return False
        if not is_oom:
            self.last_memory_sample_start = timestamp
        if self.track_recent:
            recent = self.aggregate(timestamp).recent
            if recent is not None:
                recent.add(usage_bytes, timestamp)
        if self.window_end is None:
            self.window_end = timestamp
        if timestamp < self.window_end:
            old_peak = self.max_memory_peak
            if old_peak == 0 or usage_bytes <= old_peak:
                return True
            aggregate = self.aggregate(timestamp)
            aggregate.subtract_memory_peak(old_peak, self.window_end)
        else:
            aggregate = self.aggregate(timestamp)
            interval = aggregate.settings.memory_aggregation_interval_s
            shift = go_truncate_duration(timestamp - self.window_end, interval) + interval
            self.window_end += shift
            self.memory_peak = 0
            self.oom_peak = 0
        aggregate.add_memory_peak(usage_bytes, self.window_end)
        if is_oom:
            self.oom_peak = usage_bytes
        else:
            self.memory_peak = usage_bytes
        return True

    def record_oom(self, timestamp: float, requested_memory_bytes: int) -> int:
        """Turn an OOM kill into a memory sample of `max(used + min bump, trunc(used × ratio))` where
        `used = max(request, current usage peak)`. Returns the bumped amount; raises OomRejected when the
        OOM is older than one interval before the last memory sample."""
        settings = self.aggregate(timestamp).settings
        if (self.last_memory_sample_start is not None
                and timestamp < self.last_memory_sample_start - settings.memory_aggregation_interval_s):
            raise OomRejected(f"OOM at {timestamp} is too old: the last memory sample is from "
                              f"{self.last_memory_sample_start}")
        needed = oom_bumped_memory(requested_memory_bytes, self.memory_peak, settings)
        if not self.add_memory_sample(needed, timestamp, is_oom=True):
            raise OomRejected(f"OOM sample of {needed} bytes at {timestamp} was not accepted")
        return needed


def oom_bumped_memory(requested_memory_bytes: int, memory_peak_bytes: int,
                      settings: ContainerAggregationSettings) -> int:
    """Upstream's OOM estimate. The OOM peak itself is deliberately left out of `used`, so repeated OOMs
    do not compound."""
    used = max(requested_memory_bytes, memory_peak_bytes)
    return max(used + amount_from_float(settings.oom_min_bump_up_bytes),
               scale_amount(used, settings.oom_bump_up_ratio))
