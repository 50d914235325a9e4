"""Helpers for the simulated cluster's behaviour tests: clusters per version, HTTPS, pod builders."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from vpa.sim import SimCluster


@contextlib.asynccontextmanager
async def sim(
    version: str = "1.35", nodes: int = 1, cpu: str = "4", memory: str = "16Gi", **options: Any
) -> AsyncIterator[tuple[SimCluster, aiohttp.ClientSession]]:
    """A cluster with behaviour and a raw HTTPS session trusting its CA; `options` go to `SimCluster`."""
    async with SimCluster(
        nodes=nodes, node_cpu=cpu, node_memory=memory, kubernetes_version=version, vpa_crds=False, **options
    ) as cluster:
        ctx = ssl.create_default_context(cadata=cluster.ca_cert_pem.decode())
        async with aiohttp.ClientSession(
            base_url=cluster.url,
            connector=aiohttp.TCPConnector(ssl=ctx),
            headers={"Authorization": "Bearer test"},
        ) as http:
            yield cluster, http
            # Controllers and the node agent count failures instead of crashing: none may have happened.
            assert cluster.behaviour is not None
            assert cluster.behaviour.runtime.errors == 0


def container(
    name: str = "app",
    cpu: str | None = "500m",
    memory: str | None = "256Mi",
    cpu_limit: str | None = "1",
    memory_limit: str | None = "512Mi",
    **extra: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "registry.k8s.io/pause:3.10", "resources": resources, **extra}


def pod(
    name: str,
    *containers: dict[str, Any],
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": name}}
    if annotations:
        md["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"containers": list(containers) or [container()], **spec},
    }


def deployment(
    name: str, replicas: int, *containers: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    tmd: dict[str, Any] = {"labels": {"app": name}}
    if annotations:
        tmd["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": tmd, "spec": {"containers": list(containers) or [container()]}},
        },
    }


async def create_pod(cluster: SimCluster, obj: dict[str, Any]) -> dict[str, Any]:
    created = await cluster.store.create("pods", obj)
    await cluster.settle()
    found = cluster.store.get("pods", created["metadata"]["namespace"], created["metadata"]["name"])
    assert found is not None
    return found


async def resize(
    http: aiohttp.ClientSession,
    name: str,
    body: Any,
    content_type: str = "application/strategic-merge-patch+json",
    namespace: str = "default",
) -> tuple[int, dict[str, Any]]:
    async with http.patch(
        f"/api/v1/namespaces/{namespace}/pods/{name}/resize",
        data=orjson.dumps(body),
        headers={"Content-Type": content_type},
    ) as resp:
        return resp.status, await resp.json(content_type=None)


def resources_patch(
    cpu: str | None = None,
    memory: str | None = None,
    cpu_limit: str | None = None,
    memory_limit: str | None = None,
    name: str = "app",
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"spec": {"containers": [{"name": name, "resources": res}]}}


async def evict(
    http: aiohttp.ClientSession, name: str, namespace: str = "default", version: str = "policy/v1"
) -> tuple[int, dict[str, Any]]:
    body = {"apiVersion": version, "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    async with http.post(
        f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
    ) as resp:
        return resp.status, await resp.json(content_type=None)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None
    )


def cstatus(obj: dict[str, Any], name: str = "app") -> dict[str, Any]:
    return next(c for c in obj["status"]["containerStatuses"] if c["name"] == name)
