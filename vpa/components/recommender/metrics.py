"""The recommender's Prometheus collectors: upstream's `vpa_recommender_*` and `vpa_quality_*` metrics, and
our own counters and condition gauges.

Must not: compute recommendations or read the cluster.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vpa.components.health import LoopHistogram, UnsuffixedCounter
from vpa.logic.recommender.cluster import (
    QualityContext,
    RecommendationChange,
)
from vpa.model.resources import CPU, MEMORY
from vpa.model.vpa import (
    UpdateMode,
)

_EXECUTION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
                             300.0)
_RECOMMENDATION_LATENCY_BUCKETS: Final = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0,
                                          1200.0, 1800.0)
# Upstream's quality buckets: CPU 0.01 … 655.36 cores and memory 1 MB … 65.5 GB (17 exponential buckets,
# factor 2), and relative differences from -100 % to ×100.
_CPU_QUALITY_BUCKETS: Final = tuple(0.01 * 2.0**i for i in range(17))
_MEMORY_QUALITY_BUCKETS: Final = tuple(1e6 * 2.0**i for i in range(17))
_RELATIVE_QUALITY_BUCKETS: Final = (
    -1.0, -0.75, -0.5, -0.25, -0.1, -0.05, -0.025, -0.01, -0.005, -0.0025, -0.001,
    0.0, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
    100.0,
)
# `vpa_resources_get_resources_count{source}`: where a container's requests were read.
SOURCE_CONTAINER_STATUSES: Final = "Pod.Status.ContainerStatuses"
SOURCE_SPEC_CONTAINERS: Final = "Pod.Spec.Containers"
# ------------------------------------------------------------------------------------------ metrics


class RecommenderMetrics:
    """Upstream's `vpa_recommender_*` metrics, plus counters of our own (skipped inputs, write errors, status
    writes skipped) and the gauges of our conditions."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.execution_latency = Histogram(
            "vpa_recommender_execution_latency_seconds",
            "Time spent in various parts of VPA Recommender main loop.", ["step"],
            buckets=_EXECUTION_BUCKETS, registry=registry)
        self.vpa_objects = Gauge(
            "vpa_recommender_vpa_objects_count", "Number of VPA objects present in the cluster.",
            ["update_mode", "has_recommendation", "api", "matches_pods", "unsupported_config"],
            registry=registry)
        self.recommendation_latency = Histogram(
            "vpa_recommender_recommendation_latency_seconds",
            "Time elapsed from creating a valid VPA configuration to the first recommendation.",
            buckets=_RECOMMENDATION_LATENCY_BUCKETS, registry=registry)
        self.aggregate_states = Gauge(
            "vpa_recommender_aggregate_container_states_count",
            "Number of aggregate container states being tracked by the recommender", registry=registry)
        # Upstream's counter name has no `_total`, which prometheus_client's Counter would append.
        self.metric_server_responses = UnsuffixedCounter(
            "vpa_recommender_metric_server_responses",
            "Count of responses to queries to metrics server", ["is_error", "client_name"],
            registry=registry)
        self.skipped = Counter(
            "vpa_recommender_skipped_inputs",
            "Inputs the recommender skipped (malformed checkpoints, unknown containers, rejected OOMs).",
            ["what"], registry=registry)
        self.write_errors = Counter(
            "vpa_recommender_write_errors", "Failed writes of VPA status or checkpoints.", ["what"],
            registry=registry)
        self.status_writes_skipped = Counter(
            "vpa_recommender_status_writes_skipped",
            "VPA status writes skipped because only bounds moved, within --bounds-write-tolerance.",
            registry=registry)
        self.get_resources = UnsuffixedCounter(
            "vpa_resources_get_resources_count", "Count of get resources calls by source", ["source"],
            registry=registry)
        self.quality = QualityMetrics(registry)
        self.capped_to_node = Gauge(
            "vpa_recommender_vpas_capped_to_node",
            "VPAs whose recommendation was capped to the largest schedulable node (--cap-to-largest-node).",
            registry=registry)
        self.vpa_conflicts = Gauge(
            "vpa_recommender_vpa_conflicts",
            "VPAs ignored because an older VPA targets the same pods (condition ConflictingVPA).",
            registry=registry)
        self.hpa_conflicts = Gauge(
            "vpa_recommender_hpa_conflicts",
            "VPAs whose target an HPA scales on a resource the VPA controls (condition ConflictingHPA).",
            registry=registry)


class QualityMetrics:
    """Upstream's `vpa_quality_*` metrics (spec §3.14, §6.2): every accepted usage sample of a container
    that needs a recommendation against the recommendation last made for it, and every recommendation
    against the previous one. Histograms are `LoopHistogram`s: a 50,000-container loop observes
    hundreds of thousands of values."""

    def __init__(self, registry: CollectorRegistry) -> None:
        mode, mode_missing = ["update_mode"], ["update_mode", "recommendation_missing"]
        self.relative_diffs = LoopHistogram(
            "vpa_quality_usage_recommendation_relative_diffs",
            "Diffs between recommendation and usage, normalized by recommendation value",
            ["update_mode", "resource", "is_oom"], _RELATIVE_QUALITY_BUCKETS, registry=registry)
        self.missing = UnsuffixedCounter(
            "vpa_quality_usage_sample_missing_recommendation_count",
            "Count of usage samples when a recommendation should be present but is missing",
            ["update_mode", "resource", "is_oom"], registry=registry)
        self.cpu_over = LoopHistogram(
            "vpa_quality_cpu_recommendation_over_usage_diffs_cores",
            "Absolute diffs between recommendation and usage for CPU when recommendation > usage",
            mode_missing, _CPU_QUALITY_BUCKETS, registry=registry)
        self.memory_over = LoopHistogram(
            "vpa_quality_mem_recommendation_over_usage_diffs_bytes",
            "Absolute diffs between recommendation and usage for memory when recommendation > usage",
            [*mode_missing, "is_oom"], _MEMORY_QUALITY_BUCKETS, registry=registry)
        self.cpu_lower_equal = LoopHistogram(
            "vpa_quality_cpu_recommendation_lower_equal_usage_diffs_cores",
            "Absolute diffs between recommendation and usage for CPU when recommendation <= usage",
            mode_missing, _CPU_QUALITY_BUCKETS, registry=registry)
        self.memory_lower_equal = LoopHistogram(
            "vpa_quality_mem_recommendation_lower_equal_usage_diffs_bytes",
            "Absolute diffs between recommendation and usage for memory when recommendation <= usage",
            [*mode_missing, "is_oom"], _MEMORY_QUALITY_BUCKETS, registry=registry)
        self.cpu_recommendations = LoopHistogram(
            "vpa_quality_cpu_recommendations_cores",
            "CPU recommendation values as observed on recorded usage sample",
            mode, _CPU_QUALITY_BUCKETS, registry=registry)
        self.memory_recommendations = LoopHistogram(
            "vpa_quality_mem_recommendations_bytes",
            "Memory recommendation values as observed on recorded usage sample",
            [*mode, "is_oom"], _MEMORY_QUALITY_BUCKETS, registry=registry)
        self.relative_changes = LoopHistogram(
            "vpa_quality_relative_recommendation_changes",
            "Changes between consecutive recommendation values, normalized by old value",
            ["update_mode", "resource", "vpa_size_log2"], _RELATIVE_QUALITY_BUCKETS, registry=registry)

    def observe_sample(self, context: QualityContext, resource: str, usage: int, is_oom: bool) -> None:
        """One accepted sample (`usage` in millicores or bytes), as upstream's `observeQualityMetrics`."""
        mode = _mode_label(context.update_mode)
        oom = "true" if is_oom else "false"
        cpu = resource == CPU
        usage_value = usage / 1000.0 if cpu else float(usage)
        last = context.last_recommendation
        amount = None if last is None else (last.cpu_millicores if cpu else last.memory_bytes)
        if not amount:  # no recommendation yet, or zero for this resource
            self.missing.labels(update_mode=mode, resource=resource, is_oom=oom).inc()
            self._observe_diff(usage_value, 0.0, "true", oom, cpu, mode)
            return
        recommended = amount / 1000.0 if cpu else float(amount)
        if cpu:
            self.cpu_recommendations.labels(mode).observe(recommended)
        else:
            self.memory_recommendations.labels(mode, oom).observe(recommended)
        self._observe_diff(usage_value, recommended, "false", oom, cpu, mode)
        self.relative_diffs.labels(mode, resource, oom).observe((usage_value - recommended) / recommended)

    def _observe_diff(self, usage: float, recommended: float, missing: str, oom: str, cpu: bool,
                      mode: str) -> None:
        diff = abs(usage - recommended)
        if cpu:
            histogram = self.cpu_over if recommended > usage else self.cpu_lower_equal
            histogram.labels(mode, missing).observe(diff)
        else:
            histogram = self.memory_over if recommended > usage else self.memory_lower_equal
            histogram.labels(mode, missing, oom).observe(diff)

    def observe_change(self, change: RecommendationChange) -> None:
        """A new uncapped target against the previous one (nothing on the first one; a previous zero is
        skipped), labelled with the VPA's size class."""
        if change.previous is None:
            return
        mode = _mode_label(change.update_mode)
        size = str(vpa_size_log2(change.pod_count))
        for resource, new, old in ((CPU, change.current.cpu_millicores, change.previous.cpu_millicores),
                                   (MEMORY, change.current.memory_bytes, change.previous.memory_bytes)):
            if new is not None and old:
                self.relative_changes.labels(mode, resource, size).observe(new / old - 1.0)


def _mode_label(mode: UpdateMode | None) -> str:
    return "" if mode is None else mode.value


def vpa_size_log2(pods: int) -> int:
    """Upstream's `vpa_size_log2` label: floor(log2(pods)), 0 for 0 or 1 pod, capped at 20 (as the
    updater's; components do not import each other)."""
    return min(20, max(0, pods.bit_length() - 1))
