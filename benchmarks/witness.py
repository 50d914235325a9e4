"""A witness of another process's thread: how much of a window it ran, waited for a CPU, or got none at all.

Owns: `ThreadWitness`, a sampler in a process of its own (it shares no GIL with the thread it watches nor
with the benchmark) that reads the watched thread's state, CPU time and run-queue wait
(`/proc/<pid>/task/<tid>/stat` and `schedstat`: also how often it was switched onto a CPU) every
`period_s`, and those of the process's threads named in the kernel as asked (the webhook's); `windows`, the
pure reading of those samples over the benchmark's windows (`Window`), and `around`, over a span as short as
one review. While the thread runs without being switched off its CPU, its CPU time accounts for the time
unless the hypervisor took the vCPU away: the guest kernel still counts a stolen thread as running, but it
earns no CPU time (`_window` says how the kernel's late bookkeeping is allowed for). `benchmarks.run_scale`
gives each window's longest span without a CPU beside the event-loop lags it measures, so that a lag the
hypervisor made is told apart from one of the process's own making, and each of its slowest reviews beside
what both threads did meanwhile, and how far apart its own samples came (its own stall: the machine's).

Must not: sample faster than the kernel's statistics are worth (a few ms), or touch the watched process.
"""

from __future__ import annotations

import bisect
import multiprocessing
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from vpa.components.loop_thread import OS_NAME_MAX


class Sample(NamedTuple):
    """One reading: `time.monotonic()`, the thread's state letter, CPU time and run-queue wait (seconds), and
    how many times it has been switched onto a CPU."""

    at: float
    state: str
    cpu_s: float
    wait_s: float
    switches: int = 0


@dataclass(frozen=True)
class Window:
    """What a window's samples show of the thread: `wall_s` covered by samples, `cpu_s` on a CPU, `wait_s`
    runnable in the run queue, `stolen_s` on its CPU as the guest kernel sees it (running, never switched
    off) but earning no CPU time: the hypervisor's; the longest span of that (to within a scheduler tick)
    and the longest wait for a CPU (as the kernel adds them up: one wait, or those that ended between two
    samples). Both steal figures are lower bounds: time stolen between two samples in which the thread was
    also switched (a wait for the GIL, for a CPU) is not counted, and a thread that switches every few
    hundred microseconds (`vpa run`'s main thread, the GIL shared with the webhook's) has few stretches
    without a switch."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    wait_s: float = 0.0
    stolen_s: float = 0.0
    longest_stolen_s: float = 0.0
    longest_wait_s: float = 0.0
    longest_gap_s: float = 0.0
    """The longest time between two of the window's samples: the witness's own stall (it asks for one
    every period, from a process that shares nothing with the one watched). A gap of tens of ms beside a
    stall of the watched thread says the machine held both processes, not the watched one's code."""
    long_gaps: int = 0
    """The window's gaps between samples over `LONG_GAP_S`: the witness's own stalls over the target."""

    @property
    def off_cpu_s(self) -> float:
        """Neither on a CPU, nor waiting for one, nor without one while running: blocked (on the GIL, a
        lock, a socket) or asleep."""
        return max(0.0, self.wall_s - self.cpu_s - self.wait_s - self.stolen_s)

    def describe(self) -> str:
        if self.wall_s <= 0:
            return "no samples"
        on_cpu = self.cpu_s / self.wall_s * 100
        return (f"longest span without a CPU at least {self.longest_stolen_s * 1000:.1f} ms"
                f" (in all {self.stolen_s:.2f} s); longest wait for a CPU"
                f" {self.longest_wait_s * 1000:.1f} ms (in all {self.wait_s:.2f} s);"
                f" on a CPU {on_cpu:.0f}% of {self.wall_s:.1f} s; the witness's own samples at most"
                f" {self.longest_gap_s * 1000:.1f} ms apart ({self.long_gaps} gaps over"
                f" {LONG_GAP_S * 1000:.0f} ms)")


def read_sample(stat_fd: Any, schedstat_fd: Any) -> Sample | None:
    """One `Sample` from open (unbuffered, binary) `stat` and `schedstat` files, or None once the thread
    is gone."""
    try:
        stat_fd.seek(0)
        raw = stat_fd.read()
        schedstat_fd.seek(0)
        cpu, wait, switches = schedstat_fd.read().split()[:3]
    except (OSError, ValueError):
        return None
    state = raw[raw.rindex(b")") + 2:].split(b" ", 1)[0].decode()
    return Sample(time.monotonic(), state, int(cpu) / 1e9, int(wait) / 1e9, int(switches))


def _sample(pid: int, tid: int, named: tuple[str, ...], period_s: float, stop: Any, conn: Any) -> None:
    seen: dict[str, list[Sample]] = {MAIN: []}
    watched: dict[str, tuple[Any, Any]] = {}
    looked = 0.0
    try:
        watched[MAIN] = _open(pid, tid)
        while MAIN in watched and not stop.is_set():
            missing = [n for n in named if n not in seen]
            if missing and time.monotonic() - looked > _LOOK_EVERY_S:
                looked = time.monotonic()
                for name, found in _tids_named(pid, missing).items():
                    watched[name], seen[name] = _open(pid, found), []
            for name, files in list(watched.items()):
                sample = read_sample(*files)
                if sample is not None:
                    seen[name].append(sample)
                else:  # the thread is gone; sampling ends with the watched one
                    _close(watched.pop(name))
            time.sleep(period_s)
    except OSError:
        pass
    finally:
        for files in watched.values():
            _close(files)
    conn.send(seen)
    conn.close()


MAIN: Final = "main"
"""The key of the watched thread's own samples in what `ThreadWitness.finish` returns."""

LONG_GAP_S: Final = 0.020
"""A gap between the witness's samples counted as its own stall (issue 12's bound on a stall)."""

_LOOK_EVERY_S: Final = 0.05
"""How often the sampler looks for a named thread it has not found yet."""


def _open(pid: int, tid: int) -> tuple[Any, Any]:
    stat = open(f"/proc/{pid}/task/{tid}/stat", "rb", buffering=0)  # noqa: SIM115 (closed by _close)
    try:
        return stat, open(f"/proc/{pid}/task/{tid}/schedstat", "rb", buffering=0)
    except OSError:
        stat.close()
        raise


def _close(files: tuple[Any, Any]) -> None:
    for f in files:
        f.close()


def _tids_named(pid: int, names: Sequence[str]) -> dict[str, int]:
    """The threads of `pid` whose kernel name (`comm`) is one of `names` cut as the kernel cuts it."""
    wanted = {name.encode()[:OS_NAME_MAX].decode(errors="ignore"): name for name in names}
    found: dict[str, int] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as comm:
                name = wanted.get(comm.read().strip())
        except OSError:
            continue
        if name is not None and name not in found:
            found[name] = int(task)
    return found


def windows(samples: Sequence[Sample], edges: Mapping[str, tuple[float, float]]) -> dict[str, Window]:
    """Each named window (`time.monotonic()` from, to) read from the samples taken inside it."""
    return {name: _window(s for s in samples if start <= s.at <= end) for name, (start, end) in edges.items()}


def around(samples: Sequence[Sample], start: float, end: float) -> Window:
    """The window from the last sample at or before `start` to the first at or after `end`: a span shorter
    than a few sampling periods (one review) read from the samples on either side of it, so up to a period
    longer at each end."""
    ats = [s.at for s in samples]
    first = max(0, bisect.bisect_right(ats, start) - 1)
    last = bisect.bisect_left(ats, end)
    return _window(samples[first:last + 1])


def _window(samples: Iterable[Sample]) -> Window:
    """The window's sums and its longest spans. Time without a CPU is read between consecutive settled
    samples (ones after which the thread's CPU time had advanced) with every sample between them in state
    `R` and the thread never switched off its CPU meanwhile (a switch is a wait for a CPU, or a block too
    short to be sampled: a wait for the GIL, the main thread giving way to the webhook): their wall time
    less the CPU time added meanwhile. The kernel brings a running thread's CPU time up to date at its
    scheduler ticks, so a tick's worth of it at most is late; a vCPU the hypervisor took away is never
    accounted for, and the guest switches no thread off it. Such intervals, each mostly unaccounted for,
    make one span when they follow one another."""
    wall = cpu = wait = stolen = longest_stolen = longest_wait = longest_gap = 0.0
    long_gaps = 0
    span = 0.0  # the current span without a CPU
    since: Sample | None = None  # the last settled sample of the current run of `R` samples
    previous: Sample | None = None
    for sample in samples:
        if previous is not None:
            gap = sample.at - previous.at
            d_cpu, d_wait = sample.cpu_s - previous.cpu_s, sample.wait_s - previous.wait_s
            wall, cpu, wait = wall + gap, cpu + d_cpu, wait + d_wait
            longest_wait = max(longest_wait, d_wait)
            longest_gap = max(longest_gap, gap)
            long_gaps += gap > LONG_GAP_S
        if sample.state != "R":
            since, span = None, 0.0
        elif since is None:
            since = sample
        elif sample.switches != since.switches:
            since, span = sample, 0.0
        elif previous is not None and sample.cpu_s > previous.cpu_s:
            interval = sample.at - since.at
            lost = interval - (sample.cpu_s - since.cpu_s)
            if lost > interval / 2:
                stolen += lost
                span += lost
                longest_stolen = max(longest_stolen, span)
            else:
                span = 0.0
            since = sample
        previous = sample
    return Window(wall, cpu, wait, stolen, longest_stolen, longest_wait, longest_gap, long_gaps)


class ThreadWitness:
    """Samples thread `tid` of process `pid` (its main thread by default) from a process of its own from
    `start()` to `finish()`, and beside it the threads of that process named `named` in the kernel
    (`vpa.components.loop_thread.name_os_thread`) once they appear."""

    def __init__(self, pid: int, tid: int | None = None, period_s: float = 0.002,
                 named: Sequence[str] = ()) -> None:
        self._pid, self._tid, self._period = pid, pid if tid is None else tid, period_s
        self._named = tuple(named)
        self._process: Any = None
        self._stop: Any = None
        self._conn: Any = None

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._conn, sender = ctx.Pipe(duplex=False)
        args = (self._pid, self._tid, self._named, self._period, self._stop, sender)
        self._process = ctx.Process(target=_sample, args=args, daemon=True, name="thread-witness")
        self._process.start()
        sender.close()

    def finish(self, timeout_s: float = 30.0) -> dict[str, list[Sample]]:
        """Stop sampling; every sample taken, by thread: `MAIN` for the thread watched, each name of `named`
        found (nothing if the sampler did not answer within `timeout_s`)."""
        if self._process is None:
            return {}
        self._stop.set()
        seen: dict[str, list[Sample]] = self._conn.recv() if self._conn.poll(timeout_s) else {}
        self._process.join(5)
        if self._process.is_alive():
            self._process.terminate()
        self._process = None
        return seen
