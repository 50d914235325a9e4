"""Token bucket: refill, burst, FIFO reservations and cancellation, all on a virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from vpa.kube.ratelimiting import ServerPacing, TokenBucket
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


# ------------------------------------------------------------------------------------------ ServerPacing


@pytest.mark.parametrize(
    ("batches", "window", "holds"),
    [
        # batches: the answers ("ok" or a throttled "429") to requests in flight together; the clock moves
        # past any hold (Retry-After 1 s) between batches
        ([], 8, 0),
        ([["429"]], 4, 1),
        ([["429", "429", "429"]], 4, 1),  # one episode halves once, however many requests it rejected
        ([["429"], ["429"]], 2, 2),  # a new episode after the hold halves again
        ([["429"], ["429"], ["ok"] * 2, ["ok"] * 2, ["ok"] * 3], 4, 2),  # grows back by one per window of oks
        ([["ok"] * 8] * 10, 8, 0),  # never above the maximum
    ],
    ids=["starts-at-max", "halves", "one-episode-one-halving", "episodes", "additive-increase", "capped"],
)
async def test_server_pacing_window(batches: list[list[str]], window: int, holds: int) -> None:
    clock = VirtualClock()
    pacing = ServerPacing(clock, 8)
    for batch in batches:
        for _ in batch:
            await pacing.enter()
        for answer in batch:
            pacing.leave(throttled=answer == "429", retry_after_s=1.0)
        clock.advance(2.0)
    assert (pacing.window, pacing.holds, pacing.in_flight) == (window, holds, 0)


async def test_server_pacing_limits_requests_in_flight_in_arrival_order() -> None:
    clock = VirtualClock()
    pacing = ServerPacing(clock, 2)
    order: list[int] = []

    async def request(n: int) -> None:
        await pacing.enter()
        order.append(n)

    tasks = [asyncio.create_task(request(n)) for n in range(4)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert order == [0, 1]
    assert pacing.in_flight == 2
    pacing.leave(throttled=False)
    await asyncio.sleep(0)
    assert order == [0, 1, 2]
    tasks[3].cancel()  # a waiter that gives up frees its place in the queue
    pacing.leave(throttled=False)
    await asyncio.gather(*tasks, return_exceptions=True)
    assert order == [0, 1, 2]
    assert pacing.in_flight == 1


async def test_server_pacing_hold_delays_new_requests_until_retry_after() -> None:
    clock = VirtualClock()
    pacing = ServerPacing(clock, 4, max_hold_s=10.0)
    await pacing.enter()
    pacing.leave(throttled=True, retry_after_s=30.0)  # capped at max_hold_s
    started = clock.monotonic()
    entered = asyncio.create_task(pacing.enter())
    await asyncio.sleep(0)
    assert not entered.done()
    clock.advance(9.9)
    await asyncio.sleep(0)
    assert not entered.done()
    clock.advance(0.2)
    await asyncio.wait_for(entered, 1)
    assert clock.monotonic() - started >= 10.0
