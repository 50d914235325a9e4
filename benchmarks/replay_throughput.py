"""Benchmark: `vpa replay` throughput (samples per second) on a synthetic trace.

Run: `python -m benchmarks.replay_throughput [--containers N] [--days D] [--step-s S]`.

The trace (default 500 containers × 7 days at one row per container every 300 s = 1,008,000 rows, each
with a CPU and a memory sample, plus one OOM row per container) is generated in memory with daily
sinusoidal profiles. Measured on one core:
1. replay only: rows applied through the recommender logic and one final recommendation per container
   (`vpa.replay.replaying.replay` on an in-memory `Trace`);
2. end to end from a CSV file and from a Parquet file written to a temporary directory: reading, ordering,
   replaying and rendering the JSON (`vpa.replay.replaying.run`).
A sample is one CPU or memory measurement (an OOM row counts as one).
"""

from __future__ import annotations

import argparse
import io
import math
import tempfile
import time
from pathlib import Path

from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.settings import ReplaySettings
from vpa.replay.replaying import replay, run
from vpa.replay.traces import Trace

START = 1_767_225_600  # 2026-01-01T00:00:00Z
MIB = 1024 * 1024


def synthetic_trace(containers: int, days: float, step_s: int) -> Trace:
    steps = int(days * 86_400 // step_s)
    trace = Trace([], [], [], [], [])
    oom_step = steps * 3 // 4
    for step in range(steps):
        timestamp = float(START + step * step_s)
        phase = math.sin(2 * math.pi * (step * step_s % 86_400) / 86_400)
        for index in range(containers):
            base_cores = 0.05 + 0.01 * (index % 97)
            trace.timestamps.append(timestamp)
            trace.containers.append(f"c{index:05d}")
            trace.cpu_cores.append(round(base_cores * (1.3 + phase), 4))
            trace.memory_bytes.append(int((128 + index % 61 * 16) * MIB * (1.1 + 0.1 * phase)))
            trace.oom.append(False)
            if step == oom_step and index % 10 == 0:
                trace.timestamps.append(timestamp + 1)
                trace.containers.append(f"c{index:05d}")
                trace.cpu_cores.append(None)
                trace.memory_bytes.append((256 + index % 61 * 16) * MIB)
                trace.oom.append(True)
    return trace


def _samples(trace: Trace) -> int:
    return sum(cpu is not None for cpu in trace.cpu_cores) + sum(m is not None for m in trace.memory_bytes)


def _write_csv(trace: Trace, path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write("timestamp,container,cpu_cores,memory_bytes,oom\n")
        for ts, key, cpu, memory, oom in zip(trace.timestamps, trace.containers, trace.cpu_cores,
                                             trace.memory_bytes, trace.oom, strict=True):
            handle.write(f"{ts:.0f},{key},{'' if cpu is None else cpu},{'' if memory is None else memory},"
                         f"{'true' if oom else ''}\n")


def _write_parquet(trace: Trace, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({
        "timestamp": pa.array(trace.timestamps, pa.float64()),
        "container": pa.array(trace.containers, pa.string()),
        "cpu_cores": pa.array(trace.cpu_cores, pa.float64()),
        "memory_bytes": pa.array(trace.memory_bytes, pa.int64()),
        "oom": pa.array(trace.oom, pa.bool_()),
    }), path)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_throughput")
    parser.add_argument("--containers", type=int, default=500)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--step-s", type=int, default=300)
    args = parser.parse_args(argv)

    trace = synthetic_trace(args.containers, args.days, args.step_s)
    samples = _samples(trace)

    started = time.perf_counter()
    result = replay(trace, RecommenderConfig())
    replay_s = time.perf_counter() - started
    assert len(result.containers) == args.containers

    rows = [("rows", f"{len(trace):,}"), ("samples", f"{samples:,}"),
            ("replay only", f"{replay_s:.2f} s = {samples / replay_s:,.0f} samples/s")]
    with tempfile.TemporaryDirectory() as directory:
        for name, writer in (("csv", _write_csv), ("parquet", _write_parquet)):
            path = Path(directory) / f"trace.{name}"
            writer(trace, path)
            started = time.perf_counter()
            status = run(ReplaySettings(trace_path=str(path)), stdout=io.StringIO(), stderr=io.StringIO())
            elapsed = time.perf_counter() - started
            assert status == 0
            rows.append((f"end to end from {name}", f"{elapsed:.2f} s = {samples / elapsed:,.0f} samples/s"))
    width = max(len(label) for label, _ in rows)
    print("vpa replay throughput")
    for label, value in rows:
        print(f"  {label.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
