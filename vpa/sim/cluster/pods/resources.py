"""Pod resources as kube reads them: quantities, QoS class and effective requests.

Owns: parsing wire quantities (cached), a container's cpu and memory amounts, the containers of a spec
and which are sidecars, QoS class computation (`GetPodQOS`), the effective pod requests the scheduler and
kubelet use (init containers, sidecars, overhead, pod-level resources), the containers' aggregate and how
kube-apiserver prints it, and the resource and QoS names and resize restart policies.

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Final

from vpa.model.quantity import Quantity, QuantityError

Version = tuple[int, int]

CPU: Final = "cpu"
MEMORY: Final = "memory"
COMPUTE: Final = (CPU, MEMORY)

GUARANTEED: Final = "Guaranteed"
BURSTABLE: Final = "Burstable"
BEST_EFFORT: Final = "BestEffort"

NOT_REQUIRED: Final = "NotRequired"
RESTART_CONTAINER: Final = "RestartContainer"


# --- quantities -------------------------------------------------------------------------------------------


def quantity(value: object) -> Quantity:
    """Parse a wire quantity (string or number); raises QuantityError."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string, got {value!r}")
    if isinstance(value, int | float):
        return Quantity.parse(repr(value) if isinstance(value, float) else str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string, got {type(value).__name__}")
    return Quantity.parse(value)


def amount(resource: str, value: object) -> int:
    """CPU in millicores, anything else in whole units (bytes for memory)."""
    if isinstance(value, str):
        return _cached_amount(resource == CPU, value)
    q = quantity(value)
    return q.millis if resource == CPU else q.value


@functools.lru_cache(maxsize=8192)
def _cached_amount(millis: bool, text: str) -> int:
    # The same few quantity strings recur across thousands of pods: parse each once.
    q = Quantity.parse(text)
    return q.millis if millis else q.value


def resource_list(requirements: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    if not requirements:
        return {}
    rl = requirements.get(key)
    return dict(rl) if isinstance(rl, Mapping) else {}


def container_amounts(container: Mapping[str, Any], key: str) -> dict[str, int]:
    """`{"cpu": millicores, "memory": bytes}` of a container's `requests` or `limits` (unparsable skipped)."""
    out: dict[str, int] = {}
    for name, raw in resource_list(container.get("resources"), key).items():
        if name in COMPUTE:
            try:
                out[name] = amount(name, raw)
            except QuantityError:
                continue
    return out


def all_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


# --- QoS ----------------------------------------------------------------------------------------------------


def qos_class(pod: Mapping[str, Any]) -> str:
    """`ComputePodQOS`: Guaranteed / Burstable / BestEffort from cpu and memory requests and limits.

    Only cpu and memory count; zero amounts count as unset. Every container (init ones too) must have both
    limits and the summed requests must equal the summed limits for Guaranteed.
    """
    spec = pod.get("spec") or {}
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for container in all_containers(spec):
        resources = container.get("resources") or {}
        for name, raw in resource_list(resources, "requests").items():
            q = _safe_nanos(raw) if name in COMPUTE else None
            if q is not None and q > 0:
                requests[name] = requests.get(name, 0) + q
        found: set[str] = set()
        for name, raw in resource_list(resources, "limits").items():
            q = _safe_nanos(raw) if name in COMPUTE else None
            if q is not None and q > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + q
        if not set(COMPUTE) <= found:
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed:
        for name, req in requests.items():
            lim = limits.get(name)
            if lim is None or lim != req:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE


def _safe_nanos(raw: object) -> int | None:
    if isinstance(raw, str):
        try:
            return _cached_nanos(raw)
        except QuantityError:
            return None
    q = safe_quantity(raw)
    return q.nanos if q is not None else None


@functools.lru_cache(maxsize=8192)
def _cached_nanos(text: str) -> int:
    return Quantity.parse(text).nanos


def safe_quantity(raw: object) -> Quantity | None:
    try:
        return quantity(raw)
    except QuantityError:
        return None


# --- effective requests -------------------------------------------------------------------------------------


def effective_requests(
    spec: Mapping[str, Any],
    *,
    containers_override: Iterable[Mapping[str, int]] | None = None,
    pod_level: bool = True,
) -> tuple[int, int]:
    """(cpu millicores, memory bytes) a pod needs on a node, as `resource.PodRequests` computes it.

    Regular containers and sidecars add up; a non-restartable init container needs its own request plus the
    sidecars started before it, and the pod needs the maximum of the two. `containers_override` replaces the
    regular containers' requests (the kubelet's allocated amounts) in spec order. With `pod_level` (what the
    scheduler and kubelet use), a pod-level request in `spec.resources` stands for that resource instead of
    the containers' aggregate (PodLevelResources); without it, the containers' aggregate is returned (what
    validation and defaulting compare the pod-level values with).
    """
    regular = [container_amounts(c, "requests") for c in spec.get("containers") or []]
    if containers_override is not None:
        regular = [dict(r) for r in containers_override]
    cpu = sum(r.get(CPU, 0) for r in regular)
    mem = sum(r.get(MEMORY, 0) for r in regular)
    side_cpu = side_mem = 0
    init_cpu = init_mem = 0
    for init in spec.get("initContainers") or []:
        req = container_amounts(init, "requests")
        if is_sidecar(init):
            side_cpu += req.get(CPU, 0)
            side_mem += req.get(MEMORY, 0)
        else:
            init_cpu = max(init_cpu, side_cpu + req.get(CPU, 0))
            init_mem = max(init_mem, side_mem + req.get(MEMORY, 0))
    overhead = spec.get("overhead") or {}
    ov_cpu = amount(CPU, overhead[CPU]) if CPU in overhead else 0
    ov_mem = amount(MEMORY, overhead[MEMORY]) if MEMORY in overhead else 0
    need_cpu, need_mem = max(cpu + side_cpu, init_cpu), max(mem + side_mem, init_mem)
    if pod_level and isinstance(spec.get("resources"), Mapping):
        pod = container_amounts(spec, "requests")
        need_cpu = pod.get(CPU, need_cpu)
        need_mem = pod.get(MEMORY, need_mem)
    return need_cpu + ov_cpu, need_mem + ov_mem


def containers_aggregate(spec: Mapping[str, Any]) -> dict[str, int]:
    """The containers' aggregate request per resource, without overhead or pod-level values: what
    pod-level `spec.resources` is defaulted from and validated against."""
    return dict(zip(COMPUTE, effective_requests({**spec, "overhead": None}, pod_level=False), strict=True))


def aggregate_quantity(spec: Mapping[str, Any], name: str, need: int) -> Quantity:
    """The containers' aggregate `need` of cpu (millicores) or memory (bytes) as kube-apiserver prints it:
    memory in binary units when a container requests memory in them."""
    if name == CPU:
        return Quantity.from_millis(need)
    binary = any(
        _format_of(resource_list(c.get("resources"), "requests").get(MEMORY)) == "BinarySI"
        for c in all_containers(spec)
    )
    return Quantity.from_int(need, "BinarySI" if binary else "DecimalSI")


def _format_of(raw: object) -> str | None:
    try:
        return quantity(raw).format
    except QuantityError:
        return None
