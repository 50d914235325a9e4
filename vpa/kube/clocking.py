"""A clock that follows the simulated cluster's virtual time (`vpa run --clock=sim`).

Owns: `SimClock`, a `Clock` whose "now" is the virtual time `vpa sim` publishes at `GET /sim/v1/clock`
(`{"now": <unix seconds>, "timeScale": x}`). It reads the endpoint once at start, then extrapolates with the
local monotonic clock at the published scale and re-reads it every `resync_interval_s` (so manual jumps of
the simulator's clock, `POST /sim/v1/clock/advance`, are picked up). `sleep(s)` sleeps until the *virtual*
deadline, waking early when a resync shows that time jumped.

Must not: be used against a real cluster (a real API server has no such endpoint; `start()` then fails with
a clear error), or move backwards: a resync that would step time back is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import structlog

from vpa.kube.client import ApiError, KubeClient

log = structlog.get_logger(__name__)

CLOCK_PATH = "/sim/v1/clock"


class SimClockError(RuntimeError):
    """The API server does not publish a virtual clock."""


class SimClock:
    """Virtual time as published by `vpa sim`, extrapolated locally between reads."""

    def __init__(self, client: KubeClient, *, resync_interval_s: float = 1.0) -> None:
        self._client = client
        self._resync_interval_s = resync_interval_s
        self._base_virtual = 0.0
        self._base_real = time.monotonic()
        self._scale = 0.0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the clock once (raising SimClockError if there is none) and keep following it."""
        try:
            await self._resync()
        except ApiError as err:
            raise SimClockError(
                f"--clock=sim: the API server at {self._client.host} does not publish a virtual clock "
                f"({CLOCK_PATH}: {err}); use --clock=real against a real cluster"
            ) from err
        self._task = asyncio.create_task(self._follow(), name="sim-clock-follower")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @property
    def time_scale(self) -> float:
        return self._scale

    def now(self) -> float:
        return self._base_virtual + (time.monotonic() - self._base_real) * self._scale

    def monotonic(self) -> float:
        return self.now()

    async def sleep(self, seconds: float) -> None:
        deadline = self.now() + max(0.0, seconds)
        while True:
            remaining = deadline - self.now()
            if remaining <= 0:
                await asyncio.sleep(0)
                return
            # Wait in real time for the extrapolated remainder, or until a resync changes the picture;
            # with time frozen, re-check at every resync.
            real_wait = remaining / self._scale if self._scale > 0 else self._resync_interval_s
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=min(real_wait, self._resync_interval_s))

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self._resync_interval_s)
            try:
                await self._resync()
            except (ApiError, ValueError, TypeError) as err:
                # Keep extrapolating: the simulator may be briefly unreachable (fault injection, restart).
                log.warning("sim clock resync failed", error=str(err))

    async def _resync(self) -> None:
        body: Any = await self._client.get(CLOCK_PATH, timeout_s=5.0)
        virtual_now = float(body["now"])
        scale = float(body.get("timeScale", 0.0))
        if scale < 0:
            raise ValueError(f"negative timeScale {scale} from {CLOCK_PATH}")
        real_now = time.monotonic()
        current = self._base_virtual + (real_now - self._base_real) * self._scale
        if self._base_virtual and virtual_now < current:
            # Our extrapolation ran slightly ahead; hold still rather than step back.
            virtual_now = current
        jumped = abs(virtual_now - current) > 0.001 or scale != self._scale
        self._base_virtual, self._base_real, self._scale = virtual_now, real_now, scale
        if jumped:
            self._changed.set()
