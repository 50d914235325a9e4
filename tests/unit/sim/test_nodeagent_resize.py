"""The kubelet stand-in's in-place resize states: allocated first, actuated after the configured delay.

Drives `NodeAgent`'s resize and status code directly (no API server): a pod runs on a node, its spec
changes as `/resize` would change it, and the status the stand-in would write is read at the two instants
the kubelet's own code shows (tests/integration/fidelity/test_kubelet_fidelity.py holds the two equal):
right after allocation and after actuation. Regular containers, native sidecars and the pod-level
`spec.resources` show `PodResizeInProgress` in between; a plain init container shows none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from vpa.model.clock import VirtualClock
from vpa.sim.apiserver.store import ObjectStore
from vpa.sim.cluster.nodeagent import NodeAgent, NodeRun, PodRun
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.runtime import Runtime
from vpa.sim.cluster.usage import UsageRegistry

ACTUATION_S = 1.0


def container(name: str, cpu: str, cpu_limit: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "resources": {
            "requests": {"cpu": cpu, "memory": "64Mi"},
            "limits": {"cpu": cpu_limit, "memory": "128Mi"},
        },
        **extra,
    }


def make_pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "generation": 1},
        "spec": spec,
        "status": {},
    }


class Harness:
    """One node agent, one node, one running pod."""

    def __init__(self, pod: dict[str, Any], version: tuple[int, int]) -> None:
        self.clock = VirtualClock()
        options = ClusterOptions(nodes=1, kubernetes_version=version, resize_actuation_s=ACTUATION_S)
        store = ObjectStore(self.clock)
        self.agent = NodeAgent(Runtime(store, self.clock), store, self.clock, options, UsageRegistry())
        self.node = NodeRun("node-1", 0, 4000, 8 * 2**30, 110, {})
        self.agent.nodes[self.node.name] = self.node
        self.pod = pod
        self.run: PodRun = self.agent._new_run(("default", "web"), pod, self.node, self.clock.now())
        self.agent.runs[self.run.key] = self.run
        self.node.pods.add(self.run.key)

    def resize(self, change: Callable[[dict[str, Any]], None]) -> None:
        self.pod = copy.deepcopy(self.pod)
        change(self.pod["spec"])
        self.pod["metadata"]["generation"] += 1
        self.sync()

    def sync(self) -> None:
        self.agent._handle_resize(self.pod, self.run, self.node, self.clock.now())
        self.pod["status"] = self.agent._status(self.pod, self.run)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.sync()

    def view(self) -> tuple[Any, ...]:
        """(resize conditions, {container: (allocated cpu, actual cpu request, actual cpu limit)},
        pod-level (allocated cpu, actual cpu request, actual cpu limit))."""
        status = self.pod["status"]
        conds = tuple(
            sorted(c["type"] for c in status.get("conditions") or [] if c["type"].startswith("PodResize"))
        )
        containers = {
            cs["name"]: (
                cs["allocatedResources"].get("cpu"),
                (cs["resources"].get("requests") or {}).get("cpu"),
                (cs["resources"].get("limits") or {}).get("cpu"),
            )
            for kind in ("initContainerStatuses", "containerStatuses")
            for cs in status.get(kind) or []
        }
        pod_level = (
            (status.get("allocatedResources") or {}).get("cpu"),
            ((status.get("resources") or {}).get("requests") or {}).get("cpu"),
            ((status.get("resources") or {}).get("limits") or {}).get("cpu"),
        )
        return conds, containers, pod_level


def _set(kind: str, name: str, cpu: str, cpu_limit: str) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        for c in spec[kind]:
            if c["name"] == name:
                c["resources"]["requests"]["cpu"] = cpu
                c["resources"]["limits"]["cpu"] = cpu_limit

    return change


def _set_pod_level(spec: dict[str, Any]) -> None:
    spec["resources"]["requests"]["cpu"] = "300m"
    spec["resources"]["limits"]["cpu"] = "600m"


IN_PROGRESS = ("PodResizeInProgress",)
SIDECAR = container("side", "100m", "200m", restartPolicy="Always")
PLAIN_INIT = container("init", "100m", "200m")
APP = container("c", "100m", "200m")
POD_LEVEL = {"requests": {"cpu": "200m", "memory": "128Mi"}, "limits": {"cpu": "400m", "memory": "256Mi"}}
BARE = {"name": "c", "image": "registry.k8s.io/pause:3.10"}

# (id, spec, change, view after allocation, view after actuation)
CASES: list[Any] = [
    pytest.param(
        {"containers": [APP]},
        _set("containers", "c", "300m", "400m"),
        (IN_PROGRESS, {"c": ("300m", "100m", "200m")}, ("300m", "100m", "200m")),
        ((), {"c": ("300m", "300m", "400m")}, ("300m", "300m", "400m")),
        id="regular-container",
    ),
    pytest.param(
        {"containers": [APP], "initContainers": [SIDECAR]},
        _set("initContainers", "side", "300m", "400m"),
        # The pod's allocated aggregate moves with the sidecar's allocation; its cgroup values wait.
        (
            IN_PROGRESS,
            {"side": ("300m", "100m", "200m"), "c": ("100m", "100m", "200m")},
            ("400m", "200m", "400m"),
        ),
        ((), {"side": ("300m", "300m", "400m"), "c": ("100m", "100m", "200m")}, ("400m", "400m", "600m")),
        id="native-sidecar",
    ),
    pytest.param(
        {"containers": [APP], "initContainers": [PLAIN_INIT]},
        _set("initContainers", "init", "300m", "400m"),
        # No PodResizeInProgress for a plain init container; the pod needs max(init, containers).
        ((), {"init": ("300m", "100m", "200m"), "c": ("100m", "100m", "200m")}, ("300m", "100m", "200m")),
        ((), {"init": ("300m", "300m", "400m"), "c": ("100m", "100m", "200m")}, ("300m", "300m", "200m")),
        id="plain-init-container",
    ),
    pytest.param(
        {"containers": [BARE], "resources": POD_LEVEL},
        _set_pod_level,
        (IN_PROGRESS, {"c": (None, None, None)}, ("300m", "200m", "400m")),
        ((), {"c": (None, None, None)}, ("300m", "300m", "600m")),
        id="pod-level-resources",
    ),
]


@pytest.mark.parametrize("version", [(1, 36), (1, 37)])
@pytest.mark.parametrize(("spec", "change", "allocated", "actuated"), CASES)
def test_resize_is_allocated_then_actuated(
    spec: dict[str, Any],
    change: Callable[[dict[str, Any]], None],
    allocated: tuple[Any, ...],
    actuated: tuple[Any, ...],
    version: tuple[int, int],
) -> None:
    h = Harness(make_pod(copy.deepcopy(spec)), version)
    h.sync()
    before = h.view()
    assert before[0] == ()
    h.resize(change)
    assert h.view() == allocated
    h.advance(ACTUATION_S / 2)
    assert h.view() == allocated, "actuated before the configured delay"
    h.advance(ACTUATION_S / 2)
    assert h.view() == actuated


@pytest.mark.parametrize(("spec", "change", "_allocated", "_actuated"), CASES)
def test_node_sums_follow_the_allocation(
    spec: dict[str, Any],
    change: Callable[[dict[str, Any]], None],
    _allocated: tuple[Any, ...],
    _actuated: tuple[Any, ...],
) -> None:
    """The kubelet's node sum holds max(allocated, actual) of the whole pod, sidecars and pod level too."""
    h = Harness(make_pod(copy.deepcopy(spec)), (1, 37))
    h.sync()
    held_before = h.run.kube[0]
    h.resize(change)
    status = h.pod["status"]
    assert h.run.kube[0] > held_before
    assert h.run.kube[0] == int(status["allocatedResources"]["cpu"].removesuffix("m"))
    h.advance(ACTUATION_S)
    assert h.run.kube[0] == int(h.pod["status"]["allocatedResources"]["cpu"].removesuffix("m"))


def test_plain_init_resize_during_a_container_resize_keeps_its_in_progress() -> None:
    h = Harness(
        make_pod({"containers": [copy.deepcopy(APP)], "initContainers": [copy.deepcopy(PLAIN_INIT)]}), (1, 37)
    )
    h.sync()
    h.resize(_set("containers", "c", "300m", "400m"))
    h.resize(_set("initContainers", "init", "300m", "400m"))
    assert h.view()[0] == IN_PROGRESS
    h.advance(ACTUATION_S)
    conds, containers, _ = h.view()
    assert conds == ()
    assert containers == {"init": ("300m", "300m", "400m"), "c": ("300m", "300m", "400m")}


def test_sidecar_restart_container_policy_restarts_it() -> None:
    policy = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]
    sidecar = container("side", "100m", "200m", restartPolicy="Always", resizePolicy=policy)
    h = Harness(make_pod({"containers": [copy.deepcopy(APP)], "initContainers": [sidecar]}), (1, 37))
    h.sync()
    h.resize(_set("initContainers", "side", "300m", "400m"))
    side = h.pod["status"]["initContainerStatuses"][0]
    assert side["restartCount"] == 0
    h.advance(ACTUATION_S)
    side = h.pod["status"]["initContainerStatuses"][0]
    assert side["restartCount"] == 1
    assert side["lastState"]["terminated"]["exitCode"] == 137
    assert side["resources"]["requests"]["cpu"] == "300m"


def test_pod_level_memory_limit_decrease_below_usage_is_refused() -> None:
    """From 1.35 a pod-level memory limit below the pod's usage holds the resize back with Error."""
    spec = {"containers": [copy.deepcopy(BARE)], "resources": copy.deepcopy(POD_LEVEL)}
    pod = make_pod(spec)
    pod["metadata"]["annotations"] = {
        "sim.vpa.dev/usage": '{"c": {"memory": {"type": "constant", "value": "200Mi"}}}'
    }
    h = Harness(pod, (1, 37))
    h.sync()

    def lower(s: dict[str, Any]) -> None:
        s["resources"]["limits"]["memory"] = "150Mi"

    h.resize(lower)
    h.advance(ACTUATION_S)
    # 1.35+ publishes a refusal one sync late: with the retry after the kubelet's retry interval.
    h.advance(h.agent.options.kubelet_retry_s)
    conds = {c["type"]: c for c in h.pod["status"]["conditions"] if c["type"].startswith("PodResize")}
    assert conds["PodResizeInProgress"]["reason"] == "Error"
    assert "pod memory limit (157286400)" in conds["PodResizeInProgress"]["message"]
    assert h.pod["status"]["resources"]["limits"]["memory"] == "256Mi"


async def test_a_status_write_that_failed_is_written_at_the_next_sync() -> None:
    # The pod's resourceVersion is still that of the agent's last write, which reads as the echo of it:
    # without `dirty` the retry would skip the pod and the resize would never be reported.
    harness = Harness(make_pod({"containers": [container("app", "100m", "200m")]}), (1, 37))

    async def refuse(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise ConnectionError("kube-apiserver is down")

    harness.agent.store.update = refuse  # type: ignore[method-assign]
    harness.run.dirty = False
    with pytest.raises(ConnectionError):
        await harness.agent._write_status(harness.pod, harness.run)
    assert harness.run.dirty
