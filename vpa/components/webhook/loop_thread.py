"""An event loop of its own, on a thread of its own, for the admission webhook.

Owns: `LoopThread` (starts a thread running a fresh uvloop loop, without blocking the caller's loop with
`spawn()`, runs coroutines on it from another loop, stops it and joins the thread; the thread carries its
name in the kernel too (`name_os_thread`), where `top -H` and `ps -L` read it) and
`on_loop` (awaits a coroutine on a given loop from whichever loop the caller runs on: how the main loop
starts and stops what runs on the webhook's thread).

Why: the webhook shares the process with the recommender and the watch caches. On one event loop a review
waits behind every callback that is ready when it arrives (a relist's and a recommender loop's paced
slices, page parses, status writes), several times per review (read, admit, write), so its tail grows with
the cluster however short each slice is. On its own loop a review waits only for the GIL, which the main
thread hands over at CPython's switch interval while both want it.

Must not: let asyncio objects (futures, queues, sessions, tasks) cross loops: everything the webhook's loop
creates stays on it, and calls into the other loop go through `on_loop` (or `call_soon_threadsafe`).
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

import uvloop

T = TypeVar("T")

async def on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` run on `loop`; directly when the caller already runs there. Cancelling the caller
    cancels the call on `loop`."""
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


class LoopThread:
    """A daemon thread running its own event loop until `stop()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"loop thread {self.name!r} already started")
        loop = uvloop.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            name_os_thread(self.name)
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self.loop = loop
        self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()

    async def spawn(self) -> None:
        """`start()` from a worker thread, for a caller on a running loop: `Thread.start()` and the new loop's
        first turn wait for the new thread to be scheduled and to take the GIL, which on a busy machine would
        hold the main loop at start."""
        await asyncio.to_thread(self.start)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this thread's loop and wait for its result from the caller's loop."""
        if self.loop is None or not self.running:
            coro.close()
            raise RuntimeError(f"loop thread {self.name!r} is not running")
        return await on_loop(self.loop, coro)

    async def stop(self) -> None:
        """Cancel what still runs on the loop, stop it and join the thread (without blocking the caller's
        loop). Idempotent."""
        thread, loop = self._thread, self.loop
        if thread is None or loop is None:
            return
        self._thread = None
        if thread.is_alive():
            if loop.is_running():
                await on_loop(loop, _cancel_others())
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)


_PR_SET_NAME: Final = 15
OS_NAME_MAX: Final = 15
"""The kernel keeps a thread's name in 16 bytes, the last one a NUL."""


def name_os_thread(name: str) -> bool:
    """Give the calling thread `name` (its first `OS_NAME_MAX` bytes) in the kernel, where Python's own
    thread names do not reach. Best effort: False where the platform has no `prctl`."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
        return int(libc.prctl(_PR_SET_NAME, name.encode()[:OS_NAME_MAX], 0, 0, 0)) == 0
    except (AttributeError, OSError, TypeError):
        return False


async def _cancel_others() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
