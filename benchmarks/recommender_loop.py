"""Benchmark: the live recommender's `run_once` over 10,000 VPAs / 50,000 containers, in memory.

Run: `python -m benchmarks.recommender_loop [--vpas N] [--containers-per-pod N] [--history-step-s S]`.

Setup: N Deployments, each with one Running pod of `containers-per-pod` containers and one VPA (default
10,000 × 5 = 50,000 containers, DESIGN §10). The real `Recommender` runs on in-memory inputs: pod and VPA
views as the watch caches hold them, a PodMetrics source that answers one sample per container per
loop, a resolver that knows every target, and status/checkpoint sinks that only count (API writes and
their throttling are excluded, as DESIGN §10 says). A day of history is fed through the real
`ClusterState` sample path first (one CPU and one memory sample per container every `history-step-s`,
default 30 min, per-container levels on a daily sine), then the loop is timed: the first loop (which adds
every pod), then steady loops (new samples, every status changed and written, checkpoints for every VPA
because the sink never makes the deadline pass). A concurrent ticker measures the longest event-loop
stall, which DESIGN §6 bounds at 20 ms. `--gc runtime` (the default) applies the process's GC policy as
`vpa run` does (`vpa.aio.heap`: startup objects frozen after the initial sync, full collections only on
their hourly schedule); `--gc default` leaves CPython's automatic full collections on, for comparison.

Memory: process RSS after setup minus RSS before building anything, per tracked container (the views the
watch caches would hold are included).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import resource
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks import LoopTicker, Stall, run_loop
from vpa.aio.heap import HeapKeeper
from vpa.components.recommender import Recommender
from vpa.kube.client import JsonObj
from vpa.kube.metricsreading import ContainerUsage, MetricsRead, PodUsage
from vpa.kube.targets import Resolution
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.model.clock import VirtualClock
from vpa.model.pod import ContainerView, OwnerRef, PodView
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import TargetRef, UpdateMode, UpdatePolicy, VpaStatus, VpaView

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MIB = 1024 * 1024
DAY = 86_400.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


class Listing:
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def list(self) -> list[Any]:
        return list(self.items)

    def on_update(self, handler: Callable[[Any, Any], None]) -> None:
        pass


class Metrics:
    client_name = "benchmark"

    def __init__(self, pods: list[PodView], clock: VirtualClock) -> None:
        self.pods = pods
        self.clock = clock

    def level(self, index: int) -> tuple[int, int]:
        return 20 + (index % 97) * 13, (64 + (index % 89) * 11) * MIB

    async def read(self) -> MetricsRead:
        t = self.clock.now()
        phase = 1.2 + math.sin(2 * math.pi * (t % DAY) / DAY)
        out = []
        slice_started = time.perf_counter()
        for index, pod in enumerate(self.pods):
            cpu, memory = self.level(index)
            used = [ContainerUsage(c.name, int(cpu * phase), int(memory * (0.9 + 0.1 * phase)))
                    for c in pod.containers]
            out.append(PodUsage(pod.namespace, pod.name, t, tuple(used)))
            if time.perf_counter() - slice_started >= 0.003:  # as the real reader's 3 ms slices
                await asyncio.sleep(0)
                slice_started = time.perf_counter()
        return MetricsRead(out)


class Resolver:
    def __init__(self, selectors: Mapping[tuple[str, str], Selector]) -> None:
        self.selectors = selectors

    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution:
        assert target is not None
        return Resolution(self.selectors[(namespace, target.name)])

    def forget_unused(self) -> None:
        pass


class Sink:
    def __init__(self) -> None:
        self.statuses = 0
        self.checkpoints = 0
        self.vpas = Listing([])
        """The VPA views the recommender reads (set by `build`)."""

    async def write(self, *args: Any) -> None:
        if len(args) == 3:
            self.statuses += 1
        else:
            self.checkpoints += 1

    async def list(self) -> list[JsonObj]:
        return []

    async def delete(self, namespace: str, name: str) -> None:
        pass


async def timed_loop(recommender: Recommender) -> tuple[float, Stall, dict[str, float]]:
    ticker = LoopTicker()
    ticker.start()
    await asyncio.sleep(0)
    started = time.perf_counter()
    report = await recommender.run_once()
    elapsed = time.perf_counter() - started
    return elapsed, await ticker.stop(), report.step_seconds


@dataclass
class Setup:
    """The benchmark's recommender on in-memory inputs, and what feeding it history needs."""

    recommender: Recommender
    clock: VirtualClock
    pods: list[PodView]
    metrics: Metrics
    sink: Sink
    containers: tuple[ContainerView, ...]


def build(vpas: int, per_pod: int, per_namespace: int, settings: RecommenderSettings | None = None,
          sink: Sink | None = None) -> Setup:
    """N Deployments, each with one Running pod of `per_pod` containers and one VPA (see the docstring);
    `sink` takes the status and checkpoint writes (a counting `Sink` by default)."""
    clock = VirtualClock(start=START)
    containers = tuple(
        ContainerView(f"c{i}", Resources(100, 128 * MIB), Resources(1000, 512 * MIB)) for i in range(per_pod))
    pods, views, selectors = [], [], {}
    for index in range(vpas):
        name = f"app-{index}"
        namespace = f"team-{index // per_namespace}"
        labels = {"app": name, "pod-template-hash": "abc123"}
        pods.append(PodView(namespace, f"{name}-abc123-xyz", uid=f"uid-{index}", labels=labels,
                            owner=OwnerRef("apps/v1", "ReplicaSet", f"{name}-abc123", "u", True),
                            phase="Running", containers=containers))
        target = TargetRef("apps/v1", "Deployment", name)
        views.append(VpaView(namespace, name, generation=1, target_ref=target,
                             update_policy=UpdatePolicy(UpdateMode.OFF), creation_timestamp=START - 3600,
                             status=VpaStatus()))
        selectors[(namespace, name)] = Selector.from_match_labels({"app": name})
    sink = Sink() if sink is None else sink
    sink.vpas = Listing(views)
    metrics = Metrics(pods, clock)
    recommender = Recommender(settings or RecommenderSettings(), pods=Listing(pods), vpas=sink.vpas,
                              clock=clock, metrics_source=metrics, resolver=Resolver(selectors),
                              status_writer=sink, checkpoints=sink)
    return Setup(recommender, clock, pods, metrics, sink, containers)


def feed_history(setup: Setup, history_step_s: float, days: float = 1.0) -> float:
    """`days` of history (a day by default) through the real sample path (after a first loop added the pods);
    returns seconds taken, and leaves the clock a minute past the history."""
    started = time.perf_counter()
    cluster = setup.recommender.core.cluster
    steps = int(days * DAY // history_step_s)
    for step in range(1, steps + 1):
        t = START + step * history_step_s
        phase = 1.2 + math.sin(2 * math.pi * (t % DAY) / DAY)
        for index, pod in enumerate(setup.pods):
            cpu, memory = setup.metrics.level(index)
            pod_id = PodId(pod.namespace, pod.name)
            for container in setup.containers:
                cid = ContainerId(pod_id, container.name)
                cluster.add_cpu_sample(cid, int(cpu * phase), t)
                cluster.add_memory_sample(cid, int(memory * (0.9 + 0.1 * phase)), t)
    setup.clock.set(START + steps * history_step_s + 60)
    return time.perf_counter() - started


async def run(vpas: int, per_pod: int, history_step_s: float, per_namespace: int, gc_policy: str = "runtime",
              ) -> int:
    gc.collect()
    heap = HeapKeeper(interval_s=1e9)
    keeper: asyncio.Task[None] | None = None
    if gc_policy == "runtime":
        gc.freeze()  # what the runtime does once the caches have synced
        keeper = asyncio.create_task(heap.run())
    baseline = rss_bytes()
    setup = build(vpas, per_pod, per_namespace)
    recommender, clock, sink = setup.recommender, setup.clock, setup.sink

    first, first_stall, first_steps = await timed_loop(recommender)
    fed = feed_history(setup, history_step_s)
    steady = []
    for _ in range(2):
        clock.advance(60)
        steady.append(await timed_loop(recommender))
    if keeper is not None:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    gc.collect()
    tracked = vpas * per_pod
    per_container = (rss_bytes() - baseline) / tracked

    print(f"recommender loop: {vpas} VPAs ({per_namespace} per namespace), {tracked} containers, "
          f"history every {history_step_s:g} s for 24 h (fed in {fed:.1f} s), GC policy {gc_policy}")
    print("  leaves out: the API (status and checkpoint writes go to in-memory sinks that cost nothing; "
          "the PodMetrics read hands over ready-built objects, no HTTPS or JSON); the production path "
          "with both is `python -m benchmarks.run_scale`")
    print(f"{'loop':<10}{'seconds':>9}  steps; longest stall")
    rows = [("first", first, first_stall, first_steps)] + [
        (f"steady {i + 1}", s[0], s[1], s[2]) for i, s in enumerate(steady)]
    for label, seconds, stall, step_seconds in rows:
        detail = " ".join(f"{k}={v:.2f}" for k, v in step_seconds.items() if k != "total")
        print(f"{label:<10}{seconds:>9.2f}  {detail}; {stall.describe()}")
    print(f"status writes {sink.statuses}, checkpoint writes {sink.checkpoints}")
    print(f"RSS per tracked container: {per_container / 1024:.1f} KiB (target <= 35 KiB)")
    worst = max(s[0] for s in steady)
    ok = worst <= 10.0 and per_container <= 35 * 1024
    print(f"steady loop {worst:.2f} s (target <= 10 s): {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recommender_loop")
    parser.add_argument("--vpas", type=int, default=10_000)
    parser.add_argument("--containers-per-pod", type=int, default=5)
    parser.add_argument("--history-step-s", type=float, default=1800.0)
    parser.add_argument("--vpas-per-namespace", type=int, default=100)
    parser.add_argument("--gc", choices=("runtime", "default"), default="runtime",
                        help="the process's GC policy (vpa.aio.heap) or CPython's default")
    args = parser.parse_args(argv)
    return run_loop(run(args.vpas, args.containers_per_pod, args.history_step_s, args.vpas_per_namespace,
                           args.gc))


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
