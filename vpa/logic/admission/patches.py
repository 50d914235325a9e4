"""The JSON patch (RFC 6902) the admission webhook returns for a pod being created (spec §5.5, §5.6).

Owns: `PodShape` (which optional objects the raw pod has: `metadata.annotations`, each container's
`resources.requests` / `resources.limits`; a patch must create them before adding into them, and a
trimmed `PodView` cannot tell `{}` from absent or see resources other than cpu/memory), `pod_shape`
(reads it from the raw pod JSON), the CPU startup boost at admission (`boost_container`), and
`pod_patch`, which puts together, in upstream's order:
1. `add /metadata/annotations {}` when the pod has no annotations;
2. per container index i (spec order): the boost annotation `vpaCpuStartupBoost/<name>`, then
   `add …/resources {}` when the container has neither requests nor limits, `…/requests {}` /
   `…/limits {}` when missing and something goes there, then one `add` per value (cpu before memory);
3. `add /metadata/annotations/vpaUpdates` ("Pod resources updated by <vpa>: container <i>: <notes>,
   cpu request, memory request, cpu limit, memory limit; container <j>: …") when any container got a
   patch — including upstream's quirk: a container without recommendation and without resources still
   gets `resources: {}` and an empty `container <i>: ` entry;
4. `add /metadata/annotations/vpaObservedContainers` = all `spec.containers` names joined by ", ".

With gate `NativeSidecar` on (AEP-8905), native sidecars (init containers with `restartPolicy: Always`)
follow the containers: patched at `/spec/initContainers/<j>` when they have a recommendation (entry
`initContainer <j>: …` in `vpaUpdates`, no startup boost, no empty-`resources` quirk), and named after the
containers in `vpaObservedContainers`. Plain init containers are never patched.

With gate `CPUStartupBoost` on, containers whose policy mode is `Off` are skipped entirely (as upstream).
A container whose own values lead to an invalid quantity (negative, past 2**63-1, a limit below the
request) gets no patch at all (`writable`): never a value the API server would reject.
In mode `Off` only the boost is applied. Path segments are JSON-pointer escaped (`/` → `~1`, `~` → `~0`),
so `vpaCpuStartupBoost/app` is addressed as `vpaCpuStartupBoost~1app` (as upstream).

Must not: choose the VPA (that is `vpa.logic.matching`), compute recommendations (that is
`vpa.logic.capping`), log or do I/O. Values are plain JSON types, ready for orjson.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from vpa.logic.capping import ContainerResources, container_resources_for_pod, proportional_limit
from vpa.logic.initialdelay import in_initial_delay
from vpa.logic.limitranges import NamespaceLimits
from vpa.logic.podlevel import own_resources, plan_pod_level, pod_level_patch
from vpa.model import annotations as ann
from vpa.model import quantity
from vpa.model.features import FeatureGates
from vpa.model.pod import ContainerView, PodView
from vpa.model.resources import CPU, MEMORY, Resources, format_patch_amount
from vpa.model.vpa import ControlledValues, StartupBoost, StartupBoostType, UpdateMode, VpaView

Patch = dict[str, Any]
RESOURCE_NAMES: Final = (CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class ContainerShape:
    """Whether `resources.requests` / `resources.limits` are present (non-null, possibly `{}`)."""

    has_requests: bool = False
    has_limits: bool = False


@dataclass(frozen=True, slots=True)
class PodShape:
    has_annotations: bool = False
    containers: tuple[ContainerShape, ...] = ()
    init_containers: tuple[ContainerShape, ...] = ()


@dataclass(frozen=True, slots=True)
class AdmissionOptions:
    """The admission controller's settings the patch depends on."""

    gates: FeatureGates = field(default_factory=FeatureGates)
    max_allowed_cpu_boost_millicores: int | None = None  # --max-allowed-cpu-boost; None or 0 = no cap


def pod_shape(raw_pod: Mapping[str, Any]) -> PodShape:
    """The shape of a raw pod object. Never raises: anything that is not an object counts as absent."""
    metadata = raw_pod.get("metadata")
    has_annotations = isinstance(metadata, Mapping) and metadata.get("annotations") is not None
    spec = raw_pod.get("spec")
    return PodShape(
        has_annotations=has_annotations,
        containers=_container_shapes(spec.get("containers") if isinstance(spec, Mapping) else None),
        init_containers=_container_shapes(spec.get("initContainers") if isinstance(spec, Mapping) else None),
    )


def _container_shapes(raw_containers: object) -> tuple[ContainerShape, ...]:
    shapes: list[ContainerShape] = []
    if isinstance(raw_containers, list):
        for raw in raw_containers:
            resources = raw.get("resources") if isinstance(raw, Mapping) else None
            if not isinstance(resources, Mapping):
                shapes.append(ContainerShape())
                continue
            shapes.append(
                ContainerShape(
                    has_requests=resources.get("requests") is not None,
                    has_limits=resources.get("limits") is not None,
                )
            )
    return tuple(shapes)


def escape_pointer(segment: str) -> str:
    """One JSON-pointer reference token (RFC 6901): `~` → `~0`, then `/` → `~1`."""
    if "~" in segment or "/" in segment:
        return segment.replace("~", "~0").replace("/", "~1")
    return segment


def annotation_patch(key: str, value: str) -> Patch:
    return {"op": "add", "path": f"/metadata/annotations/{escape_pointer(key)}", "value": value}


@functools.lru_cache(maxsize=4096)  # recommendations repeat across replicas: format each amount once
def _quantity_text(resource: str, amount: int) -> str:
    return format_patch_amount(resource, amount)


# --- CPU startup boost (spec §5.6) --------------------------------------------------------------------


def boosted_cpu_millicores(
    base_millicores: int, boost: StartupBoost, max_allowed_millicores: int | None
) -> int | None:
    """The boosted CPU request: `base × factor` (`Factor`, also when the type is empty) or `base + quantity`
    (`Quantity`), capped at `--max-allowed-cpu-boost`. None when the policy is unusable (no factor, factor
    < 1, no quantity, unknown type: admission validation rejects those; upstream fails the admission)."""
    boost_type = boost.effective_type
    if boost_type == StartupBoostType.FACTOR:
        if boost.factor is None or boost.factor < 1:
            return None
        boosted = base_millicores * boost.factor
    elif boost_type == StartupBoostType.QUANTITY:
        if boost.quantity_millicores is None:
            return None
        boosted = base_millicores + boost.quantity_millicores
    else:
        return None
    if max_allowed_millicores and boosted > max_allowed_millicores:
        return max_allowed_millicores
    return boosted


def boost_container(
    container: ContainerView, vpa: VpaView, resources: ContainerResources, max_allowed_millicores: int | None
) -> tuple[ContainerResources, str] | None:
    """Apply the container's startup boost policy (container policy's, else the VPA's) to `resources`.

    Returns the boosted resources and the `vpaCpuStartupBoost/<name>` annotation value (the container's
    original spec resources), or None when no boost applies. The base is the recommended CPU request, or the
    original request when there is none; a zero base is not boosted (upstream would write a `0` request).
    `RequestsOnly` keeps the boosted request 1m below an existing CPU limit; `RequestsAndLimits` sets the
    CPU limit proportionally to the original limit/request ratio.
    """
    policy = vpa.resource_policy.for_container(container.name)
    boost = (
        policy.startup_boost if policy is not None and policy.startup_boost is not None else vpa.startup_boost
    )
    if boost is None:
        return None
    base = resources.requests.cpu_millicores or container.requests.cpu_millicores or 0
    if base <= 0:
        return None
    boosted = boosted_cpu_millicores(base, boost, max_allowed_millicores)
    if boosted is None:
        return None
    controlled_values = (
        policy.effective_controlled_values if policy is not None else ControlledValues.REQUESTS_AND_LIMITS
    )
    limits = resources.limits
    if controlled_values is ControlledValues.REQUESTS_ONLY:
        cpu_limit = container.limits.cpu_millicores
        if cpu_limit is not None and boosted > cpu_limit:
            boosted = cpu_limit - 1 if cpu_limit > 1 else cpu_limit
    else:
        new_limit, _ = proportional_limit(
            CPU, container.limits.cpu_millicores, container.requests.cpu_millicores, boosted, None
        )
        if new_limit is not None:
            limits = Resources(new_limit, limits.memory_bytes)
    requests = Resources(boosted, resources.requests.memory_bytes)
    original = ann.format_original_resources(container.requests, container.limits)
    return ContainerResources(requests=requests, limits=limits, notes=resources.notes), original


# --- the patch ----------------------------------------------------------------------------------------


class PodLevelInvalid(ValueError):
    """Gate `PodLevelResources`: no values keep this pod valid against its pod-level resources (the message
    says which rule); the admission controller then admits the pod unchanged."""


def requests_only(vpa: VpaView, recommended: Mapping[str, Resources]) -> bool:
    """Whether every recommended container's policy is `RequestsOnly` (then the pod-level limit stays)."""
    if not recommended:
        return False
    for name in recommended:
        policy = vpa.resource_policy.for_container(name)
        if policy is None or policy.effective_controlled_values is not ControlledValues.REQUESTS_ONLY:
            return False
    return True


def writable(resources: ContainerResources) -> bool:
    """Whether every value is a valid pod quantity (0 ≤ amount ≤ 2**63-1) and no limit is below the request
    set beside it. Only a pod's own absurd values (negative, `1e308`, a `1n` limit under a large request)
    lead to anything else; such a container is left as the pod wrote it."""
    for resource in RESOURCE_NAMES:
        request, limit = resources.requests.get(resource), resources.limits.get(resource)
        if request is not None and not quantity.in_pod_range(request):
            return False
        if limit is not None and not quantity.in_pod_range(limit):
            return False
        if request is not None and limit is not None and limit < request:
            return False
    return True



def _container_patches(
    pointer: str, label: str, shape: ContainerShape, resources: ContainerResources, ops: list[Patch]
) -> str | None:
    """Append the patches of the container at `pointer` (`/spec/containers/<i>`) to `ops`; return its
    `vpaUpdates` entry (`<label>: …`), or None if no patch."""
    start = len(ops)
    base = f"{pointer}/resources"
    if not shape.has_requests and not shape.has_limits:
        ops.append({"op": "add", "path": base, "value": {}})
    entries = list(resources.notes)
    for field_name, noun, values, present in (
        ("requests", "request", resources.requests, shape.has_requests),
        ("limits", "limit", resources.limits, shape.has_limits),
    ):
        if values.is_empty():
            continue
        if not present:
            ops.append({"op": "add", "path": f"{base}/{field_name}", "value": {}})
        for resource in RESOURCE_NAMES:
            amount = values.get(resource)
            if amount is None:
                continue
            ops.append(
                {
                    "op": "add",
                    "path": f"{base}/{field_name}/{escape_pointer(resource)}",
                    "value": _quantity_text(resource, amount),
                }
            )
            entries.append(f"{resource} {noun}")
    if len(ops) == start:
        return None
    return f"{label}: " + ", ".join(entries)


def pod_patch(
    pod: PodView,
    shape: PodShape,
    vpa: VpaView,
    limits: NamespaceLimits,
    options: AdmissionOptions = AdmissionOptions(),
    *,
    now: float | None = None,
) -> list[Patch]:
    """The JSON patch for `pod` (being created) controlled by `vpa` (already chosen by `matching`).

    `shape` must describe the same raw pod (`pod_shape(raw)`); `limits` are the merged LimitRanges of the
    pod's namespace. The result ends with the `vpaObservedContainers` annotation; it is empty for a VPA
    in mode `Off` unless gate `CPUStartupBoost` is on and the VPA configures a boost. With gate
    `VPAInitialDelay` and `now` inside the VPA's `initialDelaySeconds` window, the VPA is treated as `Off`.
    """
    boost_on = options.gates.cpu_startup_boost
    if now is not None and options.gates.vpa_initial_delay and in_initial_delay(vpa, now):
        vpa = dataclasses.replace(
            vpa, update_policy=dataclasses.replace(vpa.update_policy, update_mode=UpdateMode.OFF)
        )
    if vpa.effective_mode is UpdateMode.OFF and not (boost_on and vpa.has_startup_boost()):
        return []  # nothing to apply (matching skips such VPAs anyway)
    if options.gates.native_sidecar:
        pod = pod.with_native_sidecars()
    ops: list[Patch] = []
    if not shape.has_annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    resources = container_resources_for_pod(pod, vpa, limits)
    pod_level = options.gates.pod_level_resources and pod.has_pod_level_resources
    new_requests: dict[str, Resources] = {}
    new_limits: dict[str, Resources] = {}
    entries: list[str] = []
    for index, container in enumerate(pod.containers):
        container_resources = resources[index]  # all EMPTY in mode Off: only a boost applies
        if pod_level:
            # Only the resources the container sets itself; the others share the pod-level budget.
            container_resources = ContainerResources(
                own_resources(container, container_resources.requests),
                own_resources(container, container_resources.limits),
                container_resources.notes,
            )
            if container_resources.requests.is_empty() and container_resources.limits.is_empty():
                continue
        if container.is_sidecar:
            if container_resources.requests.is_empty() and container_resources.limits.is_empty():
                continue  # nothing for it: no empty `resources` quirk on a sidecar (upstream never had one)
        elif boost_on:  # sidecars get no boost (recommended values only)
            policy = vpa.resource_policy.for_container(container.name)
            if policy is not None and policy.is_off:
                continue
            boosted = boost_container(
                container, vpa, container_resources, options.max_allowed_cpu_boost_millicores
            )
            # A boost that would put the CPU request above its limit (a Container LimitRange capped the
            # limit) is not applied; the recommendation still is, as for any unusable boost.
            if boosted is not None and writable(boosted[0]):
                container_resources, original = boosted
                ops.append(annotation_patch(ann.cpu_startup_boost_key(container.name), original))
        if not writable(container_resources):
            continue  # from the pod's own absurd values: leave the container as written
        position, shapes, label = index, shape.containers, f"container {index}"
        in_init = pod.init_container_index(container.name) if container.is_sidecar else None
        if in_init is not None:
            position, shapes, label = in_init, shape.init_containers, f"initContainer {in_init}"
        container_shape = shapes[position] if position < len(shapes) else ContainerShape()
        pointer = pod.container_path(index)
        entry = _container_patches(pointer, label, container_shape, container_resources, ops)
        if entry is not None:
            entries.append(entry)
            new_requests[container.name] = container.requests.merged(container_resources.requests)
            new_limits[container.name] = container.limits.merged(container_resources.limits)
    if pod_level and vpa.effective_mode is not UpdateMode.OFF:
        recommended = {c.name: r.requests for c, r in zip(pod.containers, resources, strict=True)
                       if not r.requests.is_empty()}
        plan = plan_pod_level(pod, new_requests, new_limits, recommended,
                              requests_only=requests_only(vpa, recommended))
        if plan.problem:
            raise PodLevelInvalid(plan.problem)
        pod_ops, notes = pod_level_patch(pod, plan)
        if pod_ops:
            ops.extend(pod_ops)
            entries.append("pod: " + ", ".join(notes))
    if entries:
        ops.append(annotation_patch(ann.VPA_UPDATES, ann.format_vpa_updates(vpa.name, entries)))
    ops.append(
        annotation_patch(
            ann.VPA_OBSERVED_CONTAINERS, ann.format_observed_containers(c.name for c in pod.containers)
        )
    )
    return ops
