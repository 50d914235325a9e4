"""Pod-level resources (`spec.resources`, KEP-2837) under a VPA: gate `PodLevelResources` (AEP-7571 as
proposed, without its new API fields). What the admission controller and the updater set at the pod level,
and whether the pod stays valid.

Semantics (docs/pod-level-resources.md):
- container level: a container keeps getting recommended values only for the resources it sets itself (a
  request or a limit); the others stay unset and share the pod's budget (AEP-7571's selected option: "VPA
  controls pod-level resources and the initially set container-level resources") — `own_resources`;
- pod level, for each of cpu and memory the pod sets at the pod level: the request becomes the sum of the
  containers' recommended targets (a container without a recommendation counts with its own request), and
  at least the containers' aggregate request; the limit keeps its ratio to the request (`proportional_limit`,
  the one rule containers use) and is at least every container's limit; with `RequestsOnly` (every
  recommended container's policy) the limit stays and the request is capped at it;
- validity, as kube-apiserver checks it (`consistency_problem`): the pod-level request at least the
  aggregate container request (regular containers and native sidecars add up; a plain init container
  counts with the sidecars before it, and the pod takes the larger), no regular container's limit above the
  pod-level limit (kube-apiserver 1.35 does not compare init containers' or sidecars' limits with it), the
  pod-level request no higher than its limit. A pod that would break any of these is left unchanged (the
  problem says why).

Must not: read gates or settings, build container patches (that is `vpa.logic.admission.patches`), log,
or do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.logic.capping import proportional_limit
from vpa.model.pod import ContainerView, PodView
from vpa.model.resources import CPU, MEMORY, Resources, format_patch_amount

RESOURCES: Final = (CPU, MEMORY)
NONE: Final = Resources()


@dataclass(frozen=True, slots=True)
class PodLevelPlan:
    """The pod-level values a pod should get. `requests`/`limits` hold only what the pod sets at the pod
    level; `problem` non-empty means the pod cannot be kept valid and must be left as it is."""

    requests: Resources = NONE
    limits: Resources = NONE
    problem: str = ""

    def changes(self, pod: PodView) -> bool:
        """Whether applying the plan changes the pod's pod-level values."""
        return not self.problem and (self.requests != pod.pod_requests or self.limits != pod.pod_limits)


def sets_own(container: ContainerView, resource: str) -> bool:
    """Whether the container itself sets `resource` (a request or a limit)."""
    return container.requests.get(resource) is not None or container.limits.get(resource) is not None


def own_resources(container: ContainerView, values: Resources) -> Resources:
    """`values` restricted to the resources the container sets itself."""
    cpu = values.cpu_millicores if sets_own(container, CPU) else None
    memory = values.memory_bytes if sets_own(container, MEMORY) else None
    if cpu == values.cpu_millicores and memory == values.memory_bytes:
        return values
    return Resources(cpu, memory)


def aggregate_requests(pod: PodView, requests: Mapping[str, Resources]) -> Resources:
    """The containers' aggregate request as kube-apiserver computes it for validation: regular containers
    and native sidecars add up; a plain init container needs its request plus the sidecars started before
    it; the pod needs the larger. `requests` overrides a container's spec requests by name."""
    totals: list[int] = []
    for resource in RESOURCES:
        running = sum((requests.get(c.name, c.requests)).get(resource) or 0 for c in pod.containers
                      if not c.is_sidecar)
        sidecars = peak = 0
        for init in pod.init_containers:
            amount = (requests.get(init.name, init.requests)).get(resource) or 0
            if init.is_sidecar:
                sidecars += amount
            else:
                peak = max(peak, sidecars + amount)
        totals.append(max(running + sidecars, peak))
    return Resources(totals[0], totals[1])


def _regular(pod: PodView) -> Iterable[ContainerView]:
    """`spec.containers`: the only ones whose limits kube-apiserver compares with the pod-level limit."""
    return (c for c in pod.containers if not c.is_sidecar)


def all_containers(pod: PodView) -> Iterable[ContainerView]:
    seen: set[str] = set()
    for container in (*pod.containers, *pod.init_containers):
        if container.name not in seen:
            seen.add(container.name)
            yield container


def consistency_problem(pod: PodView, pod_requests: Resources, pod_limits: Resources,
                        requests: Mapping[str, Resources], limits: Mapping[str, Resources]) -> str:
    """Why kube-apiserver would reject the pod with these pod-level and container values ("" if it would
    not). `requests`/`limits` override containers' spec values by name."""
    aggregate = aggregate_requests(pod, requests)
    for resource in RESOURCES:
        pod_request, pod_limit = pod_requests.get(resource), pod_limits.get(resource)
        need = aggregate.get(resource) or 0
        if pod_request is not None and need > pod_request:
            return (f"the containers' {resource} requests add up to {_text(resource, need)}, above the "
                    f"pod-level request of {_text(resource, pod_request)}")
        if pod_request is not None and pod_limit is not None and pod_request > pod_limit:
            return (f"the pod-level {resource} request {_text(resource, pod_request)} would be above the "
                    f"pod-level limit of {_text(resource, pod_limit)}")
        if pod_limit is None:
            continue
        for container in _regular(pod):
            limit = limits.get(container.name, container.limits).get(resource)
            if limit is not None and limit > pod_limit:
                return (f"container {container.name}'s {resource} limit {_text(resource, limit)} would be "
                        f"above the pod-level limit of {_text(resource, pod_limit)}")
    return ""


def _text(resource: str, amount: int) -> str:
    return format_patch_amount(resource, amount)


def plan_pod_level(
    pod: PodView,
    requests: Mapping[str, Resources],
    limits: Mapping[str, Resources],
    recommended: Mapping[str, Resources],
    *,
    requests_only: bool,
) -> PodLevelPlan:
    """The pod-level values for `pod` once its containers have `requests`/`limits` (by name; others keep
    their spec values), given the recommended (capped) targets of the containers that have one.

    Only resources the pod sets at the pod level are planned; a resource no container has a recommendation
    for keeps its pod-level values (and is still checked). `requests_only`: the pod-level limit stays.
    """
    aggregate = aggregate_requests(pod, requests)
    regular = {c.name for c in pod.containers if not c.is_sidecar}
    new_requests: list[int | None] = []
    new_limits: list[int | None] = []
    for resource in RESOURCES:
        old_request, old_limit = pod.pod_requests.get(resource), pod.pod_limits.get(resource)
        request, limit = old_request, old_limit
        targets = [values.get(resource) for values in recommended.values()]
        if (old_request is not None or old_limit is not None) and any(t is not None for t in targets):
            total = 0
            for container in all_containers(pod):
                if not (container.is_sidecar or container.name in regular):
                    continue  # a plain init container has exited: only the aggregate counts it
                target = recommended.get(container.name, NONE).get(resource)
                if target is None:
                    target = requests.get(container.name, container.requests).get(resource) or 0
                total += target
            wanted = max(total, aggregate.get(resource) or 0)
            base = old_request if old_request is not None else old_limit
            if requests_only:
                request = wanted if old_limit is None else min(wanted, old_limit)
            else:
                request = wanted
                if old_limit is not None:
                    scaled, _ = proportional_limit(resource, old_limit, base, wanted, None)
                    limit = scaled if scaled is not None else old_limit
                    highest = max((limits.get(c.name, c.limits).get(resource) or 0
                                   for c in _regular(pod)), default=0)
                    limit = max(limit, highest, request)
            if old_request is None:
                request = None  # the API defaults pod-level requests from limits; never add the field here
        new_requests.append(request)
        new_limits.append(limit)
    plan_requests = Resources(new_requests[0], new_requests[1])
    plan_limits = Resources(new_limits[0], new_limits[1])
    problem = consistency_problem(pod, plan_requests, plan_limits, requests, limits)
    return PodLevelPlan(plan_requests, plan_limits, problem)


def pod_level_patch(pod: PodView, plan: PodLevelPlan) -> tuple[list[dict[str, Any]], list[str]]:
    """JSON Patch `add` operations setting the plan's changed pod-level values (into the existing
    `spec.resources.requests`/`limits` maps), and the `vpaUpdates` notes (`cpu request`, …)."""
    ops: list[dict[str, Any]] = []
    notes: list[str] = []
    for part, noun, new, old in (("requests", "request", plan.requests, pod.pod_requests),
                                 ("limits", "limit", plan.limits, pod.pod_limits)):
        for resource in RESOURCES:
            value = new.get(resource)
            if value is None or value == old.get(resource):
                continue
            ops.append({"op": "add", "path": f"/spec/resources/{part}/{resource}",
                        "value": format_patch_amount(resource, value)})
            notes.append(f"{resource} {noun}")
    return ops, notes
