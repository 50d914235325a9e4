"""The loop around the plan: PodDisruptionBudgets, the two rate limiters, single-replica workloads, the
admission-controller status Lease, LimitRanges, and `run_forever` (health and metrics)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest
from structlog.testing import capture_logs

from tests.integration.components.test_updater_support import (
    PDBS,
    UpdaterEnv,
    amounts,
    container,
    cstatus,
    eventually,
    rec,
    res,
    settings,
    spec_resources,
    uids,
    updater_env,
    vpa,
)
from vpa.components.updater import SKIPPED_ADMISSION_STALE
from vpa.kube.actuating import Outcome
from vpa.kube.errors import ServerError, TransportError
from vpa.kube.leasing import DeadlineExceeded, format_micro_time
from vpa.logic.updater.inplace import Action, Reason

OUTSIDE = rec(cpu="200m", memory="256Mi", lower=("150m", "200Mi"), upper=("250m", "1Gi"))
"""Requests of 500m are above the upper bound: Recreate evicts at once, whatever the pod's age."""


def _pdb(min_available: int) -> dict[str, object]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
    }


async def test_pdb_blocks_eviction_with_429_then_allows_it() -> None:
    async with updater_env(nodes=2) as env:
        before = await env.create_deployment("web", 3)
        await env.store.create(PDBS, _pdb(3))
        await env.create_vpa(vpa("web", "web", "Recreate"), OUTSIDE)
        report = await env.run_once()
        # The plan allows one eviction (tolerance 50 % of 3); the budget refuses it.
        assert report.evicted == []
        assert [outcome for _, outcome, _ in report.failed] == [Outcome.BLOCKED]
        assert uids(env.pods("web")) == uids(before)
        failed = {
            "vpa_size_log2": "1",
            "update_mode": "Recreate",
            "reason": "EvictionError",
            "vpa_name": "web",
            "vpa_namespace": "default",
        }
        assert env.metric("vpa_updater_failed_eviction_attempts_total", **failed) == 1
        assert env.metric("vpa_updater_evictable_pods_total", vpa_size_log2="1", update_mode="Recreate") == 1

        # Tried again next loop, still blocked; then the budget is relaxed and it goes through.
        report = await env.run_once()
        assert [outcome for _, outcome, _ in report.failed] == [Outcome.BLOCKED]
        assert env.metric("vpa_updater_failed_eviction_attempts_total", **failed) == 2
        pdb = env.store.get(PDBS, "default", "web")
        assert pdb is not None
        await env.store.update(PDBS, {**pdb, "spec": {**pdb["spec"], "minAvailable": 2}})
        await env.sync()
        report = await env.run_once()
        assert len(report.evicted) == 1
        assert report.failed == []
        after = env.pods("web")
        assert len(after) == 3
        assert len(uids(after) - uids(before)) == 1


async def _count_until(env: UpdaterEnv, metric: str, labels: dict[str, str], expected: float) -> None:
    await eventually(lambda: env.metric(metric, **labels) >= expected)
    await asyncio.sleep(0.05)  # real time for anything that should not happen to happen
    await env.cluster.settle()
    assert env.metric(metric, **labels) == expected


async def test_eviction_rate_limit_holds_per_virtual_second() -> None:
    limited = settings(eviction_rate_limit=2.0, eviction_rate_burst=1)
    async with updater_env(nodes=2, updater_settings=limited) as env:
        small = container("app", cpu="100m", cpu_limit="1")
        await env.create_deployment("web", 10, small)
        await env.create_vpa(
            vpa("web", "web", "Recreate"), rec(cpu="20m", memory="256Mi", upper=("50m", "1Gi"))
        )
        await env.sync()
        labels = {
            "vpa_size_log2": "3",
            "update_mode": "Recreate",
            "vpa_name": "web",
            "vpa_namespace": "default",
        }
        loop = asyncio.ensure_future(env.updater.run_once())
        try:
            # Burst 1 at t=0, then 2 per virtual second; the plan allows 5 (tolerance 50 % of 10).
            await _count_until(env, "vpa_updater_evicted_pods_total", labels, 1)
            for expected in (2, 3, 4, 5):
                env.cluster.clock.advance(0.5)
                await _count_until(env, "vpa_updater_evicted_pods_total", labels, expected)
            report = await asyncio.wait_for(loop, timeout=5)
        finally:
            loop.cancel()
        assert len(report.evicted) == 5


async def test_in_place_rate_limit_is_a_separate_bucket() -> None:
    limited = settings(eviction_rate_limit=1.0, eviction_rate_burst=2)
    async with updater_env(updater_settings=limited) as env:
        await env.create_deployment("web", 4)
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="256Mi"))
        # An eviction-heavy loop would not slow resizes down: the buckets are independent.
        for _ in range(2):
            assert env.updater.eviction_limiter.try_acquire()
        assert not env.updater.eviction_limiter.try_acquire()
        labels = {"vpa_size_log2": "2", "vpa_name": "web", "vpa_namespace": "default"}
        loop = asyncio.ensure_future(env.updater.run_once())
        try:
            await _count_until(env, "vpa_updater_in_place_updated_pods_total", labels, 2)  # the burst
            for expected in (3, 4):
                env.cluster.clock.advance(1.0)
                await _count_until(env, "vpa_updater_in_place_updated_pods_total", labels, expected)
            report = await asyncio.wait_for(loop, timeout=5)
        finally:
            loop.cancel()
        assert len(report.resized) == 4


async def test_single_replica_deployment_is_resized_in_place_by_default() -> None:
    async with updater_env() as env:
        (before,) = await env.create_deployment("web", 1)
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="256Mi"))
        report = await env.run_once()
        assert report.resized == [f"default/{before['metadata']['name']}"]
        (after,) = env.pods("web")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert amounts(cstatus(after)["resources"]["requests"]) == res("800m", "256Mi")


async def test_single_replica_deployment_is_left_alone_with_upstream_disruption_budget() -> None:
    upstream = settings(in_place_skip_disruption_budget=False)
    async with updater_env(updater_settings=upstream) as env:
        (before,) = await env.create_deployment("web", 1)
        await env.create_vpa(
            vpa("web", "web", "InPlaceOrRecreate"),
            rec(cpu="800m", memory="256Mi", lower=("700m", "200Mi"), upper=("2", "1Gi")),
        )
        report = await env.run_once()
        (decision,) = report.decisions().values()
        assert (decision.action, decision.reason) == (Action.SKIP, Reason.GROUP_BELOW_MIN_REPLICAS)
        assert (report.resized, report.evicted) == ([], [])
        (after,) = env.pods("web")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert amounts(spec_resources(after)["requests"]) == res("500m", "256Mi")


async def _put_lease(env: UpdaterEnv, renewed_at: float) -> None:
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vpa-admission-controller", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": "admission",
            "leaseDurationSeconds": 10,
            "renewTime": format_micro_time(renewed_at),
        },
    }
    current = env.store.get("leases.coordination.k8s.io", "kube-system", "vpa-admission-controller")
    if current is None:
        await env.store.create("leases.coordination.k8s.io", body)
    else:
        await env.store.update("leases.coordination.k8s.io", {**current, "spec": body["spec"]})


async def test_loop_is_skipped_while_the_admission_controller_status_lease_is_stale() -> None:
    async with updater_env(updater_settings=settings(use_admission_controller_status=True)) as env:
        before = await env.create_deployment("web", 2)
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="256Mi"))
        invalid = "vpa_updater_admission_controller_status_invalid_total"
        # No lease at all: skipped, counted as reason "error" (upstream's GET fails).
        report = await env.run_once()
        assert report.skipped == SKIPPED_ADMISSION_STALE
        assert report.plans == []
        assert env.metric(invalid, reason="error") == 1
        # Last renewed 2 min ago (timeout 1 min): skipped, reason "invalid".
        await _put_lease(env, env.cluster.clock.now() - 120)
        report = await env.run_once()
        assert report.skipped == SKIPPED_ADMISSION_STALE
        assert (env.metric(invalid, reason="error"), env.metric(invalid, reason="invalid")) == (1, 1)
        assert [amounts(spec_resources(p)["requests"]) for p in env.pods("web")] == [res("500m", "256Mi")] * 2
        # Renewed: the loop runs.
        await _put_lease(env, env.cluster.clock.now())
        report = await env.run_once()
        assert report.skipped is None
        assert len(report.resized) == 2
        assert uids(env.pods("web")) == uids(before)
        # The admission controller stops renewing: after the timeout the loop pauses again.
        await env.set_recommendation("web", rec(cpu="1200m", memory="256Mi"))
        await env.advance(61)
        report = await env.run_once()
        assert report.skipped == SKIPPED_ADMISSION_STALE
        assert env.metric(invalid, reason="invalid") == 2
        assert [amounts(spec_resources(p)["requests"]) for p in env.pods("web")] == [res("800m", "256Mi")] * 2


async def test_limit_range_caps_the_recommendation_applied_in_place() -> None:
    async with updater_env() as env:
        await env.store.create(
            "limitranges",
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "cap", "namespace": "default"},
                "spec": {"limits": [{"type": "Container", "max": {"cpu": "1500m", "memory": "1Gi"}}]},
            },
        )
        await env.create_deployment("web", 2, container("app", cpu="500m", cpu_limit="1"))
        # Target 900m with the 2:1 limit ratio would need a 1800m limit; the LimitRange max (1500m)
        # caps the limit, so the request is capped to 750m.
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="900m", memory="256Mi"))
        report = await env.run_once()
        assert len(report.resized) == 2
        for pod in env.pods("web"):
            assert amounts(cstatus(pod)["resources"]["requests"]) == res("750m", "256Mi")
            assert amounts(cstatus(pod)["resources"]["limits"]) == res("1500m", "512Mi")


async def test_run_forever_loops_every_interval_and_reports_activity() -> None:
    async with updater_env() as env:
        await env.create_deployment("web", 2)
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="256Mi"))
        task = asyncio.ensure_future(env.updater.run_forever())
        try:
            loops = "vpa_updater_execution_latency_seconds_count"
            await eventually(lambda: env.metric(loops, step="total") == 1)
            assert env.ctx.health.liveness()[0]
            env.cluster.clock.advance(59)
            await asyncio.sleep(0.05)
            assert env.metric(loops, step="total") == 1
            env.cluster.clock.advance(1)
            await eventually(lambda: env.metric(loops, step="total") == 2)
            # The loop was wired into health: without loops for 5 × interval it reports unhealthy.
            task.cancel()
            env.cluster.clock.advance(5 * 60 + 1)
            assert not env.ctx.health.liveness()[0]
        finally:
            task.cancel()
        for step in ("ListVPAs", "ListPods", "FilterPods", "EvictPods"):
            assert env.metric(loops, step=step) == 2
        assert (
            env.metric(
                "vpa_updater_in_place_updated_pods_total",
                vpa_size_log2="1",
                vpa_name="web",
                vpa_namespace="default",
            )
            == 2
        )


@pytest.mark.parametrize(
    ("error", "level"),
    [
        (TransportError("PATCH /api/v1/namespaces/default/pods/web-1: ClientConnectorError"), "warning"),
        (ServerError(503, "ServiceUnavailable", "the server is currently unable to handle it"), "warning"),
        (DeadlineExceeded("API call exceeded 60.000 s"), "warning"),
        (RuntimeError("a bug"), "error"),
    ],
    ids=["connection-refused", "503", "deadline", "bug"],
)
async def test_a_failed_prompt_pass_is_one_warning_line_during_an_outage(
    error: Exception, level: str
) -> None:
    async with updater_env() as env:
        async def failing(keys: Iterable[str]) -> None:
            raise error

        env.updater.run_prompt = failing  # type: ignore[assignment,method-assign]
        with capture_logs() as logs:
            await env.updater._prompt(["default/web"])
        (entry,) = [e for e in logs if e["event"] == "updater_prompt_pass_failed"]
        assert entry["log_level"] == level
        if level == "warning":
            assert "exc_info" not in entry  # no traceback for an outage
            assert entry["error"] == f"{type(error).__name__}: {error}"
        else:
            assert entry["exc_info"] is True
