"""The Python harness's behaviour controls (`set_usage`, timing knobs), the `scale` subresource of
ReplicaSets and StatefulSets with their controllers following, and pod status details the kubelet reports
(`started`, the 1.33 `PodResizePending` condition with `status.resize` left empty).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.integration.sim_cluster.helpers import (
    condition,
    container,
    create_pod,
    cstatus,
    pod,
    resize,
    resources_patch,
    sim,
)
from vpa.sim import SimCluster
from vpa.sim.cluster import USAGE_ANNOTATION, UsageProfile
from vpa.sim.cluster.profiles import Constant

MI = 2**20


def get(cluster: SimCluster, name: str) -> dict[str, Any]:
    found = cluster.store.get("pods", "default", name)
    assert found is not None
    return found


def live_pods(cluster: SimCluster, app: str) -> list[dict[str, Any]]:
    return [
        p
        for p in cluster.store.list("pods", "default", label_selector=f"app={app}")
        if not p["metadata"].get("deletionTimestamp")
    ]


async def pod_usage(http: aiohttp.ClientSession, name: str, container_name: str = "app") -> dict[str, str]:
    async with http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/{name}") as r:
        assert r.status == 200
        body = await r.json()
    return next(c["usage"] for c in body["containers"] if c["name"] == container_name)


# --- usage-profile control and timing knobs through SimCluster ---------------------------------------------


async def test_set_usage_on_the_harness_takes_profiles_and_their_json_form() -> None:
    async with sim("1.35") as (cluster, http):
        await create_pod(cluster, pod("web"))
        cluster.set_usage("default", "web", "app", UsageProfile(cpu=Constant(300), memory=Constant(200 * MI)))
        await cluster.advance(15)
        assert await pod_usage(http, "web") == {"cpu": "300m", "memory": f"{200 * 1024}Ki"}
        # The JSON form, as the `sim.vpa.dev/usage` annotation takes it per container; it overrides it.
        annotated = pod("ann", annotations={USAGE_ANNOTATION: json.dumps({"app": {"cpu": "100m"}})})
        await create_pod(cluster, annotated)
        cluster.set_usage("default", "ann", "app", {"cpu": {"type": "constant", "value": "700m"}})
        await cluster.advance(15)
        assert (await pod_usage(http, "ann"))["cpu"] == "700m"
    async with SimCluster(behaviour=False, vpa_crds=False) as bare:
        with pytest.raises(RuntimeError, match="behaviour"):
            bare.set_usage("default", "web", "app", UsageProfile())


async def test_pod_start_delay_and_started_flag() -> None:
    async with sim("1.35", pod_start_delay_s=30) as (cluster, _http):
        await create_pod(cluster, pod("web"))
        bound = get(cluster, "web")
        assert bound["spec"]["nodeName"]
        assert bound["status"]["phase"] == "Pending"
        assert cstatus(bound).get("started") is not True
        assert "running" not in cstatus(bound)["state"]
        await cluster.advance(29)
        assert get(cluster, "web")["status"]["phase"] == "Pending"
        await cluster.advance(1)
        running = get(cluster, "web")
        assert running["status"]["phase"] == "Running"
        status = cstatus(running)
        assert status["started"] is True  # the kubelet reports started once the container runs
        assert status["ready"] is True
        assert status["state"]["running"]["startedAt"] == "2026-01-01T00:00:30Z"


async def test_resize_actuation_and_job_run_knobs() -> None:
    async with sim("1.35", resize_actuation_s=20, job_run_s=10) as (cluster, http):
        await create_pod(cluster, pod("web"))
        code, _ = await resize(http, "web", resources_patch(cpu="700m"))
        assert code == 200
        await cluster.settle()
        allocated = get(cluster, "web")
        assert condition(allocated, "PodResizeInProgress") is not None
        assert cstatus(allocated)["resources"]["requests"]["cpu"] == "500m"  # not actuated yet
        await cluster.advance(20)
        done = get(cluster, "web")
        assert condition(done, "PodResizeInProgress") is None
        assert cstatus(done)["resources"]["requests"]["cpu"] == "700m"
        await cluster.store.create(
            "jobs.batch",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "once", "namespace": "default"},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"app": "once"}},
                        "spec": {"restartPolicy": "Never", "containers": [container()]},
                    }
                },
            },
        )
        await cluster.settle()
        await cluster.advance(9)
        job = cluster.store.get("jobs.batch", "default", "once")
        assert job is not None
        assert not job["status"].get("succeeded")
        await cluster.advance(1)
        job = cluster.store.get("jobs.batch", "default", "once")
        assert job is not None
        assert job["status"]["succeeded"] == 1


async def test_trace_dir_resolves_relative_trace_paths(tmp_path: Path) -> None:
    (tmp_path / "usage.csv").write_text("timestamp,container,cpu_cores,memory_bytes\n0,web,0.25,104857600\n")
    profile = {"app": {"trace": {"path": "usage.csv", "key": "web"}}}
    async with sim("1.35", trace_dir=tmp_path) as (cluster, http):
        await create_pod(cluster, pod("web", annotations={USAGE_ANNOTATION: json.dumps(profile)}))
        await cluster.advance(15)
        assert await pod_usage(http, "web") == {"cpu": "250m", "memory": f"{100 * 1024}Ki"}


# --- the scale subresource of ReplicaSets and StatefulSets ------------------------------------------------


def _workload(kind: str, name: str, replicas: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container()]}},
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


@pytest.mark.parametrize(("kind", "plural"), [("ReplicaSet", "replicasets"), ("StatefulSet", "statefulsets")])
async def test_scale_subresource_get_put_patch_and_the_controller_follows(kind: str, plural: str) -> None:
    async with sim("1.35") as (cluster, http):
        await cluster.store.create(f"{plural}.apps", _workload(kind, "web", 2))
        await cluster.settle()
        assert len(live_pods(cluster, "web")) == 2
        path = f"/apis/apps/v1/namespaces/default/{plural}/web/scale"
        async with http.get(path) as r:
            assert r.status == 200
            scale = await r.json()
        assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
        assert scale["spec"] == {"replicas": 2}
        assert scale["status"]["replicas"] == 2
        assert scale["status"]["selector"] == "app=web"
        scale["spec"]["replicas"] = 4
        async with http.put(
            path, data=orjson.dumps(scale), headers={"Content-Type": "application/json"}
        ) as r:
            assert r.status == 200, await r.text()
            assert (await r.json())["spec"]["replicas"] == 4
        await cluster.settle()
        obj = cluster.store.get(f"{plural}.apps", "default", "web")
        assert obj is not None
        assert obj["spec"]["replicas"] == 4
        assert len(live_pods(cluster, "web")) == 4
        async with http.patch(
            path,
            data=orjson.dumps({"spec": {"replicas": 1}}),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            assert r.status == 200, await r.text()
        await cluster.advance(60)  # graceful deletion of the surplus pods
        assert len(live_pods(cluster, "web")) == 1
        async with http.get(path) as r:
            scale = await r.json()
        assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (1, 1)


# --- 1.33: PodResizePending condition, status.resize left empty -------------------------------------------


async def test_1_33_reports_pending_resizes_as_conditions_not_status_resize() -> None:
    async with sim("1.33", cpu="4") as (cluster, http):
        await create_pod(
            cluster, pod("big", container(cpu="2", cpu_limit="2", memory="1Gi", memory_limit="1Gi"))
        )
        await create_pod(cluster, pod("web", container(cpu="1", cpu_limit="8")))
        code, body = await resize(http, "web", resources_patch(cpu="2500m"))
        assert code == 200
        assert not body["status"].get("resize")  # 1.32 answers "Proposed" here
        await cluster.settle()
        deferred = get(cluster, "web")
        pending = condition(deferred, "PodResizePending")
        assert pending is not None
        assert (pending["status"], pending["reason"]) == ("True", "Deferred")
        assert not deferred["status"].get("resize")  # deprecated in 1.33: never set
        code, _ = await resize(http, "web", resources_patch(cpu="5"))
        await cluster.settle()
        infeasible = get(cluster, "web")
        pending = condition(infeasible, "PodResizePending")
        assert pending is not None
        assert pending["reason"] == "Infeasible"
        assert not infeasible["status"].get("resize")
        code, _ = await resize(http, "web", resources_patch(cpu="1500m"))
        await cluster.settle()
        done = get(cluster, "web")
        assert condition(done, "PodResizePending") is None
        assert not done["status"].get("resize")
        assert cstatus(done)["resources"]["requests"]["cpu"] == "1500m"
