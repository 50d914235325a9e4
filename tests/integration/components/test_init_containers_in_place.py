"""Plain init containers under an in-place VPA, against `vpa sim` (issue 42).

The updater reads the simulated API server's version. From 1.36 (`InPlacePodVerticalScalingInitContainers`
beta and on, GA in 1.37) an init container that the recommendation names rides along with the resize its
pod's containers trigger; below 1.36 the server refuses any change to it, so it is left out and the
containers are resized alone. Neither evicts nor restarts anything.
"""

from __future__ import annotations

import pytest

from tests.integration.components.test_updater_support import (
    amounts,
    container,
    deployment,
    rec,
    res,
    settings,
    uids,
    updater_env,
    vpa,
)


@pytest.mark.parametrize(("version", "init_resized"), [("1.37", True), ("1.36", True), ("1.35", False)])
async def test_a_plain_init_container_rides_along_where_the_server_resizes_it(
    version: str, init_resized: bool
) -> None:
    async with updater_env(version, updater_settings=settings()) as env:
        body = deployment("web", 1, container("app", cpu="500m", memory="256Mi"))
        body["spec"]["template"]["spec"]["initContainers"] = [
            container("migrate", cpu="2", memory="1Gi", cpu_limit="2", memory_limit="2Gi")]
        await env.store.create("deployments.apps", body)
        await env.sync()
        (before,) = env.pods("web")
        await env.create_vpa(
            vpa("web-vpa", "web", "InPlaceOrRecreate"),
            rec("app", cpu="900m", memory="400Mi", lower=("800m", "350Mi")),
            rec("migrate", cpu="100m", memory="128Mi"),
        )
        report = await env.run_once()
        assert not report.failed
        assert not report.evicted
        features = env.updater.resize_features
        assert features is not None
        assert features.init_containers is init_resized
        await env.advance(5)
        (after,) = env.pods("web")
        assert uids([after]) == uids([before])
        assert amounts(after["spec"]["containers"][0]["resources"]["requests"]) == res("900m", "400Mi")
        init = after["spec"]["initContainers"][0]["resources"]
        if init_resized:
            assert amounts(init["requests"]) == res("100m", "128Mi")
            assert amounts(init["limits"]) == res("100m", "256Mi")  # limits keep their ratio to requests
        else:
            assert amounts(init["requests"]) == res("2", "1Gi")
        assert after["status"]["containerStatuses"][0]["restartCount"] == 0


async def test_the_init_container_alone_triggers_nothing() -> None:
    # The app is at its target: the init container's recommendation alone never makes a resize (and an
    # InPlaceOrRecreate fallback for it would evict a pod the admission controller cannot change).
    async with updater_env("1.37", updater_settings=settings()) as env:
        body = deployment("web", 1, container("app", cpu="500m", memory="256Mi"))
        body["spec"]["template"]["spec"]["initContainers"] = [container("migrate", cpu="2", memory="1Gi")]
        await env.store.create("deployments.apps", body)
        await env.sync()
        await env.create_vpa(
            vpa("web-vpa", "web", "InPlaceOrRecreate"),
            rec("app", cpu="500m", memory="256Mi"),
            rec("migrate", cpu="100m", memory="128Mi"),
        )
        for _ in range(3):
            report = await env.run_once()
            assert (report.resized, report.evicted, report.failed) == ([], [], [])
            await env.advance(60)
