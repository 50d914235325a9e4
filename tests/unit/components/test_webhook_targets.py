"""`AdmissionTargets` reads: their deadline is real time even when the injected clock runs fast; a workload's
selector comes with its read as an owner, and the Deployment is read beside its ReplicaSet (the ReplicaSet's
owner reference deciding); served from another loop, they go through a client of that loop; what the shared
controller caches hold is answered without a read."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from tests.builders import make_pod
from vpa.components.webhook.loop_thread import LoopThread
from vpa.components.webhook.targets import AdmissionTargets
from vpa.kube.client import KubeClient, NotFound
from vpa.kube.controllers import ControllerView
from vpa.kube.converting import pod_from_dict
from vpa.model.clock import RealClock, VirtualClock
from vpa.model.selector import Selector
from vpa.model.vpa import TargetRef


class SlowClient:
    """Answers every GET after 20 ms of real time: a ReplicaSet owned by Deployment `web`, or a Deployment."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def get(self, path: str, **_: Any) -> dict[str, object]:
        self.paths.append(path)
        await asyncio.sleep(0.02)
        if "/replicasets/" in path:
            owner = {"kind": "Deployment", "name": "web", "controller": True}
            return {"metadata": {"name": path.rsplit("/", 1)[1], "ownerReferences": [owner]}}
        return {
            "kind": "Deployment",
            "metadata": {"name": path.rsplit("/", 1)[1]},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        }


async def test_reads_are_not_cut_short_by_a_fast_virtual_clock() -> None:
    # A million virtual seconds per real one (as `--clock=sim` with a high time scale): the 2 s read
    # deadline measured on this clock would be 2 µs of real time and every read would time out.
    clock = VirtualClock(time_scale=1_000_000)
    client = SlowClient()
    targets = AdmissionTargets(cast(KubeClient, client), clock, ttl_s=1e9, negative_ttl_s=1e9)
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/web"
        selector = await targets.selector("default", TargetRef("apps/v1", "Deployment", "web"))
    finally:
        targets.close()
    assert selector is not None, "the Deployment read timed out on the virtual clock"
    assert selector.matches(pod.labels)
    assert any("/replicasets/" in p for p in client.paths)


class CountingClient(SlowClient):
    """`SlowClient` without the delay; a ReplicaSet `bad-*` is owned by a Deployment with no selector."""

    async def get(self, path: str, **_: Any) -> dict[str, object]:
        self.paths.append(path)
        name = path.rsplit("/", 1)[1]
        if "/replicasets/" in path:
            owner = {"kind": "Deployment", "name": name.split("-")[0], "controller": True}
            return {"metadata": {"name": name, "ownerReferences": [owner]}}
        selector: object = {"matchLabels": {"app": name}} if name != "bad" else "not a LabelSelector"
        spec = {"selector": selector}
        return {"kind": "Deployment", "metadata": {"name": name}, "spec": spec}


async def test_a_deployments_first_pod_costs_two_reads_its_selector_comes_with_the_owner() -> None:
    client = CountingClient()
    targets = AdmissionTargets(cast(KubeClient, client), VirtualClock(), ttl_s=60, negative_ttl_s=10)
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/web"
        selector = await targets.selector("default", TargetRef("apps/v1", "Deployment", "web"))
        # A Deployment whose selector cannot be read is remembered as none, also from the owner's read.
        bad = pod_from_dict(make_pod("bad-7d9f8b6c4-x2k9p", app="bad"))
        assert await targets.top_most(bad) == "default/Deployment/bad"
        assert await targets.selector("default", TargetRef("apps/v1", "Deployment", "bad")) is None
    finally:
        await targets.aclose()
    assert selector is not None
    assert selector.matches(pod.labels)
    assert [p.rsplit("/", 2)[1] for p in client.paths] == ["replicasets", "deployments"] * 2


async def test_served_from_another_loop_the_reads_use_a_client_of_that_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def deployment(request: web.Request) -> web.Response:
        loops.append(asyncio.get_running_loop())
        return web.json_response({
            "kind": "Deployment", "metadata": {"name": request.match_info["name"]},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        })

    app = web.Application()
    app.router.add_get("/apis/apps/v1/namespaces/{ns}/deployments/{name}", deployment)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    main_client = KubeClient(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")), RealClock())
    targets = AdmissionTargets(main_client, VirtualClock(), ttl_s=60)
    main_reads: list[str] = []

    async def main_get(path: str, **_: Any) -> dict[str, object]:
        main_reads.append(path)
        raise AssertionError("read through the main loop's client")

    main_client.get = main_get  # type: ignore[method-assign]
    thread = LoopThread("test-admission")
    thread.start()

    async def on_thread() -> tuple[object, asyncio.AbstractEventLoop]:
        targets.open_own_client()
        try:
            selector = await targets.selector("default", TargetRef("apps/v1", "Deployment", "web"))
            return selector, asyncio.get_running_loop()
        finally:
            await targets.aclose()

    try:
        # The main loop answers the server and must stay free; the read must not be carried by it.
        selector, thread_loop = await thread.call(on_thread())
    finally:
        await thread.stop()
        await main_client.close()
        await runner.cleanup()
    assert selector is not None, "the read failed"
    assert thread_loop is not asyncio.get_running_loop()
    assert main_reads == []
    assert len(loops) == 1


async def test_entries_unused_for_an_hour_are_dropped_and_used_ones_kept() -> None:
    # Every rollout brings a new ReplicaSet: a webhook running for months must not keep every one it saw.
    clock = VirtualClock()
    client = CountingClient()
    targets = AdmissionTargets(cast(KubeClient, client), clock, ttl_s=1e9)
    old = pod_from_dict(make_pod("web-1111111111-aaaaa", template_hash="1111111111"))
    new = pod_from_dict(make_pod("web-2222222222-bbbbb", template_hash="2222222222"))
    try:
        await targets.top_most(old)
        await targets.top_most(new)
        owners = targets._owners
        assert len(owners) == 3  # two ReplicaSets and their Deployment
        for _ in range(7):  # 70 min in which only the new ReplicaSet's pods arrive
            clock.advance(600)
            assert await targets.top_most(new) == "default/Deployment/web"
        assert len(owners) == 2
        reads = len(client.paths)
        assert await targets.top_most(new) == "default/Deployment/web"
        assert len(client.paths) == reads  # what was used stayed cached
        assert await targets.top_most(old) == "default/Deployment/web"
        assert len(client.paths) == reads + 1  # the dropped ReplicaSet is read again
    finally:
        await targets.aclose()


class OverlapClient(SlowClient):
    """`SlowClient` that counts the GETs in flight at once; ReplicaSet `other-*` is owned by Deployment
    `elsewhere` (its name does not follow the Deployment controller's convention)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most_in_flight = 0

    async def get(self, path: str, **kwargs: Any) -> dict[str, object]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if "/deployments/other" in path:
                self.paths.append(path)
                await asyncio.sleep(0.02)
                raise NotFound(404, "NotFound", "deployments.apps other not found")
            answer = await super().get(path, **kwargs)
            if "/replicasets/other-" in path:
                answer["metadata"] = {"name": "other", "ownerReferences": [
                    {"kind": "Deployment", "name": "elsewhere", "controller": True}]}
            return answer
        finally:
            self.in_flight -= 1


async def test_the_deployment_is_read_beside_its_replicaset() -> None:
    client = OverlapClient()
    targets = AdmissionTargets(cast(KubeClient, client), VirtualClock(), ttl_s=60, negative_ttl_s=10)
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/web"
        # The Deployment's selector came with it: no third read.
        assert await targets.selector("default", TargetRef("apps/v1", "Deployment", "web")) is not None
    finally:
        targets.close()
    assert client.most_in_flight == 2, "the ReplicaSet and the Deployment were read one after the other"
    assert len(client.paths) == 2


async def test_the_replicasets_owner_reference_decides_not_the_guess() -> None:
    client = OverlapClient()
    targets = AdmissionTargets(cast(KubeClient, client), VirtualClock(), ttl_s=60, negative_ttl_s=10)
    pod = pod_from_dict(make_pod("other-7d9f8b6c4-x2k9p", app="other"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/elsewhere"
        again = pod_from_dict(make_pod("other-7d9f8b6c4-abcde", app="other"))
        assert await targets.top_most(again) == "default/Deployment/elsewhere"
    finally:
        targets.close()
    # The wrong guess was read once (a 404, cached as missing) and not again for the second pod.
    assert sum("/deployments/other" in p for p in client.paths) == 1
    assert sum("/replicasets/" in p for p in client.paths) == 1


class Known:
    """The shared controller caches, reduced to their lookup."""

    def __init__(self, *views: ControllerView) -> None:
        self.views = {(v.namespace, v.kind, v.name): v for v in views}

    def get(self, namespace: str, kind: str, name: str) -> ControllerView | None:
        return self.views.get((namespace, kind, name))


WEB_RS = ControllerView("ReplicaSet", "default", "web-7d9f8b6c4", owner_kind="Deployment", owner_name="web")
WEB = ControllerView("Deployment", "default", "web", selector=Selector.from_match_labels({"app": "web"}))


async def test_what_the_shared_caches_hold_is_answered_without_a_read() -> None:
    client = CountingClient()
    targets = AdmissionTargets(cast(KubeClient, client), VirtualClock(), known=Known(WEB_RS, WEB))
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/web"
        selector = await targets.selector("default", TargetRef("apps/v1", "Deployment", "web"))
    finally:
        targets.close()
    assert selector is not None
    assert selector.matches(pod.labels)
    assert client.paths == []
    assert targets.known_answers == 3  # the ReplicaSet, the Deployment, the Deployment's selector


async def test_a_replicaset_the_caches_have_not_seen_yet_is_read_its_known_owner_is_not() -> None:
    # A rollout's new ReplicaSet: its first pod's review may come before the ReplicaSet's watch event.
    client = CountingClient()
    targets = AdmissionTargets(cast(KubeClient, client), VirtualClock(), known=Known(WEB))
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/Deployment/web"
        await asyncio.sleep(0)
    finally:
        targets.close()
    assert client.paths == ["/apis/apps/v1/namespaces/default/replicasets/web-7d9f8b6c4"]


async def test_a_cached_controller_without_an_owner_is_the_top() -> None:
    client = CountingClient()
    orphan = ControllerView("ReplicaSet", "default", "web-7d9f8b6c4")
    targets = AdmissionTargets(cast(KubeClient, client), VirtualClock(), known=Known(orphan, WEB))
    pod = pod_from_dict(make_pod("web-7d9f8b6c4-x2k9p", app="web"))
    try:
        assert await targets.top_most(pod) == "default/ReplicaSet/web-7d9f8b6c4"
    finally:
        targets.close()
    assert client.paths == []
