"""AEP-4016's test plan against the simulated cluster, in both in-place modes where it applies.

Every test drives the real loop (`Updater.run_once`) over HTTPS against `SimCluster(behaviour=True)`:
the node agent actuates resizes per KEP-1287 (status resources, restarts for `RestartContainer`,
`PodResizePending` / `PodResizeInProgress`), and Deployments recreate evicted pods through admission.
"""

from __future__ import annotations

import pytest

from tests.integration.components.test_updater_support import (
    admission_webhook,
    amounts,
    condition,
    container,
    cstatus,
    names,
    rec,
    res,
    spec_resources,
    uids,
    updater_env,
    vpa,
)
from vpa.kube.actuating import Outcome
from vpa.logic.updater.inplace import Action, Reason

MODES = pytest.mark.parametrize("mode", ["InPlaceOrRecreate", "InPlace"])
IN_PLACE_GATE = "InPlace=true"


@MODES
async def test_disruption_free_update_of_all_containers(mode: str) -> None:
    async with updater_env(gates=IN_PLACE_GATE) as env:
        before = await env.create_deployment(
            "web",
            2,
            container("app"),
            container("sidecar", cpu="100m", memory="64Mi", cpu_limit="200m", memory_limit="128Mi"),
        )
        await env.create_vpa(
            vpa("web", "web", mode),
            rec("app", cpu="800m", memory="300Mi"),
            rec("sidecar", cpu="150m", memory="100Mi"),
        )
        report = await env.run_once()
        assert sorted(report.resized) == sorted(f"default/{n}" for n in names(before))
        assert report.evicted == []
        after = env.pods("web")
        assert uids(after) == uids(before)
        for pod in after:
            app, sidecar = cstatus(pod, "app"), cstatus(pod, "sidecar")
            assert app["restartCount"] == 0
            assert sidecar["restartCount"] == 0
            # The kubelet actuated it: the status holds the new requests; limits stay proportional.
            assert amounts(app["resources"]["requests"]) == res("800m", "300Mi")
            assert amounts(app["resources"]["limits"]) == res("1600m", "600Mi")
            assert amounts(sidecar["resources"]["requests"]) == res("150m", "100Mi")
            assert pod["metadata"]["annotations"]["vpaInPlaceUpdated"] == "true"
            assert condition(pod, "PodResizeInProgress") is None
        events = await env.event_reasons()
        for name in names(after):
            assert (
                f"Pod/{name}",
                "InPlaceResizedByVPA",
                "Pod was resized in place by VPA Updater.",
            ) in events
        assert (
            env.metric(
                "vpa_updater_in_place_updated_pods_total",
                vpa_size_log2="1",
                vpa_name="web",
                vpa_namespace="default",
            )
            == 2
        )
        assert env.metric("vpa_updater_in_place_updatable_pods_total", vpa_size_log2="1") == 2
        assert env.metric("vpa_updater_vpas_with_in_place_updated_pods_total", vpa_size_log2="1") == 1

        # At the target now: the next loop has nothing to do.
        report = await env.run_once()
        assert report.resized == []
        assert all(d.action is Action.SKIP for d in report.decisions().values())


@MODES
async def test_partial_update_skips_the_disruptive_change(mode: str) -> None:
    async with updater_env(gates=IN_PLACE_GATE) as env:
        before = await env.create_deployment("web", 2, container("app", restart_memory=True))
        # In range, significant for both resources; the pod is young, so the memory change (restart) waits.
        await env.create_vpa(vpa("web", "web", mode), rec(cpu="800m", memory="400Mi"))
        report = await env.run_once()
        decisions = report.decisions()
        assert {d.action for d in decisions.values()} == {Action.RESIZE_PARTIAL}
        assert sorted(report.resized) == sorted(f"default/{n}" for n in names(before))
        for pod in env.pods("web"):
            status = cstatus(pod)
            assert status["restartCount"] == 0
            assert amounts(status["resources"]["requests"]) == res("800m", "256Mi")
            assert amounts(spec_resources(pod)["requests"]) == res("800m", "256Mi")
            assert pod["metadata"]["annotations"]["vpaInPlaceUpdated"] == "true"
        # The disruptive rest stays pending, not re-patched: the next loop skips it.
        report = await env.run_once()
        assert report.resized == []
        assert {d.reason for d in report.decisions().values()} == {Reason.DISRUPTIVE_NOT_DUE}


@MODES
async def test_disruptive_update_in_place_when_outside_the_recommended_range(mode: str) -> None:
    async with updater_env(gates=IN_PLACE_GATE) as env:
        before = await env.create_deployment("web", 2, container("app", restart_memory=True))
        # Memory request 256Mi is below the lower bound: a disruptive in-place update is due at once.
        await env.create_vpa(
            vpa("web", "web", mode),
            rec(cpu="500m", memory="400Mi", lower=("100m", "300Mi"), upper=("2", "1Gi")),
        )
        report = await env.run_once()
        # Two replicas, tolerance 50 %: one disruption per loop.
        assert len(report.resized) == 1
        assert report.evicted == []
        (first,) = report.resized
        resized = env.pod(first.split("/")[1])
        assert resized is not None
        status = cstatus(resized)
        assert status["restartCount"] == 1
        assert amounts(status["resources"]["requests"]) == res("500m", "400Mi")
        blocked = [d for key, d in report.decisions().items() if key != first]
        assert [d.reason for d in blocked] == [Reason.DISRUPTION_BUDGET]

        report = await env.run_once()
        assert len(report.resized) == 1
        assert report.resized[0] != first
        after = env.pods("web")
        assert uids(after) == uids(before)
        assert [cstatus(p)["restartCount"] for p in after] == [1, 1]
        assert [amounts(cstatus(p)["resources"]["requests"]) for p in after] == [res("500m", "400Mi")] * 2


async def test_failed_disruptive_update_falls_back_to_eviction_in_in_place_or_recreate() -> None:
    async with updater_env(nodes=2) as env, admission_webhook(env.cluster) as admitted:
        before = await env.create_deployment("web", 2, container("app", restart_memory=True))
        await env.create_vpa(
            vpa("web", "web", "InPlaceOrRecreate"),
            rec(cpu="500m", memory="400Mi", lower=("100m", "300Mi"), upper=("2", "1Gi")),
        )
        fault = env.cluster.faults.inject("patch", "pods", code=422, subresource="resize")
        report = await env.run_once()
        assert report.resized == []
        assert [outcome for _, outcome, _ in report.failed] == [Outcome.REJECTED]
        assert (
            env.metric(
                "vpa_updater_failed_in_place_update_attempts_total",
                vpa_size_log2="1",
                reason="InPlaceUpdateError",
                vpa_name="web",
                vpa_namespace="default",
            )
            == 1
        )
        first = report.failed[0][0]

        # Next loop: the second pod's resize goes first (in-place before evictions) and uses the budget,
        # so the first pod's fallback eviction waits.
        report = await env.run_once()
        assert report.evicted == []
        assert report.decisions()[first].reason is Reason.DISRUPTION_BUDGET
        assert report.decisions()[first].detail == Reason.RESIZE_REJECTED.value
        assert fault.hits == 2

        # Both refused: evictions, one per loop (tolerance 50 % of 2), never another resize attempt.
        report = await env.run_once()
        assert len(report.evicted) == 1
        victim = report.evicted[0]
        assert fault.hits == 2
        report = await env.run_once()
        assert len(report.evicted) == 1
        assert fault.hits == 2
        after = env.pods("web")
        assert len(after) == 2
        assert not uids(after) & uids(before)
        # Recreated through admission with the recommendation applied.
        assert len(admitted) == 2
        for pod in after:
            assert amounts(spec_resources(pod)["requests"]) == res("500m", "400Mi")
            assert amounts(cstatus(pod)["resources"]["requests"]) == res("500m", "400Mi")
        settled = await env.run_once()
        assert (settled.resized, settled.evicted) == ([], [])
        events = await env.event_reasons()
        name = victim.split("/")[1]
        assert (
            f"Pod/{name}",
            "EvictedByVPA",
            "Pod was evicted by VPA Updater to apply resource recommendation.",
        ) in events
        assert (
            "VerticalPodAutoscaler/web",
            "EvictedPod",
            f"VPA Updater evicted Pod {name} to apply resource recommendation.",
        ) in events
        assert (
            env.metric(
                "vpa_updater_evicted_pods_total",
                vpa_size_log2="1",
                update_mode="InPlaceOrRecreate",
                vpa_name="web",
                vpa_namespace="default",
            )
            == 2
        )


async def test_failed_disruptive_update_never_evicts_in_in_place_mode() -> None:
    async with updater_env(nodes=2, gates=IN_PLACE_GATE) as env, admission_webhook(env.cluster):
        before = await env.create_deployment("web", 2, container("app", restart_memory=True))
        await env.create_vpa(
            vpa("web", "web", "InPlace"),
            rec(cpu="500m", memory="400Mi", lower=("100m", "300Mi"), upper=("2", "1Gi")),
        )
        fault = env.cluster.faults.inject("patch", "pods", code=422, subresource="resize")
        for _ in range(4):
            report = await env.run_once()
            assert report.evicted == []
            assert report.resized == []
            assert all(d.action is not Action.EVICT for d in report.decisions().values())
            await env.advance(3600)
        # It keeps retrying (one disruption per loop), and the pods are the same pods, untouched.
        assert fault.hits == 4
        after = env.pods("web")
        assert uids(after) == uids(before)
        assert [amounts(spec_resources(p)["requests"]) for p in after] == [res("500m", "256Mi")] * 2
        assert (
            env.metric(
                "vpa_updater_failed_in_place_update_attempts_total",
                vpa_size_log2="1",
                reason="InPlaceUpdateError",
                vpa_name="web",
                vpa_namespace="default",
            )
            == 4
        )
        events = await env.event_reasons()
        assert not [e for e in events if e[1] in ("EvictedByVPA", "EvictedPod")]


async def test_qos_change_evicts_in_in_place_or_recreate() -> None:
    async with updater_env(nodes=2) as env, admission_webhook(env.cluster):
        app = container("app", cpu="500m", cpu_limit="1", memory="256Mi", memory_limit="256Mi")
        before = await env.create_deployment("web", 2, app)
        assert before[0]["status"]["qosClass"] == "Burstable"
        policy = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
        # Target equal to the limits: the pod would turn Guaranteed, which a resize may not do.
        await env.create_vpa(
            vpa("web", "web", "InPlaceOrRecreate", container_policies=policy),
            rec(cpu="1", memory="256Mi", lower=("900m", "200Mi"), upper=("2", "1Gi")),
        )
        report = await env.run_once()
        assert report.resized == []
        assert len(report.evicted) == 1
        assert report.decisions()[report.evicted[0]].reason is Reason.QOS_CHANGE
        new = [p for p in env.pods("web") if p["metadata"]["uid"] not in uids(before)]
        assert len(new) == 1
        assert amounts(spec_resources(new[0])["requests"]) == res("1", "256Mi")
        assert new[0]["status"]["qosClass"] == "Guaranteed"


async def test_qos_change_keeps_the_class_with_a_request_just_below_the_limit_in_in_place() -> None:
    async with updater_env(gates=IN_PLACE_GATE) as env:
        app = container("app", cpu="500m", cpu_limit="1", memory="256Mi", memory_limit="256Mi")
        before = await env.create_deployment("web", 2, app)
        policy = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
        await env.create_vpa(
            vpa("web", "web", "InPlace", container_policies=policy),
            rec(cpu="1", memory="256Mi", lower=("900m", "200Mi"), upper=("2", "1Gi")),
        )
        report = await env.run_once()
        assert report.evicted == []
        assert len(report.resized) == 2
        assert all(d.qos_adjusted for d in report.decisions().values())
        after = env.pods("web")
        assert uids(after) == uids(before)
        for pod in after:
            assert amounts(cstatus(pod)["resources"]["requests"]) == res("999m", "256Mi")
            assert pod["status"]["qosClass"] == "Burstable"
            assert cstatus(pod)["restartCount"] == 0
