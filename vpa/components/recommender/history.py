"""The recommender's `--storage=prometheus` bootstrap: usage history from Prometheus into the cluster state.

Owns: `HistorySource` (what the recommender reads history from;
`vpa.kube.historyreading.PrometheusHistoryReader` fits), `PrometheusClientMetrics` (upstream's
`vpa_recommender_prometheus_client_api_requests_count{code,method}` and
`..._duration_seconds{code,method}`, plus our `vpa_recommender_history_load_errors_total{reason}`), and
`load_history`, upstream's `InitFromHistoryProvider` (spec §3.13): every pod is added with its last known
labels and phase `Unknown`, its containers with no requests, and every sample is replayed through the
normal sample path in time order — CPU cores to millicores and memory to bytes by truncation, as
upstream's `CPUAmountFromCores`/`MemoryAmountFromBytes` — so memory peaks per aggregation interval,
decay and the out-of-order rules apply exactly as to live samples.

Must not: read or write checkpoints (upstream uses neither in this mode), raise when Prometheus cannot be
read (the recommender then starts without history, as upstream does), or touch raw API data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vpa.aio.pacing import paced
from vpa.kube.historyreading import ClusterHistory, PrometheusError, RequestObserver
from vpa.logic.recommender.cluster import ClusterState, ContainerId, PodId
from vpa.logic.recommender.numerics import amount_from_float, cpu_amount_from_cores
from vpa.model.resources import Resources

log = structlog.get_logger(__name__)

HISTORY_POD_PHASE: Final = "Unknown"  # upstream adds history pods as apiv1.PodUnknown
# prometheus.DefBuckets, what Go's promhttp instrumentation uses unless told otherwise.
_REQUEST_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HistorySource(Protocol):
    async def read(self, now: float, on_request: RequestObserver | None = None) -> ClusterHistory: ...


class PrometheusClientMetrics:
    """Upstream's Prometheus-client metrics, and a counter of history that could not be (fully) loaded."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # A gauge that only goes up, as `vpa_recommender_metric_server_responses`: upstream's counter name
        # has no `_total`, which prometheus_client would append to a Counter.
        self.requests = Gauge(
            "vpa_recommender_prometheus_client_api_requests_count",
            "Number of requests to a Prometheus API (monotonic).", ["code", "method"], registry=registry)
        self.request_duration = Histogram(
            "vpa_recommender_prometheus_client_api_requests_duration_seconds",
            "Duration of requests to a Prometheus API.", ["code", "method"], buckets=_REQUEST_BUCKETS,
            registry=registry)
        self.load_errors = Counter(
            "vpa_recommender_history_load_errors",
            "History loads from Prometheus that failed (reason: unreachable, tls, http, bad_response, "
            "config, internal) or were incomplete (labels, malformed_series).", ["reason"], registry=registry)

    def observe_request(self, code: str, method: str, seconds: float) -> None:
        self.requests.labels(code=code, method=method).inc()
        self.request_duration.labels(code=code, method=method).observe(seconds)


@dataclass(slots=True)
class HistoryReport:
    """What `load_history` did."""

    pods: int = 0
    containers: int = 0
    samples: int = 0
    samples_skipped: int = 0
    """Samples the cluster state discarded (NaN or negative values, duplicates, out of order)."""
    errors: list[str] = field(default_factory=list)


async def load_history(source: HistorySource | None, cluster: ClusterState, metrics: PrometheusClientMetrics,
                       now: float, *, chunk_budget_s: float = 0.01) -> HistoryReport:
    """Read the history once and feed it into `cluster` (see the module docstring). Never raises for an
    unreadable Prometheus: the error is logged, counted and returned in the report."""
    report = HistoryReport()
    if source is None:
        report.errors.append("no history source configured")
        metrics.load_errors.labels(reason="config").inc()
        log.error("recommender_history_unavailable", reason="config", error=report.errors[0])
        return report
    log.info("recommender_history_loading")
    try:
        history = await source.read(now, metrics.observe_request)
    except PrometheusError as err:
        report.errors.append(str(err))
        metrics.load_errors.labels(reason=err.reason).inc()
        log.error("recommender_history_unavailable", reason=err.reason, error=str(err),
                  detail="starting without history")
        return report
    except Exception as err:
        report.errors.append(str(err))
        metrics.load_errors.labels(reason="internal").inc()
        log.exception("recommender_history_unavailable", reason="internal", detail="starting without history")
        return report
    if history.labels_error is not None:
        report.errors.append(history.labels_error)
        metrics.load_errors.labels(reason="labels").inc()
        log.warning("recommender_history_labels_unavailable", error=history.labels_error,
                    detail="history pods have no labels, so no VPA selector matches them")
    if history.series_skipped:
        report.errors.append(f"{history.series_skipped} series without identifying labels skipped")
        metrics.load_errors.labels(reason="malformed_series").inc()
        log.warning("recommender_history_series_skipped", series=history.series_skipped)

    async for (namespace, name), pod in paced(history.pods.items(), chunk_budget_s):
        pod_id = PodId(namespace, name)
        cluster.add_or_update_pod(pod_id, pod.labels, HISTORY_POD_PHASE, now)
        report.pods += 1
        for container_name, samples in pod.containers.items():
            container_id = ContainerId(pod_id, container_name)
            cluster.add_or_update_container(container_id, Resources(), now)
            report.containers += 1
            for timestamp, cores in samples.cpu_cores:
                if cluster.add_cpu_sample(container_id, cpu_amount_from_cores(cores), timestamp):
                    report.samples += 1
                else:
                    report.samples_skipped += 1
            for timestamp, memory_bytes in samples.memory_bytes:
                if cluster.add_memory_sample(container_id, amount_from_float(memory_bytes), timestamp):
                    report.samples += 1
                else:
                    report.samples_skipped += 1
    log.info("recommender_history_loaded", pods=report.pods, containers=report.containers,
             samples=report.samples, samples_skipped=report.samples_skipped)
    return report
