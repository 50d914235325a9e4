"""Upstream VPA's admission controller and updater run unmodified against `vpa sim`: the webhook registers
itself (protobuf MutatingWebhookConfiguration) and keeps its status Lease fresh (protobuf Lease), the
updater's loops are not skipped, evicts (protobuf Eviction, Event) and the webhook patches the new pod."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.differential.harness import Cluster, eventually, needs_upstream, run_isolated, sim, webhook_certs

pytestmark = [pytest.mark.differential, needs_upstream, pytest.mark.timeout(300)]

VPA = "/apis/autoscaling.k8s.io/v1/namespaces/default/verticalpodautoscalers"


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    container = {
        "name": "app",
        "image": "app",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        },
    }


async def _pods(cluster: Cluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await cluster.request("GET", "/api/v1/namespaces/default/pods"))["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def test_upstream_admission_controller_and_updater_run_with_default_flags(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if not run_isolated(request):
        return
    async with sim(tmp_path / "run", "--nodes", "2", "--time-scale", "1") as cluster:
        certs = webhook_certs(cluster.folder)
        admission = await cluster.upstream(
            "admission-controller",
            f"--client-ca-file={certs.ca}",
            f"--tls-cert-file={certs.cert}",
            f"--tls-private-key={certs.key}",
        )
        # Default flags but the loop period, so the test takes seconds, not minutes.
        updater = await cluster.upstream("updater", "--updater-interval=10s")
        await cluster.request("POST", "/apis/apps/v1/namespaces/default/deployments", _deployment("web", 2))
        vpa = {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "updatePolicy": {"updateMode": "Recreate"},
            },
        }
        await cluster.request("POST", VPA, vpa)
        bounds = {"containerName": "app", "target": {"cpu": "300m", "memory": "300Mi"}}
        bounds |= {
            "lowerBound": {"cpu": "250m", "memory": "250Mi"},
            "upperBound": {"cpu": "1", "memory": "1Gi"},
        }
        bounds["uncappedTarget"] = bounds["target"]
        status = {"status": {"recommendation": {"containerRecommendations": [bounds]}}}
        await cluster.request("PATCH", f"{VPA}/web/status", status)

        async def registered() -> bool:
            path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vpa-webhook-config"
            mwc = await cluster.request("GET", path, ok=(404,))
            return bool(mwc.get("kind") == "MutatingWebhookConfiguration")

        await eventually(registered, 60, "upstream's webhook configuration", cluster)

        async def lease() -> Any:
            path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vpa-admission-controller"
            got = await cluster.request("GET", path, ok=(404,))
            return got.get("spec", {}).get("renewTime")

        first_renewal = await eventually(lease, 60, "upstream's admission-controller status Lease", cluster)

        async def patched_pod() -> bool:
            pods = await _pods(cluster)
            requests = [p["spec"]["containers"][0]["resources"]["requests"] for p in pods]
            return {"cpu": "300m", "memory": "300Mi"} in requests

        # The updater evicts (its loop ran: the Lease was accepted); the ReplicaSet's new pod went through
        # upstream's webhook, which set the recommended requests.
        await eventually(
            patched_pod, 90, "a pod evicted by upstream's updater and patched by its webhook", cluster
        )
        events = await cluster.request("GET", "/api/v1/namespaces/default/events")
        assert "EvictedByVPA" in {e.get("reason") for e in events["items"]}

        await eventually(lambda: _renewed_after(lease, first_renewal), 30, "a renewed Lease", cluster)
        await asyncio.sleep(1)
        assert admission.proc.returncode is None, admission.text()[-3000:]
        assert updater.proc.returncode is None, updater.text()[-3000:]
        assert "cannot decode this protobuf body" not in admission.text() + updater.text()


async def _renewed_after(lease: Any, first: str) -> bool:
    now = await lease()
    return bool(now and now != first)
