"""Helpers shared by the simulated API server's tests."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from vpa.sim import SimCluster


@contextlib.asynccontextmanager
async def tls_session(cluster: SimCluster) -> AsyncIterator[aiohttp.ClientSession]:
    """A raw HTTPS session trusting the cluster CA, with the cluster URL as base."""
    ctx = ssl.create_default_context(cadata=cluster.ca_cert_pem.decode())
    async with aiohttp.ClientSession(
        base_url=cluster.url,
        connector=aiohttp.TCPConnector(ssl=ctx),
        headers={"Authorization": "Bearer test"},
    ) as session:
        yield session


async def read_events(resp: aiohttp.ClientResponse, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    """Up to `n` watch events from a streaming response (fewer if the stream ends first)."""
    out: list[dict[str, Any]] = []
    while len(out) < n:
        line = await asyncio.wait_for(resp.content.readline(), timeout)
        if not line:
            break
        out.append(orjson.loads(line))
    return out
