"""Ending helper tasks without losing the caller's own cancellation.

Owns: `cancel_and_wait` — cancel some tasks and wait until each has ended, its exception (if any)
retrieved so asyncio never logs it as unretrieved.

The pattern it replaces, `task.cancel(); with suppress(CancelledError): await task`, has a race: when the
*caller* is cancelled while it awaits the helper, the CancelledError it receives is its own, and
suppressing it makes the caller carry on as if nothing happened. A watch loop then never stops and a
shutdown hangs. Here the caller's cancellation always propagates; the tasks' own outcomes never do.

Must not: raise the tasks' exceptions, or wait for anything but the given tasks. Standard library only,
so every layer (the simulator included) can use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel every task not yet done and wait until all have ended. A cancellation of the caller while
    waiting propagates (the tasks stay cancelled); the tasks' own exceptions are retrieved, not raised."""
    tasks = list(tasks)
    for task in tasks:
        if not task.done():
            task.cancel()
    try:
        pending = [task for task in tasks if not task.done()]
        if pending:
            await asyncio.wait(pending)
    finally:
        for task in tasks:
            if task.done() and not task.cancelled():
                task.exception()  # mark it retrieved
