"""Pod-level resources as the updater weighs them: the pod-level stanza as one more target, the container
targets a pod with pod-level resources leaves to its containers, and the pod-level plan that goes with a
set of
container changes. The rules themselves (what the pod level gets, whether the pod stays valid) are
`vpa.logic.podlevel`'s, shared with the admission webhook.

Must not: read gates or settings, log, or do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from vpa.logic.podlevel import RESOURCES, PodLevelPlan, all_containers, plan_pod_level, sets_own
from vpa.logic.updater.priority import ContainerTarget
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.vpa import RecommendedContainerResources

if TYPE_CHECKING:
    from vpa.logic.updater.inplace import Change

POD_LEVEL_INDEX: Final = -1
"""`container_index` of the pod-level pseudo target (`pod_level_target`): no container of the pod."""


def _sum(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def pod_level_target(pod: PodView, targets: Sequence[ContainerTarget]) -> ContainerTarget | None:
    """The pod-level stanza weighed as one more target of the updater: its current request is the pod-level
    request, its recommendation the sum over the running containers (regular and native sidecars) of their
    targets and bounds (a container without a recommendation counts with its own request). Only the
    resources the pod requests at the pod level; None when it requests none or nothing is recommended."""
    by_name = {t.name: t for t in targets}
    controlled = tuple(r for r in RESOURCES if pod.pod_requests.get(r) is not None)
    regular = {c.name for c in pod.containers if not c.is_sidecar}
    running = [c for c in all_containers(pod) if c.is_sidecar or c.name in regular]
    bounds: list[Resources] = []
    for pick in ("target", "lower_bound", "upper_bound"):
        amounts: list[int | None] = []
        for resource in RESOURCES:
            if resource not in controlled:
                amounts.append(None)
                continue
            values: list[int | None] = []
            recommended = False
            for container in running:
                target = by_name.get(container.name)
                value = None
                if target is not None and resource in target.controlled:
                    value = getattr(target.recommendation, pick).get(resource)
                    recommended = recommended or value is not None
                if value is None:
                    value = container.requests.get(resource) or 0
                values.append(value)
            amounts.append(_sum(values) if recommended else None)
        bounds.append(Resources(amounts[0], amounts[1]))
    if bounds[0].is_empty():
        return None
    recommendation = RecommendedContainerResources("", bounds[0], bounds[1], bounds[2], bounds[0])
    kept = tuple(r for r in controlled if bounds[0].get(r) is not None)
    return ContainerTarget(
        POD_LEVEL_INDEX, "", kept, CPU in kept, MEMORY in kept, False, recommendation, pod.pod_requests,
        pod.pod_limits,
    )


def own_targets(pod: PodView, targets: Sequence[ContainerTarget]) -> list[ContainerTarget]:
    """The container targets restricted to the resources each container sets itself (dropping containers
    left with none): what the updater may change at the container level of a pod with pod-level
    resources."""
    out: list[ContainerTarget] = []
    for target in targets:
        container = pod.containers[target.container_index]
        controlled = tuple(r for r in target.controlled if sets_own(container, r))
        if not controlled:
            continue
        if controlled != target.controlled:
            target = target._replace(controlled=controlled, controls_cpu=CPU in controlled,
                                     controls_memory=MEMORY in controlled)
        out.append(target)
    return out


def planner(pod: PodView, targets: Sequence[ContainerTarget]) -> Callable[[Sequence[Change]], PodLevelPlan]:
    """For the updater: the pod-level plan that goes with a set of container changes (`compute_changes`),
    given the (unrestricted) considered targets. RequestsOnly when every considered container is."""
    recommended = {
        t.name: Resources(*(t.recommendation.target.get(r) if r in t.controlled else None for r in RESOURCES))
        for t in targets if t.container_index != POD_LEVEL_INDEX
    }
    only_requests = bool(targets) and all(t.requests_only for t in targets
                                          if t.container_index != POD_LEVEL_INDEX)

    def plan(changes: Sequence[Change]) -> PodLevelPlan:
        requests: dict[str, Resources] = {}
        limits: dict[str, Resources] = {}
        for change in changes:
            container = pod.containers[change.container_index]
            if change.request is not None:
                current = requests.get(change.container, container.requests)
                requests[change.container] = current.merged(_only(change.resource, change.request))
            if change.limit is not None:
                current = limits.get(change.container, container.limits)
                limits[change.container] = current.merged(_only(change.resource, change.limit))
        return plan_pod_level(pod, requests, limits, recommended, requests_only=only_requests)

    return plan


def _only(resource: str, amount: int) -> Resources:
    return Resources(amount, None) if resource == CPU else Resources(None, amount)
