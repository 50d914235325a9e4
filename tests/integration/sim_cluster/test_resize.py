"""In-place resize through `pods/resize` over HTTPS, as each Kubernetes version (1.32 .. 1.36) ships it."""

from __future__ import annotations

import copy
import dataclasses

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
from vpa.sim.cluster.profiles import Constant, DailyCycle, UsageProfile


def get(cluster, name: str, namespace: str = "default"):
    found = cluster.store.get("pods", namespace, name)
    assert found is not None
    return found


async def test_resize_is_allocated_then_actuated_without_restart() -> None:
    async with sim("1.35") as (cluster, http):
        # Actuation takes 5 virtual seconds so the in-between state can be seen.
        agent = cluster.behaviour.agent
        agent.options = dataclasses.replace(agent.options, resize_actuation_s=5.0)
        before = await create_pod(cluster, pod("web"))
        assert before["status"]["phase"] == "Running"
        assert cstatus(before)["allocatedResources"] == {"cpu": "500m", "memory": "256Mi"}
        generation = before["metadata"]["generation"]
        assert before["status"]["observedGeneration"] == generation

        code, body = await resize(http, "web", resources_patch(cpu="800m"))
        assert code == 200, body
        assert body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "800m"
        assert body["metadata"]["generation"] == generation + 1
        await cluster.settle()
        mid = get(cluster, "web")
        assert cstatus(mid)["allocatedResources"]["cpu"] == "800m"
        assert cstatus(mid)["resources"]["requests"]["cpu"] == "500m"
        in_progress = condition(mid, "PodResizeInProgress")
        assert in_progress is not None
        assert in_progress["status"] == "True"
        assert "reason" not in in_progress
        assert condition(mid, "PodResizePending") is None

        await cluster.advance(5)
        after = get(cluster, "web")
        assert cstatus(after)["resources"]["requests"] == {"cpu": "800m", "memory": "256Mi"}
        assert cstatus(after)["restartCount"] == 0
        assert condition(after, "PodResizeInProgress") is None
        assert after["status"]["observedGeneration"] == after["metadata"]["generation"]
        assert "resize" not in after["status"]


async def test_deferred_resize_is_applied_when_another_pod_leaves() -> None:
    async with sim("1.35", cpu="4") as (cluster, http):
        await create_pod(
            cluster, pod("big", container(cpu="2", cpu_limit="2", memory="1Gi", memory_limit="1Gi"))
        )
        await create_pod(cluster, pod("small", container(cpu="1500m", cpu_limit="3")))
        code, _ = await resize(http, "small", resources_patch(cpu="2500m"))
        assert code == 200
        await cluster.settle()
        deferred = get(cluster, "small")
        pending = condition(deferred, "PodResizePending")
        assert pending is not None
        assert pending["reason"] == "Deferred"
        assert (
            pending["message"]
            == "Node didn't have enough resource: cpu, requested: 2500, used: 2000, capacity: 4000"
        )
        assert cstatus(deferred)["allocatedResources"]["cpu"] == "1500m"

        await cluster.store.delete("pods", "default", "big")
        await cluster.settle()
        assert cluster.store.get("pods", "default", "big") is None
        applied = get(cluster, "small")
        assert condition(applied, "PodResizePending") is None
        assert cstatus(applied)["allocatedResources"]["cpu"] == "2500m"
        assert cstatus(applied)["resources"]["requests"]["cpu"] == "2500m"


async def test_resize_above_allocatable_is_infeasible_before_1_36() -> None:
    async with sim("1.35", cpu="4") as (cluster, http):
        await create_pod(cluster, pod("web", container(cpu="1", cpu_limit="8")))
        code, body = await resize(http, "web", resources_patch(cpu="5"))
        assert code == 200, body
        await cluster.settle()
        now = get(cluster, "web")
        pending = condition(now, "PodResizePending")
        assert pending is not None
        assert pending["reason"] == "Infeasible"
        assert pending["message"] == "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000"
        assert now["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "5"
        assert cstatus(now)["resources"]["requests"]["cpu"] == "1"
        # A new pod still fits: an infeasible resize reserves nothing.
        fits = await create_pod(cluster, pod("other", container(cpu="2500m", cpu_limit="3")))
        assert fits["status"]["phase"] == "Running"


async def test_resize_above_allocatable_is_forbidden_with_node_capacity_on_1_36() -> None:
    async with sim("1.36", cpu="4") as (cluster, http):
        await create_pod(cluster, pod("web", container(cpu="1", cpu_limit="8")))
        code, body = await resize(http, "web", resources_patch(cpu="5"))
        assert code == 403
        assert body["reason"] == "Forbidden"
        assert body["details"]["causes"] == [{"reason": "NodeCapacity"}]
        assert body["message"] == (
            'pods "web" is forbidden: Node didn\'t have enough allocatable resources: cpu, '
            "requested: 5000, allocatable: 4000"
        )
        assert get(cluster, "web")["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
        # Within allocatable it is still accepted.
        code, _ = await resize(http, "web", resources_patch(cpu="2"))
        assert code == 200


async def test_qos_change_and_bad_resizes_are_rejected_422() -> None:
    async with sim("1.35") as (cluster, http):
        await create_pod(cluster, pod("web"))
        code, body = await resize(http, "web", resources_patch(cpu="1", memory="512Mi"))
        assert code == 422
        assert body["reason"] == "Invalid"
        assert "Pod QOS Class may not change as a result of resizing" in body["message"]
        code, body = await resize(
            http,
            "web",
            [{"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "2"}],
            content_type="application/json-patch+json",
        )
        assert code == 422
        assert "must be less than or equal to cpu limit of 1" in body["message"]
        code, body = await resize(
            http,
            "web",
            {
                "spec": {
                    "containers": [{"name": "app", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]
                }
            },
        )
        assert code == 422
        assert "only cpu and memory resources are mutable" in body["message"]


async def test_plain_pod_update_of_resources_is_rejected() -> None:
    async with sim("1.35") as (cluster, http):
        await create_pod(cluster, pod("web"))
        async with http.patch(
            "/api/v1/namespaces/default/pods/web",
            data=orjson.dumps(resources_patch(cpu="700m")),
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        ) as resp:
            body = await resp.json()
            assert resp.status == 422, body
        assert "pod updates may not change fields other than" in body["message"]
        # Labels may change through a plain patch.
        async with http.patch(
            "/api/v1/namespaces/default/pods/web",
            data=b'{"metadata":{"labels":{"x":"y"}}}',
            headers={"Content-Type": "application/merge-patch+json"},
        ) as resp:
            assert resp.status == 200


async def test_restart_container_policy_restarts_only_for_its_resource() -> None:
    async with sim("1.35") as (cluster, http):
        policy = [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        ]
        await create_pod(cluster, pod("web", container(resizePolicy=policy)))
        code, _ = await resize(http, "web", resources_patch(cpu="600m"))
        assert code == 200
        await cluster.settle()
        assert cstatus(get(cluster, "web"))["restartCount"] == 0
        await cluster.advance(60)
        code, _ = await resize(http, "web", resources_patch(memory="300Mi"))
        assert code == 200
        await cluster.settle()
        restarted = get(cluster, "web")
        status = cstatus(restarted)
        assert status["restartCount"] == 1
        assert status["resources"]["requests"]["memory"] == "300Mi"
        assert status["lastState"]["terminated"]["finishedAt"] == status["state"]["running"]["startedAt"]
        assert status["state"]["running"]["startedAt"] == "2026-01-01T00:01:00Z"


async def test_1_32_reports_resize_in_status_field() -> None:
    async with sim("1.32", cpu="4") as (cluster, http):
        await create_pod(
            cluster, pod("big", container(cpu="2", cpu_limit="2", memory="1Gi", memory_limit="1Gi"))
        )
        await create_pod(cluster, pod("web", container(cpu="1", cpu_limit="8")))
        code, body = await resize(http, "web", resources_patch(cpu="5"))
        assert code == 200
        assert body["status"]["resize"] == "Proposed"
        await cluster.settle()
        infeasible = get(cluster, "web")
        assert infeasible["status"]["resize"] == "Infeasible"
        assert condition(infeasible, "PodResizePending") is None
        code, body = await resize(http, "web", resources_patch(cpu="2500m"))
        await cluster.settle()
        assert get(cluster, "web")["status"]["resize"] == "Deferred"
        code, body = await resize(http, "web", resources_patch(cpu="1500m"))
        await cluster.settle()
        done = get(cluster, "web")
        assert "resize" not in done["status"]
        assert cstatus(done)["resources"]["requests"]["cpu"] == "1500m"


async def test_memory_limit_decrease_depends_on_version() -> None:
    async with sim("1.33") as (cluster, http):
        await create_pod(cluster, pod("web"))
        code, body = await resize(http, "web", resources_patch(memory_limit="400Mi"))
        assert code == 422
        assert "memory limits cannot be decreased unless resizePolicy is RestartContainer" in body["message"]
    async with sim("1.34") as (cluster, http):
        await create_pod(cluster, pod("web"))
        # Uses 450Mi: a decrease to 400Mi is refused by the kubelet, best effort, and reported as Error.
        cluster.behaviour.set_usage("default", "web", "app", UsageProfile(memory=Constant(450 * 2**20)))
        code, _ = await resize(http, "web", resources_patch(memory_limit="400Mi"))
        assert code == 200
        await cluster.settle()
        now = get(cluster, "web")
        in_progress = condition(now, "PodResizeInProgress")
        assert in_progress is not None
        assert in_progress["reason"] == "Error"
        assert "below current usage" in in_progress["message"]
        assert cstatus(now)["resources"]["limits"]["memory"] == "512Mi"
        # Usage drops: the periodic retry applies it.
        cluster.behaviour.set_usage("default", "web", "app", UsageProfile(memory=Constant(100 * 2**20)))
        await cluster.advance(60)
        now = get(cluster, "web")
        assert condition(now, "PodResizeInProgress") is None
        assert cstatus(now)["resources"]["limits"]["memory"] == "400Mi"


@pytest.mark.parametrize(
    ("version", "usage_mi", "refused"),
    [("1.35", 450, True), ("1.36", 400, True), ("1.36", 399, False)],  # refused at usage >= the new limit
)
async def test_memory_limit_decrease_refusal_as_the_kubelet_words_it(
    version: str, usage_mi: int, refused: bool
) -> None:
    async with sim(version) as (cluster, http):
        retry = cluster.behaviour.agent.options.kubelet_retry_s
        await create_pod(
            cluster, pod("web", container(), container("side", memory="64Mi", memory_limit="128Mi"))
        )
        cluster.behaviour.set_usage("default", "web", "app", UsageProfile(memory=Constant(usage_mi * 2**20)))
        cluster.behaviour.set_usage("default", "web", "side", UsageProfile(memory=Constant(100 * 2**20)))
        code, _ = await resize(http, "web", resources_patch(memory_limit="400Mi"))
        assert code == 200
        await cluster.settle()
        first = get(cluster, "web")
        in_progress = condition(first, "PodResizeInProgress")
        if not refused:
            assert in_progress is None
            assert cstatus(first)["resources"]["limits"]["memory"] == "400Mi"
            return
        # The first refusal reaches the API one sync late: until then the resize is only in progress.
        assert in_progress is not None
        assert "reason" not in in_progress
        await cluster.advance(retry)
        now = get(cluster, "web")
        in_progress = condition(now, "PodResizeInProgress")
        assert in_progress is not None
        assert in_progress["reason"] == "Error"
        pod_usage = (usage_mi + 100) * 2**20
        parts = []
        pod_limit, limit = (400 + 128) * 2**20, 400 * 2**20
        if pod_usage >= pod_limit:  # the pod's part, first, only when its own limit is reached too
            parts.append(
                f"attempting to set pod memory limit ({pod_limit}) below current usage ({pod_usage})"
            )
        parts.append(
            f'attempting to set container "app" memory limit ({limit}) below current usage ({pod_usage})'
        )
        assert in_progress["message"] == f"cannot decrease memory limits: [{', '.join(parts)}]"
        assert cstatus(now)["resources"]["limits"]["memory"] == "512Mi"
        cluster.behaviour.set_usage("default", "web", "app", UsageProfile(memory=Constant(100 * 2**20)))
        await cluster.advance(retry)
        done = get(cluster, "web")
        assert condition(done, "PodResizeInProgress") is None
        assert cstatus(done)["resources"]["limits"]["memory"] == "400Mi"
        assert cstatus(done)["restartCount"] == 0


async def test_deferred_resizes_are_retried_in_priority_order() -> None:
    async with sim("1.35", cpu="4") as (cluster, http):
        for name, value in (("low", 100), ("high", 1000)):
            await cluster.store.create(
                "priorityclasses.scheduling.k8s.io",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                },
            )
        await create_pod(cluster, pod("filler", container(cpu="1500m", cpu_limit="2")))
        await create_pod(cluster, pod("low", container(cpu="1", cpu_limit="3"), priorityClassName="low"))
        high = await create_pod(
            cluster, pod("high", container(cpu="1", cpu_limit="3"), priorityClassName="high")
        )
        assert high["spec"]["priority"] == 1000
        # The low-priority resize has waited longer, but priority comes first when room frees.
        assert (await resize(http, "low", resources_patch(cpu="2500m")))[0] == 200
        await cluster.settle()
        await cluster.advance(10)
        assert (await resize(http, "high", resources_patch(cpu="2500m")))[0] == 200
        await cluster.settle()
        for name in ("low", "high"):
            pending = condition(get(cluster, name), "PodResizePending")
            assert pending is not None
            assert pending["reason"] == "Deferred"
        await cluster.store.delete("pods", "default", "filler")
        await cluster.settle()
        assert cstatus(get(cluster, "high"))["allocatedResources"]["cpu"] == "2500m"
        assert condition(get(cluster, "high"), "PodResizePending") is None
        still = condition(get(cluster, "low"), "PodResizePending")
        assert still is not None
        assert still["reason"] == "Deferred"
        assert still["lastTransitionTime"] == "2026-01-01T00:00:00Z"


async def test_resize_get_and_put_with_optimistic_concurrency() -> None:
    async with sim("1.35") as (cluster, http):
        await create_pod(cluster, pod("web"))
        async with http.get("/api/v1/namespaces/default/pods/web/resize") as resp:
            assert resp.status == 200
            current = await resp.json()
        assert current["metadata"]["name"] == "web"
        wanted = copy.deepcopy(current)
        wanted["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "600m"
        wanted["spec"]["containers"][0]["image"] = "ignored:2"  # only resources change through /resize
        async with http.put(
            "/api/v1/namespaces/default/pods/web/resize",
            data=orjson.dumps(wanted),
            headers={"Content-Type": "application/json"},
        ) as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "600m"
        assert body["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
        # The same body again carries a stale resourceVersion now.
        async with http.put(
            "/api/v1/namespaces/default/pods/web/resize",
            data=orjson.dumps(wanted),
            headers={"Content-Type": "application/json"},
        ) as resp:
            assert resp.status == 409
        await cluster.settle()
        assert cstatus(get(cluster, "web"))["resources"]["requests"]["cpu"] == "600m"


async def test_oom_check_after_memory_limit_decrease_counts_only_later_usage() -> None:
    # Daily memory cycle peaking at 500Mi at 00:00 (above 400Mi from 20:00 to 04:00). At 05:00 usage is ~352Mi
    # and the limit drops from 512Mi to 400Mi, which the kubelet accepts. The usage above 400Mi before the
    # change must not kill the container now (it used to, with a finishedAt at 00:00); 20:00 must.
    async with sim("1.35") as (cluster, http):
        await create_pod(cluster, pod("web"))
        cycle = DailyCycle(base=300 * 2**20, amplitude=200 * 2**20, peak_hour=0)
        cluster.behaviour.set_usage("default", "web", "app", UsageProfile(memory=cycle))
        await cluster.advance(5 * 3600)
        assert cstatus(get(cluster, "web"))["restartCount"] == 0
        code, _ = await resize(http, "web", resources_patch(memory_limit="400Mi"))
        assert code == 200
        await cluster.advance(3600)
        status = cstatus(get(cluster, "web"))
        assert status["resources"]["limits"]["memory"] == "400Mi"
        assert status["restartCount"] == 0, status.get("lastState")
        # The usage is set again (as `kubectl annotate` does): the check is armed anew, still not looking
        # back past the decrease.
        cluster.behaviour.set_usage("default", "web", "app", UsageProfile(memory=cycle))
        await cluster.advance(60)
        assert cstatus(get(cluster, "web"))["restartCount"] == 0
        await cluster.advance(14 * 3600 - 61)  # 19:59:59
        status = cstatus(get(cluster, "web"))
        assert status["restartCount"] == 0, status.get("lastState")
        await cluster.advance(6)
        status = cstatus(get(cluster, "web"))
        assert status["restartCount"] >= 1
        terminated = status["lastState"]["terminated"]
        assert terminated["reason"] == "OOMKilled"
        # Above 400Mi again from 20:00 (cos = 0.5 then), found on the 5 s scan grid.
        first_kill = terminated["finishedAt"]
        assert "2026-01-01T20:00:00Z" <= first_kill <= "2026-01-01T20:00:05Z", first_kill
