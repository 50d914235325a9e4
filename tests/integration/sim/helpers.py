"""Helpers shared by the simulated API server's tests."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import aiohttp

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
