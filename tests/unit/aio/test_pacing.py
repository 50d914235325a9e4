"""`paced`: every item, in order, from a plain or an async iterable, with the event loop given a turn once a
slice is used up (and not before); `drive`: a generator of steps run to its result, paced the same way."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterable, AsyncIterator, Generator, Iterable

import pytest

from vpa.aio.pacing import drive, paced


def _item() -> None:
    until = time.perf_counter() + 0.0001  # CPU work per item
    while time.perf_counter() < until:
        pass


async def _ticks_between(
    items: Iterable[int] | AsyncIterable[int], slice_s: float
) -> tuple[list[int], list[int]]:
    """The items `paced` gave, and how many times a ticker that yields every pass ran before each."""
    ticks = [0]
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks[0] += 1
            await asyncio.sleep(0)

    running = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    got: list[int] = []
    seen: list[int] = []
    async for item in paced(items, slice_s):
        got.append(item)
        seen.append(ticks[0])
        _item()
    done.set()
    await running
    return got, seen


async def _async_items(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


@pytest.mark.parametrize("source", ["list", "async"])
async def test_every_item_in_order_with_a_turn_after_each_used_up_slice(source: str) -> None:
    items: Iterable[int] | AsyncIterable[int] = list(range(40)) if source == "list" else _async_items(40)
    got, seen = await _ticks_between(items, 0.0)  # a zero slice: used up by every item
    assert got == list(range(40))
    assert all(b > a for a, b in itertools.pairwise(seen))  # the ticker ran between every two


async def test_no_turn_before_the_slice_is_used_up() -> None:
    got, seen = await _ticks_between(list(range(40)), 60.0)
    assert got == list(range(40))
    assert len(set(seen)) == 1  # the ticker never ran meanwhile


async def test_drive_runs_the_steps_to_their_result_giving_turns() -> None:
    def steps() -> Generator[None, None, str]:
        for _ in range(5):
            _item()
            yield
        return "done"

    ticks = [0]

    async def ticker() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    running = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks[0]
    assert await drive(steps(), 0.0) == "done"
    assert ticks[0] - before >= 5
    running.cancel()
