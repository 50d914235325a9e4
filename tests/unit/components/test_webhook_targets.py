"""`AdmissionTargets` reads: their deadline is real time even when the injected clock runs fast."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from tests.builders import make_pod
from vpa.components.webhook_targets import AdmissionTargets
from vpa.kube.client import KubeClient
from vpa.kube.converting import pod_from_dict
from vpa.model.clock import VirtualClock
from vpa.model.vpa import TargetRef


class SlowClient:
    """Answers every GET after 20 ms of real time: a ReplicaSet owned by Deployment `web`, or a Deployment."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def get(self, path: str, **_: Any) -> dict[str, object]:
        self.paths.append(path)
        await asyncio.sleep(0.02)
        if "/replicasets/" in path:
            owner = {"kind": "Deployment", "name": "web", "controller": True}
            return {"metadata": {"name": path.rsplit("/", 1)[1], "ownerReferences": [owner]}}
        return {
            "kind": "Deployment",
            "metadata": {"name": path.rsplit("/", 1)[1]},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        }


async def test_reads_are_not_cut_short_by_a_fast_virtual_clock() -> None:
    # A million virtual seconds per real one (as `--clock=sim` with a high time scale): the 2 s read
    # deadline measured on this clock would be 2 µs of real time and every read would time out.
    clock = VirtualClock(time_scale=1_000_000)
    client = SlowClient()
    targets = AdmissionTargets(cast(KubeClient, client), clock, ttl_s=1e9, negative_ttl_s=1e9)
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/web"
        selector = await targets.selector("default", TargetRef("apps/v1", "Deployment", "web"))
    finally:
        targets.close()
    assert selector is not None, "the Deployment read timed out on the virtual clock"
    assert selector.matches(pod.labels)
    assert any("/replicasets/" in p for p in client.paths)
