"""`vpa run --recommendation-metrics` against a simulated cluster: the gauges on /metrics, the series
bound, and series that go away with their VPA."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tests.integration.components.recommender_helpers import VPAS, deployment, vpa
from tests.integration.components.test_recommender import STEADY
from vpa.app import build_components
from vpa.app.runtime import SHUTDOWN_BUDGET_S, Runtime
from vpa.flags.commands import parse_run_args
from vpa.sim import SimCluster

SERIES_PER_CONTAINER = 12  # 6 gauges × (cpu, memory)


def _status(cpu: str, memory: str) -> dict[str, object]:
    bounds = {"cpu": cpu, "memory": memory}
    return {"status": {"recommendation": {"containerRecommendations": [
        {"containerName": "app", "target": bounds, "lowerBound": bounds, "upperBound": bounds,
         "uncappedTarget": bounds}]}}}


async def _scrape(runtime: Runtime) -> str:
    assert runtime.health_server is not None
    url = f"http://127.0.0.1:{runtime.health_server.port}/metrics"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return await resp.text()


async def test_recommendation_gauges_their_bound_and_their_end() -> None:
    async with SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
        for name in ("a-web", "b-api"):
            await cluster.store.create("deployments.apps", deployment(name, STEADY, replicas=2))
            await cluster.store.create(VPAS, vpa(name))
        await cluster.settle()
        for name, target in (("a-web", "200m"), ("b-api", "300m")):
            await cluster.store.patch(VPAS, "default", name, "merge", _status(target, "128Mi"),
                                      subresource="status")
        settings = parse_run_args(
            [f"--kubeconfig={cluster.kubeconfig_path}", "--address=127.0.0.1:0", "--components=updater",
             "--recommendation-metrics", f"--recommendation-metrics-max-series={SERIES_PER_CONTAINER + 5}"],
            env={"NAMESPACE": "kube-system"},
        )
        runtime = Runtime(settings, components=build_components(settings))
        task = asyncio.create_task(runtime.run(install_signal_handlers=False))
        try:
            deadline = time.monotonic() + 20
            metrics = ""
            while 'state="exported"} 12.0' not in metrics:
                assert time.monotonic() < deadline, metrics[-3000:]
                assert not task.done(), task
                await asyncio.sleep(0.1)
                metrics = await _scrape(runtime)
            web = ('namespace="default",resource="cpu",target_kind="Deployment",target_name="a-web",'
                   'unit="core",vpa="a-web"')
            assert f'vpa_recommendation_target{{container="app",{web}}} 0.2' in metrics
            assert f'vpa_container_requests{{container="app",{web}}} 0.5' in metrics
            assert f'vpa_container_limits{{container="app",{web}}} 4.0' in metrics
            assert ('vpa_recommendation_upper_bound{container="app",namespace="default",resource="memory",'
                    'target_kind="Deployment",target_name="a-web",unit="byte",vpa="a-web"} 1.34217728e+08'
                    in metrics)
            # The bound: b-api's container would pass it, so all of its 12 series are left out and counted.
            assert 'vpa="b-api"' not in metrics
            assert 'vpa_recommendation_metrics_series{state="dropped"} 12.0' in metrics
            assert "vpa_recommendation_metrics_dropped_series_total 12.0" in metrics or \
                   "vpa_recommendation_metrics_dropped_series_total 24.0" in metrics  # one or two refreshes

            await cluster.store.delete(VPAS, "default", "a-web")
            deadline = time.monotonic() + 10
            while 'vpa="a-web"' in metrics:
                assert time.monotonic() < deadline, "series of a deleted VPA are still exported"
                await asyncio.sleep(0.05)
                metrics = await _scrape(runtime)
        finally:
            runtime.stop_event.set()
            assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0


def test_recommendation_metrics_flags() -> None:
    assert parse_run_args([], {}).recommendation_metrics is False
    settings = parse_run_args(["--recommendation-metrics", "--recommendation-metrics-max-series=50"], {})
    assert (settings.recommendation_metrics, settings.recommendation_metrics_max_series) == (True, 50)
    assert [spec.name for spec in build_components(settings)][-1] == "recommendation-metrics"
    assert "recommendation-metrics" not in [spec.name for spec in build_components(parse_run_args([], {}))]
