"""The client's proxy: resolved from the environment once per client (as client-go honours
HTTPS_PROXY/NO_PROXY), never looked up again per request in a worker thread."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from vpa.kube.client import KubeClient
from vpa.model.clock import RealClock

HOST = "https://10.96.0.1:443"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
                 "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


async def client_for(proxy: str | None = None) -> KubeClient:
    config = Configuration(host=HOST)
    if proxy is not None:
        config.proxy = proxy
    return KubeClient(ApiClient(config), RealClock())


@pytest.mark.parametrize(
    ("env", "configured", "expected_proxy", "expected_login"),
    [
        ({}, None, None, None),
        ({"HTTPS_PROXY": "http://proxy.example:3128"}, None, "http://proxy.example:3128", None),
        ({"https_proxy": "http://alice:secret@proxy.example:3128"}, None,
         "http://proxy.example:3128", "alice"),
        ({"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": "10.96.0.1"}, None, None, None),
        ({"HTTP_PROXY": "http://proxy.example:3128"}, None, None, None),  # not for an https host
        ({"HTTPS_PROXY": "http://proxy.example:3128"}, "http://kubeconfig.example:8080",
         "http://kubeconfig.example:8080", None),
    ],
    ids=["none", "https-proxy", "with-credentials", "no-proxy-excludes", "http-proxy-only",
         "configured-wins"],
)
async def test_proxy_resolved_once_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    configured: str | None,
    expected_proxy: str | None,
    expected_login: str | None,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = await client_for(configured)
    try:
        kwargs = client._request_kwargs()
        assert kwargs.get("proxy") == expected_proxy
        auth = kwargs.get("proxy_auth")
        assert (auth.login if auth is not None else None) == expected_login
        # No per-request environment lookup (aiohttp's trust_env does one in a worker thread).
        assert client._session.trust_env is False
    finally:
        await client.close()
