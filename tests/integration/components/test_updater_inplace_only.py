"""AEP-8818's test plan (`InPlace`: never evict, remember infeasible resizes) against the simulated cluster.

Kubernetes 1.35 reports an infeasible resize through `PodResizePending/Infeasible` after accepting the
patch; 1.36 refuses it at admission with 403 + `NodeCapacity`. Both paths are exercised end to end.
"""

from __future__ import annotations

import pytest

from tests.integration.components.test_updater_support import (
    DEPLOYMENTS,
    VPAS,
    UpdaterEnv,
    amounts,
    condition,
    container,
    cstatus,
    rec,
    res,
    spec_resources,
    uids,
    updater_env,
    vpa,
)
from vpa.kube.actuating import Outcome
from vpa.logic.updater.inplace import Action, Reason
from vpa.sim.apiserver.faults import FaultHandle

IN_PLACE_GATE = "InPlace=true"


def _resize_counter(env: UpdaterEnv) -> FaultHandle:
    """A fault with no error: it only counts resize PATCHes reaching the API server."""
    return env.cluster.faults.inject("patch", "pods", code=None, subresource="resize")


async def test_in_place_vpa_is_skipped_entirely_when_the_gate_is_off() -> None:
    async with updater_env() as env:
        before = await env.create_deployment("web", 2, container("app", restart_memory=True))
        outside = rec(cpu="800m", memory="400Mi", lower=("700m", "300Mi"), upper=("2", "1Gi"))
        await env.create_vpa(vpa("web", "web", "InPlace"), outside)
        await env.advance(1)
        # A newer Recreate VPA on the same target must not take the pods over and evict them.
        await env.create_vpa(vpa("web-recreate", "web", "Recreate"), outside)
        counter = _resize_counter(env)
        for _ in range(2):
            report = await env.run_once()
            assert [(plan.vpa.name, plan.skip_reason) for plan in report.plans] == [
                ("web", Reason.IN_PLACE_GATE_OFF)
            ]
            assert (report.resized, report.evicted, report.failed) == ([], [], [])
            await env.advance(13 * 3600)
        assert counter.hits == 0
        after = env.pods("web")
        assert uids(after) == uids(before)
        assert [amounts(spec_resources(p)["requests"]) for p in after] == [res("500m", "256Mi")] * 2
        # One Warning Event on the VPA for the whole time it is skipped, not one per loop.
        gate_events = [e for e in await env.event_reasons() if e[1] == "InPlaceFeatureGateOff"]
        assert [(who, reason) for who, reason, _ in gate_events] == [
            ("VerticalPodAutoscaler/web", "InPlaceFeatureGateOff")
        ]
        assert "--feature-gates=InPlace=true" in gate_events[0][2]
        stored = [e for e in env.store.list("events", "default") if e["reason"] == "InPlaceFeatureGateOff"]
        assert [(e["type"], e.get("count", 1)) for e in stored] == [("Warning", 1)]
        assert env.updater.gate_off.checks("default/web") == 2


@pytest.mark.parametrize("mode", ["InPlace", "InPlaceOrRecreate"])
async def test_resize_in_progress_for_hours(mode: str) -> None:
    """`InPlace` waits indefinitely (no timeout, no eviction, no re-patch); `InPlaceOrRecreate` evicts
    after an hour in progress."""
    async with updater_env(gates=IN_PLACE_GATE, resize_actuation_s=10 * 3600) as env:
        before = await env.create_deployment("web", 2)
        await env.create_vpa(
            vpa("web", "web", mode),
            rec(cpu="800m", memory="256Mi", lower=("700m", "200Mi"), upper=("2", "1Gi")),
        )
        counter = _resize_counter(env)
        report = await env.run_once()
        assert len(report.resized) == 2
        for pod in env.pods("web"):
            in_progress = condition(pod, "PodResizeInProgress")
            assert in_progress is not None
            assert in_progress["status"] == "True"
        await env.advance(3601)
        report = await env.run_once()
        if mode == "InPlace":
            assert report.evicted == []
            assert {d.reason for d in report.decisions().values()} == {Reason.RESIZE_IN_FLIGHT}
            for _ in range(3):
                await env.advance(2 * 3600)
                report = await env.run_once()
                assert (report.evicted, report.resized) == ([], [])
            assert counter.hits == 2
            await env.advance(3 * 3600)
            after = env.pods("web")
            assert uids(after) == uids(before)
            assert [amounts(cstatus(p)["resources"]["requests"]) for p in after] == [res("800m", "256Mi")] * 2
        else:
            assert len(report.evicted) == 1
            assert report.decisions()[report.evicted[0]].reason is Reason.RESIZE_TIMED_OUT


async def test_infeasible_resize_is_recorded_skipped_and_retried_when_lower_then_waits_for_room() -> None:
    async with updater_env("1.35", cpu="4", gates=IN_PLACE_GATE) as env:
        await env.create_deployment("hog", 1, container("app", cpu="2500m", cpu_limit="3"))
        (web,) = await env.create_deployment("web", 1, container("app", cpu="500m", cpu_limit="8"))
        uid = web["metadata"]["uid"]
        await env.create_vpa(vpa("web", "web", "InPlace"), rec(cpu="5", memory="256Mi"))
        counter = _resize_counter(env)

        # 1.35: the patch is accepted, the kubelet reports it Infeasible (5 CPUs on a 4-CPU node).
        report = await env.run_once()
        assert report.resized == [f"default/{web['metadata']['name']}"]
        pod = env.pods("web")[0]
        pending = condition(pod, "PodResizePending")
        assert pending is not None
        assert pending["reason"] == "Infeasible"

        # The next loop records it (the spec holds what did not fit) and never evicts.
        report = await env.run_once()
        (decision,) = report.decisions().values()
        assert decision.reason is Reason.INFEASIBLE_RECORDED
        attempt = env.updater.infeasible.attempt(uid)
        assert attempt is not None
        assert attempt["app"].cpu_millicores == 5000

        # Same recommendation, then one higher in memory only: not lower anywhere → skipped, not re-sent.
        for memory in ("256Mi", "300Mi"):
            await env.set_recommendation("web", rec(cpu="5", memory=memory))
            report = await env.run_once()
            (decision,) = report.decisions().values()
            assert decision.reason is Reason.INFEASIBLE_CACHED
        assert counter.hits == 1
        skipped = env.metric(
            "vpa_updater_in_place_infeasible_skip_pods_total",
            vpa_size_log2="0",
            vpa_name="web",
            vpa_namespace="default",
        )
        assert skipped == 2
        events = await env.event_reasons()
        assert (
            f"Pod/{web['metadata']['name']}",
            "InPlaceResizeSkipped",
            "Previously recorded in-place update was infeasible, current recommendation is not lower than "
            "previous, skipping resize",
        ) in events

        # Lower: retried at once; the patch succeeds, so the record is cleared (AEP-8818).
        await env.set_recommendation("web", rec(cpu="2", memory="256Mi"))
        report = await env.run_once()
        assert report.resized == [f"default/{web['metadata']['name']}"]
        assert uid not in env.updater.infeasible
        assert counter.hits == 2
        # It fits the node but not next to the hog: Deferred. InPlace waits, whatever the time.
        pod = env.pods("web")[0]
        pending = condition(pod, "PodResizePending")
        assert pending is not None
        assert pending["reason"] == "Deferred"
        await env.advance(3600)
        report = await env.run_once()
        (decision,) = report.decisions().values()
        assert (decision.action, decision.reason) == (Action.SKIP, Reason.RESIZE_IN_FLIGHT)
        assert counter.hits == 2

        # The cluster frees room: the kubelet applies the deferred resize; same pod, no restart.
        await env.store.delete(DEPLOYMENTS, "default", "hog")
        await env.sync()
        (pod,) = env.pods("web")
        assert pod["metadata"]["uid"] == uid
        assert amounts(cstatus(pod)["resources"]["requests"]) == res("2", "256Mi")
        assert cstatus(pod)["restartCount"] == 0
        report = await env.run_once()
        assert (report.resized, report.evicted) == ([], [])


async def test_node_capacity_rejection_on_1_36_is_recorded_and_retried_only_when_lower() -> None:
    async with updater_env("1.36", cpu="4", gates=IN_PLACE_GATE) as env:
        (web,) = await env.create_deployment("web", 1, container("app", cpu="500m", cpu_limit="8"))
        uid, name = web["metadata"]["uid"], web["metadata"]["name"]
        await env.create_vpa(vpa("web", "web", "InPlace"), rec(cpu="5", memory="256Mi"))
        counter = _resize_counter(env)

        report = await env.run_once()
        assert report.resized == []
        assert [(key, outcome) for key, outcome, _ in report.failed] == [
            (f"default/{name}", Outcome.INFEASIBLE)
        ]
        attempt = env.updater.infeasible.attempt(uid)
        assert attempt is not None
        assert attempt["app"].cpu_millicores == 5000
        assert (
            env.metric(
                "vpa_updater_failed_in_place_update_attempts_total",
                vpa_size_log2="0",
                reason="InPlaceUpdateInfeasible",
                vpa_name="web",
                vpa_namespace="default",
            )
            == 1
        )
        assert amounts(spec_resources(env.pods("web")[0])["requests"]) == res("500m", "256Mi")

        # The same recommendation is not sent again.
        for _ in range(2):
            report = await env.run_once()
            (decision,) = report.decisions().values()
            assert decision.reason is Reason.INFEASIBLE_CACHED
        assert counter.hits == 1

        # Lower: retried, accepted, record cleared.
        await env.set_recommendation("web", rec(cpu="3", memory="256Mi"))
        report = await env.run_once()
        assert report.resized == [f"default/{name}"]
        assert uid not in env.updater.infeasible
        (pod,) = env.pods("web")
        assert pod["metadata"]["uid"] == uid
        assert amounts(cstatus(pod)["resources"]["requests"]) == res("3", "256Mi")

        # Stale entries: a record for a pod that is gone is forgotten at the next loop start.
        await env.set_recommendation("web", rec(cpu="6", memory="256Mi"))
        await env.run_once()
        assert uid in env.updater.infeasible
        await env.store.delete("pods", "default", name)
        await env.sync()
        (replacement,) = env.pods("web")
        assert replacement["metadata"]["uid"] != uid
        report = await env.run_once()
        assert uid not in env.updater.infeasible
        assert [outcome for _, outcome, _ in report.failed] == [Outcome.INFEASIBLE]
        assert replacement["metadata"]["uid"] in env.updater.infeasible
        assert report.evicted == []
        assert env.store.get(VPAS, "default", "web") is not None
