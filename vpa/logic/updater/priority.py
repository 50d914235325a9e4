"""Update priority of a running pod (updater, spec §4.4–4.5): is it worth changing, and in which order.

Owns:
- which containers count (`considered_containers`): those in `spec.containers`, restricted to the names in
  the pod's `vpaObservedContainers` annotation when it is present and parseable (absent or unparseable →
  every container, as upstream), with a recommendation, and not switched `Off` by the container policy;
  only the policy's controlled resources; for `RequestsOnly` the target and bounds are capped at the current
  limit (the one step of upstream's capping processor the updater cannot do without: a request above the
  limit is invalid). LimitRange capping is the caller's: pass an already processed recommendation;
- `PodPriority`: `scale_up` (some target above its request), `outside_range` (some request below the lower
  bound or above the upper bound; a missing request counts as both) and `resource_diff` =
  Σ_resource |ΣRequest − ΣTarget| / max(ΣRequest, 1), computed in milli-units as upstream;
- quick OOM (`is_quick_oom`): a considered container whose last termination was `OOMKilled` less than the
  threshold after it started, and less than the threshold before `now` (upstream 1.8.1: an old OOM no
  longer triggers updates for the rest of the pod's life);
- the triggers (`Triggers`): which update rules a pod satisfies — upstream's Recreate acceptance (outside
  range, or quick OOM with a non-zero diff, or long-lived with a significant diff) and AEP-4016's
  disruption-free acceptance (the same without the pod-age requirement);
- `evictionRequirements` (`eviction_requirements_met`);
- the order (`sort_key`): pods that scale up first, then the larger `resource_diff`; ties by namespace/name
  so the order is deterministic (upstream's sort is unstable).

Must not: look at replica groups, resize state or update modes, read the clock (`now` is an argument), or log.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final, NamedTuple

from vpa.model import annotations as ann
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import (
    ControlledValues,
    EvictionChangeRequirement,
    Recommendation,
    RecommendedContainerResources,
    VpaView,
)

OOM_KILLED: Final = "OOMKilled"
_MILLI_PER_BYTE: Final = 1000
RESOURCES: Final = (CPU, MEMORY)

ObservedCache = dict[str, frozenset[str] | None]
"""`vpaObservedContainers` value → parsed names; shared across one decision pass (values repeat a lot)."""


class ContainerTarget(NamedTuple):
    """One considered container: where it is, its policy, its (capped) recommendation and current values."""

    container_index: int
    name: str
    controlled: tuple[str, ...]
    controls_cpu: bool
    controls_memory: bool
    requests_only: bool
    recommendation: RecommendedContainerResources
    requests: Resources
    """Current requests: `status.containerStatuses[].resources` when present, else spec."""
    limits: Resources


class PodPriority(NamedTuple):
    scale_up: bool
    outside_range: bool
    resource_diff: float

    def describe(self) -> str:
        parts = [f"resource diff {self.resource_diff:.3f}"]
        if self.scale_up:
            parts.append("scale up")
        if self.outside_range:
            parts.append("outside recommended range")
        return ", ".join(parts)


NO_PRIORITY: Final = PodPriority(scale_up=False, outside_range=False, resource_diff=0.0)


def observed_names(pod: PodView, cache: ObservedCache) -> frozenset[str] | None:
    """The pod's `vpaObservedContainers` names, or None when the annotation is absent or unparseable."""
    value = pod.annotations.get(ann.VPA_OBSERVED_CONTAINERS)
    if value is None:
        return None
    try:
        return cache[value]
    except KeyError:
        parsed = pod.observed_containers()
        names = None if parsed is None else frozenset(parsed)
        cache[value] = names
        return names


def _capped(
    recommendation: RecommendedContainerResources, limits: Resources
) -> RecommendedContainerResources:
    """`RequestsOnly`: target and bounds no higher than the container's current (non-zero) limit."""
    cpu_limit = limits.cpu_millicores or None
    memory_limit = limits.memory_bytes or None
    if cpu_limit is None and memory_limit is None:
        return recommendation

    def cap(values: Resources) -> Resources:
        cpu, memory = values.cpu_millicores, values.memory_bytes
        if cpu is not None and cpu_limit is not None and cpu > cpu_limit:
            cpu = cpu_limit
        if memory is not None and memory_limit is not None and memory > memory_limit:
            memory = memory_limit
        if cpu == values.cpu_millicores and memory == values.memory_bytes:
            return values
        return Resources(cpu, memory)

    target, lower, upper = (
        cap(recommendation.target),
        cap(recommendation.lower_bound),
        cap(recommendation.upper_bound),
    )
    if (target, lower, upper) == (
        recommendation.target,
        recommendation.lower_bound,
        recommendation.upper_bound,
    ):
        return recommendation
    return RecommendedContainerResources(
        recommendation.container_name, target, lower, upper, recommendation.uncapped_target
    )


def recommendations_by_name(recommendation: Recommendation) -> dict[str, RecommendedContainerResources]:
    """Container name → its recommendation (the first entry wins on duplicates, as upstream's lookup)."""
    out: dict[str, RecommendedContainerResources] = {}
    for rec in recommendation.containers:
        out.setdefault(rec.container_name, rec)
    return out


def considered_containers(
    pod: PodView,
    vpa: VpaView,
    by_name: Mapping[str, RecommendedContainerResources],
    observed: frozenset[str] | None,
) -> list[ContainerTarget]:
    """The containers the updater weighs for this pod, in `spec.containers` order (`by_name`: see
    `recommendations_by_name`)."""
    out: list[ContainerTarget] = []
    statuses = pod.container_statuses
    for index, container in enumerate(pod.containers):
        name = container.name
        if observed is not None and name not in observed:
            continue
        rec = by_name.get(name)
        if rec is None:
            continue
        policy = vpa.resource_policy.for_container(name) if vpa.resource_policy.container_policies else None
        if policy is not None and policy.is_off:
            continue
        controlled = policy.effective_controlled_resources if policy is not None else RESOURCES
        requests_only = (
            policy is not None and policy.effective_controlled_values is ControlledValues.REQUESTS_ONLY
        )
        requests = limits = None
        for status in statuses:
            if status.name == name:
                requests, limits = status.actual_requests, status.actual_limits
                break
        if requests is None:
            requests = container.requests
        if limits is None:
            limits = container.limits
        if requests_only:
            rec = _capped(rec, limits)
        out.append(
            ContainerTarget(
                index,
                name,
                controlled,
                CPU in controlled,
                MEMORY in controlled,
                requests_only,
                rec,
                requests,
                limits,
            )
        )
    return out


def _milli(resource: str, value: int) -> int:
    return value if resource == CPU else value * _MILLI_PER_BYTE


def compute_priority(
    targets: Sequence[ContainerTarget], only: Collection[tuple[str, str]] | None = None
) -> PodPriority:
    """Upstream's `GetUpdatePriority` over `targets`.

    `only` restricts the change to some (container, resource) pairs: the others count as if their target
    equalled their request (used to weigh a partial, disruption-free update on its own).
    """
    if only is not None:
        return _priority_of_part(targets, only)
    # The hot path of a decision pass (every pod, every loop): cpu and memory unrolled, no dicts.
    scale_up = outside = False
    cpu_seen = memory_seen = False
    cpu_request = cpu_target = memory_request = memory_target = 0
    for t in targets:
        rec = t.recommendation
        target = rec.target
        requests = t.requests
        if t.controls_cpu:
            recommended = target.cpu_millicores
            if recommended is not None:
                cpu_seen = True
                cpu_target += recommended
                request = requests.cpu_millicores
                if request is None:
                    scale_up = outside = True
                else:
                    cpu_request += request
                    if recommended > request:
                        scale_up = True
                    lower = rec.lower_bound.cpu_millicores
                    upper = rec.upper_bound.cpu_millicores
                    if (lower is not None and request < lower) or (upper is not None and request > upper):
                        outside = True
        if t.controls_memory:
            recommended = target.memory_bytes
            if recommended is not None:
                memory_seen = True
                memory_target += recommended
                request = requests.memory_bytes
                if request is None:
                    scale_up = outside = True
                else:
                    memory_request += request
                    if recommended > request:
                        scale_up = True
                    lower = rec.lower_bound.memory_bytes
                    upper = rec.upper_bound.memory_bytes
                    if (lower is not None and request < lower) or (upper is not None and request > upper):
                        outside = True
    # upstream: |max(ΣRequest, 1) − ΣTarget| / max(ΣRequest, 1) per resource, in milli-units
    diff = 0.0
    if cpu_seen:
        floored = cpu_request if cpu_request > 1 else 1
        diff += abs(floored - cpu_target) / floored
    if memory_seen:
        floored = memory_request * _MILLI_PER_BYTE if memory_request > 0 else 1
        diff += abs(floored - memory_target * _MILLI_PER_BYTE) / floored
    if not scale_up and not outside and diff == 0.0:
        return NO_PRIORITY
    return PodPriority(scale_up, outside, diff)


def _priority_of_part(targets: Sequence[ContainerTarget], only: Collection[tuple[str, str]]) -> PodPriority:
    """`compute_priority` for part of the change (generic and slower; only partial updates use it)."""
    scale_up = outside = False
    request_sum: dict[str, int] = {}
    target_sum: dict[str, int] = {}
    for target in targets:
        rec = target.recommendation
        for resource in target.controlled:
            recommended = rec.target.get(resource)
            if recommended is None:
                continue
            request = target.requests.get(resource)
            included = (target.name, resource) in only
            if not included:
                if request is None:
                    continue
                recommended = request
            target_sum[resource] = target_sum.get(resource, 0) + _milli(resource, recommended)
            if request is None:
                scale_up = outside = True
                continue
            request_sum[resource] = request_sum.get(resource, 0) + _milli(resource, request)
            if recommended > request:
                scale_up = True
            if not included:
                continue
            lower = rec.lower_bound.get(resource)
            upper = rec.upper_bound.get(resource)
            if (lower is not None and request < lower) or (upper is not None and request > upper):
                outside = True
    diff = 0.0
    for resource, total_target in target_sum.items():
        total_request = max(request_sum.get(resource, 0), 1)
        diff += abs(total_request - total_target) / total_request
    if not scale_up and not outside and diff == 0.0:
        return NO_PRIORITY
    return PodPriority(scale_up, outside, diff)


def oom_threshold_s(vpa: VpaView, settings: UpdaterSettings, per_vpa_config: bool) -> float:
    """`evictAfterOOMSeconds` of the VPA when gate `PerVPAConfig` is on and it is set, else the flag."""
    per_vpa = vpa.update_policy.evict_after_oom_s
    if per_vpa_config and per_vpa is not None:
        return float(per_vpa)
    return settings.evict_after_oom_threshold_s


def is_quick_oom(
    pod: PodView, vpa: VpaView, threshold_s: float, observed: frozenset[str] | None, now: float
) -> bool:
    """Some observed container not switched `Off` was last OOM-killed less than `threshold_s` after it
    started, and that kill is less than `threshold_s` old at `now`. Both times must be known (upstream
    subtracts Go zero times; we do not guess)."""
    for status in pod.container_statuses:
        if status.last_terminated_reason != OOM_KILLED:
            continue
        if observed is not None and status.name not in observed:
            continue
        policy = vpa.resource_policy.for_container(status.name)
        if policy is not None and policy.is_off:
            continue
        started, finished = status.last_terminated_started_at, status.last_terminated_at
        if started is None or finished is None:
            continue
        if finished - started < threshold_s and now - finished < threshold_s:
            return True
    return False


class Trigger(enum.StrEnum):
    """Why a pod is worth updating (the strongest rule that holds), or why not."""

    OUTSIDE_RANGE = "OutsideRecommendedRange"
    QUICK_OOM = "QuickOOM"
    SIGNIFICANT_CHANGE = "SignificantChange"
    """Long-lived (for Recreate) with `resource_diff` ≥ `--pod-update-threshold`."""
    NO_CHANGE = "NoChange"
    QUICK_OOM_NO_CHANGE = "QuickOOMWithoutChange"
    BELOW_THRESHOLD = "BelowUpdateThreshold"
    NOT_LONG_LIVED = "NotLongLived"
    NO_START_TIME = "NoStartTime"

    @property
    def accepts(self) -> bool:
        # identity checks: this runs for every pod of every pass and enum hashing is slow
        return (
            self is Trigger.SIGNIFICANT_CHANGE or self is Trigger.OUTSIDE_RANGE or self is Trigger.QUICK_OOM
        )


class Triggers(NamedTuple):
    """The verdicts for one pod: as a disruptive update (Recreate rules) and as a disruption-free one."""

    recreate: Trigger
    disruption_free: Trigger


def evaluate(
    priority: PodPriority,
    quick_oom: bool,
    pod: PodView,
    now: float,
    settings: UpdaterSettings,
    disrupted_at: float | None = None,
) -> Triggers:
    """Upstream's acceptance (`update_priority_calculator.go`) and AEP-4016's disruption-free variant.

    The pod's age runs from `status.startTime`, or from `disrupted_at` (our last disruptive in-place resize,
    AEP-4016: it counts as a disruption) when that is later.
    """
    if priority.outside_range:
        both = Trigger.OUTSIDE_RANGE
        return Triggers(both, both)
    if quick_oom:
        # a quick OOM is only worth acting on if the resources would change
        both = Trigger.QUICK_OOM if priority.resource_diff != 0.0 else Trigger.QUICK_OOM_NO_CHANGE
        return Triggers(both, both)
    if priority.resource_diff == 0.0:
        return Triggers(Trigger.NO_CHANGE, Trigger.NO_CHANGE)
    if priority.resource_diff < settings.pod_update_threshold:
        return Triggers(Trigger.BELOW_THRESHOLD, Trigger.BELOW_THRESHOLD)
    if pod.start_time is None:
        recreate = Trigger.NO_START_TIME
    elif now - max(pod.start_time, disrupted_at or pod.start_time) < (
        settings.in_recommendation_bounds_eviction_lifetime_threshold_s
    ):
        recreate = Trigger.NOT_LONG_LIVED
    else:
        recreate = Trigger.SIGNIFICANT_CHANGE
    return Triggers(recreate, Trigger.SIGNIFICANT_CHANGE)


def eviction_requirements_met(vpa: VpaView, targets: Sequence[ContainerTarget], pod: PodView) -> bool:
    """Upstream's `scalingDirectionPodEvictionAdmission.Admit` (spec §4.5).

    No requirements → True. Else True when at least one considered container lacks a CPU or a memory
    request, or satisfies every requirement (a requirement holds when any of its resources has
    target > request for `TargetHigherThanRequests`, target < request for `TargetLowerThanRequests`).
    Requests are the current ones (status, else spec); a resource without a target satisfies neither.
    """
    requirements = vpa.update_policy.eviction_requirements
    if not requirements:
        return True
    for target in targets:
        requests = target.requests
        if requests.cpu_millicores is None or requests.memory_bytes is None:
            return True
        if all(_requirement_holds(target, r.resources, r.change_requirement) for r in requirements):
            return True
    return False


def _requirement_holds(target: ContainerTarget, resources: tuple[str, ...], change: str) -> bool:
    higher: Callable[[int, int], bool]
    if change == EvictionChangeRequirement.TARGET_HIGHER_THAN_REQUESTS:
        higher = int.__gt__
    elif change == EvictionChangeRequirement.TARGET_LOWER_THAN_REQUESTS:
        higher = int.__lt__
    else:
        return False
    for resource in resources:
        recommended = target.recommendation.target.get(resource)
        request = target.requests.get(resource)
        if recommended is not None and request is not None and higher(recommended, request):
            return True
    return False


def sort_key(pod: PodView, priority: PodPriority) -> tuple[bool, float, str, str]:
    """Ascending sort puts first: scale-ups, then larger diffs, then namespace/name."""
    return (not priority.scale_up, -priority.resource_diff, pod.namespace, pod.name)


def targets_by_name(targets: Sequence[ContainerTarget]) -> Mapping[str, Resources]:
    """The (capped) target of each considered container, for the infeasible-attempt rule."""
    return {t.name: _controlled(t.recommendation.target, t.controlled) for t in targets}


def _controlled(values: Resources, controlled: tuple[str, ...]) -> Resources:
    if len(controlled) == 2:
        return values
    return Resources(
        values.cpu_millicores if CPU in controlled else None,
        values.memory_bytes if MEMORY in controlled else None,
    )
