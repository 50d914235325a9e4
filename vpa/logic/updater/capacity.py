"""AEP-9726 capacity-aware in-place resizes (gate `InPlaceCapacityAware`): a resize the kubelet would not
admit is not sent.

Owns: `pod_requests` (what a pod holds on its node: the sum of its containers' and native sidecars' current
requests — `status.containerStatuses[].resources` when reported, else spec — or its pod-level requests when
it sets them; finished pods hold nothing), and `NodeRooms`, one pass's view of every node's allocatable
CPU and memory and the requests of the pods bound to it. `NodeRooms.verdict` answers, for a resize
decision, what the kubelet's admission check would say (KEP-1287):

- `Infeasible`: the pod's requests after the resize exceed the node's allocatable on their own;
- `Deferred`: they fit the node, but not next to the other pods' requests;
- None: it fits. Resizes that only lower requests always fit.

`charge` books a planned resize's growth on its node, so two resizes in one pass cannot both take the same
free room. A pod whose node is unknown (not yet listed, or not bound) is never blocked: the check only
saves API calls, and the kubelet still has the last word.

Must not: call the API, read the clock, or decide what happens instead (the plan skips `InPlace` pods and
lets `InPlaceOrRecreate` fall back to its eviction rules).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from vpa.logic.updater.inplace import PodDecision
from vpa.model.node import NodeView
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources

INFEASIBLE: Final = "Infeasible"
DEFERRED: Final = "Deferred"
_FINISHED: Final = frozenset({"Succeeded", "Failed"})
_RESOURCES: Final = (CPU, MEMORY)


class Verdict(NamedTuple):
    """What the kubelet would answer a resize that does not fit, for which resource, and why in words."""

    answer: str
    """`Infeasible` or `Deferred`."""
    resource: str
    message: str
    """Names node, resource and amounts."""


def _container_requests(pod: PodView) -> dict[str, int]:
    total = {CPU: 0, MEMORY: 0}
    names = [c.name for c in pod.containers] + [c.name for c in pod.sidecars]
    for name in dict.fromkeys(names):  # a pod extended with its sidecars lists them twice
        if pod.is_plain_init_container(name):
            continue  # listed only when the updater resizes it (`with_plain_init_containers`): not counted
        current = pod.current_requests(name)
        for resource in _RESOURCES:
            total[resource] += current.get(resource) or 0
    return total


def pod_requests(pod: PodView) -> dict[str, int]:
    """cpu millicores and memory bytes the pod holds on its node (0 for a finished pod): its pod-level
    request where it sets one, else the sum of its containers' and sidecars' current requests."""
    if pod.phase in _FINISHED:
        return {CPU: 0, MEMORY: 0}
    total = _container_requests(pod)
    if pod.has_pod_level_resources:
        for resource in _RESOURCES:
            own = pod.pod_requests.get(resource)
            if own is not None:
                total[resource] = own
    return total


def _growth(pod: PodView, decision: PodDecision) -> dict[str, int]:
    """Requests the resize adds to (positive) or removes from (negative) the pod, per resource."""
    growth = {CPU: 0, MEMORY: 0}
    for change in decision.changes:
        if pod.is_plain_init_container(change.name):
            continue  # plain init containers are not counted here (see `_container_requests`)
        current = pod.current_requests(change.name)
        for resource in _RESOURCES:
            new = change.requests.get(resource)
            if new is not None:
                growth[resource] += new - (current.get(resource) or 0)
    if pod.has_pod_level_resources:
        # Where the pod sets a pod-level request, that is what the node accounts, not its containers.
        planned = decision.pod_level.requests if decision.pod_level is not None else Resources()
        for resource in _RESOURCES:
            own = pod.pod_requests.get(resource)
            if own is not None:
                new = planned.get(resource)
                growth[resource] = 0 if new is None else new - own
    return growth


def _amount(resource: str, value: int) -> str:
    return f"{value}m" if resource == CPU else f"{value}"


@dataclass(slots=True)
class _Node:
    allocatable: dict[str, int | None]
    requested: dict[str, int] = field(default_factory=lambda: {CPU: 0, MEMORY: 0})


@dataclass(slots=True)
class NodeRooms:
    """Allocatable and requested resources per node, for one updater pass (mutable: `charge`)."""

    nodes: dict[str, _Node] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: Iterable[NodeView], pods: Iterable[PodView]) -> NodeRooms:
        """Rooms for `nodes`, with the requests of every pod bound to one of them (terminating pods count:
        the kubelet keeps their resources until they are gone)."""
        rooms = cls({n.name: _Node({CPU: n.cpu_millicores, MEMORY: n.memory_bytes}) for n in nodes})
        for pod in pods:
            node = rooms.nodes.get(pod.node_name)
            if node is None:
                continue
            for resource, amount in pod_requests(pod).items():
                node.requested[resource] += amount
        return rooms

    def verdict(self, pod: PodView, decision: PodDecision) -> Verdict | None:
        """What the kubelet would answer the resize (`Verdict`), or None when it fits."""
        node = self.nodes.get(pod.node_name)
        if node is None:
            return None
        growth = _growth(pod, decision)
        held = pod_requests(pod)
        for resource in _RESOURCES:
            allocatable = node.allocatable.get(resource)
            if allocatable is None or growth[resource] <= 0:
                continue
            wanted = held[resource] + growth[resource]
            if wanted > allocatable:
                return Verdict(INFEASIBLE, resource, (
                    f"the pod would request {resource} {_amount(resource, wanted)}, more than node "
                    f"{pod.node_name} allocates ({_amount(resource, allocatable)})"
                ))
            free = allocatable - node.requested[resource]
            if growth[resource] > free:
                return Verdict(DEFERRED, resource, (
                    f"the resize needs {resource} {_amount(resource, growth[resource])} more, node "
                    f"{pod.node_name} has {_amount(resource, max(free, 0))} free"
                ))
        return None

    def charge(self, pod: PodView, decision: PodDecision) -> None:
        """Book the resize's growth on the pod's node (a decrease frees nothing until it is applied)."""
        node = self.nodes.get(pod.node_name)
        if node is None:
            return
        for resource, amount in _growth(pod, decision).items():
            if amount > 0:
                node.requested[resource] += amount

