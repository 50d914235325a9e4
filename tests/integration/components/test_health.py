"""The metrics/health server over real HTTP: readiness, liveness from activity, metrics, loop lag."""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Iterator

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from vpa.components import health
from vpa.debug.stalls import StallProbe
from vpa.model.clock import VirtualClock


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


async def _get(port: int, path: str, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(f"http://127.0.0.1:{port}{path}", headers=headers) as resp,
    ):
        return resp.status, await resp.read(), dict(resp.headers)


async def test_readiness_follows_registered_checks(registry: CollectorRegistry) -> None:
    state = health.HealthState(VirtualClock())
    synced = False
    state.add_readiness("pods-cache", lambda: synced)
    server = health.HealthServer(state, registry, address="127.0.0.1:0")
    await server.start()
    try:
        status, body, _ = await _get(server.port, "/readyz")
        assert status == 500
        assert b"pods-cache" in body
        synced = True
        status, body, _ = await _get(server.port, "/readyz")
        assert (status, body) == (200, b"ok\n")
        state.set_shutting_down()
        status, body, _ = await _get(server.port, "/readyz")
        assert status == 500
        assert b"shutting-down" in body
    finally:
        await server.stop()


async def test_liveness_fails_when_a_loop_stops_reporting(registry: CollectorRegistry) -> None:
    clock = VirtualClock(start=0)
    state = health.HealthState(clock)
    state.add_activity("recommender", timeout_s=300)
    server = health.HealthServer(state, registry, address="127.0.0.1:0")
    await server.start()
    try:
        # Not started yet: healthy (upstream starts monitoring after the first loop).
        assert (await _get(server.port, "/healthz"))[0] == 200
        state.record_activity("recommender")
        clock.advance(299)
        assert (await _get(server.port, "/health-check"))[0] == 200
        clock.advance(2)
        status, body, _ = await _get(server.port, "/healthz")
        assert status == 500
        assert body.startswith(b"Error: recommender: last activity 301s ago")
        state.record_activity("recommender")
        assert (await _get(server.port, "/livez"))[0] == 200
    finally:
        await server.stop()


async def test_metrics_plain_and_gzip(registry: CollectorRegistry) -> None:
    Counter("vpa_test_things", "things", registry=registry).inc(3)
    server = health.HealthServer(health.HealthState(VirtualClock()), registry, address="127.0.0.1:0")
    await server.start()
    try:
        status, body, headers = await _get(server.port, "/metrics", **{"Accept-Encoding": "identity"})
        assert status == 200
        assert b"vpa_test_things_total 3.0" in body
        assert headers["Content-Type"].startswith("text/plain")
        status, body, headers = await _get(server.port, "/metrics", **{"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        assert b"vpa_test_things_total 3.0" in gzip.decompress(body)
        status, body, headers = await _get(server.port, "/metrics", **{"Accept-Encoding": "gzip;q=0"})
        assert "Content-Encoding" not in headers
        assert b"vpa_test_things_total 3.0" in body
        # Profiling endpoints are off unless asked for.
        assert (await _get(server.port, "/debug/tasks"))[0] == 404
    finally:
        await server.stop()


async def test_a_scrape_reads_the_collectors_off_the_event_loop(registry: CollectorRegistry) -> None:
    """Collecting a large registry held the loop up to 10 ms: it runs in a worker thread, so the collectors
    see a thread other than the loop's, and counters the loop grows meanwhile stay readable."""
    seen: list[int] = []

    class _Where(Collector):
        def collect(self) -> Iterator[Metric]:
            seen.append(threading.get_ident())
            yield CounterMetricFamily("vpa_test_where", "where collected", value=1)

    registry.register(_Where())
    counter = health.UnsuffixedCounter("vpa_test_grown", "grown", ["n"], registry=registry)
    server = health.HealthServer(health.HealthState(VirtualClock()), registry, address="127.0.0.1:0")
    await server.start()
    try:
        for n in range(3):
            counter.labels(n=str(n)).inc()
            status, body, _ = await _get(server.port, "/metrics", **{"Accept-Encoding": "identity"})
            assert status == 200
            assert f'vpa_test_grown{{n="{n}"}} 1.0'.encode() in body
        assert seen
        assert threading.get_ident() not in seen
    finally:
        await server.stop()


async def test_profiling_dumps_tasks(registry: CollectorRegistry) -> None:
    server = health.HealthServer(
        health.HealthState(VirtualClock()), registry, address="127.0.0.1:0", profiling=True
    )
    await server.start()
    try:
        status, body, _ = await _get(server.port, "/debug/tasks")
        assert status == 200
        assert b"---" in body
    finally:
        await server.stop()


def _hold_the_loop(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def test_profiling_attributes_stalls_to_the_code_that_held_the_loop(
    registry: CollectorRegistry,
) -> None:
    """With --profiling, /debug/stalls lists a 60 ms hold of the event loop with the function that held it;
    a loop that only waits (here, sleeps) is no stall; `?reset=1` forgets what it reported."""
    probe = StallProbe()
    server = health.HealthServer(
        health.HealthState(VirtualClock()), registry, address="127.0.0.1:0", profiling=True,
        stalls=probe.render,
    )
    await server.start()
    probe.start()
    try:
        await asyncio.sleep(0.05)
        _hold_the_loop(0.06)
        await asyncio.sleep(0.05)
        status, body, _ = await _get(server.port, "/debug/stalls")
        assert status == 200
        text = body.decode()
        longest = text.split("\n--- ", 1)[1]
        assert float(longest.split(" ms", 1)[0]) >= 50.0
        assert "_hold_the_loop" in longest.split("\n--- ", 1)[0]
        # ?reset=1 reports and forgets: the next report covers only what follows.
        _, again, _ = await _get(server.port, "/debug/stalls?reset=1")
        assert "_hold_the_loop" in again.decode()
        _, after, _ = await _get(server.port, "/debug/stalls")
        assert after.decode().startswith("stalls over 5 ms: ")
        assert "_hold_the_loop" not in after.decode()
    finally:
        await probe.stop()
        await server.stop()
    assert probe.render().startswith("stalls over 5 ms: ")  # still renders after stop


async def test_loop_lag_monitor_sees_a_stall(registry: CollectorRegistry) -> None:
    monitor = health.LoopLagMonitor(registry, interval_s=0.01)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.05)
    time.sleep(0.12)  # noqa: ASYNC251 - block the loop on purpose: the monitor must notice
    await asyncio.sleep(0.05)
    task.cancel()
    assert monitor.max_lag_s >= 0.08
    assert registry.get_sample_value("vpa_event_loop_lag_max_seconds") == pytest.approx(monitor.max_lag_s)


async def test_loop_lag_monitor_reports_after_its_next_sample(registry: CollectorRegistry) -> None:
    monitor = health.LoopLagMonitor(registry, interval_s=0.01)
    task = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.03)
    reported: list[float] = []
    monitor.after_next_sample(reported.append)
    assert reported == []  # not before the next sample
    time.sleep(0.06)  # noqa: ASYNC251 - a stall under way when the report was asked for counts in it
    await asyncio.sleep(0.03)
    time.sleep(0.1)  # noqa: ASYNC251 - a stall after the report does not
    await asyncio.sleep(0.03)
    task.cancel()
    assert len(reported) == 1
    assert 0.04 <= reported[0] < 0.09
    assert monitor.max_lag_s >= 0.09


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":8942", ("0.0.0.0", 8942)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:80", ("::1", 80))],
    ids=["port-only", "loopback", "ipv6"],
)
def test_parse_address(address: str, expected: tuple[str, int]) -> None:
    assert health.parse_address(address) == expected


@pytest.mark.parametrize("address", ["8942", ":http", ":70000"], ids=["no-colon", "named-port", "too-big"])
def test_parse_address_errors(address: str) -> None:
    with pytest.raises(ValueError, match="address"):
        health.parse_address(address)


@pytest.mark.parametrize(("accept_encoding", "gzipped"), [
    ("gzip", True),
    ("deflate, GZIP", True),
    ("gzip;q=0.5, identity", True),
    ("*", True),
    ("", False),
    ("identity", False),
    ("gzip;q=0", False),
    ("gzip; q=0.0, identity;q=1", False),
    ("x-gzip-not", False),
    ("gzip;q=oops", False),
])  # fmt: skip
def test_metrics_gzip_only_where_the_scrape_accepts_it(accept_encoding: str, gzipped: bool) -> None:
    assert health.accepts_gzip(accept_encoding) is gzipped
