"""Benchmark: virtual time from an OOM kill to the in-place memory increase, and from a recommendation change
to the in-place resize, with and without the reactive passes (`--recommend-on-oom`,
`--in-place-on-recommendation`).

Each scenario runs the real `vpa run` runtime in-process (components recommender and updater, or the
updater alone) against an in-process `vpa sim` (Kubernetes 1.35, node agent on) over HTTPS on loopback,
both on the simulator's virtual clock, which the benchmark steps (0.1 s steps around the event, with a
little real time after each step for the API calls and watches to land). Latencies are therefore virtual
time: the designed delays (reaction delays, ticks), not CPU time; the step is the resolution.

- OOM: one Deployment whose container uses 200Mi, then spikes to 800Mi 4.5 min after the simulation starts,
  above its limit (512Mi, or the VPA's proportional limit by then), so the kubelet OOM-kills it: a "quick
  OOM" (within 10 min of the container's start), which upstream's updater acts on at once; an
  `InPlaceOrRecreate` VPA. Measured: from the virtual second the OOM kill shows in the pod status to the
  one where the pod's memory request went up (the `pods/resize` patch landed).
- Recommendation: the updater alone; the VPA's recommendation (written as a recommender would) moves CPU
  far out of the current bounds 17 s after an updater loop. Measured: from the status write to the resize.

    python -m benchmarks.reactive_inplace [--runs 1] [--baseline]

`--baseline` also runs each scenario with the reactive flags off (tick-driven, as upstream): slower,
since up to two minutes of virtual time pass in fine steps.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from vpa.app import build_components, logs
from vpa.app.runtime import SHUTDOWN_BUDGET_S, Runtime
from vpa.flags.commands import parse_run_args
from vpa.model import quantity
from vpa.sim import SimCluster
from vpa.sim.cluster.profiles import ANNOTATION

VPAS = "verticalpodautoscalers.autoscaling.k8s.io"
TARGET_S = 5.0
FINE_STEP_S = 0.1
REAL_PER_STEP_S = 0.02


@dataclass(frozen=True)
class Outcome:
    scenario: str
    reactive: bool
    latency_s: float | None  # None: not seen within the limit


def _deployment(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {ANNOTATION: json.dumps(usage)}},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"},
                                  "limits": {"cpu": "1", "memory": "512Mi"}},
                }]},
            },
        },
    }


def _vpa(status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "updatePolicy": {"updateMode": "InPlaceOrRecreate"}},
    }
    if status is not None:
        obj["status"] = status
    return obj


def _recommendation(cpu: str, lower: str, upper: str, memory: str = "256Mi") -> dict[str, Any]:
    def res(c: str) -> dict[str, str]:
        return {"cpu": c, "memory": memory}

    return {"recommendation": {"containerRecommendations": [{
        "containerName": "app", "target": res(cpu), "lowerBound": res(lower), "upperBound": res(upper),
        "uncappedTarget": res(cpu)}]}}


def _pod(cluster: SimCluster) -> dict[str, Any] | None:
    pods = [p for p in cluster.store.list("pods") if not p["metadata"].get("deletionTimestamp")]
    return pods[0] if pods else None


def _request(pod: dict[str, Any] | None, resource: str) -> int:
    if pod is None:
        return 0
    text = pod["spec"]["containers"][0]["resources"]["requests"][resource]
    return quantity.cpu_millicores(text) if resource == "cpu" else quantity.memory_bytes(text)


def _oom_killed(pod: dict[str, Any] | None) -> bool:
    if pod is None:
        return False
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("lastState") or {}).get("terminated") or {}
        if terminated.get("reason") == "OOMKilled":
            return True
    return False


@contextlib.asynccontextmanager
async def _running(cluster: SimCluster, flags: list[str]) -> AsyncIterator[Runtime]:
    """`vpa run` in this process, on the simulator's virtual clock."""
    settings = parse_run_args(
        [f"--kubeconfig={cluster.kubeconfig_path}", "--address=127.0.0.1:0", "--leader-elect=false",
         "--use-admission-controller-status=false", "--recommender-interval=1m", "--updater-interval=1m",
         *flags],
        env={"NAMESPACE": "kube-system"},
    )
    runtime = Runtime(settings, components=build_components(settings))
    runtime.clock = cluster.clock  # one virtual clock for the cluster and the autoscaler
    task = asyncio.create_task(runtime.run(install_signal_handlers=False))
    try:
        await asyncio.sleep(0.5)
        if task.done():
            raise RuntimeError(f"vpa run stopped: {task.result()}")
        yield runtime
    finally:
        runtime.stop_event.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=SHUTDOWN_BUDGET_S + 2)


async def _step(cluster: SimCluster, seconds: float, step_s: float) -> None:
    steps = max(1, round(seconds / step_s))
    for _ in range(steps):
        await cluster.advance(seconds / steps)
        await asyncio.sleep(REAL_PER_STEP_S)


async def _until(cluster: SimCluster, done: Callable[[], bool], limit_s: float,
                 step_s: float) -> float | None:
    """Step the clock until `done()`; the virtual seconds it took, or None after `limit_s`."""
    start = cluster.clock.now()
    while cluster.clock.now() - start < limit_s:
        if done():
            return cluster.clock.now() - start
        await _step(cluster, step_s, step_s)
    return None


def _reactive_flags(reactive: bool) -> list[str]:
    value = "true" if reactive else "false"
    return [f"--recommend-on-oom={value}", f"--in-place-on-recommendation={value}"]


async def oom_to_resize(reactive: bool, limit_s: float = 150.0) -> Outcome:
    """Virtual seconds from the OOM kill showing in the pod status to the memory request going up."""
    usage = {"app": {"cpu": {"type": "constant", "value": "300m"},
                     "memory": {"type": "spikes", "base": "200Mi", "height": "600Mi", "period_s": 3600,
                                "duration_s": 30, "offset_s": 270}}}
    async with SimCluster(nodes=1, node_cpu="4", node_memory="16Gi", kubernetes_version="1.35") as cluster:
        await cluster.store.create("deployments.apps", _deployment(usage))
        await cluster.store.create(VPAS, _vpa())
        await cluster.settle()
        async with _running(cluster, ["--components=recommender,updater", *_reactive_flags(reactive)]):
            # Coarse steps until just before the spike (270 s after the clock's start, half-way between
            # two ticks), then fine ones.
            await _step(cluster, 255.0, 1.0)
            seen = await _until(cluster, lambda: _oom_killed(_pod(cluster)), 120.0, FINE_STEP_S)
            if seen is None:
                raise RuntimeError("the container was never OOM-killed")
            before = _request(_pod(cluster), "memory")
            latency = await _until(cluster, lambda: _request(_pod(cluster), "memory") > before, limit_s,
                                   FINE_STEP_S)
            return Outcome("OOM kill → in-place memory increase", reactive, latency)


async def recommendation_to_resize(reactive: bool, limit_s: float = 90.0) -> Outcome:
    """Virtual seconds from a recommendation change (status write) to the in-place resize."""
    usage = {"app": {"cpu": {"type": "constant", "value": "300m"},
                     "memory": {"type": "constant", "value": "200Mi"}}}
    async with SimCluster(nodes=1, node_cpu="4", node_memory="16Gi", kubernetes_version="1.35") as cluster:
        await cluster.store.create("deployments.apps", _deployment(usage))
        await cluster.store.create(VPAS, _vpa(_recommendation("500m", "400m", "700m")))
        await cluster.settle()
        async with _running(cluster, ["--components=updater", *_reactive_flags(reactive)]):
            # The first updater loop (60 s after start) finds the pod in bounds; 17 s later the
            # recommendation moves far above them.
            await _step(cluster, 77.0, 1.0)
            before = _request(_pod(cluster), "cpu")
            vpa = cluster.store.get(VPAS, "default", "web")
            assert vpa is not None
            vpa = json.loads(json.dumps(vpa))
            vpa["status"] = _recommendation("2", "1500m", "3")
            await cluster.store.update(VPAS, vpa, subresource="status")
            latency = await _until(cluster, lambda: _request(_pod(cluster), "cpu") != before, limit_s,
                                   FINE_STEP_S)
            return Outcome("recommendation change → in-place resize", reactive, latency)


async def run(runs: int, baseline: bool) -> list[Outcome]:
    outcomes = []
    for reactive in (True, False) if baseline else (True,):
        for _ in range(runs):
            outcomes.append(await recommendation_to_resize(reactive))
            outcomes.append(await oom_to_resize(reactive))
    return outcomes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reactive_inplace", description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", action="store_true", help="also run with the reactive flags off")
    args = parser.parse_args(argv)
    with open(os.devnull, "w") as sink:
        logs.configure(v=2, log_format="json", stream=sink)
        outcomes = asyncio.run(run(args.runs, args.baseline))
    print(f"reactive in-place updates (virtual time, {FINE_STEP_S} s resolution; target < {TARGET_S} s "
          f"with default flags)")
    print(f"{'scenario':<42} {'flags':<10} {'latency s':>10}")
    ok = True
    for outcome in outcomes:
        latency = "not seen" if outcome.latency_s is None else f"{outcome.latency_s:.1f}"
        print(f"{outcome.scenario:<42} {'reactive' if outcome.reactive else 'tick only':<10} {latency:>10}")
        if outcome.reactive and (outcome.latency_s is None or outcome.latency_s >= TARGET_S):
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
