"""Long CPU work on the event loop, shared with everything else the loop runs.

Owns: `paced`, the one way a long piece of CPU work (parsing a LIST, converting PodMetrics, a recommender
step, a burst of watch events) goes through its items: `async for item in paced(items)` gives the event
loop a turn whenever `slice_s` has gone by since the last one, so the leases, the watches, `/metrics` and
the health probes keep running however large the cluster; and `drive`, the same for a pure-layer generator
of small steps.

Must not: sleep for real time; import anything of the autoscaler or the simulator (both use it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Generator, Iterable
from typing import Final, TypeVar

T = TypeVar("T")

SLICE_S: Final = 0.003
"""How long paced work runs before the event loop gets a turn, in seconds: short enough that the loop's
timers run on time, long enough that yielding costs little beside the work."""


async def paced(items: Iterable[T] | AsyncIterable[T], slice_s: float = SLICE_S) -> AsyncIterator[T]:
    """Each of `items`, giving the event loop a turn whenever `slice_s` has gone by since the last one (the
    time an async iterable waited counts too: it costs at most one spare turn)."""
    started = time.perf_counter()
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
            if time.perf_counter() - started >= slice_s:
                await asyncio.sleep(0)
                started = time.perf_counter()
        return
    for item in items:
        yield item
        if time.perf_counter() - started >= slice_s:
            await asyncio.sleep(0)
            started = time.perf_counter()


async def drive(steps: Generator[None, None, T], slice_s: float = SLICE_S) -> T:
    """Run a pure-layer generator of small steps (e.g. `ClusterState.maybe_garbage_collect_steps`) to its
    end, sharing the event loop as `paced` does; returns the generator's result."""
    result: list[T] = []

    def run() -> Generator[None, None, None]:
        result.append((yield from steps))

    async for _ in paced(run(), slice_s):
        pass
    return result[0]
