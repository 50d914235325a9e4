"""Trimmed views of the cluster objects the VPA only looks at: Nodes and HorizontalPodAutoscalers.

Owns: `NodeView` (a Node's name, allocatable CPU and memory, labels, and whether new pods can land on it) and
`HpaView` (an autoscaling/v2 HPA's scale target and the resource metrics it scales on), both built at the
edge by `vpa.kube.neighbourwatching`.

Must not: parse API dicts, decide anything (capping is `vpa.logic.recommender.nodecaps`, conflicts
`vpa.logic.recommender.conflicts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class NodeView:
    """A Node. `schedulable` is false when `spec.unschedulable` is set or the `Ready` condition is not
    `True`: such a node does not count as room for a recreated pod."""

    name: str
    cpu_millicores: int | None
    memory_bytes: int | None
    schedulable: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    """The node's labels (AEP-10031 groups DaemonSet pods by one of them)."""


@dataclass(frozen=True, slots=True)
class HpaMetric:
    """One `spec.metrics[]` entry on a resource: `Resource` (container None: the pod's sum) or
    `ContainerResource` (one container)."""

    resource: str
    container: str | None = None


@dataclass(frozen=True, slots=True)
class HpaView:
    """A HorizontalPodAutoscaler (autoscaling/v2), reduced to what a VPA conflict needs."""

    namespace: str
    name: str
    target_kind: str
    target_name: str
    resource_metrics: tuple[HpaMetric, ...] = ()
