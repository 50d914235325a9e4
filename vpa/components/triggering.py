"""A prompt-action trigger: lets a ticking loop act on a change before its next tick.

Owns: `Trigger`. Watch handlers call `fire(key)` (synchronous, cheap: it records the key and wakes the
waiter); the loop calls `await wait(timeout_s)`, which returns the set of keys fired — after a coalescing
delay (`delay_s`, so a burst of changes becomes one prompt pass) — or an empty set when `timeout_s`
passes first (time to tick). `clear()` drops pending keys when a full pass is about to cover them anyway.
All waiting goes through the injected `Clock`, so virtual time in tests and `vpa sim` drives it.

A helper for components, not a component: it decides nothing about what the prompt pass does (the
recommender's OOM pass and the updater's in-place pass are their own). Must not: do I/O or log.
"""

from __future__ import annotations

import asyncio

from vpa.aio.cancelling import cancel_and_wait
from vpa.model.clock import Clock


class Trigger:
    """Keys fired since the last `wait` returned them; one waiter at a time."""

    def __init__(self, clock: Clock, delay_s: float = 0.0) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self._clock = clock
        self.delay_s = delay_s
        self._keys: set[str] = set()
        self._fired = asyncio.Event()
        self.fired_total = 0

    def fire(self, key: str) -> None:
        self._keys.add(key)
        self.fired_total += 1
        self._fired.set()

    def clear(self) -> None:
        self._keys.clear()
        self._fired.clear()

    @property
    def pending(self) -> frozenset[str]:
        return frozenset(self._keys)

    async def wait(self, timeout_s: float) -> set[str]:
        """The keys fired (after `delay_s` more for others to join them), or an empty set after
        `timeout_s` without any."""
        if not self._keys:
            self._fired.clear()
            sleeper = asyncio.ensure_future(self._clock.sleep(max(0.0, timeout_s)))
            waiter = asyncio.ensure_future(self._fired.wait())
            try:
                await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait((sleeper, waiter))
            if not self._keys:
                return set()
        if self.delay_s > 0:
            await self._clock.sleep(self.delay_s)
        keys, self._keys = self._keys, set()
        self._fired.clear()
        return keys
