"""Events on a pod for a state it stays in pass after pass (`InPlaceResizeWouldNotFit`,
`InPlaceResizeSkipped`) through the real loop over HTTPS against `SimCluster`: recorded when the pod enters
the state, not on each loop that finds it there, and again when it left the state and came back. The
recorder turns the same event told again into a PATCH of its `count`, so the stored counts say how often
each was told."""

from __future__ import annotations

from tests.integration.components.test_updater_support import (
    UpdaterEnv,
    container,
    rec,
    updater_env,
    vpa,
)
from vpa.logic.updater.inplace import Reason

CAPACITY_GATES = "InPlace=true,InPlaceCapacityAware=true"


async def _told(env: UpdaterEnv, reason: str) -> list[tuple[str, int]]:
    """(message, count) of each stored Event of `reason`, sorted."""
    await env.event_reasons()  # flushes the recorder
    return sorted((e["message"], e.get("count", 1)) for e in env.store.list("events", "default")
                  if e["reason"] == reason)


async def _loops(env: UpdaterEnv, cpu: str, loops: int = 3) -> Reason:
    """`loops` loops with the recommendation at `cpu` (below it: outside the recommended range); the reason
    of the one pod's decision, the same in each."""
    await env.set_recommendation("web", rec(cpu=cpu, memory="256Mi", lower=(cpu, "10Mi")))
    reasons: set[Reason] = set()
    for _ in range(loops):
        report = await env.run_once()
        reasons |= {decision.reason for decision in report.decisions().values()}
    (reason,) = reasons
    return reason


async def test_would_not_fit_is_told_once_per_state_and_again_when_it_comes_back() -> None:
    async with updater_env("1.35", cpu="4", gates=CAPACITY_GATES, watch_nodes=True) as env:
        await env.create_deployment("hog", 1, container("app", cpu="2500m", cpu_limit="3"))
        await env.create_deployment("web", 1, container("app", cpu="500m", cpu_limit="8"))
        await env.create_vpa(vpa("web", "web", "InPlace"))
        deferred = ("In-place resize not sent: the kubelet would answer Deferred: the resize needs cpu 1500m "
                    "more, node node-1 has 1000m free")
        # 2 CPUs fit the node, not next to the hog: three loops, told once.
        assert await _loops(env, "2") is Reason.WOULD_NOT_FIT
        assert await _told(env, "InPlaceResizeWouldNotFit") == [(deferred, 1)]
        # A prompt pass (--in-place-on-recommendation) finds it in the same state: not told either.
        await env.updater.run_prompt(["default/web"])
        assert await _told(env, "InPlaceResizeWouldNotFit") == [(deferred, 1)]
        # Deferred by a different amount is the same state: not told again.
        assert await _loops(env, "1800m") is Reason.WOULD_NOT_FIT
        assert await _told(env, "InPlaceResizeWouldNotFit") == [(deferred, 1)]
        # Left (the recommendation is what the pod has), then back: told again.
        assert await _loops(env, "500m", loops=1) is not Reason.WOULD_NOT_FIT
        assert await _loops(env, "2") is Reason.WOULD_NOT_FIT
        assert await _told(env, "InPlaceResizeWouldNotFit") == [(deferred, 2)]
        # More than the node: Infeasible is another state, told once.
        assert await _loops(env, "5") is Reason.WOULD_NOT_FIT
        told = await _told(env, "InPlaceResizeWouldNotFit")
        assert [count for _, count in told] == [2, 1], told
        assert "would answer Infeasible: the pod would request cpu 5000m" in told[1][0], told


async def _reasons(env: UpdaterEnv, cpu: str, loops: int) -> list[Reason]:
    await env.set_recommendation("web", rec(cpu=cpu, memory="256Mi"))
    reasons = []
    for _ in range(loops):
        report = await env.run_once()
        reasons += [decision.reason for decision in report.decisions().values()]
    return reasons


async def test_infeasible_cached_is_told_once_per_state_and_again_when_it_comes_back() -> None:
    skipped = ("Previously recorded in-place update was infeasible, current recommendation is not lower than "
               "previous, skipping resize")
    async with updater_env("1.35", cpu="4", gates="InPlace=true") as env:
        await env.create_deployment("web", 1, container("app", cpu="500m", cpu_limit="8"))
        await env.create_vpa(vpa("web", "web", "InPlace"))
        # 1.35 takes the patch and the kubelet answers Infeasible (5 CPUs on a 4-CPU node); recorded, then
        # skipped for three loops: told once, counted three times (as upstream counts every loop).
        cached = [Reason.INFEASIBLE_CACHED] * 3
        reasons = await _reasons(env, "5", 5)
        assert reasons[1:] == [Reason.INFEASIBLE_RECORDED, *cached], reasons
        assert await _told(env, "InPlaceResizeSkipped") == [(skipped, 1)]
        assert env.metric("vpa_updater_in_place_infeasible_skip_pods_total", vpa_size_log2="0",
                          vpa_name="web", vpa_namespace="default") == 3
        # Lower: sent again (left the state), Infeasible again, recorded, skipped again: told again.
        reasons = await _reasons(env, "4500m", 5)
        assert reasons[1:] == [Reason.INFEASIBLE_RECORDED, *cached], reasons
        assert await _told(env, "InPlaceResizeSkipped") == [(skipped, 2)]
