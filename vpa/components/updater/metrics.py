"""The updater's Prometheus collectors: upstream's `vpa_updater_*` metrics.

Must not: decide anything.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS: Final = (
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
_MAX_SIZE_LOG2: Final = 20

def vpa_size_log2(pods: int) -> int:
    """Upstream's `vpa_size_log2` label: floor(log2(pods)), 0 for 0 or 1 pod, capped at 20."""
    if pods <= 1:
        return 0
    return min(pods.bit_length() - 1, _MAX_SIZE_LOG2)


class UpdaterMetrics:
    """The `vpa_updater_*` series of spec §6.2 on the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        size_mode = ["vpa_size_log2", "update_mode"]
        per_vpa = ["vpa_name", "vpa_namespace"]
        self.controlled = Gauge(
            "vpa_updater_controlled_pods_total",
            "Pods controlled by VPAs the updater acts for.",
            size_mode,
            registry=registry,
        )
        self.evictable = Gauge(
            "vpa_updater_evictable_pods_total",
            "Pods the last loop planned to evict.",
            size_mode,
            registry=registry,
        )
        self.vpas_with_evictable = Gauge(
            "vpa_updater_vpas_with_evictable_pods_total",
            "VPAs with at least one pod planned for eviction.",
            size_mode,
            registry=registry,
        )
        self.vpas_with_evicted = Gauge(
            "vpa_updater_vpas_with_evicted_pods_total",
            "VPAs with at least one pod evicted in the last loop.",
            size_mode,
            registry=registry,
        )
        self.evicted = Counter(
            "vpa_updater_evicted_pods_total", "Pods evicted.", [*size_mode, *per_vpa], registry=registry
        )
        self.failed_evictions = Counter(
            "vpa_updater_failed_eviction_attempts_total",
            "Eviction attempts that failed.",
            [*size_mode, "reason", *per_vpa],
            registry=registry,
        )
        self.in_place_updatable = Gauge(
            "vpa_updater_in_place_updatable_pods_total",
            "Pods the last loop planned to resize in place.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.vpas_with_in_place_updatable = Gauge(
            "vpa_updater_vpas_with_in_place_updatable_pods_total",
            "VPAs with at least one pod planned for an in-place resize.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.vpas_with_in_place_updated = Gauge(
            "vpa_updater_vpas_with_in_place_updated_pods_total",
            "VPAs with at least one pod resized in place in the last loop.",
            ["vpa_size_log2"],
            registry=registry,
        )
        self.in_place_updated = Counter(
            "vpa_updater_in_place_updated_pods_total",
            "Pods resized in place.",
            ["vpa_size_log2", *per_vpa],
            registry=registry,
        )
        self.failed_in_place = Counter(
            "vpa_updater_failed_in_place_update_attempts_total",
            "In-place resize attempts that failed.",
            ["vpa_size_log2", "reason", *per_vpa],
            registry=registry,
        )
        self.infeasible_skips = Counter(
            "vpa_updater_in_place_infeasible_skip_pods_total",
            "Pods skipped because a recorded infeasible resize is not lower than the recommendation.",
            ["vpa_size_log2", *per_vpa],
            registry=registry,
        )
        self.status_invalid = Counter(
            "vpa_updater_admission_controller_status_invalid_total",
            "Updater loops skipped because the admission controller's status Lease was missing or unreadable "
            "(reason=error) or older than --admission-controller-status-lease-timeout (reason=invalid).",
            ["reason"],
            registry=registry,
        )
        # AEP-9936 (gate VPAInitialDelay): 1 while a VPA's initialDelaySeconds window lasts, 0 after.
        self.initial_delay_active = Gauge(
            "vpa_initial_delay_active",
            "1 while the VPA's initialDelaySeconds window since its creation lasts (nothing is applied to "
            "its pods), 0 once it has elapsed; VPAs without the field are not listed.",
            ["namespace", "name"],
            registry=registry,
        )
        # Ours (gate ResizeGuard): resizes undone because the pod was hurt after them, by cause.
        self.resize_reverts = Counter(
            "vpa_updater_resize_reverts_total",
            "In-place resizes reverted because the pod was OOM-killed, restarted or stopped being Ready "
            "within the guard window after them.",
            ["cause", *per_vpa],
            registry=registry,
        )
        self.latency = Histogram(
            "vpa_updater_execution_latency_seconds",
            "Time spent in the steps of one updater loop.",
            ["step"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )

    def reset_gauges(self) -> None:
        for gauge in (
            self.controlled,
            self.evictable,
            self.vpas_with_evictable,
            self.vpas_with_evicted,
            self.in_place_updatable,
            self.vpas_with_in_place_updatable,
            self.vpas_with_in_place_updated,
            self.initial_delay_active,
        ):
            gauge.clear()
