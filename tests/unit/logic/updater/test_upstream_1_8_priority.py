"""Upstream VPA 1.8.1's unit tests of `pkg/updater/priority`, restated as facts about our updater logic.

Each table row is one upstream case, named after the upstream test function and case, with the inputs and
the verdict upstream asserts; the assertion runs our code (`vpa.logic.updater.priority`, `.infeasible` and
`.plan`). Upstream's tests drive a calculator with a fake priority processor; where they do, the rows hand
our `evaluate` the same `PodPriority`. A row that disagrees is a deviation listed in docs/deviations.md
("Upstream 1.8.1 unit tests"); none of these do.

Cases of `TestAddPodLogs` (log text), `TestNoPods` (an empty calculator) and `TestLoopInit` (the per-loop
copy of each VPA's eviction requirements) have no counterpart: we log differently, have no calculator
object and read the requirements from the VPA in each pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import BASE_TIME, make_container, make_pod, make_vpa, rfc3339
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.updater.infeasible import InfeasibleAttempts, is_lower_somewhere
from vpa.logic.updater.inplace import Action
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.logic.updater.priority import (
    PodPriority,
    compute_priority,
    considered_containers,
    evaluate,
    eviction_requirements_met,
    is_quick_oom,
    observed_names,
    recommendations_by_name,
    sort_key,
)
from vpa.logic.updater.restrictions import GroupKey
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.quantity import Quantity
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import VpaView

JSON = dict[str, Any]
HOUR = 3600.0
MIN = 60.0
START = BASE_TIME
C1 = "container1"
RS = "rs"
KEY = GroupKey("default", "ReplicaSet", RS)


# --- builders: upstream's test builders set only what a case names; ours do the same --------------------


def _container(name: str, cpu: str | None = None, mem: str | None = None) -> JSON:
    return make_container(
        name, cpu_request=cpu, memory_request=mem, cpu_limit=None, memory_limit=None, probes=False
    )


def _pod(
    containers: list[JSON],
    *,
    name: str = "POD1",
    annotations: dict[str, str] | None = None,
    status_cpu: dict[str, str] | None = None,
    oom: tuple[float, float] | None = None,
) -> PodView:
    """A running pod started at START. `status_cpu` sets the CPU the kubelet reports per container;
    `oom=(started, finished)` (Unix seconds) is the first container's last termination, an OOM kill."""
    statuses = []
    for index, container in enumerate(containers):
        status: JSON = {
            "name": container["name"],
            "ready": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": rfc3339(START)}},
        }
        if status_cpu and container["name"] in status_cpu:
            status["resources"] = {"requests": {"cpu": status_cpu[container["name"]]}}
        if oom is not None and index == 0:
            status["lastState"] = {
                "terminated": {
                    "reason": "OOMKilled",
                    "exitCode": 137,
                    "startedAt": rfc3339(oom[0]),
                    "finishedAt": rfc3339(oom[1]),
                }
            }
        statuses.append(status)
    raw = make_pod(
        name,
        containers=containers,
        annotations=annotations or {},
        owner_kind="ReplicaSet",
        owner_name=RS,
        created_at=START,
        started_at=START,
        container_statuses=statuses,
    )
    return pod_from_dict(raw)


def _resources(cpu: str | None, mem: str | None) -> JSON:
    out: JSON = {}
    if cpu:
        out["cpu"] = cpu
    if mem:
        out["memory"] = mem
    return out


def _rec(
    name: str,
    cpu: str | None = None,
    mem: str | None = None,
    *,
    lower: tuple[str | None, str | None] | None = None,
    upper: tuple[str | None, str | None] | None = None,
) -> JSON:
    out: JSON = {"containerName": name, "target": _resources(cpu, mem)}
    if lower is not None:
        out["lowerBound"] = _resources(*lower)
    if upper is not None:
        out["upperBound"] = _resources(*upper)
    return out


def _vpa(
    recs: list[JSON],
    *,
    mode: str = "Recreate",
    policies: list[JSON] | None = None,
    eviction_requirements: list[JSON] | None = None,
) -> VpaView:
    raw = make_vpa(update_mode=mode, container_policies=policies, recommendation=recs)
    if eviction_requirements is not None:
        raw["spec"]["updatePolicy"]["evictionRequirements"] = eviction_requirements
    return vpa_from_dict(raw)


def _priority(p: PodView, v: VpaView) -> PodPriority:
    assert v.recommendation is not None
    targets = considered_containers(p, v, recommendations_by_name(v.recommendation), observed_names(p, {}))
    return compute_priority(targets)


# --- priority_processor_test.go: TestGetUpdatePriority ---------------------------------------------------

C2 = "test-container-2"
GET_UPDATE_PRIORITY: list[tuple[str, list[JSON], dict[str, str] | None, list[JSON], PodPriority]] = [
    ("simple scale up", [_container(C1, "2")], None, [_rec(C1, "10")], PodPriority(True, False, 4.0)),
    (
        "simple scale up, resources from containerStatus have higher priority",
        [_container(C1, "10000")],
        {C1: "2"},
        [_rec(C1, "10")],
        PodPriority(True, False, 4.0),
    ),
    ("simple scale down", [_container(C1, "4")], None, [_rec(C1, "2")], PodPriority(False, False, 0.5)),
    ("no resource diff", [_container(C1, "2")], None, [_rec(C1, "2")], PodPriority(False, False, 0.0)),
    (
        "scale up on milliquanitites",
        [_container(C1, "10m")],
        None,
        [_rec(C1, "900m")],
        PodPriority(True, False, 89.0),
    ),
    (
        "scale up outside recommended range",
        [_container(C1, "4")],
        None,
        [_rec(C1, "10", lower=("6", None), upper=("14", None))],
        PodPriority(True, True, 1.5),
    ),
    (
        "scale down outside recommended range",
        [_container(C1, "8")],
        None,
        [_rec(C1, "2", lower=("1", None), upper=("3", None))],
        PodPriority(False, True, 0.75),
    ),
    (
        "scale up with multiple quantities",
        [_container(C1, "2")],
        None,
        [_rec(C1, "10")],
        PodPriority(True, False, 4.0),
    ),
    (
        "multiple resources, both scale up",
        [_container(C1, "3", "10M")],
        None,
        [_rec(C1, "6", "20M")],
        PodPriority(True, False, 2.0),
    ),
    (
        "multiple resources, only one scale up",
        [_container(C1, "4", "10M")],
        None,
        [_rec(C1, "2", "20M")],
        PodPriority(True, False, 1.5),
    ),
    (
        "multiple resources, both scale down",
        [_container(C1, "4", "20M")],
        None,
        [_rec(C1, "2", "10M")],
        PodPriority(False, False, 1.0),
    ),
    (
        "multiple resources, one outside recommended range",
        [_container(C1, "4", "20M")],
        None,
        [_rec(C1, "2", "10M", lower=("1", "5M"), upper=("3", "30M"))],
        PodPriority(False, True, 1.0),
    ),
    (
        "multiple containers, both scale up",
        [_container(C1, "1"), _container(C2, "2")],
        None,
        [_rec(C1, "4"), _rec(C2, "8")],
        PodPriority(True, False, 3.0),
    ),
    (
        "multiple containers, both scale down",
        [_container(C1, "3"), _container(C2, "7")],
        None,
        [_rec(C1, "1"), _rec(C2, "2")],
        PodPriority(False, False, 0.7),
    ),
    (
        "multiple containers, both scale up, one outside range",
        [_container(C1, "1"), _container(C2, "2")],
        None,
        [_rec(C1, "4", lower=("1", None)), _rec(C2, "8", lower=("3", None), upper=("10", None))],
        PodPriority(True, True, 3.0),
    ),
    (
        "multiple containers, multiple resources",
        [_container(C1, "6", "10M"), _container(C2, "4", "30M")],
        None,
        [_rec(C1, "8", "20M"), _rec(C2, "7", "30M")],
        PodPriority(True, False, 0.75),
    ),
]


@pytest.mark.parametrize(
    ("containers", "status_cpu", "recs", "expected"),
    [c[1:] for c in GET_UPDATE_PRIORITY],
    ids=[c[0] for c in GET_UPDATE_PRIORITY],
)
def test_get_update_priority(
    containers: list[JSON], status_cpu: dict[str, str] | None, recs: list[JSON], expected: PodPriority
) -> None:
    got = _priority(_pod(containers, status_cpu=status_cpu), _vpa(recs))
    assert (got.scale_up, got.outside_range) == (expected.scale_up, expected.outside_range)
    assert got.resource_diff == pytest.approx(expected.resource_diff)


def test_get_update_priority_no_recommendation_for_container() -> None:
    # upstream: a container without a recommendation must not crash the priority; it simply does not count
    p = _pod([_container(C1, "10", "1Gi"), _container("other", "10", "1Gi")])
    got = _priority(p, _vpa([_rec(C1, "10", "1Gi")]))
    assert got == PodPriority(False, False, 0.0)


@pytest.mark.parametrize(
    ("annotation", "expected_diff"),
    [(None, 4.0), (C1, 4.0), ("", 0.0), ("abcd;';", 4.0)],
    ids=[
        "with no VpaObservedContainers annotation",
        "with container listed in VpaObservedContainers",
        "with container not listed in VpaObservedContainers",
        "with incorrect VpaObservedContainers",
    ],
)
def test_get_update_priority_vpa_observed_containers(annotation: str | None, expected_diff: float) -> None:
    annotations = {"vpaObservedContainers": annotation} if annotation is not None else None
    p = _pod([_container(C1, "2")], annotations=annotations)
    assert _priority(p, _vpa([_rec(C1, "10")])).resource_diff == pytest.approx(expected_diff)


# --- update_priority_calculator_test.go ----------------------------------------------------------------
# Upstream's UpdateConfig: MinChangePriority → --pod-update-threshold, PodLifetimeUpdateThreshold →
# --in-recommendation-bounds-eviction-lifetime-threshold, EvictAfterOOMThreshold →
# --evict-after-oom-threshold.

DEFAULT_CONFIG = UpdaterSettings(pod_update_threshold=0.1)
HALF_CONFIG = UpdaterSettings(pod_update_threshold=0.5)


def _accepted(
    priority: PodPriority, p: PodView, now: float, settings: UpdaterSettings, quick: bool = False
) -> bool:
    return evaluate(priority, quick, p, now, settings).recreate.accepts


def _order(entries: list[tuple[str, PodPriority]], now: float) -> list[str]:
    """The pods `evaluate` accepts, in our update order."""
    pods = {name: _pod([_container(C1, "1")], name=name) for name, _ in entries}
    kept = [(name, prio) for name, prio in entries if _accepted(prio, pods[name], now, DEFAULT_CONFIG)]
    return [name for name, prio in sorted(kept, key=lambda e: sort_key(pods[e[0]], e[1]))]


def test_sort_priority() -> None:
    # TestSortPriority: the larger diff first
    entries = [
        ("POD1", PodPriority(False, False, 4.0)),
        ("POD2", PodPriority(False, False, 1.5)),
        ("POD3", PodPriority(False, False, 9.0)),
        ("POD4", PodPriority(False, False, 2.33)),
    ]
    assert _order(entries, START + 24 * HOUR) == ["POD3", "POD1", "POD4", "POD2"]


def test_sort_priority_resources_decrease() -> None:
    # TestSortPriorityResourcesDecrease: a scale-up before larger scale-downs
    entries = [
        ("POD1", PodPriority(True, False, 0.25)),
        ("POD2", PodPriority(False, False, 0.25)),
        ("POD3", PodPriority(False, False, 0.5)),
    ]
    assert _order(entries, START + 24 * HOUR) == ["POD1", "POD3", "POD2"]


def test_update_not_required() -> None:
    # TestUpdateNotRequired (and TestUseProcessor: the processed recommendation equals the requests)
    assert _order([("POD1", PodPriority(False, False, 0.0))], START + 24 * HOUR) == []


@pytest.mark.parametrize(
    ("age_h", "priority", "expected"),
    [
        # TestUpdateLonglivedPods (13 h old, threshold 0.5)
        (13, PodPriority(True, False, 0.25), False),
        (13, PodPriority(True, False, 4.0), True),
        (13, PodPriority(False, True, 0.25), True),
        # TestUpdateShortlivedPods (11 h old): only outside the range
        (11, PodPriority(True, False, 0.25), False),
        (11, PodPriority(True, False, 0.0), False),
        (11, PodPriority(False, True, 0.9), True),
    ],
    ids=[
        "long-lived POD1 small diff",
        "long-lived POD2 large diff",
        "long-lived POD3 outside range",
        "short-lived POD1",
        "short-lived POD2",
        "short-lived POD3 outside range",
    ],
)
def test_update_by_pod_lifetime(age_h: int, priority: PodPriority, expected: bool) -> None:
    p = _pod([_container(C1, "4")])
    assert _accepted(priority, p, START + age_h * HOUR, HALF_CONFIG) is expected


NOW_11H = START + 11 * HOUR


@pytest.mark.parametrize(
    ("oom", "priority", "expected"),
    [
        # TestUpdatePodWithQuickOOM: ran 2 min, killed 3 min ago
        ((NOW_11H - 5 * MIN, NOW_11H - 3 * MIN), PodPriority(True, False, 0.25), True),
        # TestDontUpdatePodWithQuickOOMNoResourceChange
        ((NOW_11H - 5 * MIN, NOW_11H - 3 * MIN), PodPriority(True, False, 0.0), False),
        # TestDontUpdatePodWithOOMAfterLongRun: ran 57 min
        ((NOW_11H - 60 * MIN, NOW_11H - 3 * MIN), PodPriority(True, False, 0.0), False),
        # TestDontUpdatePodWithStaleQuickOOM (new in 1.8.1): ran 2 min, but ten days ago
        (
            (NOW_11H - 10 * 24 * HOUR - 2 * MIN, NOW_11H - 10 * 24 * HOUR),
            PodPriority(True, False, 0.25),
            False,
        ),
    ],
    ids=["quick OOM", "quick OOM no resource change", "OOM after long run", "stale quick OOM"],
)
def test_quick_oom(oom: tuple[float, float], priority: PodPriority, expected: bool) -> None:
    p = _pod([_container(C1, "4")], oom=oom)
    v = _vpa([_rec(C1, "5", lower=("1", None), upper=("6", None))])
    quick = is_quick_oom(p, v, 600.0, observed_names(p, {}), NOW_11H)
    assert _accepted(priority, p, NOW_11H, HALF_CONFIG, quick) is expected


@pytest.mark.parametrize(
    ("annotation", "policy", "expected"),
    [
        # TestQuickOOM_VpaOvservedContainers
        (None, None, True),
        (C1, None, True),
        ("", None, False),
        # TestQuickOOM_ContainerResourcePolicy
        (C1, {"containerName": C1, "mode": "Auto"}, True),
        (C1, {"containerName": C1, "mode": "Off"}, False),
        (C1, {"containerName": "*", "mode": "Auto"}, True),
        (C1, {"containerName": "*", "mode": "Off"}, False),
    ],
    ids=[
        "no VpaOvservedContainers annotation",
        "container listed in VpaOvservedContainers",
        "container not listed in VpaOvservedContainers",
        "ContainerScalingModeAuto",
        "ContainerScalingModeOff",
        "ContainerScalingModeAuto as default",
        "ContainerScalingModeOff as default",
    ],
)
def test_quick_oom_considered_containers(annotation: str | None, policy: JSON | None, expected: bool) -> None:
    annotations = {"vpaObservedContainers": annotation} if annotation is not None else None
    p = _pod([_container(C1, "4")], annotations=annotations, oom=(NOW_11H - 5 * MIN, NOW_11H - 3 * MIN))
    v = _vpa([_rec(C1, "5", lower=("1", None), upper=("6", None))], policies=[policy] if policy else None)
    quick = is_quick_oom(p, v, 600.0, observed_names(p, {}), NOW_11H)
    assert _accepted(PodPriority(True, False, 0.25), p, NOW_11H, HALF_CONFIG, quick) is expected


def test_admission_filters_pods() -> None:
    # TestAdmission: a pod admission that admits only POD1 leaves only POD1. Ours is the eviction
    # requirements filter: a requirement only POD1 meets (its target is above its request).
    # (both resources requested: a container lacking a request passes any requirement, as upstream)
    v = _vpa(
        [_rec(C1, "10", "1Gi")],
        eviction_requirements=[{"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}],
    )
    pods = {
        "POD1": _pod([_container(C1, "2", "1Gi")], name="POD1"),
        "POD2": _pod([_container(C1, "40", "1Gi")], name="POD2"),
    }
    assert v.recommendation is not None
    by_name = recommendations_by_name(v.recommendation)
    admitted = [
        name
        for name, p in pods.items()
        if eviction_requirements_met(v, considered_containers(p, v, by_name, None), p)
    ]
    assert admitted == ["POD1"]


@pytest.mark.parametrize(
    ("prio", "other", "is_less"),
    [
        (PodPriority(False, False, 0.1), PodPriority(False, False, 0.0), False),
        (PodPriority(True, False, 0.1), PodPriority(False, False, 0.0), False),
        (PodPriority(True, False, 0.1), PodPriority(True, False, 1.0), True),
        (PodPriority(False, False, 0.9), PodPriority(False, False, 0.1), False),
    ],
    ids=["scale down more than empty", "scale up more than empty", "two scale ups", "two scale downs"],
)
def test_less_pod_priority(prio: PodPriority, other: PodPriority, is_less: bool) -> None:
    # TestLessPodPriority: "less" is "updated later"; our sort puts the higher priority first
    p = _pod([_container(C1, "1")])
    assert (sort_key(p, prio) > sort_key(p, other)) is is_less
    assert (sort_key(p, other) > sort_key(p, prio)) is (not is_less)


def _attempt(cpu: str | None, mem: str | None, name: str = C1) -> dict[str, Resources]:
    return {
        name: Resources(
            Quantity.parse(cpu).millis if cpu else None,
            Quantity.parse(mem).value if mem else None,
        )
    }


@pytest.mark.parametrize(
    ("last", "new", "expected"),
    [
        ({}, {}, False),
        ({}, _attempt("100m", None), False),
        (_attempt("100m", None), {}, False),
        (_attempt("200m", None), _attempt("100m", None), True),
        (_attempt(None, "512Mi"), _attempt(None, "256Mi"), True),
        (_attempt("100m", "256Mi"), _attempt("200m", "512Mi"), False),
        (_attempt("100m", "256Mi"), _attempt("100m", "256Mi"), False),
        (_attempt("100m", None), _attempt("50m", None, "other-container"), False),
        (_attempt("200m", "256Mi"), _attempt("100m", "512Mi"), True),
        (_attempt("100m", "512Mi"), _attempt("200m", "256Mi"), True),
    ],
    ids=[
        "both nil",
        "lastAttempt nil",
        "newRecommendation nil",
        "new CPU is lower",
        "new memory is lower",
        "new resources are higher",
        "equal resources",
        "container not in lastAttempt",
        "one resource lower one higher",
        "cpu higher memory lower",
    ],
)
def test_has_lower_resource_recommendation(
    last: dict[str, Resources], new: dict[str, Resources], expected: bool
) -> None:
    assert is_lower_somewhere(new, last) is expected


@pytest.mark.parametrize(
    ("mode", "last", "current", "added"),
    [
        ("InPlace", None, ("200m", "512Mi"), True),
        ("InPlace", ("200m", "512Mi"), ("200m", "512Mi"), False),
        ("InPlace", ("200m", "512Mi"), ("300m", "1Gi"), False),
        ("InPlace", ("200m", "512Mi"), ("100m", "512Mi"), True),
        ("InPlace", ("200m", "512Mi"), ("200m", "256Mi"), True),
        ("InPlace", ("200m", "512Mi"), ("100m", "1Gi"), True),
        ("Recreate", ("200m", "512Mi"), ("200m", "512Mi"), True),
        ("Auto", ("200m", "512Mi"), ("200m", "512Mi"), True),
    ],
    ids=[
        "InPlace no previous infeasible attempt",
        "InPlace same recommendation as last infeasible attempt",
        "InPlace higher recommendation",
        "InPlace lower CPU",
        "InPlace lower memory",
        "InPlace one resource lower one higher",
        "Recreate same recommendation",
        "Auto same recommendation",
    ],
)
def test_add_pod_with_infeasible_attempts(
    mode: str, last: tuple[str, str] | None, current: tuple[str, str], added: bool
) -> None:
    # TestAddPodWithInfeasibleAttempts: the pod (100m/128Mi, a day old, outside the range) is queued for an
    # update unless InPlace mode recorded an infeasible attempt the new target is not lower than.
    p = _pod([_container(C1, "100m", "128Mi")])
    others = [_pod([_container(C1, current[0], current[1])], name=f"other-{i}") for i in range(2)]
    v = _vpa([_rec(C1, *current)], mode=mode)
    infeasible = InfeasibleAttempts()
    if last is not None:
        infeasible = infeasible.record(p.uid, _attempt(*last))
    inputs = PassInputs(
        now=START + 24 * HOUR,
        settings=UpdaterSettings(),
        gates=FeatureGates.parse("InPlace=true"),
        replicas={KEY: 3},
        attempts={},
        infeasible=infeasible,
    )
    plan = plan_vpa(v, [p, *others], inputs)
    (decision,) = [d for d in plan.decisions if d.pod.name == p.name]
    assert (decision.action is not Action.SKIP) is added, decision.explain()


# --- scaling_direction_pod_eviction_admission_test.go: evictionRequirements ---------------------------

UP, DOWN = "TargetHigherThanRequests", "TargetLowerThanRequests"


def _req(resources: list[str], change: str) -> JSON:
    return {"resources": resources, "changeRequirement": change}


def _admits(
    containers: list[JSON],
    recs: list[JSON],
    requirements: list[JSON],
    status_cpu: dict[str, str] | None = None,
) -> bool:
    p = _pod(containers, status_cpu=status_cpu)
    v = _vpa(recs, eviction_requirements=requirements)
    assert v.recommendation is not None
    targets = considered_containers(p, v, recommendations_by_name(v.recommendation), None)
    return eviction_requirements_met(v, targets, p)


ONE = [_container(C1, "500m", "10Gi")]
ADMIT_SINGLE: list[tuple[str, list[JSON], tuple[str, str], bool]] = [
    ("no config is given", [], ("600m", "10Gi"), True),
    ("CPU scaled up, config allows scaling up CPU", [_req(["cpu"], UP)], ("600m", "10Gi"), True),
    ("CPU scaled down, config allows scaling down CPU", [_req(["cpu"], DOWN)], ("400m", "10Gi"), True),
    (
        "CPU scaled down, config allows only scaling up CPU",
        [_req(["cpu", "memory"], UP)],
        ("500m", "10Gi"),
        False,
    ),
    (
        "CPU down but memory up, config allows scaling up either",
        [_req(["cpu", "memory"], UP)],
        ("500m", "11Gi"),
        True,
    ),
    ("memory scaled up, config allows scaling up memory", [_req(["memory"], UP)], ("500m", "11Gi"), True),
    (
        "memory scaled down, config allows scaling down memory",
        [_req(["memory"], DOWN)],
        ("500m", "9Gi"),
        True,
    ),
    (
        "memory scaled down, config allows only scaling up",
        [_req(["cpu", "memory"], UP)],
        ("500m", "9Gi"),
        False,
    ),
    (
        "CPU up, memory down, config allows CPU up and memory down",
        [_req(["cpu"], UP), _req(["memory"], DOWN)],
        ("600m", "9Gi"),
        True,
    ),
    ("CPU scaled up, config allows only scaling down CPU", [_req(["cpu"], DOWN)], ("1000m", "9Gi"), False),
    (
        "CPU up, memory down, config allows CPU up and memory up",
        [_req(["cpu"], UP), _req(["memory"], UP)],
        ("600m", "9Gi"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("requirements", "target", "expected"), [c[1:] for c in ADMIT_SINGLE], ids=[c[0] for c in ADMIT_SINGLE]
)
def test_admit_for_single_container(
    requirements: list[JSON], target: tuple[str, str], expected: bool
) -> None:
    # TestAdmitForSingleContainer: the pod requests 500m and 10Gi
    assert _admits(ONE, [_rec(C1, *target)], requirements) is expected


def test_admit_without_requests_and_by_container_status() -> None:
    # TestAdmitForSingleContainer: a container without requests is admitted
    assert _admits([_container(C1)], [_rec(C1, "600m", "10Gi")], [_req(["cpu"], UP)])
    # ...and the kubelet's reported requests (100m) count, not the spec's 500m
    assert _admits(ONE, [_rec(C1, "400m", "4Gi")], [_req(["cpu", "memory"], UP)], status_cpu={C1: "100m"})


TWO = [_container("test-container-1", "500m", "10Gi"), _container("test-container-2", "500m", "10Gi")]
ADMIT_MULTIPLE: list[tuple[str, list[JSON], bool]] = [
    (
        "both containers fulfill the requirements",
        [_rec("test-container-1", "600m", "10Gi"), _rec("test-container-2", "700m", "10Gi")],
        True,
    ),
    (
        "only one container fulfills the requirements",
        [_rec("test-container-1", "200m", "10Gi"), _rec("test-container-2", "700m", "10Gi")],
        True,
    ),
    (
        "no container fulfills the requirements",
        [_rec("test-container-1", "200m", "10Gi"), _rec("test-container-2", "300m", "10Gi")],
        False,
    ),
    (
        "one container without a recommendation, the other does not fulfil",
        [_rec("test-container-2", "300m", "10Gi")],
        False,
    ),
]


@pytest.mark.parametrize(
    ("recs", "expected"), [c[1:] for c in ADMIT_MULTIPLE], ids=[c[0] for c in ADMIT_MULTIPLE]
)
def test_admit_for_multiple_containers(recs: list[JSON], expected: bool) -> None:
    # TestAdmitForMultipleContainer: requirement cpu TargetHigherThanRequests
    assert _admits(TWO, recs, [_req(["cpu"], UP)]) is expected
