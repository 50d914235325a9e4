"""PodDisruptionBudget arithmetic: the disruption controller's status and the eviction subresource's verdict.

Owns: scaling int-or-percent values (`GetScaledValueFromIntOrPercent`), computing
`expectedPods/desiredHealthy/currentHealthy/disruptionsAllowed` and the `DisruptionAllowed` condition (set
among the others as kube's condition setter does; on a failed sync only it changes) from the matching pods and
their controllers' scale (pods without a controller are left out of the scale and named, as
kube-controller-manager does, rather than failing the sync), expiring `disruptedPods` entries, and deciding
whether an eviction may go ahead (and whether it consumes a disruption), with kube's messages (and the text of
its `UnmanagedPods` warning).

Must not: do I/O or read the clock (callers pass `now`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from vpa.sim.cluster.pods import controller_of, is_ready
from vpa.sim.contracts import ApiError, JsonObj
from vpa.sim.timestamps import parse_time, rfc3339

# A pod evicted less than this long ago still counts as disrupted while it has not gone away.
DELETION_TIMEOUT_S: Final = 120.0
TOO_MANY_REQUESTS_MESSAGE: Final = "Cannot evict pod as it would violate the pod's disruption budget."


class ScaleError(ValueError):
    """The budget cannot be evaluated (a pod's controller or its scale not found, a bad int-or-percent)."""


def scaled_value(raw: object, total: int, round_up: bool) -> int:
    if isinstance(raw, bool):
        raise ScaleError(f"invalid value for IntOrString: {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        if raw.endswith("%") and raw[:-1].isdigit():
            pct = int(raw[:-1])
            exact = pct * total
            return -(-exact // 100) if round_up else exact // 100
        if raw.isdigit():
            raise ScaleError("invalid value for IntOrString: invalid type: string is not a percentage")
    raise ScaleError(f"invalid value for IntOrString: invalid value {raw!r}")


def go_label_selector(selector: Mapping[str, Any] | None) -> str:
    """A label selector as Go's `%v` prints a `*metav1.LabelSelector` (its generated `String()`)."""
    if selector is None:
        return "nil"
    labels = selector.get("matchLabels") or {}
    exprs = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(str(v) for v in e.get('values') or [])}],}},"
        for e in selector.get("matchExpressions") or []
    )
    pairs = "".join(f"{k}: {labels[k]}," for k in sorted(labels))
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{pairs}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )


def unmanaged_pods_message(selector: Mapping[str, Any] | None) -> str:
    """The text of the `UnmanagedPods` warning the disruption controller sends whenever it finds some."""
    return (
        f"Pods selected by this PodDisruptionBudget (selector: {go_label_selector(selector)}) were found "
        "to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may "
        'result in undefined behavior. To account for these pods please set ".spec.minAvailable" field of '
        "the PDB to an integer value."
    )


@dataclass(frozen=True, slots=True)
class Budget:
    """`unmanaged_pods`: the matching pods with no controller, named only when the controllers' scale was
    consulted (`maxUnavailable`, or `minAvailable` as a percentage); kube warns about them with an event."""

    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    disrupted_pods: dict[str, str]
    unmanaged_pods: tuple[str, ...] = ()


def split_unmanaged(pods: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], tuple[str, ...]]:
    """The pods that have a controller, and the names of those that have none (no controller owner)."""
    managed: list[Mapping[str, Any]] = []
    unmanaged: list[str] = []
    for pod in pods:
        if controller_of(pod) is None:
            unmanaged.append(str((pod.get("metadata") or {}).get("name", "")))
        else:
            managed.append(pod)
    return managed, tuple(unmanaged)


def go_quote(text: str) -> str:
    """`text` as Go's `%q` prints it (object names are ASCII, where JSON's quoting is the same)."""
    return json.dumps(text)


# The owners the disruption controller can look up: (group, kind) → store resource, and whether the resource
# has a `scale` subresource. A pod whose controller is one without scale makes the budget's sync fail with
# "<resource> does not implement the scale subresource" (kube finds that out from discovery).
OWNER_RESOURCES: Final[Mapping[tuple[str, str], tuple[str, bool]]] = {
    ("", "ReplicationController"): ("replicationcontrollers", True),
    ("apps", "ReplicaSet"): ("replicasets.apps", True),
    ("apps", "Deployment"): ("deployments.apps", True),
    ("apps", "StatefulSet"): ("statefulsets.apps", True),
    ("apps", "DaemonSet"): ("daemonsets.apps", False),
    ("batch", "Job"): ("jobs.batch", False),
    ("batch", "CronJob"): ("cronjobs.batch", False),
}

Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


def _owned_by(obj: Mapping[str, Any] | None, ref: Mapping[str, Any]) -> bool:
    """`obj` exists and is the very object `ref` names (same uid: not a namesake created since)."""
    return obj is not None and (obj.get("metadata") or {}).get("uid") == ref.get("uid")


def _replicas(obj: Mapping[str, Any]) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1) or 0)


def _scale_of(ref: Mapping[str, Any], namespace: str, get: Lookup) -> tuple[str, int] | None:
    """The controller `ref` names and its scale, as the controller's finders see it, or None when none is
    found. A ReplicaSet counts its Deployment's replicas (when that Deployment is still there), else its
    own; an owner kind with no scale raises ScaleError."""
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    kind = str(ref.get("kind") or "")
    if group == "extensions" and kind == "ReplicaSet":
        group = "apps"  # the one older group kube's ReplicaSet finders still accept
    known = OWNER_RESOURCES.get((group, kind))
    if known is None:
        return None  # kube maps other kinds through discovery; vpa sim knows only its workloads
    resource, scalable = known
    if not scalable:
        raise ScaleError(f"{resource} does not implement the scale subresource")
    owner = get(resource, namespace, str(ref.get("name") or ""))
    if owner is None or not _owned_by(owner, ref):
        return None
    if kind == "ReplicaSet":
        dep_ref = controller_of(owner)
        if dep_ref is not None and dep_ref.get("kind") == "Deployment":
            dep = get("deployments.apps", namespace, str(dep_ref.get("name") or ""))
            if dep is not None and _owned_by(dep, dep_ref):
                return str(dep_ref.get("uid")), _replicas(dep)
    return str(ref.get("uid")), _replicas(owner)


def expected_scale(pods: Sequence[Mapping[str, Any]], get: Lookup) -> int:
    """The disruption controller's `getExpectedScale` over pods that have a controller: the sum of the
    distinct controllers' replicas. `get(resource, namespace, name)` reads an object (None: not found).
    Raises ScaleError when a pod's controller cannot be found or has no scale."""
    scales: dict[str, int] = {}
    looked_up: set[str] = set()
    for pod in pods:
        ref = controller_of(pod)
        if ref is None:
            continue  # `compute` passes only the pods that have a controller
        if str(ref.get("uid")) in looked_up:
            continue
        meta = pod.get("metadata") or {}
        found = _scale_of(ref, str(meta.get("namespace") or ""), get)
        if found is None:
            raise ScaleError(f"found no controllers for pod {go_quote(str(meta.get('name') or ''))}")
        looked_up.add(str(ref.get("uid")))
        scales[found[0]] = found[1]
    return sum(scales.values())


def compute(
    pdb: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    expected_scale: Callable[[Sequence[Mapping[str, Any]]], int],
    now: float,
) -> Budget:
    """The disruption controller's `trySync`: raises ScaleError when the budget cannot be evaluated.

    `expected_scale` sums the scale of the given pods' controllers; it is called with the pods that have a
    controller only. Unmanaged pods still count in `currentHealthy` (and in `expectedPods` for an integer
    `minAvailable`, which needs no controller), but add nothing to the scale: over unmanaged pods alone a
    `maxUnavailable` or percentage budget expects 0 pods and allows no disruption."""
    spec = pdb.get("spec") or {}
    status = pdb.get("status") or {}
    unmanaged: tuple[str, ...] = ()
    if spec.get("maxUnavailable") is not None:
        managed, unmanaged = split_unmanaged(pods)
        expected = expected_scale(managed)
        max_unavailable = scaled_value(spec["maxUnavailable"], expected, True)
        desired = max(0, expected - max_unavailable)
    elif spec.get("minAvailable") is not None:
        raw = spec["minAvailable"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            expected = len(pods)
            desired = raw
        else:
            managed, unmanaged = split_unmanaged(pods)
            expected = expected_scale(managed)
            desired = scaled_value(raw, expected, True)
    else:
        # Neither field (policy/v1 allows it): kube leaves both at zero, so the budget allows no disruption.
        expected = desired = 0
    # Expire disrupted-pod entries: gone, terminating, or older than the timeout.
    names = {(p.get("metadata") or {}).get("name"): p for p in pods}
    disrupted: dict[str, str] = {}
    for name, stamp in (status.get("disruptedPods") or {}).items():
        pod = names.get(name)
        when = parse_time(stamp)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp") or when is None:
            continue
        if when + DELETION_TIMEOUT_S < now:
            continue
        disrupted[name] = stamp
    healthy = 0
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or meta.get("name") in disrupted:
            continue
        if is_ready(pod):
            healthy += 1
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return Budget(expected, desired, healthy, allowed, disrupted, unmanaged)


def set_condition(
    conditions: Sequence[Mapping[str, Any]], cond: Mapping[str, Any], now: float
) -> list[JsonObj]:
    """`conditions` with `cond` set as kube's condition setter sets one: the entry of its type takes the new
    status, reason, message and observedGeneration (dropped when `cond` has none) but keeps its
    lastTransitionTime unless the status changes; a type not present is appended stamped `now`. Other types
    are left as they are."""
    out: list[JsonObj] = []
    found = False
    for old in conditions:
        if found or old.get("type") != cond.get("type"):
            out.append(dict(old))
            continue
        found = True
        same = old.get("status") == cond.get("status") and old.get("lastTransitionTime")
        merged: JsonObj = {k: v for k, v in old.items() if k != "observedGeneration"}
        merged.update(cond)
        merged["lastTransitionTime"] = old["lastTransitionTime"] if same else rfc3339(now)
        out.append(merged)
    if not found:
        out.append({**cond, "lastTransitionTime": rfc3339(now)})
    return out


def _condition(status: str, reason: str, message: str, generation: object) -> JsonObj:
    """A `DisruptionAllowed` condition; an observedGeneration of 0 or none is left out, as Go omits it."""
    cond: JsonObj = {"type": "DisruptionAllowed", "status": status, "reason": reason, "message": message}
    if generation:
        cond["observedGeneration"] = generation
    return cond


def status_of(pdb: Mapping[str, Any], budget: Budget, now: float) -> JsonObj:
    """The `status` the disruption controller writes: the counts, observedGeneration, and its
    `DisruptionAllowed` condition set among the others (see `set_condition`)."""
    old = pdb.get("status") or {}
    allowed = budget.disruptions_allowed > 0
    generation = (pdb.get("metadata") or {}).get("generation")
    cond = _condition(
        "True" if allowed else "False", "SufficientPods" if allowed else "InsufficientPods", "", generation
    )
    status: JsonObj = {
        "currentHealthy": budget.current_healthy,
        "desiredHealthy": budget.desired_healthy,
        "expectedPods": budget.expected_pods,
        "disruptionsAllowed": budget.disruptions_allowed,
        "conditions": set_condition(old.get("conditions") or [], cond, now),
    }
    if generation is not None:
        status["observedGeneration"] = generation
    if budget.disrupted_pods:
        status["disruptedPods"] = dict(budget.disrupted_pods)
    return status


def sync_failed_status(pdb: Mapping[str, Any], message: str, now: float) -> JsonObj:
    """`failSafe`: on a sync error the controller keeps the status it had (observedGeneration included, so
    a budget never synced stays unobserved), allows no disruption, and sets its condition to SyncFailed
    with the error, observed at the status' own generation. A repeated failure changes nothing."""
    old = dict(pdb.get("status") or {})
    for counter in ("currentHealthy", "desiredHealthy", "expectedPods"):
        old.setdefault(counter, 0)  # Go's status struct always carries them
    old["disruptionsAllowed"] = 0
    cond = _condition("False", "SyncFailed", message, old.get("observedGeneration"))
    old["conditions"] = set_condition(old.get("conditions") or [], cond, now)
    return old


@dataclass(frozen=True, slots=True)
class Verdict:
    """`allowed`: evict; `consume`: also decrement disruptionsAllowed and record the pod in disruptedPods."""

    allowed: bool
    consume: bool


def eviction_verdict(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> Verdict:
    """The unhealthy-pod policy, then `checkAndDecrement`; raises the 429/403 ApiError kube would."""
    meta = pdb.get("metadata") or {}
    status = pdb.get("status") or {}
    name = meta.get("name", "")
    current = int(status.get("currentHealthy") or 0)
    desired = int(status.get("desiredHealthy") or 0)
    if not is_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow":
            return Verdict(True, False)
        if current >= desired and desired > 0:
            return Verdict(True, False)
    observed = status.get("observedGeneration")
    generation = meta.get("generation")
    if generation is not None and (observed is None or observed < generation):
        raise ApiError(
            429,
            "TooManyRequests",
            TOO_MANY_REQUESTS_MESSAGE,
            retry_after_s=10,
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {name} is still being processed by the server.",
                }
            ],
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > 2000:
        raise _forbidden(
            name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        raise ApiError(
            429,
            "TooManyRequests",
            TOO_MANY_REQUESTS_MESSAGE,
            causes=[{"reason": "DisruptionBudget", "message": _refusal(name, status, current, desired)}],
        )
    return Verdict(True, True)


def _forbidden(name: str, why: str) -> ApiError:
    """kube-apiserver's 403 about the budget; it names the resource in the singular, `poddisruptionbudget`."""
    return ApiError(
        403,
        "Forbidden",
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        kind="poddisruptionbudget",
        group="policy",
        name=name,
    )


def _refusal(name: str, status: Mapping[str, Any], current: int, desired: int) -> str:
    """Why a budget allowing no disruption refuses: a failed sync first (its counts are not to be trusted),
    then too few healthy pods, then a False condition with a message, else no reason at all."""
    cond: Mapping[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {}
    )
    explained = cond.get("status") == "False" and bool(cond.get("message"))
    if explained and cond.get("reason") == "SyncFailed":
        return (
            f"The disruption budget {name} does not allow evicting pods currently because it failed sync: "
            f"{cond.get('message')}"
        )
    if current <= desired:
        return f"The disruption budget {name} needs {desired} healthy pods and has {current} currently"
    if explained:
        return (
            f"The disruption budget {name} does not allow evicting pods currently "
            f"({cond.get('reason')}): {cond.get('message')}"
        )
    return f"The disruption budget {name} does not allow evicting pods currently"


def consume(pdb: Mapping[str, Any], pod_name: str, now: float) -> JsonObj:
    """The PDB after an eviction consumed one disruption (a copy). Taking the last one also turns the
    `DisruptionAllowed` condition False (InsufficientPods) at once, as kube-apiserver does, rather than at
    the controller's next sync."""
    out = dict(pdb)
    status = dict(out.get("status") or {})
    status["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) - 1
    if status["disruptionsAllowed"] == 0:
        cond = _condition("False", "InsufficientPods", "", status.get("observedGeneration"))
        status["conditions"] = set_condition(status.get("conditions") or [], cond, now)
    disrupted = dict(status.get("disruptedPods") or {})
    disrupted[pod_name] = rfc3339(now)
    status["disruptedPods"] = disrupted
    out["status"] = status
    return out
