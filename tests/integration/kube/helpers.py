"""Shared pieces for the kube adapter tests against the simulated cluster."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vpa.kube.client import ClientOptions, KubeClient
from vpa.model.clock import Clock

if TYPE_CHECKING:
    from vpa.sim import SimCluster

CONFIGMAPS = "/api/v1/configmaps"


@dataclass(frozen=True, slots=True)
class Cm:
    """A trimmed ConfigMap: what the test caches keep."""

    namespace: str
    name: str
    rv: str
    app: str
    data: tuple[tuple[str, str], ...]


def cm_from_dict(obj: dict[str, Any]) -> Cm | None:
    md = obj["metadata"]
    data = obj.get("data") or {}
    if data.get("malformed") == "yes":
        raise ValueError("this object is malformed on purpose")
    if data.get("skip") == "yes":
        return None
    return Cm(
        md.get("namespace", ""),
        md["name"],
        md["resourceVersion"],
        (md.get("labels") or {}).get("app", ""),
        tuple(sorted(data.items())),
    )


async def new_client(
    cluster: SimCluster, clock: Clock, user_agent: str = "vpa-kube-tests", **options: Any
) -> KubeClient:
    return await KubeClient.from_config(
        clock,
        ClientOptions(user_agent=user_agent, **options),
        kubeconfig=str(cluster.kubeconfig_path),
    )


async def ensure_namespace(cluster: SimCluster, name: str) -> None:
    if cluster.store.get("namespaces", None, name) is None:
        await cluster.store.create(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )


def configmap(namespace: str, name: str, app: str = "a", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "data": dict(data),
    }


async def put_cm(
    cluster: SimCluster, namespace: str, name: str, app: str = "a", **data: str
) -> dict[str, Any]:
    """Create or replace a ConfigMap through the store (in-process, never faulted)."""
    store = cluster.store
    current = store.get("configmaps", namespace, name)
    body = configmap(namespace, name, app, **data)
    if current is None:
        return await store.create("configmaps", body)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return await store.update("configmaps", body)


async def delete_cm(cluster: SimCluster, namespace: str, name: str) -> None:
    await cluster.store.delete("configmaps", namespace, name)


async def server_state(client: KubeClient, path: str = CONFIGMAPS) -> dict[tuple[str, str], str]:
    """A fresh LIST: key → resourceVersion."""
    listing = await client.get(path)
    return {
        (item["metadata"].get("namespace", ""), item["metadata"]["name"]): item["metadata"]["resourceVersion"]
        for item in listing["items"]
    }


async def eventually(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll (in real time) until `predicate()` holds."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def wait_cache_equals_server(
    cache: Any, client: KubeClient, path: str = CONFIGMAPS, timeout_s: float = 10.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        expected = await server_state(client, path)
        if cache.resource_versions() == expected:
            return
        if time.monotonic() > deadline:
            got = cache.resource_versions()
            missing = {k: v for k, v in expected.items() if got.get(k) != v}
            extra = {k: v for k, v in got.items() if k not in expected}
            raise AssertionError(f"cache differs from server: stale/missing={missing} extra={extra}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def turns_counted() -> AsyncIterator[list[int]]:
    """A task that counts its turns on the event loop (`[n]`): how often other work let it run."""
    turns = [0]

    async def tick() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        yield turns
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
