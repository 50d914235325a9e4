"""CPU startup boost end to end against `vpa sim`: admitted boosted, Ready, resized in place back to the
recommendation seconds after the boost expires (no restart, no eviction), annotation removed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from tests.integration.components.test_updater_support import (
    admission_webhook,
    amounts,
    container,
    cstatus,
    rec,
    res,
    settings,
    spec_resources,
    uids,
    updater_env,
    vpa,
)
from vpa.logic.admission.patches import AdmissionOptions
from vpa.model.features import FeatureGates

GATES = "CPUStartupBoost=true,InPlace=true"
BOOST_S = 30


def boosted_vpa(mode: str) -> dict[str, Any]:
    body = vpa("web", "web", mode)
    body["spec"]["startupBoost"] = {"cpu": {"type": "Factor", "factor": 4, "durationSeconds": BOOST_S}}
    return body


@pytest.mark.parametrize(
    ("mode", "replicas", "expected_cpu"),
    [
        ("InPlaceOrRecreate", 1, "300m"),  # a single replica is unboosted too (below minReplicas)
        ("Recreate", 2, "300m"),  # unboosting never evicts, whatever the mode
        ("Off", 1, "250m"),  # mode Off: back to the pod's original CPU
    ],
    ids=["single-replica", "recreate", "mode-off"],
)
async def test_boost_ends_in_place_after_expiry(mode: str, replicas: int, expected_cpu: str) -> None:
    options = AdmissionOptions(gates=FeatureGates.parse(GATES))
    async with updater_env(gates=GATES) as env, admission_webhook(env.cluster, options):
        await env.create_vpa(boosted_vpa(mode), rec("app", cpu="300m", memory="256Mi"))
        before = await env.create_deployment("web", replicas, container("app", cpu="250m", memory="256Mi"))
        for pod in before:
            assert "vpaCpuStartupBoost/app" in pod["metadata"]["annotations"]
            boosted = 4 * (300 if mode != "Off" else 250)
            assert amounts(spec_resources(pod)["requests"]).cpu_millicores == boosted
        await env.advance(10)  # Ready; the boost still runs
        report = await env.updater.unboost_once()
        assert report.unboosted == []
        assert report.next_expiry is not None
        await env.advance(BOOST_S)  # expired
        report = await env.updater.unboost_once()
        await env.sync()
        assert len(report.unboosted) == replicas
        after = env.pods("web")
        assert uids(after) == uids(before)  # resized in place: no eviction
        for pod in after:
            assert "vpaCpuStartupBoost/app" not in pod["metadata"].get("annotations", {})
            status = cstatus(pod)
            assert status["restartCount"] == 0
            assert amounts(status["resources"]["requests"]) == res(expected_cpu, "256Mi")


async def test_the_unboost_loop_ends_a_boost_within_seconds_of_expiry() -> None:
    """The updater's own loop, not one pass called by hand: a boost ends about a second of cluster time after
    it expires, long before the next one-minute updater tick."""
    options = AdmissionOptions(gates=FeatureGates.parse(GATES))
    async with updater_env(gates=GATES) as env, admission_webhook(env.cluster, options):
        await env.create_vpa(boosted_vpa("InPlaceOrRecreate"), rec("app", cpu="300m", memory="256Mi"))
        before = await env.create_deployment("web", 1, container("app", cpu="250m", memory="256Mi"))
        loop = asyncio.ensure_future(env.updater.run_unboost_forever())
        try:
            await env.advance(10)  # Ready
            await asyncio.sleep(0.2)
            assert "vpaCpuStartupBoost/app" in env.pods("web")[0]["metadata"]["annotations"]
            await env.advance(BOOST_S)  # the boost has just expired
            waited = 0.0
            while "vpaCpuStartupBoost/app" in env.pods("web")[0]["metadata"].get("annotations", {}):
                assert waited < 5.0, "the boost did not end within 5 s of cluster time after expiry"
                await asyncio.sleep(0.1)  # real time for the loop's pass and its API calls
                await env.advance(0.5)
                waited += 0.5
        finally:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        after = env.pods("web")
        assert uids(after) == uids(before)
        assert amounts(cstatus(after[0])["resources"]["requests"]) == res("300m", "256Mi")
        assert cstatus(after[0])["restartCount"] == 0


@pytest.mark.parametrize(("syncs", "most_at_once"), [(1, 1), (3, 3)], ids=["one-worker", "three-workers"])
async def test_concurrent_cpu_startup_boost_syncs_bounds_the_removals_in_flight(
    syncs: int, most_at_once: int
) -> None:
    """`--concurrent-cpu-startup-boost-syncs` (upstream 1.8): how many boost removals are in flight at once.
    A spy around the real actuator counts the resize calls that overlap."""
    options = AdmissionOptions(gates=FeatureGates.parse(GATES))
    env_setup = updater_env(gates=GATES, updater_settings=settings(concurrent_cpu_startup_boost_syncs=syncs))
    async with env_setup as env, admission_webhook(env.cluster, options):
        await env.create_vpa(boosted_vpa("InPlaceOrRecreate"), rec("app", cpu="300m", memory="256Mi"))
        before = await env.create_deployment("web", 3, container("app", cpu="250m", memory="256Mi"))
        actuator = env.updater.unbooster.actuator
        real_resize = actuator.resize
        in_flight = peak = 0

        async def counting_resize(namespace: str, name: str, operations: list[Any]) -> Any:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                await asyncio.sleep(0.05)  # real time, so that removals allowed to overlap do overlap
                return await real_resize(namespace, name, operations)
            finally:
                in_flight -= 1

        actuator.resize = counting_resize  # type: ignore[method-assign]
        await env.advance(10 + BOOST_S)  # Ready, then expired
        report = await env.updater.unboost_once()
        await env.sync()
        assert len(report.unboosted) == 3
        assert peak == most_at_once
        assert uids(env.pods("web")) == uids(before)
