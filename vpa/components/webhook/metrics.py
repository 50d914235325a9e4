"""The admission controller's metrics: upstream's admission-controller series (spec §6.2), pre-created for
the hot path.

Must not: decide anything; be written to from any thread but the webhook's (its histograms have one
writer).
"""

from __future__ import annotations

from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter

from vpa.components.health import LoopHistogram
from vpa.components.sampled_log import SampledLog

# Upstream's buckets start at 10 ms, above everything a healthy webhook does; finer ones first.
LATENCY_BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 300.0,
)  # fmt: skip

Status = Literal["error", "skipped", "applied"]
ResourceLabel = Literal["unknown", "Pod", "VPA"]


class AdmissionMetrics:
    """Upstream's admission-controller metrics (spec §6.2), series pre-created for the hot path."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # Loop histograms: prometheus_client's `observe` takes a lock and walks the buckets, a noticeable
        # share of a review that observes six of them.
        self.latency = LoopHistogram(
            "vpa_admission_controller_admission_latency_seconds",
            "Time spent in the VPA admission controller, by outcome and resource.",
            ("status", "resource"),
            LATENCY_BUCKETS,
            registry=registry,
        )
        self.pods = Counter(
            "vpa_admission_controller_admission_pods_total",
            "Pods admitted, by whether a recommendation was applied.",
            ["applied"],
            registry=registry,
        )
        self.steps = LoopHistogram(
            "vpa_admission_controller_execution_latency_seconds",
            "Time spent in each step of an admission.",
            ("step",),
            LATENCY_BUCKETS,
            registry=registry,
        )
        # Reviews any client can send (unhandled resources, pods that do not convert, our own failures):
        # counted by reason, logged at most once per reason every 10 s.
        self.notices = SampledLog(
            registry,
            "vpa_admission_controller_review_problems_total",
            "Admission reviews that were answered without a decision, by reason (logged sampled).",
        )
        self._latency = {
            (s, r): self.latency.labels(s, r)
            for s in ("error", "skipped", "applied")
            for r in ("unknown", "Pod", "VPA")
        }
        self._pods = {True: self.pods.labels(applied="true"), False: self.pods.labels(applied="false")}
        self.step = {
            step: self.steps.labels(step)
            for step in ("read_request", "admit", "build_response", "write_response", "total")
        }

    def admission(self, status: Status, resource: ResourceLabel, seconds: float) -> None:
        self._latency[(status, resource)].observe(seconds)

    def admissions(self, status: Status, resource: ResourceLabel) -> int:
        return sum(self._latency[(status, resource)].counts)

    def pod(self, applied: bool) -> None:
        self._pods[applied].inc()
