"""Pod-level resources (`spec.resources`) under a VPA, end to end against `vpa sim`.

Admission (the real admission controller, called by the simulated API server, which validates the result as
kube-apiserver does): without gate `PodLevelResources` such pods are admitted unchanged with a Warning event
(a container-only patch could make them invalid); with it, container values the containers set themselves
follow the recommendation and the pod-level values follow their sum, and a pod that no values keep valid is
admitted unchanged with the reason in the event.

In place (the updater): it reads the simulated API server's version (`--in-place-pod-level-resources`
left at `auto`). On a cluster that resizes pod-level resources (Kubernetes 1.37) the containers and the
pod-level values are resized together, without a restart; when the cluster cannot (1.35 by default),
`InPlaceOrRecreate` evicts and the recreated pod is admitted with the new values. Told the opposite by the
flag, the updater learns from the server's refusal and never sends that resize again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.components.test_updater_support import (
    admission_webhook,
    amounts,
    rec,
    res,
    settings,
    uids,
    updater_env,
)
from tests.integration.components.test_updater_support import vpa as updater_vpa
from tests.integration.components.test_webhook_helpers import (
    SERVICES,
    VPA,
    cert_flags,
    running_webhook,
    wait_for,
    write_certs,
)
from vpa.logic.admission.patches import AdmissionOptions
from vpa.model.features import FeatureGates
from vpa.sim import SimCluster

IMAGE = "registry.k8s.io/pause:3.10"


def _deployment(
    pod_resources: dict[str, Any], app: dict[str, Any] | None, replicas: int = 1
) -> dict[str, Any]:
    containers: list[dict[str, Any]] = [{"name": "app", "image": IMAGE}, {"name": "side", "image": IMAGE}]
    if app is not None:
        containers[0]["resources"] = app
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"resources": pod_resources, "containers": containers},
            },
        },
    }


def _recommendation(app: tuple[str, str], side: tuple[str, str]) -> dict[str, Any]:
    return {"recommendation": {"containerRecommendations": [
        {"containerName": name, "target": {"cpu": cpu, "memory": memory},
         "lowerBound": {"cpu": "1m", "memory": "1Mi"}, "upperBound": {"cpu": "8", "memory": "8Gi"}}
        for name, (cpu, memory) in (("app", app), ("side", side))
    ]}}


@pytest.mark.parametrize(
    ("gates", "policy", "pod_requests", "app_requests", "event"),
    [
        # gate off: admitted as written, with an event (a container patch alone could make it invalid)
        ("", None, {"cpu": "500m", "memory": "512Mi"}, {"cpu": "200m", "memory": "128Mi"},
         "its containers' requests were left unchanged"),
        # gate on: the app's own values follow its recommendation, the pod-level request the sum
        ("PodLevelResources=true", None, {"cpu": "400m", "memory": "300Mi"},
         {"cpu": "300m", "memory": "200Mi"}, None),
        # gate on, RequestsOnly under a 256Mi pod-level limit: the app alone would need 300Mi: unchanged
        ("PodLevelResources=true", "RequestsOnly", {"cpu": "500m", "memory": "256Mi"},
         {"cpu": "200m", "memory": "128Mi"}, "memory requests add up to 300Mi, above the pod-level request"),
    ],
    ids=["gate-off-unchanged", "gate-on-scaled", "gate-on-no-valid-values-unchanged"],
)  # fmt: skip
async def test_admission_keeps_pods_with_pod_level_resources_valid(
    tmp_path: Path, gates: str, policy: str | None, pod_requests: dict[str, str],
    app_requests: dict[str, str], event: str | None,
) -> None:
    written = {"requests": {"cpu": "500m", "memory": "512Mi"}}
    if policy is not None:
        written = {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}}
    async with SimCluster(nodes=1, behaviour=True, webhook_services=dict(SERVICES)) as cluster:
        flags = [*cert_flags(write_certs(tmp_path / "certs"))]
        if gates:
            flags.append(f"--feature-gates={gates}")
        async with running_webhook(cluster, *flags) as controller:
            spec: dict[str, Any] = {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "updatePolicy": {"updateMode": "Recreate"},
            }
            if policy is not None:
                spec["resourcePolicy"] = {"containerPolicies": [
                    {"containerName": "*", "controlledValues": policy}]}
            await cluster.store.create(VPA, {"apiVersion": "autoscaling.k8s.io/v1",
                                             "kind": "VerticalPodAutoscaler",
                                             "metadata": {"name": "web-vpa", "namespace": "default"},
                                             "spec": spec})
            app_target = ("300m", "300Mi" if policy is not None else "200Mi")
            await cluster.store.patch(VPA, "default", "web-vpa", "merge",
                                      {"status": _recommendation(app_target, ("100m", "100Mi"))},
                                      subresource="status")

            def has_recommendation() -> bool:
                vpa = controller.ctx.vpas.get("default", "web-vpa")
                return vpa is not None and vpa.recommendation is not None

            await wait_for(has_recommendation, what="recommendation in the cache")
            await cluster.store.create("deployments.apps", _deployment(
                written, {"requests": {"cpu": "200m", "memory": "128Mi"}}))
            await cluster.settle()

            def pods() -> list[dict[str, Any]]:
                return cluster.store.list("pods", "default", label_selector="app=web")

            await wait_for(lambda: len(pods()) == 1, what="the pod is created")
            (pod,) = pods()
            assert amounts(pod["spec"]["resources"]["requests"]) == amounts(pod_requests)
            app, side = pod["spec"]["containers"]
            assert amounts(app["resources"]["requests"]) == amounts(app_requests)
            assert not (side.get("resources") or {}).get("requests")  # shares the pod's budget
            if event is None:
                assert "pod: cpu request, memory request" in pod["metadata"]["annotations"]["vpaUpdates"]
                return

            def warnings() -> list[str]:
                return [e["message"] for e in cluster.store.list("events", "default")
                        if e["reason"] == "PodLevelResourcesUnchanged"]

            await wait_for(lambda: bool(warnings()), what="the PodLevelResourcesUnchanged event")
            assert event in warnings()[0]
            assert "vpaUpdates" not in (pod["metadata"].get("annotations") or {})


GATES = "PodLevelResources=true,InPlace=true"


@pytest.mark.parametrize(
    ("version", "in_place"),
    [("1.37", True), ("1.35", False)],
    ids=["1.37-resizes-pod-level", "1.35-cannot-evicts"],
)
async def test_the_updater_scales_pod_level_values(version: str, in_place: bool) -> None:
    options = AdmissionOptions(gates=FeatureGates.parse(GATES))
    async with updater_env(version, gates=GATES, updater_settings=settings()) as env, \
            admission_webhook(env.cluster, options):
        await env.create_vpa(updater_vpa("web", "web", "InPlaceOrRecreate", min_replicas=1),
                             rec("app", cpu="300m", memory="200Mi"), rec("side", cpu="100m", memory="100Mi"))
        await env.store.create("deployments.apps", _deployment(
            {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            {"requests": {"cpu": "200m", "memory": "128Mi"}}))
        await env.sync()
        (before,) = env.pods("web")
        # Admitted: app 300m/200Mi, pod-level 400m/300Mi, the 1Gi limit scaled with its request: 600Mi.
        assert amounts(before["spec"]["resources"]["requests"]) == res("400m", "300Mi")
        assert amounts(before["spec"]["resources"]["limits"]) == res(None, "600Mi")
        await env.advance(30)
        # The app's usage doubled: its request is now below the lower bound.
        await env.set_recommendation(
            "web",
            rec("app", cpu="600m", memory="400Mi", lower=("550m", "350Mi")),
            rec("side", cpu="100m", memory="100Mi"),
        )
        await env.run_once()
        # Read from the server's `/version` (the sim emulates the release), not from a flag.
        features = env.updater.resize_features
        assert features is not None
        assert features.version == tuple(int(part) for part in version.split("."))
        assert features.pod_level is in_place
        await env.advance(5)
        await env.sync()
        if not in_place:
            await env.run_once()  # the resize it did not attempt is an eviction; the pod is recreated
            await env.advance(5)
            await env.sync()
        (after,) = env.pods("web")
        assert (uids([after]) == uids([before])) is in_place
        app = after["spec"]["containers"][0]
        assert amounts(app["resources"]["requests"]) == res("600m", "400Mi")
        assert amounts(after["spec"]["resources"]["requests"]) == res("700m", "500Mi")
        # 600Mi × 500Mi / 300Mi = 1000Mi
        assert amounts(after["spec"]["resources"]["limits"]) == res(None, "1000Mi")
        if in_place:
            assert after["status"]["containerStatuses"][0]["restartCount"] == 0
            assert after["metadata"]["annotations"].get("vpaInPlaceUpdated") == "true"


@pytest.mark.parametrize("mode", ["InPlace", "InPlaceOrRecreate"])
async def test_a_refused_pod_level_resize_is_not_sent_again(mode: str) -> None:
    # 1.35 refuses every resize of a pod with pod-level resources. The flag says otherwise (as on a 1.35
    # with the alpha gate): the first resize is refused with a 422, and from then on the updater knows.
    options = AdmissionOptions(gates=FeatureGates.parse(GATES))
    updater = settings(in_place_pod_level_resources=True)
    async with updater_env("1.35", gates=GATES, updater_settings=updater) as env, \
            admission_webhook(env.cluster, options):
        await env.create_vpa(updater_vpa("web", "web", mode, min_replicas=1),
                             rec("app", cpu="300m", memory="200Mi"), rec("side", cpu="100m", memory="100Mi"))
        await env.store.create("deployments.apps", _deployment(
            {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            {"requests": {"cpu": "500m", "memory": "512Mi"}}))
        await env.sync()
        (before,) = env.pods("web")
        await env.advance(30)
        await env.set_recommendation(
            "web",
            rec("app", cpu="600m", memory="400Mi", lower=("550m", "350Mi")),
            rec("side", cpu="100m", memory="100Mi"),
        )
        first = await env.run_once()
        assert [(key, outcome.value) for key, outcome, _ in first.failed] == [
            (f"default/{before['metadata']['name']}", "Rejected")]
        features = env.updater.resize_features
        assert features is not None
        assert not features.pod_level
        for _ in range(3):
            await env.advance(5)
            report = await env.run_once()
            assert not report.failed
            assert not report.resized
        live = env.pods("web")
        if mode == "InPlace":
            assert uids(live) == uids([before])  # never evicted; told why on the pod
            reasons = {reason for _, reason, _ in await env.event_reasons()}
            assert "PodLevelResizeUnsupported" in reasons
            # Told once, not on each of the three loops that skipped it (each a PATCH of the Event's count).
            events = env.store.list("events", "default")
            (told,) = [e for e in events if e["reason"] == "PodLevelResizeUnsupported"]
            assert told.get("count", 1) == 1, told
        else:
            assert uids(live) != uids([before])  # evicted once, recreated with the new values
            (after,) = live
            assert amounts(after["spec"]["containers"][0]["resources"]["requests"]) == res("600m", "400Mi")
