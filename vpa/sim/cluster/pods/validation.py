"""Pod validation at CREATE and UPDATE: field errors and the 422 Invalid they make.

Owns: `FieldError` (kube's `field.Error` and how it prints), `invalid`, the validation of container
resources, resize policies, pod-level resources and a whole pod spec, and the update rule "pod spec is
immutable except image, activeDeadlineSeconds, tolerations additions, ...".

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.model.quantity import Quantity, QuantityError
from vpa.sim.cluster.pods.resources import (
    COMPUTE,
    CPU,
    NOT_REQUIRED,
    RESTART_CONTAINER,
    aggregate_quantity,
    containers_aggregate,
    quantity,
    resource_list,
)
from vpa.sim.contracts import ApiError, JsonObj

_UPDATE_FORBIDDEN_MESSAGE: Final = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


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
            total = aggregate_quantity(spec, name, need)
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
