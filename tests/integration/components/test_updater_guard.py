"""The resize guard (gate `ResizeGuard`) through the real loop over HTTPS against
`SimCluster(behaviour=True)`: a decrease the simulated runtime answers with an OOM kill is resized back —
memory only — and a revert the API does not take for a transient reason is sent again on the next pass;
a prompt pass for one VPA leaves the guard on the others' pods."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable

import pytest

from tests.integration.components.test_updater_support import (
    VPAS,
    UpdaterEnv,
    amounts,
    container,
    cstatus,
    deployment,
    rec,
    res,
    spec_resources,
    updater_env,
    vpa,
)
from vpa.sim.cluster.profiles import ANNOTATION

GATES = "InPlace=true,ResizeGuard=true"
# 200Mi in use, 600Mi for half a minute five minutes into each hour: fine under the 1Gi limit, OOM-killed
# under the 512Mi the recommendation leads to (the kubelet lowers a limit only above the usage of the moment).
MEMORY = {"type": "spikes", "base": "200Mi", "height": "400Mi", "period_s": 3600, "duration_s": 30,
          "offset_s": 300}
USAGE = {"app": {"cpu": {"type": "constant", "value": "50m"}, "memory": MEMORY}}


async def _lowered_and_oom_killed(
    env: UpdaterEnv, before_the_kill: Callable[[], Awaitable[object]] | None = None
) -> str:
    """A guarded InPlace VPA lowers app from 500m / 512Mi (limit 1Gi) to 100m / 256Mi (limit 512Mi) and the
    runtime OOM-kills it (after `before_the_kill`, when given); the pod's name."""
    app = container("app", cpu="500m", memory="512Mi", cpu_limit=None, memory_limit="1Gi")
    body = deployment("web", 1, app)
    body["spec"]["template"]["metadata"]["annotations"] = {ANNOTATION: json.dumps(USAGE)}
    await env.store.create("deployments.apps", body)
    guarded = vpa("web", "web", "InPlace")
    guarded["metadata"]["annotations"] = {"vpa.dev/resize-guard": "true"}
    # Memory above the upper bound: resized at once. CPU's upper bound is far above the node.
    await env.create_vpa(guarded, rec("app", cpu="100m", memory="256Mi", upper=("64", "300Mi")))
    report = await env.run_once()
    (name,) = [key.split("/")[1] for key in report.resized]
    assert amounts(spec_resources(env.pods("web")[0])["requests"]) == res("100m", "256Mi")
    if before_the_kill is not None:
        await before_the_kill()
    return await _oom_killed(env, str(name))


async def _oom_killed(env: UpdaterEnv, name: str) -> str:
    for _ in range(120):
        await env.advance(5)
        pod = env.pod(name)
        assert pod is not None
        if (cstatus(pod)["lastState"].get("terminated") or {}).get("reason") == "OOMKilled":
            return str(name)
    raise AssertionError("the runtime never OOM-killed the lowered container")


async def test_an_oom_kill_puts_back_memory_only() -> None:
    async with updater_env(gates=GATES) as env:
        name = await _lowered_and_oom_killed(env)
        await env.run_once()
        pod = env.pod(name)
        assert pod is not None
        # Memory back to its values before; CPU stays where the resize put it (not the 64-core upper bound).
        assert amounts(spec_resources(pod)["requests"]) == res("100m", "512Mi")
        assert amounts(spec_resources(pod)["limits"]) == res(memory="1Gi")
        assert env.metric("vpa_updater_resize_reverts_total", cause="OOMKilled", vpa_name="web",
                          vpa_namespace="default") == 1


@pytest.mark.parametrize(
    ("code", "outcome"),
    [(503, "Failed"), (409, "Rejected")],
    ids=["server-error", "conflict"],
)
async def test_a_revert_that_failed_transiently_is_sent_again_next_pass(code: int, outcome: str) -> None:
    async with updater_env(gates=GATES) as env:
        name = await _lowered_and_oom_killed(env)
        # One answer only, and no client-side retry of it (the clock stands still between passes).
        env.client.options = dataclasses.replace(env.client.options, max_retries=0)
        fault = env.cluster.faults.inject("patch", "pods", code=code, count=1, subresource="resize")
        await env.run_once()
        assert fault.hits == 1
        pod = env.pod(name)
        assert pod is not None
        assert amounts(spec_resources(pod)["requests"]) == res("100m", "256Mi")  # not reverted yet
        messages = [m for _, reason, m in await env.event_reasons() if reason == "ResizeReverted"]
        assert messages
        assert all("could not resize back to app: requests memory=536870912" in m for m in messages), messages
        assert all(f": {outcome}: " in m and "tried again on the next passes" in m for m in messages)
        await env.advance(60)
        await env.run_once()
        pod = env.pod(name)
        assert pod is not None
        assert amounts(spec_resources(pod)["requests"]) == res("100m", "512Mi")
        assert env.metric("vpa_updater_resize_reverts_total", cause="OOMKilled", vpa_name="web",
                          vpa_namespace="default") == 1
        messages = [m for _, reason, m in await env.event_reasons() if reason == "ResizeReverted"]
        assert any("; resized back to app: requests memory=536870912" in m for m in messages), messages


async def test_a_prompt_pass_for_another_vpa_keeps_the_guard_on_this_one() -> None:
    async with updater_env(gates=GATES) as env:
        await env.create_deployment("api", 1)
        await env.create_vpa(vpa("api", "api", "InPlace"), rec("app", cpu="500m", memory="256Mi"))

        async def prompt_pass_for_api() -> None:
            await env.sync()
            await env.updater.run_prompt(["default/api"])

        name = await _lowered_and_oom_killed(env, prompt_pass_for_api)
        await env.run_once()
        pod = env.pod(name)
        assert pod is not None
        assert amounts(spec_resources(pod)["requests"]) == res("100m", "512Mi")


async def test_a_vpa_that_dropped_the_guard_after_the_resize_gets_no_revert() -> None:
    async with updater_env(gates=GATES) as env:

        async def drop_the_guard() -> None:
            await env.store.patch(VPAS, "default", "web", "merge",
                                  {"metadata": {"annotations": {"vpa.dev/resize-guard": None}}})
            await env.sync()

        name = await _lowered_and_oom_killed(env, drop_the_guard)
        await env.run_once()
        pod = env.pod(name)
        assert pod is not None
        assert amounts(spec_resources(pod)["requests"]) == res("100m", "256Mi")  # left as the VPA set it
        assert env.metric("vpa_updater_resize_reverts_total", cause="OOMKilled", vpa_name="web",
                          vpa_namespace="default") == 0
        assert "ResizeReverted" not in {reason for _, reason, _ in await env.event_reasons()}
