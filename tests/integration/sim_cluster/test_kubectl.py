"""Real kubectl against the simulated cluster: resize subresource, `top` from metrics, drain via evictions."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from tests.integration.sim_cluster.helpers import create_pod, cstatus, pod, sim
from vpa.sim import SimCluster

KUBECTL = Path(sys.executable).parent / "kubectl"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(
        not KUBECTL.exists() and shutil.which("kubectl") is None, reason="kubectl not installed"
    ),
]


async def kubectl(cluster: SimCluster, *args: str) -> tuple[int, str, str]:
    binary = str(KUBECTL) if KUBECTL.exists() else "kubectl"
    proc = await asyncio.create_subprocess_exec(
        binary,
        "--kubeconfig",
        str(cluster.kubeconfig_path),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_kubectl_resize_top_and_drain() -> None:
    async with sim("1.35", nodes=2) as (cluster, _http):
        await create_pod(cluster, pod("web"))
        patch = '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"700m"}}}]}}'
        code, out, err = await kubectl(cluster, "patch", "pod", "web", "--subresource", "resize", "-p", patch)
        assert code == 0, err
        await cluster.settle()
        web = cluster.store.get("pods", "default", "web")
        assert web is not None
        assert cstatus(web)["resources"]["requests"]["cpu"] == "700m"
        code, out, err = await kubectl(cluster, "top", "pod", "web", "--no-headers")
        assert code == 0, err
        assert out.split()[:3] == ["web", "350m", "128Mi"]  # default usage: half the (new) requests
        code, out, err = await kubectl(cluster, "drain", "node-1", "--force", "--timeout", "10s")
        assert code == 0, err
        assert "pod/web evicted" in out
        await cluster.settle()
        assert cluster.store.get("pods", "default", "web") is None
        node = cluster.store.get("nodes", None, "node-1")
        assert node is not None
        assert node["spec"]["unschedulable"] is True
