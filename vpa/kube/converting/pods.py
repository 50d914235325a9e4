"""Pods: `pod_from_dict`, a trimmed `PodView` that keeps only what vpa reads.

Owns: which fields of a pod are kept (identity, labels, the annotations vpa reads, the controller owner,
node, phase, QoS class, container and init-container specs and statuses, the conditions vpa reads, legacy
`status.resize`, pod-level resources, times) and sharing each piece through the `Interner`.

Must not: do I/O, log or decide anything; a malformed object raises ConversionError.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from vpa.kube.converting.interning import DEFAULT_INTERNER, Interner
from vpa.kube.converting.readers import (
    ConversionError,
    _bool,
    _int,
    _list,
    _map,
    _optional_resources,
    _optional_str,
    _required_str,
    _resources,
    _str,
    _string_map,
    _time,
    _type_name,
)
from vpa.model import annotations as ann
from vpa.model.pod import ContainerStatusView, ContainerView, OwnerRef, PodCondition, PodView

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
