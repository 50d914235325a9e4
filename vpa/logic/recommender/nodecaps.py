"""Node-aware capping (`--cap-to-largest-node`, ours): no recommendation bigger than any node can hold.

Owns: `cap_to_largest_node`. A recommendation is a pod's worth of containers; a recreated pod asks for the
sum of their targets. Among the schedulable nodes whose allocatable is known, the rule picks the one that
keeps most of the pod (the largest sum over CPU and memory of min(1, allocatable / pod total), ties to the
node with more memory, then more CPU, then the smaller name) and, for each resource whose pod total
exceeds that node's allocatable, scales every container's target down in proportion (rounded down) so
the sum fits. Upper bounds get the same treatment (never below the capped target); lower bounds never
exceed the capped target. `uncappedTarget` is left as it was, so the status still shows what the workload
would want. What other pods already use on the node is not subtracted: the cap is what an empty node of
the cluster can hold. No schedulable node with a known allocatable → nothing is capped.

The result says which node capped what and by how much (`NodeCap`), for the VPA's condition and event.

Must not: read the clock, log, or know where nodes come from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from vpa.model import quantity
from vpa.model.node import NodeView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.vpa import Recommendation, RecommendedContainerResources


@dataclass(frozen=True, slots=True)
class ResourceCap:
    """One resource of a pod that did not fit: the summed targets before and after capping."""

    resource: str
    wanted: int
    capped: int

    def describe(self) -> str:
        fmt = quantity.format_cpu_millicores if self.resource == CPU else quantity.format_memory_bytes
        before, after = fmt(self.wanted), fmt(self.capped)
        return f"{self.resource} {before} → {after}"


@dataclass(frozen=True, slots=True)
class NodeCap:
    """What `cap_to_largest_node` did: the node it capped to and each resource it reduced."""

    node: str
    resources: tuple[ResourceCap, ...]

    def message(self) -> str:
        changes = ", ".join(cap.describe() for cap in self.resources)
        return (f"pod total capped to the allocatable of node {self.node}, the largest schedulable node: "
                f"{changes}")


def _get(resources: Resources, resource: str) -> int | None:
    return resources.cpu_millicores if resource == CPU else resources.memory_bytes


def _set(resources: Resources, resource: str, value: int) -> Resources:
    if resource == CPU:
        return replace(resources, cpu_millicores=value)
    return replace(resources, memory_bytes=value)


def _total(values: Iterable[Resources], resource: str) -> int:
    return sum(v for v in (_get(r, resource) for r in values) if v is not None)


def _kept(node: NodeView, totals: dict[str, int]) -> float:
    kept = 0.0
    for resource, total in totals.items():
        allocatable = _get(Resources(node.cpu_millicores, node.memory_bytes), resource)
        if total <= 0 or allocatable is None or allocatable >= total:
            kept += 1.0
        else:
            kept += allocatable / total
    return kept


def _scaled(values: Sequence[Resources], resource: str, allocatable: int) -> list[Resources]:
    total = _total(values, resource)
    if total <= allocatable:
        return list(values)
    out = []
    for value in values:
        amount = _get(value, resource)
        out.append(value if amount is None else _set(value, resource, amount * allocatable // total))
    return out


def largest_node(nodes: Iterable[NodeView], totals: dict[str, int]) -> NodeView | None:
    """The schedulable node with known allocatable that keeps most of a pod with these totals."""
    best: tuple[float, int, int, str] | None = None
    chosen: NodeView | None = None
    for node in nodes:
        if not node.schedulable or (node.cpu_millicores is None and node.memory_bytes is None):
            continue
        # Higher is better on every key but the name, where the smaller wins.
        key = (_kept(node, totals), node.memory_bytes or 0, node.cpu_millicores or 0, node.name)
        if best is None or key[:3] > best[:3] or (key[:3] == best[:3] and key[3] < best[3]):
            best, chosen = key, node
    return chosen


def cap_to_largest_node(recommendation: Recommendation,
                        nodes: Iterable[NodeView]) -> tuple[Recommendation, NodeCap | None]:
    """The recommendation capped to the largest schedulable node, and what was capped (None: nothing)."""
    containers = recommendation.containers
    targets = [c.target for c in containers]
    totals = {resource: _total(targets, resource) for resource in (CPU, MEMORY)}
    node = largest_node(nodes, totals)
    if node is None or not containers:
        return recommendation, None
    node_resources = Resources(node.cpu_millicores, node.memory_bytes)
    caps = []
    uppers = [c.upper_bound for c in containers]
    for resource in (CPU, MEMORY):
        allocatable = _get(node_resources, resource)
        if allocatable is None or totals[resource] <= allocatable:
            continue
        targets = _scaled(targets, resource, allocatable)
        uppers = _scaled(uppers, resource, allocatable)
        caps.append(ResourceCap(resource, totals[resource], _total(targets, resource)))
    if not caps:
        return recommendation, None
    capped: list[RecommendedContainerResources] = []
    for item, target, upper in zip(containers, targets, uppers, strict=True):
        lower = item.lower_bound
        for cap in caps:
            new_target = _get(target, cap.resource)
            if new_target is None:
                continue
            low, up = _get(lower, cap.resource), _get(upper, cap.resource)
            if low is not None and low > new_target:
                lower = _set(lower, cap.resource, new_target)
            if up is not None and up < new_target:
                upper = _set(upper, cap.resource, new_target)
        capped.append(replace(item, target=target, lower_bound=lower, upper_bound=upper))
    return Recommendation(tuple(capped)), NodeCap(node.name, tuple(caps))
