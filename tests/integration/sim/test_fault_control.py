"""`vpa sim --fault-control` on a real control plane: kube-apiserver SIGKILLed by its PID and started again
with the same port, certificates and tokens (what was stored survives), and etcd compacted at its current
revision (etcd then refuses older revisions). Skips with one line when the release is not built.
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from vpa.sim.kubernetes.controlplane import ControlPlane, ControlPlaneError, find_binaries
from vpa.sim.kubernetes.faults import FaultControl

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def plane() -> AsyncIterator[tuple[ControlPlane, FaultControl]]:
    try:
        find_binaries()
    except ControlPlaneError as err:
        pytest.skip(f"real control plane not built: {err}")
    cp = ControlPlane()
    await cp.start()
    faults = FaultControl(cp)
    try:
        await faults.start()
        yield cp, faults
    finally:
        await faults.stop()
        await cp.stop()


async def _api(cp: ControlPlane, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    ctx = ssl.create_default_context(cadata=cp.ca_pem.decode())
    headers = {"Authorization": f"Bearer {cp.admin_token}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.request(method, cp.url + path, json=body, headers=headers, ssl=ctx) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def _fault(faults: FaultControl, method: str, action: str = "") -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=150)) as session,
        session.request(method, faults.url + action) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


CM = "/api/v1/namespaces/default/configmaps"


async def test_kill_and_start_keep_port_credentials_and_data(
    plane: tuple[ControlPlane, FaultControl],
) -> None:
    cp, faults = plane
    assert faults.url.startswith("http://127.0.0.1:")
    status, _ = await _api(cp, "POST", CM, {"metadata": {"name": "before"}, "data": {"k": "v"}})
    assert status == 201
    _, state = await _fault(faults, "GET")
    pid = state["kube-apiserver"]
    assert pid
    assert state["etcd"].startswith("http://127.0.0.1:")

    status, killed = await _fault(faults, "POST", "/kube-apiserver/kill")
    assert (status, killed) == (200, {"pid": pid})
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(aiohttp.ClientConnectionError):
        await _api(cp, "GET", CM)
    assert (await _fault(faults, "GET"))[1]["kube-apiserver"] is None

    status, started = await _fault(faults, "POST", "/kube-apiserver/start")
    assert status == 200
    assert started["pid"] != pid
    status, doc = await _api(cp, "GET", f"{CM}/before")  # same URL, CA and token
    assert (status, doc["data"]) == (200, {"k": "v"})
    # Starting a running server is refused, and nothing else changes.
    status, refused = await _fault(faults, "POST", "/kube-apiserver/start")
    assert status == 409
    assert "still running" in refused["error"]


async def test_compaction_refuses_older_revisions(plane: tuple[ControlPlane, FaultControl]) -> None:
    cp, faults = plane
    _, created = await _api(cp, "POST", CM, {"metadata": {"name": "old"}})
    old_rv = created["metadata"]["resourceVersion"]
    await _api(cp, "PUT", f"{CM}/old", {"metadata": {"name": "old"}, "data": {"a": "1"}})
    status, compacted = await _fault(faults, "POST", "/etcd/compact")
    assert status == 200
    assert compacted["revision"] > int(old_rv)
    # etcd itself refuses the older revision (kube-apiserver may still answer it from its watch cache).
    key = base64.b64encode(b"/registry/configmaps/default/old").decode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{cp.etcd_url}/v3/kv/range", json={"key": key, "revision": old_rv}) as resp,
    ):
        body = await resp.json(content_type=None)
    assert resp.status != 200, body
    assert "compacted" in str(body), body
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{cp.etcd_url}/v3/kv/range", json={"key": key}) as resp,
    ):
        assert resp.status == 200
        assert (await resp.json(content_type=None))["count"] == "1"
    # Compacting again with nothing written since is not an error.
    assert (await _fault(faults, "POST", "/etcd/compact"))[0] == 200


async def test_the_control_url_needs_its_secret(plane: tuple[ControlPlane, FaultControl]) -> None:
    _, faults = plane
    base = faults.url.rsplit("/", 1)[0]
    async with aiohttp.ClientSession() as session, session.post(base + "/kube-apiserver/kill") as resp:
        assert resp.status == 404
