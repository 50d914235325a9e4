"""The prompt-action trigger on a virtual clock: timeout, coalescing delay, clearing."""

from __future__ import annotations

import asyncio

import pytest

from vpa.components.triggering import Trigger
from vpa.model.clock import VirtualClock


async def _spin() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_timeout_without_fire_returns_nothing() -> None:
    clock = VirtualClock()
    trigger = Trigger(clock, delay_s=1.0)
    waiting = asyncio.ensure_future(trigger.wait(60.0))
    await _spin()
    clock.advance(59.0)
    await _spin()
    assert not waiting.done()
    clock.advance(1.0)
    await _spin()
    assert waiting.result() == set()


async def test_fired_keys_come_back_after_the_delay_with_those_that_joined() -> None:
    clock = VirtualClock()
    trigger = Trigger(clock, delay_s=1.0)
    waiting = asyncio.ensure_future(trigger.wait(60.0))
    await _spin()
    trigger.fire("default/a")
    await _spin()
    assert not waiting.done()  # the coalescing delay has not passed
    trigger.fire("default/b")
    trigger.fire("default/a")
    clock.advance(1.0)
    await _spin()
    assert waiting.result() == {"default/a", "default/b"}
    assert trigger.pending == frozenset()
    assert trigger.fired_total == 3


async def test_keys_fired_before_waiting_return_without_a_timeout() -> None:
    clock = VirtualClock()
    trigger = Trigger(clock)
    trigger.fire("x")
    assert await asyncio.wait_for(trigger.wait(3600.0), 1.0) == {"x"}


async def test_clear_drops_pending_keys() -> None:
    clock = VirtualClock()
    trigger = Trigger(clock)
    trigger.fire("x")
    trigger.clear()
    waiting = asyncio.ensure_future(trigger.wait(5.0))
    await _spin()
    clock.advance(5.0)
    await _spin()
    assert waiting.result() == set()


def test_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="delay_s"):
        Trigger(VirtualClock(), delay_s=-1.0)
