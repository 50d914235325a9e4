"""The updater's prompt pass (`Updater.run_prompt`, `--in-place-on-recommendation`) against `vpa sim`: it
resizes in place under the loop's rules, and leaves every eviction to the regular loop."""

from __future__ import annotations

import asyncio

from tests.integration.components.test_updater_support import (
    admission_webhook,
    amounts,
    container,
    names,
    rec,
    res,
    settings,
    spec_resources,
    uids,
    updater_env,
    vpa,
)
from vpa.logic.updater.inplace import Reason


async def test_prompt_pass_resizes_the_changed_vpa_only() -> None:
    async with updater_env() as env:
        web = await env.create_deployment("web", 2, container("app"))
        api = await env.create_deployment("api", 2, container("app"))
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="300Mi"))
        await env.create_vpa(vpa("api", "api", "InPlaceOrRecreate"), rec(cpu="800m", memory="300Mi"))
        await env.sync()
        report = await env.updater.run_prompt({"default/web"})
        await env.sync()
        assert sorted(report.resized) == sorted(f"default/{n}" for n in names(web))
        for pod in env.pods("web"):
            assert amounts(spec_resources(pod)["requests"]) == res("800m", "300Mi")
        for pod in env.pods("api"):
            assert uids([pod]) <= uids(api)
            assert amounts(spec_resources(pod)["requests"]) != res("800m", "300Mi")


async def test_prompt_pass_never_evicts() -> None:
    async with updater_env(nodes=2) as env, admission_webhook(env.cluster):
        app = container("app", cpu="500m", cpu_limit="1", memory="256Mi", memory_limit="256Mi")
        before = await env.create_deployment("web", 2, app)
        policy = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
        # A target that would make the pod Guaranteed: InPlaceOrRecreate evicts for it (the plan says so)…
        await env.create_vpa(
            vpa("web", "web", "InPlaceOrRecreate", container_policies=policy),
            rec(cpu="1", memory="256Mi", lower=("900m", "200Mi"), upper=("2", "1Gi")),
        )
        await env.sync()
        report = await env.updater.run_prompt({"default/web"})
        await env.sync()
        # …but not in a prompt pass: the plan's eviction waits for the loop.
        assert any(d.reason is Reason.QOS_CHANGE for d in report.decisions().values())
        assert report.evicted == []
        assert uids(env.pods("web")) == uids(before)
        report = await env.run_once()
        assert len(report.evicted) == 1


async def test_prompt_pass_respects_the_rate_limiter() -> None:
    # One token per 1000 s of virtual time, burst 1: the second resize must wait for the clock.
    limited = settings(eviction_rate_limit=0.001, eviction_rate_burst=1)
    async with updater_env(updater_settings=limited) as env:
        await env.create_deployment("web", 2, container("app"))
        await env.create_vpa(vpa("web", "web", "InPlaceOrRecreate"), rec(cpu="800m", memory="300Mi"))
        await env.sync()
        prompt = asyncio.ensure_future(env.updater.run_prompt({"default/web"}))
        for _ in range(50):
            await asyncio.sleep(0.01)
        assert not prompt.done()  # the first resize went through, the second waits for a token
        resized = [p for p in env.pods("web")
                   if amounts(spec_resources(p)["requests"]) == res("800m", "300Mi")]
        assert len(resized) == 1
        await env.cluster.advance(1000.0)
        report = await asyncio.wait_for(prompt, 5.0)
        assert len(report.resized) == 2


async def test_other_modes_are_left_to_the_loop() -> None:
    async with updater_env() as env:
        before = await env.create_deployment("web", 2, container("app"))
        await env.create_vpa(vpa("web", "web", "Recreate"),
                             rec(cpu="800m", memory="300Mi", lower=("700m", "280Mi")))
        await env.sync()
        report = await env.updater.run_prompt({"default/web"})
        assert report.plans == []
        assert report.evicted == []
        assert uids(env.pods("web")) == uids(before)
