"""Raw API JSON → model views, and model status → JSON for writers: the edge where dicts stop.

Owns: `pod_from_dict` (a trimmed `PodView` that keeps only what vpa reads), `vpa_from_dict` (a full
`VpaView`), `event_from_dict` (an `EventView` with the eviction annotations), the selectors of
workloads and scale subresources, `vpa_status_to_dict` /
`recommendation_to_dict` for the status writer, `ConversionError` (names the offending field, e.g.
`spec.resourcePolicy.containerPolicies[1].minAllowed.cpu`), and `Interner`, the content-keyed cache that
makes identical pieces of different pods one object (label maps, owners, container specs, `Resources`,
parsed quantities), which is what keeps a cached pod under 2 KiB.

Timestamps become Unix seconds (float). Quantities become exact integers through `Resources`.

Must not: do I/O, log, decide anything, or import `vpa.logic`. A malformed object raises ConversionError;
whether to skip it is the caller's decision (caches skip it and count it, they never crash on it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, TypeVar

from vpa.model import annotations as ann
from vpa.model import quantity
from vpa.model.event import EventView
from vpa.model.pod import ContainerStatusView, ContainerView, OwnerRef, PodCondition, PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.selector import Selector, SelectorError
from vpa.model.vpa import (
    Condition,
    ContainerResourcePolicy,
    ContainerScalingMode,
    ControlledValues,
    EvictionRequirement,
    Recommendation,
    RecommendedContainerResources,
    ResourcePolicy,
    StartupBoost,
    TargetRef,
    UpdateMode,
    UpdatePolicy,
    VpaStatus,
    VpaView,
)

_E = TypeVar("_E")
LAST_APPLIED_CONFIGURATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
_EMPTY_MAP: Final[Mapping[str, str]] = MappingProxyType({})
_NO_RESOURCES: Final = Resources()
_MILLI_NANOS: Final = 10**6
_UNIT_NANOS: Final = 10**9


class ConversionError(ValueError):
    """A raw object that does not convert. `field` is the JSON path of the culprit (`spec.targetRef`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


# --- sharing identical pieces -----------------------------------------------------------------------------


class Interner:
    """Content-keyed sharing of immutable view pieces across objects.

    Replicas of one workload have the same labels (but the pod name), owner, container specs and
    resources; one shared object each saves most of a pod view's memory. The tables are bounded: when
    they hold `max_entries` in total they are cleared (already-built views keep their objects; later ones
    share anew), so label churn from many rollouts cannot grow them without end.

    Not thread-safe; each event loop (or test) may use its own, or the module's `DEFAULT_INTERNER`.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._quantities: dict[tuple[str, str], int] = {}
        self._resources: dict[tuple[int | None, int | None], Resources] = {}
        self._raw_resources: dict[tuple[str | None, str | None], Resources] = {}
        self._maps: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
        self._owners: dict[tuple[str, str, str, str, bool], OwnerRef] = {}
        self._containers: dict[tuple[object, ...], ContainerView] = {}
        self._container_tuples: dict[tuple[object, ...], tuple[ContainerView, ...]] = {}
        # Not the interpreter's table of interned strings (`sys.intern`), which also holds every identifier of
        # the modules imported and is never cleared: a table of our own is bounded with the rest (`clear`).
        self._texts: dict[str, str] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def clear(self) -> None:
        tables: tuple[dict[Any, Any], ...] = (
            self._quantities,
            self._resources,
            self._raw_resources,
            self._maps,
            self._owners,
            self._containers,
            self._container_tuples,
            self._texts,
        )
        for table in tables:
            table.clear()
        self._size = 0

    def _added(self) -> None:
        self._size += 1
        if self._size > self.max_entries:
            self.clear()

    def text(self, value: str) -> str:
        """One shared copy of a string that recurs across objects of many workloads (an owner's name and
        uid, a label's value, a `generateName`): what `sys.intern` would share, in this interner's own
        table rather than in the interpreter's one table of interned strings."""
        table = self._texts
        shared = table.get(value)
        if shared is None:
            shared = table[value] = value
            self._added()
        return shared

    def quantity(self, resource: str, text: str) -> int:
        """Millicores for `cpu`, bytes for anything else; raises QuantityError."""
        key = (resource, text)
        value = self._quantities.get(key)
        if value is None:
            parsed = quantity.Quantity.parse(text)
            value = parsed.millis if resource == CPU else parsed.value
            self._quantities[key] = value
            self._added()
        return value

    def known_resources(self, raw: tuple[str | None, str | None]) -> Resources | None:
        """The Resources already converted from this raw (cpu, memory) pair of strings, if any."""
        return self._raw_resources.get(raw)

    def remember_resources(self, raw: tuple[str | None, str | None], resources: Resources) -> None:
        self._raw_resources[raw] = resources
        self._added()

    def resources(self, cpu_millicores: int | None, memory_bytes: int | None) -> Resources:
        if cpu_millicores is None and memory_bytes is None:
            return _NO_RESOURCES
        key = (cpu_millicores, memory_bytes)
        shared = self._resources.get(key)
        if shared is None:
            shared = self._resources[key] = Resources(cpu_millicores, memory_bytes)
            self._added()
        return shared

    def string_map(self, items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
        """A shared read-only-by-contract dict for these (already interned) items, in this order."""
        if not items:
            return _EMPTY_MAP
        shared = self._maps.get(items)
        if shared is None:
            shared = self._maps[items] = dict(items)
            self._added()
        return shared

    def owner(self, api_version: str, kind: str, name: str, uid: str, controller: bool) -> OwnerRef:
        key = (api_version, kind, name, uid, controller)
        shared = self._owners.get(key)
        if shared is None:
            shared = self._owners[key] = OwnerRef(
                sys.intern(api_version), sys.intern(kind), self.text(name), self.text(uid), controller
            )
            self._added()
        return shared

    def find_container(self, key: tuple[object, ...]) -> ContainerView | None:
        return self._containers.get(key)

    def add_container(self, key: tuple[object, ...], view: ContainerView) -> ContainerView:
        self._containers[key] = view
        self._added()
        return view

    def containers(
        self, key: tuple[object, ...], views: tuple[ContainerView, ...]
    ) -> tuple[ContainerView, ...]:
        if not views:
            return ()
        shared = self._container_tuples.get(key)
        if shared is None:
            shared = self._container_tuples[key] = views
            self._added()
        return shared


DEFAULT_INTERNER: Final = Interner()
"""Shared by every conversion that is not given its own interner. Like `sys.intern`, a cache, not state
anything depends on: clearing it changes memory use, never results."""


# --- small typed readers ----------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _map(value: object, field: str) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the ABC check's cost
        return value
    if value is None:
        return _EMPTY_MAP
    if not isinstance(value, Mapping):
        raise ConversionError(field, f"expected an object, got {_type_name(value)}")
    return value


def _list(value: object, field: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConversionError(field, f"expected a list, got {_type_name(value)}")
    return value


def _str(value: object, field: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConversionError(field, f"expected a string, got {_type_name(value)}")
    return value


def _required_str(value: object, field: str) -> str:
    if value is None:
        raise ConversionError(field, "is required")
    return _str(value, field)


def _optional_str(value: object, field: str) -> str | None:
    return None if value is None else _str(value, field)


def _int(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversionError(field, f"expected an integer, got {_type_name(value)}")
    return value


def _bool(value: object, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConversionError(field, f"expected a boolean, got {_type_name(value)}")
    return value


def _enum(value: object, field: str, enum_type: type[_E]) -> _E | None:
    text = _str(value, field)
    if value is None or text == "":
        return None
    try:
        return enum_type(text)  # type: ignore[call-arg]
    except ValueError:
        accepted = ", ".join(str(member) for member in enum_type)  # type: ignore[attr-defined]
        raise ConversionError(field, f"unknown value {text!r} (expected one of {accepted})") from None


def parse_time(value: str) -> float:
    """RFC3339 (`2026-01-01T00:00:00Z`, fractional seconds and offsets allowed) → Unix seconds.

    Raises ValueError for anything else.
    """
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def format_time(timestamp: float) -> str:
    """Unix seconds → RFC3339 in UTC with whole seconds, as `metav1.Time` serialises."""
    return datetime.fromtimestamp(int(timestamp), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: object, field: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConversionError(field, f"expected an RFC3339 timestamp string, got {_type_name(value)}")
    try:
        return parse_time(value)
    except ValueError:
        raise ConversionError(field, f"{value!r} is not an RFC3339 timestamp") from None


def _lenient_time(value: object) -> float | None:
    """A timestamp only `vpa report` reads: one that does not parse is treated as absent, so it never
    costs the recommender an eviction event."""
    try:
        return _time(value, "") if value else None
    except ConversionError:
        return None


def _quantity_text(value: object, field: str) -> str:
    # int-or-string: JSON numbers are quantities too (`cpu: 2`).
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ConversionError(field, f"expected a quantity, got {_type_name(value)}")


def _resources(value: object, field: str, interner: Interner) -> Resources:
    """A ResourceList (only cpu and memory are kept) → shared Resources. Bad quantities name the field."""
    if value is None:
        return _NO_RESOURCES
    resource_list = _map(value, field)
    cpu_raw = resource_list.get(CPU)
    memory_raw = resource_list.get(MEMORY)
    # Fast path: the same pair of strings was converted before (replicas; status equal to spec). Only
    # strings: JSON numbers and booleans must not alias (`True == 1`) and go the checked way.
    raw_key: tuple[str | None, str | None] | None = None
    if (cpu_raw is None or type(cpu_raw) is str) and (memory_raw is None or type(memory_raw) is str):
        raw_key = (cpu_raw, memory_raw)
        known = interner.known_resources(raw_key)
        if known is not None:
            return known
    cpu = memory = None
    try:
        if cpu_raw is not None:
            cpu = interner.quantity(CPU, _quantity_text(cpu_raw, f"{field}.cpu"))
    except quantity.QuantityError as err:
        raise ConversionError(f"{field}.cpu", str(err)) from None
    try:
        if memory_raw is not None:
            memory = interner.quantity(MEMORY, _quantity_text(memory_raw, f"{field}.memory"))
    except quantity.QuantityError as err:
        raise ConversionError(f"{field}.memory", str(err)) from None
    resources = interner.resources(cpu, memory)
    if raw_key is not None:
        interner.remember_resources(raw_key, resources)
    return resources


def _optional_resources(value: object, field: str, interner: Interner) -> Resources | None:
    return None if value is None else _resources(value, field, interner)


def _string_map(
    value: object, field: str, interner: Interner | None, keep: Callable[[str], bool] | None = None
) -> Mapping[str, str]:
    """A label or annotation map. With an interner, strings and the map itself are shared; without one,
    a fresh dict is returned. `keep` filters keys."""
    raw = _map(value, field)
    if not raw:
        return _EMPTY_MAP if interner is not None else {}
    items: list[tuple[str, str]] = []
    # Label values recur per workload: the interner's tables, not the interpreter's, when there is one.
    share: Callable[[str], str] = sys.intern if interner is None else interner.text
    for key, item in raw.items():
        if keep is not None and not keep(key):
            continue
        if not isinstance(item, str):
            raise ConversionError(f"{field}[{key!r}]", f"expected a string, got {_type_name(item)}")
        items.append((share(key), share(item) if len(item) <= 64 else item))
    if interner is None:
        return dict(items)
    return interner.string_map(tuple(items))


# --- events -----------------------------------------------------------------------------------------------

# The annotations the recommender reads of eviction events; the rest are not kept.
_EVENT_ANNOTATIONS: Final = frozenset(
    {"offending_containers", "offending_containers_usage", "starved_resource"}
)


def event_from_dict(obj: Mapping[str, Any]) -> EventView:
    """A core/v1 Event → `EventView` with the eviction annotations only."""
    metadata = _map(obj.get("metadata"), "metadata")
    involved = _map(obj.get("involvedObject"), "involvedObject")
    annotations = _string_map(metadata.get("annotations"), "metadata.annotations", None,
                              keep=_EVENT_ANNOTATIONS.__contains__)
    return EventView(
        namespace=_str(metadata.get("namespace"), "metadata.namespace"),
        name=_required_str(metadata.get("name"), "metadata.name"),
        uid=_str(metadata.get("uid"), "metadata.uid"),
        resource_version=_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        reason=_str(obj.get("reason"), "reason"),
        involved_kind=_str(involved.get("kind"), "involvedObject.kind"),
        involved_namespace=_str(involved.get("namespace"), "involvedObject.namespace"),
        involved_name=_str(involved.get("name"), "involvedObject.name"),
        creation_timestamp=_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        annotations=tuple(sorted(annotations.items())),
        message=obj["message"] if isinstance(obj.get("message"), str) else "",
        event_type=obj["type"] if isinstance(obj.get("type"), str) else "",
        last_timestamp=_lenient_time(obj.get("lastTimestamp")) or _lenient_time(obj.get("eventTime")),
    )


# --- pods -------------------------------------------------------------------------------------------------


def pod_from_dict(obj: Mapping[str, Any], *, interner: Interner | None = None) -> PodView:
    """A pod object (as listed, watched or admitted) → its trimmed view.

    Keeps: identity, labels, the annotations vpa reads, the controller owner, node, phase, QoS class,
    container and init-container specs (resources, resize and restart policy), their statuses, the
    `Ready` / `PodResizePending` / `PodResizeInProgress` conditions, legacy `status.resize`, and times.
    Raises ConversionError naming the field when a kept field has the wrong type or a bad quantity.
    """
    it = interner if interner is not None else DEFAULT_INTERNER
    if not isinstance(obj, Mapping):
        raise ConversionError("<pod>", f"expected an object, got {_type_name(obj)}")
    metadata = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")

    owner: OwnerRef | None = None
    for index, raw_owner in enumerate(_list(metadata.get("ownerReferences"), "metadata.ownerReferences")):
        where = f"metadata.ownerReferences[{index}]"
        raw_owner = _map(raw_owner, where)
        if _bool(raw_owner.get("controller"), f"{where}.controller"):
            owner = it.owner(
                _str(raw_owner.get("apiVersion"), f"{where}.apiVersion"),
                _str(raw_owner.get("kind"), f"{where}.kind"),
                _str(raw_owner.get("name"), f"{where}.name"),
                _str(raw_owner.get("uid"), f"{where}.uid"),
                True,
            )
            break

    conditions: list[PodCondition] = []
    for index, raw_condition in enumerate(_list(status.get("conditions"), "status.conditions")):
        where = f"status.conditions[{index}]"
        raw_condition = _map(raw_condition, where)
        condition_type = raw_condition.get("type")
        if condition_type not in (ann.POD_READY, ann.POD_RESIZE_PENDING, ann.POD_RESIZE_IN_PROGRESS):
            continue
        condition = PodCondition(
            sys.intern(condition_type),
            sys.intern(_str(raw_condition.get("status"), f"{where}.status")),
            sys.intern(_str(raw_condition.get("reason"), f"{where}.reason")),
            _str(raw_condition.get("message"), f"{where}.message"),
            _time(raw_condition.get("lastTransitionTime"), f"{where}.lastTransitionTime"),
        )
        conditions.append(condition)

    pod_resources = _map(spec.get("resources"), "spec.resources")
    return PodView(
        namespace=sys.intern(_str(metadata.get("namespace"), "metadata.namespace")),
        name=_str(metadata.get("name"), "metadata.name"),
        uid=_str(metadata.get("uid"), "metadata.uid"),
        resource_version=_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        labels=_string_map(metadata.get("labels"), "metadata.labels", it),
        annotations=_string_map(
            metadata.get("annotations"), "metadata.annotations", it, keep=ann.is_read_pod_annotation
        ),
        owner=owner,
        node_name=sys.intern(_str(spec.get("nodeName"), "spec.nodeName")),
        phase=sys.intern(_str(status.get("phase"), "status.phase")),
        qos_class=sys.intern(_str(status.get("qosClass"), "status.qosClass")),
        containers=_containers(spec.get("containers"), "spec.containers", it),
        init_containers=_containers(spec.get("initContainers"), "spec.initContainers", it),
        container_statuses=_statuses(status.get("containerStatuses"), "status.containerStatuses", it),
        init_container_statuses=_statuses(
            status.get("initContainerStatuses"), "status.initContainerStatuses", it
        ),
        conditions=tuple(conditions),
        resize_status=_interned_or_none(_optional_str(status.get("resize"), "status.resize")),
        creation_timestamp=_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        start_time=_time(status.get("startTime"), "status.startTime"),
        deletion_timestamp=_time(metadata.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        generation=_int(metadata.get("generation"), "metadata.generation"),
        observed_generation=_int(status.get("observedGeneration"), "status.observedGeneration"),
        generate_name=it.text(_str(metadata.get("generateName"), "metadata.generateName")),
        has_pod_level_resources=bool(pod_resources),
        pod_requests=_resources(pod_resources.get("requests"), "spec.resources.requests", it),
        pod_limits=_resources(pod_resources.get("limits"), "spec.resources.limits", it),
    )


def _interned_or_none(value: str | None) -> str | None:
    return None if value is None else sys.intern(value)


def _containers(value: object, field: str, it: Interner) -> tuple[ContainerView, ...]:
    raw_containers = _list(value, field)
    if not raw_containers:
        return ()
    views: list[ContainerView] = []
    keys: list[tuple[object, ...]] = []
    for index, raw in enumerate(raw_containers):
        where = f"{field}[{index}]"
        raw = _map(raw, where)
        name = sys.intern(_required_str(raw.get("name"), f"{where}.name"))
        resources = _map(raw.get("resources"), f"{where}.resources")
        raw_requests = resources.get("requests")
        raw_limits = resources.get("limits")
        requests = _resources(raw_requests, f"{where}.resources.requests", it)
        limits = _resources(raw_limits, f"{where}.resources.limits", it)
        policy_items: list[tuple[str, str]] = []
        for policy_index, raw_policy in enumerate(_list(raw.get("resizePolicy"), f"{where}.resizePolicy")):
            policy_where = f"{where}.resizePolicy[{policy_index}]"
            raw_policy = _map(raw_policy, policy_where)
            policy_items.append(
                (
                    sys.intern(_required_str(raw_policy.get("resourceName"), f"{policy_where}.resourceName")),
                    sys.intern(
                        _required_str(raw_policy.get("restartPolicy"), f"{policy_where}.restartPolicy")
                    ),
                )
            )
        resize_items = tuple(policy_items)
        restart_policy = _interned_or_none(_optional_str(raw.get("restartPolicy"), f"{where}.restartPolicy"))
        has_resources = raw_requests is not None or raw_limits is not None
        key = (name, requests, limits, resize_items, restart_policy, has_resources)
        view = it.find_container(key)
        if view is None:
            view = it.add_container(
                key,
                ContainerView(
                    name=name,
                    requests=requests,
                    limits=limits,
                    resize_policy=it.string_map(resize_items),
                    restart_policy=restart_policy,
                    has_resources=has_resources,
                ),
            )
        views.append(view)
        keys.append(key)
    return it.containers(tuple(keys), tuple(views))


def _statuses(value: object, field: str, it: Interner) -> tuple[ContainerStatusView, ...]:
    raw_statuses = _list(value, field)
    if not raw_statuses:
        return ()
    views: list[ContainerStatusView] = []
    for index, raw in enumerate(raw_statuses):
        where = f"{field}[{index}]"
        raw = _map(raw, where)
        state_name, started_at, state_reason, state_finished_at = _state(raw.get("state"), f"{where}.state")
        last_state = _map(raw.get("lastState"), f"{where}.lastState")
        last_terminated = _map(last_state.get("terminated"), f"{where}.lastState.terminated")
        last_where = f"{where}.lastState.terminated"
        resources = _map(raw.get("resources"), f"{where}.resources")
        views.append(
            ContainerStatusView(
                name=sys.intern(_required_str(raw.get("name"), f"{where}.name")),
                ready=_bool(raw.get("ready"), f"{where}.ready"),
                restart_count=_int(raw.get("restartCount"), f"{where}.restartCount") or 0,
                state=state_name,
                started_at=started_at,
                state_reason=state_reason,
                state_finished_at=state_finished_at,
                last_terminated_reason=_interned_or_none(
                    _optional_str(last_terminated.get("reason"), f"{last_where}.reason")
                ),
                last_terminated_started_at=_time(last_terminated.get("startedAt"), f"{last_where}.startedAt"),
                last_terminated_at=_time(last_terminated.get("finishedAt"), f"{last_where}.finishedAt"),
                allocated=_optional_resources(
                    raw.get("allocatedResources"), f"{where}.allocatedResources", it
                ),
                actual_requests=_optional_resources(
                    resources.get("requests"), f"{where}.resources.requests", it
                ),
                actual_limits=_optional_resources(resources.get("limits"), f"{where}.resources.limits", it),
            )
        )
    return tuple(views)


def _state(value: object, field: str) -> tuple[str, float | None, str | None, float | None]:
    """(state name, startedAt, reason, finishedAt) of a ContainerState."""
    state = _map(value, field)
    running = state.get("running")
    if running is not None:
        running = _map(running, f"{field}.running")
        return "running", _time(running.get("startedAt"), f"{field}.running.startedAt"), None, None
    terminated = state.get("terminated")
    if terminated is not None:
        where = f"{field}.terminated"
        terminated = _map(terminated, where)
        return (
            "terminated",
            _time(terminated.get("startedAt"), f"{where}.startedAt"),
            _interned_or_none(_optional_str(terminated.get("reason"), f"{where}.reason")),
            _time(terminated.get("finishedAt"), f"{where}.finishedAt"),
        )
    waiting = state.get("waiting")
    if waiting is not None:
        where = f"{field}.waiting"
        waiting = _map(waiting, where)
        return (
            "waiting",
            None,
            _interned_or_none(_optional_str(waiting.get("reason"), f"{where}.reason")),
            None,
        )
    return "", None, None, None


# --- VPAs -------------------------------------------------------------------------------------------------


def vpa_from_dict(obj: Mapping[str, Any], *, require_target_ref: bool = True) -> VpaView:
    """A VerticalPodAutoscaler object → VpaView.

    Raises ConversionError naming the field for wrong types, unknown enum values and bad quantities.
    `spec.targetRef` is required (the CRD requires it); pass `require_target_ref=False` to accept its
    absence (`target_ref=None`), e.g. when validating an admission request that reports it itself.
    Quantities that are not whole millicores (CPU) or bytes (memory) are rounded up as upstream does and
    listed in `fractional_quantity_fields` for admission validation.
    """
    if not isinstance(obj, Mapping):
        raise ConversionError("<vpa>", f"expected an object, got {_type_name(obj)}")
    metadata = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    fractional: list[str] = []

    raw_target = spec.get("targetRef")
    target_ref: TargetRef | None = None
    if raw_target is None:
        if require_target_ref:
            raise ConversionError("spec.targetRef", "is required")
    else:
        target = _map(raw_target, "spec.targetRef")
        target_ref = TargetRef(
            api_version=sys.intern(_str(target.get("apiVersion"), "spec.targetRef.apiVersion")),
            kind=sys.intern(_required_str(target.get("kind"), "spec.targetRef.kind")),
            name=_required_str(target.get("name"), "spec.targetRef.name"),
        )

    raw_update_policy = spec.get("updatePolicy")
    update_policy = _update_policy(_map(raw_update_policy, "spec.updatePolicy"))

    raw_resource_policy = _map(spec.get("resourcePolicy"), "spec.resourcePolicy")
    policies = tuple(
        _container_policy(
            _map(raw, f"spec.resourcePolicy.containerPolicies[{i}]"),
            f"spec.resourcePolicy.containerPolicies[{i}]",
            fractional,
        )
        for i, raw in enumerate(
            _list(raw_resource_policy.get("containerPolicies"), "spec.resourcePolicy.containerPolicies")
        )
    )

    recommenders = tuple(
        _required_str(_map(raw, f"spec.recommenders[{i}]").get("name"), f"spec.recommenders[{i}].name")
        for i, raw in enumerate(_list(spec.get("recommenders"), "spec.recommenders"))
    )

    return VpaView(
        namespace=sys.intern(_str(metadata.get("namespace"), "metadata.namespace")),
        name=_required_str(metadata.get("name"), "metadata.name"),
        uid=_str(metadata.get("uid"), "metadata.uid"),
        generation=_int(metadata.get("generation"), "metadata.generation") or 0,
        resource_version=_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        labels=_string_map(metadata.get("labels"), "metadata.labels", None),
        annotations=_string_map(
            metadata.get("annotations"), "metadata.annotations", None, keep=_keep_vpa_annotation
        ),
        target_ref=target_ref,
        update_policy=update_policy,
        resource_policy=ResourcePolicy(policies),
        recommenders=recommenders,
        startup_boost=_startup_boost(spec.get("startupBoost"), "spec.startupBoost", fractional),
        status=vpa_status_from_dict(obj.get("status")),
        creation_timestamp=_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        deletion_timestamp=_time(metadata.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        update_policy_set=raw_update_policy is not None,
        fractional_quantity_fields=tuple(fractional),
    )


def _keep_vpa_annotation(key: str) -> bool:
    # kubectl's copy of the whole object can be kilobytes; nothing reads it.
    return key != LAST_APPLIED_CONFIGURATION


def _update_policy(raw: Mapping[str, Any]) -> UpdatePolicy:
    mode_text = _str(raw.get("updateMode"), "spec.updatePolicy.updateMode")
    mode: UpdateMode | None = None
    if mode_text:
        try:
            mode = UpdateMode.parse(mode_text)
        except ValueError as err:
            raise ConversionError("spec.updatePolicy.updateMode", str(err)) from None
    requirements: list[EvictionRequirement] = []
    field = "spec.updatePolicy.evictionRequirements"
    for index, raw_requirement in enumerate(_list(raw.get("evictionRequirements"), field)):
        where = f"{field}[{index}]"
        raw_requirement = _map(raw_requirement, where)
        resources = tuple(
            sys.intern(_str(resource, f"{where}.resources[{i}]"))
            for i, resource in enumerate(_list(raw_requirement.get("resources"), f"{where}.resources"))
        )
        requirements.append(
            EvictionRequirement(
                resources=resources,
                change_requirement=_str(
                    raw_requirement.get("changeRequirement"), f"{where}.changeRequirement"
                ),
            )
        )
    return UpdatePolicy(
        update_mode=mode,
        min_replicas=_int(raw.get("minReplicas"), "spec.updatePolicy.minReplicas"),
        eviction_requirements=tuple(requirements),
        evict_after_oom_s=_int(raw.get("evictAfterOOMSeconds"), "spec.updatePolicy.evictAfterOOMSeconds"),
    )


def _exact_resources(value: object, field: str, fractional: list[str]) -> Resources:
    """Like `_resources`, but notes quantities that are not whole millicores / bytes."""
    if value is None:
        return _NO_RESOURCES
    resource_list = _map(value, field)
    amounts: dict[str, int | None] = {CPU: None, MEMORY: None}
    for resource, unit_nanos in ((CPU, _MILLI_NANOS), (MEMORY, _UNIT_NANOS)):
        raw = resource_list.get(resource)
        if raw is None:
            continue
        where = f"{field}.{resource}"
        try:
            parsed = quantity.Quantity.parse(_quantity_text(raw, where))
        except quantity.QuantityError as err:
            raise ConversionError(where, str(err)) from None
        if parsed.nanos % unit_nanos:
            fractional.append(where)
        amounts[resource] = parsed.millis if resource == CPU else parsed.value
    return Resources(amounts[CPU], amounts[MEMORY])


def _container_policy(raw: Mapping[str, Any], where: str, fractional: list[str]) -> ContainerResourcePolicy:
    controlled_raw = raw.get("controlledResources")
    controlled: tuple[str, ...] | None = None
    if controlled_raw is not None:
        controlled = tuple(
            sys.intern(_str(resource, f"{where}.controlledResources[{i}]"))
            for i, resource in enumerate(_list(controlled_raw, f"{where}.controlledResources"))
        )
    ratio: float | None = None
    raw_ratio = raw.get("oomBumpUpRatio")
    if raw_ratio is not None:
        try:
            ratio = float(
                quantity.Quantity.parse(_quantity_text(raw_ratio, f"{where}.oomBumpUpRatio")).as_fraction()
            )
        except quantity.QuantityError as err:
            raise ConversionError(f"{where}.oomBumpUpRatio", str(err)) from None
    min_bump: int | None = None
    raw_min_bump = raw.get("oomMinBumpUp")
    if raw_min_bump is not None:
        try:
            min_bump = quantity.Quantity.parse(_quantity_text(raw_min_bump, f"{where}.oomMinBumpUp")).value
        except quantity.QuantityError as err:
            raise ConversionError(f"{where}.oomMinBumpUp", str(err)) from None
    return ContainerResourcePolicy(
        container_name=sys.intern(_str(raw.get("containerName"), f"{where}.containerName")),
        mode=_enum(raw.get("mode"), f"{where}.mode", ContainerScalingMode),
        min_allowed=_exact_resources(raw.get("minAllowed"), f"{where}.minAllowed", fractional),
        max_allowed=_exact_resources(raw.get("maxAllowed"), f"{where}.maxAllowed", fractional),
        controlled_resources=controlled,
        controlled_values=_enum(raw.get("controlledValues"), f"{where}.controlledValues", ControlledValues),
        oom_bump_up_ratio=ratio,
        oom_min_bump_up_bytes=min_bump,
        memory_aggregation_interval_s=_int(
            raw.get("memoryAggregationIntervalSeconds"), f"{where}.memoryAggregationIntervalSeconds"
        ),
        memory_aggregation_interval_count=_int(
            raw.get("memoryAggregationIntervalCount"), f"{where}.memoryAggregationIntervalCount"
        ),
        startup_boost=_startup_boost(raw.get("startupBoost"), f"{where}.startupBoost", fractional),
    )


def _startup_boost(value: object, field: str, fractional: list[str]) -> StartupBoost | None:
    if value is None:
        return None
    raw_cpu = _map(value, field).get("cpu")
    if raw_cpu is None:
        return None
    where = f"{field}.cpu"
    cpu = _map(raw_cpu, where)
    quantity_millicores: int | None = None
    raw_quantity = cpu.get("quantity")
    if raw_quantity is not None:
        try:
            parsed = quantity.Quantity.parse(_quantity_text(raw_quantity, f"{where}.quantity"))
        except quantity.QuantityError as err:
            raise ConversionError(f"{where}.quantity", str(err)) from None
        if parsed.nanos % _MILLI_NANOS:
            fractional.append(f"{where}.quantity")
        quantity_millicores = parsed.millis
    return StartupBoost(
        type=sys.intern(_str(cpu.get("type"), f"{where}.type")),
        factor=_int(cpu.get("factor"), f"{where}.factor"),
        quantity_millicores=quantity_millicores,
        duration_s=_int(cpu.get("durationSeconds"), f"{where}.durationSeconds") or 0,
    )


def vpa_status_from_dict(value: object, field: str = "status") -> VpaStatus:
    """`status` of a VPA → VpaStatus (empty when absent)."""
    if value is None:
        return VpaStatus()
    raw = _map(value, field)
    recommendation: Recommendation | None = None
    raw_recommendation = raw.get("recommendation")
    if raw_recommendation is not None:
        rec_field = f"{field}.recommendation.containerRecommendations"
        it = DEFAULT_INTERNER
        containers: list[RecommendedContainerResources] = []
        for index, entry in enumerate(
            _list(
                _map(raw_recommendation, f"{field}.recommendation").get("containerRecommendations"), rec_field
            )
        ):
            where = f"{rec_field}[{index}]"
            entry = _map(entry, where)
            containers.append(
                RecommendedContainerResources(
                    container_name=sys.intern(_str(entry.get("containerName"), f"{where}.containerName")),
                    target=_resources(entry.get("target"), f"{where}.target", it),
                    lower_bound=_resources(entry.get("lowerBound"), f"{where}.lowerBound", it),
                    upper_bound=_resources(entry.get("upperBound"), f"{where}.upperBound", it),
                    uncapped_target=_resources(entry.get("uncappedTarget"), f"{where}.uncappedTarget", it),
                )
            )
        recommendation = Recommendation(tuple(containers))
    conditions: list[Condition] = []
    for index, entry in enumerate(_list(raw.get("conditions"), f"{field}.conditions")):
        where = f"{field}.conditions[{index}]"
        entry = _map(entry, where)
        conditions.append(
            Condition(
                type=sys.intern(_required_str(entry.get("type"), f"{where}.type")),
                status=sys.intern(_str(entry.get("status"), f"{where}.status")),
                last_transition_time=_time(entry.get("lastTransitionTime"), f"{where}.lastTransitionTime"),
                reason=_str(entry.get("reason"), f"{where}.reason"),
                message=_str(entry.get("message"), f"{where}.message"),
            )
        )
    return VpaStatus(
        recommendation=recommendation,
        conditions=tuple(conditions),
        observed_generation=_int(raw.get("observedGeneration"), f"{field}.observedGeneration"),
    )


# --- writers ----------------------------------------------------------------------------------------------


def recommendation_to_dict(recommendation: Recommendation) -> dict[str, Any]:
    """`status.recommendation` JSON with canonical quantities (`25m`, `262144k`), empty bounds omitted."""
    entries: list[dict[str, Any]] = []
    for container in recommendation.containers:
        entry: dict[str, Any] = {
            "containerName": container.container_name,
            "target": container.target.to_resource_list(),
        }
        for key, resources in (
            ("lowerBound", container.lower_bound),
            ("upperBound", container.upper_bound),
            ("uncappedTarget", container.uncapped_target),
        ):
            if not resources.is_empty():
                entry[key] = resources.to_resource_list()
        entries.append(entry)
    return {"containerRecommendations": entries}


def condition_to_dict(condition: Condition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": condition.type, "status": condition.status}
    if condition.last_transition_time is not None:
        out["lastTransitionTime"] = format_time(condition.last_transition_time)
    if condition.reason:
        out["reason"] = condition.reason
    if condition.message:
        out["message"] = condition.message
    return out


def vpa_status_to_dict(status: VpaStatus, *, explicit_nulls: bool = True) -> dict[str, Any]:
    """The `status` JSON for a merge patch on `/status`.

    With `explicit_nulls` (default) an absent recommendation is written as `null`, so a merge patch
    removes a stale one; `conditions` is always written whole (merge patches replace lists).
    """
    out: dict[str, Any] = {}
    if status.recommendation is not None:
        out["recommendation"] = recommendation_to_dict(status.recommendation)
    elif explicit_nulls:
        out["recommendation"] = None
    out["conditions"] = [condition_to_dict(condition) for condition in status.conditions]
    if status.observed_generation is not None:
        out["observedGeneration"] = status.observed_generation
    return out


# --- selectors of targets ---------------------------------------------------------------------------------

_SPEC_SELECTOR_KINDS: Final = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"})


def selector_from_workload(obj: Mapping[str, Any]) -> Selector:
    """The pod selector of a well-known controller, as upstream's target fetcher reads it.

    Deployment, ReplicaSet, StatefulSet, DaemonSet, Job: `spec.selector` (a LabelSelector; absent →
    nothing). ReplicationController: the `spec.selector` label map. CronJob: the labels of
    `spec.jobTemplate.spec.template.metadata`. Raises ConversionError naming the field.
    """
    kind = _str(obj.get("kind"), "kind")
    spec = _map(obj.get("spec"), "spec")
    if kind in _SPEC_SELECTOR_KINDS:
        raw = spec.get("selector")
        try:
            return Selector.from_label_selector(None if raw is None else _map(raw, "spec.selector"))
        except SelectorError as err:
            raise ConversionError("spec.selector", str(err)) from None
    if kind == "ReplicationController":
        raw_map = spec.get("selector")
        if raw_map is None:
            return Selector.nothing()
        return _selector_from_map(raw_map, "spec.selector")
    if kind == "CronJob":
        field = "spec.jobTemplate.spec.template.metadata.labels"
        job_spec = _map(
            _map(spec.get("jobTemplate"), "spec.jobTemplate").get("spec"), "spec.jobTemplate.spec"
        )
        template = _map(job_spec.get("template"), "spec.jobTemplate.spec.template")
        labels = _map(template.get("metadata"), "spec.jobTemplate.spec.template.metadata").get("labels")
        return _selector_from_map(labels or {}, field)
    raise ConversionError("kind", f"{kind!r} is not a well-known controller with a pod selector")


def _selector_from_map(value: object, field: str) -> Selector:
    raw = _map(value, field)
    for key, item in raw.items():
        if not isinstance(item, str):
            raise ConversionError(f"{field}[{key!r}]", f"expected a string, got {_type_name(item)}")
    try:
        return Selector.from_match_labels(raw)
    except SelectorError as err:
        raise ConversionError(field, str(err)) from None


def selector_from_scale(obj: Mapping[str, Any]) -> Selector:
    """The pod selector of a `scale` subresource (`status.selector`, string form).

    An absent or empty selector is an error, as in upstream's fetcher ("Resource … has an empty selector").
    """
    text = _str(_map(obj.get("status"), "status").get("selector"), "status.selector")
    if not text:
        raise ConversionError("status.selector", "the scale subresource has an empty selector")
    try:
        return Selector.parse(text)
    except SelectorError as err:
        raise ConversionError("status.selector", str(err)) from None
