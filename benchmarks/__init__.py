"""Benchmarks: scale and latency measurements, each runnable as `python -m benchmarks.<name>`.

Owns:
- `quiet_logs`, the one log set-up of a benchmark that runs the project's components (or its informer) in
  its own process, so that their info lines do not interleave with the benchmark's tables;
- `run_loop`, the one way such a benchmark runs them: on uvloop, the event loop `vpa run` uses (`vpa.app`).
  asyncio's own loop orders a pass differently (a timer that falls due runs after every I/O callback and
  every callback already queued, where uvloop runs it first in the next iteration), so a stall timed on it
  is not the stall `vpa run` has (docs/performance.md, Follow-up "the in-process benchmarks on uvloop");
- `steal_now`, `steal_percent` and `steal_share`, the machine's hypervisor steal read at a timed window's
  edges and given as a share of its CPUs' time (one formula for every benchmark that reports it).

Must not: be imported by the project (`vpa/`): benchmarks measure it from outside.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog
import uvloop

from vpa.components.stallprobe import open_stat, steal_s

T = TypeVar("T")


def quiet_logs(level: int = logging.WARNING) -> None:
    """structlog at `level` and up only, loggers cached on first use (as `vpa.app.logs.configure` does)."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level), cache_logger_on_first_use=True
    )


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh uvloop event loop, as `vpa run` runs the process."""
    return uvloop.run(main)


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
