"""The decision pass: every in-place outcome, the fallbacks and their timeouts, the infeasible-attempt flow,
minReplicas / tolerance, eviction requirements, modes, and the patches."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.unit.logic.updater.test_support import DAY, KEY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import (
    Action,
    PodDecision,
    Reason,
    ResizeAttempt,
    in_place_updated_patch,
    proportional_limit,
    resize_patch,
)
from vpa.logic.updater.plan import PassInputs, VpaPlan, plan_vpa
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import VpaView

HOUR = 3600.0
MIN = 60.0
GATES = FeatureGates.parse("InPlace=true")
UPSTREAM = UpdaterSettings(in_place_skip_disruption_budget=False)
OUT_OF_RANGE = [rec(cpu="800m", lower=("700m", "1Mi"))]  # request 500m below the lower bound
RESTART_MEMORY = [ctr(restart=("memory",))]


def _plan(
    v: VpaView,
    target: PodView,
    *,
    others: int = 2,
    settings: UpdaterSettings | None = None,
    gates: FeatureGates = GATES,
    attempts: dict[str, ResizeAttempt] | None = None,
    infeasible: InfeasibleAttempts | None = None,
) -> VpaPlan:
    """`target` plus `others` pods needing nothing, in one ReplicaSet of configured size others + 1."""
    pods = [target] + [pod(f"web-other-{i}") for i in range(others)]
    inputs = PassInputs(
        now=NOW,
        settings=settings or UpdaterSettings(),
        gates=gates,
        replicas={KEY: others + 1},
        attempts=attempts or {},
        infeasible=infeasible or InfeasibleAttempts(),
    )
    return plan_vpa(v, pods, inputs)


def _decide(v: VpaView, target: PodView, **kwargs: Any) -> PodDecision:
    plan = _plan(v, target, **kwargs)
    assert plan.skip_reason is None
    (decision,) = [d for d in plan.decisions if d.pod.name == target.name]
    return decision


def _set(decision: PodDecision) -> dict[str, tuple[Resources, Resources]]:
    return {c.name: (c.requests, c.limits) for c in decision.changes}


# --- in-place outcomes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "containers", "recs", "age_s", "action", "reason", "changes", "disruptive"),
    [
        # disruption-free, in range, young: AEP-4016 applies it without the 12 h age
        ("InPlaceOrRecreate", None, [rec(cpu="800m")], HOUR, Action.RESIZE, Reason.SIGNIFICANT_CHANGE,
         {"app": (Resources(800, None), Resources())}, False),
        # cpu is free, memory restarts: only cpu goes (partial)
        ("InPlaceOrRecreate", RESTART_MEMORY, [rec(cpu="800m", mem="1Gi")], HOUR, Action.RESIZE_PARTIAL,
         Reason.SIGNIFICANT_CHANGE, {"app": (Resources(800, None), Resources())}, False),
        # disruptive and outside the range: the whole change, in place
        ("InPlace", RESTART_MEMORY, [rec(mem="1Gi", lower=("1m", "800Mi"))], HOUR, Action.RESIZE,
         Reason.OUTSIDE_RANGE, {"app": (Resources(None, 2**30), Resources())}, True),
        # disruptive, in range, long-lived: Recreate rules hold
        ("InPlaceOrRecreate", RESTART_MEMORY, [rec(mem="1Gi")], DAY, Action.RESIZE, Reason.SIGNIFICANT_CHANGE,
         {"app": (Resources(None, 2**30), Resources())}, True),
        # disruptive, in range, young: waits for the Recreate rules
        ("InPlaceOrRecreate", RESTART_MEMORY, [rec(mem="1Gi")], HOUR, Action.SKIP, Reason.DISRUPTIVE_NOT_DUE,
         {}, False),
        # below --pod-update-threshold: nothing
        ("InPlace", None, [rec(cpu="540m")], DAY, Action.SKIP, Reason.BELOW_THRESHOLD, {}, False),
    ],
    ids=["full-disruption-free", "partial", "disruptive-out-of-bounds", "disruptive-long-lived",
         "disruptive-not-due", "below-threshold"],
)  # fmt: skip
def test_in_place_outcomes(
    mode: str,
    containers: list[dict[str, Any]] | None,
    recs: list[dict[str, Any]],
    age_s: float,
    action: Action,
    reason: Reason,
    changes: dict[str, tuple[Resources, Resources]],
    disruptive: bool,
) -> None:
    decision = _decide(vpa(mode, recs), pod(containers=containers, age_s=age_s))
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    assert _set(decision) == changes
    assert decision.disruptive is disruptive
    assert decision.reason.value in decision.explain()


REQUESTS_ONLY = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
BURSTABLE_CPU = [ctr(cpu="100m", cpu_limit="200m", mem="512Mi", mem_limit="512Mi")]


def test_qos_change_in_place_or_recreate_evicts() -> None:
    # the target (capped at the 200m limit) would make requests == limits: Burstable → Guaranteed
    v = vpa("InPlaceOrRecreate", [rec(cpu="300m", lower=("250m", "1Mi"))], policies=REQUESTS_ONLY)
    decision = _decide(v, pod(containers=BURSTABLE_CPU))
    assert (decision.action, decision.reason) == (Action.EVICT, Reason.QOS_CHANGE)
    assert "Burstable → Guaranteed" in decision.detail


def test_qos_change_in_place_or_recreate_young_in_range_waits() -> None:
    v = vpa("InPlaceOrRecreate", [rec(cpu="300m")], policies=REQUESTS_ONLY)
    decision = _decide(v, pod(containers=BURSTABLE_CPU, age_s=HOUR))
    assert (decision.action, decision.reason) == (Action.SKIP, Reason.QOS_CHANGE)


def test_qos_change_in_place_keeps_request_one_below_limit() -> None:
    v = vpa("InPlace", [rec(cpu="300m", lower=("250m", "1Mi"))], policies=REQUESTS_ONLY)
    p = pod(containers=BURSTABLE_CPU)
    decision = _decide(v, p)
    assert (decision.action, decision.reason, decision.qos_adjusted) == (
        Action.RESIZE,
        Reason.OUTSIDE_RANGE,
        True,
    )
    assert _set(decision) == {"app": (Resources(199, None), Resources())}
    assert resize_patch(p, decision.changes) == [
        {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "199m"}
    ]


def test_gate_off_skips_in_place_vpa_entirely() -> None:
    plan = _plan(vpa("InPlace", OUT_OF_RANGE), pod(pending_reason="Infeasible"), gates=FeatureGates())
    assert plan.skip_reason is Reason.IN_PLACE_GATE_OFF
    assert not plan.decisions


@pytest.mark.parametrize("mode", ["Off", "Initial"])
def test_off_and_initial_do_nothing(mode: str) -> None:
    plan = _plan(vpa(mode, OUT_OF_RANGE), pod(oom=("app", 5.0)))
    assert plan.skip_reason is Reason.MODE_DOES_NOT_UPDATE
    assert not plan.decisions


@pytest.mark.parametrize("mode", ["Auto", "Recreate", None])
def test_auto_and_default_behave_as_recreate(mode: str | None) -> None:
    decision = _decide(vpa(mode, OUT_OF_RANGE), pod())
    assert (decision.action, decision.reason) == (Action.EVICT, Reason.OUTSIDE_RANGE)


def test_pending_pod_is_not_resized() -> None:
    decision = _decide(vpa("InPlaceOrRecreate", OUT_OF_RANGE), pod(phase="Pending"))
    assert (decision.action, decision.reason) == (Action.SKIP, Reason.POD_PENDING)


# --- resize state: fallbacks and timeouts -------------------------------------------------------------


STATES = [
    # (pod kwargs, seconds since our patch, InPlaceOrRecreate outcome)
    ({"pending_reason": "Deferred"}, 4 * MIN + 59, (Action.SKIP, Reason.RESIZE_IN_FLIGHT)),
    ({"pending_reason": "Deferred"}, 5 * MIN + 1, (Action.EVICT, Reason.RESIZE_TIMED_OUT)),
    ({"in_progress_reason": ""}, 59 * MIN, (Action.SKIP, Reason.RESIZE_IN_FLIGHT)),
    ({"in_progress_reason": ""}, 61 * MIN, (Action.EVICT, Reason.RESIZE_TIMED_OUT)),
    ({"in_progress_reason": "Error"}, 59 * MIN, (Action.SKIP, Reason.RESIZE_IN_FLIGHT)),
    ({"pending_reason": "Infeasible"}, 1.0, (Action.EVICT, Reason.RESIZE_INFEASIBLE)),
    ({"legacy": "Deferred"}, 4 * MIN + 59, (Action.SKIP, Reason.RESIZE_IN_FLIGHT)),
    ({"legacy": "Deferred"}, 5 * MIN + 1, (Action.EVICT, Reason.RESIZE_TIMED_OUT)),
    ({"legacy": "InProgress"}, 61 * MIN, (Action.EVICT, Reason.RESIZE_TIMED_OUT)),
    ({"legacy": "Infeasible"}, 1.0, (Action.EVICT, Reason.RESIZE_INFEASIBLE)),
]
STATE_IDS = ["deferred-4:59", "deferred-5:01", "in-progress-59m", "in-progress-61m", "kubelet-error-59m",
             "infeasible", "legacy-deferred-4:59", "legacy-deferred-5:01", "legacy-in-progress-61m",
             "legacy-infeasible"]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "elapsed_s", "expected"), STATES, ids=STATE_IDS)
def test_in_place_or_recreate_fallbacks(kwargs: dict[str, str], elapsed_s: float, expected: object) -> None:
    # the condition is older than our patch: the timers run from the patch
    p = pod(condition_at=NOW - 10 * HOUR, **kwargs)  # type: ignore[arg-type]
    decision = _decide(
        vpa("InPlaceOrRecreate", OUT_OF_RANGE), p, attempts={p.uid: ResizeAttempt(NOW - elapsed_s)}
    )
    assert (decision.action, decision.reason) == expected, decision.explain()


@pytest.mark.parametrize(("kwargs", "elapsed_s", "expected"), STATES, ids=STATE_IDS)
def test_in_place_never_evicts_whatever_the_state(
    kwargs: dict[str, str], elapsed_s: float, expected: object
) -> None:
    p = pod(condition_at=NOW - 10 * HOUR, **kwargs)  # type: ignore[arg-type]
    decision = _decide(vpa("InPlace", OUT_OF_RANGE), p, attempts={p.uid: ResizeAttempt(NOW - elapsed_s)})
    infeasible = "Infeasible" in kwargs.values()
    assert decision.action is Action.SKIP
    assert decision.reason is (Reason.INFEASIBLE_RECORDED if infeasible else Reason.RESIZE_IN_FLIGHT)


def test_timed_out_resize_needs_recreate_rules_to_evict() -> None:
    p = pod(pending_reason="Deferred", age_s=HOUR)  # young and in range: only a disruption-free update is due
    decision = _decide(
        vpa("InPlaceOrRecreate", [rec(cpu="800m")]), p, attempts={p.uid: ResizeAttempt(NOW - HOUR)}
    )
    assert (decision.action, decision.reason) == (Action.SKIP, Reason.RESIZE_TIMED_OUT)
    assert "NotLongLived" in decision.detail


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("InPlaceOrRecreate", (Action.EVICT, Reason.RESIZE_REJECTED)),
        ("InPlace", (Action.RESIZE, Reason.OUTSIDE_RANGE)),
    ],
    ids=["in-place-or-recreate-evicts", "in-place-retries"],
)
def test_rejected_patch(mode: str, expected: object) -> None:
    p = pod()
    decision = _decide(vpa(mode, OUT_OF_RANGE), p, attempts={p.uid: ResizeAttempt(NOW - MIN, rejected=True)})
    assert (decision.action, decision.reason) == expected


# A resize the API server accepted but the pod cache has not seen yet (its watch is behind, e.g. after an
# API server restart): planning from the cached pod would send the same resize again.
NOT_OBSERVED = [
    # (mode, resourceVersion the patch was planned from, rejected, cached pod's resourceVersion, outcome)
    ("InPlaceOrRecreate", "41", False, "41", (Action.SKIP, Reason.RESIZE_NOT_OBSERVED)),
    ("InPlace", "41", False, "41", (Action.SKIP, Reason.RESIZE_NOT_OBSERVED)),
    ("InPlaceOrRecreate", "41", False, "57", (Action.RESIZE, Reason.OUTSIDE_RANGE)),
    ("InPlace", "41", False, "57", (Action.RESIZE, Reason.OUTSIDE_RANGE)),
    ("InPlaceOrRecreate", "", False, "41", (Action.RESIZE, Reason.OUTSIDE_RANGE)),
    ("InPlaceOrRecreate", "41", True, "41", (Action.EVICT, Reason.RESIZE_REJECTED)),
    ("InPlace", "41", True, "41", (Action.RESIZE, Reason.OUTSIDE_RANGE)),
]
NOT_OBSERVED_IDS = ["or-recreate-cache-behind", "in-place-cache-behind", "or-recreate-cache-caught-up",
                    "in-place-cache-caught-up", "no-version-recorded", "or-recreate-rejected",
                    "in-place-rejected"]  # fmt: skip


@pytest.mark.parametrize(("mode", "sent_from", "rejected", "cached", "expected"), NOT_OBSERVED,
                         ids=NOT_OBSERVED_IDS)  # fmt: skip
def test_a_resize_the_cache_has_not_seen_is_not_sent_again(
    mode: str, sent_from: str, rejected: bool, cached: str, expected: object
) -> None:
    p = dataclasses.replace(pod(), resource_version=cached)
    attempt = ResizeAttempt(NOW - 10, rejected=rejected, resource_version=sent_from)
    decision = _decide(vpa(mode, OUT_OF_RANGE), p, attempts={p.uid: attempt})
    assert (decision.action, decision.reason) == expected, decision.explain()


def test_disruptive_resize_counts_as_disruption_for_12h() -> None:
    v = vpa("InPlaceOrRecreate", [rec(mem="1Gi")])
    p = pod(containers=RESTART_MEMORY, age_s=DAY)
    assert _decide(v, p).action is Action.RESIZE
    recent = {p.uid: ResizeAttempt(NOW - HOUR, disruptive=True)}
    assert _decide(v, p, attempts=recent).reason is Reason.DISRUPTIVE_NOT_DUE


# --- infeasible attempts (InPlace) ----------------------------------------------------------------------


def test_infeasible_attempt_flow() -> None:
    # 1. the kubelet says Infeasible: record what spec asks for (the values that did not fit)
    spec = [ctr(cpu="2", mem="4Gi")]
    actual = {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}}}
    big = vpa("InPlace", [rec(cpu="2", mem="4Gi")])
    p = pod(containers=spec, actual=actual, pending_reason="Infeasible")
    first = _plan(big, p)
    assert first.record_infeasible == ((p.uid, {"app": Resources(2000, 4 * 2**30)}),)
    tracker = InfeasibleAttempts()
    for uid, attempt in first.record_infeasible:
        tracker = tracker.record(uid, attempt)
    # 2. same recommendation → skipped, without asking to record again
    again = _decide(big, p, infeasible=tracker)
    assert (again.action, again.reason, again.record_infeasible) == (
        Action.SKIP,
        Reason.INFEASIBLE_CACHED,
        None,
    )
    # higher everywhere → still skipped
    bigger = vpa("InPlace", [rec(cpu="3", mem="4Gi")])
    assert _decide(bigger, p, infeasible=tracker).reason is Reason.INFEASIBLE_CACHED
    # 3. lower in one resource → retried although the condition still says Infeasible
    lower = _decide(vpa("InPlace", [rec(cpu="2", mem="3Gi")]), p, infeasible=tracker)
    assert lower.action is Action.RESIZE
    assert _set(lower) == {"app": (Resources(None, 3 * 2**30), Resources())}
    # 4. the retry's patch succeeded: the loop clears; the record no longer blocks
    assert _decide(big, p, infeasible=tracker.clear(p.uid)).reason is Reason.INFEASIBLE_RECORDED
    # 5. the pod is gone: forgotten
    assert p.uid not in tracker.forget_missing({"some-other-uid"})


def test_node_capacity_rejection_records_the_attempt() -> None:
    v = vpa("InPlace", [rec(cpu="8", mem="512Mi", lower=("7", "1Mi"))])
    p = pod()
    decision = _decide(v, p)
    assert decision.action is Action.RESIZE
    # the loop got 403 + NodeCapacity for this patch
    tracker = InfeasibleAttempts().record(p.uid, decision.attempted())
    assert decision.attempted() == {"app": Resources(8000, 512 * 2**20)}
    rejected = {p.uid: ResizeAttempt(NOW - MIN, rejected=True)}
    assert _decide(v, p, infeasible=tracker, attempts=rejected).reason is Reason.INFEASIBLE_CACHED


def test_kubelet_error_is_not_infeasible() -> None:
    p = pod(in_progress_reason="Error")
    decision = _decide(vpa("InPlace", OUT_OF_RANGE), p)
    assert (decision.reason, decision.record_infeasible) == (Reason.RESIZE_IN_FLIGHT, None)


# --- replicas and budgets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "containers", "settings", "expected"),
    [
        ("InPlaceOrRecreate", None, UpdaterSettings(), (Action.RESIZE, Reason.OUTSIDE_RANGE)),
        ("InPlace", None, UpdaterSettings(), (Action.RESIZE, Reason.OUTSIDE_RANGE)),
        ("InPlaceOrRecreate", None, UPSTREAM, (Action.SKIP, Reason.GROUP_BELOW_MIN_REPLICAS)),
        ("InPlace", None, UPSTREAM, (Action.SKIP, Reason.GROUP_BELOW_MIN_REPLICAS)),
        # a disruptive resize is blocked below minReplicas like an eviction
        (
            "InPlaceOrRecreate",
            [ctr(restart=("cpu",))],
            UpdaterSettings(),
            (Action.SKIP, Reason.BELOW_MIN_REPLICAS),
        ),
        ("Recreate", None, UpdaterSettings(), (Action.SKIP, Reason.GROUP_BELOW_MIN_REPLICAS)),
    ],
    ids=[
        "ipor-default",
        "inplace-default",
        "ipor-upstream",
        "inplace-upstream",
        "disruptive-blocked",
        "recreate",
    ],
)
def test_single_replica(mode: str, containers: Any, settings: UpdaterSettings, expected: object) -> None:
    decision = _decide(vpa(mode, OUT_OF_RANGE), pod(containers=containers), others=0, settings=settings)
    assert (decision.action, decision.reason) == expected


def test_single_replica_timed_out_resize_is_not_evicted() -> None:
    p = pod(pending_reason="Deferred")
    attempts = {p.uid: ResizeAttempt(NOW - HOUR)}
    decision = _decide(vpa("InPlaceOrRecreate", OUT_OF_RANGE), p, others=0, attempts=attempts)
    assert (decision.action, decision.reason) == (Action.SKIP, Reason.BELOW_MIN_REPLICAS)


def _four(mode: str, settings: UpdaterSettings, recs: list[dict[str, Any]] | None = None) -> VpaPlan:
    # four pods of one ReplicaSet, each further from the target than the last
    pods = [pod(f"web-{i}", containers=[ctr(cpu=f"{100 * (i + 1)}m")]) for i in range(4)]
    v = vpa(mode, recs or [rec(cpu="1", lower=("900m", "1Mi"))])
    return plan_vpa(v, pods, PassInputs(now=NOW, settings=settings, gates=GATES, replicas={KEY: 4}))


def test_eviction_tolerance_limits_evictions_and_keeps_priority_order() -> None:
    plan = _four("Recreate", UpdaterSettings())
    assert [(d.pod.name, d.action) for d in plan.actions] == [
        ("web-0", Action.EVICT),
        ("web-1", Action.EVICT),
    ]
    assert sorted((d.pod.name, d.reason) for d in plan.skipped) == [
        ("web-2", Reason.DISRUPTION_BUDGET),
        ("web-3", Reason.DISRUPTION_BUDGET),
    ]


def test_in_place_budget_upstream_vs_default() -> None:
    upstream = _four("InPlaceOrRecreate", UPSTREAM)
    assert [d.action for d in upstream.actions] == [Action.RESIZE, Action.RESIZE]
    assert {d.reason for d in upstream.skipped} == {Reason.DISRUPTION_BUDGET}
    default = _four("InPlaceOrRecreate", UpdaterSettings())
    assert [d.pod.name for d in default.actions] == ["web-0", "web-1", "web-2", "web-3"]


def test_eviction_requirements_filter_evictions_not_resizes() -> None:
    requirement = [{"resources": ["cpu"], "changeRequirement": "TargetLowerThanRequests"}]
    recreate = vpa("Recreate", OUT_OF_RANGE, eviction_requirements=requirement)
    assert _decide(recreate, pod()).reason is Reason.EVICTION_REQUIREMENTS
    in_place = vpa("InPlaceOrRecreate", OUT_OF_RANGE, eviction_requirements=requirement)
    assert _decide(in_place, pod()).action is Action.RESIZE


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"owner": None}, Reason.NO_CONTROLLER),
        ({"annotations": {"vpaCpuStartupBoost/app": "{}"}}, Reason.STARTUP_BOOSTED),
        ({"observed": "other"}, Reason.NO_CONTAINER_RECOMMENDATION),
    ],
    ids=["no-controller", "boosted", "not-observed"],
)
def test_pods_left_alone(kwargs: dict[str, Any], reason: Reason) -> None:
    gates = FeatureGates.parse("InPlace=true,CPUStartupBoost=true")
    assert _decide(vpa("Recreate", OUT_OF_RANGE), pod(**kwargs), gates=gates).reason is reason


def test_terminating_pods_are_ignored() -> None:
    plan = _plan(vpa("Recreate", OUT_OF_RANGE), pod(terminating=True))
    assert all(d.pod.deletion_timestamp is None for d in plan.decisions)


def test_quick_oom_young_pod_is_evicted() -> None:
    decision = _decide(vpa("Recreate", [rec(mem="1Gi")]), pod(age_s=5 * MIN, oom=("app", 60.0)))
    assert (decision.action, decision.reason) == (Action.EVICT, Reason.QUICK_OOM)


# --- patches --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "old_request", "new", "expected"),
    [
        (None, 100, 200, None),  # no limit: left alone
        (0, 100, 200, None),
        (300, 100, 0, None),  # new request 0
        (300, None, 200, 200),  # no request: limit = new request
        (100, 100, 250, 250),  # request == limit stays equal
        (300, 100, 250, 750),  # ratio kept
        (1000, 3, 1, 333),  # floor
        (2**62, 1, 8, 2**63 - 1),  # capped at MaxInt64
    ],
    ids=["no-limit", "zero-limit", "zero-request", "no-request", "equal", "ratio", "floor", "overflow"],
)
def test_proportional_limit(
    limit: int | None, old_request: int | None, new: int, expected: int | None
) -> None:
    assert proportional_limit(limit, old_request, new) == expected


def test_resize_patch_with_proportional_limits() -> None:
    p = pod(
        containers=[ctr("app", cpu="500m", mem="512Mi", mem_limit="1Gi"), ctr("side", cpu=None, mem=None)]
    )
    v = vpa(
        "InPlaceOrRecreate", [rec("app", cpu="1", mem="1Gi", lower=("900m", "1Mi")), rec("side", cpu="50m")]
    )
    decision = _decide(v, p)
    assert decision.action is Action.RESIZE
    assert resize_patch(p, decision.changes) == [
        {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "1"},
        {"op": "add", "path": "/spec/containers/0/resources/requests/memory", "value": "1Gi"},
        {"op": "add", "path": "/spec/containers/0/resources/limits/memory", "value": "2Gi"},
        {"op": "add", "path": "/spec/containers/1/resources", "value": {}},
        {"op": "add", "path": "/spec/containers/1/resources/requests", "value": {}},
        {"op": "add", "path": "/spec/containers/1/resources/requests/cpu", "value": "50m"},
        {"op": "add", "path": "/spec/containers/1/resources/requests/memory", "value": "512Mi"},
    ]
    assert in_place_updated_patch() == {"metadata": {"annotations": {"vpaInPlaceUpdated": "true"}}}
    with pytest.raises(ValueError, match="no resource patches"):
        resize_patch(p, ())


@pytest.mark.parametrize(
    ("spec", "reported", "expected_prefix"),
    [
        # spec and status both without resources: the empty objects come first
        ({"cpu": None, "mem": None}, None, ["resources", "resources/requests"]),
        # spec without resources, status reporting requests: upstream reads both and adds no empty objects
        ({"cpu": None, "mem": None}, {"requests": {"cpu": "100m", "memory": "100Mi"}}, []),
        # spec with requests: nothing empty to add
        ({"cpu": "100m", "mem": "100Mi"}, None, []),
        # status reporting only limits: `resources` exists, `requests` does not
        ({"cpu": None, "mem": None}, {"limits": {"cpu": "1"}}, ["resources/requests"]),
    ],
    ids=["nothing-anywhere", "status-only", "spec", "status-limits-only"],
)
def test_resize_patch_reads_status_resources_for_empty_objects(
    spec: dict[str, str | None], reported: dict[str, dict[str, str]] | None, expected_prefix: list[str]
) -> None:
    p = pod(containers=[ctr("app", **spec)], actual={"app": reported} if reported is not None else None)  # type: ignore[arg-type]
    from vpa.logic.updater.inplace import ContainerChange
    from vpa.model.resources import Resources

    change = ContainerChange(0, "app", Resources(50, 64 * 2**20), Resources(), disruptive=False)
    ops = resize_patch(p, [change])
    empties = [op["path"].removeprefix("/spec/containers/0/") for op in ops if op["value"] == {}]
    assert empties == expected_prefix
    values = {op["path"].rsplit("/", 1)[1]: op["value"] for op in ops if op["value"] != {}}
    assert values == {"cpu": "50m", "memory": "64Mi"}
