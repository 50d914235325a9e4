"""Trimmed pod views: only what vpa reads of a pod, small enough to cache 50,000 of them (≤ 2 KiB each).

Owns: `OwnerRef`, `ContainerView` (spec: requests, limits, resize policy, restart policy),
`ContainerStatusView` (status: readiness, restarts, termination reasons and times for OOM detection,
allocated and actual resources), `PodCondition`, and `PodView`, plus the lookups every component repeats
(current requests with the status-then-spec fallback, the observed containers, boosted containers), and
the native-sidecar view (`with_native_sidecars`, `container_path`) through which gate `NativeSidecar` lets
the logic treat sidecars as containers, and the same view of plain init containers
(`with_plain_init_containers`) for an updater on a server that resizes them in place.

Memory rules, kept by the converter in `vpa.kube.converting`: slotted frozen dataclasses, tuples instead of
lists, interned strings, and identical `Resources`, label maps, owners and container tuples shared between
pods. `labels`, `annotations` and `resize_policy` are read-only by contract because they may be shared.

Must not: interpret resize state or decide anything (that is logic), parse raw API JSON (that is the
converter), or import anything outside the standard library and `vpa.model`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from vpa.model import annotations as ann
from vpa.model.resources import Resources

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


def _no_strings() -> Mapping[str, str]:
    return _EMPTY  # one shared empty, read-only mapping instead of a dict per view


NO_RESOURCES: Final = Resources()


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One `metadata.ownerReferences[]` entry."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


@dataclass(frozen=True, slots=True)
class ContainerView:
    """A container as specified (`spec.containers[]` / `spec.initContainers[]`): the desired resources.

    `resize_policy` maps `cpu`/`memory` to `NotRequired` or `RestartContainer` (absent = NotRequired).
    `restart_policy` is only set on init containers; `Always` marks a native sidecar.
    """

    name: str
    requests: Resources = NO_RESOURCES
    limits: Resources = NO_RESOURCES
    resize_policy: Mapping[str, str] = field(default_factory=_no_strings)
    restart_policy: str | None = None
    has_resources: bool = False
    """True when `resources.requests` or `resources.limits` is present at all (even `{}`), which decides
    whether a JSON patch must first add the empty `resources` object."""

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == ann.CONTAINER_RESTART_POLICY_ALWAYS

    def restarts_on_resize(self, resource: str) -> bool:
        return self.resize_policy.get(resource) == ann.RESIZE_POLICY_RESTART_CONTAINER


@dataclass(frozen=True, slots=True)
class ContainerStatusView:
    """`status.containerStatuses[]` (or `initContainerStatuses[]`), trimmed. Times are Unix seconds.

    `started_at` is when the current run started (`state.running.startedAt`, or `state.terminated.startedAt`).
    `state` is `running`, `waiting`, `terminated` or "" (unknown); `state_reason` and `state_finished_at`
    describe a waiting/terminated current state; `last_terminated_*` describe `lastState.terminated`
    (quick-OOM detection compares its `finishedAt − startedAt` with a threshold).
    `allocated` is `allocatedResources`; `actual_requests`/`actual_limits` are `resources.requests`/`limits`
    (what the kubelet actually configured); None means the field was absent.
    """

    name: str
    ready: bool = False
    restart_count: int = 0
    started_at: float | None = None
    last_terminated_reason: str | None = None
    last_terminated_at: float | None = None
    allocated: Resources | None = None
    actual_requests: Resources | None = None
    actual_limits: Resources | None = None
    state: str = ""
    state_reason: str | None = None
    state_finished_at: float | None = None
    last_terminated_started_at: float | None = None

    @property
    def actual(self) -> Resources | None:
        """The actually configured requests (`resources.requests`), the value vpa treats as "current"."""
        return self.actual_requests


@dataclass(frozen=True, slots=True)
class PodCondition:
    """A pod condition vpa reads (`Ready`, `PodResizePending`, `PodResizeInProgress`)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: float | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True, slots=True)
class PodView:
    """A pod as vpa's caches keep it.

    `annotations` holds only the keys vpa reads (`annotations.is_read_pod_annotation`). `owner` is the
    ownerReference with `controller: true`, if any. `resize_status` is the legacy `status.resize` string
    (clusters older than 1.33); the conditions replace it.
    """

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=_no_strings)
    annotations: Mapping[str, str] = field(default_factory=_no_strings)
    owner: OwnerRef | None = None
    node_name: str = ""
    phase: str = ""
    qos_class: str = ""
    containers: tuple[ContainerView, ...] = ()
    init_containers: tuple[ContainerView, ...] = ()
    container_statuses: tuple[ContainerStatusView, ...] = ()
    init_container_statuses: tuple[ContainerStatusView, ...] = ()
    conditions: tuple[PodCondition, ...] = ()
    """The `Ready`, `PodResizePending` and `PodResizeInProgress` conditions, in the pod's order (upstream's
    resize-status helper looks at whichever resize condition comes first)."""
    resize_status: str | None = None
    creation_timestamp: float = 0.0
    start_time: float | None = None
    deletion_timestamp: float | None = None
    generation: int | None = None
    observed_generation: int | None = None
    generate_name: str = ""
    has_pod_level_resources: bool = False
    pod_requests: Resources = NO_RESOURCES
    """Pod-level `spec.resources.requests` (cpu and memory; KEP-2837); empty when not set."""
    pod_limits: Resources = NO_RESOURCES
    """Pod-level `spec.resources.limits`; empty when not set."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, condition_type: str) -> PodCondition | None:
        for condition in self.conditions:
            if condition.type == condition_type:
                return condition
        return None

    @property
    def ready(self) -> PodCondition | None:
        """The `Ready` condition (its lastTransitionTime starts the startup-boost clock)."""
        return self.condition(ann.POD_READY)

    @property
    def resize_pending(self) -> PodCondition | None:
        return self.condition(ann.POD_RESIZE_PENDING)

    @property
    def resize_in_progress(self) -> PodCondition | None:
        return self.condition(ann.POD_RESIZE_IN_PROGRESS)

    def container(self, name: str) -> ContainerView | None:
        for container in self.containers:
            if container.name == name:
                return container
        return None

    def container_status(self, name: str) -> ContainerStatusView | None:
        for status in self.container_statuses:
            if status.name == name:
                return status
        return None

    def init_container_status(self, name: str) -> ContainerStatusView | None:
        for status in self.init_container_statuses:
            if status.name == name:
                return status
        return None

    def current_requests(self, container_name: str) -> Resources:
        """The container's requests as upstream reads them: `status.containerStatuses[].resources.requests`
        when present, else `spec.containers[].resources.requests`. Init containers are looked up too."""
        return self._current(container_name, limits=False)

    def current_limits(self, container_name: str) -> Resources:
        """As `current_requests`, for limits."""
        return self._current(container_name, limits=True)

    def _current(self, container_name: str, *, limits: bool) -> Resources:
        status = self.container_status(container_name) or self.init_container_status(container_name)
        if status is not None:
            actual = status.actual_limits if limits else status.actual_requests
            if actual is not None:
                return actual
        spec = self.container(container_name)
        if spec is None:
            spec = next((c for c in self.init_containers if c.name == container_name), None)
        if spec is None:
            return NO_RESOURCES
        return spec.limits if limits else spec.requests

    def observed_containers(self) -> tuple[str, ...] | None:
        """Names from the `vpaObservedContainers` annotation; None when absent or unparseable (then every
        container counts, as in upstream's updater)."""
        value = self.annotations.get(ann.VPA_OBSERVED_CONTAINERS)
        if value is None:
            return None
        try:
            return ann.parse_observed_containers(value)
        except ValueError:
            return None

    def boosted_containers(self) -> tuple[str, ...]:
        """Containers carrying a `vpaCpuStartupBoost/<container>` annotation."""
        return ann.boosted_containers(self.annotations)

    @property
    def is_terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def sidecars(self) -> tuple[ContainerView, ...]:
        """Init containers with `restartPolicy: Always` (native sidecars)."""
        return tuple(c for c in self.init_containers if c.is_sidecar)

    def with_native_sidecars(self) -> PodView:
        """This pod as gate `NativeSidecar` lets every component see it (AEP-8905): `containers` followed
        by the native sidecars (in `initContainers` order) and `container_statuses` followed by theirs, so
        that recommendation capping, patches, priorities and resizes treat a sidecar like a container.
        `init_containers` stays as it is; `container_path` finds a sidecar's place in the spec. The pod
        itself when it has no sidecar."""
        sidecars = self.sidecars
        if not sidecars:
            return self
        names = {c.name for c in sidecars}
        if any(c.name in names for c in self.containers):
            return self  # already extended
        statuses = tuple(s for s in self.init_container_statuses if s.name in names)
        return dataclasses.replace(
            self, containers=self.containers + sidecars, container_statuses=self.container_statuses + statuses
        )

    def with_plain_init_containers(self, names: frozenset[str]) -> PodView:
        """This pod with the plain (non-sidecar) init containers named in `names` appended to `containers`
        (and their statuses to `container_statuses`), as a server that resizes them in place (1.36+) lets
        the updater see them. The pod itself when none is named or all already are."""
        listed = {c.name for c in self.containers}
        extra = tuple(c for c in self.init_containers
                      if not c.is_sidecar and c.name in names and c.name not in listed)
        if not extra:
            return self
        extra_names = {c.name for c in extra}
        statuses = tuple(s for s in self.init_container_statuses if s.name in extra_names)
        return dataclasses.replace(
            self, containers=self.containers + extra, container_statuses=self.container_statuses + statuses
        )

    def is_plain_init_container(self, name: str) -> bool:
        """`name` is an init container without `restartPolicy: Always` (listed in `containers` or not)."""
        return any(init.name == name and not init.is_sidecar for init in self.init_containers)

    def container_path(self, index: int) -> str:
        """The JSON pointer of `containers[index]` in the pod: `/spec/containers/<index>`, or for an init
        container of an extended view (`with_native_sidecars`, `with_plain_init_containers`)
        `/spec/initContainers/<its index there>` (names are unique across both lists)."""
        container = self.containers[index]
        if self.init_containers:
            position = self.init_container_index(container.name)
            if position is not None:
                return f"/spec/initContainers/{position}"
        return f"/spec/containers/{index}"

    def init_container_index(self, name: str) -> int | None:
        """The index of init container `name` in `initContainers`, or None."""
        for position, init in enumerate(self.init_containers):
            if init.name == name:
                return position
        return None

    @property
    def plain_init_containers(self) -> tuple[ContainerView, ...]:
        """The init containers not already listed in `containers` (all of them unless extended)."""
        names = {c.name for c in self.containers}
        return tuple(c for c in self.init_containers if c.name not in names)
