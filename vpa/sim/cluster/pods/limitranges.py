"""The LimitRanger admission plugin for pods: LimitRange defaults and min / max / ratio enforcement.

Owns: `defaultContainerResourceRequirements` with its annotation, the Container and Pod item checks and
their messages, and `forbidden`, the 403 they make.

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vpa.model.quantity import Quantity
from vpa.sim.cluster.pods.resources import (
    COMPUTE,
    CPU,
    container_amounts,
    quantity,
    resource_list,
)
from vpa.sim.contracts import ApiError, JsonObj

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
