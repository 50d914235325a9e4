"""Replica groups and the disruption budget of one updater pass (spec §4.3).

Owns: grouping a VPA's live pods by their direct controller (`GroupKey`: namespace, kind, name), the
replica counts (`configured` from the caller, `pending`, `running`), `--min-replicas` / per-VPA
`minReplicas`, `--eviction-tolerance`, and the two questions the planner asks: may this pod be evicted
(`can_evict`), may a disruptive change be made (`is_disruptable`). Evictions and in-place resizes are
counted separately (`evicted`, `in_place_initiated`) but draw on one budget, as upstream.

`configured` replicas come from the caller (`replicas`): `spec.replicas` of a ReplicaSet,
ReplicationController or StatefulSet, `status.desiredNumberScheduled` of a DaemonSet (upstream 1.8.1; before
it, `numberReady`, which shrank the budget while pods were not ready); missing or ≤ 0 for those kinds drops
the group, as upstream's error does. A Job counts its live pods; any other kind counts 0 unless the
caller supplies a value (upstream's 0 makes every running pod of such a group disruptable).

Below `minReplicas` a group is dropped — no eviction, no in-place — except when
`--in-place-skip-disruption-budget` is on and the mode resizes in place: then it is kept and flagged
`below_min_replicas`, which forbids eviction and disruptive resizes (upstream only forbids eviction) while
disruption-free resizes proceed. Our default for that flag is on (DESIGN.md, issues #8609, #9157);
`False` restores upstream.

Ownership: `ReplicaGroup` is mutable on purpose — one decision pass builds the groups, charges them as it
plans actions, and drops them. Nothing else holds one.

Must not: read the API (counts come in as arguments), read the clock, or log.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from vpa.model.pod import PodView
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import UpdateMode, VpaView

PENDING: Final = "Pending"
SCALED_BY_SPEC_REPLICAS: Final = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
DAEMON_SET: Final = "DaemonSet"
JOB: Final = "Job"


class GroupKey(NamedTuple):
    """A direct controller owning pods: e.g. the ReplicaSet of a Deployment's pods."""

    namespace: str
    kind: str
    name: str


def group_key(pod: PodView) -> GroupKey | None:
    owner = pod.owner
    if owner is None:
        return None
    return GroupKey(pod.namespace, owner.kind, owner.name)


class GroupProblem(enum.StrEnum):
    """Why a group's pods are not updated at all."""

    NO_CONTROLLER = "NoController"
    REPLICAS_UNKNOWN = "ConfiguredReplicasUnknown"
    BELOW_MIN_REPLICAS = "BelowMinReplicas"


@dataclass(slots=True)
class ReplicaGroup:
    key: GroupKey
    configured: int
    live: int
    pending: int
    tolerance: int
    below_min_replicas: bool = False
    resizing: int = 0
    """Pods with a resize under way (tracked like upstream's `inPlaceUpdateOngoing`; not used to decide)."""
    evicted: int = 0
    in_place_initiated: int = 0

    @property
    def running(self) -> int:
        return self.live - self.pending

    def is_disruptable(self) -> bool:
        """Upstream's `isPodDisruptable`: enough replicas stay up after one more disruption this pass, or the
        whole group is running, the tolerance rounds to 0 and nothing was disrupted yet (one may go)."""
        done = self.evicted + self.in_place_initiated
        if self.running - done > self.configured - self.tolerance:
            return True
        return self.configured == self.running and self.tolerance == 0 and done == 0

    def can_evict(self, pod: PodView) -> bool:
        """Upstream's `CanEvict` for a pod of this group (resizing pods: the caller checks timeouts first)."""
        if pod.phase == PENDING:
            return True
        if self.below_min_replicas:
            return False
        return self.is_disruptable()

    def can_disrupt_in_place(self) -> bool:
        """A disruptive in-place resize: like an eviction of a running pod."""
        return not self.below_min_replicas and self.is_disruptable()

    def charge_eviction(self, pod: PodView) -> None:
        if pod.phase != PENDING:
            self.evicted += 1

    def charge_in_place(self) -> None:
        self.in_place_initiated += 1


def required_replicas(vpa: VpaView, settings: UpdaterSettings) -> int:
    per_vpa = vpa.update_policy.min_replicas
    return per_vpa if per_vpa is not None else settings.min_replicas


def build_groups(
    pods: Iterable[PodView],
    vpa: VpaView,
    settings: UpdaterSettings,
    replicas: Mapping[GroupKey, int],
    *,
    is_resizing: Mapping[str, bool] | None = None,
) -> tuple[dict[GroupKey, ReplicaGroup], dict[GroupKey, GroupProblem]]:
    """Groups of `pods` (the VPA's live pods) that may be acted on, and why the others may not.

    `is_resizing` (pod uid → bool) only feeds the informational `resizing` count.
    """
    members: dict[GroupKey, list[PodView]] = {}
    for pod in pods:
        key = group_key(pod)
        if key is not None:
            members.setdefault(key, []).append(pod)
    required = required_replicas(vpa, settings)
    mode = vpa.effective_mode
    keep_below_min = settings.in_place_skip_disruption_budget and mode in (
        UpdateMode.IN_PLACE_OR_RECREATE,
        UpdateMode.IN_PLACE,
    )
    groups: dict[GroupKey, ReplicaGroup] = {}
    problems: dict[GroupKey, GroupProblem] = {}
    for key, group_pods in members.items():
        live = len(group_pods)
        below_min = live < required
        if below_min and not keep_below_min:
            problems[key] = GroupProblem.BELOW_MIN_REPLICAS
            continue
        configured = replicas.get(key)
        if key.kind in SCALED_BY_SPEC_REPLICAS or key.kind == DAEMON_SET:
            if configured is None or configured <= 0:
                problems[key] = GroupProblem.REPLICAS_UNKNOWN
                continue
        elif configured is None:
            configured = live if key.kind == JOB else 0
        pending = sum(1 for pod in group_pods if pod.phase == PENDING)
        resizing = 0
        if is_resizing is not None:
            resizing = sum(1 for pod in group_pods if is_resizing.get(pod.uid, False))
        groups[key] = ReplicaGroup(
            key=key,
            configured=configured,
            live=live,
            pending=pending,
            tolerance=int(configured * settings.eviction_tolerance),
            below_min_replicas=below_min,
            resizing=resizing,
        )
    return groups, problems
