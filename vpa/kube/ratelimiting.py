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
import math

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
