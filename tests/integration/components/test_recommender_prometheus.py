"""`--storage=prometheus`: the recommender bootstraps from a fake Prometheus API instead of checkpoints.

A simulated workload runs; the fake Prometheus holds 8 days of hourly history for its pod (labels as a
`pod_label_` series). After `restore()` and one loop, the VPA's recommendation is what the pure core
gives for the same samples (and the CPU target is the hand-derived 587m of 0.5 cores); no checkpoint is
written. An unreachable Prometheus is logged and counted, and the recommender still runs. And `vpa run`
with the Prometheus flags and environment reads history as they say.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from typing import Any

import aiohttp
from structlog.testing import capture_logs

from tests.integration.components.recommender_helpers import (
    CHECKPOINTS,
    MI,
    VPAS,
    create,
    deployment,
    harness,
    settings,
    vpa,
)
from tests.integration.components.test_recommender import STEADY, expected, written
from tests.integration.prometheus_fake import FakePrometheus, Series, serve
from vpa.app import build_components
from vpa.app.runtime import SHUTDOWN_BUDGET_S, Runtime
from vpa.flags.commands import parse_run_args
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.model.quantity import Quantity
from vpa.model.settings import PrometheusSettings, RecommenderSettings
from vpa.sim import SimCluster

CPU_QUERY = ('rate(container_cpu_usage_seconds_total{job="kubernetes-cadvisor", pod_name=~".+", '
             'name!="POD", name!=""}[1h])')
MEMORY_QUERY = ('container_memory_working_set_bytes{job="kubernetes-cadvisor", pod_name=~".+", name!="POD", '
                'name!=""}')
LABELS_QUERY = 'up{job="kubernetes-pods"}'
HISTORY_MEMORY_BYTES = 600 * MI  # the live workload uses 200Mi: a memory target above 250Mi is history's


def prometheus_flags(address: str, **overrides: Any) -> RecommenderSettings:
    return settings(storage="prometheus",
                    prometheus=dataclasses.replace(PrometheusSettings(address=address), **overrides))


async def test_history_from_prometheus_shapes_the_first_recommendation_and_no_checkpoint_is_written() -> None:
    fake = FakePrometheus()
    async with serve(fake), harness(prometheus_flags(fake.url)) as h:
        await create(h, "deployments.apps", deployment("steady", STEADY))
        await create(h, VPAS, vpa("steady"))
        [pod] = h.cluster.store.list("pods", "default")
        pod_name, labels = pod["metadata"]["name"], pod["metadata"]["labels"]
        cadvisor = {"namespace": "default", "pod_name": pod_name, "name": "app", "job": "kubernetes-cadvisor"}
        fake.range_series = {CPU_QUERY: [Series(cadvisor, lambda t: 0.5)],
                             MEMORY_QUERY: [Series(cadvisor, lambda t: float(HISTORY_MEMORY_BYTES))]}
        fake.instant_series = {LABELS_QUERY: [Series(
            {"kubernetes_namespace": "default", "kubernetes_pod_name": pod_name,
             **{f"pod_label_{k}": v for k, v in labels.items()}}, lambda t: 1.0)]}

        restore_at = h.cluster.clock.now()
        restored = await h.rec.restore()
        history_times = [restore_at - 8 * 86400 + i * 3600 for i in range(8 * 24 + 1)]
        assert (restored.loaded, restored.skipped, restored.errors) == (2 * len(history_times), 0, [])
        assert [(r.method, r.path) for r in fake.requests] == [
            ("POST", "/api/v1/query_range"), ("POST", "/api/v1/query_range"), ("POST", "/api/v1/query")]
        assert h.metric("vpa_recommender_prometheus_client_api_requests_count", code="200",
                        method="post") == 3
        assert h.metric("vpa_recommender_prometheus_client_api_requests_duration_seconds_count",
                        code="200", method="post") == 3

        await h.cluster.advance(300)
        report = await h.loop()
        assert report.samples == 2  # the live sample on top of the history
        container = h.rec.core.cluster.container_state(ContainerId(PodId("default", pod_name), "app"))
        live_at = container.last_cpu_sample_start
        assert live_at is not None
        assert live_at > restore_at

        got = written(h.vpa("steady"))
        trace = [(t, 500, HISTORY_MEMORY_BYTES) for t in history_times] + [(live_at, 500, 200 * MI)]
        assert got == expected(trace, h.settings)
        # Hand-derived as in test_recommender: 0.5 cores → P90 511m + 15 % margin = 587m.
        assert got.containers[0].target.cpu_millicores == 587
        target_memory = got.containers[0].target.memory_bytes
        assert target_memory is not None
        assert target_memory > HISTORY_MEMORY_BYTES  # history's peaks, not the 250Mi floor of 200Mi live

        reports = [report, *await h.run_for(3 * 3600, 600)]
        assert all("MaintainCheckpoints" not in r.step_seconds for r in reports)
        assert all(r.checkpoints_written == 0 for r in reports)
        assert h.cluster.store.list(CHECKPOINTS, "default") == []
        assert h.metric("vpa_recommender_execution_latency_seconds_count", step="MaintainCheckpoints") == 0


async def test_an_unreachable_prometheus_is_logged_and_counted_and_the_recommender_runs_on() -> None:
    fake = FakePrometheus()
    async with serve(fake):
        address = fake.url  # closed once the fake stops
    # A short query timeout: the first refused connection leaves no time for a retry.
    async with harness(prometheus_flags(address, query_timeout_s=0.5)) as h:
        await create(h, "deployments.apps", deployment("steady", STEADY))
        await create(h, VPAS, vpa("steady"))
        with capture_logs() as logs:
            restored = await h.rec.restore()
        assert restored.loaded == 0
        assert len(restored.errors) == 1
        [event] = [e for e in logs if e["event"] == "recommender_history_unavailable"]
        assert event["reason"] == "unreachable"
        assert event["log_level"] == "error"
        assert h.metric("vpa_recommender_history_load_errors_total", reason="unreachable") == 1

        await h.loop()
        await h.run_for(1800, 300)
        assert written(h.vpa("steady")).containers[0].target.cpu_millicores == 587
        assert h.cluster.store.list(CHECKPOINTS, "default") == []


async def test_vpa_run_with_storage_prometheus_reads_history_as_the_flags_say() -> None:
    """Flags and environment → settings → the reader: custom label flags, the namespace filter, basic auth
    from `$PROMETHEUS_USERNAME`/`$PROMETHEUS_PASSWORD`; the metrics on `/metrics`; no checkpoint."""
    fake = FakePrometheus()
    async with serve(fake), SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
        await cluster.store.create("deployments.apps", deployment("web", STEADY))
        await cluster.store.create(VPAS, vpa("web"))
        await cluster.settle()
        [pod] = cluster.store.list("pods", "default")
        pod_name, labels = pod["metadata"]["name"], pod["metadata"]["labels"]
        selector = 'job="cadvisor", pod=~".+", container!="POD", container!="", namespace="default"'
        cadvisor = {"namespace": "default", "pod": pod_name, "container": "app"}
        fake.range_series = {
            f"rate(container_cpu_usage_seconds_total{{{selector}}}[30m])": [Series(cadvisor, lambda t: 0.5)],
            f"container_memory_working_set_bytes{{{selector}}}": [
                Series(cadvisor, lambda t: float(HISTORY_MEMORY_BYTES))],
        }
        fake.instant_series = {"kube_pod_labels": [Series(
            {"namespace": "default", "pod": pod_name, **{f"label_{k}": v for k, v in labels.items()}},
            lambda t: 1.0)]}
        settings = parse_run_args(
            [f"--kubeconfig={cluster.kubeconfig_path}", "--address=127.0.0.1:0", "--clock=sim",
             "--components=recommender", "--recommender-interval=1m", "--storage=prometheus",
             f"--prometheus-address={fake.url}", "--prometheus-cadvisor-job-name=cadvisor",
             "--history-length=1d", "--history-resolution=30m", "--vpa-object-namespace=default",
             "--container-namespace-label=namespace", "--container-pod-name-label=pod",
             "--container-name-label=container", "--metric-for-pod-labels=kube_pod_labels",
             "--pod-label-prefix=label_", "--pod-namespace-label=namespace", "--pod-name-label=pod"],
            env={"NAMESPACE": "kube-system", "PROMETHEUS_USERNAME": "alice", "PROMETHEUS_PASSWORD": "pw"},
        )
        runtime = Runtime(settings, components=build_components(settings))
        task = asyncio.create_task(runtime.run(install_signal_handlers=False))
        try:
            deadline = time.monotonic() + 20
            status: dict[str, Any] = {}
            while not status.get("recommendation"):
                assert time.monotonic() < deadline, f"no recommendation written; requests: {fake.requests}"
                assert not task.done(), task
                await cluster.advance(60)
                await asyncio.sleep(0.2)
                status = (cluster.store.get(VPAS, "default", "web") or {}).get("status") or {}
            [rec] = status["recommendation"]["containerRecommendations"]
            assert rec["target"]["cpu"] == "587m"
            assert Quantity.parse(rec["target"]["memory"]).value > HISTORY_MEMORY_BYTES  # history's peaks
            assert [r.path for r in fake.requests] == ["/api/v1/query_range", "/api/v1/query_range",
                                                       "/api/v1/query"]
            assert {r.authorization for r in fake.requests} == {
                "Basic " + base64.b64encode(b"alice:pw").decode()}
            assert {r.params["step"] for r in fake.requests if "step" in r.params} == {"1800"}
            assert runtime.health_server is not None
            url = f"http://127.0.0.1:{runtime.health_server.port}"
            async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as resp:
                metrics = await resp.text()
            requests = 'vpa_recommender_prometheus_client_api_requests_count{code="200",method="post"} 3.0'
            assert requests in metrics
            assert cluster.store.list(CHECKPOINTS, "default") == []
        finally:
            runtime.stop_event.set()
            assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0
