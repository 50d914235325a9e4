"""Token bucket: refill, burst, FIFO reservations and cancellation, all on a virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from vpa.kube.ratelimiting import TokenBucket
from vpa.model.clock import VirtualClock


@pytest.mark.parametrize(
    ("qps", "burst", "steps", "expected"),
    [
        # steps: (advance_s, number of try_acquire calls) -> expected successes per step
        (10.0, 5, [(0.0, 7)], [5]),
        (10.0, 5, [(0.0, 5), (0.1, 2)], [5, 1]),
        (10.0, 5, [(0.0, 5), (0.35, 5)], [5, 3]),
        (10.0, 5, [(0.0, 5), (100.0, 10)], [5, 5]),  # refill is capped at burst
        (2.0, 1, [(0.0, 3), (0.49, 1), (0.01, 1)], [1, 0, 1]),
        (1.0, 0, [(0.0, 2)], [1]),  # burst < 1 behaves as 1
        (0.0, 0, [(0.0, 1000)], [1000]),  # qps 0 disables the limiter
        (-1.0, 10, [(0.0, 50)], [50]),
        (50.0, 100, [(0.0, 100), (1.0, 100)], [100, 50]),  # the API client defaults
    ],
    ids=[
        "burst-then-empty",
        "refill-one",
        "refill-partial",
        "refill-capped",
        "fraction-not-enough",
        "burst-zero-is-one",
        "disabled-zero",
        "disabled-negative",
        "client-defaults",
    ],
)
def test_try_acquire_table(
    qps: float, burst: int, steps: list[tuple[float, int]], expected: list[int]
) -> None:
    clock = VirtualClock()
    bucket = TokenBucket(qps, burst, clock)
    got = []
    for advance_s, calls in steps:
        clock.advance(advance_s)
        got.append(sum(bucket.try_acquire() for _ in range(calls)))
    assert got == expected


@pytest.mark.parametrize(
    ("qps", "burst", "n", "expected_delays"),
    [
        (10.0, 2, 5, [0.0, 0.0, 0.1, 0.2, 0.3]),
        (1.0, 1, 3, [0.0, 1.0, 2.0]),
        (0.0, 1, 3, [0.0, 0.0, 0.0]),
    ],
    ids=["queue-behind-burst", "one-per-second", "disabled"],
)
def test_reserve_delays_are_fifo(qps: float, burst: int, n: int, expected_delays: list[float]) -> None:
    bucket = TokenBucket(qps, burst, VirtualClock())
    assert [round(bucket.reserve(), 9) for _ in range(n)] == expected_delays


async def test_acquire_waits_on_the_clock() -> None:
    clock = VirtualClock()
    bucket = TokenBucket(1.0, 1, clock)
    await bucket.acquire()  # the burst token: no wait
    waiter = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not waiter.done()
    clock.advance(0.5)
    await asyncio.sleep(0)
    assert not waiter.done()
    clock.advance(0.5)
    await asyncio.wait_for(waiter, 1.0)


async def test_cancelled_acquire_returns_its_token() -> None:
    clock = VirtualClock()
    bucket = TokenBucket(1.0, 1, clock)
    await bucket.acquire()
    waiter = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    assert bucket.tokens() == pytest.approx(-1.0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert bucket.tokens() == pytest.approx(0.0)
    clock.advance(1.0)
    assert bucket.try_acquire()
