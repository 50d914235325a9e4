"""The node agent's records: `ContainerRun`, `PodRun` and `NodeRun`.

Owns: what the kubelet keeps per container (allocated and actual resources, restarts, termination, crash
back-off, the last in-place memory-limit decrease), per pod (node, IP, phase, its init containers' and its
pod-level allocated and actual resources, pending and in-progress resizes, its share of the node's two
sums, timers, the resourceVersion of our last write) and per node (allocatable, labels, taints, the
scheduler's and the kubelet's sums, its pods and deferred resizes, its IP).

Must not: change itself beyond memoising parsed amounts; the `NodeAgent` mixins do that.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from vpa.sim.cluster.nodeagent.common import amounts_of
from vpa.sim.cluster.runtime import Key
from vpa.sim.contracts import JsonObj


@dataclass
class PodLevelRun:
    """The pod-level `spec.resources` as allocated and as actuated (the pod cgroup)."""

    allocated: dict[str, dict[str, Any]]
    actual: dict[str, dict[str, Any]]

    def allocated_amounts(self) -> tuple[dict[str, int], dict[str, int]]:
        return amounts_of(self.allocated)

    def actual_amounts(self) -> tuple[dict[str, int], dict[str, int]]:
        return amounts_of(self.actual)


@dataclass
class ContainerRun:
    name: str
    image: str
    started_at: float
    allocated: dict[str, dict[str, Any]]
    actual: dict[str, dict[str, Any]]
    restart_count: int = 0
    last_terminated: JsonObj | None = None
    terminated: JsonObj | None = None  # set when the container exited for good
    waiting_until: float | None = None  # crash back-off
    crashes: int = 0  # consecutive crashes (for the back-off)
    # When an in-place resize last lowered the memory limit: usage before it was judged by the old limit, so
    # the OOM check never looks back past it.
    mem_limit_lowered_at: float = 0.0

    # Parsed (requests, limits) of `allocated` / `actual`, recomputed when those dicts are replaced (they are
    # never changed in place).
    _alloc_memo: tuple[Any, Any] = (None, None)
    _actual_memo: tuple[Any, Any] = (None, None)

    def allocated_amounts(self) -> tuple[dict[str, int], dict[str, int]]:
        if self._alloc_memo[0] is not self.allocated:
            self._alloc_memo = (self.allocated, amounts_of(self.allocated))
        return self._alloc_memo[1]  # type: ignore[no-any-return]

    def actual_amounts(self) -> tuple[dict[str, int], dict[str, int]]:
        if self._actual_memo[0] is not self.actual:
            self._actual_memo = (self.actual, amounts_of(self.actual))
        return self._actual_memo[1]  # type: ignore[no-any-return]

    def container_id(self, uid: str) -> str:
        digest = hashlib.sha256(f"{uid}/{self.name}/{self.restart_count}".encode()).hexdigest()
        return f"containerd://{digest}"


@dataclass
class PodRun:
    key: Key
    uid: str
    node: str
    pod_ip: str
    bound_at: float
    start_at: float
    containers: dict[str, ContainerRun] = field(default_factory=dict)
    # Init containers (native sidecars and plain ones), in spec order: only their resources and restarts are
    # tracked (they are never OOM-killed, and a plain one has completed once the pod runs).
    inits: dict[str, ContainerRun] = field(default_factory=dict)
    pod_level: PodLevelRun | None = None  # set when the pod has `spec.resources`
    phase: str = "Pending"
    pending: tuple[str, str, float, int] | None = None  # (reason, message, since, generation)
    pending_for: Any = None  # the desired resources an Infeasible verdict was about
    in_progress: tuple[str, str, float, int] | None = None  # (reason, message, since, generation)
    resize_error: str | None = None  # the last failed actuation's message, published one sync later
    actuate_at: float | None = None
    sched: tuple[int, int] = (0, 0)
    kube: tuple[int, int] = (0, 0)
    counted: bool = True
    stop_at: float | None = None
    complete_at: float | None = None
    cond_times: dict[str, tuple[str, str]] = field(default_factory=dict)
    timers: list[Any] = field(default_factory=list)
    oom_timers: dict[str, Any] = field(default_factory=dict)
    # The resourceVersion of our own last write: a watch event carrying it needs no sync unless `dirty`.
    last_rv: str | None = None
    dirty: bool = True
    # The pod's `sim.vpa.dev/usage` text the OOM kills were armed for: `kubectl annotate` re-arms them.
    usage: str | None = None


@dataclass
class NodeRun:
    name: str
    index: int
    cpu: int
    memory: int
    max_pods: int
    labels: dict[str, str]
    taints: list[JsonObj] = field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True
    sched_cpu: int = 0
    sched_mem: int = 0
    kube_cpu: int = 0
    kube_mem: int = 0
    pods: set[Key] = field(default_factory=set)
    deferred: set[Key] = field(default_factory=set)
    ip_counter: int = 0

    @property
    def ip(self) -> str:
        return f"10.0.{self.index // 250}.{self.index % 250 + 2}"
