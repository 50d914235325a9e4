"""Benchmarks: scale and latency measurements, each runnable as `python -m benchmarks.<name>`.

Owns:
- `quiet_logs`, the one log set-up of a benchmark that runs the project's components (or its informer) in
  its own process, so that their info lines do not interleave with the benchmark's tables;
- `run_loop`, the one way such a benchmark runs them: on uvloop, the event loop `vpa run` uses (`vpa.app`).
  asyncio's own loop orders a pass differently (a timer that falls due runs after every I/O callback and
  every callback already queued, where uvloop runs it first in the next iteration), so a stall timed on it
  is not the stall `vpa run` has;
- `steal_now`, `steal_percent` and `steal_share`, the machine's hypervisor steal read at a timed window's
  edges and given as a share of its CPUs' time (one formula for every benchmark that reports it);
- `LoopTicker`, the one 1 ms timer the in-process benchmarks time their event-loop stalls with, and
  `Stall`, what it found in a window: the longest stall, how much of it the loop thread spent on a CPU (its
  CPU time, which excludes what the hypervisor steals) and waiting for one, and the longest stall of the
  loop's own making (the most CPU time it spent between two ticks).

Must not: be imported by the project (`vpa/`): benchmarks measure it from outside.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
import uvloop

from vpa.aio.cancelling import cancel_and_wait

T = TypeVar("T")


def quiet_logs(level: int = logging.WARNING) -> None:
    """structlog at `level` and up only, loggers cached on first use (as `vpa.app.logs.configure` does)."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level), cache_logger_on_first_use=True
    )


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh uvloop event loop, as `vpa run` runs the process."""
    return uvloop.run(main)


def open_schedstat() -> int | None:
    """A descriptor of the calling thread's scheduler statistics (`/proc/self/task/<tid>/schedstat`: CPU
    time, run-queue wait, times run), readable from any thread, or None where the kernel keeps none."""
    return _opened(f"/proc/self/task/{threading.get_native_id()}/schedstat", run_delay_s)


def run_delay_s(fd: int | None) -> float | None:
    """That thread's total time spent runnable but waiting for a CPU (seconds; schedstat's second field), or
    None."""
    if fd is None:
        return None
    try:
        return int(os.pread(fd, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def open_stat() -> int | None:
    """A descriptor of `/proc/stat` whose `cpu` line has a steal value, or None (not Linux, too old)."""
    return _opened("/proc/stat", steal_s)


def _opened(path: str, read: Callable[[int], float | None]) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    if read(fd) is None:
        os.close(fd)
        return None
    return fd


def steal_s(fd: int | None) -> float | None:
    """The machine's CPUs' total steal time so far (seconds, summed over CPUs), or None."""
    if fd is None:
        return None
    try:
        first = os.pread(fd, 256, 0).split(b"\n", 1)[0].split()
        return int(first[8]) * _TICK_S if first[0] == b"cpu" else None
    except (OSError, IndexError, ValueError):
        return None


def steal_now() -> float | None:
    """The hypervisor's steal of the machine's CPUs so far (seconds, summed over CPUs; `/proc/stat`), or None
    where the kernel does not report it: time in which no process of the benchmark could run."""
    fd = open_stat()
    try:
        return steal_s(fd)
    finally:
        if fd is not None:
            os.close(fd)


def steal_percent(start: float | None, end: float | None, seconds: float | None) -> float | None:
    """The steal between two `steal_now()` reads `seconds` apart, as a percentage of all the machine's CPUs'
    time in that window; None when either read is missing or the window is empty."""
    if start is None or end is None or seconds is None or seconds <= 0:
        return None
    return (end - start) / (seconds * (os.cpu_count() or 1)) * 100


def steal_share(start: float | None, end: float | None, seconds: float) -> str:
    """A window's steal as `"0.12 s (1.5% of 2 CPUs)"`, or "not reported"."""
    percent = steal_percent(start, end, seconds)
    if start is None or end is None or percent is None:
        return "not reported"
    return f"{end - start:.2f} s ({percent:.1f}% of {os.cpu_count() or 1} CPUs)"


# ------------------------------------------------------------------------------------ stalls, attributed


@dataclass(frozen=True)
class Stall:
    """A window's stalls, timed by `LoopTicker`.

    `seconds`: the longest stall, how late the 1 ms timer ran at worst. Between the two ticks around it
    (`span_s`, the stall plus the 1 ms asked for) the loop thread was on a CPU for `cpu_s` and runnable but
    waiting for one for `wait_s` (None where the kernel keeps no per-thread statistics); the rest of the span
    it was neither: blocked (another thread holding the GIL, a system call) or on a vCPU the hypervisor took
    away, which the guest still counts as running but not as CPU time. `own_s`: the most CPU time the loop
    thread spent between any two ticks of the window, less the 1 ms asked for; the longest stall it would
    have had on a CPU of its own."""

    seconds: float = 0.0
    span_s: float = 0.0
    cpu_s: float = 0.0
    wait_s: float | None = None
    own_s: float = 0.0

    def describe(self) -> str:
        """`"22.7 ms (of its 23.7 ms: on a CPU 5.1, waiting for one 0.3, neither 18.3); own 9.8 ms"`."""
        parts = [f"on a CPU {self.cpu_s * 1000:.1f}"]
        rest = self.span_s - self.cpu_s
        if self.wait_s is not None:
            parts.append(f"waiting for one {self.wait_s * 1000:.1f}")
            rest -= self.wait_s
        parts.append(f"neither {max(rest, 0.0) * 1000:.1f}")
        return (f"{self.seconds * 1000:.1f} ms (of its {self.span_s * 1000:.1f} ms: {', '.join(parts)});"
                f" the loop's own longest {self.own_s * 1000:.1f} ms")


class LoopTicker:
    """A 1 ms timer on the running event loop, timing its stalls window by window (`window()`).

    Each tick reads the loop thread's CPU time (`time.thread_time`) and run-queue wait
    (`/proc/self/task/<tid>/schedstat`, about 3 µs; none where the kernel keeps no such statistics), so a
    stall is told apart into the loop's own work, the machine's CPU contention and time it was given no CPU
    at all. "Neither" is the hypervisor's steal in
    a benchmark with no other Python thread (the ones that use this); where other threads take the GIL it
    is their share too. Start it from inside the loop it times."""

    def __init__(self, period_s: float = 0.001) -> None:
        self._period = period_s
        self._fd: int | None = None
        self._worst = Stall()
        self._own = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._fd = open_schedstat()
        self._task = asyncio.ensure_future(self._tick())

    def window(self) -> Stall:
        """What the ticker found since it started or since the last `window()`, which starts a new one."""
        found = dataclasses.replace(self._worst, own_s=self._own)
        self._worst, self._own = Stall(), 0.0
        return found

    async def stop(self) -> Stall:
        """Stop ticking; the last window's figures."""
        if self._task is not None:
            await cancel_and_wait((self._task,))
            self._task = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        return self.window()

    def _times(self) -> tuple[float, float, float | None]:
        """(now, the loop thread's CPU seconds, its run-queue wait seconds or None). The CPU time is the
        thread's clock (up to date when read; schedstat's own CPU total is only brought up to date at the
        scheduler's ticks), the wait schedstat's (the loop thread reads it while running: its waits so far
        have ended and are counted)."""
        return time.perf_counter(), time.thread_time(), run_delay_s(self._fd)

    async def _tick(self) -> None:
        before, cpu_before, wait_before = self._times()
        while True:
            await asyncio.sleep(self._period)
            now, cpu, wait = self._times()
            late = now - before - self._period
            self._own = max(self._own, cpu - cpu_before - self._period)
            if late > self._worst.seconds:
                waited = None if wait is None or wait_before is None else wait - wait_before
                self._worst = Stall(late, now - before, cpu - cpu_before, waited)
            before, cpu_before, wait_before = now, cpu, wait
