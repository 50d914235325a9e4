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

Also `Deference` (one per process, `DEFERENCE`): latency-critical work of another thread that the main
thread gives way to. The admission webhook serves from a thread of its own and needs the GIL several times
per review (each socket and TLS call gives it away). CPython 3.11 hands the GIL to a waiting thread only
after a switch interval in which the holder did not give it away; but every socket and TLS call of the main
thread gives it away for microseconds and takes it back before the waiting thread is even scheduled, which
restarts that wait. A main thread busy with thousands of API requests a second (a first recommender loop,
a relist) does that every few hundred microseconds, and the webhook's thread waits tens of milliseconds
(the convoy effect; `/debug/stalls` showed the webhook's loop stalled 10-20 ms for the GIL, not for a CPU).
So the main thread, at the points where it may (a paced task's slice boundary, each API request and each
chunk of a streamed answer: `defer()`), gives way while a review is under way: it blocks (the GIL free)
until the review is answered, at most `DEFER_MAX_S`. (Not done: giving way whenever the webhook's thread
is found waiting for the GIL, seen as a futex wait in `/proc/self/task/<tid>/wchan` read without giving the
GIL away; one benchmark run gave it 1.4 s of the main thread's first loop for no better tail.) The owner's
first wait for the GIL, after its poll and before it can say anything, is covered by `arrived()`: the main
thread learns of the work from the kernel (`SIGIO`, `vpa.components.arrivals`) and gives way at once.
Within one pass of its event loop a thread gives way for at most `DEFER_PASS_MAX_S` in all, so that
giving way cannot itself make a pass long.

Must not: sleep for real time, but for that bounded deference; be used across loops (each loop has its own
count); import anything of the autoscaler or the simulator (both use it).
"""

from __future__ import annotations

import asyncio
import threading
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


DEFER_MAX_S: Final = 0.005
"""The longest one `defer()` blocks for another thread's latency-critical work (a webhook review): about
what a review takes with the interpreter to itself, several times over (a review answered early ends it)."""
DEFER_PASS_MAX_S: Final = 0.005
"""The most one thread's `defer()` calls block in one pass of its event loop, together. A main thread that
gives way at every request and slice boundary while reviews arrive back to back gave away a quarter of its
time, several waits in one pass: with the machine's other waits, passes of 25-30 ms during a relist
(`run_scale --stalls`). Past it, the pass carries on; the webhook's thread still gets the GIL every switch
interval."""


class Deference:
    """Latency-critical work of one thread that paced tasks of every other thread give way to.

    The owning thread calls `wanted()` as soon as it may have work (before a TLS read, say: the read itself
    gives the GIL away), `enter()` and `leave()` around each unit of work (a review, until its answer is
    written), `unwanted()` when the wake-up brought no work after all (a read found no data), and
    `disown()` when it stops. Every other thread calls `defer()` where it may give way."""

    __slots__ = (
        "_deferring", "_idle", "_inside", "_owner", "_pass_loop", "_pass_spent_s", "_until", "cut_short",
        "max_wait_s", "noticed", "pass_max_s", "waited_s", "waits",
    )

    def __init__(self, max_wait_s: float = DEFER_MAX_S, pass_max_s: float = DEFER_PASS_MAX_S) -> None:
        self.max_wait_s = max_wait_s
        self.pass_max_s = pass_max_s
        self._pass_loop: asyncio.AbstractEventLoop | None = None  # the loop whose current pass is counted
        self._pass_spent_s = 0.0
        self._idle = threading.Event()
        self._idle.set()
        self._owner = 0
        self._until = 0.0
        self._inside = 0
        self._deferring = False
        self.waits = 0
        """`defer()` calls that waited for the owner's work to be done."""
        self.waited_s = 0.0
        """Their total wait, in seconds."""
        self.noticed = 0
        """`arrived()` calls that marked work wanted."""
        self.cut_short = 0
        """`defer()` calls that did not wait because their loop pass had spent `pass_max_s` giving way."""

    def disown(self) -> None:
        """No owner any more: nobody waits for it."""
        self._owner = 0
        self._inside = 0
        self._idle.set()

    def wanted(self) -> None:
        self._owner = threading.get_ident()
        self._until = time.perf_counter() + self.max_wait_s
        self._idle.clear()

    def arrived(self) -> None:
        """Seen from another thread (a signal handler of the deferring thread): work reached the owner's
        sockets before the owner ran to read it. Wanted, as if the owner had said so itself; nothing when
        there is no owner, or when the calling thread is inside `defer()` already (a handler run from
        within its wait must not take the event's lock again)."""
        if self._owner and not self._deferring:
            self._until = time.perf_counter() + self.max_wait_s
            self._idle.clear()
            self.noticed += 1

    def unwanted(self) -> None:
        if not self._inside:
            self._idle.set()

    def enter(self) -> None:
        self._inside += 1
        self.wanted()

    def leave(self) -> None:
        self._inside = max(0, self._inside - 1)
        if not self._inside:
            self._idle.set()

    def defer(self) -> None:
        """Block until the owning thread's work is done, at most until `max_wait_s` after it was last
        wanted; return at once when nothing is wanted or when called on the owning thread."""
        if self._idle.is_set() or self._deferring or threading.get_ident() == self._owner:
            return
        started = time.perf_counter()
        remaining = self._until - started
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None  # no loop, no pass to bound
        if loop is not None:
            if loop is not self._pass_loop:  # a new pass (the last one's marker ran) or another loop
                self._pass_loop = loop
                self._pass_spent_s = 0.0
                loop.call_soon(self._pass_over)  # runs at the start of the loop's next pass
            budget = self.pass_max_s - self._pass_spent_s
            if budget <= 0:
                self.cut_short += 1
                return
            if budget < remaining:
                remaining = budget
        if remaining > 0:
            self._deferring = True  # the one thread that defers: a signal handler run inside the wait
            try:
                self._idle.wait(remaining)
            finally:
                self._deferring = False
            waited = time.perf_counter() - started
            self.waits += 1
            self.waited_s += waited
            if loop is not None:
                self._pass_spent_s += waited

    def _pass_over(self) -> None:
        self._pass_loop = None



DEFERENCE: Final = Deference()
"""The process's one deference: the admission webhook's thread owns it when it serves from one."""


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
    with `sleep(0)`: it waited for the next slice too, two slices (and two passes' deference, `Deference`)
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
        DEFERENCE.defer()
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
