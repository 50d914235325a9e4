"""The in-place side of the updater: what a resize would change, whether it restarts anything, whether it
keeps the QoS class, and the patches that apply it (AEP-4016, AEP-8818, spec §4.7, §10).

Owns:
- `compute_changes`: per considered container and controlled resource, the new request (the target) and,
  for `RequestsAndLimits`, the limit kept proportional to it (`proportional_limit`, upstream's rule in
  exact integers); only values that differ from `spec` become changes;
- disruption: a change is disruptive when its container's `resizePolicy` for that resource is
  `RestartContainer` (AEP-4016's per-resource rule; upstream's `--in-place-skip-disruption-budget` looks
  for any `RestartContainer` in the pod instead);
- QoS: `qos_class` (Kubernetes' `GetPodQOS` over cpu/memory of all containers, init containers included)
  and `keep_qos` (AEP-4016 for `InPlace`: a resize that would turn a Burstable pod Guaranteed applies one
  request 1 millicore / 1 byte below its limit instead);
- `ResizeAttempt`: what the loop remembers of its own last resize patch of a pod;
- `resize_patch`: the JSON Patch for `pods/<name>/resize` (pod-level values too, when the decision carries
  them); `in_place_updated_patch`: the merge patch that sets `vpaInPlaceUpdated=true`.

- the decision (`decide_in_place` → `PodDecision` with an `Action` and a `Reason`), with a caller-supplied
  `Hold` that removes changes not to be made in place now (`memorylimits`, the resize guard's backoff).

Must not: plan across pods or order them (that is `vpa.logic.updater.plan`), call the API, read the clock, or
log.
Duplication note: `proportional_limit` mirrors the admission controller's rule; the admission logic (built
separately in `vpa/logic/capping.py`) should share one implementation once both land.
Size: over 600 lines because a resize's changes, its disruption, the QoS it keeps and the decision built
from them all read the same container policies and values; they read best together, in that order.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from vpa.logic import capping
from vpa.logic.podlevel import PodLevelPlan, pod_level_patch
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.priority import (
    NO_PRIORITY,
    ContainerTarget,
    PodPriority,
    Trigger,
    Triggers,
    compute_priority,
    evaluate,
    targets_by_name,
)
from vpa.logic.updater.resizestatus import ResizeState, ResizeStatus
from vpa.logic.updater.restrictions import PENDING, GroupProblem, ReplicaGroup
from vpa.model import annotations as ann
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources, format_patch_amount
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import UpdateMode

MAX_INT64: Final = 2**63 - 1
BEST_EFFORT: Final = "BestEffort"
BURSTABLE: Final = "Burstable"
GUARANTEED: Final = "Guaranteed"
_RESOURCES: Final = (CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class ResizeAttempt:
    """The loop's memory of its last resize patch of one pod (keyed by pod uid).

    `patched_at`: when the patch was sent — the start of the Deferred / in-progress timers. `rejected`: the
    API refused it (any error, `NodeCapacity` included) — `InPlaceOrRecreate` then falls back to eviction.
    `disruptive`: the patch restarted a container — AEP-4016 counts it as a disruption for the 12 h rule.
    `resource_version`: the pod's resourceVersion the accepted patch was planned from. While the cache still
    shows that version it has not seen the patch (its watch is behind, e.g. after an API server restart),
    and planning from it would send the same resize again.
    """

    patched_at: float
    rejected: bool = False
    disruptive: bool = False
    resource_version: str = ""


class Change(NamedTuple):
    """One container resource to set. `request` / `limit` None = left as it is."""

    container_index: int
    container: str
    resource: str
    request: int | None
    limit: int | None
    disruptive: bool


Hold = Callable[[Sequence[Change]], tuple[list[Change], tuple[str, ...]]]
"""Removes the changes that may not be made in place now; returns what is left and one note per hold."""


@dataclass(frozen=True, slots=True)
class ContainerChange:
    """What a resize sets on one container: only the values present in `requests` / `limits`."""

    index: int
    name: str
    requests: Resources
    limits: Resources
    disruptive: bool


def proportional_limit(
    original_limit: int | None, original_request: int | None, new_request: int
) -> int | None:
    """Upstream's `getProportionalResourceLimit` without the LimitRange default: None = leave the limit.

    The one implementation is the admission controller's (`capping.proportional_limit`); a resize keeps
    limits exactly as admission would have set them.
    """
    limit, _ = capping.proportional_limit("", original_limit, original_request, new_request, None)
    return limit


def compute_changes(pod: PodView, targets: Sequence[ContainerTarget]) -> list[Change]:
    """The changes a full resize to the targets makes, compared with `spec` (what the patch edits)."""
    changes: list[Change] = []
    containers = pod.containers
    for target in targets:
        if target.container_index < 0:
            continue  # the pod-level pseudo target (`podlevel.pod_level_target`): planned separately
        container = containers[target.container_index]
        recommended = target.recommendation.target
        for resource in target.controlled:
            new_request = recommended.get(resource)
            if new_request is None:
                continue
            new_limit = None
            if not target.requests_only:
                new_limit = proportional_limit(
                    target.limits.get(resource), target.requests.get(resource), new_request
                )
            request_changes = new_request != container.requests.get(resource)
            limit_changes = new_limit is not None and new_limit != container.limits.get(resource)
            if request_changes or limit_changes:
                changes.append(
                    Change(
                        target.container_index,
                        target.name,
                        resource,
                        new_request if request_changes else None,
                        new_limit if limit_changes else None,
                        container.restarts_on_resize(resource),
                    )
                )
    return changes


def qos_class(resources: Iterable[tuple[Resources, Resources]]) -> str:
    """Kubernetes' `GetPodQOS` restricted to cpu and memory: `(requests, limits)` per container."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for container_requests, container_limits in resources:
        for resource in _RESOURCES:
            request = container_requests.get(resource)
            if request:
                requests[resource] = requests.get(resource, 0) + request
            limit = container_limits.get(resource)
            if limit:
                limits[resource] = limits.get(resource, 0) + limit
            else:
                guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if not guaranteed:
        return BURSTABLE
    for resource, request in requests.items():
        if limits.get(resource) != request:
            return BURSTABLE
    return GUARANTEED if len(requests) == len(limits) else BURSTABLE


def _applied(pod: PodView, changes: Sequence[Change]) -> list[tuple[Resources, Resources]]:
    by_index: dict[int, list[Change]] = {}
    for change in changes:
        by_index.setdefault(change.container_index, []).append(change)
    out: list[tuple[Resources, Resources]] = []
    for index, container in enumerate(pod.containers):
        requests, limits = container.requests, container.limits
        for change in by_index.get(index, ()):
            requests = _with(requests, change.resource, change.request)
            limits = _with(limits, change.resource, change.limit)
        out.append((requests, limits))
    out.extend((c.requests, c.limits) for c in pod.plain_init_containers)
    return out


def _with(values: Resources, resource: str, value: int | None) -> Resources:
    if value is None:
        return values
    if resource == CPU:
        return Resources(value, values.memory_bytes)
    return Resources(values.cpu_millicores, value)


def qos_before_and_after(pod: PodView, changes: Sequence[Change]) -> tuple[str, str]:
    before = qos_class([(c.requests, c.limits) for c in (*pod.containers, *pod.plain_init_containers)])
    return before, qos_class(_applied(pod, changes))


def keep_qos(pod: PodView, changes: Sequence[Change]) -> list[Change] | None:
    """AEP-4016 for `InPlace`: the changes adjusted so the QoS class stays, or None when that is impossible.

    Unchanged QoS → the changes as they are. Burstable → Guaranteed → the first changed request (container
    order, cpu before memory) that now equals its limit is set 1 millicore / 1 byte below it. Any other
    class change (to or from BestEffort, Guaranteed → Burstable) cannot be kept by lowering a request.
    """
    before, after = qos_before_and_after(pod, changes)
    if before == after:
        return list(changes)
    if not (before == BURSTABLE and after == GUARANTEED):
        return None
    applied = _applied(pod, changes)
    for position, change in enumerate(changes):
        if change.request is None:
            continue
        limit = applied[change.container_index][1].get(change.resource)
        if limit is not None and change.request == limit and limit > 1:
            adjusted = list(changes)
            adjusted[position] = change._replace(request=limit - 1)
            if qos_before_and_after(pod, adjusted)[1] == before:
                return adjusted
    return None


def by_container(changes: Sequence[Change]) -> tuple[ContainerChange, ...]:
    """Group changes per container, in container order."""
    grouped: dict[int, list[Change]] = {}
    for change in changes:
        grouped.setdefault(change.container_index, []).append(change)
    out: list[ContainerChange] = []
    for index in sorted(grouped):
        entries = grouped[index]
        requests = Resources()
        limits = Resources()
        for change in entries:
            requests = _with(requests, change.resource, change.request)
            limits = _with(limits, change.resource, change.limit)
        out.append(
            ContainerChange(index, entries[0].container, requests, limits, any(c.disruptive for c in entries))
        )
    return tuple(out)


def _quantity(resource: str, value: int) -> str:
    return format_patch_amount(resource, value)


def resize_patch(
    pod: PodView, changes: Sequence[ContainerChange], pod_level: PodLevelPlan | None = None
) -> list[dict[str, Any]]:
    """The JSON Patch (`application/json-patch+json`) for `pods/<name>/resize`.

    Like upstream: `add …/resources {}` when the container has neither requests nor limits, `add …/requests
    {}` (`…/limits {}`) when that map has no cpu/memory and something is set in it, then one `add` per value;
    "has" reads the container's status resources when reported, else its spec, so a container whose spec has
    no resources but whose status has gets no empty objects (upstream).
    Unlike upstream, unchanged values are not re-sent. `pod_level` adds its changed pod-level values
    (`/spec/resources/...`). Raises ValueError when nothing changes (upstream: "no resource patches were
    calculated to apply").
    """
    ops: list[dict[str, Any]] = []
    for change in changes:
        container = pod.containers[change.index]
        base = f"{pod.container_path(change.index)}/resources"
        # As upstream, the container's resources are read from its status when reported, else its spec.
        status = pod.container_status(container.name)
        reported_requests = status.actual_requests if status is not None else None
        reported_limits = status.actual_limits if status is not None else None
        current_requests = container.requests if reported_requests is None else reported_requests
        current_limits = container.limits if reported_limits is None else reported_limits
        if not (container.has_resources or not current_requests.is_empty() or not current_limits.is_empty()):
            ops.append({"op": "add", "path": base, "value": {}})
        for part, new, current, spec in (
            ("requests", change.requests, current_requests, container.requests),
            ("limits", change.limits, current_limits, container.limits),
        ):
            if new.is_empty():
                continue
            if current.is_empty() and spec.is_empty():  # never replace a spec map that has values
                ops.append({"op": "add", "path": f"{base}/{part}", "value": {}})
            for resource in _RESOURCES:
                value = new.get(resource)
                if value is not None:
                    path = f"{base}/{part}/{resource}"
                    ops.append({"op": "add", "path": path, "value": _quantity(resource, value)})
    if pod_level is not None:
        ops.extend(pod_level_patch(pod, pod_level)[0])
    if not ops:
        raise ValueError("no resource patches were calculated to apply")
    return ops


def in_place_updated_patch() -> dict[str, Any]:
    """Merge patch (`application/merge-patch+json`) marking the pod `vpaInPlaceUpdated=true`.

    A merge patch rather than upstream's JSON Patch: the trimmed pod view cannot tell whether
    `metadata.annotations` exists, and a merge patch works either way.
    """
    return {"metadata": {"annotations": {ann.VPA_IN_PLACE_UPDATED: ann.VPA_IN_PLACE_UPDATED_VALUE}}}


def spec_requests(pod: PodView) -> dict[str, Resources]:
    """Container name → `spec` requests: what a resize found Infeasible asked for (AEP-8818)."""
    return {c.name: c.requests for c in pod.containers}


# --- decisions -----------------------------------------------------------------------------------------


class Action(enum.StrEnum):
    RESIZE = "Resize"
    """In-place resize of every change."""
    RESIZE_PARTIAL = "ResizePartial"
    """In-place resize of the disruption-free changes only; the disruptive ones wait for Recreate rules."""
    EVICT = "Evict"
    SKIP = "Skip"


class Reason(enum.StrEnum):
    """Why a decision was taken. Resize and evict decisions carry the rule that triggered them (the first
    three), or the in-place failure that made `InPlaceOrRecreate` fall back to eviction."""

    OUTSIDE_RANGE = Trigger.OUTSIDE_RANGE.value
    QUICK_OOM = Trigger.QUICK_OOM.value
    SIGNIFICANT_CHANGE = Trigger.SIGNIFICANT_CHANGE.value
    NO_CHANGE = Trigger.NO_CHANGE.value
    QUICK_OOM_NO_CHANGE = Trigger.QUICK_OOM_NO_CHANGE.value
    BELOW_THRESHOLD = Trigger.BELOW_THRESHOLD.value
    NOT_LONG_LIVED = Trigger.NOT_LONG_LIVED.value
    NO_START_TIME = Trigger.NO_START_TIME.value
    # VPA level
    MODE_DOES_NOT_UPDATE = "UpdateModeDoesNotUpdate"
    IN_PLACE_GATE_OFF = "InPlaceFeatureGateOff"
    INITIAL_DELAY_ACTIVE = "InitialDelayActive"
    CONFIG_INVALID = "ConfigInvalid"
    NO_RECOMMENDATION = "NoRecommendation"
    # pod level, before any rule
    NO_CONTROLLER = GroupProblem.NO_CONTROLLER.value
    REPLICAS_UNKNOWN = GroupProblem.REPLICAS_UNKNOWN.value
    GROUP_BELOW_MIN_REPLICAS = "GroupBelowMinReplicas"
    POD_LEVEL_RESOURCES = "PodLevelResources"
    POD_LEVEL_INVALID = "PodLevelResourcesInvalid"
    POD_LEVEL_RESIZE_UNSUPPORTED = "PodLevelResizeUnsupported"
    STARTUP_BOOSTED = "StartupBoostActive"
    NO_CONTAINER_RECOMMENDATION = "NoContainerRecommendation"
    POD_PENDING = "PodPending"
    SPEC_AT_TARGET = "SpecAlreadyAtTarget"
    # blocks
    DISRUPTIVE_NOT_DUE = "DisruptiveChangeNotDue"
    EVICTION_REQUIREMENTS = "EvictionRequirementsNotMet"
    DISRUPTION_BUDGET = "DisruptionBudget"
    BELOW_MIN_REPLICAS = "BelowMinReplicas"
    # in-place state
    INFEASIBLE_CACHED = "InfeasibleCached"
    INFEASIBLE_RECORDED = "InfeasibleRecorded"
    RESIZE_IN_FLIGHT = "ResizeInFlight"
    RESIZE_NOT_OBSERVED = "ResizeNotObservedYet"
    """Our accepted resize is not in the cached pod yet (same resourceVersion as when it was sent)."""
    RESIZE_INFEASIBLE = "ResizeInfeasible"
    RESIZE_TIMED_OUT = "ResizeTimedOut"
    RESIZE_REJECTED = "ResizeRejected"
    QOS_CHANGE = "QoSClassWouldChange"
    WOULD_NOT_FIT = "InPlaceResizeWouldNotFit"
    """Gate `InPlaceCapacityAware`: the kubelet would answer the resize Infeasible or Deferred."""
    RESIZE_REVERTED = "ResizeReverted"
    """Gate `ResizeGuard`: the resize back after an earlier resize hurt the pod (`guard`)."""
    DECREASE_HELD = "DecreaseHeld"
    """Every change left was a decrease that may not be made in place now (see `decide_in_place` rule 7)."""


class PodDecision(NamedTuple):
    """One pod's verdict for this pass. `changes` are set for resizes; `record_infeasible` asks the loop to
    record an infeasible attempt (InPlace mode, `PodResizePending/Infeasible` seen); `detail` adds context
    (the resize state, the rule that was not met...)."""

    pod: PodView
    action: Action
    reason: Reason
    priority: PodPriority = NO_PRIORITY
    changes: tuple[ContainerChange, ...] = ()
    disruptive: bool = False
    qos_adjusted: bool = False
    record_infeasible: Mapping[str, Resources] | None = None
    detail: str = ""
    pod_level: PodLevelPlan | None = None
    """Gate `PodLevelResources`: the pod-level values this resize also sets (None: none change)."""
    state: str = ""
    """What of this verdict is the pod's state, beyond `reason` (`InPlaceResizeWouldNotFit`: the kubelet's
    answer and the resource, not the amounts): an event about it is recorded when the state is entered."""

    @property
    def acts(self) -> bool:
        return self.action is not Action.SKIP

    def attempted(self) -> dict[str, Resources]:
        """Container name → the requests the pod would have after this resize (spec + changes): what the
        loop records as infeasible when the patch is rejected with a `NodeCapacity` cause."""
        out = spec_requests(self.pod)
        for change in self.changes:
            current = out.get(change.name, Resources())
            out[change.name] = Resources(
                change.requests.cpu_millicores
                if change.requests.cpu_millicores is not None
                else current.cpu_millicores,
                change.requests.memory_bytes
                if change.requests.memory_bytes is not None
                else current.memory_bytes,
            )
        return out

    def explain(self) -> str:
        """One line for logs and events: `ns/pod: Resize (OutsideRecommendedRange; …)`."""
        parts = [self.reason.value]
        if self.detail:
            parts.append(self.detail)
        if self.priority is not NO_PRIORITY:
            parts.append(self.priority.describe())
        if self.disruptive:
            parts.append("restarts containers")
        if self.qos_adjusted:
            parts.append("request kept 1 unit below limit to keep the QoS class")
        return f"{self.pod.key}: {self.action.value} ({'; '.join(parts)})"


def skip(pod: PodView, reason: Reason, priority: PodPriority = NO_PRIORITY, detail: str = "") -> PodDecision:
    return PodDecision(pod, Action.SKIP, reason, priority, detail=detail)


def evict_or_skip(
    pod: PodView, mode: UpdateMode, reason: Reason, priority: PodPriority, triggers: Triggers, detail: str
) -> PodDecision:
    """An eviction fallback: only in modes that evict and only when the Recreate rules hold (AEP-4016)."""
    if not mode.evicts:
        return skip(pod, reason, priority, detail)
    if not triggers.recreate.accepts:
        return skip(pod, reason, priority, f"{detail}; no eviction: {triggers.recreate.value}".lstrip("; "))
    return PodDecision(pod, Action.EVICT, reason, priority, detail=detail)


def decide_in_place(
    pod: PodView,
    mode: UpdateMode,
    targets: Sequence[ContainerTarget],
    priority: PodPriority,
    quick_oom: bool,
    triggers: Triggers,
    group: ReplicaGroup,
    *,
    status: ResizeStatus,
    attempt: ResizeAttempt | None,
    infeasible: InfeasibleAttempts,
    settings: UpdaterSettings,
    now: float,
    pod_level: Callable[[Sequence[Change]], PodLevelPlan] | None = None,
    hold: Hold | None = None,
    pod_level_resize: bool = False,
) -> PodDecision:
    """The in-place verdict for one pod of an `InPlaceOrRecreate` or `InPlace` VPA.

    Returns RESIZE, RESIZE_PARTIAL, EVICT (only `InPlaceOrRecreate`: the caller still checks `can_evict`
    and `evictionRequirements`) or SKIP, each with its reason. A resize that needs the disruption budget
    is charged to `group` here, so call this in priority order within one pass.

    Rules (see the module docstrings of `priority`, `restrictions` and `resizestatus` for the pieces):
    1. Pending pods wait, and so do pods whose cached version is the one our accepted resize was planned
       from (the cache has not seen it yet: the same resize would be sent again).
    2. `InPlace`: a recorded infeasible attempt skips the pod unless the target is lower somewhere; a
       `PodResizePending/Infeasible` pod without a record asks the loop to record its spec requests; any
       other resize under way waits (never a timeout, never an eviction).
    3. `InPlaceOrRecreate`: a resize under way falls back to eviction when Infeasible, Deferred > 5 min,
       in progress or erroring > 1 h (from our patch); a rejected patch falls back to eviction too; both only
       when the Recreate rules hold.
    4. Changes that restart nothing are applied when outside the range, quick OOM or a significant change
       (no pod age); with `in_place_skip_disruption_budget` (our default) they skip the replica checks.
       Disruptive changes need the Recreate rules and the budget (never below minReplicas). When the full
       update cannot go, the disruption-free part alone may (RESIZE_PARTIAL).
    5. QoS: a class change makes `InPlaceOrRecreate` evict and `InPlace` lower one request by 1 unit.
    6. Pod-level resources (`pod_level`, gate `PodLevelResources`): the pod-level values planned for the
       changes go into the same resize; a pod that no values keep valid is skipped; when the cluster cannot
       resize such pods (`pod_level_resize` false: see `serverfeatures`, from the server's version, what it
       refused and `--in-place-pod-level-resources`), `InPlaceOrRecreate` evicts (Recreate rules
       permitting) and `InPlace` skips.
    7. `hold` removes changes that may not be made in place now (memory-limit decreases a runtime would
       answer with OOM kills, decreases held back after a revert); what it held is noted in the decision's
       detail, and a pod left with nothing to change is skipped with `DecreaseHeld` (never evicted for it).
    """
    if pod.phase == PENDING:
        return skip(pod, Reason.POD_PENDING, priority)
    if (
        attempt is not None
        and not attempt.rejected
        and attempt.resource_version
        and attempt.resource_version == pod.resource_version
    ):
        return skip(pod, Reason.RESIZE_NOT_OBSERVED, priority)
    if mode is UpdateMode.IN_PLACE:
        uid = pod.uid
        if uid in infeasible and not infeasible.should_retry(uid, targets_by_name(targets)):
            return skip(pod, Reason.INFEASIBLE_CACHED, priority)
        if status.state is ResizeState.INFEASIBLE:
            if uid not in infeasible:
                return PodDecision(
                    pod,
                    Action.SKIP,
                    Reason.INFEASIBLE_RECORDED,
                    priority,
                    record_infeasible=spec_requests(pod),
                    detail=status.message,
                )
        elif status.resizing:
            return skip(pod, Reason.RESIZE_IN_FLIGHT, priority, status.state.value)
    else:
        if status.resizing:
            if status.timed_out(attempt.patched_at if attempt is not None else None, now):
                infeasible_now = status.state is ResizeState.INFEASIBLE
                reason = Reason.RESIZE_INFEASIBLE if infeasible_now else Reason.RESIZE_TIMED_OUT
                return evict_or_skip(pod, mode, reason, priority, triggers, status.state.value)
            return skip(pod, Reason.RESIZE_IN_FLIGHT, priority, status.state.value)
        if attempt is not None and attempt.rejected and triggers.recreate.accepts:
            return evict_or_skip(pod, mode, Reason.RESIZE_REJECTED, priority, triggers, "")

    changes = compute_changes(pod, targets)
    held: tuple[str, ...] = ()
    if hold is not None and changes:
        changes, held = hold(changes)
    decision = _decide_changes(
        pod, mode, targets, priority, quick_oom, triggers, group, changes, bool(held),
        settings=settings, now=now, pod_level=pod_level, pod_level_resize=pod_level_resize,
    )
    if held:
        decision = decision._replace(detail="; ".join(filter(None, (decision.detail, *held))))
    return decision


def _decide_changes(
    pod: PodView,
    mode: UpdateMode,
    targets: Sequence[ContainerTarget],
    priority: PodPriority,
    quick_oom: bool,
    triggers: Triggers,
    group: ReplicaGroup,
    changes: list[Change],
    held: bool,
    *,
    settings: UpdaterSettings,
    now: float,
    pod_level: Callable[[Sequence[Change]], PodLevelPlan] | None,
    pod_level_resize: bool = False,
) -> PodDecision:
    """Rules 4–6 of `decide_in_place` over the changes left after `hold`."""
    plan = pod_level(changes) if pod_level is not None else None
    if plan is not None and plan.problem:
        return skip(pod, Reason.POD_LEVEL_INVALID, priority, plan.problem)
    if not changes and not (plan is not None and plan.changes(pod)):
        return skip(pod, Reason.DECREASE_HELD if held else Reason.SPEC_AT_TARGET, priority)
    free = [c for c in changes if not c.disruptive]
    disruptive = len(free) != len(changes)
    blocked: Reason | None = None
    if triggers.recreate.accepts or (not disruptive and triggers.disruption_free.accepts):
        trigger = triggers.recreate if triggers.recreate.accepts else triggers.disruption_free
        full = _resize(
            pod, mode, changes, disruptive, Reason(trigger.value), priority, triggers, group, settings
        )
        if not isinstance(full, Reason):
            return _with_pod_level(full, plan, mode, triggers, pod_level_resize)
        blocked = full
    if disruptive and free:
        only = {(c.container, c.resource) for c in free}
        # Plain init containers ride along (`plan`): they never weigh in whether an update is due.
        weighed = [t for t in targets if not pod.is_plain_init_container(t.name)]
        partial_priority = compute_priority(weighed, only)
        partial_trigger = evaluate(partial_priority, quick_oom, pod, now, settings).disruption_free
        if partial_trigger.accepts:
            partial = _resize(
                pod,
                mode,
                free,
                False,
                Reason(partial_trigger.value),
                partial_priority,
                triggers,
                group,
                settings,
                partial=True,
            )
            if not isinstance(partial, Reason):
                if pod_level is None:
                    return partial
                partial_plan = pod_level(free)
                if partial_plan.problem:
                    return skip(pod, Reason.POD_LEVEL_INVALID, priority, partial_plan.problem)
                return _with_pod_level(partial, partial_plan, mode, triggers, pod_level_resize)
            blocked = blocked or partial
    if blocked is not None:
        return skip(pod, blocked, priority)
    if disruptive:
        return skip(pod, Reason.DISRUPTIVE_NOT_DUE, priority, triggers.recreate.value)
    return skip(pod, Reason(triggers.disruption_free.value), priority)


def _with_pod_level(
    decision: PodDecision, plan: PodLevelPlan | None, mode: UpdateMode, triggers: Triggers,
    pod_level_resize: bool,
) -> PodDecision:
    """A resize decision with the pod-level values that go with it. When the cluster cannot resize pods with
    pod-level resources in place (kube-apiserver 1.35 without `InPlacePodLevelResourcesVerticalScaling`
    forbids every resize of such a pod, of its containers too), the eviction fallback
    (`InPlaceOrRecreate`) or a skip (`InPlace`)."""
    if plan is None or decision.action not in (Action.RESIZE, Action.RESIZE_PARTIAL):
        return decision
    if not pod_level_resize:
        return evict_or_skip(decision.pod, mode, Reason.POD_LEVEL_RESIZE_UNSUPPORTED, decision.priority,
                              triggers, "the cluster does not resize pods with pod-level resources in place")
    if not plan.changes(decision.pod):
        return decision
    return decision._replace(pod_level=plan)


def _resize(
    pod: PodView,
    mode: UpdateMode,
    changes: list[Change],
    disruptive: bool,
    reason: Reason,
    priority: PodPriority,
    triggers: Triggers,
    group: ReplicaGroup,
    settings: UpdaterSettings,
    *,
    partial: bool = False,
) -> PodDecision | Reason:
    """A resize decision for `changes`, an eviction / skip decision for a QoS change, or the Reason the
    disruption budget blocks it (so the caller may try the partial update)."""
    adjusted = False
    if mode is UpdateMode.IN_PLACE:
        kept = keep_qos(pod, changes)
        if kept is None:
            return skip(pod, Reason.QOS_CHANGE, priority, "cannot be kept by lowering a request")
        adjusted = kept != changes
        changes = kept
    else:
        before, after = qos_before_and_after(pod, changes)
        if before != after:
            return evict_or_skip(pod, mode, Reason.QOS_CHANGE, priority, triggers, f"{before} → {after}")
    if disruptive:
        if group.below_min_replicas:
            return Reason.BELOW_MIN_REPLICAS
        if not group.is_disruptable():
            return Reason.DISRUPTION_BUDGET
        group.charge_in_place()
    elif not settings.in_place_skip_disruption_budget:
        if not group.is_disruptable():
            return Reason.DISRUPTION_BUDGET
        group.charge_in_place()
    action = Action.RESIZE_PARTIAL if partial else Action.RESIZE
    return PodDecision(
        pod,
        action,
        reason,
        priority,
        changes=by_container(changes),
        disruptive=disruptive,
        qos_adjusted=adjusted,
    )
