"""One updater decision pass over a VPA and its pods: every pod gets a decision with a reason (spec §4.1–4.8).

Owns: the per-VPA gate (`Off`/`Initial` → nothing; `InPlace` with the gate off → nothing, the VPA is skipped
entirely — it never falls back to eviction; inside AEP-9936's `initialDelaySeconds` window with gate
`VPAInitialDelay` → nothing; condition `ConfigInvalid` True (AEP-9970: a per-container target percentile
outside the recommender's bounds would resize pods out of range on every pass) → nothing; no recommendation
→ nothing), the per-pod pipeline (replica group,
considered containers, priority, quick OOM, triggers), the order (`priority.sort_key`), and the two sweeps
upstream's loop makes: in-place decisions first, in priority order, charging the disruption budget; then
evictions in priority order, each checked against `evictionRequirements` and `can_evict` and charged.
`Auto` behaves as `Recreate`.

Pods with pod-level `spec.resources` are skipped unless gate `PodLevelResources` is on; then their containers
are weighed on the resources they set themselves, the pod-level stanza as one more target
(`podlevel.pod_level_target`), and each in-place decision carries the pod-level values its changes need
(`podlevel.planner`). Whether the server resizes such pods at all, and plain init containers, comes from
`PassInputs.resize_features`; plain init containers the recommendation names ride along with resizes of
in-place VPAs (they never trigger an update themselves, so no pod is evicted for them alone).

Memory-limit decreases (`vpa.dev/memory-limit-decrease`, `memorylimits`) are held out of in-place resizes
as the VPA's annotation says. With gate `InPlaceCapacityAware` and `PassInputs.node_rooms`, a resize the
node's kubelet would answer Infeasible or Deferred is not planned (`capacity`, AEP-9726). With gate
`ResizeGuard` and a VPA annotated `vpa.dev/resize-guard: "true"`, decreases of containers whose earlier
resize was reverted are held back until the revert's backoff ends (`guard`; the reverts themselves are the
loop's, from `ResizeGuard.check`): out of in-place resizes, and an eviction that would lower such a container
(the webhook gives the new pod the whole recommendation) waits. `guard_asked` tells `ResizeGuard.check` which
VPAs still ask for the guard: one that dropped it after a resize gets no revert for it.

`evictionRequirements` filter evictions only (Recreate evictions and `InPlaceOrRecreate` fallbacks), not
in-place resizes: AEP-4016 and upstream's fix for issue #10181 (spec §4.5 describes the older code).

What the caller supplies (`PassInputs`): `now`; the updater settings and feature gates; the configured
replicas of each direct controller (`GroupKey` → `spec.replicas` / DaemonSet
`status.desiredNumberScheduled`); the loop's memory of its own resize patches (`ResizeAttempt` per pod uid:
when it patched, whether the API rejected it); the current `InfeasibleAttempts`. Optionally a per-pod
processed recommendation (LimitRange-capped by the admission capping logic); by default the VPA's
`status.recommendation` is used.

What the caller does with a plan: execute `actions` in order (resizes then evictions; rate limits are the
loop's), record `record_infeasible` entries in its `InfeasibleAttempts`, and after each resize patch update
its `ResizeAttempt` map and tracker (success → `clear(uid)`; 403 `NodeCapacity` → `record(uid,
decision.attempted())`).

Must not: call the API, log, emit metrics or read the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from vpa.logic.initialdelay import in_initial_delay
from vpa.logic.podlevel import PodLevelPlan
from vpa.logic.updater import guard, memorylimits, podlevel
from vpa.logic.updater.capacity import NodeRooms
from vpa.logic.updater.guard import ResizeGuard
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import (
    Action,
    Change,
    Hold,
    PodDecision,
    Reason,
    ResizeAttempt,
    decide_in_place,
    evict_or_skip,
    skip,
)
from vpa.logic.updater.priority import (
    ContainerTarget,
    ObservedCache,
    PodPriority,
    Triggers,
    compute_priority,
    considered_containers,
    evaluate,
    eviction_requirements_met,
    is_quick_oom,
    observed_names,
    oom_threshold_s,
    recommendations_by_name,
    sort_key,
    targets_by_name,
)
from vpa.logic.updater.resizestatus import NOT_RESIZING, ResizeStatus, resize_status
from vpa.logic.updater.restrictions import GroupKey, GroupProblem, ReplicaGroup, build_groups
from vpa.logic.updater.serverfeatures import ResizeFeatures
from vpa.model import annotations as ann
from vpa.model.annotations import RESIZE_POLICY_RESTART_CONTAINER as RESTART_CONTAINER
from vpa.model.annotations import MemoryLimitDecrease
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import (
    CONFIG_INVALID_CONDITION,
    Recommendation,
    RecommendedContainerResources,
    UpdateMode,
    VpaView,
)

RecommendationFor = Callable[[PodView], Recommendation | None]
PodLevelPlanner = Callable[[Sequence[Change]], PodLevelPlan]

_GROUP_REASONS = {
    GroupProblem.NO_CONTROLLER: Reason.NO_CONTROLLER,
    GroupProblem.REPLICAS_UNKNOWN: Reason.REPLICAS_UNKNOWN,
    GroupProblem.BELOW_MIN_REPLICAS: Reason.GROUP_BELOW_MIN_REPLICAS,
}


@dataclass(frozen=True, slots=True)
class PassInputs:
    """Everything one decision pass needs besides the VPA and its pods."""

    now: float
    settings: UpdaterSettings = field(default_factory=UpdaterSettings)
    gates: FeatureGates = field(default_factory=FeatureGates)
    replicas: Mapping[GroupKey, int] = field(default_factory=lambda: MappingProxyType({}))
    attempts: Mapping[str, ResizeAttempt] = field(default_factory=lambda: MappingProxyType({}))
    infeasible: InfeasibleAttempts = field(default_factory=InfeasibleAttempts)
    node_rooms: NodeRooms | None = None
    guard: ResizeGuard | None = None
    """Gate `ResizeGuard`: the loop's guard state; its revert backoffs hold decreases back."""
    resize_features: ResizeFeatures = field(default_factory=ResizeFeatures)
    """What the API server resizes in place besides containers and sidecars (pod-level resources,
    plain init containers): the updater's reading of its version and refusals, with
    `--in-place-pod-level-resources` applied. The default, neither, is the conservative one."""
    """Gate `InPlaceCapacityAware`: nodes' allocatable and requested resources (charged as resizes are
    planned); None = not checked."""


@dataclass(frozen=True, slots=True)
class VpaPlan:
    """The decisions for one VPA. `skip_reason` set → the VPA is not acted on at all (no pod decisions)."""

    vpa: VpaView
    mode: UpdateMode
    skip_reason: Reason | None = None
    actions: tuple[PodDecision, ...] = ()
    """To execute in this order: resizes (priority order), then evictions (priority order)."""
    skipped: tuple[PodDecision, ...] = ()

    @property
    def record_infeasible(self) -> tuple[tuple[str, Mapping[str, Resources]], ...]:
        """(pod uid, attempt) pairs the loop should record in its `InfeasibleAttempts`."""
        return tuple(
            (d.pod.uid, d.record_infeasible) for d in self.skipped if d.record_infeasible is not None
        )

    @property
    def decisions(self) -> tuple[PodDecision, ...]:
        return self.actions + self.skipped


class _Candidate:
    __slots__ = ("decision", "group", "key", "planner", "pod", "priority", "quick_oom", "targets", "triggers")

    def __init__(
        self,
        pod: PodView,
        group: ReplicaGroup,
        priority: PodPriority,
        targets: list[ContainerTarget],
        quick_oom: bool,
        triggers: Triggers,
        planner: PodLevelPlanner | None = None,
    ) -> None:
        self.planner = planner
        self.pod = pod
        self.group = group
        self.priority = priority
        self.targets = targets
        self.quick_oom = quick_oom
        self.triggers = triggers
        self.key = sort_key(pod, priority)
        self.decision: PodDecision | None = None


def _status(pod: PodView) -> ResizeStatus:
    if pod.resize_pending is None and pod.resize_in_progress is None and not pod.resize_status:
        return NOT_RESIZING
    return resize_status(pod)


def _is_boosted(pod: PodView) -> bool:
    return any(
        key.startswith(ann.CPU_STARTUP_BOOST_PREFIX) or key == ann.LEGACY_STARTUP_CPU_BOOST
        for key in pod.annotations
    )


def plan_vpa(
    vpa: VpaView,
    pods: Sequence[PodView],
    inputs: PassInputs,
    *,
    recommendation_for: RecommendationFor | None = None,
    observed_cache: ObservedCache | None = None,
) -> VpaPlan:
    """Decide for every live pod of `vpa` (pods with a deletion timestamp are ignored, as upstream)."""
    mode = vpa.effective_mode
    if not mode.updates_running_pods:
        return VpaPlan(vpa, mode, Reason.MODE_DOES_NOT_UPDATE)
    if mode is UpdateMode.IN_PLACE and not inputs.gates.in_place:
        return VpaPlan(vpa, mode, Reason.IN_PLACE_GATE_OFF)
    if inputs.gates.vpa_initial_delay and in_initial_delay(vpa, inputs.now):
        return VpaPlan(vpa, mode, Reason.INITIAL_DELAY_ACTIVE)
    invalid = vpa.status.condition(CONFIG_INVALID_CONDITION)
    if invalid is not None and invalid.is_true:
        return VpaPlan(vpa, mode, Reason.CONFIG_INVALID)
    shared: dict[str, RecommendedContainerResources] | None = None
    if recommendation_for is None:
        if vpa.recommendation is None or vpa.recommendation.is_empty():
            return VpaPlan(vpa, mode, Reason.NO_RECOMMENDATION)
        shared = recommendations_by_name(vpa.recommendation)

    settings, now = inputs.settings, inputs.now
    in_place = mode.resizes_in_place
    live = [pod for pod in pods if pod.deletion_timestamp is None]
    groups, problems = build_groups(live, vpa, settings, inputs.replicas)
    threshold_s = oom_threshold_s(vpa, settings, inputs.gates.per_vpa_config)
    boost_gate = inputs.gates.cpu_startup_boost
    cache: ObservedCache = observed_cache if observed_cache is not None else {}
    attempts = inputs.attempts
    features = inputs.resize_features

    skipped: list[PodDecision] = []
    candidates: list[_Candidate] = []
    for pod in live:
        owner = pod.owner
        group = None if owner is None else groups.get(GroupKey(pod.namespace, owner.kind, owner.name))
        if group is None:
            problem = (
                GroupProblem.NO_CONTROLLER
                if owner is None
                else problems.get(GroupKey(pod.namespace, owner.kind, owner.name), GroupProblem.NO_CONTROLLER)
            )
            skipped.append(skip(pod, _GROUP_REASONS[problem]))
            continue
        pod_level = pod.has_pod_level_resources
        if pod_level and not inputs.gates.pod_level_resources:
            skipped.append(skip(pod, Reason.POD_LEVEL_RESOURCES))
            continue
        if boost_gate and _is_boosted(pod):
            skipped.append(skip(pod, Reason.STARTUP_BOOSTED))
            continue
        if shared is None:
            assert recommendation_for is not None
            recommendation = recommendation_for(pod)
            if recommendation is None or recommendation.is_empty():
                skipped.append(skip(pod, Reason.NO_RECOMMENDATION))
                continue
            by_name = recommendations_by_name(recommendation)
        else:
            by_name = shared
        observed = observed_names(pod, cache)
        targets = considered_containers(pod, vpa, by_name, observed)
        weighed = pod
        if in_place and features.init_containers and pod.init_containers and not pod_level:
            pod, targets = _with_init_targets(pod, vpa, by_name, targets)
        planner: PodLevelPlanner | None = None
        if pod_level and targets:
            # Gate PodLevelResources: containers change only what they set themselves; the pod-level stanza
            # is weighed as one more target and planned with whatever the containers get.
            planner = podlevel.planner(pod, targets)
            whole = podlevel.pod_level_target(pod, targets)
            targets = podlevel.own_targets(pod, targets) + ([whole] if whole is not None else [])
        if not targets:
            skipped.append(skip(pod, Reason.NO_CONTAINER_RECOMMENDATION))
            continue
        # Plain init containers ride along: what they need never triggers an update (so never an eviction
        # the admission controller could not apply to them); it joins a resize the containers trigger.
        ridden = (targets if weighed is pod
                  else [t for t in targets if not pod.is_plain_init_container(t.name)])
        priority = compute_priority(ridden)
        quick_oom = is_quick_oom(weighed, vpa, threshold_s, observed, now)
        attempt = attempts.get(pod.uid) if attempts else None
        disrupted_at = (
            attempt.patched_at
            if attempt is not None and attempt.disruptive and not attempt.rejected
            else None
        )
        triggers = evaluate(priority, quick_oom, pod, now, settings, disrupted_at)
        verdict = triggers.disruption_free if in_place else triggers.recreate
        if not verdict.accepts:
            skipped.append(skip(pod, Reason(verdict.value), priority))
            continue
        candidates.append(_Candidate(pod, group, priority, targets, quick_oom, triggers, planner))

    memory_policies, memory_problem = memorylimits.policies_of(vpa.annotations)
    candidates.sort(key=lambda c: c.key)
    resizes: list[PodDecision] = []
    evictions: list[_Candidate] = []
    for candidate in candidates:
        pod = candidate.pod
        if in_place:
            decision = decide_in_place(
                pod,
                mode,
                candidate.targets,
                candidate.priority,
                candidate.quick_oom,
                candidate.triggers,
                candidate.group,
                status=_status(pod),
                attempt=attempts.get(pod.uid) if attempts else None,
                infeasible=inputs.infeasible,
                settings=settings,
                now=now,
                pod_level=candidate.planner,
                hold=_hold(pod, memory_policies, memory_problem, _held(inputs, vpa, pod)),
                pod_level_resize=features.pod_level,
            )
            decision = _fit(decision, inputs, mode, candidate)
        else:
            reason = Reason(candidate.triggers.recreate.value)
            decision = PodDecision(pod, Action.EVICT, reason, candidate.priority)
        if decision.action is Action.EVICT:
            candidate.decision = decision
            evictions.append(candidate)
        elif decision.action is Action.SKIP:
            skipped.append(decision)
        else:
            resizes.append(decision)

    evicted: list[PodDecision] = []
    for candidate in evictions:
        intent = candidate.decision
        assert intent is not None
        pod = candidate.pod
        held = guard.evicting_would_decrease(
            pod, tuple(targets_by_name(candidate.targets).items()), _held(inputs, vpa, pod)
        )
        if not mode.evicts:  # defence in depth: InPlace never evicts
            skipped.append(skip(pod, intent.reason, intent.priority, "mode never evicts"))
        elif held:
            skipped.append(skip(pod, Reason.DECREASE_HELD, intent.priority, "; ".join(held)))
        elif not eviction_requirements_met(vpa, candidate.targets, pod):
            skipped.append(skip(pod, Reason.EVICTION_REQUIREMENTS, intent.priority, intent.reason.value))
        elif candidate.group.can_evict(pod):
            candidate.group.charge_eviction(pod)
            evicted.append(intent)
        else:
            group = candidate.group
            blocked = Reason.BELOW_MIN_REPLICAS if group.below_min_replicas else Reason.DISRUPTION_BUDGET
            skipped.append(skip(pod, blocked, intent.priority, intent.reason.value))
    return VpaPlan(vpa, mode, None, tuple(resizes) + tuple(evicted), tuple(skipped))


def _with_init_targets(
    pod: PodView, vpa: VpaView, by_name: Mapping[str, RecommendedContainerResources],
    targets: list[ContainerTarget],
) -> tuple[PodView, list[ContainerTarget]]:
    """A server that resizes plain init containers (1.36+): the pod viewed with the ones the recommendation
    names (`PodView.with_plain_init_containers`) and their targets added. The admission controller never
    lists them in `vpaObservedContainers`, so that filter does not apply to them; one whose `resizePolicy`
    says `RestartContainer` is left out (kube-apiserver refuses to resize it). Pods with pod-level resources
    are not extended: their pod-level values are planned over their containers and sidecars only."""
    names = frozenset(
        c.name for c in pod.init_containers
        if not c.is_sidecar and c.name in by_name and RESTART_CONTAINER not in c.resize_policy.values()
    )
    extended = pod.with_plain_init_containers(names)
    if extended is pod:
        return pod, targets
    extra = [t for t in considered_containers(extended, vpa, by_name, None) if t.name in names]
    return extended, targets + extra


def _fit(decision: PodDecision, inputs: PassInputs, mode: UpdateMode, candidate: _Candidate) -> PodDecision:
    """Gate `InPlaceCapacityAware` (AEP-9726): a resize the node cannot admit is not sent. `InPlace` waits;
    `InPlaceOrRecreate` falls back to eviction when the Recreate rules allow it. A resize that fits is
    charged to its node."""
    rooms = inputs.node_rooms
    if rooms is None or not inputs.gates.in_place_capacity_aware:
        return decision
    if decision.action not in (Action.RESIZE, Action.RESIZE_PARTIAL):
        return decision
    verdict = rooms.verdict(decision.pod, decision)
    if verdict is None:
        rooms.charge(decision.pod, decision)
        return decision
    detail = f"the kubelet would answer {verdict.answer}: {verdict.message}"
    refused = evict_or_skip(
        decision.pod, mode, Reason.WOULD_NOT_FIT, decision.priority, candidate.triggers, detail
    )
    # The amounts move with every neighbour's requests; the answer and the resource are the pod's state.
    return refused._replace(state=f"{verdict.answer} {verdict.resource}")


def _held(inputs: PassInputs, vpa: VpaView, pod: PodView) -> Mapping[str, float]:
    """Containers of `pod` whose decreases a revert's backoff holds back (gate `ResizeGuard`)."""
    if inputs.guard is None or not guard_enabled(inputs.gates, vpa):
        return {}
    return inputs.guard.held(pod, inputs.now)


def guard_enabled(gates: FeatureGates, vpa: VpaView) -> bool:
    """Gate `ResizeGuard` on and the VPA annotated `vpa.dev/resize-guard: "true"`."""
    return gates.resize_guard and ann.resize_guard_requested(vpa.annotations)


def guard_asked(gates: FeatureGates, vpas: Mapping[str, VpaView]) -> Callable[[str], bool]:
    """For `ResizeGuard.check`: whether the VPA of a key (`namespace/name`, among `vpas`) asks for the guard
    now. One that dropped the annotation after the resize, or is no longer among them, does not: none of
    its reverts is made, the first one no more than one tried again."""

    def asked(vpa_key: str) -> bool:
        vpa = vpas.get(vpa_key)
        return vpa is not None and guard_enabled(gates, vpa)

    return asked


def _hold(
    pod: PodView,
    memory_policies: Mapping[str, MemoryLimitDecrease],
    memory_problem: str,
    backed_off: Mapping[str, float],
) -> Hold | None:
    """The changes a resize of `pod` may not make in place now (`inplace.decide_in_place` rule 7)."""
    if not memory_policies and not backed_off:
        return None

    def hold(changes: Sequence[Change]) -> tuple[list[Change], tuple[str, ...]]:
        kept, notes = memorylimits.hold_memory_limit_decreases(pod, changes, memory_policies)
        if notes and memory_problem:
            notes = (*notes, memory_problem)
        kept, backoff_notes = guard.hold_backed_off_decreases(pod, kept, backed_off)
        return kept, notes + backoff_notes

    return hold


def plan_all(
    work: Iterable[tuple[VpaView, Sequence[PodView]]],
    inputs: PassInputs,
    *,
    recommendation_for: RecommendationFor | None = None,
) -> list[VpaPlan]:
    """`plan_vpa` for each (VPA, its pods), sharing one parse cache for `vpaObservedContainers`."""
    cache: ObservedCache = {}
    return [
        plan_vpa(vpa, pods, inputs, recommendation_for=recommendation_for, observed_cache=cache)
        for vpa, pods in work
    ]
