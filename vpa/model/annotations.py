"""Every annotation and label key vpa reads or writes, the shared API constants, and their value formats.

Owns: upstream's exact key strings (pod annotations `vpaUpdates`, `vpaObservedContainers`,
`vpaInPlaceUpdated`, the CPU startup-boost annotations; the per-container integer-CPU opt-in annotation on
VPAs; the pod condition types and reasons of in-place resize) and pure parse/format helpers for the
values (`vpaObservedContainers`, the boost annotation's original resources, integer-CPU opt-ins, our own
VPA annotations `vpa.dev/memory-limit-decrease` and `vpa.dev/resize-guard`).

Must not: decide anything (which containers to patch, whether a boost expired) or touch the API.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from vpa.model.quantity import QuantityError
from vpa.model.resources import Resources

# --- pod annotations (spec §4.11, §5.5) -----------------------------------------------------------

VPA_UPDATES: Final = "vpaUpdates"
"""Written at admission: `Pod resources updated by <vpa>: container 0: cpu request, …`. Never read back."""

VPA_OBSERVED_CONTAINERS: Final = "vpaObservedContainers"
"""Written at admission: the pod's container names joined by ", ". The updater only considers these."""

VPA_IN_PLACE_UPDATED: Final = "vpaInPlaceUpdated"
"""Written by the updater after an in-place resize; the value is always `true`."""
VPA_IN_PLACE_UPDATED_VALUE: Final = "true"

VPA_LAST_IN_PLACE_UPDATE_TIME: Final = "vpaLastInPlaceUpdateTime"
"""Declared by upstream (RFC3339 value); kept so the pod view does not drop it if a peer writes it."""

CPU_STARTUP_BOOST_PREFIX: Final = "vpaCpuStartupBoost/"
"""`vpaCpuStartupBoost/<container>`: a container's original resources while its CPU is boosted (spec §4.9)."""

LEGACY_STARTUP_CPU_BOOST: Final = "startup-cpu-boost"
"""The single pod-level boost annotation of upstream's pre-release boost code (replaced by the per-container
keys in kubernetes/autoscaler#9508 before any release); kept on pod views only so such pods stay visible."""

OBSERVED_CONTAINERS_SEPARATOR: Final = ", "

# --- VPA annotations ------------------------------------------------------------------------------

INTEGER_CPU_PREFIX: Final = "vpa-post-processor.kubernetes.io/"
INTEGER_CPU_SUFFIX: Final = "_integerCPU"
"""`vpa-post-processor.kubernetes.io/<container>_integerCPU: "true"` opts a container into whole-core CPU
recommendations (with `--cpu-integer-post-processor-enabled`; upstream's flag help wrongly says label)."""

MEMORY_LIMIT_DECREASE: Final = "vpa.dev/memory-limit-decrease"
"""Ours: `app=Never,sidecar=Always` (`*` for every container): may the memory limit be lowered in place?
See `MemoryLimitDecrease` and docs/memory-limit-decrease.md. Absent means `Always` for every container."""

RESIZE_GUARD: Final = "vpa.dev/resize-guard"
"""Ours (gate `ResizeGuard`): `"true"` opts the VPA into undoing resizes that hurt its pods."""

RESIZE_GUARD_WINDOW: Final = "vpa.dev/resize-guard-window"
"""Ours: how long after a resize a hurt pod is reverted, as a Go duration (`15m`); default 10 minutes."""

# --- pod conditions and their reasons (KEP-1287) ----------------------------------------------

POD_RESIZE_PENDING: Final = "PodResizePending"
POD_RESIZE_IN_PROGRESS: Final = "PodResizeInProgress"
POD_READY: Final = "Ready"
RESIZE_REASON_DEFERRED: Final = "Deferred"
RESIZE_REASON_INFEASIBLE: Final = "Infeasible"
RESIZE_REASON_ERROR: Final = "Error"

# Values of the legacy `status.resize` field (set by clusters older than 1.33).
LEGACY_RESIZE_PROPOSED: Final = "Proposed"
LEGACY_RESIZE_IN_PROGRESS: Final = "InProgress"
LEGACY_RESIZE_DEFERRED: Final = "Deferred"
LEGACY_RESIZE_INFEASIBLE: Final = "Infeasible"

RESIZE_POLICY_NOT_REQUIRED: Final = "NotRequired"
RESIZE_POLICY_RESTART_CONTAINER: Final = "RestartContainer"
CONTAINER_RESTART_POLICY_ALWAYS: Final = "Always"
"""An init container with `restartPolicy: Always` is a native sidecar: it runs for the pod's lifetime."""

# --- labels ---------------------------------------------------------------------------------------

NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace; the webhook's namespaceSelector uses it."""

POD_ANNOTATIONS_READ: Final[frozenset[str]] = frozenset(
    {
        VPA_OBSERVED_CONTAINERS,
        VPA_IN_PLACE_UPDATED,
        VPA_LAST_IN_PLACE_UPDATE_TIME,
        LEGACY_STARTUP_CPU_BOOST,
    }
)
"""Pod annotations a trimmed pod view keeps, besides every `vpaCpuStartupBoost/…` key."""


def is_read_pod_annotation(key: str) -> bool:
    """True for the pod annotations vpa reads; the pod cache drops every other one."""
    return key in POD_ANNOTATIONS_READ or key.startswith(CPU_STARTUP_BOOST_PREFIX)


# --- vpaObservedContainers ------------------------------------------------------------------------

_DNS1123_LABEL_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def format_observed_containers(container_names: Iterable[str]) -> str:
    """`["app", "sidecar"]` → `"app, sidecar"` (upstream GetVpaObservedContainersValue)."""
    return OBSERVED_CONTAINERS_SEPARATOR.join(container_names)


def parse_observed_containers(value: str) -> tuple[str, ...]:
    """`"app, sidecar"` → `("app", "sidecar")`; `""` → `()` (upstream ParseVpaObservedContainersValue).

    Raises ValueError when an entry is not a DNS-1123 label; callers then ignore the annotation, as the
    updater does (all containers count).
    """
    if value == "":
        return ()
    names = tuple(value.split(OBSERVED_CONTAINERS_SEPARATOR))
    for name in names:
        if len(name) > 63 or not _DNS1123_LABEL_RE.match(name):
            raise ValueError(f"incorrect format: {name!r} is not a valid container name (DNS-1123 label)")
    return names


# --- CPU startup boost ----------------------------------------------------------------------------


def cpu_startup_boost_key(container_name: str) -> str:
    return f"{CPU_STARTUP_BOOST_PREFIX}{container_name}"


def boosted_containers(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """Names of the containers that carry a `vpaCpuStartupBoost/<container>` annotation, sorted."""
    prefix = CPU_STARTUP_BOOST_PREFIX
    return tuple(sorted(key[len(prefix) :] for key in annotations if key.startswith(prefix)))


def format_original_resources(requests: Resources, limits: Resources) -> str:
    """The boost annotation value: `{"requests":{"cpu":"100m","memory":"100M"},"limits":{}}`."""
    return json.dumps(
        {"requests": requests.to_resource_list(), "limits": limits.to_resource_list()},
        separators=(",", ":"),
        sort_keys=False,
    )


def parse_original_resources(value: str) -> tuple[Resources, Resources]:
    """Inverse of `format_original_resources`: (requests, limits). Raises ValueError naming the problem."""
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError as err:
        raise ValueError(f"boost annotation is not JSON: {err}") from err
    if not isinstance(decoded, dict):
        raise ValueError(f"boost annotation must be a JSON object, got {type(decoded).__name__}")
    parts: list[Resources] = []
    for part in ("requests", "limits"):
        raw = decoded.get(part)
        if raw is not None and not isinstance(raw, dict):
            raise ValueError(f"boost annotation {part} must be an object, got {type(raw).__name__}")
        try:
            parts.append(Resources.from_resource_list(raw))
        except QuantityError as err:
            raise ValueError(f"boost annotation {part}.{err}") from err
    return parts[0], parts[1]


# --- integer CPU opt-in on VPAs ----------------------------------------------------------------


def integer_cpu_key(container_name: str) -> str:
    return f"{INTEGER_CPU_PREFIX}{container_name}{INTEGER_CPU_SUFFIX}"


def integer_cpu_containers(vpa_annotations: Mapping[str, str]) -> frozenset[str]:
    """Containers opted into whole-core CPU by a VPA annotation whose value is exactly `true`."""
    names: list[str] = []
    for key, value in vpa_annotations.items():
        if key.startswith(INTEGER_CPU_PREFIX) and key.endswith(INTEGER_CPU_SUFFIX) and value == "true":
            name = key[len(INTEGER_CPU_PREFIX) : -len(INTEGER_CPU_SUFFIX)]
            if name:
                names.append(name)
    return frozenset(names)


def format_vpa_updates(vpa_name: str, container_updates: Sequence[str]) -> str:
    """The `vpaUpdates` value: `Pod resources updated by <vpa>: <entry>; <entry>` (entries are
    `container <i>: cpu request, memory request, …` built by the patch logic)."""
    return f"Pod resources updated by {vpa_name}: {'; '.join(container_updates)}"


# --- vpa.dev/memory-limit-decrease -------------------------------------------------------------------


class MemoryLimitDecrease(enum.StrEnum):
    """Whether a container's memory limit may be lowered without recreating or restarting it."""

    ALWAYS = "Always"
    """Lowered in place like any other value (upstream's behaviour)."""
    NEVER = "Never"
    """Raised in place, never lowered by a resize; a recreated pod gets the lower limit at admission."""
    ON_RESTART = "OnRestart"
    """Lowered only when the container starts afresh: a resize that restarts it (`RestartContainer` for
    memory) or a recreated pod."""


ALL_CONTAINERS: Final = "*"


def parse_memory_limit_decrease(value: str) -> dict[str, MemoryLimitDecrease]:
    """`"app=Never, *=OnRestart"` → `{"app": NEVER, "*": ON_RESTART}`.

    Entries are `container=Value`, comma separated, whitespace ignored, an empty value gives `{}`. Raises
    ValueError naming the annotation and the bad entry: a missing `=`, a container name that is neither `*`
    nor a DNS-1123 label, a value other than Always / Never / OnRestart, or a container named twice.
    """
    out: dict[str, MemoryLimitDecrease] = {}
    accepted = ", ".join(member.value for member in MemoryLimitDecrease)
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, policy = entry.partition("=")
        name, policy = name.strip(), policy.strip()
        if not sep:
            raise ValueError(f"{MEMORY_LIMIT_DECREASE}: entry {entry!r} is not container=Value")
        if name != ALL_CONTAINERS and (len(name) > 63 or not _DNS1123_LABEL_RE.match(name)):
            raise ValueError(
                f"{MEMORY_LIMIT_DECREASE}: {name!r} is not a container name (DNS-1123 label) or *"
            )
        if name in out:
            raise ValueError(f"{MEMORY_LIMIT_DECREASE}: container {name!r} is named twice")
        try:
            out[name] = MemoryLimitDecrease(policy)
        except ValueError:
            raise ValueError(
                f"{MEMORY_LIMIT_DECREASE}: unknown value {policy!r} for container {name!r} "
                f"(expected one of {accepted})"
            ) from None
    return out


def memory_limit_decrease_for(
    policies: Mapping[str, MemoryLimitDecrease], container_name: str
) -> MemoryLimitDecrease:
    """The policy of one container: its own entry, else the `*` entry, else `Always`."""
    found = policies.get(container_name) or policies.get(ALL_CONTAINERS)
    return found if found is not None else MemoryLimitDecrease.ALWAYS


def resize_guard_requested(vpa_annotations: Mapping[str, str]) -> bool:
    """True when the VPA carries `vpa.dev/resize-guard: "true"` (exactly; any other value is off)."""
    return vpa_annotations.get(RESIZE_GUARD) == "true"
