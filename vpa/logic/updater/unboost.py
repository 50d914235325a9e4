"""Ending a CPU startup boost: when a container's boost expires and which resize ends it (spec §4.9).

Owns:
- `boost_duration_s` / `boost_expiry`: a container's boost (annotation `vpaCpuStartupBoost/<container>`)
  expires once the pod's `Ready` condition is True and strictly more than `durationSeconds` have passed
  since its `lastTransitionTime` (the container policy's `startupBoost` overrides the VPA's; absent or 0:
  expires as soon as the pod is Ready);
- `blocked`: why a boosted pod cannot be unboosted now (Pending, or a resize already under way);
- `plan_unboost`: for one pod, the containers whose boost ends now, the in-place resize that ends it and
  the merge patch that removes their annotations. An expired container goes to its processed
  recommendation (its controlled resources; `RequestsAndLimits` keeps limits proportional) and, for what
  the recommendation does not set (update mode `Off`, container `mode: Off`, no recommendation, CPU not
  controlled), back to the original CPU request and limit stored in its annotation. Containers whose boost
  has not expired are left exactly as they are; containers that were never boosted get their
  recommendation in the same resize when the VPA's mode updates running pods, restart-free changes only.
  `next_expiry` says when the earliest running boost of the pod ends, so the caller can wake then.

Unboosting never evicts and is not charged to the replica group's disruption budget or `minReplicas`: it is
a restart-free CPU resize (upstream also processes boosted pods of groups below `minReplicas`).

Must not: call the API, read the clock (the caller passes `now`), log, or order pods.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final

from vpa.logic.updater.inplace import Change, ContainerChange, by_container, compute_changes
from vpa.logic.updater.priority import considered_containers, recommendations_by_name
from vpa.logic.updater.resizestatus import resize_status
from vpa.logic.updater.restrictions import PENDING
from vpa.model import annotations as ann
from vpa.model.pod import PodView
from vpa.model.resources import CPU, Resources
from vpa.model.vpa import Recommendation, UpdateMode, VpaView

_READY_TRUE: Final = "True"


class Blocked(enum.StrEnum):
    PENDING = "Pending"
    RESIZING = "ResizeInProgress"


@dataclass(frozen=True, slots=True)
class UnboostPlan:
    """What ends the boosts of one pod now. `expired` empty: nothing to do yet."""

    expired: tuple[str, ...] = ()
    changes: tuple[ContainerChange, ...] = ()
    """The in-place resize; empty when the expired containers already have their target values."""
    next_expiry: float | None = None
    """When the earliest boost still running on the pod ends (None: none, or the pod is not Ready)."""
    malformed: tuple[str, ...] = ()
    """Expired containers whose annotation could not be read (their recommendation still applies)."""

    def annotation_patch(self) -> dict[str, Any]:
        """Merge patch removing the expired boost annotations (and marking `vpaInPlaceUpdated` after a
        resize, as upstream's second patch does)."""
        annotations: dict[str, Any] = {ann.cpu_startup_boost_key(name): None for name in self.expired}
        if self.changes:
            annotations[ann.VPA_IN_PLACE_UPDATED] = ann.VPA_IN_PLACE_UPDATED_VALUE
        return {"metadata": {"annotations": annotations}}


def boost_duration_s(vpa: VpaView | None, container: str) -> int:
    """`durationSeconds` of the boost that applies to `container`: container policy first, else the VPA's."""
    if vpa is None:
        return 0
    policy = vpa.resource_policy.for_container(container)
    if policy is not None and policy.startup_boost is not None:
        return max(0, policy.startup_boost.duration_s)
    if vpa.startup_boost is not None:
        return max(0, vpa.startup_boost.duration_s)
    return 0


def boost_expiry(pod: PodView, vpa: VpaView | None, container: str) -> float | None:
    """When the container's boost ends: Ready's lastTransitionTime + duration; None while the pod is not
    Ready (or Ready has no transition time). The boost has expired once `now` is strictly later."""
    ready = pod.ready
    if ready is None or ready.status != _READY_TRUE or ready.last_transition_time is None:
        return None
    return ready.last_transition_time + boost_duration_s(vpa, container)


def blocked(pod: PodView) -> Blocked | None:
    """Why the boost of `pod` cannot be ended now (upstream's `CanUnboost`), or None."""
    if pod.phase == PENDING:
        return Blocked.PENDING
    if resize_status(pod).resizing:
        return Blocked.RESIZING
    return None


def plan_unboost(
    pod: PodView, vpa: VpaView | None, recommendation: Recommendation | None, now: float
) -> UnboostPlan:
    """The unboost of `pod` at `now` (see the module docstring). `recommendation` is the processed
    (LimitRange- and policy-capped) recommendation for this pod; ignored in update mode `Off`."""
    boosted = pod.boosted_containers()
    expired: list[str] = []
    running: list[float] = []
    for name in boosted:
        expiry = boost_expiry(pod, vpa, name)
        if expiry is None:
            continue
        if now > expiry:
            expired.append(name)
        else:
            running.append(expiry)
    next_expiry = min(running) if running else None
    if not expired:
        return UnboostPlan(next_expiry=next_expiry)

    mode = vpa.effective_mode if vpa is not None else UpdateMode.OFF
    by_name = (
        recommendations_by_name(recommendation)
        if vpa is not None and recommendation is not None and mode is not UpdateMode.OFF
        else {}
    )
    targets = considered_containers(pod, vpa, by_name, None) if vpa is not None and by_name else []
    recommends_cpu = {
        t.name for t in targets if t.controls_cpu and t.recommendation.target.cpu_millicores is not None
    }
    still_boosted = set(boosted) - set(expired)
    kept: list[Change] = []
    for change in compute_changes(pod, targets):
        if change.container in still_boosted:
            continue  # left alone until its own boost ends
        if change.container in expired:
            kept.append(change)
        elif mode.updates_running_pods and not change.disruptive:
            kept.append(change)  # a sibling that was never boosted: its recommendation, restart-free
    malformed: list[str] = []
    for name in expired:
        if name in recommends_cpu:
            continue  # its recommendation sets the CPU (already in `kept` unless nothing changes)
        restore = _restore_cpu(pod, name)
        if restore is None:
            malformed.append(name)
        elif restore is not _NOTHING:
            kept.append(restore)
    kept.sort(key=lambda c: (c.container_index, c.resource))
    return UnboostPlan(tuple(expired), by_container(kept), next_expiry, tuple(malformed))


_NOTHING: Final = Change(-1, "", CPU, None, None, False)


def _restore_cpu(pod: PodView, name: str) -> Change | None:
    """The change putting the container's CPU back to its annotated original (`_NOTHING` when it already
    is; None when the annotation cannot be read)."""
    try:
        original_requests, original_limits = ann.parse_original_resources(
            pod.annotations[ann.cpu_startup_boost_key(name)]
        )
    except (KeyError, ValueError):
        return None
    for index, container in enumerate(pod.containers):
        if container.name != name:
            continue
        request = _differs(original_requests, container.requests)
        limit = _differs(original_limits, container.limits)
        if request is None and limit is None:
            return _NOTHING
        return Change(index, name, CPU, request, limit, container.restarts_on_resize(CPU))
    return _NOTHING  # the container is gone from the spec: only the annotation goes


def _differs(original: Resources, current: Resources) -> int | None:
    value = original.cpu_millicores
    if value is None or value == current.cpu_millicores:
        return None
    return value
