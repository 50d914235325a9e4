"""Benchmark: one recommendation pass over 50,000 tracked containers, time and memory per container.

Run: `python -m benchmarks.recommender_estimation [--vpas N] [--containers-per-pod N] [--templates N]`.

Setup: a `RecommenderCore` with N VPAs, each selecting one pod of `containers-per-pod` containers (default
10,000 × 5 = 50,000 containers, as DESIGN §10). Every container carries a day of history: `templates`
distinct aggregates are fed one CPU and one memory sample a minute for 24 h (sinusoidal daily profiles of
different levels) through the real sample path, and each tracked container's aggregate gets a copy of one
of them (feeding 72 million samples one by one would only measure sample intake, not estimation).

Measured:
1. the estimation pass, timed on one core: for every VPA, merge its aggregates by container name and
   compute its recommendation (`RecommenderCore.recommend`: filtering, estimators, formatting, capping)
   — the work of upstream's `UpdateVPAs` minus the status write;
2. memory per tracked container: `tracemalloc` bytes retained by the cluster state (pods, container
   states, aggregates with both histograms, VPAs) divided by the container count.

Targets (DESIGN §10): loop ≤ 10 s for 50,000 containers; ≤ 35 KiB per tracked container.
"""

from __future__ import annotations

import argparse
import gc
import math
import time
import tracemalloc

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig, ContainerState
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.logic.recommender.recommending import RecommenderCore
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.vpa import VpaView

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MIB = 1024 * 1024


def _templates(count: int) -> list[AggregateContainerState]:
    config = AggregationConfig()
    templates = []
    for index in range(count):
        aggregate = AggregateContainerState(config, START)
        container = ContainerState(lambda now, a=aggregate: a)
        base_mcores = 20 + 37 * index
        base_bytes = (64 + 23 * index) * MIB
        for minute in range(1441):
            phase = math.sin(2 * math.pi * minute / 1440)
            container.add_cpu_sample(int(base_mcores * (1.2 + phase)), START + 60 * minute)
            container.add_memory_sample(int(base_bytes * (1.1 + 0.1 * phase)), START + 60 * minute)
        templates.append(aggregate)
    return templates


def build(vpas: int, per_pod: int, templates: list[AggregateContainerState]) -> RecommenderCore:
    core = RecommenderCore()
    cluster = core.cluster
    now = START + 86_400
    for index in range(vpas):
        namespace = f"ns-{index % 100}"
        labels = {"app": f"app-{index}", "pod-template-hash": "7d9f8c6b5"}
        cluster.add_or_update_vpa(VpaView(namespace=namespace, name=f"vpa-{index}"),
                                  Selector.from_match_labels({"app": f"app-{index}"}))
        pod_id = PodId(namespace, f"app-{index}-7d9f8c6b5-x2x9z")
        cluster.add_or_update_pod(pod_id, labels, "Running", now)
        for slot in range(per_pod):
            container_id = ContainerId(pod_id, f"c{slot}")
            cluster.add_or_update_container(container_id, Resources(100, 128 * MIB), now)
            template = templates[(index * per_pod + slot) % len(templates)]
            aggregate = cluster.container_state(container_id).aggregate(now)
            aggregate.cpu = template.cpu.copy()
            aggregate.memory = template.memory.copy()
            aggregate.first_sample_start = template.first_sample_start
            aggregate.last_sample_start = template.last_sample_start
            aggregate.total_samples_count = template.total_samples_count
    return core


def estimation_pass(core: RecommenderCore) -> int:
    containers = 0
    for namespace, name in list(core.cluster.vpa_keys()):
        containers += len(core.recommend(namespace, name).containers)
    return containers


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recommender_estimation")
    parser.add_argument("--vpas", type=int, default=10_000)
    parser.add_argument("--containers-per-pod", type=int, default=5)
    parser.add_argument("--templates", type=int, default=100)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    templates = _templates(args.templates)
    feed_s = time.perf_counter() - started
    fed_samples = 2 * 1441 * args.templates

    gc.collect()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    core = build(args.vpas, args.containers_per_pod, templates)
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracked = args.vpas * args.containers_per_pod
    per_container_kib = (after - before) / tracked / 1024

    gc.collect()
    started = time.perf_counter()
    recommended = estimation_pass(core)
    pass_s = time.perf_counter() - started
    assert recommended == tracked, (recommended, tracked)

    rows = [
        ("tracked containers", f"{tracked:,}", ""),
        ("sample intake (template feeding)", f"{fed_samples / feed_s:,.0f} samples/s", ""),
        ("estimation pass", f"{pass_s:.2f} s", "target ≤ 10 s"),
        ("per container", f"{pass_s / tracked * 1e6:.0f} µs", ""),
        ("memory per tracked container", f"{per_container_kib:.1f} KiB", "target ≤ 35 KiB"),
    ]
    width = max(len(row[0]) for row in rows)
    print("recommender estimation pass")
    for label, value, target in rows:
        print(f"  {label.ljust(width)}  {value:>22}  {target}")
    ok = pass_s <= 10.0 * tracked / 50_000 and per_container_kib <= 35.0
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
