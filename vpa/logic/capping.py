"""Admission-side recommendation processing: what requests and limits a pod being created should get.

Owns (spec §5.4, upstream `cappingRecommendationProcessor` + `recommendation_provider.go`), in order:
1. taking the VPA's recommendation for each container of the pod, restricted to the container's
   `controlledResources`; containers whose policy `mode` is `Off` get nothing;
2. pod-level LimitRange capping (`apply_pod_limit_range`): per bound (upper, target, lower) and resource
   (CPU, memory), sums of recommendations and of the limits they would get; scaled up to `Min` (rounding
   up) or down to `Max` / up to `Min` of the limits (rounding down);
3. per container, for target, lower and upper bound: container LimitRange `min`/`max` turned into
   request bounds through the container's current request/limit ratio (LimitRange `default` standing in
   for a missing limit), then the policy's `minAllowed`/`maxAllowed` (so policy wins over LimitRange),
   then for `RequestsOnly` the current limit. Only the target's capping produces notes;
4. limits: for `RequestsAndLimits`, the proportional limit (`proportional_limit`) with exact integer
   arithmetic (CPU millicores, memory bytes, floor; int64 overflow capped with a note).

"Current" requests and limits are `status.containerStatuses[].resources` when present, else the spec.

Deliberate deviations from upstream (documented in the module tests and the report):
- pod LimitRange rounding is done in each resource's own unit (ceil/floor of millicores and bytes); for
  CPU that is upstream 1.7.1's behaviour (older releases rounded to whole cores), but upstream's memory
  "round up" floors;
- containers without a recommendation take part in the pod LimitRange sums with their current request but
  are never changed (upstream inserts them as recommendations, which can write into nil maps);
- a resource missing from a container's recommendation is never added by scaling (upstream may add `0`);
- negative recommended amounts are ignored (never produced by a recommender; the API would reject them).

Must not: build JSON patches (that is `vpa.logic.admission.patches`), read feature gates, log, or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from vpa.logic.limitranges import NamespaceLimits
from vpa.model.limitrange import LimitRangeItemView
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.vpa import (
    CAPPED_TO_NODE_CONDITION,
    ContainerResourcePolicy,
    ControlledValues,
    RecommendedContainerResources,
    UpdateMode,
    VpaView,
)

MAX_INT64: Final = 2**63 - 1
RESOURCE_NAMES: Final = (CPU, MEMORY)
NO_RESOURCES: Final = Resources()

# Capping notes, exactly as upstream writes them into `vpaUpdates` (`<resource> <action>`).
CAPPED_TO_MIN_ALLOWED: Final = "capped to minAllowed"
CAPPED_TO_MAX_ALLOWED: Final = "capped to maxAllowed"
CAPPED_TO_LIMIT: Final = "capped to container limit"
CAPPED_TO_LIMIT_RANGE_MAX: Final = "capped to fit Max in container LimitRange"
CAPPED_TO_LIMIT_RANGE_MIN: Final = "capped to fit Min in container LimitRange"

Amounts = list[int | None]
"""Working form of a ResourceList: `[cpu_millicores, memory_bytes]`, None = absent."""


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """What admission sets on one container: requests, limits (absent = leave alone) and the notes that go
    into the `vpaUpdates` annotation before the `cpu request`, … entries."""

    requests: Resources = NO_RESOURCES
    limits: Resources = NO_RESOURCES
    notes: tuple[str, ...] = ()


EMPTY: Final = ContainerResources()


def _amounts(resources: Resources) -> Amounts:
    return [resources.cpu_millicores, resources.memory_bytes]


def _resources(amounts: Amounts) -> Resources:
    if amounts[0] is None and amounts[1] is None:
        return NO_RESOURCES
    return Resources(amounts[0], amounts[1])


# --- proportional limits and boundaries (upstream limit_and_request_scaling.go) --------------------------


def proportional_limit(
    resource: str,
    original_limit: int | None,
    original_request: int | None,
    recommended_request: int | None,
    default_limit: int | None,
) -> tuple[int | None, str]:
    """The limit keeping the original limit/request ratio for `recommended_request`, and a note ("" if none).

    Amounts are CPU millicores or memory bytes; the result is floored (`origLimit × newRequest ÷
    origRequest`) and capped at 2**63-1 with the note upstream writes. A missing or zero original limit
    falls back to `default_limit` (the container LimitRange default); still none ⇒ no limit.
    """
    if not original_limit:
        original_limit = default_limit
    if not original_limit:
        return None, f"{resource}: limit NOT set since originalLimit is nil or 0"
    if not recommended_request:
        return None, f"{resource}: limit NOT set since recommendedRequest is nil or 0"
    if not original_request or original_request == original_limit:
        return recommended_request, ""
    scaled = original_limit * recommended_request // original_request
    if scaled > MAX_INT64:
        return MAX_INT64, f"{resource}: failed to keep limit to request ratio; capping limit to int64"
    return scaled, ""


def boundary_request(
    original_request: int | None,
    original_limit: int | None,
    boundary_limit: int | None,
    default_limit: int | None,
) -> int:
    """The request that keeps the original request/limit ratio when the limit equals `boundary_limit`
    (upstream `GetBoundaryRequest`); 0 means "no boundary" (no limit and no default)."""
    if not original_limit:
        original_limit = default_limit
    if not original_limit:
        return 0
    if not original_request:
        return boundary_limit or 0
    return original_request * (boundary_limit or 0) // original_limit


# --- pod-level LimitRange -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Working:
    """One container of the pod during processing (mutable; private to one call)."""

    index: int
    name: str
    policy: ContainerResourcePolicy | None
    current_requests: Resources
    current_limits: Resources
    recommended: bool
    target: Amounts
    lower: Amounts
    upper: Amounts


def _bound(work: _Working, which: int) -> Amounts:
    return work.upper if which == 0 else work.target if which == 1 else work.lower


def apply_pod_limit_range(
    containers: list[_Working], item: LimitRangeItemView, *, bounds: bool = True
) -> None:
    """Scale recommendations in place so the pod's sums respect a `Pod` LimitRange item (spec §5.4 step 1).

    Order as upstream: upper bound, target, lower bound; CPU before memory. Each bound is scaled on its own,
    so `bounds=False` (target only) gives the same target.
    """
    for which in (0, 1, 2) if bounds else (1,):
        for r, resource in enumerate(RESOURCE_NAMES):
            minimum = (item.min.get(resource) if item.min is not None else None) or 0
            maximum = (item.max.get(resource) if item.max is not None else None) or 0
            default = (item.default.get(resource) if item.default is not None else None) or 0
            sum_limit = 0
            sum_recommendation = 0
            for work in containers:
                request = work.current_requests.get(resource)
                if work.recommended:
                    value = _bound(work, which)[r] or 0
                else:
                    value = request or 0  # no recommendation: the container keeps its request
                limit, _ = proportional_limit(
                    resource, work.current_limits.get(resource), request, value, default
                )
                sum_limit += limit or 0
                sum_recommendation += value
            if sum_recommendation == 0:
                continue
            if (
                minimum <= sum_limit
                and minimum <= sum_recommendation
                and (not maximum or sum_limit <= maximum)
            ):
                continue
            if sum_limit == 0:
                continue
            if sum_recommendation < minimum:
                for work in containers:
                    amounts = _bound(work, which)
                    current = amounts[r]
                    if work.recommended and current is not None:
                        amounts[r] = -(-current * minimum // sum_recommendation)  # round up
                continue
            target_total = minimum if sum_limit < minimum else 0
            if maximum and sum_limit > maximum:
                target_total = maximum
            for work in containers:
                amounts = _bound(work, which)
                current = amounts[r]
                if work.recommended and current is not None:
                    amounts[r] = current * target_total // sum_limit  # round down


# --- per-container capping ----------------------------------------------------------------------------------


def _cap_container(
    amounts: Amounts,
    work: _Working,
    limit_range: LimitRangeItemView | None,
    requests_only: bool,
    notes: list[str] | None,
) -> None:
    requests = work.current_requests
    limits = work.current_limits
    if limit_range is not None:
        default = limit_range.default
        for r, resource in enumerate(RESOURCE_NAMES):
            value = amounts[r]
            if value is None:
                continue
            default_limit = default.get(resource) if default is not None else None
            request = requests.get(resource)
            limit = limits.get(resource)
            if limit_range.min is not None:
                lr_min = limit_range.min.get(resource) or 0
                min_allowed = max(boundary_request(request, limit, lr_min, default_limit), lr_min)
                if min_allowed and value < min_allowed:
                    value = min_allowed
                    if notes is not None:
                        notes.append(f"{resource} {CAPPED_TO_LIMIT_RANGE_MIN}")
            if limit_range.max is not None:
                max_allowed = boundary_request(request, limit, limit_range.max.get(resource), default_limit)
                if max_allowed and value > max_allowed:
                    value = max_allowed
                    if notes is not None:
                        notes.append(f"{resource} {CAPPED_TO_LIMIT_RANGE_MAX}")
            amounts[r] = value
    policy = work.policy
    if policy is not None:
        for r, resource in enumerate(RESOURCE_NAMES):
            value = amounts[r]
            if value is None:
                continue
            policy_min = policy.min_allowed.get(resource)
            if policy_min and value < policy_min:
                value = policy_min
                if notes is not None:
                    notes.append(f"{resource} {CAPPED_TO_MIN_ALLOWED}")
            policy_max = policy.max_allowed.get(resource)
            if policy_max and value > policy_max:
                value = policy_max
                if notes is not None:
                    notes.append(f"{resource} {CAPPED_TO_MAX_ALLOWED}")
            amounts[r] = value
    if requests_only:
        for r, resource in enumerate(RESOURCE_NAMES):
            value = amounts[r]
            limit = limits.get(resource)
            if value is not None and limit is not None and value > limit:
                amounts[r] = limit
                if notes is not None:
                    notes.append(f"{resource} {CAPPED_TO_LIMIT}")


def _controlled(resources: Resources, policy: ContainerResourcePolicy | None) -> Amounts:
    amounts = _amounts(resources)
    for r, resource in enumerate(RESOURCE_NAMES):
        value = amounts[r]
        if value is not None and (value < 0 or (policy is not None and not policy.controls(resource))):
            amounts[r] = None
    return amounts


@dataclass(frozen=True, slots=True)
class CappedRecommendation:
    """The processed recommendation of one container (all three bounds) plus the target's capping notes."""

    target: Resources
    lower_bound: Resources
    upper_bound: Resources
    notes: tuple[str, ...]


def cap_pod_recommendations(
    pod: PodView, vpa: VpaView, limits: NamespaceLimits, *, bounds: bool = True
) -> tuple[CappedRecommendation | None, ...]:
    """Steps 1-3 of spec §5.4: one entry per `pod.containers` (None = no recommendation for it).

    With `bounds=False` only the target is processed (the lower/upper bounds come back unprocessed and
    empty): admission patches only use the target, and every step treats the bounds independently.
    """
    recommendation = vpa.recommendation
    if recommendation is None or not recommendation.containers:
        return (None,) * len(pod.containers)
    containers: list[_Working] = []
    for index, container in enumerate(pod.containers):
        policy = vpa.resource_policy.for_container(container.name)
        rec: RecommendedContainerResources | None = recommendation.for_container(container.name)
        if rec is not None and policy is not None and policy.is_off:
            rec = None
        containers.append(
            _Working(
                index=index,
                name=container.name,
                policy=policy,
                current_requests=pod.current_requests(container.name),
                current_limits=pod.current_limits(container.name),
                recommended=rec is not None,
                target=_controlled(rec.target, policy) if rec is not None else [None, None],
                lower=_controlled(rec.lower_bound, policy) if rec is not None and bounds else [None, None],
                upper=_controlled(rec.upper_bound, policy) if rec is not None and bounds else [None, None],
            )
        )
    if not any(work.recommended for work in containers):
        return (None,) * len(pod.containers)
    # Capped to the largest node (`--cap-to-largest-node`): the policy and LimitRanges applied again here
    # may lower the published values but never lift them back above what a node can hold (a `minAllowed`
    # bigger than any node would otherwise leave every recreated pod Pending, and the updater evicting
    # pods for not reaching it).
    capped_condition = vpa.status.condition(CAPPED_TO_NODE_CONDITION)
    node_capped = None
    if capped_condition is not None and capped_condition.status == "True":
        node_capped = recommendation
    if limits.pod is not None:
        apply_pod_limit_range(containers, limits.pod, bounds=bounds)
    out: list[CappedRecommendation | None] = []
    for work in containers:
        if not work.recommended:
            out.append(None)
            continue
        requests_only = (
            work.policy is not None
            and work.policy.effective_controlled_values is ControlledValues.REQUESTS_ONLY
        )
        notes: list[str] = []
        _cap_container(work.target, work, limits.container, requests_only, notes)
        if bounds:
            _cap_container(work.lower, work, limits.container, requests_only, None)
            _cap_container(work.upper, work, limits.container, requests_only, None)
        if node_capped is not None:
            published = node_capped.for_container(work.name)
            if published is not None:
                _at_most(work.target, published.target)
                if bounds:
                    _at_most(work.lower, published.lower_bound)
                    _at_most(work.upper, published.upper_bound)
        out.append(
            CappedRecommendation(
                target=_resources(work.target),
                lower_bound=_resources(work.lower),
                upper_bound=_resources(work.upper),
                notes=tuple(notes),
            )
        )
    return tuple(out)


def _at_most(amounts: Amounts, ceiling: Resources) -> None:
    """Lower each amount to `ceiling`'s value for that resource, where both are set."""
    for r, cap in enumerate(_amounts(ceiling)):
        value = amounts[r]
        if value is not None and cap is not None and value > cap:
            amounts[r] = cap


def container_limits(
    current_requests: Resources,
    current_limits: Resources,
    requests: Resources,
    default_limits: Resources | None,
) -> tuple[Resources, tuple[str, ...]]:
    """Proportional limits for new `requests` (upstream `GetProportionalLimit`): the limits and notes; when
    neither CPU nor memory gets a limit, no notes at all (as upstream)."""
    amounts: Amounts = [None, None]
    notes: list[str] = []
    for r, resource in enumerate(RESOURCE_NAMES):
        limit, note = proportional_limit(
            resource,
            current_limits.get(resource),
            current_requests.get(resource),
            requests.get(resource),
            default_limits.get(resource) if default_limits is not None else None,
        )
        amounts[r] = limit
        if note:
            notes.append(note)
    if amounts[0] is None and amounts[1] is None:
        return NO_RESOURCES, ()
    return _resources(amounts), tuple(notes)


def container_resources_for_pod(
    pod: PodView, vpa: VpaView, limits: NamespaceLimits
) -> tuple[ContainerResources, ...]:
    """Spec §5.4 in full: requests (capped target), limits and notes for every container of the pod, in
    `spec.containers` order. Containers without a recommendation get `EMPTY`. For a VPA in mode `Off`
    every entry is `EMPTY` (only a startup boost may apply; see `vpa.logic.admission.patches`)."""
    if vpa.effective_mode is UpdateMode.OFF:
        return (EMPTY,) * len(pod.containers)
    capped = cap_pod_recommendations(pod, vpa, limits, bounds=False)
    default_limits = limits.container.default if limits.container is not None else None
    out: list[ContainerResources] = []
    for container, rec in zip(pod.containers, capped, strict=True):
        if rec is None:
            out.append(EMPTY)
            continue
        policy = vpa.resource_policy.for_container(container.name)
        controlled_values = (
            policy.effective_controlled_values if policy is not None else ControlledValues.REQUESTS_AND_LIMITS
        )
        new_limits = NO_RESOURCES
        notes = rec.notes
        if controlled_values is ControlledValues.REQUESTS_AND_LIMITS:
            new_limits, limit_notes = container_limits(
                pod.current_requests(container.name),
                pod.current_limits(container.name),
                rec.target,
                default_limits,
            )
            if limit_notes:
                notes = notes + limit_notes
        out.append(ContainerResources(requests=rec.target, limits=new_limits, notes=notes))
    return tuple(out)
