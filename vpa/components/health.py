"""The process's one metrics and health server, and the event-loop lag monitor.

Owns: the aiohttp app on `--address` serving `/metrics` (Prometheus text, gzip when asked; collected,
formatted and compressed in a worker thread, so every collector must be safe to read from one), `/healthz`
(liveness: every component loop that registered an activity check has completed recently),
`/readyz` (readiness: every registered readiness check passes, e.g. watch caches synced), the upstream
path `/health-check` (same as `/healthz`, so probes written for upstream keep working), `/livez`, and with
`--profiling` a `/debug/tasks` dump of asyncio tasks and `/debug/stalls` (the longest event-loop stalls
and the code that ran in them, from the report the composition root passes in, `vpa.debug.stalls`;
`?reset=1` forgets what it reported); plus
`LoopLagMonitor`, which measures how late the event loop wakes a sleeper and exports it as
`vpa_event_loop_lag_seconds`; and
`UnsuffixedCounter`, a counter exposed under its exact name (upstream's Go counters such as
`vpa_recommender_metric_server_responses` have no `_total`, which prometheus_client would append), with
`render_metrics`, the exposition that types it `counter`; and `LoopHistogram`, a labelled histogram cheap
enough for per-sample observations.

Must not: decide what "healthy" means for a component (components register their own checks) or use the
global Prometheus registry (the registry is passed in, so tests and several processes stay independent).
"""

from __future__ import annotations

import asyncio
import bisect
import gzip
import io
import math
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from vpa.components.connections import (
    DEFAULT_LIMITS,
    ConnectionDrops,
    ConnectionGuard,
    ConnectionLimits,
    GuardedSite,
)
from vpa.model import settings
from vpa.model.clock import Clock

log = structlog.get_logger(__name__)

LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _UnsuffixedCounterMetric(Metric):
    """A counter family whose samples carry the family's own name. Typed `gauge` for prometheus_client's
    exposition (which would rename a `counter`); `render_metrics` writes its TYPE line as `counter`."""


class _CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class UnsuffixedCounter(Collector):
    """A labelled counter exposed as `name{…} value`, as client_golang exposes a counter named without
    `_total`. Same use as prometheus_client's: `counter.labels(a="x").inc()`. Event-loop use only."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (), *,
                 registry: CollectorRegistry | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], _CounterChild] = {}
        if not self.labelnames:
            self._children[()] = _CounterChild()
        if registry is not None:
            registry.register(self)

    def labels(self, **labels: str) -> _CounterChild:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {tuple(labels)}")
        key = tuple(str(labels[name]) for name in self.labelnames)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = _CounterChild()
        return child

    def inc(self, amount: float = 1.0) -> None:
        self.labels().inc(amount)

    def describe(self) -> list[Metric]:
        return [_UnsuffixedCounterMetric(self.name, self.documentation, "gauge")]

    def collect(self) -> Iterator[Metric]:
        metric = _UnsuffixedCounterMetric(self.name, self.documentation, "gauge")
        for key, child in list(self._children.items()):  # a snapshot: the writer may add a child
            metric.add_sample(self.name, dict(zip(self.labelnames, key, strict=True)), child.value)
        yield metric


class _HistogramSeries:
    """One labelled series: per-bucket counts (not cumulative) and the sum."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # `le` buckets: a value equal to a bound belongs to that bound's bucket.
        self.counts[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value


class LoopHistogram(Collector):
    """A labelled histogram exposed as client_golang exposes one (`_bucket`, `_count`, and `_sum` even with
    negative buckets, which prometheus_client's Histogram leaves out). Observing is a bisect and two
    additions (prometheus_client's takes a lock and walks the buckets); one thread is the only writer (the
    event loop, or the webhook's serving thread for the admission histograms). `labels(*values)` takes the
    label values in `labelnames` order."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str], buckets: Iterable[float], *,
                 registry: CollectorRegistry | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._bounds = [*sorted(buckets), math.inf]
        self._le = [str(floatToGoString(bound)) for bound in self._bounds]  # type: ignore[no-untyped-call]
        self._series: dict[tuple[str, ...], _HistogramSeries] = {}
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> _HistogramSeries:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
            series = self._series[values] = _HistogramSeries(self._bounds)
        return series

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=list(self.labelnames))]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labelnames))
        for values, series in list(self._series.items()):  # a snapshot: the writer may add a series
            labels = dict(zip(self.labelnames, values, strict=True))
            cumulative = 0
            for le, count in zip(self._le, series.counts, strict=True):
                cumulative += count
                family.add_sample(f"{self.name}_bucket", {**labels, "le": le}, float(cumulative))
            # Samples added one by one: HistogramMetricFamily.add_metric leaves out `_count` and `_sum`
            # when a bucket is negative (OpenMetrics); Prometheus' text format and client_golang keep them.
            family.add_sample(f"{self.name}_count", labels, float(cumulative))
            family.add_sample(f"{self.name}_sum", labels, series.sum)
        yield family


def collect_metrics(registry: Collector) -> list[Metric]:
    """Every metric of `registry` with its samples as they are now. Safe in a worker thread:
    prometheus_client's metrics take their locks, and ours (`LoopHistogram`, `UnsuffixedCounter`, the
    webhook's counters, the recommendation gauges) read a snapshot of containers their one writer may grow
    meanwhile."""
    return list(registry.collect())


def format_metrics(metrics: list[Metric]) -> bytes:
    """Prometheus text exposition of collected `metrics`, with `UnsuffixedCounter`s typed `counter`. Reads
    only the snapshot, so it may run in a worker thread (formatting ~1,000 samples is milliseconds of CPU
    that would otherwise hold the event loop)."""
    counters = [metric.name for metric in metrics if isinstance(metric, _UnsuffixedCounterMetric)]

    class _Snapshot(Collector):
        def collect(self) -> Iterator[Metric]:
            yield from metrics

    payload = generate_latest(_Snapshot())
    for name in counters:
        payload = payload.replace(f"# TYPE {name} gauge\n".encode(), f"# TYPE {name} counter\n".encode(), 1)
    return payload


def render_metrics(registry: Collector) -> bytes:
    """Prometheus text exposition of `registry`, with `UnsuffixedCounter`s typed `counter`."""
    return format_metrics(collect_metrics(registry))


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether a scrape's `Accept-Encoding` lets `/metrics` answer gzipped: it lists `gzip` or `*` (in any
    case) with a `q` other than 0, which (RFC 9110) means "not acceptable"."""
    for item in accept_encoding.split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        if coding.lower() not in ("gzip", "*"):
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            return True
    return False


def _scrape(registry: Collector, gzipped: bool) -> bytes:
    payload = render_metrics(registry)
    return gzip.compress(payload) if gzipped else payload


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
        self._reports: list[Callable[[float], None]] = []

    def after_next_sample(self, report: Callable[[float], None]) -> None:
        """Call `report(max_lag_s)` once, right after the next sample: the largest lag up to that sample, so a
        stall under way when this is called (one that has not yet let the monitor's timer fire) counts too,
        and what the loop does after the sample does not."""
        self._reports.append(report)

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(self._interval_s)
            lag = max(0.0, time.monotonic() - started - self._interval_s)
            self._histogram.observe(lag)
            if lag > self.max_lag_s:
                self.max_lag_s = lag
                self._max.set(lag)
            if self._reports:
                reports, self._reports = self._reports, []
                for report in reports:
                    report(self.max_lag_s)


def _status_response(ok: bool, problems: list[str]) -> web.Response:
    if ok:
        return web.Response(text="ok\n")
    return web.Response(status=500, text="Error: " + "; ".join(problems) + "\n")


def build_app(
    state: HealthState, registry: CollectorRegistry, *, profiling: bool = False,
    stalls: Callable[[bool], str] | None = None,
) -> web.Application:
    """The aiohttp application; `serve()` runs it, tests can use it with aiohttp's test client."""

    async def metrics(request: web.Request) -> web.Response:
        # Collection, formatting and compression of a large cluster's series is long CPU work: it runs in
        # a worker thread, which hands the interpreter back to the loop at least every switch interval.
        headers = {"Content-Type": CONTENT_TYPE_LATEST}
        gzipped = accepts_gzip(request.headers.get("Accept-Encoding", ""))
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        payload = await asyncio.to_thread(_scrape, registry, gzipped)
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
        if stalls is not None:
            report = stalls

            async def stall_report(request: web.Request) -> web.Response:
                # `?reset=1`: the next report covers only what follows (a benchmark's windows, one by one).
                reset = request.query.get("reset", "") in ("1", "true")
                return web.Response(text=report(reset))

            app.router.add_get("/debug/stalls", stall_report)
    return app


def parse_address(address: str) -> tuple[str, int]:
    """`--address` → (host, port); the one parser lives in `vpa.model.settings.parse_host_port`."""
    return settings.parse_host_port(address)


class HealthServer:
    """Runs `build_app` on an address until `stop()`; `port` tells the bound port (useful with port 0)."""

    def __init__(
        self, state: HealthState, registry: CollectorRegistry, *, address: str, profiling: bool = False,
        limits: ConnectionLimits = DEFAULT_LIMITS, stalls: Callable[[bool], str] | None = None,
    ) -> None:
        self._host, self._port = parse_address(address)
        self._limits = limits
        self._drops = ConnectionDrops(registry)
        self._runner = web.AppRunner(
            build_app(state, registry, profiling=profiling, stalls=stalls),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
            **limits.runner_kwargs(),
        )
        self.port = self._port
        self.guard: ConnectionGuard | None = None

    async def start(self) -> None:
        await self._runner.setup()
        assert self._runner.server is not None
        self.guard = ConnectionGuard(self._runner.server, self._limits, self._drops, "health")
        site = GuardedSite(self._runner, self._host, self._port, limits=self._limits)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        log.info("health server listening", host=self._host, port=self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()
