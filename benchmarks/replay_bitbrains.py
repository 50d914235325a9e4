"""Evaluation: `vpa replay` over the real Bitbrains "Rnd" development trace, with a small quality scorecard.

Run: `python -m benchmarks.replay_bitbrains [--trace PATH] [--vms N]`. The trace is read from
`../shared/traces/bitbrains_rnd_dev.parquet` next to the repository (or `--trace`); when it is absent
the command says so and exits 0. The trace is never copied: it is converted in memory.

Conversion (per the trace's README): one key per VM (`vm<id>`); CPU cores = usage MHz / (capacity MHz /
cores) where capacity and cores are non-zero, else no CPU sample; memory bytes = usage KiB × 1024;
samples every 300 s. The provisioned size (cores, memory capacity) plays the role of the manually set
request.

Reported: conversion and replay time; the final recommendation of a few VMs beside their provisioned
size and p95 usage; and, replaying with a recommendation every 24 h, a scorecard over each following
day (Autopilot-style, research notes §D): relative slack of the target vs of the provisioned size,
and the share of 5-minute samples above the target (CPU: throttling proxy; memory: OOM proxy).
"""

from __future__ import annotations

import argparse
import bisect
import time
from pathlib import Path

from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.replay.replaying import replay
from vpa.replay.traces import Trace

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "bitbrains_rnd_dev.parquet"
DAY = 86_400.0


def load(path: Path, vms: int | None) -> tuple[Trace, dict[str, tuple[float, int]]]:
    """The trace in replay form (time order), and each VM's provisioned (cores, memory bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    if vms is not None:
        keep = pc.unique(table["vm_id"]).to_pylist()[:vms]
        table = table.filter(pc.is_in(table["vm_id"], value_set=pa.array(keep, pa.int16())))
    table = table.sort_by([("timestamp_s", "ascending"), ("vm_id", "ascending")])
    capacity = table["cpu_capacity_mhz"]
    cores = pc.cast(table["cpu_cores"], pa.float64())
    valid = pc.and_(pc.greater(capacity, 0), pc.greater(cores, 0))
    mhz_per_core = pc.divide(pc.cast(capacity, pa.float64()), pc.if_else(valid, cores, 1.0))
    cpu = pc.if_else(valid, pc.divide(pc.cast(table["cpu_usage_mhz"], pa.float64()), mhz_per_core), None)
    memory = pc.multiply(table["mem_usage_kb"], 1024)
    keys = pc.binary_join_element_wise("vm", pc.cast(table["vm_id"], pa.string()), "")
    count = table.num_rows
    trace = Trace(
        [float(ts) for ts in table["timestamp_s"].to_pylist()],
        keys.to_pylist(),
        cpu.to_pylist(),
        memory.to_pylist(),
        [False] * count,
    )
    provisioned: dict[str, tuple[float, int]] = {}
    for key, vm_cores, mem_kb in zip(trace.containers, table["cpu_cores"].to_pylist(),
                                     table["mem_capacity_kb"].to_pylist(), strict=True):
        provisioned[key] = (float(vm_cores), int(mem_kb) * 1024)
    return trace, provisioned


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def scorecard(trace: Trace, provisioned: dict[str, tuple[float, int]]) -> dict[str, float]:
    """Replay with daily recommendations; score each day's samples against the previous recommendation."""
    result = replay(trace, RecommenderConfig(), every_s=DAY)
    assert result.series is not None
    times = [time_ for time_, _ in result.series]
    targets: list[dict[str, tuple[int | None, int | None]]] = [
        {item.container_name: (item.target.cpu_millicores, item.target.memory_bytes) for item in items}
        for _, items in result.series]
    cpu_over = memory_over = cpu_scored = memory_scored = 0
    cpu_slack = cpu_slack_provisioned = memory_slack = memory_slack_provisioned = 0.0
    for ts, key, cpu, memory in zip(trace.timestamps, trace.containers, trace.cpu_cores, trace.memory_bytes,
                                    strict=True):
        index = bisect.bisect_left(times, ts) - 1  # the last recommendation strictly before this sample
        if index < 0:
            continue
        target_mcores, target_bytes = targets[index].get(key, (None, None))
        cores, capacity_bytes = provisioned[key]
        if cpu is not None and target_mcores and cores > 0:
            cpu_scored += 1
            target = target_mcores / 1000
            cpu_over += cpu > target
            cpu_slack += max(0.0, target - cpu) / target
            cpu_slack_provisioned += max(0.0, cores - cpu) / cores
        if memory is not None and target_bytes and capacity_bytes > 0:
            memory_scored += 1
            memory_over += memory > target_bytes
            memory_slack += max(0, target_bytes - memory) / target_bytes
            memory_slack_provisioned += max(0, capacity_bytes - memory) / capacity_bytes
    return {
        "cpu samples scored": cpu_scored,
        "cpu relative slack (target)": cpu_slack / max(1, cpu_scored),
        "cpu relative slack (provisioned)": cpu_slack_provisioned / max(1, cpu_scored),
        "cpu samples above target": cpu_over / max(1, cpu_scored),
        "memory samples scored": memory_scored,
        "memory relative slack (target)": memory_slack / max(1, memory_scored),
        "memory relative slack (provisioned)": memory_slack_provisioned / max(1, memory_scored),
        "memory samples above target": memory_over / max(1, memory_scored),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_bitbrains")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--vms", type=int, default=None, help="only the first N VMs")
    parser.add_argument("--show", type=int, default=6, help="VMs whose final recommendation is printed")
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        print(f"replay_bitbrains: trace not found at {args.trace}; skipped")
        return 0

    started = time.perf_counter()
    trace, provisioned = load(args.trace, args.vms)
    load_s = time.perf_counter() - started
    samples = sum(cpu is not None for cpu in trace.cpu_cores) + sum(m is not None for m in trace.memory_bytes)

    started = time.perf_counter()
    result = replay(trace, RecommenderConfig())
    replay_s = time.perf_counter() - started
    print("vpa replay on the Bitbrains Rnd development trace")
    print(f"  rows {len(trace):,}, samples {samples:,}, VMs {len(provisioned)}")
    print(f"  load + convert {load_s:.1f} s; replay {replay_s:.1f} s = {samples / replay_s:,.0f} samples/s")
    print(f"  recommendations at {time.strftime('%Y-%m-%d %H:%M', time.gmtime(result.at or 0))} UTC "
          f"for {len(result.containers)} VMs")

    usage_cpu: dict[str, list[float]] = {}
    usage_memory: dict[str, list[float]] = {}
    for key, cpu, memory in zip(trace.containers, trace.cpu_cores, trace.memory_bytes, strict=True):
        if cpu is not None:
            usage_cpu.setdefault(key, []).append(cpu)
        if memory is not None:
            usage_memory.setdefault(key, []).append(memory)
    print(f"  {'vm':<8}{'cores':>6}{'p95 cpu':>9}{'target':>9}{'upper':>9}   "
          f"{'mem GiB':>8}{'p95 GiB':>8}{'target':>8}{'upper':>8}")
    for item in result.containers[:args.show]:
        key = item.container_name
        cores, capacity = provisioned[key]
        cpu_t, cpu_u = item.target.cpu_millicores or 0, item.upper_bound.cpu_millicores or 0
        mem_t, mem_u = item.target.memory_bytes or 0, item.upper_bound.memory_bytes or 0
        p95_cpu, p95_memory = _p95(usage_cpu.get(key, [])), _p95(usage_memory.get(key, []))
        print(f"  {key:<8}{cores:>6.0f}{p95_cpu:>9.3f}{cpu_t / 1000:>9.3f}{cpu_u / 1000:>9.3f}   "
              f"{capacity / 2**30:>8.2f}{p95_memory / 2**30:>8.2f}{mem_t / 2**30:>8.2f}{mem_u / 2**30:>8.2f}")

    started = time.perf_counter()
    scores = scorecard(trace, provisioned)
    score_s = time.perf_counter() - started
    print(f"  scorecard (daily recommendations, each scored on the following day; {score_s:.1f} s):")
    for label, value in scores.items():
        shown = f"{value:,}" if isinstance(value, int) else f"{value:.3f}"
        print(f"    {label:<38}{shown:>12}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
