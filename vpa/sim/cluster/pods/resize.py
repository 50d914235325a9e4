"""The `pods/resize` subresource's rules: what a resize may change and whether it is valid.

Owns: the resize merge (`dropNonResizeUpdates`), each resource's restart policy, `ValidatePodResize` per
Kubernetes version (QoS class kept, memory decrease with NotRequired, sidecars, plain init containers from
1.36, pod-level resources),
whether a pod can be resized at all, and whether a pod's resources changed.

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.pods.resources import (
    COMPUTE,
    MEMORY,
    NOT_REQUIRED,
    RESTART_CONTAINER,
    Version,
    container_amounts,
    is_sidecar,
    qos_class,
    resource_list,
    safe_quantity,
)
from vpa.sim.cluster.pods.validation import FieldError, validate_pod_spec
from vpa.sim.contracts import JsonObj

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
    """`ValidatePodResize` for the given Kubernetes minor version (1.32 .. 1.37). Without `pod_level`
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
                if version < (1, 36):
                    if old_r != new_r:
                        errs.append(
                            FieldError(
                                "spec",
                                "Forbidden",
                                "only cpu and memory resources for sidecar containers are mutable",
                            )
                        )
                    continue
                # 1.36+ (InPlacePodVerticalScalingInitContainers, beta and on; GA in 1.37): validated as a
                # container, except that a RestartContainer policy forbids its resize.
                if old_r != new_r and RESTART_CONTAINER in (
                    p.get("restartPolicy") for p in new_c.get("resizePolicy") or []
                ):
                    errs.append(FieldError(
                        f"spec.{key}[{i}]",
                        "Forbidden",
                        "non-sidecar init containers with a resize policy of RestartContainer cannot be "
                        "resized",
                    ))
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
                    o, n = safe_quantity(old_lim), safe_quantity(new_lim)
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
