"""The process's one metrics and health server, and the event-loop lag monitor.

Owns: the aiohttp app on `--address` serving `/metrics` (Prometheus text, gzip when asked), `/healthz`
(liveness: every component loop that registered an activity check has completed recently),
`/readyz` (readiness: every registered readiness check passes, e.g. watch caches synced), the upstream
path `/health-check` (same as `/healthz`, so probes written for upstream keep working), `/livez`, and with
`--profiling` a `/debug/tasks` dump of asyncio tasks; plus `LoopLagMonitor`, which measures how late the
event loop wakes a sleeper and exports it as `vpa_event_loop_lag_seconds`.

Must not: decide what "healthy" means for a component (components register their own checks) or use the
global Prometheus registry (the registry is passed in, so tests and several processes stay independent).
"""

from __future__ import annotations

import asyncio
import gzip
import io
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from vpa.model.clock import Clock

log = structlog.get_logger(__name__)

LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass
class _ActivityCheck:
    timeout_s: float
    last_activity: float | None = None  # monotonic; None until the component reports its first loop


class HealthState:
    """What `/healthz` and `/readyz` report. Components register checks; the server only reads them."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._readiness: dict[str, Callable[[], bool]] = {}
        self._activity: dict[str, _ActivityCheck] = {}
        self._shutting_down = False

    def add_readiness(self, name: str, check: Callable[[], bool]) -> None:
        self._readiness[name] = check

    def add_activity(self, name: str, timeout_s: float) -> None:
        """Register a loop that must report `record_activity(name)` at least every `timeout_s` once started.

        Upstream's health check uses 5 × the loop interval; callers pass that.
        """
        self._activity[name] = _ActivityCheck(timeout_s=timeout_s)

    def record_activity(self, name: str) -> None:
        check = self._activity.get(name)
        if check is not None:
            check.last_activity = self._clock.monotonic()

    def set_shutting_down(self) -> None:
        self._shutting_down = True

    def readiness(self) -> tuple[bool, list[str]]:
        failing = [name for name, check in sorted(self._readiness.items()) if not check()]
        if self._shutting_down:
            failing.append("shutting-down")
        return not failing, failing

    def liveness(self) -> tuple[bool, list[str]]:
        now = self._clock.monotonic()
        problems = []
        for name, check in sorted(self._activity.items()):
            if check.last_activity is None:
                continue
            idle_s = now - check.last_activity
            if idle_s > check.timeout_s:
                problems.append(f"{name}: last activity {idle_s:.0f}s ago (limit {check.timeout_s:.0f}s)")
        return not problems, problems


class LoopLagMonitor:
    """Sleeps `interval_s` in a loop and records how much later than asked the loop woke it.

    Lag is a real-time quantity, so this uses the monotonic clock of the process, not a virtual one.
    """

    def __init__(self, registry: CollectorRegistry, *, interval_s: float = 0.1) -> None:
        self._interval_s = interval_s
        self._histogram = Histogram(
            "vpa_event_loop_lag_seconds",
            "How late the asyncio event loop ran a timer that was due (a stall blocks every component).",
            buckets=LOOP_LAG_BUCKETS,
            registry=registry,
        )
        self._max = Gauge(
            "vpa_event_loop_lag_max_seconds",
            "Largest event-loop lag seen since the process started.",
            registry=registry,
        )
        self.max_lag_s = 0.0

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(self._interval_s)
            lag = max(0.0, time.monotonic() - started - self._interval_s)
            self._histogram.observe(lag)
            if lag > self.max_lag_s:
                self.max_lag_s = lag
                self._max.set(lag)


def _status_response(ok: bool, problems: list[str]) -> web.Response:
    if ok:
        return web.Response(text="ok\n")
    return web.Response(status=500, text="Error: " + "; ".join(problems) + "\n")


def build_app(state: HealthState, registry: CollectorRegistry, *, profiling: bool = False) -> web.Application:
    """The aiohttp application; `serve()` runs it, tests can use it with aiohttp's test client."""

    async def metrics(request: web.Request) -> web.Response:
        payload = generate_latest(registry)
        headers = {"Content-Type": CONTENT_TYPE_LATEST}
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            payload = gzip.compress(payload)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=payload, headers=headers)

    async def healthz(_: web.Request) -> web.Response:
        return _status_response(*state.liveness())

    async def readyz(_: web.Request) -> web.Response:
        return _status_response(*state.readiness())

    async def tasks(_: web.Request) -> web.Response:
        out = io.StringIO()
        for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
            out.write(f"--- {task.get_name()} ({'done' if task.done() else 'pending'})\n")
            for frame in task.get_stack(limit=20):
                out.write("".join(traceback.format_stack(frame, limit=1)))
        return web.Response(text=out.getvalue())

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/health-check", healthz)
    app.router.add_get("/readyz", readyz)
    if profiling:
        app.router.add_get("/debug/tasks", tasks)
    return app


def parse_address(address: str) -> tuple[str, int]:
    """`:8942` → ("0.0.0.0", 8942); `127.0.0.1:0` → ("127.0.0.1", 0); `[::1]:80` → ("::1", 80)."""
    host, sep, port_text = address.rpartition(":")
    if not sep:
        raise ValueError(f"address {address!r} must be HOST:PORT or :PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {address!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {address!r}: port {port} is out of range")
    host = host.strip("[]") or "0.0.0.0"
    return host, port


class HealthServer:
    """Runs `build_app` on an address until `stop()`; `port` tells the bound port (useful with port 0)."""

    def __init__(
        self, state: HealthState, registry: CollectorRegistry, *, address: str, profiling: bool = False
    ) -> None:
        self._host, self._port = parse_address(address)
        self._runner = web.AppRunner(
            build_app(state, registry, profiling=profiling),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
        )
        self.port = self._port

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        log.info("health server listening", host=self._host, port=self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()
