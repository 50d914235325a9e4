"""The bare API server over raw HTTPS: the field selectors the VPA uses in LIST and WATCH, WATCH's own
timeout, 410 `Expired` after compaction, and the fault knobs driven through `/sim/v1/faults/...`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from tests.integration.sim.helpers import read_events
from vpa.sim import SimCluster


async def _pod(cluster: SimCluster, namespace: str, name: str) -> None:
    await cluster.store.create(
        "pods",
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    )


def _event(name: str, reason: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
        "reason": reason,
        "message": f"{reason} happened",
        "type": "Normal",
        "count": 1,
    }


async def test_metadata_namespace_field_selector_in_list_and_watch(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    await cluster.store.create("namespaces", {"metadata": {"name": "other"}})
    await _pod(cluster, "default", "a")
    await _pod(cluster, "other", "b")
    async with http.get("/api/v1/pods", params={"fieldSelector": "metadata.namespace=other"}) as r:
        assert r.status == 200
        listed = await r.json()
    assert [p["metadata"]["name"] for p in listed["items"]] == ["b"]
    async with http.get("/api/v1/pods", params={"fieldSelector": "metadata.namespace!=other"}) as r:
        assert [p["metadata"]["name"] for p in (await r.json())["items"]] == ["a"]
    async with http.get(
        "/api/v1/pods",
        params={
            "watch": "1",
            "fieldSelector": "metadata.namespace=other",
            "resourceVersion": listed["metadata"]["resourceVersion"],
        },
    ) as r:
        await _pod(cluster, "default", "c")
        await _pod(cluster, "other", "d")
        [ev] = await read_events(r, 1)
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "d")


async def test_event_reason_field_selector_in_list_and_watch(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    await cluster.store.create("events", _event("e1", "Scheduled"))
    await cluster.store.create("events", _event("e2", "EvictedByVPA"))
    path = "/api/v1/namespaces/default/events"
    async with http.get(path, params={"fieldSelector": "reason=EvictedByVPA"}) as r:
        assert r.status == 200
        listed = await r.json()
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e2"]
    async with http.get("/api/v1/events", params={"fieldSelector": "reason!=EvictedByVPA"}) as r:
        assert [e["metadata"]["name"] for e in (await r.json())["items"]] == ["e1"]
    async with http.get(
        path,
        params={
            "watch": "1",
            "fieldSelector": "reason=EvictedByVPA",
            "resourceVersion": listed["metadata"]["resourceVersion"],
        },
    ) as r:
        await cluster.store.create("events", _event("e3", "Scheduled"))
        await cluster.store.create("events", _event("e4", "EvictedByVPA"))
        [ev] = await read_events(r, 1)
    assert (ev["type"], ev["object"]["metadata"]["name"], ev["object"]["reason"]) == (
        "ADDED",
        "e4",
        "EvictedByVPA",
    )
    # `reason` is an Event field only: on pods it is refused, as kube-apiserver does.
    async with http.get("/api/v1/pods", params={"fieldSelector": "reason=x"}) as r:
        assert r.status == 400


async def test_watch_ends_by_itself_at_timeout_seconds(http: aiohttp.ClientSession) -> None:
    started = time.monotonic()
    async with http.get(
        "/api/v1/namespaces/default/configmaps", params={"watch": "1", "timeoutSeconds": "1"}
    ) as r:
        assert r.status == 200
        # The server closes the stream: reading to EOF returns without the client timing out.
        body = await asyncio.wait_for(r.read(), 10)
    elapsed = time.monotonic() - started
    assert body == b""
    assert 0.9 <= elapsed < 5, elapsed


async def test_watch_from_a_compacted_resource_version_is_410_expired(
    cluster: SimCluster, http: aiohttp.ClientSession
) -> None:
    async with http.get("/api/v1/namespaces/default/configmaps") as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    await cluster.store.create("configmaps", {"metadata": {"name": "x", "namespace": "default"}})
    async with http.post("/sim/v1/faults/compact") as r:
        assert r.status == 200
        compacted = await r.json()
    assert int(compacted["compactedResourceVersion"]) > int(rv)
    async with http.get(
        "/api/v1/namespaces/default/configmaps", params={"watch": "1", "resourceVersion": rv}
    ) as r:
        assert r.status == 200
        events = await read_events(r, 2)
    [ev] = events  # the ERROR event, then the stream ends
    assert ev["type"] == "ERROR"
    status = ev["object"]
    assert (status["kind"], status["status"], status["code"], status["reason"]) == (
        "Status",
        "Failure",
        410,
        "Expired",
    )


async def test_drop_watches_and_pause_over_http(cluster: SimCluster, http: aiohttp.ClientSession) -> None:
    async with http.get("/api/v1/namespaces/default/configmaps", params={"watch": "1"}) as w:
        assert w.status == 200
        await asyncio.sleep(0.05)
        async with http.post("/sim/v1/faults/drop-watches") as r:
            assert r.status == 200
            assert (await r.json())["dropped"] >= 1
        assert await asyncio.wait_for(w.read(), 5) == b""  # the stream was closed by the server
    async with http.post("/sim/v1/faults/pause") as r:
        assert await r.json() == {"paused": True}
    async with http.get("/sim/v1/faults") as r:
        assert (await r.json())["paused"] is True
    task = asyncio.ensure_future(http.get("/api/v1/namespaces"))
    await asyncio.sleep(0.3)
    assert not task.done()  # API requests wait while paused
    async with http.post("/sim/v1/faults/resume") as r:
        assert await r.json() == {"paused": False}
    resp = await asyncio.wait_for(task, 5)
    assert resp.status == 200
    resp.release()


async def test_injected_latency_delays_only_matching_requests(http: aiohttp.ClientSession) -> None:
    async with http.post(
        "/sim/v1/faults/inject",
        json={"verb": "list", "resource": "configmaps", "code": None, "latencySeconds": 0.3, "count": 1},
    ) as r:
        assert r.status == 201
        fault = await r.json()
    assert (fault["latencySeconds"], fault["code"]) == (0.3, None)
    started = time.monotonic()
    async with http.get("/api/v1/namespaces/default/configmaps") as r:
        assert r.status == 200  # latency only: the request then succeeds
    assert time.monotonic() - started >= 0.29  # uvloop timers have millisecond granularity
    started = time.monotonic()
    async with http.get("/api/v1/namespaces/default/configmaps") as r:
        assert r.status == 200
    assert time.monotonic() - started < 0.3  # the budget (count=1) is spent
    async with http.get("/sim/v1/faults") as r:
        [listed] = (await r.json())["faults"]
    assert listed["hits"] == 1
