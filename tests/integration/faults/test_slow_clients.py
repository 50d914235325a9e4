"""Short form of the slow-client faults: stalled connections are closed in time, reviews still answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from tests.integration.faults.slow_clients import stalled_clients_scenario
from vpa.components import health
from vpa.components.connections import ConnectionLimits
from vpa.model.clock import VirtualClock

pytestmark = pytest.mark.faults


async def test_stalled_tls_connections_are_closed_while_reviews_are_answered(tmp_path: Path) -> None:
    limits = ConnectionLimits(header_timeout_s=0.5, body_timeout_s=0.5, idle_timeout_s=0.5)
    result = await stalled_clients_scenario(tmp_path, stalled=60, limits=limits, give_up_s=5.0)
    assert result.stalled_closed_by_server == 60, result
    assert result.longest_stall_s < 3.0, result
    assert result.review_failures == []
    assert result.reviews_answered >= 10
    assert result.drops.get("body_timeout", 0) >= 20
    assert result.drops.get("header_timeout", 0) >= 20


async def test_connections_over_the_cap_are_closed_at_once(tmp_path: Path) -> None:
    limits = ConnectionLimits(
        header_timeout_s=30.0, body_timeout_s=30.0, idle_timeout_s=30.0, max_connections=20
    )
    result = await stalled_clients_scenario(
        tmp_path, stalled=40, limits=limits, review_clients=0, give_up_s=3.0
    )
    assert result.drops.get("limit", 0) >= 20, result
    assert result.stalled_closed_by_server >= 20, result


async def test_metrics_server_closes_stalled_connections_and_keeps_serving() -> None:
    registry = CollectorRegistry()
    limits = ConnectionLimits(
        header_timeout_s=0.3, body_timeout_s=0.3, idle_timeout_s=0.3, max_connections=50
    )
    server = health.HealthServer(
        health.HealthState(VirtualClock()), registry, address="127.0.0.1:0", limits=limits
    )
    await server.start()
    try:
        stalled = []
        for data in (b"GET /metrics HTTP/1.1\r\nHo", b""):
            for _ in range(10):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(data)
                stalled.append((reader, writer))
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/healthz") as resp,
        ):
            assert resp.status == 200
        for reader, writer in stalled:
            assert await asyncio.wait_for(reader.read(), 3.0) == b""
            writer.close()
    finally:
        await server.stop()
