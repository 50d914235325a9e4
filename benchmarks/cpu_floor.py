"""Benchmark: the machine's own floor under every stall figure, what a thread that never yields loses.

One thread spins for `--seconds` at a time (`--runs` times), reading the clock and its own CPU time
(`time.thread_time`, which leaves out what the hypervisor steals) in a tight loop, and reports the longest
gap in which its CPU time did not advance (it was given no CPU at all: a vCPU the hypervisor took away, or
another task of the machine on it), the share of the spin it got no CPU, and the machine's steal meanwhile
(`/proc/stat`). On a CPU of its own both figures are near 0. On a virtual machine they are the floor of
every event-loop stall measured on it: no code of the process can stall less than its thread is stalled.
There is no target: it is the context for the others' (`docs/performance.md`, Follow-up "stalls told
apart").

    python -m benchmarks.cpu_floor [--seconds 2] [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks import steal_now, steal_share


def spin(seconds: float) -> tuple[float, float]:
    """Spin this thread for `seconds`: (the longest gap its CPU time did not cover, the share of the spin
    without a CPU). A gap counts when less than half of it was on a CPU."""
    started = last_wall = time.perf_counter()
    cpu_started = last_cpu = time.thread_time()
    longest = 0.0
    while last_wall - started < seconds:
        wall, cpu = time.perf_counter(), time.thread_time()
        if cpu - last_cpu < (wall - last_wall) / 2:
            longest = max(longest, wall - last_wall - (cpu - last_cpu))
        last_wall, last_cpu = wall, cpu
    return longest, max(0.0, 1 - (last_cpu - cpu_started) / (last_wall - started))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cpu_floor",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"cpu floor: one thread spinning {args.runs} × {args.seconds:g} s")
    print(f"  {'run':<5}{'longest gap without a CPU':>27}{'share without a CPU':>22}"
          "  hypervisor steal (/proc/stat)")
    for run in range(1, args.runs + 1):
        before = steal_now()
        longest, share = spin(args.seconds)
        print(f"  {run:<5}{longest * 1000:>24.1f} ms{share * 100:>21.1f}%  "
              f"{steal_share(before, steal_now(), args.seconds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
