"""The recommender as `vpa run` starts it: built by the runtime from its shared objects, on the sim clock."""

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


async def test_vpa_run_recommends_on_the_simulated_clock() -> None:
    async with SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
        await cluster.store.create("deployments.apps", deployment("web", STEADY))
        await cluster.store.create(VPAS, vpa("web"))
        await cluster.settle()
        settings = parse_run_args(
            [f"--kubeconfig={cluster.kubeconfig_path}", "--address=127.0.0.1:0", "--clock=sim",
             "--components=recommender", "--recommender-interval=1m"],
            env={"NAMESPACE": "kube-system"},
        )
        runtime = Runtime(settings, components=build_components(settings))
        task = asyncio.create_task(runtime.run(install_signal_handlers=False))
        try:
            deadline = time.monotonic() + 20
            status: dict[str, object] = {}
            while not status.get("recommendation"):
                assert time.monotonic() < deadline, "no recommendation written"
                assert not task.done(), task
                # Virtual minutes pass; the runtime's sim clock follows within its 1 s resync.
                await cluster.advance(60)
                await asyncio.sleep(0.2)
                status = (cluster.store.get(VPAS, "default", "web") or {}).get("status") or {}
            assert runtime.health_server is not None
            url = f"http://127.0.0.1:{runtime.health_server.port}"
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{url}/metrics") as resp:
                    metrics = await resp.text()
                async with http.get(f"{url}/healthz") as resp:
                    assert resp.status == 200
            assert 'vpa_recommender_execution_latency_seconds_count{step="UpdateVPAs"}' in metrics
            assert 'vpa_recommender_metric_server_responses{client_name="default-metrics-client",' \
                   'is_error="false"}' in metrics
            assert "# TYPE vpa_recommender_metric_server_responses counter\n" in metrics
            assert "vpa_quality_usage_sample_missing_recommendation_count{" in metrics
            assert cluster.store.get("verticalpodautoscalercheckpoints.autoscaling.k8s.io", "default",
                                     "web-app") is not None
        finally:
            runtime.stop_event.set()
            assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0


async def test_vpa_run_hosts_two_named_recommenders() -> None:
    async with SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
        for name, recommenders in (("web", None), ("fast", ["performance"])):
            await cluster.store.create("deployments.apps", deployment(name, STEADY))
            await cluster.store.create(VPAS, vpa(name, recommenders=recommenders))
        await cluster.settle()
        settings = parse_run_args(
            [f"--kubeconfig={cluster.kubeconfig_path}", "--address=127.0.0.1:0", "--clock=sim",
             "--components=recommender", "--recommender-interval=1m",
             "--recommender-name=default,performance",
             "--recommender-overrides=performance:recommendation-margin-fraction=0.3"],
            env={"NAMESPACE": "kube-system"},
        )
        components = build_components(settings)
        # One component, so one Lease with --leader-elect (not used here: the sim clock outruns renewals).
        assert [(spec.name, spec.lease and spec.lease.resource_name) for spec in components] == [
            ("recommender", "vpa-recommender-lease")]
        runtime = Runtime(settings, components=components)
        task = asyncio.create_task(runtime.run(install_signal_handlers=False))
        try:
            deadline = time.monotonic() + 20
            targets: dict[str, str] = {}
            while len(targets) < 2:
                assert time.monotonic() < deadline, f"recommendations missing: {targets}"
                assert not task.done(), task
                await cluster.advance(60)
                await asyncio.sleep(0.2)
                for name in ("web", "fast"):
                    status = (cluster.store.get(VPAS, "default", name) or {}).get("status") or {}
                    recs = (status.get("recommendation") or {}).get("containerRecommendations") or []
                    if recs:
                        targets[name] = recs[0]["target"]["cpu"]
            assert targets == {"web": "587m", "fast": "664m"}  # 511m plus 15 % or 30 %
        finally:
            runtime.stop_event.set()
            assert await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2) == 0
