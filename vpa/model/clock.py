"""Time as the rest of the code base sees it: the `Clock` protocol and its two implementations.

Owns: reading "now" (Unix seconds), a monotonic reading for durations, and sleeping. `RealClock` is the
wall clock; `VirtualClock` is driven by tests and by the simulated cluster: it can run faster than real time
(`time_scale`) and can be advanced by hand, waking every sleeper whose deadline has passed.

Must not: be read through any global. Every component receives its clock explicitly.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """What code needs of time. `now()` is Unix seconds; `monotonic()` only measures intervals."""

    def now(self) -> float: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The wall clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """A clock whose time passes `time_scale` times faster than real time and can be advanced at will.

    With `time_scale=0` time stands still except through `advance()` / `set()`: fully deterministic tests.
    Virtual time is monotonic; `monotonic()` and `now()` move together.
    """

    def __init__(self, start: float = 1_767_225_600.0, time_scale: float = 0.0) -> None:
        # Default start: 2026-01-01T00:00:00Z, so timestamps look realistic.
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self._base_virtual = start
        self._base_real = time.monotonic()
        self._scale = time_scale
        self._wakers: set[asyncio.Future[None]] = set()

    @property
    def time_scale(self) -> float:
        return self._scale

    def set_time_scale(self, time_scale: float) -> None:
        """Change the speed from now on (0 freezes time); sleepers re-plan their real-time waits."""
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self._rebase()
        self._scale = time_scale
        self._wake_all()

    def now(self) -> float:
        if self._scale == 0:
            return self._base_virtual
        return self._base_virtual + (time.monotonic() - self._base_real) * self._scale

    def monotonic(self) -> float:
        return self.now()

    def advance(self, seconds: float) -> None:
        """Jump forward by `seconds` of virtual time and wake sleepers that are due."""
        if seconds < 0:
            raise ValueError(f"cannot advance a clock backwards ({seconds} s)")
        self._rebase()
        self._base_virtual += seconds
        self._wake_all()

    def set(self, timestamp: float) -> None:
        """Jump to `timestamp` (never backwards)."""
        self.advance(max(0.0, timestamp - self.now()))

    async def sleep(self, seconds: float) -> None:
        deadline = self.now() + max(0.0, seconds)
        loop = asyncio.get_running_loop()
        while True:
            remaining = deadline - self.now()
            if remaining <= 0:
                # Yield once so a zero sleep still lets other tasks run, like asyncio.sleep(0).
                await asyncio.sleep(0)
                return
            waker: asyncio.Future[None] = loop.create_future()
            self._wakers.add(waker)
            try:
                timeout = remaining / self._scale if self._scale > 0 else None
                await asyncio.wait([waker], timeout=timeout)
            finally:
                self._wakers.discard(waker)
                if not waker.done():
                    waker.cancel()

    def _rebase(self) -> None:
        now_real = time.monotonic()
        if self._scale:
            self._base_virtual += (now_real - self._base_real) * self._scale
        self._base_real = now_real

    def _wake_all(self) -> None:
        for waker in list(self._wakers):
            if not waker.done():
                waker.set_result(None)
