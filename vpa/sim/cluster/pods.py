"""Pod semantics of kube-apiserver, as pure functions over wire-form pod dicts.

Owns: QoS class computation (`GetPodQOS`), the effective pod requests the scheduler and kubelet use,
pod defaulting at CREATE (`SetDefaults_Pod` / `SetDefaults_PodSpec` / container defaults; no `resizePolicy`
defaulting, which current Kubernetes does not do), create validation of container resources, the update
rule "pod spec is immutable except image, activeDeadlineSeconds, tolerations additions, ...", the
`pods/resize` merge (`dropNonResizeUpdates`) and validation (`ValidatePodResize`) per Kubernetes version,
the LimitRanger admission plugin (defaults and min/max/ratio enforcement) and label-selector matching.

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.model.quantity import Quantity, QuantityError
from vpa.sim.contracts import ApiError, JsonObj

Version = tuple[int, int]

CPU: Final = "cpu"
MEMORY: Final = "memory"
COMPUTE: Final = (CPU, MEMORY)

GUARANTEED: Final = "Guaranteed"
BURSTABLE: Final = "Burstable"
BEST_EFFORT: Final = "BestEffort"

NOT_REQUIRED: Final = "NotRequired"
RESTART_CONTAINER: Final = "RestartContainer"

_UPDATE_FORBIDDEN_MESSAGE: Final = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


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
    q = _safe_quantity(raw)
    return q.nanos if q is not None else None


@functools.lru_cache(maxsize=8192)
def _cached_nanos(text: str) -> int:
    return Quantity.parse(text).nanos


def _safe_quantity(raw: object) -> Quantity | None:
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


# --- defaulting ---------------------------------------------------------------------------------------------


def _default_container(container: dict[str, Any]) -> None:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = {}
        container["resources"] = resources
    limits = resources.get("limits")
    if isinstance(limits, dict) and limits:
        requests = resources.get("requests")
        if not isinstance(requests, dict):
            requests = {}
            resources["requests"] = requests
        for name, value in limits.items():
            requests.setdefault(name, value)
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image") or "")
    if "imagePullPolicy" not in container:
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        latest = image.endswith(":latest") or not tagged
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"


def _default_pod_requests(spec: dict[str, Any]) -> None:
    """`defaultPodRequests` (kube-apiserver 1.34+, PodLevelResources beta), after the containers' own
    defaults: a cpu or memory pod-level limit without a pod-level request gives the request the containers'
    aggregate request when they request that resource at all (regular containers and sidecars add up, an
    init container counts with the sidecars before it), else the limit's value."""
    resources = spec.get("resources")
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return
    requests = resources.get("requests")
    merged = dict(requests) if isinstance(requests, dict) else {}
    aggregate = containers_aggregate(spec)
    for name, value in limits.items():
        if name in COMPUTE and name not in merged:
            need = aggregate[name]
            merged[name] = _aggregate_quantity(spec, name, need).canonical() if need else value
    if merged:
        resources["requests"] = merged


def _aggregate_quantity(spec: Mapping[str, Any], name: str, need: int) -> Quantity:
    """The containers' aggregate `need` of cpu (millicores) or memory (bytes) as kube-apiserver prints it:
    memory in binary units when a container requests memory in them."""
    if name == CPU:
        return Quantity.from_millis(need)
    binary = any(
        _format_of(resource_list(c.get("resources"), "requests").get(MEMORY)) == "BinarySI"
        for c in all_containers(spec)
    )
    return Quantity.from_int(need, "BinarySI" if binary else "DecimalSI")


def default_pod(pod: JsonObj, version: Version) -> None:
    """Defaults the apiserver applies to a new pod (in place); `resizePolicy` stays as the client sent it."""
    spec = pod.setdefault("spec", {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if isinstance(container, dict):
            _default_container(container)
    _default_pod_requests(spec)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("serviceAccountName", "default")
    tolerations = list(spec.get("tolerations") or [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        # DefaultTolerationSeconds admission plugin.
        if not any(t.get("key") == key for t in tolerations):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    spec["tolerations"] = tolerations
    status = pod.setdefault("status", {})
    status["phase"] = "Pending"
    status["qosClass"] = qos_class(pod)
    meta = pod.setdefault("metadata", {})
    if version >= (1, 33):
        meta["generation"] = 1


# --- create validation --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldError:
    """One `field.Error`: path, type (`Invalid`, `Forbidden`, `Required`, `Unsupported`), value, detail."""

    path: str
    type: str
    detail: str
    value: object = None

    def text(self) -> str:
        label = {
            "Invalid": "Invalid value",
            "Forbidden": "Forbidden",
            "Required": "Required value",
            "Unsupported": "Unsupported value",
            "NotSupported": "Unsupported value",
            "Duplicate": "Duplicate value",
        }[self.type]
        if self.type in ("Invalid", "Duplicate", "Unsupported"):
            return f"{self.path}: {label}: {_go_value(self.value)}: {self.detail}"
        return f"{self.path}: {label}: {self.detail}"

    def cause(self) -> dict[str, str]:
        reason = {
            "Invalid": "FieldValueInvalid",
            "Forbidden": "FieldValueForbidden",
            "Required": "FieldValueRequired",
            "Unsupported": "FieldValueNotSupported",
            "NotSupported": "FieldValueNotSupported",
            "Duplicate": "FieldValueDuplicate",
        }[self.type]
        message = self.text().split(": ", 1)[1]
        return {"reason": reason, "message": message, "field": self.path}


def _go_value(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    return str(value)


def invalid(kind: str, name: str, errors: list[FieldError], group: str = "") -> ApiError:
    """The 422 `StatusReasonInvalid` error `errors.NewInvalid` builds."""
    texts = [e.text() for e in errors]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {joined}',
        causes=[e.cause() for e in errors],
        kind=kind,
        name=name,
        group=group,
    )


def validate_container_resources(container: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    resources = container.get("resources") or {}
    reqs = resource_list(resources, "requests")
    lims = resource_list(resources, "limits")
    parsed: dict[str, dict[str, Quantity]] = {"requests": {}, "limits": {}}
    for key, rl in (("requests", reqs), ("limits", lims)):
        for name, raw in rl.items():
            try:
                q = quantity(raw)
            except QuantityError:
                errs.append(FieldError(f"{path}.{key}[{name}]", "Invalid", "must be a valid quantity", raw))
                continue
            if q.nanos < 0:
                errs.append(
                    FieldError(f"{path}.{key}[{name}]", "Invalid", "must be greater than or equal to 0", raw)
                )
            parsed[key][name] = q
    for name, req in parsed["requests"].items():
        lim = parsed["limits"].get(name)
        if lim is not None and req > lim:
            errs.append(
                FieldError(
                    f"{path}.requests",
                    "Invalid",
                    f"must be less than or equal to {name} limit of {lim.canonical()}",
                    req.canonical(),
                )
            )
    return errs


def validate_resize_policy(container: Mapping[str, Any], path: str, restart_policy: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, policy in enumerate(container.get("resizePolicy") or []):
        name = policy.get("resourceName")
        value = policy.get("restartPolicy")
        if name not in COMPUTE:
            errs.append(
                FieldError(
                    f"{path}.resizePolicy[{i}].resourceName",
                    "Unsupported",
                    'supported values: "cpu", "memory"',
                    name,
                )
            )
        elif name in seen:
            errs.append(FieldError(f"{path}.resizePolicy[{i}].resourceName", "Invalid", "duplicate", name))
        seen.add(str(name))
        if value not in (NOT_REQUIRED, RESTART_CONTAINER):
            errs.append(
                FieldError(
                    f"{path}.resizePolicy[{i}].restartPolicy",
                    "Unsupported",
                    'supported values: "NotRequired", "RestartContainer"',
                    value,
                )
            )
        elif restart_policy == "Never" and value != NOT_REQUIRED:
            errs.append(
                FieldError(
                    f"{path}.resizePolicy[{i}].restartPolicy",
                    "Invalid",
                    "must be 'NotRequired' when `restartPolicy` is 'Never'",
                    value,
                )
            )
    return errs


def validate_pod_spec(spec: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        errs.append(FieldError("spec.containers", "Required", "must have at least one container"))
    names: set[str] = set()
    restart_policy = str(spec.get("restartPolicy") or "Always")
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            path = f"spec.{key}[{i}]"
            name = container.get("name")
            if not name:
                errs.append(FieldError(f"{path}.name", "Required", ""))
            elif name in names:
                errs.append(FieldError(f"{path}.name", "Duplicate", "", name))
            names.add(str(name))
            if not container.get("image"):
                errs.append(FieldError(f"{path}.image", "Required", ""))
            errs.extend(validate_container_resources(container, f"{path}.resources"))
            errs.extend(validate_resize_policy(container, path, restart_policy))
    if spec.get("resources"):
        errs.extend(validate_container_resources(spec, "spec.resources"))
        errs.extend(validate_pod_level_resources(spec))
    return errs


def validate_pod_level_resources(spec: Mapping[str, Any]) -> list[FieldError]:
    """Pod-level `spec.resources` against the containers', as kube-apiserver's resource-consistency check:
    each pod-level request at least the containers' aggregate request (init containers and sidecars counted
    as the scheduler counts them), and no container limit above the pod-level limit."""
    errs: list[FieldError] = []
    pod = spec.get("resources") or {}
    aggregate = containers_aggregate(spec)
    for name, raw in resource_list(pod, "requests").items():
        if name not in COMPUTE or not aggregate.get(name):
            continue
        try:
            wanted = quantity(raw)
        except QuantityError:
            continue
        need = aggregate[name]
        have = wanted.millis if name == CPU else wanted.value
        if need > have:
            total = _aggregate_quantity(spec, name, need)
            errs.append(
                FieldError(
                    f"spec.resources.requests[{name}]",
                    "Invalid",
                    f"must be greater than or equal to aggregate container requests of {total.canonical()}",
                    wanted.canonical(),
                )
            )
    limits = resource_list(pod, "limits")
    for i, container in enumerate(spec.get("containers") or []):
        for name, raw in resource_list(container.get("resources"), "limits").items():
            if name not in limits or name not in COMPUTE:
                continue
            try:
                mine, cap = quantity(raw), quantity(limits[name])
            except QuantityError:
                continue
            if mine.nanos > cap.nanos:
                errs.append(
                    FieldError(
                        f"spec.resources.containers[{i}][{name}].limits",
                        "Invalid",
                        f"must be less than or equal to pod limits of {cap.canonical()}",
                        mine.canonical(),
                    )
                )
    return errs


def _format_of(raw: object) -> str | None:
    try:
        return quantity(raw).format
    except QuantityError:
        return None


# --- update validation --------------------------------------------------------------------------------------


def _strip_mutable(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> JsonObj:
    """The spec with the fields a plain pod update may change replaced by the old pod's values."""
    out = copy.deepcopy(dict(spec))
    for key in ("containers", "initContainers"):
        new_list = out.get(key) or []
        old_list = old_spec.get(key) or []
        for i, container in enumerate(new_list):
            if i < len(old_list) and isinstance(container, dict):
                container["image"] = old_list[i].get("image")
    out["activeDeadlineSeconds"] = old_spec.get("activeDeadlineSeconds")
    old_tol = list(old_spec.get("tolerations") or [])
    new_tol = list(out.get("tolerations") or [])
    if all(t in new_tol for t in old_tol):
        out["tolerations"] = old_tol  # only additions allowed
    if (
        spec.get("terminationGracePeriodSeconds") == 1
        and (old_spec.get("terminationGracePeriodSeconds") or 0) < 0
    ):
        out["terminationGracePeriodSeconds"] = old_spec.get("terminationGracePeriodSeconds")
    # Removing scheduling gates is allowed.
    if not out.get("schedulingGates") and old_spec.get("schedulingGates"):
        out["schedulingGates"] = old_spec.get("schedulingGates")
    for key in ("activeDeadlineSeconds", "schedulingGates"):
        if out.get(key) is None:
            out.pop(key, None)
    return out


def _normalise(spec: Mapping[str, Any]) -> JsonObj:
    out = copy.deepcopy(dict(spec))
    for key in list(out):
        if out[key] in (None, [], {}) and key not in ("containers",):
            out.pop(key)
    return out


def validate_pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """ValidatePodUpdate's spec rule for a plain PUT/PATCH of a pod (not /status, /resize, /binding)."""
    old_spec = old.get("spec") or {}
    new_spec = new.get("spec") or {}
    errs: list[FieldError] = []
    if len(new_spec.get("containers") or []) != len(old_spec.get("containers") or []):
        return [FieldError("spec.containers", "Forbidden", "pod updates may not add or remove containers")]
    candidate = _strip_mutable(new_spec, old_spec)
    if _normalise(candidate) != _normalise(old_spec):
        errs.append(FieldError("spec", "Forbidden", _UPDATE_FORBIDDEN_MESSAGE))
    ads_old, ads_new = old_spec.get("activeDeadlineSeconds"), new_spec.get("activeDeadlineSeconds")
    if ads_old is not None and (ads_new is None or ads_new > ads_old):
        errs.append(
            FieldError(
                "spec.activeDeadlineSeconds",
                "Invalid",
                "must be less than or equal to previous value",
                ads_new,
            )
        )
    return errs


# --- resize -------------------------------------------------------------------------------------------------


def resize_merge(
    old: Mapping[str, Any], patched: Mapping[str, Any], *, pod_level: bool = False
) -> tuple[JsonObj, list[str]]:
    """`dropNonResizeUpdates`: the old pod with only container resources and resizePolicy from `patched`,
    and with `pod_level` (kube's `InPlacePodLevelResourcesVerticalScaling`, alpha in 1.35) `spec.resources`.

    Everything else the client changed through /resize is silently discarded, as kube-apiserver does.
    Also returns the names of containers in `patched` that the pod does not have (a validation error).
    """
    out = copy.deepcopy(dict(old))
    new_spec = patched.get("spec") or {}
    out_spec = out.setdefault("spec", {})
    if pod_level and (old.get("spec") or {}).get("resources") is not None and new_spec.get("resources"):
        out_spec["resources"] = copy.deepcopy(new_spec["resources"])
    for key in ("containers", "initContainers"):
        by_name = {c.get("name"): c for c in new_spec.get(key) or [] if isinstance(c, Mapping)}
        for container in out_spec.get(key) or []:
            src = by_name.get(container.get("name"))
            if src is None:
                continue
            if "resources" in src:
                container["resources"] = copy.deepcopy(src.get("resources") or {})
            else:
                container.pop("resources", None)
            if src.get("resizePolicy") is not None:
                container["resizePolicy"] = copy.deepcopy(src["resizePolicy"])
            else:
                container.pop("resizePolicy", None)
    known = {c.get("name") for key in ("containers", "initContainers") for c in out_spec.get(key) or []}
    unknown = [
        str(c.get("name"))
        for key in ("containers", "initContainers")
        for c in new_spec.get(key) or []
        if isinstance(c, Mapping) and c.get("name") not in known
    ]
    return out, unknown


def restart_policy_for(container: Mapping[str, Any], resource: str) -> str:
    for policy in container.get("resizePolicy") or []:
        if policy.get("resourceName") == resource:
            return str(policy.get("restartPolicy") or NOT_REQUIRED)
    return NOT_REQUIRED


def _resources_removed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    return any(name not in new for name in old)


def validate_resize(
    old: Mapping[str, Any], new: Mapping[str, Any], version: Version, *, pod_level: bool = False
) -> list[FieldError]:
    """`ValidatePodResize` for the given Kubernetes minor version (1.32 .. 1.36). Without `pod_level`
    (`InPlacePodLevelResourcesVerticalScaling`, alpha and off in 1.35) a pod with pod-level resources
    cannot be resized at all, its containers neither."""
    errs: list[FieldError] = []
    old_meta = old.get("metadata") or {}
    if "kubernetes.io/config.mirror" in (old_meta.get("annotations") or {}):
        return [FieldError("", "Forbidden", "static pods cannot be resized")]
    old_spec = old.get("spec") or {}
    new_spec = new.get("spec") or {}
    if (old_spec.get("os") or {}).get("name") == "windows":
        return [FieldError("", "Forbidden", "windows pods cannot be resized")]
    errs.extend(validate_pod_spec(new_spec))
    if old_spec.get("resources") and not pod_level:
        errs.append(
            FieldError(
                "[]",
                "Forbidden",
                "resize of pods with pod-level resources is forbidden when "
                "InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled",
            )
        )
    old_qos = (old.get("status") or {}).get("qosClass") or qos_class(old)
    if old_qos != qos_class(new):
        errs.append(
            FieldError(
                "spec",
                "Invalid",
                "Pod QOS Class may not change as a result of resizing",
                (new.get("status") or {}).get("qosClass", ""),
            )
        )
    if not resize_supported(old):
        errs.append(FieldError("spec", "Forbidden", "Pod running on node without support for resize"))
    for key in ("initContainers", "containers"):
        for i, old_c in enumerate(old_spec.get(key) or []):
            new_c = (new_spec.get(key) or [])[i]
            path = f"spec.{key}[{i}].resources"
            old_r = old_c.get("resources") or {}
            new_r = new_c.get("resources") or {}
            if key == "initContainers" and not is_sidecar(old_c):
                if old_r != new_r:
                    errs.append(
                        FieldError(
                            "spec",
                            "Forbidden",
                            "only cpu and memory resources for sidecar containers are mutable",
                        )
                    )
                continue
            if _resources_removed(resource_list(new_r, "requests"), resource_list(old_r, "requests")):
                errs.append(
                    FieldError(f"{path}.requests", "Forbidden", "resource requests cannot be removed")
                )
            if _resources_removed(resource_list(new_r, "limits"), resource_list(old_r, "limits")):
                errs.append(FieldError(f"{path}.limits", "Forbidden", "resource limits cannot be removed"))
            if version == (1, 33):
                old_lim = resource_list(old_r, "limits").get(MEMORY)
                new_lim = resource_list(new_r, "limits").get(MEMORY)
                if old_lim is not None and new_lim is not None:
                    o, n = _safe_quantity(old_lim), _safe_quantity(new_lim)
                    if (
                        o is not None
                        and n is not None
                        and n < o
                        and restart_policy_for(new_c, MEMORY) != RESTART_CONTAINER
                    ):
                        errs.append(
                            FieldError(
                                f"{path}.limits[memory]",
                                "Forbidden",
                                "memory limits cannot be decreased unless resizePolicy is RestartContainer",
                            )
                        )
            other_old = {k: v for k, v in resource_list(old_r, "requests").items() if k not in COMPUTE}
            other_new = {k: v for k, v in resource_list(new_r, "requests").items() if k not in COMPUTE}
            other_old_l = {k: v for k, v in resource_list(old_r, "limits").items() if k not in COMPUTE}
            other_new_l = {k: v for k, v in resource_list(new_r, "limits").items() if k not in COMPUTE}
            extra_keys = {k for k in new_r if k not in ("requests", "limits")} != {
                k for k in old_r if k not in ("requests", "limits")
            }
            if other_old != other_new or other_old_l != other_new_l or extra_keys:
                errs.append(FieldError("spec", "Forbidden", "only cpu and memory resources are mutable"))
            if version < (1, 33) and (old_c.get("resizePolicy") or []) != (new_c.get("resizePolicy") or []):
                errs.append(FieldError(f"spec.{key}[{i}].resizePolicy", "Forbidden", "field is immutable"))
    return errs


def resize_supported(pod: Mapping[str, Any]) -> bool:
    """`isPodResizeRequestSupported`: a running pod needs container-status `resources` (resize-aware node)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return True
    for cs in status.get("containerStatuses") or []:
        if cs.get("state", {}).get("running") is not None and cs.get("resources") is None:
            return False
    return True


def resources_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Did any container's cpu/memory requests or limits change (by value)?"""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    for key in ("initContainers", "containers"):
        for o, n in zip(old_spec.get(key) or [], new_spec.get(key) or [], strict=False):
            for part in ("requests", "limits"):
                if container_amounts(o, part) != container_amounts(n, part):
                    return True
    return False


# --- LimitRanger --------------------------------------------------------------------------------------------


def limit_range_defaults(pod: JsonObj, limit_ranges: Iterable[Mapping[str, Any]]) -> None:
    """`defaultContainerResourceRequirements` for each Container item; records the limit-ranger annotation."""
    notes: list[str] = []
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            default_lim = dict(item.get("default") or {})
            default_req = dict(item.get("defaultRequest") or {})
            # SetDefaults_LimitRangeItem: default limit from max, default request from default limit or min.
            for k, v in (item.get("max") or {}).items():
                default_lim.setdefault(k, v)
            for k, v in default_lim.items():
                default_req.setdefault(k, v)
            for k, v in (item.get("min") or {}).items():
                default_req.setdefault(k, v)
            spec = pod.get("spec") or {}
            for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                resources = container.setdefault("resources", {})
                set_req = [k for k in default_req if k not in (resources.get("requests") or {})]
                set_lim = [k for k in default_lim if k not in (resources.get("limits") or {})]
                if set_req:
                    reqs = resources.setdefault("requests", {})
                    for k in set_req:
                        reqs[k] = default_req[k]
                    notes.append(
                        f"{', '.join(sorted(set_req))} request for container {container.get('name')}"
                    )
                if set_lim:
                    lims = resources.setdefault("limits", {})
                    for k in set_lim:
                        lims[k] = default_lim[k]
                    notes.append(f"{', '.join(sorted(set_lim))} limit for container {container.get('name')}")
    if notes:
        annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
        annotations["kubernetes.io/limit-ranger"] = "LimitRanger plugin set: " + "; ".join(notes)


def limit_range_violations(pod: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]]) -> list[str]:
    """Min / max / maxLimitRequestRatio checks of Container and Pod items, with kube's messages."""
    errors: list[str] = []
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            kind = item.get("type")
            if kind == "Container":
                for container in containers:
                    resources = container.get("resources") or {}
                    errors.extend(
                        _check_item(
                            item,
                            "Container",
                            resource_list(resources, "requests"),
                            resource_list(resources, "limits"),
                        )
                    )
            elif kind == "Pod":
                req_sum: dict[str, int] = {}
                lim_sum: dict[str, int] = {}
                missing_lim: set[str] = set()
                for container in spec.get("containers") or []:
                    for k, v in container_amounts(container, "requests").items():
                        req_sum[k] = req_sum.get(k, 0) + v
                    lims = container_amounts(container, "limits")
                    for k in COMPUTE:
                        if k in lims:
                            lim_sum[k] = lim_sum.get(k, 0) + lims[k]
                        else:
                            missing_lim.add(k)
                req_text = {k: _fmt(k, v) for k, v in req_sum.items()}
                lim_text = {k: _fmt(k, v) for k, v in lim_sum.items() if k not in missing_lim}
                errors.extend(_check_item(item, "Pod", req_text, lim_text))
    return errors


def _fmt(resource: str, value: int) -> str:
    return (
        Quantity.from_millis(value) if resource == CPU else Quantity.from_int(value, "BinarySI")
    ).canonical()


def _check_item(
    item: Mapping[str, Any], kind: str, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> list[str]:
    errors: list[str] = []
    for name, enforced_raw in (item.get("min") or {}).items():
        enforced = quantity(enforced_raw)
        req, lim = requests.get(name), limits.get(name)
        if req is None:
            errors.append(
                f"minimum {name} usage per {kind} is {enforced.canonical()}.  No request is specified"
            )
        elif quantity(req) < enforced:
            errors.append(
                f"minimum {name} usage per {kind} is {enforced.canonical()}, but request is "
                f"{quantity(req).canonical()}"
            )
        elif lim is not None and quantity(lim) < enforced:
            errors.append(
                f"minimum {name} usage per {kind} is {enforced.canonical()}, but limit is "
                f"{quantity(lim).canonical()}"
            )
    for name, enforced_raw in (item.get("max") or {}).items():
        enforced = quantity(enforced_raw)
        req, lim = requests.get(name), limits.get(name)
        if lim is None:
            errors.append(
                f"maximum {name} usage per {kind} is {enforced.canonical()}.  No limit is specified"
            )
        elif quantity(lim) > enforced:
            errors.append(
                f"maximum {name} usage per {kind} is {enforced.canonical()}, but limit is "
                f"{quantity(lim).canonical()}"
            )
        elif req is not None and quantity(req) > enforced:
            errors.append(
                f"maximum {name} usage per {kind} is {enforced.canonical()}, but request is "
                f"{quantity(req).canonical()}"
            )
    for name, enforced_raw in (item.get("maxLimitRequestRatio") or {}).items():
        enforced = quantity(enforced_raw)
        req, lim = requests.get(name), limits.get(name)
        req_q = quantity(req) if req is not None else None
        lim_q = quantity(lim) if lim is not None else None
        if req_q is None or req_q.nanos == 0:
            errors.append(
                f"{name} max limit to request ratio per {kind} is {enforced.canonical()}, but no request "
                "is specified or request is 0"
            )
        elif lim_q is None or lim_q.nanos == 0:
            errors.append(
                f"{name} max limit to request ratio per {kind} is {enforced.canonical()}, but no limit "
                "is specified or limit is 0"
            )
        else:
            ratio = lim_q.nanos / req_q.nanos
            if ratio > enforced.nanos / 10**9:
                errors.append(
                    f"{name} max limit to request ratio per {kind} is {enforced.canonical()}, but "
                    f"provided ratio is {ratio:f}"
                )
    return errors


def forbidden(resource: str, name: str, errors: list[str], group: str = "") -> ApiError:
    """`admission.NewForbidden` with an aggregate of errors: 403 `pods "x" is forbidden: ...`."""
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return ApiError(
        403, "Forbidden", f'{resource} "{name}" is forbidden: {joined}', kind=resource, name=name, group=group
    )


# --- labels -------------------------------------------------------------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None selects nothing, {} selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def map_selector_matches(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """ReplicationController `spec.selector` (plain map): empty selects nothing."""
    if not selector:
        return False
    return all(labels.get(k) == v for k, v in selector.items())


def is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None
