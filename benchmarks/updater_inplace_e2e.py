"""Benchmark: end-to-end in-place resizes per second, the updater loop against an in-process `vpa sim`.

Builds a simulated cluster (Kubernetes 1.35, enough nodes), N Deployments with P replicas each and one
`InPlaceOrRecreate` VPA per Deployment, the shared pod/VPA watch caches and the updater's own caches, all
over HTTPS on loopback as in production. Then, for each round, every VPA's recommendation changes
(a significant, disruption-free CPU change) and one `Updater.run_once()` is timed: match, LimitRange
capping, plan, and for every pod a `pods/resize` JSON Patch plus the `vpaInPlaceUpdated` merge patch.
Rate limits are off (`--eviction-rate-limit` -1, client QPS unlimited); the simulator runs in the same
process and event loop, so its CPU time is included. Also reported: the longest event-loop stall seen
by a 1 ms ticker during the loop (DESIGN §6 budget: 20 ms), next to the longest cyclic-GC pause in the
same window: with the simulator's store and its 50,000-entry watch history in the same heap, the longest
stalls are generation-2 collections, not the updater's own work.

    python -m benchmarks.updater_inplace_e2e [--vpas 100] [--pods-per-vpa 20] [--rounds 3]
                                             [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import time
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks import run_loop
from vpa.app import logs
from vpa.app.runtime import pod_owner_keys, vpa_target_keys
from vpa.components.context import ComponentContext
from vpa.components.health import HealthState
from vpa.components.updater import Updater
from vpa.kube import converting
from vpa.kube.client import ClientOptions, KubeClient, api_path
from vpa.kube.controllers import ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.watching import WatchCache
from vpa.model.pod import PodView
from vpa.model.settings import RunSettings, UpdaterSettings
from vpa.model.vpa import VpaView
from vpa.sim import SimCluster

VPAS = "verticalpodautoscalers.autoscaling.k8s.io"


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "64Mi"},
                                "limits": {"cpu": "400m", "memory": "128Mi"},
                            },
                        }
                    ]
                },
            },
        },
    }


def _vpa(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
        },
    }


def _recommendation(cpu_millicores: int) -> dict[str, Any]:
    target = {"cpu": f"{cpu_millicores}m", "memory": "64Mi"}
    return {
        "status": {
            "recommendation": {
                "containerRecommendations": [
                    {
                        "containerName": "app",
                        "target": target,
                        "lowerBound": {"cpu": "10m", "memory": "16Mi"},
                        "upperBound": {"cpu": "4", "memory": "1Gi"},
                        "uncappedTarget": target,
                    }
                ]
            }
        }
    }


class StallMonitor:
    """A 1 ms ticker: the longest gap between ticks is the longest event-loop stall."""

    def __init__(self) -> None:
        self.max_gap_s = 0.0
        self.max_gc_s = 0.0
        self._gc_started = 0.0
        self._task: asyncio.Task[None] | None = None

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.max_gc_s = max(self.max_gc_s, time.perf_counter() - self._gc_started)

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.max_gap_s = max(self.max_gap_s, now - last - 0.001)
            last = now

    def start(self) -> None:
        self.max_gap_s = self.max_gc_s = 0.0
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.ensure_future(self._tick())

    async def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _wait_for(predicate: Any, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("caches did not catch up with the simulated cluster")
        await asyncio.sleep(0.01)


async def run(
    vpas: int, pods_per_vpa: int, rounds: int, concurrency: int
) -> list[tuple[int, int, float, float, float]]:
    total = vpas * pods_per_vpa
    nodes = max(3, total // 100 + 1)
    cluster = SimCluster(nodes=nodes, node_cpu="64", node_memory="256Gi", kubernetes_version="1.35")
    await cluster.start()
    clock = cluster.clock
    client = await KubeClient.from_config(
        clock, ClientOptions(qps=0, user_agent="vpa-benchmark"), kubeconfig=str(cluster.kubeconfig_path)
    )
    tasks: list[asyncio.Task[None]] = []
    results: list[tuple[int, int, float, float, float]] = []
    try:
        for i in range(vpas):
            await cluster.store.create("deployments.apps", _deployment(f"app-{i}", pods_per_vpa))
            await cluster.store.create(VPAS, _vpa(f"app-{i}"))
        await cluster.settle()
        pods: WatchCache[PodView] = WatchCache(
            client, clock, api_path("", "v1", "pods"), converting.pod_from_dict, name="pods"
        )
        pods.add_index("namespace", lambda p: [p.namespace])
        pods.add_index("owner", pod_owner_keys)
        vpa_cache: WatchCache[VpaView] = WatchCache(
            client,
            clock,
            api_path("autoscaling.k8s.io", "v1", "verticalpodautoscalers"),
            converting.vpa_from_dict,
            name="vpas",
        )
        vpa_cache.add_index("target", vpa_target_keys)
        controllers = ControllerCaches(client, clock)
        events = EventRecorder(client, clock, component="vpa-updater")
        ctx = ComponentContext(
            settings=RunSettings(updater=UpdaterSettings(use_admission_controller_status=False)),
            client=client,
            clock=clock,
            registry=CollectorRegistry(),
            health=HealthState(clock),
            events=events,
            pods=pods,
            vpas=vpa_cache,
        )
        for coro in (pods.run(), vpa_cache.run(), controllers.run(), events.run()):
            tasks.append(asyncio.ensure_future(coro))
        await asyncio.gather(pods.wait_synced(), vpa_cache.wait_synced(), controllers.wait_synced())
        updater = Updater(ctx, controllers, events=events, concurrency=concurrency)
        monitor = StallMonitor()
        for round_ in range(1, rounds + 1):
            cpu = 100 + 50 * round_
            for i in range(vpas):
                await cluster.store.patch(
                    VPAS, "default", f"app-{i}", "merge", _recommendation(cpu), subresource="status"
                )
            await cluster.settle()

            def synced(cpu: int = cpu) -> bool:
                views = vpa_cache.list()
                running = [p for p in pods.list() if p.phase == "Running"]
                return (
                    len(views) == vpas
                    and all(
                        v.recommendation is not None
                        and v.recommendation.containers[0].target.cpu_millicores == cpu
                        for v in views
                    )
                    and len(running) == total
                )

            await _wait_for(synced)
            monitor.start()
            started = time.perf_counter()
            report = await updater.run_once()
            elapsed = time.perf_counter() - started
            await monitor.stop()
            results.append((round_, len(report.resized), elapsed, monitor.max_gap_s, monitor.max_gc_s))
            steps = {
                step: ctx.registry.get_sample_value(
                    "vpa_updater_execution_latency_seconds_sum", {"step": step}
                )
                for step in ("ListVPAs", "ListPods", "FilterPods", "EvictPods", "total")
            }
            print(
                f"round {round_}: seconds per step, cumulative:",
                {k: round(v or 0.0, 3) for k, v in steps.items()},
            )
            await cluster.settle()

            def actuated(cpu: int = cpu) -> bool:
                return all(
                    (actual := p.container_statuses[0].actual_requests) is not None
                    and actual.cpu_millicores == cpu
                    for p in pods.list()
                )

            await _wait_for(actuated)
        return results
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await client.close()
        await cluster.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.updater_inplace_e2e", description=__doc__)
    parser.add_argument("--vpas", type=int, default=100)
    parser.add_argument("--pods-per-vpa", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    # Production logging (v=4, JSON: one line per resize) into a sink, so its cost is counted, not shown.
    with open(os.devnull, "w") as sink:
        logs.configure(v=4, log_format="json", stream=sink)
        results = run_loop(run(args.vpas, args.pods_per_vpa, args.rounds, args.concurrency))
    print(
        f"updater in-place e2e: {args.vpas} VPAs × {args.pods_per_vpa} pods, concurrency {args.concurrency}"
    )
    print(
        f"{'round':>5} {'resized':>8} {'loop s':>8} {'resizes/s':>10} {'max stall ms':>13} {'max gc ms':>10}"
    )
    for round_, resized, elapsed, stall, gc_pause in results:
        print(
            f"{round_:>5} {resized:>8} {elapsed:>8.2f} {resized / elapsed:>10.0f} {stall * 1000:>13.1f} "
            f"{gc_pause * 1000:>10.1f}"
        )
    expected = args.vpas * args.pods_per_vpa
    return 0 if all(row[1] == expected for row in results) else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
