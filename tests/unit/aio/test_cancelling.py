"""`cancel_and_wait`: helper tasks end, their errors stay quiet, and the caller's own cancellation is kept."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from vpa.aio.cancelling import cancel_and_wait


async def slow_to_end(ended: list[str], name: str) -> None:
    """Runs until cancelled, then takes a moment of cleanup before it ends."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.sleep(0.05)
        ended.append(name)
        raise


async def test_the_tasks_are_cancelled_and_awaited() -> None:
    ended: list[str] = []
    tasks = [asyncio.ensure_future(slow_to_end(ended, n)) for n in ("a", "b")]
    await asyncio.sleep(0)
    await cancel_and_wait(tasks)
    assert sorted(ended) == ["a", "b"]
    assert all(t.cancelled() for t in tasks)


async def test_a_task_s_exception_is_neither_raised_nor_left_unretrieved() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    async def done() -> int:
        return 1

    failing = asyncio.ensure_future(fails())
    finished = asyncio.ensure_future(done())
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    try:
        await cancel_and_wait([failing, finished, asyncio.ensure_future(asyncio.sleep(10))])
        del failing
        import gc

        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert finished.result() == 1
    assert reported == []


async def test_the_callers_cancellation_while_waiting_propagates() -> None:
    """The race the old `cancel(); suppress(CancelledError): await task` pattern lost: the caller is
    cancelled while it waits for a helper to end. It must stop, not carry on."""
    ended: list[str] = []
    carried_on: list[bool] = []

    async def caller() -> None:
        helper = asyncio.ensure_future(slow_to_end(ended, "helper"))
        await asyncio.sleep(0)
        await cancel_and_wait([helper])
        carried_on.append(True)

    outer = asyncio.ensure_future(caller())
    await asyncio.sleep(0.01)  # the caller now waits for the helper's cleanup
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert carried_on == []
    await asyncio.sleep(0.1)
    assert ended == ["helper"]


async def test_the_old_pattern_loses_the_callers_cancellation() -> None:
    """Documents why the helper exists: this is what used to happen in the watch loop."""
    carried_on: list[bool] = []

    async def caller() -> None:
        helper = asyncio.ensure_future(slow_to_end([], "helper"))
        await asyncio.sleep(0)
        helper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await helper
        carried_on.append(True)

    outer = asyncio.ensure_future(caller())
    await asyncio.sleep(0.01)
    outer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await outer
    assert carried_on == [True]
