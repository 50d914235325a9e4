"""`vpa sim agent`: the simulator's kubelets and metrics.k8s.io brought to an API server that has none.

A real control plane without the stand-in (`RealCluster(behaviour=False)`); the agent as its own process with
the admin kubeconfig; a pod the real scheduler binds to one of the agent's nodes runs, its usage is served
through the aggregation layer, and the agent stops cleanly on SIGTERM. Skips when the binaries are absent.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator

import pytest

from tests.integration.fidelity.test_api_fidelity import POD, Api
from vpa.sim.kubernetes.cluster import RealCluster
from vpa.sim.kubernetes.controlplane import ControlPlaneError, find_binaries

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
async def bare() -> AsyncIterator[RealCluster]:
    try:
        find_binaries()
    except ControlPlaneError as err:
        pytest.skip(f"real control plane not built: {err}")
    cluster = RealCluster(behaviour=False)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


async def test_agent_runs_pods_and_serves_their_metrics(bare: RealCluster) -> None:
    cp = bare.control_plane
    api = Api("kube-apiserver", cp.url, cp.ca_pem, cp.admin_token)
    await api.open()
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vpa.cli", "sim", "agent", "--kubeconfig", str(bare.kubeconfig_path),
        "--nodes", "2", "--metrics-resolution", "1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert agent.stdout is not None
        line = await asyncio.wait_for(agent.stdout.readline(), 120)
        assert line.startswith(b"nodes: 2 (vpa-sim-node-1..2)"), line
        status, nodes = await api.call("GET", "/api/v1/nodes")
        assert status == 200
        assert sorted(n["metadata"]["name"] for n in nodes["items"]) == ["vpa-sim-node-1", "vpa-sim-node-2"]

        await api.call("POST", "/api/v1/namespaces/default/pods", POD)

        async def running() -> dict[str, object] | None:
            _, pod = await api.call("GET", "/api/v1/namespaces/default/pods/p")
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        pod = await api.until("the pod running", running)
        assert str(pod["spec"]["nodeName"]).startswith("vpa-sim-node-")

        async def metrics() -> dict[str, object] | None:
            code, doc = await api.call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/p")
            return doc if code == 200 else None

        usage = await api.until("the pod's metrics through the aggregation layer", metrics)
        assert [c["name"] for c in usage["containers"]] == ["c"]
    finally:
        if agent.returncode is None:
            agent.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(agent.wait(), 30) == 0
        await api.close()
