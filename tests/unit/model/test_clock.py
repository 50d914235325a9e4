"""The virtual clock: manual advance wakes exactly the due sleepers; scaled time runs faster."""

from __future__ import annotations

import asyncio

import pytest

from vpa.model.clock import Clock, RealClock, VirtualClock


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(RealClock(), Clock)
    assert isinstance(VirtualClock(), Clock)


def test_frozen_clock_only_moves_when_advanced() -> None:
    clock = VirtualClock(start=1000.0)
    assert clock.now() == 1000.0
    clock.advance(30)
    assert clock.now() == 1030.0
    clock.set(2000.0)
    assert clock.now() == 2000.0
    clock.set(10.0)  # never backwards
    assert clock.now() == 2000.0
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_advance_wakes_due_sleepers_only() -> None:
    clock = VirtualClock(start=0.0)
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("short", 10)), asyncio.create_task(sleeper("long", 3600))]
    await asyncio.sleep(0)
    clock.advance(9)
    await asyncio.sleep(0.01)
    assert woke == []
    clock.advance(1)
    await asyncio.sleep(0.01)
    assert woke == ["short"]
    clock.advance(3600)
    await asyncio.gather(*tasks)
    assert woke == ["short", "long"]


async def test_zero_sleep_yields() -> None:
    clock = VirtualClock(start=0.0)
    await asyncio.wait_for(clock.sleep(0), timeout=1)


async def test_scaled_clock_runs_faster_than_real_time() -> None:
    clock = VirtualClock(start=0.0, time_scale=3600.0)  # an hour per second
    await asyncio.wait_for(clock.sleep(360), timeout=2)  # ~0.1 s of real time
    assert clock.now() >= 360


async def test_changing_scale_replans_sleepers() -> None:
    clock = VirtualClock(start=0.0, time_scale=0.0)
    task = asyncio.create_task(clock.sleep(100))
    await asyncio.sleep(0.01)
    assert not task.done()
    clock.set_time_scale(100_000.0)
    await asyncio.wait_for(task, timeout=2)
    with pytest.raises(ValueError):
        clock.set_time_scale(-1)
