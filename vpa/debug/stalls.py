"""Event-loop stall attribution for `--profiling` (`/debug/stalls`): which code held the loop, and how long.

Owns: `StallProbe`, a heartbeat the event loop refreshes every `beat_s` and a sampling thread that, while the
heartbeat is older than `threshold_s`, samples the loop thread's Python stack (`sys._current_frames`); plus a
`gc.callbacks` hook timing every cyclic-GC collection of any thread (a collection holds the GIL, so it stops
every thread). Each stall (from the last heartbeat before it to the first after it) is kept with its samples'
most frequent stacks (innermost first), the loop thread's CPU time between the heartbeats around it
(`time.thread_time`: a stall with little of it was the machine's, not the code's) and the collections that
ran inside it; the `keep` longest are rendered as text.

Must not: run unless asked (the sampling thread takes the GIL while the loop is stalled, which lengthens the
stall it observes a little), touch anything but its own state, or raise into the event loop. A sample can
only be taken when the loop thread releases the GIL, so a long C call (a collection, one big parse) shows up
as the frame that made it.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import io
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from vpa.aio.cancelling import cancel_and_wait

Frame = tuple[str, int, str]  # (file, line, function)


@dataclass
class Stall:
    """One stall: how long the loop was silent, its samples' stacks by count, and the collections in it."""

    started: float  # perf_counter of the last heartbeat before it
    seconds: float = 0.0
    samples: int = 0
    stacks: collections.Counter[tuple[Frame, ...]] = field(default_factory=collections.Counter)
    gc_seconds: float = 0.0
    gc_longest: tuple[float, int, str] = (0.0, -1, "")  # (seconds, generation, thread name)
    cpu_seconds: float = 0.0  # the loop thread's CPU time between the heartbeats around it


def _stack(frame: FrameType | None, depth: int) -> tuple[Frame, ...]:
    """The innermost `depth` frames down to the callback the event loop runs (the loop's own frames are
    left out); empty when the loop itself is innermost, i.e. waiting for I/O (the process was not
    scheduled, which is no code's doing)."""
    out: list[Frame] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        file = code.co_filename
        if file.endswith(("asyncio/events.py", "asyncio/base_events.py", "asyncio/runners.py")):
            break
        if file.endswith("selectors.py"):
            return ()
        out.append((file, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(out)


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
                 keep: int = 20, depth: int = 12) -> None:
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
        self._cpu_at_beat = 0.0

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
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
            await cancel_and_wait((self._task,))
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 1.0)

    async def _beat(self) -> None:
        while True:
            now, cpu = time.perf_counter(), time.thread_time()
            with self._lock:
                if self._current is not None:
                    self._close(now, cpu)
                self._heartbeat = now
                self._cpu_at_beat = cpu
            await asyncio.sleep(self._beat_s)

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
                if not stack:
                    continue
                if self._current is None:
                    self._current = Stall(started=self._heartbeat)
                self._current.samples += 1
                self._current.stacks[stack] += 1
            del frames

    def _close(self, now: float, cpu: float) -> None:
        """End the current stall at `now`; `cpu` is the loop thread's CPU time now (the last heartbeat's,
        `_cpu_at_beat`, is the stall's start)."""
        stall = self._current
        assert stall is not None
        self._current = None
        stall.seconds = now - stall.started - self._beat_s
        stall.cpu_seconds = cpu - self._cpu_at_beat
        self._stalls += 1
        self._longest.append(stall)
        self._longest.sort(key=lambda s: s.seconds, reverse=True)
        del self._longest[self._keep:]

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
            between_ms = (stall.seconds + self._beat_s) * 1000
            out.write(f"\n--- {stall.seconds * 1000:.1f} ms, {stall.samples} samples, the loop thread on a "
                      f"CPU {stall.cpu_seconds * 1000:.1f} ms of the {between_ms:.1f} ms between its "
                      f"heartbeats, GC {stall.gc_seconds * 1000:.1f} ms (longest "
                      f"{stall.gc_longest[0] * 1000:.1f} ms {_where(stall.gc_longest)})\n")  # fmt: skip
            for stack, n in stall.stacks.most_common(3):
                out.write(f"  stack seen {n}x:\n")
                for file, line, func in stack:
                    out.write(f"    {_short(file)}:{line} {func}\n")
        return out.getvalue()


def _where(collection: tuple[float, int, str]) -> str:
    _, generation, thread = collection
    return f"(generation {generation}, thread {thread or '-'})"
