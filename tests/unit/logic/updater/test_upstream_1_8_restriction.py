"""Upstream VPA 1.8.1's unit tests of `pkg/updater/restriction` (and the startup-boost cases of
`pkg/updater/inplace`), restated as facts about our updater logic.

Rows are named after the upstream test and case. Upstream's factory takes `--min-replicas=2` and
`--in-place-skip-disruption-budget=false` in these tests, so the rows use the same settings (`UPSTREAM`).
Upstream asks `CanEvict` / `CanInPlaceUpdate` of each pod before any disruption is charged, then charges
them in order; the eviction rows do the same with `ReplicaGroup.can_evict` and `charge_eviction`, and the
in-place rows ask `plan_vpa` about one pod whose siblings need nothing.

Rows that disagree on purpose are marked DEVIATION and listed in docs/deviations.md ("Upstream 1.8.1 unit
tests"). Not restated: event emission (`TestEvictEmitEvent`, `TestInPlaceUpdate_EventEmission`: our events
are the component's) and the feature-gate plumbing of `TestInPlaceModeDisabledFeatureGate` (covered by
tests/unit/logic/updater/test_plan.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import BASE_TIME, make_condition, make_container, make_pod, make_vpa, rfc3339
from tests.unit.logic.updater.test_support import KEY, NOW, ctr, pod, rec, vpa
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import Action, Reason, ResizeAttempt
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.logic.updater.resizestatus import ResizeState, resize_status
from vpa.logic.updater.restrictions import GroupKey, GroupProblem, build_groups
from vpa.logic.updater.unboost import plan_unboost
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import VpaView

JSON = dict[str, Any]
UPSTREAM = UpdaterSettings(min_replicas=2, in_place_skip_disruption_budget=False)
GATES = FeatureGates.parse("InPlace=true,CPUStartupBoost=true")
OUT_OF_RANGE = [rec(cpu="800m", lower=("700m", "1Mi"))]


# --- eviction budget: TestDisruptReplicatedByController and the per-controller tests ------------------

R, P = "Running", "Pending"
# (name, configured replicas, tolerance, per-VPA minReplicas, phases, canEvict per pod, evicted in order)
EVICTION: list[tuple[str, int, float, int | None, list[str], list[bool], list[bool]]] = [
    ("Evict only first pod (half of 3)", 3, 0.5, None, [R, R, R], [True] * 3, [True, False, False]),
    ("Evict two pods (half of 4)", 4, 0.5, None, [R] * 4, [True] * 4, [True, True, False, False]),
    (
        "Half of the population can be evicted. One pod is missing already",
        4,
        0.5,
        None,
        [R] * 3,
        [True] * 3,
        [True, False, False],
    ),
    (
        "For small eviction tolerance at least one pod is evicted",
        3,
        0.1,
        None,
        [R] * 3,
        [True] * 3,
        [True, False, False],
    ),
    (
        "Only 2 pods in replica of 3 and tolerance is 0. None of pods can be evicted",
        3,
        0.1,
        None,
        [R, R],
        [False, False],
        [False, False],
    ),
    (
        "Only pending pod can be evicted without violation of tolerance",
        3,
        0.5,
        None,
        [R, P, R],
        [False, True, False],
        [False, True, False],
    ),
    (
        "Pending pods are always evictable",
        4,
        0.5,
        None,
        [R, P, P, P],
        [False, True, True, True],
        [False, True, True, True],
    ),
    ("Cannot evict a single Pod under default settings", 1, 0.5, None, [R], [False], [False]),
    ("Can evict even a single Pod using PodUpdatePolicy.MinReplicas", 1, 0.5, 1, [R], [True], [True]),
    # TestEvictReplicatedByReplicaSet / StatefulSet / Job: 5 of 5, tolerance 0.5 → 2
    (
        "TestEvictReplicatedBy* (half of 5)",
        5,
        0.5,
        None,
        [R] * 5,
        [True] * 5,
        [True, True, False, False, False],
    ),
    # pods_eviction_restriction_test.go
    ("TestEvictTooFewReplicas", 1, 0.5, None, [R], [False], [False]),
    (
        "TestEvictionTolerance (tolerance 0.8 of 5)",
        5,
        0.8,
        None,
        [R] * 5,
        [True] * 5,
        [True, True, True, True, False],
    ),
    (
        "TestEvictAtLeastOne (tolerance 0.1 of 5)",
        5,
        0.1,
        None,
        [R] * 5,
        [True] * 5,
        [True, False, False, False, False],
    ),
]


@pytest.mark.parametrize(
    ("configured", "tolerance", "min_replicas", "phases", "can_evict", "evicted"),
    [c[1:] for c in EVICTION],
    ids=[c[0] for c in EVICTION],
)
def test_eviction_budget(
    configured: int,
    tolerance: float,
    min_replicas: int | None,
    phases: list[str],
    can_evict: list[bool],
    evicted: list[bool],
) -> None:
    pods = [pod(f"test-{i}", phase=phase) for i, phase in enumerate(phases)]
    settings = UpdaterSettings(
        min_replicas=2, eviction_tolerance=tolerance, in_place_skip_disruption_budget=False
    )
    groups, problems = build_groups(pods, vpa(min_replicas=min_replicas), settings, {KEY: configured})
    group = groups.get(KEY)
    assert [group is not None and group.can_evict(p) for p in pods] == can_evict
    done = []
    for p in pods:
        ok = group is not None and group.can_evict(p)
        if ok and group is not None:
            group.charge_eviction(p)
        done.append(ok)
    assert done == evicted
    if group is None:
        assert problems[KEY] is GroupProblem.BELOW_MIN_REPLICAS


@pytest.mark.parametrize("number_ready", [5, 0], ids=["half of 5", "half of 5 even if no pods are ready"])
def test_evict_replicated_by_daemon_set(number_ready: int) -> None:
    # TestEvictReplicatedByDaemonSet (1.8.1): the budget counts desiredNumberScheduled (5), whatever is
    # Ready; the caller (`vpa.kube.controllers`) reads that field, so the group's configured size is 5.
    ds = GroupKey("default", "DaemonSet", "ds")
    pods = [pod(f"ds-{i}", owner="ds", owner_kind="DaemonSet") for i in range(5)]
    groups, problems = build_groups(pods, vpa(), UPSTREAM, {ds: 5})
    assert not problems, "the DaemonSet must not be skipped"
    group = groups[ds]
    assert all(group.can_evict(p) for p in pods)
    done = []
    for p in pods:
        ok = group.can_evict(p)
        if ok:
            group.charge_eviction(p)
        done.append(ok)
    assert done == [True, True, False, False, False]
    del number_ready  # numberReady plays no part: that is the point of the upstream change


def test_single_pod_with_cpu_boost_in_progress() -> None:
    # TestDisruptReplicatedByController "Can update even a single Pod if CPU boost is in progress":
    # upstream keeps a group below minReplicas when one of its pods carries a boost annotation, so the
    # single pod becomes evictable. DEVIATION: our groups below minReplicas never allow an eviction; the
    # boost ends anyway, because unboosting is not charged to the disruption budget (`plan_unboost`).
    boosted = pod("test-1", annotations={"vpaCpuStartupBoost/app": '{"requests":{"cpu":"500m"}}'})
    groups, problems = build_groups([boosted], vpa(), UPSTREAM, {KEY: 1})
    assert problems == {KEY: GroupProblem.BELOW_MIN_REPLICAS}
    assert not groups
    ended = plan_unboost(boosted, vpa(), None, NOW)
    assert ended.expired == ("app",)  # Ready since the pod started a day ago; no duration: expired


# --- in-place verdicts: TestDisruptReplicatedByController (IPOR rows), TestCanInPlaceUpdate,
#     TestInPlaceModeResizeStatuses ----------------------------------------------------------------------


def _verdict(
    v: VpaView,
    target: PodView,
    *,
    configured: int = 3,
    siblings: int = 2,
    settings: UpdaterSettings = UPSTREAM,
    attempt: ResizeAttempt | None = None,
    infeasible: InfeasibleAttempts | None = None,
) -> tuple[Action, Reason]:
    # siblings already at the 800m target: they need nothing, so they spend no budget
    pods = [target] + [pod(f"sibling-{i}", containers=[ctr(cpu="800m")]) for i in range(siblings)]
    inputs = PassInputs(
        now=NOW,
        settings=settings,
        gates=GATES,
        replicas={KEY: configured},
        attempts={target.uid: attempt} if attempt else {},
        infeasible=infeasible or InfeasibleAttempts(),
    )
    plan = plan_vpa(v, pods, inputs)
    decisions = [d for d in plan.decisions if d.pod.name == target.name]
    if not decisions:
        return Action.SKIP, Reason.BELOW_MIN_REPLICAS
    return decisions[0].action, decisions[0].reason


APPROVED = (Action.RESIZE,)
DEFERRED = (Action.SKIP,)
EVICT = (Action.EVICT,)
MIN = 60.0
HOUR = 3600.0

IN_PLACE: list[tuple[str, str, dict[str, Any], int, int, float | None, tuple[Action, ...]]] = [
    # (name, mode, pod() arguments, configured, siblings, seconds since our patch, expected actions)
    ("In-place update only first pod (half of 3)", "InPlaceOrRecreate", {}, 3, 2, None, APPROVED),
    ("Cannot in-place a single Pod under default settings", "InPlaceOrRecreate", {}, 1, 0, None, DEFERRED),
    (
        "Ongoing: Infeasible falls back to eviction",
        "InPlaceOrRecreate",
        {"pending_reason": "Infeasible"},
        3,
        2,
        1.0,
        EVICT,
    ),
    ("Ongoing: InProgress is deferred", "InPlaceOrRecreate", {"in_progress_reason": ""}, 3, 2, 1.0, DEFERRED),
    (
        "CanInPlaceUpdate=InPlaceDeferred - no pods can be in-placed, one missing",
        "InPlaceOrRecreate",
        {},
        3,
        1,
        None,
        DEFERRED,
    ),
    (
        "InPlace mode - ResizeStatusDeferred returns InPlaceDeferred",
        "InPlace",
        {"pending_reason": "Deferred"},
        3,
        2,
        0.001,
        DEFERRED,
    ),
    (
        "InPlace mode - ResizeStatusInfeasible returns InPlaceInfeasible",
        "InPlace",
        {"pending_reason": "Infeasible"},
        3,
        2,
        0.0,
        DEFERRED,
    ),
    (
        "InPlace mode - ResizeStatusInProgress returns InPlaceDeferred",
        "InPlace",
        {"in_progress_reason": ""},
        3,
        2,
        HOUR,
        DEFERRED,
    ),
    (
        "InPlace mode - ResizeStatusError returns InPlaceDeferred",
        "InPlace",
        {"in_progress_reason": "Error"},
        3,
        2,
        0.001,
        DEFERRED,
    ),
    (
        "InPlaceOrRecreate mode - ResizeStatusDeferred within timeout returns InPlaceDeferred",
        "InPlaceOrRecreate",
        {"pending_reason": "Deferred"},
        3,
        2,
        0.001,
        DEFERRED,
    ),
    (
        "InPlaceOrRecreate mode - ResizeStatusDeferred past timeout returns InPlaceEvict",
        "InPlaceOrRecreate",
        {"pending_reason": "Deferred"},
        3,
        2,
        10 * MIN,
        EVICT,
    ),
    (
        "InPlaceOrRecreate mode - ResizeStatusInfeasible returns InPlaceEvict",
        "InPlaceOrRecreate",
        {"pending_reason": "Infeasible"},
        3,
        2,
        HOUR,
        EVICT,
    ),
    (
        "InPlaceOrRecreate mode - ResizeStatusInProgress within timeout returns InPlaceDeferred",
        "InPlaceOrRecreate",
        {"in_progress_reason": ""},
        3,
        2,
        0.001,
        DEFERRED,
    ),
    (
        "InPlaceOrRecreate mode - ResizeStatusInProgress past timeout returns InPlaceEvict",
        "InPlaceOrRecreate",
        {"in_progress_reason": ""},
        3,
        2,
        2 * HOUR,
        EVICT,
    ),
]


@pytest.mark.parametrize(
    ("mode", "pod_args", "configured", "siblings", "since", "expected"),
    [c[1:] for c in IN_PLACE],
    ids=[c[0] for c in IN_PLACE],
)
def test_in_place_verdicts(
    mode: str,
    pod_args: dict[str, Any],
    configured: int,
    siblings: int,
    since: float | None,
    expected: tuple[Action, ...],
) -> None:
    attempt = ResizeAttempt(patched_at=NOW - since) if since is not None else None
    action, reason = _verdict(
        vpa(mode, OUT_OF_RANGE), pod(**pod_args), configured=configured, siblings=siblings, attempt=attempt
    )
    assert action in expected, reason


DEFAULTS = UpdaterSettings()  # our --in-place-skip-disruption-budget=true
SMALL_TOLERANCE = UpdaterSettings(
    min_replicas=2, eviction_tolerance=0.1, in_place_skip_disruption_budget=False
)
IN_PLACE_MORE: list[
    tuple[str, str, dict[str, Any], int, int, float | None, UpdaterSettings, tuple[Action, ...]]
] = [
    # TestCanInPlaceUpdate rows not covered above
    (
        "InPlaceApproved(InPlaceOrRecreate mode) - with inPlaceSkipDisruptionBudget flag",
        "InPlaceOrRecreate",
        {},
        1,
        0,
        None,
        DEFAULTS,
        APPROVED,
    ),
    (
        "InPlaceApproved(InPlace mode) - with inPlaceSkipDisruptionBudget flag",
        "InPlace",
        {},
        1,
        0,
        None,
        DEFAULTS,
        APPROVED,
    ),
    (
        "InPlaceDeferred(InPlace) - without inPlaceSkipDisruptionBudget flag",
        "InPlace",
        {},
        1,
        0,
        None,
        UPSTREAM,
        DEFERRED,
    ),
    (
        "InPlaceApproved - small tolerance, all running",
        "InPlaceOrRecreate",
        {},
        3,
        2,
        None,
        SMALL_TOLERANCE,
        APPROVED,
    ),
    (
        "InPlaceEvict - resize inProgress for more too long",
        "InPlaceOrRecreate",
        {"in_progress_reason": ""},
        3,
        2,
        2 * HOUR,
        UPSTREAM,
        EVICT,
    ),
    ("InPlace - InPlaceApproved - all pods running", "InPlace", {}, 3, 2, None, UPSTREAM, APPROVED),
    (
        "InPlace - resize InProgress, waits indefinitely (no timeout)",
        "InPlace",
        {"in_progress_reason": ""},
        3,
        2,
        2 * HOUR,
        UPSTREAM,
        DEFERRED,
    ),
    (
        "InPlace - no update policy for vpa (Recreate) evicts the pod stuck resizing",
        "Recreate",
        {"in_progress_reason": ""},
        3,
        2,
        2 * HOUR,
        UPSTREAM,
        EVICT,
    ),
    (
        "InPlace mode - deferred pod with changed recommendations retries (waits)",
        "InPlace",
        {"pending_reason": "Deferred"},
        3,
        2,
        None,
        UPSTREAM,
        DEFERRED,
    ),
    (
        "InPlaceOrRecreate mode - deferred pod with changed recommendations retries (waits)",
        "InPlaceOrRecreate",
        {"pending_reason": "Deferred"},
        3,
        2,
        None,
        UPSTREAM,
        DEFERRED,
    ),
]


@pytest.mark.parametrize(
    ("mode", "pod_args", "configured", "siblings", "since", "settings", "expected"),
    [c[1:] for c in IN_PLACE_MORE],
    ids=[c[0] for c in IN_PLACE_MORE],
)
def test_can_in_place_update(
    mode: str,
    pod_args: dict[str, Any],
    configured: int,
    siblings: int,
    since: float | None,
    settings: UpdaterSettings,
    expected: tuple[Action, ...],
) -> None:
    attempt = ResizeAttempt(patched_at=NOW - since) if since is not None else None
    action, reason = _verdict(
        vpa(mode, OUT_OF_RANGE),
        pod(**pod_args),
        configured=configured,
        siblings=siblings,
        settings=settings,
        attempt=attempt,
    )
    assert action in expected, reason


def test_infeasible_caching_no_current_recommendation_defers() -> None:
    # TestCanInPlaceUpdate "InfeasibleCaching - no current recommendation defers"
    action, _ = _verdict(vpa("InPlace", []), pod(), configured=1, siblings=0, settings=DEFAULTS)
    assert action is Action.SKIP


def test_in_place_mode_infeasible_is_recorded_not_evicted() -> None:
    # TestInPlaceModeAllowsRetryForInfeasible: InPlace mode never evicts an infeasible pod; it records the
    # attempt (ours: the spec requests that did not fit) and retries when the target is lower.
    target = pod(pending_reason="Infeasible")
    action, reason = _verdict(vpa("InPlace", OUT_OF_RANGE), target, attempt=ResizeAttempt(NOW - 1))
    assert (action, reason) == (Action.SKIP, Reason.INFEASIBLE_RECORDED)


@pytest.mark.parametrize(
    ("recorded_cpu", "expected"),
    [(800, Action.SKIP), (900, Action.RESIZE), (700, Action.SKIP), (None, Action.RESIZE)],
    ids=[
        "InfeasibleCaching - same recommendation returns cached",
        "InfeasibleCaching - lower recommendation allows retry",
        "InfeasibleCaching - higher recommendation returns cached",
        "InfeasibleCaching - no history proceeds normally",
    ],
)
def test_infeasible_caching(recorded_cpu: int | None, expected: Action) -> None:
    # TestCanInPlaceUpdate, InfeasibleCaching rows: the target is 800m (OUT_OF_RANGE)
    from vpa.model.resources import Resources

    target = pod()
    infeasible = InfeasibleAttempts()
    if recorded_cpu is not None:
        infeasible = infeasible.record(target.uid, {"app": Resources(recorded_cpu, 512 * 2**20)})
    action, _ = _verdict(vpa("InPlace", OUT_OF_RANGE), target, infeasible=infeasible)
    assert action is expected


def test_infeasible_caching_in_place_or_recreate_ignores_cache() -> None:
    # TestCanInPlaceUpdate "InfeasibleCaching - InPlaceOrRecreate ignores cache"
    from vpa.model.resources import Resources

    target = pod()
    infeasible = InfeasibleAttempts().record(target.uid, {"app": Resources(800, 512 * 2**20)})
    action, _ = _verdict(vpa("InPlaceOrRecreate", OUT_OF_RANGE), target, infeasible=infeasible)
    assert action is Action.RESIZE


# --- TestGetResizeStatus -------------------------------------------------------------------------------


def _conditions_pod(conditions: list[JSON]) -> PodView:
    raw = make_pod("p", extra_conditions=conditions)
    return pod_from_dict(raw)


PENDING, IN_PROGRESS = "PodResizePending", "PodResizeInProgress"
RESIZE_STATUS: list[tuple[str, list[JSON], ResizeState]] = [
    ("pod not in-place updating - no resize status", [], ResizeState.NONE),
    (
        "PodResizePending with Deferred reason",
        [make_condition(PENDING, reason="Deferred")],
        ResizeState.DEFERRED,
    ),
    (
        "PodResizePending with Infeasible reason",
        [make_condition(PENDING, reason="Infeasible", message="Insufficient cpu")],
        ResizeState.INFEASIBLE,
    ),
    (
        "PodResizePending with unknown reason",
        [make_condition(PENDING, reason="SomeOtherReason")],
        ResizeState.UNKNOWN,
    ),
    ("PodResizePending with empty reason", [make_condition(PENDING)], ResizeState.UNKNOWN),
    (
        "PodResizeInProgress with empty reason and message",
        [make_condition(IN_PROGRESS)],
        ResizeState.IN_PROGRESS,
    ),
    (
        "PodResizeInProgress with Error reason",
        [make_condition(IN_PROGRESS, reason="Error", message="Failed to resize container")],
        ResizeState.ERROR,
    ),
    (
        "PodResizeInProgress with unknown reason",
        [make_condition(IN_PROGRESS, reason="SomeOtherReason", message="some message")],
        ResizeState.UNKNOWN,
    ),
    (
        "PodResizeInProgress with message but no reason",
        [make_condition(IN_PROGRESS, message="some message")],
        ResizeState.UNKNOWN,
    ),
    ("pod with unrelated condition only", [], ResizeState.NONE),
    (
        "both PodResizePending and PodResizeInProgress - PodResizePending takes precedence",
        [make_condition(PENDING, reason="Deferred"), make_condition(IN_PROGRESS)],
        ResizeState.DEFERRED,
    ),
    (
        "PodResizePending Infeasible takes precedence over PodResizeInProgress Error",
        [
            make_condition(PENDING, reason="Infeasible"),
            make_condition(IN_PROGRESS, reason="Error", message="Error message"),
        ],
        ResizeState.INFEASIBLE,
    ),
]


@pytest.mark.parametrize(
    ("conditions", "expected"), [c[1:] for c in RESIZE_STATUS], ids=[c[0] for c in RESIZE_STATUS]
)
def test_get_resize_status(conditions: list[JSON], expected: ResizeState) -> None:
    assert resize_status(_conditions_pod(conditions)).state is expected


# --- pkg/updater/inplace TestCalculatePatches_MultiContainerResourceUpdates: ending startup boosts -------

TEN_S, THOUSAND_S = 10, 1000


def _boosted_pod(boosted: bool = True) -> PodView:
    containers = [
        make_container(
            name, cpu_request="1m", memory_request=None, cpu_limit=None, memory_limit=None, probes=False
        )
        for name in ("c1", "c2")
    ]
    annotations = {f"vpaCpuStartupBoost/{n}": '{"requests":{"cpu":"100m"}}' for n in ("c1", "c2")}
    raw = make_pod(
        "boosted",
        containers=containers,
        annotations=annotations if boosted else {},
        owner_kind="ReplicaSet",
        owner_name="rs",
        created_at=BASE_TIME,
        started_at=BASE_TIME,
    )
    ready_since = NOW - 5 * MIN
    for condition in raw["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "True"
            condition["lastTransitionTime"] = rfc3339(ready_since)
    return pod_from_dict(raw)


def _boost_vpa(mode: str, durations: tuple[int, int] | None, target_cpu: str | None) -> VpaView:
    policies = None
    if durations is not None:
        policies = [
            {
                "containerName": name,
                "startupBoost": {"cpu": {"type": "Factor", "factor": 2, "durationSeconds": seconds}},
            }
            for name, seconds in zip(("c1", "c2"), durations, strict=True)
        ]
    recommendation = None
    if target_cpu is not None:
        recommendation = [{"containerName": n, "target": {"cpu": target_cpu}} for n in ("c1", "c2")]
    raw = make_vpa(update_mode=mode, container_policies=policies, recommendation=recommendation)
    return vpa_from_dict(raw)


def _cpu_requests(changes: Any) -> dict[str, int | None]:
    return {c.name: c.requests.cpu_millicores for c in changes}


@pytest.mark.parametrize(
    ("mode", "durations", "target_cpu", "expected"),
    [
        ("Off", (TEN_S, THOUSAND_S), None, {"c1": 100}),
        ("InPlaceOrRecreate", (TEN_S, THOUSAND_S), "200m", {"c1": 200}),
        ("InPlaceOrRecreate", (THOUSAND_S, THOUSAND_S), "200m", {}),
    ],
    ids=[
        "UpdateMode Off - Only unboost expired container",
        "UpdateMode Auto - ignores boosted unexpired containers naturally",
        "No Unboost - both containers unexpired so they stay boosted safely",
    ],
)
def test_unboost_patches(
    mode: str, durations: tuple[int, int], target_cpu: str | None, expected: dict[str, int]
) -> None:
    v = _boost_vpa(mode, durations, target_cpu)
    plan = plan_unboost(_boosted_pod(), v, v.recommendation, NOW)
    assert _cpu_requests(plan.changes) == expected
    assert "c2" not in plan.expired  # its 1000 s have not passed: it keeps its boost


def test_no_boost_in_mode_off_yields_nothing() -> None:
    # "Regular Recommendation - UpdateMode Off - no startup boost annotations yields no patches"
    v = _boost_vpa("Off", None, "300m")
    plan = plan_unboost(_boosted_pod(boosted=False), v, v.recommendation, NOW)
    assert plan.expired == ()
    assert plan.changes == ()


# --- TestInPlaceSkipDisruptionBudgetWithResizePolicy ---------------------------------------------------
# 5 replicas, tolerance 0.1 (one disruption per pass), an InPlaceOrRecreate VPA whose target changes both
# cpu and memory of every container. Upstream counts the pods resized in place; a pod is disruptive for
# upstream when any container has any `RestartContainer` policy. Ours decides per changed resource
# (AEP-4016, docs/deviations.md "What counts as disruption-free"): where a pod's memory change is free and
# its cpu change restarts, all five get the free part now (`RESIZE_PARTIAL`) and one the whole change.

BOTH = ("cpu", "memory")
RESIZE_POLICY: list[tuple[str, list[tuple[str, tuple[str, ...]]], bool, int, tuple[int, int]]] = [
    # (name, containers (name, resources restarting), --in-place-skip-disruption-budget, upstream's count,
    #  ours: (full resizes, partial resizes))
    ("NotRequired policy with flag enabled - should skip disruption budget", [("c1", ())], True, 5, (5, 0)),
    (
        "RestartContainer policy with flag enabled - should respect disruption budget (flag disabled)",
        [("c1", ())],
        False,
        1,
        (1, 0),
    ),
    (
        "Only RestartContainer policy with flag enabled - should respect disruption budget",
        [("c1", ("cpu",))],
        True,
        1,
        (1, 4),
    ),  # DEVIATION: the free memory part goes now
    ("No resize policy with flag enabled - should skip disruption budget", [("c1", ())], True, 5, (5, 0)),
    (
        "No resize policy with flag disabled - should respect disruption budget",
        [("c1", ())],
        False,
        1,
        (1, 0),
    ),
    (
        "Multiple containers - all NotRequired - should skip disruption budget",
        [("c1", ()), ("c2", ())],
        True,
        5,
        (5, 0),
    ),
    (
        "Multiple containers - one NotRequired, one RestartContainer - should respect disruption budget",
        [("c1", ()), ("c2", BOTH)],
        True,
        1,
        (1, 4),
    ),  # DEVIATION: c1's change goes now
    (
        "Multiple containers - one with policy, one without - should skip disruption budget",
        [("c1", ()), ("c2", ())],
        True,
        5,
        (5, 0),
    ),
]


@pytest.mark.parametrize(
    ("containers", "skip_budget", "upstream", "ours"),
    [c[1:] for c in RESIZE_POLICY],
    ids=[c[0] for c in RESIZE_POLICY],
)
def test_in_place_skip_disruption_budget_with_resize_policy(
    containers: list[tuple[str, tuple[str, ...]]], skip_budget: bool, upstream: int, ours: tuple[int, int]
) -> None:
    spec = [ctr(name, cpu="500m", mem="512Mi", restart=restart) for name, restart in containers]
    pods = [pod(f"test-{i}", containers=spec) for i in range(5)]
    recs = [rec(name, cpu="800m", mem="1Gi") for name, _ in containers]
    settings = UpdaterSettings(
        min_replicas=2, eviction_tolerance=0.1, in_place_skip_disruption_budget=skip_budget
    )
    inputs = PassInputs(
        now=NOW,
        settings=settings,
        gates=GATES,
        replicas={KEY: 5},
        attempts={},
        infeasible=InfeasibleAttempts(),
    )
    plan = plan_vpa(vpa("InPlaceOrRecreate", recs), pods, inputs)
    full = sum(1 for d in plan.decisions if d.action is Action.RESIZE)
    partial = sum(1 for d in plan.decisions if d.action is Action.RESIZE_PARTIAL)
    assert (full, partial) == ours
    assert full == upstream  # whole changes agree everywhere; the deviation is only the partial ones


# --- the sequential in-place budget tests of pods_inplace_restriction_test.go (and the eviction one with
#     the skip flag): every pod of the group needs the same restart-free change; count what one pass does

SEQUENTIAL: list[tuple[str, str, int, int, int, float, bool, int]] = [
    # (name, mode, configured, live pods, --min-replicas, tolerance, skip flag, pods resized)
    ("TestInPlaceTooFewReplicas (minReplicas 10)", "InPlaceOrRecreate", 5, 5, 10, 0.5, False, 0),
    ("TestEvictionToleranceForInPlace (0.8 of 5)", "InPlaceOrRecreate", 5, 5, 2, 0.8, False, 4),
    ("TestEvictionToleranceForInPlaceWithSkipDisruptionBudget", "InPlaceOrRecreate", 5, 5, 2, 0.8, True, 5),
    (
        "TestEvictionToleranceForInPlaceWithSkipDisruptionBudgetWithLessThanMinimumPods",
        "InPlaceOrRecreate",
        5,
        1,
        2,
        0.8,
        True,
        1,
    ),
    ("TestInPlaceAtLeastOne (0.1 of 5)", "InPlaceOrRecreate", 5, 5, 2, 0.1, False, 1),
    ("TestInPlaceModeAtLeastOne (0.1 of 5)", "InPlace", 5, 5, 2, 0.1, False, 1),
]


@pytest.mark.parametrize(
    ("mode", "configured", "live", "min_replicas", "tolerance", "skip", "resized"),
    [c[1:] for c in SEQUENTIAL],
    ids=[c[0] for c in SEQUENTIAL],
)
def test_in_place_budget_per_pass(
    mode: str, configured: int, live: int, min_replicas: int, tolerance: float, skip: bool, resized: int
) -> None:
    pods = [pod(f"test-{i}") for i in range(live)]
    settings = UpdaterSettings(
        min_replicas=min_replicas, eviction_tolerance=tolerance, in_place_skip_disruption_budget=skip
    )
    inputs = PassInputs(
        now=NOW,
        settings=settings,
        gates=GATES,
        replicas={KEY: configured},
        attempts={},
        infeasible=InfeasibleAttempts(),
    )
    plan = plan_vpa(vpa(mode, OUT_OF_RANGE), pods, inputs)
    assert sum(1 for d in plan.decisions if d.action is Action.RESIZE) == resized
    assert not any(d.action is Action.EVICT for d in plan.decisions)


@pytest.mark.parametrize(
    "skip", [False, True], ids=["TestEvictTooFewReplicas", "...WithInPlaceSkipDisruptionBudget"]
)
def test_evict_too_few_replicas_whatever_the_skip_flag(skip: bool) -> None:
    # minReplicas 10, 5 live pods of a Recreate VPA: no eviction, with or without the in-place skip flag
    pods = [pod(f"test-{i}") for i in range(5)]
    settings = UpdaterSettings(min_replicas=10, eviction_tolerance=0.5, in_place_skip_disruption_budget=skip)
    groups, problems = build_groups(pods, vpa("Recreate"), settings, {KEY: 5})
    assert problems == {KEY: GroupProblem.BELOW_MIN_REPLICAS}
    assert not groups
