"""`load_history`: how history read from Prometheus lands in the cluster state (upstream's
InitFromHistoryProvider), and how failures are reported — with a fake source, no HTTP."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from vpa.components.recommender.history import PrometheusClientMetrics, load_history
from vpa.kube.historyreading import (
    ClusterHistory,
    ContainerHistory,
    PodHistory,
    PrometheusError,
    RequestObserver,
)
from vpa.logic.recommender.cluster import ClusterState, ContainerId, PodId
from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.selector import Selector
from vpa.model.vpa import VpaView

NOW = 1_700_000_000.0
HOUR = 3600.0


class Source:
    def __init__(self, history: ClusterHistory | Exception) -> None:
        self.history = history
        self.reads: list[float] = []

    async def read(self, now: float, on_request: RequestObserver | None = None) -> ClusterHistory:
        self.reads.append(now)
        if on_request is not None:
            on_request("200", "post", 0.01)
        if isinstance(self.history, Exception):
            raise self.history
        return self.history


def setup() -> tuple[ClusterState, PrometheusClientMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    return ClusterState(RecommenderConfig().aggregation), PrometheusClientMetrics(registry), registry


async def test_samples_are_replayed_with_upstreams_conversions_and_rules() -> None:
    cluster, metrics, registry = setup()
    times = [NOW - 3 * HOUR + i * HOUR for i in range(4)]
    history = ClusterHistory(pods={
        ("default", "web-1"): PodHistory(
            labels={"app": "web"}, labels_seen_s=NOW,
            containers={"app": ContainerHistory(
                # 0.2509 cores truncates to 250m; NaN (e.g. a counter reset) is rejected as upstream's
                # NaN-to-int64 gives a negative amount; a repeated time is rejected (not strictly newer).
                cpu_cores=[(times[0], 0.2509), (times[1], math.nan), (times[2], 0.5), (times[2], 0.7)],
                memory_bytes=[(t, 1e9 + 0.9) for t in times])}),
        ("default", "labels-only"): PodHistory(labels={"app": "web"}),
    })
    report = await load_history(Source(history), cluster, metrics, NOW)
    assert (report.pods, report.containers, report.samples, report.samples_skipped) == (2, 1, 6, 2)
    assert report.errors == []

    web = ContainerId(PodId("default", "web-1"), "app")
    state = cluster.container_state(web)
    assert state.last_cpu_sample_start == times[2]
    assert state.last_memory_sample_start == times[3]
    assert state.memory_peak == 1_000_000_000  # bytes truncated
    assert state.request_cpu_millicores is None  # history containers have no requests
    assert state.request_memory_bytes is None
    cluster.add_or_update_vpa(VpaView("default", "web"), Selector.from_match_labels({"app": "web"}))
    assert cluster.matching_pod_count("default", "web") == 2  # labels let the VPA match: phase Unknown
    [aggregate] = cluster.merged_states("default", "web").values()
    assert aggregate.total_samples_count == 2  # 250m and 500m
    assert registry.get_sample_value("vpa_recommender_prometheus_client_api_requests_count",
                                     {"code": "200", "method": "post"}) == 1


async def test_an_unreadable_prometheus_is_logged_counted_and_leaves_the_state_empty() -> None:
    cluster, metrics, registry = setup()
    with capture_logs() as logs:
        report = await load_history(Source(PrometheusError("unreachable", "connection refused")), cluster,
                                    metrics, NOW)
    assert report.errors == ["connection refused"]
    assert list(cluster.pod_ids()) == []
    assert [(e["event"], e["log_level"], e["reason"]) for e in logs
            if e["event"] == "recommender_history_unavailable"] == [
        ("recommender_history_unavailable", "error", "unreachable")]
    assert registry.get_sample_value("vpa_recommender_history_load_errors_total",
                                     {"reason": "unreachable"}) == 1


async def test_an_unexpected_error_does_not_escape() -> None:
    cluster, metrics, registry = setup()
    with capture_logs():
        report = await load_history(Source(RuntimeError("boom")), cluster, metrics, NOW)
    assert report.errors == ["boom"]
    assert registry.get_sample_value("vpa_recommender_history_load_errors_total", {"reason": "internal"}) == 1


async def test_partial_history_is_loaded_and_its_gaps_counted() -> None:
    cluster, metrics, registry = setup()
    history = ClusterHistory(
        pods={("default", "p"): PodHistory(containers={"app": ContainerHistory(cpu_cores=[(NOW, 0.1)])})},
        series_skipped=2, labels_error="pod labels: expected a matrix or vector result, got 'scalar'")
    with capture_logs() as logs:
        report = await load_history(Source(history), cluster, metrics, NOW)
    assert report.samples == 1
    assert len(report.errors) == 2
    assert {e["event"] for e in logs} >= {"recommender_history_labels_unavailable",
                                          "recommender_history_series_skipped", "recommender_history_loaded"}
    for reason in ("labels", "malformed_series"):
        assert registry.get_sample_value("vpa_recommender_history_load_errors_total", {"reason": reason}) == 1


async def test_no_source_is_a_config_error() -> None:
    cluster, metrics, registry = setup()
    with capture_logs():
        report = await load_history(None, cluster, metrics, NOW)
    assert report.errors == ["no history source configured"]
    assert registry.get_sample_value("vpa_recommender_history_load_errors_total", {"reason": "config"}) == 1
