"""End to end over real TLS: the simulated API server calls our webhook (verifying the registered caBundle)
while `kubectl` creates Deployments and VPAs; the Deployment → ReplicaSet → Pod controllers create pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.components.test_webhook_helpers import (
    HOOKS,
    SERVICES,
    VPA,
    cert_flags,
    kubectl,
    kubectl_binary,
    running_webhook,
    wait_for,
    write_certs,
)
from vpa.sim import SimCluster

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(kubectl_binary() is None, reason="kubectl not installed"),
]


def _deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "100Mi"},
                                "limits": {"cpu": "200m", "memory": "200Mi"},
                            },
                        },
                        {"name": "sidecar", "image": "registry.k8s.io/pause:3.10"},
                    ]
                },
            },
        },
    }


def _vpa(name: str, target: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target}, **spec},
    }


RECOMMENDATION = {
    "recommendation": {
        "containerRecommendations": [
            {
                "containerName": "app",
                "target": {"cpu": "250m", "memory": "300Mi"},
                "lowerBound": {"cpu": "200m", "memory": "200Mi"},
                "upperBound": {"cpu": "1", "memory": "1Gi"},
            }
        ]
    }
}


async def test_kubectl_apply_deployment_gets_recommended_resources(tmp_path: Path) -> None:
    async with SimCluster(nodes=2, behaviour=True, webhook_services=dict(SERVICES)) as cluster:
        directory = write_certs(tmp_path / "certs")
        async with running_webhook(cluster, *cert_flags(directory)) as controller:
            # The configuration we registered is what the API server calls (caBundle = our CA file).
            config = cluster.store.get(HOOKS, None, "vpa-webhook-config")
            assert config is not None
            code, _out, err = await kubectl(
                cluster, "apply", "-f", "-", stdin=yaml.safe_dump(_vpa("web-vpa", "web"))
            )
            assert code == 0, err
            stored = cluster.store.get(VPA, "default", "web-vpa")
            assert stored is not None
            assert stored["spec"]["updatePolicy"] == {"updateMode": "Recreate"}  # our defaulting patch
            await cluster.store.patch(
                VPA, "default", "web-vpa", "merge", {"status": RECOMMENDATION}, subresource="status"
            )
            vpas = controller.ctx.vpas

            def has_recommendation() -> bool:
                vpa = vpas.get("default", "web-vpa")
                return vpa is not None and vpa.recommendation is not None

            await wait_for(has_recommendation, what="recommendation in the cache")

            code, _out, err = await kubectl(
                cluster, "apply", "-f", "-", stdin=yaml.safe_dump(_deployment("web"))
            )
            assert code == 0, err
            await cluster.settle()

            def web_pods() -> list[dict[str, Any]]:
                return [
                    p
                    for p in cluster.store.list("pods", "default")
                    if p["metadata"].get("labels", {}).get("app") == "web"
                ]

            await wait_for(lambda: len(web_pods()) == 2, what="two web pods")
            for pod in web_pods():
                app, sidecar = pod["spec"]["containers"]
                # Quantities as the patch logic writes them (memory in bytes: 300Mi, 600Mi).
                assert app["resources"]["requests"] == {"cpu": "250m", "memory": "300Mi"}
                # Limits keep the original 2:1 limit/request ratio.
                assert app["resources"]["limits"] == {"cpu": "500m", "memory": "600Mi"}
                assert sidecar.get("resources") in (None, {})
                annotations = pod["metadata"]["annotations"]
                assert annotations["vpaUpdates"].startswith("Pod resources updated by web-vpa: container 0: ")
                assert annotations["vpaObservedContainers"] == "app, sidecar"

            # A Deployment no VPA covers is left alone (no annotations either).
            code, _out, err = await kubectl(
                cluster, "apply", "-f", "-", stdin=yaml.safe_dump(_deployment("other", 1))
            )
            assert code == 0, err
            await cluster.settle()

            def other_pods() -> list[dict[str, Any]]:
                return [
                    p
                    for p in cluster.store.list("pods", "default")
                    if p["metadata"].get("labels", {}).get("app") == "other"
                ]

            await wait_for(lambda: len(other_pods()) == 1, what="the other pod")
            other = other_pods()[0]
            assert "vpaUpdates" not in (other["metadata"].get("annotations") or {})
            assert other["spec"]["containers"][0]["resources"]["requests"] == {
                "cpu": "100m",
                "memory": "100Mi",
            }
            metrics = controller.metrics
            assert metrics.pods.labels(applied="true")._value.get() == 2
            assert metrics.pods.labels(applied="false")._value.get() == 1
            # One LimitRange watch per process: the webhook reads the shared controller caches' one.
            assert controller.ctx.controllers is not None
            assert controller.limit_cache is controller.ctx.controllers.limitranges
            assert not controller.own_limit_cache


INVALID: list[tuple[str, dict[str, Any], str]] = [
    (
        "off-with-controlled-values",
        {
            "resourcePolicy": {
                "containerPolicies": [
                    {"containerName": "app", "mode": "Off", "controlledValues": "RequestsAndLimits"}
                ]
            }
        },
        "controlledValues shouldn't be specified if container scaling mode is off",
    ),
    (
        "in-place",
        {"updatePolicy": {"updateMode": "InPlace"}},
        "you must enable feature gate InPlace in the admission-controller args",
    ),
    (
        "two-recommenders",
        {"recommenders": [{"name": "a"}, {"name": "b"}]},
        "spec.recommenders: Too many: 2: must have at most 1 item",
    ),
]


async def test_kubectl_apply_invalid_vpa_fails_with_our_message(tmp_path: Path) -> None:
    async with SimCluster(nodes=1, behaviour=True, webhook_services=dict(SERVICES)) as cluster:
        directory = write_certs(tmp_path / "certs")
        async with running_webhook(cluster, *cert_flags(directory)):
            for name, spec, message in INVALID:
                code, out, err = await kubectl(
                    cluster, "apply", "-f", "-", stdin=yaml.safe_dump(_vpa(name, "web", **spec))
                )
                assert code != 0, (name, out)
                assert 'admission webhook "vpa.k8s.io" denied the request' in err, err
                assert f'VerticalPodAutoscaler.autoscaling.k8s.io "{name}" is invalid' in err, err
                assert message in err, err
                assert cluster.store.get(VPA, "default", name) is None

            # An unknown update mode never reaches the webhook: the CRD's enum (ours, as upstream's) refuses
            # it first, naming the field.
            code, out, err = await kubectl(
                cluster, "apply", "-f", "-",
                stdin=yaml.safe_dump(_vpa("bad-mode", "web", updatePolicy={"updateMode": "Sometimes"})),
            )  # fmt: skip
            assert code != 0, out
            assert "spec.updatePolicy.updateMode" in err, err
            assert '"Sometimes"' in err, err
            assert cluster.store.get(VPA, "default", "bad-mode") is None

    async with (
        SimCluster(nodes=1, behaviour=True, webhook_services=dict(SERVICES)) as cluster,
        running_webhook(cluster, *cert_flags(directory), "--feature-gates=InPlace=true"),
    ):
        code, _out, err = await kubectl(
            cluster,
            "apply",
            "-f",
            "-",
            stdin=yaml.safe_dump(_vpa("in-place", "web", updatePolicy={"updateMode": "InPlace"})),
        )
        assert code == 0, err
        assert cluster.store.get(VPA, "default", "in-place") is not None
