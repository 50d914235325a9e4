"""Fixtures for the simulated API server's tests: a bare cluster (no behaviour) and clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from kubernetes_asyncio import client, config

from tests.integration.sim.helpers import tls_session
from vpa.sim import SimCluster


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster(behaviour=False, bookmark_interval_s=0.2) as c:
        yield c


@pytest.fixture
async def api(cluster: SimCluster) -> AsyncIterator[client.ApiClient]:
    conf = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig_path), client_configuration=conf)
    async with client.ApiClient(configuration=conf) as api_client:
        yield api_client


@pytest.fixture
async def http(cluster: SimCluster) -> AsyncIterator[aiohttp.ClientSession]:
    """A raw HTTPS session trusting the cluster CA, with the cluster URL as base."""
    async with tls_session(cluster) as session:
        yield session
