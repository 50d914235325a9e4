"""One producer feeding a few concurrent writers: CPU work in one task, at most `workers` writes in flight.

Owns: `produce_and_write`. The producer computes each item (paced by itself) and hands it over through a short
queue; the writers only await I/O. So the CPU work stays in one task that yields to the loop's timers, and a
slow API server holds back only the producer, by the queue's bound.

Must not: import anything of vpa.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

J = TypeVar("J")


async def produce_and_write(produce: Callable[[Callable[[J], Awaitable[None]]], Awaitable[None]],
                            write: Callable[[J], Awaitable[None]], workers: int) -> None:
    """One producer (the CPU work, paced by itself) feeding `workers` concurrent writers through a short
    queue: CPU work stays in one task, so it yields to timers, and at most `workers` writes are in flight."""
    queue: asyncio.Queue[J] = asyncio.Queue(maxsize=max(1, workers))
    done = object()

    async def worker() -> None:
        while True:
            item = await queue.get()
            if item is done:
                return
            await write(item)

    tasks = [asyncio.create_task(worker()) for _ in range(max(1, workers))]
    try:
        await produce(queue.put)
        for _ in tasks:
            await queue.put(done)  # type: ignore[arg-type]
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
