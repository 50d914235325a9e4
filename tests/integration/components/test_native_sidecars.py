"""Native sidecars (AEP-8905, gate `NativeSidecar`) end to end against `vpa sim`.

The simulated kubelet and metrics-server report a native sidecar's usage beside the containers; with the
gate on the recommender recommends for it (never for a plain init container), the admission logic sets its
resources at creation, and the updater resizes it in place like any container. With the gate off nothing
about init containers changes (upstream 1.7).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.components.recommender_helpers import VPAS, create, harness, vpa
from tests.integration.components.test_updater_support import (
    admission_webhook,
    amounts,
    container,
    rec,
    res,
    uids,
    updater_env,
)
from tests.integration.components.test_updater_support import vpa as updater_vpa
from vpa.kube.converting import vpa_status_from_dict
from vpa.logic.admission.patches import AdmissionOptions
from vpa.model.features import FeatureGates
from vpa.sim.cluster.profiles import ANNOTATION

USAGE = {
    "app": {"cpu": {"type": "constant", "value": "400m"}, "memory": {"type": "constant", "value": "300Mi"}},
    "proxy": {"cpu": {"type": "constant", "value": "150m"}, "memory": {"type": "constant", "value": "120Mi"}},
    "migrate": {"cpu": {"type": "constant", "value": "900m"}, "memory": {"type": "constant", "value": "1Gi"}},
}


def _resources(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": "2Gi"}}


def _deployment() -> dict[str, Any]:
    image = "registry.k8s.io/pause:3.10"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mesh", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mesh"}},
            "template": {
                "metadata": {"labels": {"app": "mesh"}, "annotations": {ANNOTATION: json.dumps(USAGE)}},
                "spec": {
                    "initContainers": [
                        {"name": "migrate", "image": image, "resources": _resources("100m", "64Mi")},
                        {"name": "proxy", "image": image, "restartPolicy": "Always",
                         "resources": _resources("100m", "64Mi")},
                    ],
                    "containers": [{"name": "app", "image": image, "resources": _resources("500m", "256Mi")}],
                },
            },
        },
    }


@pytest.mark.parametrize(("gates", "expected"), [("NativeSidecar=true", ["app", "proxy"]), ("", ["app"])],
                         ids=["gate-on", "gate-off"])
async def test_the_recommender_recommends_for_native_sidecars_only_with_the_gate(
    gates: str, expected: list[str]
) -> None:
    async with harness(gates=FeatureGates.parse(gates)) as h:
        await create(h, "deployments.apps", _deployment())
        await create(h, VPAS, vpa("mesh"))
        await h.loop()
        reports = await h.run_for(1800, 300.0)
        # Every read sees the app and the sidecar (metrics-server reports both); plain init containers exited.
        assert sum(r.samples for r in reports) == 2 * len(expected) * len(reports)  # cpu and memory
        status = vpa_status_from_dict(h.vpa("mesh")["status"])
        assert status.recommendation is not None
        names = [c.container_name for c in status.recommendation.containers]
        assert names == expected
        if "proxy" in expected:
            proxy = status.recommendation.for_container("proxy")
            assert proxy is not None
            # 150m and 120Mi of usage, whatever the 100m/64Mi request: its own samples, plus the 15% margin.
            assert proxy.target.cpu_millicores is not None
            assert 150 <= proxy.target.cpu_millicores <= 200
            assert proxy.target.memory_bytes is not None
            assert 138 * 2**20 <= proxy.target.memory_bytes <= 170 * 2**20


GATES = "NativeSidecar=true,InPlace=true"


def _sidecar(cpu: str, memory: str) -> dict[str, Any]:
    out = container("proxy", cpu=cpu, memory=memory, cpu_limit=None, memory_limit="1Gi")
    out["restartPolicy"] = "Always"
    return out


async def test_admission_sets_and_the_updater_resizes_a_sidecar_in_place() -> None:
    options = AdmissionOptions(gates=FeatureGates.parse(GATES))
    async with updater_env(gates=GATES) as env, admission_webhook(env.cluster, options):
        await env.create_vpa(
            updater_vpa("web", "web", "InPlaceOrRecreate"),
            rec("app", cpu="300m", memory="256Mi"),
            rec("proxy", cpu="150m", memory="128Mi", lower=("100m", "100Mi"), upper=("200m", "200Mi")),
        )
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "initContainers": [
                            container("migrate", cpu="50m", memory="32Mi", cpu_limit=None, memory_limit=None),
                            _sidecar("50m", "32Mi"),
                        ],
                        "containers": [container("app", cpu="250m", memory="256Mi")],
                    },
                },
            },
        }
        await env.store.create("deployments.apps", body)
        await env.sync()
        before = env.pods("web")
        assert len(before) == 2
        for pod in before:
            migrate, proxy = pod["spec"]["initContainers"]
            assert amounts(proxy["resources"]["requests"]) == res("150m", "128Mi")  # set at admission
            assert amounts(migrate["resources"]["requests"]) == res("50m", "32Mi")  # plain init: untouched
            assert pod["metadata"]["annotations"]["vpaObservedContainers"] == "app, proxy"
        await env.advance(30)
        # The sidecar's recommendation moves well outside the range its current 150m sits in: resize it.
        await env.set_recommendation(
            "web",
            rec("app", cpu="300m", memory="256Mi"),
            rec("proxy", cpu="400m", memory="128Mi", lower=("300m", "100Mi"), upper=("500m", "200Mi")),
        )
        await env.run_once()
        await env.advance(5)
        after = env.pods("web")
        assert uids(after) == uids(before)  # in place: no eviction
        for pod in after:
            _, proxy = pod["spec"]["initContainers"]
            assert amounts(proxy["resources"]["requests"]) == res("400m", "128Mi")
            status = next(s for s in pod["status"]["initContainerStatuses"] if s["name"] == "proxy")
            assert amounts(status["resources"]["requests"]) == res("400m", "128Mi")
            assert status["restartCount"] == 0
            assert pod["metadata"]["annotations"].get("vpaInPlaceUpdated") == "true"
