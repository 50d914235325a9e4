"""Slices of CPU work on the event loop, fair among every paced task of that loop.

Owns: `Slices`, what a long piece of CPU work (parsing a LIST, converting PodMetrics, a recommender step)
asks before each item: `due()` once its slice is used up, then `await pause()` to let the event loop run
everything else before it carries on; `turn()`, the yield that lets what the loop's timers woke run first.

Why shared: a task that yields gives the loop back only until its turn comes again in the loop's next pass,
and every task ready in that pass runs one slice in it. Each with a slice of its own (3 ms), a relist of
pods, one of VPAs, the target resolver's LIST and a recommender loop at once made one pass 12 ms and more,
and a timer (a lease renewal, `/metrics`, the lag monitor) waited for all of it: `/debug/stalls` showed
stalls of 30-50 ms holding two or three paced tasks' frames. So the loop's pass is the budget: a task that
pauses learns how many paced tasks paused in the pass before (a marker scheduled ahead of them counts them)
and takes `slice_s` divided among them, at least `MIN_SLICE_S`, so one pass of paced work stays about
`slice_s` however many tasks share it, and every task still gets a share each pass.

Must not: sleep for real time; be used across loops (each loop has its own
count); import anything of the autoscaler or the simulator (both use it).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Generator, Iterable
from typing import Final, TypeVar

T = TypeVar("T")

SLICE_S: Final = 0.003
"""A pass's paced work, in seconds: the webhook measured p99 31 ms with 10 ms slices and 12 ms with 3 ms
while it still shared the main loop (`benchmarks.webhook_during_recommender`)."""
MIN_SLICE_S: Final = 0.0005
"""The least a paced task gets per pass however many share it, so that each makes progress (never more than
the task's own `slice_s`: a task asking for a zero slice yields after every item)."""


async def paced(items: Iterable[T], slice_s: float = SLICE_S) -> AsyncIterator[T]:
    """Each of `items`, giving the event loop a turn whenever `slice_s` of CPU time has gone by since the
    last one: `async for item in paced(items)` is how a long piece of CPU work shares its loop."""
    started = time.perf_counter()
    for item in items:
        yield item
        if time.perf_counter() - started >= slice_s:
            await asyncio.sleep(0)
            started = time.perf_counter()


async def turn() -> None:
    """Give the event loop a turn in which what its timers wake runs before this task goes on.

    On uvloop a pass runs the timers that fell due, then every callback already queued, then polls for I/O.
    A timer that falls due during a task's slice (the lag monitor's, a lease renewal's, the heap keeper's)
    runs at the start of the next pass, but the task it wakes is queued behind the wake-up the slice queued
    with `sleep(0)`: it waited for the next slice too, two slices
    where one was meant (`benchmarks.watch_cache`: two slices inside one 1 ms ticker's gap of 10-14 ms).
    Yielding twice puts the timer's work ahead of the slice's second wake-up, for one more pass (an empty
    poll, microseconds) per slice."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


class _Pass:
    """One loop's count of the paced tasks that paused in its current pass."""

    __slots__ = ("last", "marker", "pausing")

    def __init__(self) -> None:
        self.pausing = 0  # tasks paused in this pass so far
        self.last = 1  # tasks that paused in the pass before
        self.marker = False  # a marker is scheduled for the next pass

    def next_pass(self) -> None:
        self.last = max(1, self.pausing)
        self.pausing = 0
        self.marker = False


_passes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pass] = weakref.WeakKeyDictionary()


class Slices:
    """One paced task's slices. Create it inside the running loop, at the start of the work."""

    __slots__ = ("_loop", "_pass", "budget_s", "slice_s", "started")

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self._loop = asyncio.get_running_loop()
        shared = _passes.get(self._loop)
        if shared is None:
            shared = _passes[self._loop] = _Pass()
        self._pass = shared
        self.slice_s = slice_s
        self.budget_s = slice_s
        self.started = time.perf_counter()

    def due(self) -> bool:
        """This slice is used up: `pause()` before the next item."""
        return time.perf_counter() - self.started >= self.budget_s

    async def pause(self) -> None:
        """Let the loop run everything else that is ready, then start this task's next slice with its share
        of the pass."""
        shared = self._pass
        shared.pausing += 1
        if not shared.marker:
            shared.marker = True
            # Scheduled before this task's own wake-up (and every later one's), so it runs first in the
            # next pass and sees how many paused in this one.
            self._loop.call_soon(shared.next_pass)
        await turn()
        self.budget_s = min(self.slice_s, max(MIN_SLICE_S, self.slice_s / shared.last))
        self.started = time.perf_counter()

    def restart(self) -> None:
        """A fresh slice without yielding (after the task waited for I/O, which already gave the loop
        back)."""
        self.started = time.perf_counter()


async def drive(steps: Generator[None, None, T], slice_s: float) -> T:
    """Run a pure-layer generator of small steps (e.g. `ClusterState.maybe_garbage_collect_steps`) to its
    end, sharing the event loop as `paced` does; returns the generator's result."""
    result: list[T] = []

    def run() -> Generator[None, None, None]:
        result.append((yield from steps))

    async for _ in paced(run(), slice_s):
        pass
    return result[0]
