"""PodDisruptionBudget arithmetic: the disruption controller's status and the eviction subresource's verdict.

Owns: scaling int-or-percent values (`GetScaledValueFromIntOrPercent`), computing
`expectedPods/desiredHealthy/currentHealthy/disruptionsAllowed` and the `DisruptionAllowed` condition from the
matching pods and their controllers' scale, expiring `disruptedPods` entries, and deciding whether an eviction
may go ahead (and whether it consumes a disruption), with kube's messages.

Must not: do I/O or read the clock (callers pass `now`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from vpa.sim.cluster.pods import is_ready
from vpa.sim.contracts import ApiError, JsonObj

# A pod evicted less than this long ago still counts as disrupted while it has not gone away.
DELETION_TIMEOUT_S: Final = 120.0
TOO_MANY_REQUESTS_MESSAGE: Final = "Cannot evict pod as it would violate the pod's disruption budget."


class ScaleError(ValueError):
    """The budget cannot be evaluated (no controller for a pod, a bad int-or-percent)."""


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


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(int(t), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Budget:
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    disrupted_pods: dict[str, str]


def compute(
    pdb: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    expected_scale: Callable[[Sequence[Mapping[str, Any]]], int],
    now: float,
) -> Budget:
    """The disruption controller's `trySync`: raises ScaleError when the budget cannot be evaluated."""
    spec = pdb.get("spec") or {}
    status = pdb.get("status") or {}
    if spec.get("maxUnavailable") is not None:
        expected = expected_scale(pods)
        max_unavailable = scaled_value(spec["maxUnavailable"], expected, True)
        desired = max(0, expected - max_unavailable)
    elif spec.get("minAvailable") is not None:
        raw = spec["minAvailable"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            expected = len(pods)
            desired = raw
        else:
            expected = expected_scale(pods)
            desired = scaled_value(raw, expected, True)
    else:
        expected = len(pods)
        desired = expected  # no constraint: kube treats it as minAvailable = all? (validation forbids it)
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
    return Budget(expected, desired, healthy, allowed, disrupted)


def status_of(pdb: Mapping[str, Any], budget: Budget, now: float) -> JsonObj:
    """The `status` the disruption controller writes (keeps lastTransitionTime of an unchanged condition)."""
    old = pdb.get("status") or {}
    allowed = budget.disruptions_allowed > 0
    cond_status = "True" if allowed else "False"
    reason = "SufficientPods" if allowed else "InsufficientPods"
    prior = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
    transition = (
        prior.get("lastTransitionTime") if prior and prior.get("status") == cond_status else rfc3339(now)
    )
    generation = (pdb.get("metadata") or {}).get("generation")
    status: JsonObj = {
        "currentHealthy": budget.current_healthy,
        "desiredHealthy": budget.desired_healthy,
        "expectedPods": budget.expected_pods,
        "disruptionsAllowed": budget.disruptions_allowed,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": cond_status,
                "reason": reason,
                "message": "",
                "lastTransitionTime": transition,
                **({"observedGeneration": generation} if generation is not None else {}),
            }
        ],
    }
    if generation is not None:
        status["observedGeneration"] = generation
    if budget.disrupted_pods:
        status["disruptedPods"] = dict(budget.disrupted_pods)
    return status


def sync_failed_status(pdb: Mapping[str, Any], message: str, now: float) -> JsonObj:
    """`failSafe`: on a sync error the controller sets disruptionsAllowed to 0 with reason SyncFailed."""
    old = dict(pdb.get("status") or {})
    old["disruptionsAllowed"] = 0
    old["conditions"] = [
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "SyncFailed",
            "message": message,
            "lastTransitionTime": rfc3339(now),
        }
    ]
    generation = (pdb.get("metadata") or {}).get("generation")
    if generation is not None:
        old["observedGeneration"] = generation
    return old


@dataclass(frozen=True, slots=True)
class Verdict:
    """`allowed`: evict; `consume`: also decrement disruptionsAllowed and record the pod in disruptedPods."""

    allowed: bool
    consume: bool


def eviction_verdict(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> Verdict:
    """`checkAndDecrement` plus the unhealthy-pod policy; raises the 429/403 ApiError kube would."""
    meta = pdb.get("metadata") or {}
    status = pdb.get("status") or {}
    name = meta.get("name", "")
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
    if not is_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow":
            return Verdict(True, False)
        if (
            status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0)
            and status.get("desiredHealthy", 0) > 0
        ):
            return Verdict(True, False)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise ApiError(403, "Forbidden", "pdb disruptions allowed is negative")
    if allowed == 0:
        raise ApiError(
            429,
            "TooManyRequests",
            TOO_MANY_REQUESTS_MESSAGE,
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {name} needs "
                    f"{status.get('desiredHealthy', 0)} healthy pods and "
                    f"has {status.get('currentHealthy', 0)} currently",
                }
            ],
        )
    if len(status.get("disruptedPods") or {}) > 2000:
        raise ApiError(
            403, "Forbidden", "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    return Verdict(True, True)


def consume(pdb: Mapping[str, Any], pod_name: str, now: float) -> JsonObj:
    """The PDB after an eviction consumed one disruption (a copy)."""
    out = dict(pdb)
    status = dict(out.get("status") or {})
    status["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) - 1
    disrupted = dict(status.get("disruptedPods") or {})
    disrupted[pod_name] = rfc3339(now)
    status["disruptedPods"] = disrupted
    out["status"] = status
    return out
