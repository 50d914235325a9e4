"""Client-side rate limiting: a token bucket driven by an injected clock.

Owns: the `TokenBucket` every API call goes through (`--kube-api-qps` 50 / `--kube-api-burst` 100) and that
the updater reuses for evictions and in-place resizes (`--eviction-rate-limit` / `--eviction-rate-burst`).
Semantics follow `golang.org/x/time/rate.Limiter.Wait`: tokens refill continuously at `qps` up to `burst`;
`acquire()` reserves a token at once (the bucket may go negative) and sleeps until that reservation is due,
so waiters are served in arrival order. A `qps` of zero or less disables limiting.

Must not: read the wall clock or `asyncio` time directly (tests drive it with a `VirtualClock`), or know
about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque

from vpa.model.clock import Clock

# Clocks read Unix-epoch-sized floats (~1.8e9 s), whose resolution is ~2e-7 s: without a little slack a
# token that is due "exactly now" can appear to be a hair short.
_EPSILON = 1e-4


class TokenBucket:
    """A token bucket with `qps` tokens per second and room for `burst` tokens; starts full."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        if math.isnan(qps):
            raise ValueError("qps must be a number")
        self._qps = float(qps)
        # A finite rate with burst < 1 could never hand out a token; client-go treats it as 1.
        self._burst = max(1, int(burst))
        self._clock = clock
        self._tokens = float(self._burst)
        self._last = clock.monotonic()

    @classmethod
    def unlimited(cls, clock: Clock) -> TokenBucket:
        return cls(0.0, 1, clock)

    @property
    def enabled(self) -> bool:
        return self._qps > 0

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    def tokens(self) -> float:
        """Tokens available now (negative while reservations are waiting)."""
        self._refill()
        return self._tokens

    def _refill(self) -> None:
        now = self._clock.monotonic()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
        self._last = max(self._last, now)

    def try_acquire(self) -> bool:
        """Take a token if one is available now; never waits."""
        if not self.enabled:
            return True
        self._refill()
        if self._tokens >= 1.0 - _EPSILON:
            self._tokens -= 1.0
            return True
        return False

    def reserve(self) -> float:
        """Take a token now, possibly borrowing from the future; return how many seconds to wait for it."""
        if not self.enabled:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        if self._tokens >= -_EPSILON:
            return 0.0
        return -self._tokens / self._qps

    def cancel_reservation(self) -> None:
        """Give back a token whose wait was abandoned, so later callers are not delayed by it."""
        if not self.enabled:
            return
        self._refill()
        self._tokens = min(float(self._burst), self._tokens + 1.0)

    async def acquire(self) -> None:
        """Wait for a token. Cancelling the wait returns the reserved token."""
        delay = self.reserve()
        if delay <= 0:
            return
        try:
            await self._clock.sleep(delay)
        except asyncio.CancelledError:
            self.cancel_reservation()
            raise

    def __repr__(self) -> str:
        return f"TokenBucket(qps={self._qps}, burst={self._burst})"


class ServerPacing:
    """Pacing by the server's answers rather than a fixed rate, for servers that do their own flow control.

    A window of requests in flight that grows by one per window's worth of successes (additive increase)
    and halves when the server throttles (multiplicative decrease, once per throttling episode), plus a
    hold: after a throttled answer no new request starts until the server's `Retry-After` has passed, so
    a burst of waiting requests cannot turn into a storm of rejected ones. `active` stays False (and the
    caller keeps its token bucket) until `engage()` is called, when the server shows it paces requests.
    """

    def __init__(self, clock: Clock, max_in_flight: int, *, initial_in_flight: int | None = None,
                 max_hold_s: float = 60.0) -> None:
        self._clock = clock
        self._max = max(1, int(max_in_flight))
        self._window = float(min(self._max, max(1, initial_in_flight or self._max)))
        self._max_hold_s = max_hold_s
        self._in_flight = 0
        self._hold_until = -math.inf
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.active = False
        self.throttled = 0  # throttled answers seen
        self.holds = 0  # throttling episodes (each halves the window once)

    def engage(self) -> None:
        self.active = True

    @property
    def window(self) -> int:
        return max(1, int(self._window))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def wait_hold(self) -> None:
        """Wait until no throttling hold is in force (watches wait only for this)."""
        while True:
            remaining = self._hold_until - self._clock.monotonic()
            if remaining <= 0:
                return
            await self._clock.sleep(remaining)

    async def enter(self) -> None:
        """Wait for the hold and for room in the window (in arrival order), then count one request in
        flight."""
        queued = False
        while True:
            await self.wait_hold()
            if self._in_flight < self.window and (queued or not self._waiters):
                self._in_flight += 1
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            queued = True
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done():
                    self._wake()  # pass the room it was given on
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
                raise

    def leave(self, *, throttled: bool, retry_after_s: float | None = None) -> None:
        """A request that `enter`ed got its answer (`throttled`: a 429) or failed without one."""
        self._in_flight = max(0, self._in_flight - 1)
        now = self._clock.monotonic()
        if throttled:
            self.throttled += 1
            hold = min(self._max_hold_s, retry_after_s if retry_after_s is not None else 1.0)
            if self._hold_until <= now:  # a new episode: shrink once, not once per rejected request
                self.holds += 1
                self._window = max(1.0, self._window / 2)
            self._hold_until = max(self._hold_until, now + hold)
        elif self._window < self._max:
            self._window = min(float(self._max), self._window + 1.0 / self._window)
        self._wake()

    def _wake(self) -> None:
        room = self.window - self._in_flight
        while room > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                room -= 1
