"""Benchmark: the machine's own floor under every stall figure, what a thread that never yields loses.

One thread spins for `--seconds` at a time (`--runs` times), reading the clock and its own CPU time
(`time.thread_time`, which leaves out what the hypervisor steals) in a tight loop, and reports the longest
gap in which its CPU time did not advance (it was given no CPU at all: a vCPU the hypervisor took away, or
another task of the machine on it), the share of the spin it got no CPU, and the machine's steal meanwhile
(`/proc/stat`). On a CPU of its own both figures are near 0. On a virtual machine they are the floor of
every event-loop stall measured on it: no code of the process can stall less than its thread is stalled.
There is no target: it is the context for the others' (`docs/performance.md`, "How we measure").

It also reports the longest single step of the spin (a clock read, well under a microsecond) whose CPU time
did cover it: a stall that `time.thread_time` counts as the thread's own work. Such stalls are the
machine's too: this VM's kernel has no IRQ time accounting (`CONFIG_IRQ_TIME_ACCOUNTING` unset), so
interrupt and softirq work is charged to whichever thread it interrupted, and a vCPU the hypervisor stops
without reporting steal is charged the same way. A 13 µs loop of additions (no allocation, no system call)
took up to 10-27 ms of wall time and as much of "CPU" in some minutes, idle or not, and never over 2 ms in
others (throwaway timing, 2026-12-03). Every "on a CPU" share of a stall in the other benchmarks may hold
such time. `--busy` runs a neighbour meanwhile, as the benchmarks' servers and simulators are: a process
echoing 64 KiB messages over a loopback TCP connection to itself.

    python -m benchmarks.cpu_floor [--seconds 2] [--runs 5] [--busy]
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import sys
import threading
import time
from dataclasses import dataclass

from benchmarks import steal_now, steal_share


@dataclass(frozen=True)
class Spin:
    without_cpu_s: float
    """The longest gap the thread's CPU time did not cover (less than half of it on a CPU)."""
    share_without: float
    """The share of the spin without a CPU."""
    counted_s: float
    """The longest step that the thread's CPU time did cover (at least half of it): a stall counted as
    the thread's own work."""


def spin(seconds: float) -> Spin:
    """Spin this thread for `seconds`, reading its clocks in a tight loop."""
    started = last_wall = time.perf_counter()
    cpu_started = last_cpu = time.thread_time()
    longest = counted = 0.0
    while last_wall - started < seconds:
        wall, cpu = time.perf_counter(), time.thread_time()
        step, on_cpu = wall - last_wall, cpu - last_cpu
        if on_cpu < step / 2:
            longest = max(longest, step - on_cpu)
        elif step > counted:
            counted = step
        last_wall, last_cpu = wall, cpu
    return Spin(longest, max(0.0, 1 - (last_cpu - cpu_started) / (last_wall - started)), counted)


def _neighbour(seconds: float) -> None:
    """Echo 64 KiB messages over a loopback TCP connection to itself for `seconds`."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()

        def echo() -> None:
            while data := peer.recv(65536):
                peer.sendall(data)

        threading.Thread(target=echo, daemon=True).start()
        message = b"x" * 65536
        end = time.perf_counter() + seconds
        with client, peer:
            while time.perf_counter() < end:
                client.sendall(message)
                received = 0
                while received < len(message):
                    received += len(client.recv(65536))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cpu_floor",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", action="store_true",
                        help="a second process exchanging data over loopback meanwhile")
    args = parser.parse_args(argv)
    neighbour = None
    if args.busy:
        neighbour = multiprocessing.get_context("spawn").Process(
            target=_neighbour, args=(args.seconds * args.runs + 5.0,), daemon=True)
        neighbour.start()
        time.sleep(0.5)
    print(f"cpu floor: one thread spinning {args.runs} × {args.seconds:g} s"
          + (", a process echoing over loopback beside it" if args.busy else ", nothing else of ours"))
    print(f"  {'run':<5}{'longest gap without a CPU':>27}{'share without a CPU':>22}"
          f"{'longest step counted as CPU':>30}  hypervisor steal (/proc/stat)")
    try:
        for run in range(1, args.runs + 1):
            before = steal_now()
            found = spin(args.seconds)
            print(f"  {run:<5}{found.without_cpu_s * 1000:>24.1f} ms{found.share_without * 100:>21.1f}%"
                  f"{found.counted_s * 1000:>27.1f} ms  {steal_share(before, steal_now(), args.seconds)}")
    finally:
        if neighbour is not None:
            neighbour.terminate()
            neighbour.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
