"""Kubelet fidelity: the same in-place resizes judged by the kubelet's own code and by `vpa sim`'s stand-in.

One table of resize cases runs, at the same time, on two real control planes of the same release: one whose
node is a hollow kubelet (`--kubelet=hollow`: Kubernetes' `pkg/kubelet` with a fake runtime, built by
`make control-plane`), one whose node is the simulator's stand-in (`--kubelet=sim`, `vpa.sim.cluster`).
Each case returns what a client watching the pod sees, in order: the resize conditions (type, reason,
message), each container's `allocatedResources`, `resources` and `restartCount`, and the HTTP answer to
the resize itself. The two transcripts must be equal. A difference kept on purpose is a strict xfail whose
reason points at docs/deviations.md: if the two ever agree, it fails, and the deviation goes.

The release is the newest built, or `$FIDELITY_KUBERNETES_VERSION` (e.g. v1.36.3). Skips with one line
when the release's binaries (hollow-node included) are not built.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio

from tests.integration.fidelity.test_api_fidelity import STRATEGIC, Api
from vpa.model.quantity import cpu_millicores, memory_bytes
from vpa.sim.kubernetes.cluster import RealCluster
from vpa.sim.kubernetes.hollow import USAGE_PERIOD_S
from vpa.sim.kubernetes.releases import ReleaseError, locate

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

NODE_CPU, NODE_MEMORY = "4", "8Gi"
SETTLE_S = 30.0

View = tuple[Any, ...]


@dataclass
class Side:
    name: str
    cluster: RealCluster
    api: Api
    version: tuple[int, int]


RELEASE = os.environ.get("FIDELITY_KUBERNETES_VERSION") or None


async def _side(kubelet: str) -> Side:
    cluster = RealCluster(
        nodes=1, node_cpu=NODE_CPU, node_memory=NODE_MEMORY, kubelet=kubelet, kubernetes_version=RELEASE
    )
    await cluster.start()
    cp = cluster.control_plane
    api = Api(f"{kubelet} kubelet", cp.url, cp.ca_pem, cp.admin_token)
    await api.open()
    return Side(kubelet, cluster, api, cluster.version)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sides() -> AsyncIterator[tuple[Side, Side]]:
    try:
        locate(RELEASE, hollow=True)
    except ReleaseError as err:
        pytest.skip(f"hollow kubelet not built: {err}")
    hollow, sim = await asyncio.gather(_side("hollow"), _side("sim"))
    try:
        yield hollow, sim
    finally:
        for side in (hollow, sim):
            await side.api.close()
            await side.cluster.stop()


# --- what a client sees ------------------------------------------------------------------------------


def _amounts(rl: dict[str, Any] | None) -> tuple[tuple[str, int], ...]:
    out = []
    for name, raw in sorted((rl or {}).items()):
        if name == "cpu":
            out.append((name, cpu_millicores(str(raw))))
        elif name == "memory":
            out.append((name, memory_bytes(str(raw))))
    return tuple(out)


def _resources(res: dict[str, Any] | None) -> tuple[Any, ...]:
    res = res or {}
    return (_amounts(res.get("requests")), _amounts(res.get("limits")))


def view(pod: dict[str, Any]) -> View:
    """The parts of a pod a client acts on after a resize; timestamps and IDs left out."""
    status = pod.get("status") or {}
    conds = tuple(
        sorted(
            (c.get("type"), c.get("reason", ""), c.get("message", ""))
            for c in status.get("conditions") or []
            if str(c.get("type", "")).startswith("PodResize")
        )
    )
    containers = tuple(
        (
            kind,
            cs.get("name"),
            _amounts(cs.get("allocatedResources")),
            _resources(cs.get("resources")),
            cs.get("restartCount", 0),
        )
        for kind in ("initContainerStatuses", "containerStatuses")
        for cs in sorted(status.get(kind) or [], key=lambda c: str(c.get("name")))
    )
    pod_level = (_amounts(status.get("allocatedResources")), _resources(status.get("resources")))
    return (conds, containers, pod_level)


class Watch:
    """Every distinct view of one pod, in order, from a watch opened at the pod's current version."""

    def __init__(self, api: Api, namespace: str, name: str) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.views: list[View] = []
        self.latest: dict[str, Any] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        _, pod = await self.api.call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{self.name}")
        self._record(pod)
        rv = pod["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._run(rv))

    def _record(self, pod: dict[str, Any]) -> None:
        self.latest = pod
        v = view(pod)
        if not self.views or self.views[-1] != v:
            self.views.append(v)

    async def _run(self, rv: str) -> None:
        assert self.api.session is not None
        path = (
            f"/api/v1/namespaces/{self.namespace}/pods?watch=1&resourceVersion={rv}"
            f"&fieldSelector=metadata.name%3D{self.name}&timeoutSeconds=600"
        )
        async with self.api.session.get(path, timeout=aiohttp.ClientTimeout(total=None)) as resp:
            async for line in resp.content:
                event = orjson.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._record(event["object"])

    async def stop(self) -> list[View]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        return self.views


# --- building blocks -----------------------------------------------------------------------------------


def container(
    name: str, cpu: str, memory: str, cpu_limit: str, memory_limit: str, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu_limit, "memory": memory_limit},
        },
        **extra,
    }


def pod(
    name: str, *containers: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if annotations:
        md["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {
            "containers": list(containers),
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


async def create_running(api: Api, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    code, created = await api.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert code == 201, created
    name = body["metadata"]["name"]

    async def running() -> dict[str, Any] | None:
        _, got = await api.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        status = got.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        return got if status.get("phase") == "Running" and ready else None

    result: dict[str, Any] = await api.until(f"pod {ns}/{name} Running and Ready", running, 60)
    return result


async def resize(api: Api, ns: str, name: str, patch: dict[str, Any]) -> tuple[int, str, list[str]]:
    code, body = await api.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/resize", patch, STRATEGIC)
    causes = sorted(str(c.get("reason")) for c in (body.get("details") or {}).get("causes") or [])
    return code, str(body.get("reason", "")) if body.get("kind") == "Status" else "", causes


def settled(pod: dict[str, Any]) -> bool:
    """No resize pending or in progress, and every container runs what its spec asks."""
    status = pod.get("status") or {}
    if any(str(c.get("type", "")).startswith("PodResize") for c in status.get("conditions") or []):
        return False
    spec = pod.get("spec") or {}
    want = {
        c["name"]: _resources(c.get("resources"))
        for c in [*(spec.get("initContainers") or []), *spec["containers"]]
    }
    have = {
        cs["name"]: _resources(cs.get("resources"))
        for kind in ("initContainerStatuses", "containerStatuses")
        for cs in status.get(kind) or []
    }
    return all(have.get(n) == r for n, r in want.items() if n in have)


Case = Callable[[Api, str, tuple[int, int]], Awaitable[list[Any]]]


async def until_settled(watch: Watch, timeout_s: float = SETTLE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        if settled(watch.latest):
            await asyncio.sleep(1.5)  # anything after "done" would show here
            return


async def observe(
    api: Api, ns: str, name: str, act: Callable[[], Awaitable[list[Any]]], timeout_s: float = SETTLE_S
) -> list[Any]:
    watch = Watch(api, ns, name)
    await watch.start()
    answers = await act()
    await until_settled(watch, timeout_s)
    views = await watch.stop()
    return [answers, views]


C = container  # short in the table below


async def case_feasible_increase(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    await create_running(api, ns, pod("web", C("c", "100m", "64Mi", "200m", "128Mi")))
    resources = {"requests": {"cpu": "300m", "memory": "96Mi"}, "limits": {"cpu": "500m", "memory": "192Mi"}}
    patch = {"spec": {"containers": [{"name": "c", "resources": resources}]}}

    async def act() -> list[Any]:
        return [await resize(api, ns, "web", patch)]

    return await observe(api, ns, "web", act)


async def case_above_capacity(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    await create_running(api, ns, pod("web", C("c", "100m", "64Mi", "200m", "128Mi")))

    async def act() -> list[Any]:
        cpu = {
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}}}
                ]
            }
        }
        mem = {"spec": {"containers": [{"name": "c", "resources": {
            "requests": {"memory": "100Gi"}, "limits": {"memory": "100Gi"}}}]}}  # fmt: skip
        return [await resize(api, ns, "web", cpu), await resize(api, ns, "web", mem)]

    return await observe(api, ns, "web", act, timeout_s=5)


async def case_deferred_until_room(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    await create_running(api, ns, pod("big", C("c", "3", "1Gi", "3", "1Gi")))
    await create_running(api, ns, pod("web", C("c", "100m", "64Mi", "200m", "128Mi")))
    patch = {"spec": {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}}]}}  # fmt: skip

    async def act() -> list[Any]:
        answer = await resize(api, ns, "web", patch)
        await asyncio.sleep(4)  # the Deferred verdict is seen before the room frees
        code, _ = await api.call("DELETE", f"/api/v1/namespaces/{ns}/pods/big")
        return [answer, code]

    answers, views = await observe(api, ns, "web", act)
    # Once the room frees, the kubelet allocates and actuates the deferred resize either in one pod sync or
    # in two (a race between its allocation retry and the pod worker), so the PodResizeInProgress between
    # PodResizePending and done is seen or not: left out of the comparison.
    kept = [v for i, v in enumerate(views) if not (i > 0 and _in_progress(v) and _pending(views[i - 1]))]
    return [answers, kept]


def _in_progress(v: View) -> bool:
    return bool(v[0] == (("PodResizeInProgress", "", ""),))


def _pending(v: View) -> bool:
    return any(c[0] == "PodResizePending" for c in v[0])


async def case_memory_decrease_below_usage(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    # 200Mi for the next 40 s (the same instant on both sides: the spike's phase is absolute), then 100Mi:
    # long enough for two kubelet syncs to refuse the decrease, whatever their phase.
    spike = {"type": "spikes", "base": "100Mi", "height": "100Mi", "period_s": 10**7, "duration_s": 40,
             "offset_s": round(time.time())}  # fmt: skip
    usage = json.dumps({"c": {"memory": spike}})
    await create_running(
        api,
        ns,
        pod("web", C("c", "100m", "128Mi", "200m", "256Mi"), annotations={"sim.vpa.dev/usage": usage}),
    )
    patch = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "150Mi"}}}]}}
    # The hollow node reads usage from a file vpa sim rewrites every second: a resize sent the instant the
    # container starts would be judged against no usage yet.
    await asyncio.sleep(2 * USAGE_PERIOD_S)

    async def act() -> list[Any]:
        return [await resize(api, ns, "web", patch)]

    return await observe(api, ns, "web", act, timeout_s=75)


async def case_restart_container(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    policy = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    await create_running(api, ns, pod("web", C("c", "100m", "64Mi", "200m", "128Mi", resizePolicy=policy)))
    patch = {"spec": {"containers": [{"name": "c", "resources": {
        "requests": {"memory": "96Mi"}, "limits": {"memory": "192Mi"}}}]}}  # fmt: skip

    async def act() -> list[Any]:
        return [await resize(api, ns, "web", patch)]

    return await observe(api, ns, "web", act)


async def case_native_sidecar(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    sidecar = C("side", "100m", "64Mi", "200m", "128Mi", restartPolicy="Always")
    await create_running(
        api, ns, pod("web", C("c", "100m", "64Mi", "200m", "128Mi"), initContainers=[sidecar])
    )
    patch = {"spec": {"initContainers": [{"name": "side", "resources": {
        "requests": {"cpu": "300m"}, "limits": {"cpu": "400m"}}}]}}  # fmt: skip

    async def act() -> list[Any]:
        return [await resize(api, ns, "web", patch)]

    return await observe(api, ns, "web", act)


async def case_pod_level_resources(api: Api, ns: str, _v: tuple[int, int]) -> list[Any]:
    body = pod("web", {"name": "c", "image": "registry.k8s.io/pause:3.10"})
    body["spec"]["resources"] = {
        "requests": {"cpu": "200m", "memory": "128Mi"},
        "limits": {"cpu": "400m", "memory": "256Mi"},
    }
    await create_running(api, ns, body)
    patch = {"spec": {"resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "600m"}}}}

    async def act() -> list[Any]:
        return [await resize(api, ns, "web", patch)]

    return await observe(api, ns, "web", act)


async def case_init_container(api: Api, ns: str, version: tuple[int, int]) -> list[Any]:
    if version < (1, 36):
        pytest.skip("non-sidecar init containers are resizable from 1.36")
    body = pod(
        "web",
        C("c", "100m", "64Mi", "200m", "128Mi"),
        initContainers=[C("init", "100m", "64Mi", "200m", "128Mi")],
    )
    code, created = await api.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert code == 201, created

    async def init_started() -> bool:
        _, got = await api.call("GET", f"/api/v1/namespaces/{ns}/pods/web")
        states = [
            cs.get("state") or {} for cs in (got.get("status") or {}).get("initContainerStatuses") or []
        ]
        return any("running" in s or "terminated" in s for s in states)

    await api.until("the init container started", init_started, 60)
    patch = {"spec": {"initContainers": [{"name": "init", "resources": {
        "requests": {"cpu": "300m"}, "limits": {"cpu": "400m"}}}]}}  # fmt: skip

    async def act() -> list[Any]:
        return [await resize(api, ns, "web", patch)]

    answers, views = await observe(api, ns, "web", act)
    # Only the init container's part: a hollow node's fake runtime never ends it, so the pod stays Pending
    # there while the stand-in's init container has completed (docs/deviations.md).
    init_only = [(v[0], tuple(c for c in v[1] if c[1] == "init")) for v in views]
    kept = [v for i, v in enumerate(init_only) if i == 0 or v != init_only[i - 1]]
    return [answers, kept]


CASES: list[Any] = [
    pytest.param(case_feasible_increase, id="feasible-increase"),
    pytest.param(case_above_capacity, id="above-capacity-403"),
    pytest.param(case_deferred_until_room, id="deferred-until-room"),
    pytest.param(case_memory_decrease_below_usage, id="memory-decrease-below-usage"),
    pytest.param(case_restart_container, id="restart-container"),
    pytest.param(case_native_sidecar, id="native-sidecar"),
    pytest.param(case_pod_level_resources, id="pod-level-resources"),
    pytest.param(case_init_container, id="init-container"),
]


@pytest.mark.parametrize("case", CASES)
async def test_hollow_and_sim_kubelets_agree(
    sides: tuple[Side, Side], case: Case, request: pytest.FixtureRequest
) -> None:
    hollow, sim = sides
    ns = request.node.callspec.id.replace("_", "-")[:50]
    await asyncio.gather(hollow.api.namespace(ns), sim.api.namespace(ns))
    want, got = await asyncio.gather(case(hollow.api, ns, hollow.version), case(sim.api, ns, sim.version))
    assert got == want, f"\nhollow kubelet: {want}\nsim kubelet:    {got}"
