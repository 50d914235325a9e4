"""Event-loop stall attribution for `--profiling`: which code held the loop, and for how long.

Owns: `StallProbe`, a heartbeat the event loop refreshes every `beat_s` and a sampling thread that, while the
heartbeat is older than `threshold_s`, samples the loop thread's Python stack (`sys._current_frames`) and
those of the threads it is told to watch beside it (`also_sample`: the webhook's loop runs on a thread of its
own and waits whenever the main thread holds the GIL); plus a `gc.callbacks` hook timing every cyclic-GC
collection of any thread (a collection holds the GIL, so it stops every thread). Each stall (from the last
heartbeat before it to the first after it) is kept with its samples' most frequent stacks (innermost first),
the other threads' stacks meanwhile and the collections that ran inside it; the `keep` longest are rendered
as text for `/debug/stalls`. With `count_waiting`, samples in which the loop thread is not running Python
(waiting to be scheduled or for the GIL) count too, as a stall of no code of its own. Where the kernel keeps
per-thread scheduler statistics (`/proc/self/task/<tid>/schedstat`), each stall also says how much of it,
from its detection (`threshold_s` in) to its end, the loop thread spent runnable but waiting for a CPU: that
tells the machine's CPU contention apart from waiting for the GIL. Each stall also says how much CPU time
the loop thread spent between the heartbeats around it (`time.thread_time`, read by the heartbeat itself):
its own work, for a thread the kernel counts as running on a vCPU the hypervisor took away earns none.
Where the kernel reports steal time (a virtual machine whose vCPUs the hypervisor takes away: `/proc/stat`,
the `cpu` line's eighth value), each stall also says how much steal the machine's CPUs (summed) accrued
from the last heartbeat before it to the first after it (in the kernel's 10 ms ticks): a stall the process
could not have prevented, with one sample (no thread of the process ran meanwhile) and steal of its
length, tells itself apart.

Must not: run unless asked (`--profiling`: the thread takes the GIL every few milliseconds while the loop is
stalled, which lengthens the stall it observes by a little), touch anything but its own state, or raise
into the event loop. A sample can only be taken when the loop thread releases the GIL, so a long C call (a
collection, one big parse) shows up as the frame that made it, sampled after the call if it never yields.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

Frame = tuple[str, int, str]  # (file, line, function)


WAITING: Frame = ("(not running: waiting for the CPU or the GIL)", 0, "")
IDLE: Frame = ("(idle: its loop waiting for I/O)", 0, "")


@dataclass
class Stall:
    """One stall: how long the loop was silent, its samples' frames by count, the other threads' stacks
    meanwhile, and the collections in it."""

    started: float  # perf_counter of the last heartbeat before it
    seconds: float = 0.0
    samples: int = 0
    frames: collections.Counter[Frame] = field(default_factory=collections.Counter)
    stacks: collections.Counter[tuple[Frame, ...]] = field(default_factory=collections.Counter)
    gc_seconds: float = 0.0
    gc_longest: tuple[float, int, str] = (0.0, -1, "")  # (seconds, generation, thread name)
    others: dict[str, collections.Counter[tuple[Frame, ...]]] = field(default_factory=dict)
    run_delay_at_start: float | None = None  # the loop thread's run-queue wait so far, at its detection
    cpu_wait_seconds: float | None = None  # from its detection to its end, spent runnable awaiting a CPU
    steal_seconds: float | None = None  # the machine's CPUs' steal (summed) from its start to its end
    cpu_seconds: float = 0.0  # the loop thread's CPU time between the heartbeats around it
    started_monotonic: float = 0.0  # `started` on `time.monotonic()`, the clock other processes read too


def _stack(frame: FrameType | None, depth: int) -> tuple[Frame, ...]:
    """The innermost `depth` frames down to the callback the event loop runs (the loop's own frames are
    left out); empty when the loop itself is innermost, i.e. waiting for I/O (the process was not
    scheduled, which is no code's doing)."""
    out: list[Frame] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        file = code.co_filename
        if file.endswith(("asyncio/events.py", "asyncio/base_events.py", "asyncio/runners.py")) or (
                file.endswith("loop_thread.py") and code.co_name == "serve"):  # a `LoopThread`'s uvloop
            break
        if file.endswith("selectors.py"):
            return ()
        out.append((file, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(out)


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


_TICK_S: Final = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def open_stat() -> int | None:
    """A descriptor of `/proc/stat` whose `cpu` line has a steal value, or None (not Linux, too old)."""
    return _opened("/proc/stat", steal_s)


def _opened(path: str, read: Callable[[int], float | None]) -> int | None:
    """A descriptor of `path` that `read` makes sense of, or None (closed again)."""
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


def _short(path: str) -> str:
    marker = "/vpa/"
    at = path.rfind(marker)
    if at >= 0:
        return "vpa/" + path[at + len(marker):]
    parts = path.rsplit("/", 2)
    return "/".join(parts[-2:])


class StallProbe:
    """Start with `start()` from inside the running loop; `render()` gives the report; `stop()` ends it."""

    def __init__(self, *, beat_s: float = 0.002, threshold_s: float = 0.005, sample_s: float = 0.001,
                 keep: int = 20, depth: int = 12, count_waiting: bool = False,
                 also_sample: Mapping[str, int] | None = None) -> None:
        self.also_sample = dict(also_sample or {})
        """Threads (name → `threading.get_ident()`) whose stacks are sampled beside the loop's."""
        self._count_waiting = count_waiting
        self._beat_s = beat_s
        self._threshold_s = threshold_s
        self._sample_s = sample_s
        self._keep = keep
        self._depth = depth
        self._heartbeat = time.perf_counter()
        self._loop_thread = threading.get_ident()
        self._current: Stall | None = None
        self._longest: list[Stall] = []
        self._stalls = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self._gc_started = 0.0
        self._gc_seconds_total = 0.0
        self._gc_longest: tuple[float, int, str] = (0.0, -1, "")
        self._schedstat_fd: int | None = None
        self._stat_fd: int | None = None
        self._steal_at_beat: float | None = None
        self._cpu_at_beat = 0.0

    # ----------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._schedstat_fd = open_schedstat()
        self._stat_fd = open_stat()
        self._steal_at_beat = steal_s(self._stat_fd)
        self._cpu_at_beat = time.thread_time()
        self._heartbeat = time.perf_counter()
        self._task = asyncio.ensure_future(self._beat())
        self._task.set_name("stall-probe")
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(target=self._sample_loop, name="stall-probe", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stopping.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            from vpa.aio.cancelling import cancel_and_wait

            await cancel_and_wait((self._task,))
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 1.0)
        for fd in (self._stat_fd, self._schedstat_fd):
            if fd is not None:
                os.close(fd)
        self._stat_fd = self._schedstat_fd = None

    async def _beat(self) -> None:
        while True:
            now, cpu = time.perf_counter(), time.thread_time()
            steal = steal_s(self._stat_fd)  # 9 µs a read: every beat, so that a stall's start has one
            with self._lock:
                if self._current is not None:
                    # Read under the lock: after the stall's own start value, which the sampler sets under it.
                    self._close(now, run_delay_s(self._schedstat_fd), steal, cpu)
                self._heartbeat = now
                self._steal_at_beat = steal
                self._cpu_at_beat = cpu
            await asyncio.sleep(self._beat_s)

    # ------------------------------------------------------------------------------- observation

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        # Any thread's: a collection holds the GIL throughout (collections never overlap).
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        seconds = time.perf_counter() - self._gc_started
        longest = (seconds, int(info.get("generation", -1)), threading.current_thread().name)
        self._gc_seconds_total += seconds
        if seconds > self._gc_longest[0]:
            self._gc_longest = longest
        current = self._current
        if current is not None:
            current.gc_seconds += seconds
            if seconds > current.gc_longest[0]:
                current.gc_longest = longest

    def _sample_loop(self) -> None:
        while not self._stopping.wait(self._sample_s):
            frames = sys._current_frames()
            now = time.perf_counter()
            with self._lock:
                if now - self._heartbeat < self._threshold_s:
                    continue
                stack = _stack(frames.get(self._loop_thread), self._depth)
                if stack and stack[-1][2] == "_beat" and stack[-1][0].endswith("stallprobe.py"):
                    stack = ()  # the heartbeat's schedstat read waiting for the GIL back: no code's stall
                if not stack:
                    if not self._count_waiting:
                        continue
                    stack = (WAITING,)
                new = self._current is None
                if self._current is None:
                    self._current = Stall(started=self._heartbeat)
                self._current.samples += 1
                self._current.stacks[stack] += 1
                for one in set(stack):
                    self._current.frames[one] += 1
                for name, ident in self.also_sample.items():
                    other = _stack(frames.get(ident), self._depth) or (IDLE,)
                    self._current.others.setdefault(name, collections.Counter())[other] += 1
                current = self._current
            del frames
            if new:  # read outside the lock and after the frames: the read gives the GIL away
                run_delay = run_delay_s(self._schedstat_fd)
                with self._lock:
                    if current is self._current:
                        current.run_delay_at_start = run_delay

    def _close(self, now: float, run_delay: float | None = None, steal: float | None = None,
               cpu: float | None = None) -> None:
        """End the current stall at `now`; `steal` is the machine's steal now and `cpu` the loop thread's
        CPU time now (the last heartbeat's values, `_steal_at_beat` and `_cpu_at_beat`, are the stall's
        start)."""
        stall = self._current
        assert stall is not None
        self._current = None
        stall.seconds = now - stall.started - self._beat_s
        stall.started_monotonic = time.monotonic() - (time.perf_counter() - stall.started)
        if cpu is not None:
            stall.cpu_seconds = cpu - self._cpu_at_beat
        if run_delay is not None and stall.run_delay_at_start is not None:
            stall.cpu_wait_seconds = run_delay - stall.run_delay_at_start
        if steal is not None and self._steal_at_beat is not None:
            stall.steal_seconds = steal - self._steal_at_beat
        self._stalls += 1
        self._longest.append(stall)
        self._longest.sort(key=lambda s: s.seconds, reverse=True)
        del self._longest[self._keep:]

    # ------------------------------------------------------------------------------------- report

    def render(self, reset: bool = False) -> str:
        """The report; with `reset`, what it holds is then forgotten (the next report covers what follows)."""
        with self._lock:
            longest = list(self._longest)
            stalls = self._stalls
            gc_total, gc_longest = self._gc_seconds_total, self._gc_longest
            if reset:
                self._longest, self._stalls = [], 0
                self._gc_seconds_total, self._gc_longest = 0.0, (0.0, -1, "")
        out = io.StringIO()
        out.write(f"stalls over {self._threshold_s * 1000:.0f} ms: {stalls}; GC total "
                  f"{gc_total:.3f} s, longest collection {gc_longest[0] * 1000:.1f} ms "
                  f"{_where(gc_longest)}\n")  # fmt: skip
        for stall in longest:
            cpu_wait = (f", the loop thread on a CPU {stall.cpu_seconds * 1000:.1f} ms of the "
                        f"{(stall.seconds + self._beat_s) * 1000:.1f} ms between its heartbeats")
            if stall.cpu_wait_seconds is not None:
                cpu_wait += f", waiting for a CPU {stall.cpu_wait_seconds * 1000:.1f} ms"
            if stall.steal_seconds is not None:
                cpu_wait += f", hypervisor steal {stall.steal_seconds * 1000:.0f} ms"
            out.write(f"\n--- {stall.seconds * 1000:.1f} ms, {stall.samples} samples, from "
                      f"{stall.started_monotonic:.4f} s on the monotonic clock{cpu_wait}, GC "
                      f"{stall.gc_seconds * 1000:.1f} ms (longest {stall.gc_longest[0] * 1000:.1f} ms "
                      f"{_where(stall.gc_longest)})\n")  # fmt: skip
            _write_stacks(out, stall.stacks, "  ")
            for name, stacks in sorted(stall.others.items()):
                out.write(f"  meanwhile in {name}:\n")
                _write_stacks(out, stacks, "    ")
        return out.getvalue()


def _where(collection: tuple[float, int, str]) -> str:
    _, generation, thread = collection
    return f"(generation {generation}, thread {thread or '-'})"


def _write_stacks(out: io.StringIO, stacks: collections.Counter[tuple[Frame, ...]], indent: str) -> None:
    for stack, n in stacks.most_common(3):
        out.write(f"{indent}stack seen {n}x:\n")
        for file, line, func in stack:
            out.write(f"{indent}  {_short(file)}:{line} {func}\n" if line else f"{indent}  {file}\n")
