"""The admission controller notices when the API server never calls it although pods are being created.

A real `Runtime` and admission controller against `vpa sim`: pods created in a namespace holding a VPA
while the webhook's Service leads nowhere (the silent failure of a wrong Service or a NetworkPolicy) turn
`vpa_admission_controller_webhook_silent` to 1; with the Service wired, the same pods are reviewed and the
gauge stays 0.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from vpa.kube.client import api_path
from vpa.sim import SimCluster

from .test_webhook_helpers import SERVICE, SERVICES, cert_flags, running_webhook, wait_for, write_certs


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }


VPA = {
    "apiVersion": "autoscaling.k8s.io/v1",
    "kind": "VerticalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
}


def _silent(controller: Any) -> float:
    value = controller.ctx.registry.get_sample_value("vpa_admission_controller_webhook_silent")
    assert value is not None
    return float(value)


async def _scenario(tmp_path: Path, *, wired: bool) -> float:
    directory = write_certs(tmp_path)
    async with (
        SimCluster(nodes=1, behaviour=False, webhook_services=dict(SERVICES)) as cluster,
        running_webhook(cluster, *cert_flags(directory), silence_check_s=0.3) as controller,
    ):
        client = controller.ctx.client
        await client.create(api_path("autoscaling.k8s.io", "v1", "verticalpodautoscalers",
                                     namespace="default"), VPA)
        await wait_for(lambda: "default" in controller.namespaces, what="the VPA in the cache")
        if not wired:
            # The registered Service leads nowhere (the API server's failure policy Ignore admits the pod).
            cluster.admission.services[SERVICE] = ("127.0.0.1", 9)
        await asyncio.sleep(5.4)  # past the settling delay at start
        before = controller.server.requests
        for index in range(3):
            await client.create(api_path("", "v1", "pods", namespace="default"), _pod(f"web-{index}"))
        await wait_for(lambda: len(controller.ctx.pods.list()) >= 3, what="the pods in the cache")
        await asyncio.sleep(1.0)  # three check intervals
        assert (controller.server.requests > before) is wired
        return _silent(controller)


async def test_unreached_webhook_is_reported_while_pods_are_created(tmp_path: Path) -> None:
    assert await _scenario(tmp_path, wired=False) == 1.0


async def test_reached_webhook_is_not_reported(tmp_path: Path) -> None:
    assert await _scenario(tmp_path, wired=True) == 0.0
