"""The webhook's own loop thread: calls across loops, cancellation both ways, stop."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
import uvloop

from vpa.aio.executor import start_default_executor
from vpa.components.webhook.loop_thread import (
    OS_NAME_MAX,
    LoopThread,
    on_loop,
)


async def _where() -> tuple[str, asyncio.AbstractEventLoop]:
    return threading.current_thread().name, asyncio.get_running_loop()


async def test_a_call_runs_on_the_threads_loop_and_returns_its_result() -> None:
    thread = LoopThread("serving")
    thread.start()
    try:
        name, loop = await thread.call(_where())
        assert name == "serving"
        assert loop is thread.loop
        assert loop is not asyncio.get_running_loop()
    finally:
        await thread.stop()
    assert not thread.running


async def test_on_loop_sends_a_call_back_to_the_loop_that_owns_the_client() -> None:
    main = asyncio.get_running_loop()
    thread = LoopThread("serving")
    thread.start()
    try:
        async def from_the_thread() -> tuple[str, asyncio.AbstractEventLoop]:
            return await on_loop(main, _where())

        name, loop = await thread.call(from_the_thread())
        assert loop is main
        assert name == threading.current_thread().name
        # On the same loop it is a plain await.
        assert (await on_loop(main, _where()))[1] is main
    finally:
        await thread.stop()


async def test_an_error_on_the_thread_reaches_the_caller() -> None:
    async def fails() -> None:
        raise OSError(98, "Address already in use")

    thread = LoopThread("serving")
    thread.start()
    try:
        with pytest.raises(OSError, match="Address already in use"):
            await thread.call(fails())
    finally:
        await thread.stop()


async def test_cancelling_the_caller_cancels_the_call_on_the_other_loop() -> None:
    thread = LoopThread("serving")
    thread.start()
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    try:
        call = asyncio.ensure_future(thread.call(forever()))
        await asyncio.to_thread(started.wait, 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await asyncio.to_thread(cancelled.wait, 5)
    finally:
        await thread.stop()


async def test_stop_cancels_what_still_runs_there() -> None:
    thread = LoopThread("serving")
    thread.start()
    cancelled = threading.Event()

    async def background() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def spawn() -> None:
        asyncio.get_running_loop().create_task(background())
        await asyncio.sleep(0)

    await thread.call(spawn())
    await thread.stop()
    assert cancelled.is_set()
    assert not thread.running
    await thread.stop()  # idempotent


async def test_a_call_to_a_thread_not_running_is_refused() -> None:
    thread = LoopThread("serving")
    with pytest.raises(RuntimeError, match="not running"):
        await thread.call(_where())
    thread.start()
    with pytest.raises(RuntimeError, match="already started"):
        thread.start()
    await thread.stop()


async def test_spawn_starts_the_thread_without_blocking_the_callers_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Thread.start()` waits for the new thread to be scheduled: `spawn()` waits in a worker thread, so the
    caller's loop keeps turning meanwhile."""
    turns = 0
    stop = asyncio.Event()

    async def turning() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    new_loop = uvloop.new_event_loop

    def slow_new_loop() -> uvloop.Loop:
        threading.Event().wait(0.05)  # a busy machine's wait for the new thread, made visible
        return new_loop()

    monkeypatch.setattr(uvloop, "new_event_loop", slow_new_loop)
    counter = asyncio.create_task(turning())
    await asyncio.sleep(0)
    thread = LoopThread("serving")
    try:
        before = turns
        await thread.spawn()
        assert turns - before > 3  # the loop ran other tasks while the start waited
        assert thread.running
        name, _ = await thread.call(_where())
        assert name == "serving"
    finally:
        stop.set()
        await counter
        await thread.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's thread names are Linux's")
async def test_the_thread_carries_its_name_in_the_kernel_cut_to_what_the_kernel_keeps() -> None:
    thread = LoopThread("admission-webhook")
    thread.start()
    try:
        tid = await thread.call(_native_id())
        assert _comm(tid) == "admission-webhook"[:OS_NAME_MAX]
    finally:
        await thread.stop()


def _comm(tid: int) -> str:
    return Path(f"/proc/self/task/{tid}/comm").read_text().strip()


async def _native_id() -> int:
    return threading.get_native_id()


async def test_the_default_executor_starts_its_workers_up_front_so_to_thread_starts_none() -> None:
    loop = asyncio.get_running_loop()
    executor = start_default_executor(loop, workers=3)
    try:
        workers = {t for t in threading.enumerate() if t.name.startswith("asyncio")}
        assert len(workers) >= 3
        before = threading.active_count()
        names = await asyncio.gather(*(asyncio.to_thread(lambda: threading.current_thread().name)
                                       for _ in range(3)))
        assert threading.active_count() == before  # no thread started on the loop
        assert all(name.startswith("asyncio") for name in names)
    finally:
        executor.shutdown(wait=True)
