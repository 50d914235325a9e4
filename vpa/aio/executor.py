"""The main loop's worker threads, all started before the loop has anything else to do.

Owns: `start_default_executor`, the default executor (what `asyncio.to_thread` and `run_in_executor(None,
...)` use) of the loop the composition root runs, with every worker started up front.

Must not: import anything of vpa.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Final

DEFAULT_EXECUTOR_WORKERS: Final = min(32, (os.cpu_count() or 1) + 4)
"""asyncio's own default executor's size (`ThreadPoolExecutor`'s default)."""


def start_default_executor(loop: asyncio.AbstractEventLoop, workers: int = DEFAULT_EXECUTOR_WORKERS,
                           timeout_s: float = 5.0) -> concurrent.futures.ThreadPoolExecutor:
    """Give `loop` a default executor (what `asyncio.to_thread` and `run_in_executor(None, ...)` use) with
    all of its `workers` threads started now, blocking the caller until they are. Call it before the loop
    has anything else to do.

    Why: a `ThreadPoolExecutor` starts a worker on a `submit` that finds none idle, and `Thread.start()`
    blocks until the new thread has been scheduled and has taken the GIL, which on a busy machine holds the
    main loop during the initial LISTs (a `to_thread` for the webhook's certificates, say). Started up
    front, a `to_thread` finds a thread waiting.
    Best effort: a worker that does not start within `timeout_s` is started later, as before."""
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="asyncio")
    all_started = threading.Barrier(workers)

    def started() -> None:
        # Each worker holds its first job until every worker has one, so that no job finds a worker idle
        # and every submit starts a thread.
        all_started.wait(timeout_s)

    jobs = [executor.submit(started) for _ in range(workers)]
    concurrent.futures.wait(jobs, timeout=timeout_s)
    loop.set_default_executor(executor)
    return executor
