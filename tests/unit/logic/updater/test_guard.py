"""The resize guard: what counts as hurt, the revert's values, the backoff, and the plan holding decreases."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.unit.logic.updater.test_support import KEY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.guard import (
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    Backoff,
    Cause,
    EvictedFor,
    ResizeGuard,
    evicted_for,
    guard,
    guard_window_s,
    hurt,
    replacement,
    revert_changes,
    with_reverted_condition,
)
from vpa.logic.updater.inplace import Action, ContainerChange, PodDecision, Reason
from vpa.logic.updater.plan import PassInputs, guard_asked, plan_vpa
from vpa.model import annotations as ann
from vpa.model.features import FeatureGates
from vpa.model.pod import PodCondition, PodView
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import Condition, Recommendation, RecommendedContainerResources, VpaView

MI = 2**20
RESIZED_AT = NOW - 120
# app: memory 512Mi / limit 1Gi, lowered to 256Mi / 512Mi.
BEFORE = pod("web-1", [ctr("app", mem="512Mi", mem_limit="1Gi")])
DOWN = PodDecision(
    BEFORE,
    Action.RESIZE,
    Reason.SIGNIFICANT_CHANGE,
    changes=(ContainerChange(0, "app", Resources(None, 256 * MI), Resources(None, 512 * MI), False),),
)
AFTER = pod("web-1", [ctr("app", mem="256Mi", mem_limit="512Mi")])


def _ready(p: PodView, ready: bool) -> PodView:
    others = tuple(c for c in p.conditions if c.type != "Ready")
    return dataclasses.replace(p, conditions=(*others, PodCondition("Ready", "True" if ready else "False")))


def _status(p: PodView, **changes: Any) -> PodView:
    (status,) = p.container_statuses
    return dataclasses.replace(p, container_statuses=(dataclasses.replace(status, **changes),))


RECORD = guard(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)


@pytest.mark.parametrize(
    ("now_pod", "expected"),
    [
        (_ready(AFTER, True), None),
        (
            _status(
                _ready(AFTER, True),
                last_terminated_reason="OOMKilled",
                last_terminated_at=RESIZED_AT + 30,
                restart_count=1,
            ),
            (Cause.OOM_KILLED, "app"),
        ),
        # an OOM kill before the resize is not the resize's doing
        (
            _status(
                _ready(AFTER, True), last_terminated_reason="OOMKilled", last_terminated_at=RESIZED_AT - 30
            ),
            None,
        ),
        (
            _status(_ready(AFTER, True), state="terminated", state_reason="OOMKilled"),
            (Cause.OOM_KILLED, "app"),
        ),
        (
            _status(
                _ready(AFTER, True),
                restart_count=1,
                last_terminated_reason="Error",
                last_terminated_at=RESIZED_AT + 30,
            ),
            (Cause.RESTARTED, "app"),
        ),
        (_ready(AFTER, False), (Cause.NOT_READY, "")),
    ],
)
def test_hurt(now_pod: PodView, expected: tuple[Cause, str] | None) -> None:
    assert hurt(RECORD, now_pod) == expected


def _rec(upper_memory: str) -> Recommendation:
    amount = Resources.from_resource_list({"memory": upper_memory})
    return Recommendation(
        (RecommendedContainerResources("app", Resources(None, 256 * MI), upper_bound=amount),)
    )


@pytest.mark.parametrize(
    ("recommendation", "memory_request", "memory_limit"),
    [
        (None, 512 * MI, 1024 * MI),  # back to the values before
        (_rec("400Mi"), 512 * MI, 1024 * MI),  # the upper bound is lower: before wins
        (_rec("1Gi"), 1024 * MI, 2048 * MI),  # the upper bound is higher: it wins, the limit in proportion
        (_rec("64Gi"), 4096 * MI, 8192 * MI),  # ... capped at the node's allocatable (4Gi here)
    ],
)
def test_revert_values(recommendation: Recommendation | None, memory_request: int, memory_limit: int) -> None:
    (change,) = revert_changes(RECORD, AFTER, recommendation, Resources(4000, 4096 * MI))
    assert (change.container, change.resource) == ("app", "memory")
    assert (change.request, change.limit) == (memory_request, memory_limit)


def test_window_annotation() -> None:
    assert guard_window_s({}) == 600
    assert guard_window_s({ann.RESIZE_GUARD_WINDOW: "15m"}) == 900
    assert guard_window_s({ann.RESIZE_GUARD_WINDOW: "soon"}) == 600


def test_backoff_doubles_to_a_day() -> None:
    backoff = Backoff()
    helds = [backoff.note(0.0) for _ in range(7)]
    assert helds == [BACKOFF_BASE_S * f for f in (1, 2, 4, 8, 16)] + [BACKOFF_MAX_S, BACKOFF_MAX_S]


@pytest.mark.parametrize(
    ("base_s", "expected"),
    [
        (60.0, [60.0, 120.0, 240.0, 480.0]),  # `--resize-guard-backoff=1m`
        (8 * 3600.0, [8 * 3600.0, 16 * 3600.0, BACKOFF_MAX_S, BACKOFF_MAX_S]),  # capped at a day
        (BACKOFF_MAX_S, [BACKOFF_MAX_S] * 4),
    ],
)
def test_backoff_base_is_configurable(base_s: float, expected: list[float]) -> None:
    backoff = Backoff()
    assert [backoff.note(0.0, base_s) for _ in range(4)] == expected
    # the guard's state uses its base for every revert
    state = ResizeGuard(backoff_base_s=base_s)
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    (revert,) = state.check({BEFORE.uid: _oom(AFTER, NOW - 10)}, lambda _: None, NOW)
    assert revert.held_until == NOW + expected[0]
    assert state.held(AFTER, NOW + expected[0] - 1) == {"app": NOW + expected[0]}
    assert state.held(AFTER, NOW + expected[0]) == {}


def _oom(p: PodView, at: float) -> PodView:
    return _status(
        _ready(p, True), last_terminated_reason="OOMKilled", last_terminated_at=at, restart_count=1
    )


def test_check_reverts_once_and_backs_off() -> None:
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    assert (
        state.check({BEFORE.uid: _ready(AFTER, True)}, lambda _: None, NOW) == []
    )  # not hurt: still watched
    (revert,) = state.check({BEFORE.uid: _oom(AFTER, NOW - 10)}, lambda _: None, NOW)
    assert revert.cause is Cause.OOM_KILLED
    assert revert.decision.action is Action.RESIZE
    assert revert.decision.reason is Reason.RESIZE_REVERTED
    (change,) = revert.decision.changes
    assert (change.requests, change.limits) == (Resources(None, 512 * MI), Resources(None, 1024 * MI))
    assert revert.held_until == NOW + BACKOFF_BASE_S
    message = revert.message()
    assert "revert" in message
    assert "pod default/web-1" in message
    assert "container app was OOM-killed" in message
    assert "app: requests memory=536870912, limits memory=1073741824" in message
    # reverted once: no second revert for the same resize, and the revert itself is not guarded
    assert state.check({BEFORE.uid: _oom(AFTER, NOW - 10)}, lambda _: None, NOW + 1) == []
    state.watch(AFTER, revert.decision, "default/web", NOW, 600)
    assert state.records == {}
    assert state.held(AFTER, NOW + 60) == {"app": NOW + BACKOFF_BASE_S}
    assert state.held(AFTER, NOW + BACKOFF_BASE_S) == {}
    # the next revert of that container holds twice as long
    state.watch(_ready(BEFORE, True), DOWN, "default/web", NOW + 2 * BACKOFF_BASE_S, 600)
    (again,) = state.check(
        {BEFORE.uid: _oom(AFTER, NOW + 2 * BACKOFF_BASE_S + 5)}, lambda _: None, NOW + 2 * BACKOFF_BASE_S + 10
    )
    assert again.held_until == NOW + 2 * BACKOFF_BASE_S + 10 + 2 * BACKOFF_BASE_S


def test_check_forgets_after_the_window_and_when_the_pod_is_gone() -> None:
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    assert state.check({BEFORE.uid: _ready(AFTER, True)}, lambda _: None, RESIZED_AT + 600) == []
    assert state.records == {}
    # an OOM after the window is not reverted
    assert state.check({BEFORE.uid: _oom(AFTER, RESIZED_AT + 700)}, lambda _: None, RESIZED_AT + 710) == []
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    assert state.check({}, lambda _: None, NOW) == []
    assert state.records == {}


GATES = FeatureGates.parse("InPlace=true,ResizeGuard=true")


@pytest.mark.parametrize(
    ("gates", "annotated", "target_mem", "action", "reason"),
    [
        (GATES, True, "128Mi", Action.SKIP, Reason.DECREASE_HELD),  # decrease held by the backoff
        (GATES, True, "1Gi", Action.RESIZE, Reason.SIGNIFICANT_CHANGE),  # an increase goes
        (GATES, False, "128Mi", Action.RESIZE, Reason.SIGNIFICANT_CHANGE),  # not annotated: no hold
        (FeatureGates.parse("InPlace=true"), True, "128Mi", Action.RESIZE, Reason.SIGNIFICANT_CHANGE),
    ],
)
def test_plan_holds_decreases_during_the_backoff(
    gates: FeatureGates, annotated: bool, target_mem: str, action: Action, reason: Reason
) -> None:
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    state.check({BEFORE.uid: _oom(AFTER, NOW - 10)}, lambda _: None, NOW - 5)
    v = vpa("InPlace", [rec("app", mem=target_mem)])
    if annotated:
        v = dataclasses.replace(v, annotations={ann.RESIZE_GUARD: "true"})
    pods = [_ready(AFTER, True), pod("web-2"), pod("web-3")]
    plan = plan_vpa(v, pods, PassInputs(now=NOW, gates=gates, replicas={KEY: 3}, guard=state))
    (decision,) = [d for d in plan.decisions if d.pod.name == "web-1"]
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    if reason is Reason.DECREASE_HELD:
        assert "app: decreases held after a revert" in decision.detail


def test_reverted_condition_names_pod_cause_and_values() -> None:
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    (revert,) = state.check({BEFORE.uid: _oom(AFTER, NOW - 10)}, lambda _: None, NOW)
    kept = Condition("RecommendationProvided", "True", 1.0)
    conditions = with_reverted_condition((kept,), revert, NOW)
    assert [c.type for c in conditions] == ["RecommendationProvided", "ResizeReverted"]
    reverted = conditions[1]
    assert (reverted.status, reverted.reason, reverted.last_transition_time) == ("True", "OOMKilled", NOW)
    assert reverted.message == revert.message()
    # a second revert keeps the transition time, updates the message
    again = with_reverted_condition(conditions, revert, NOW + 60)
    assert again[1].last_transition_time == NOW


def test_a_second_resize_while_guarded_keeps_the_first_ones_values_and_start() -> None:
    # Lowered to 256Mi / 512Mi, OOM-killed, then raised by the VPA's own reaction to 400Mi / 800Mi: the
    # guard still sees the OOM (after the first resize) and goes back to the values before the first one.
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    up = PodDecision(
        AFTER,
        Action.RESIZE,
        Reason.OUTSIDE_RANGE,
        changes=(ContainerChange(0, "app", Resources(None, 400 * MI), Resources(None, 800 * MI), False),),
    )
    state.watch(_oom(AFTER, RESIZED_AT + 30), up, "default/web", RESIZED_AT + 40, 600)
    raised = _oom(pod("web-1", [ctr("app", mem="400Mi", mem_limit="800Mi")]), RESIZED_AT + 30)
    (revert,) = state.check({BEFORE.uid: raised}, lambda _: None, RESIZED_AT + 60)
    assert revert.cause is Cause.OOM_KILLED
    (change,) = revert.decision.changes
    assert (change.requests, change.limits) == (Resources(None, 512 * MI), Resources(None, 1024 * MI))


# --- evictions: the controller's next pod, admitted with the recommendation, is guarded as a resize is ------

EVICTED_AT = NOW - 300
EVICTED = _ready(pod("web-1", [ctr("app", mem="512Mi", mem_limit="1Gi"), ctr("side", mem="64Mi")]), True)
# The webhook lowered app to 256Mi / 512Mi; side kept its values.
NEW = pod("web-9", [ctr("app", mem="256Mi", mem_limit="512Mi"), ctr("side", mem="64Mi")], age_s=200)


def _eviction(window_s: float = 600) -> EvictedFor:
    record = evicted_for(EVICTED, "default/web", EVICTED_AT, window_s)
    assert record is not None
    return record


@pytest.mark.parametrize(
    ("candidate", "adopted"),
    [
        (NEW, True),
        (EVICTED, False),  # the evicted pod itself
        (dataclasses.replace(NEW, owner=None), False),  # no controller
        (pod("web-9", [ctr("app", mem="256Mi", mem_limit="512Mi")], owner="other-rs"), False),  # another one
        (pod("web-9", [ctr("app", mem="256Mi", mem_limit="512Mi")], age_s=400), False),  # older than it
        (pod("web-9", [ctr("app", mem="512Mi", mem_limit="1Gi"), ctr("side", mem="64Mi")], age_s=200), False),
        (pod("web-9", [ctr("app", mem="256Mi", mem_limit="512Mi")], age_s=200, terminating=True), False),
    ],
    ids=[
        "replacement", "itself", "no-owner", "other-controller", "created-before", "same-values", "deleted"
    ],
)
def test_replacement_of_an_evicted_pod(candidate: PodView, adopted: bool) -> None:
    record = replacement(_eviction(), candidate, NOW)
    assert (record is not None) == adopted
    if record is None:
        return
    # Only what changed is guarded: app's memory, from the evicted pod's values; restarts count from 0.
    assert set(record.containers) == {"app"}
    before = record.containers["app"]
    assert (before.requests.memory_bytes, before.limits.memory_bytes, before.restart_count) == (
        512 * MI, 1024 * MI, 0
    )  # fmt: skip
    assert record.after["app"] == (Resources(None, 256 * MI), Resources(None, 512 * MI))
    assert (record.at, record.until, record.evicted) == (EVICTED_AT, NOW + 600, "web-1")


def test_an_evicted_pods_replacement_is_reverted_in_place_and_backs_off() -> None:
    state = ResizeGuard(backoff_base_s=120)
    state.watch_eviction(EVICTED, "default/web", EVICTED_AT, 600)
    started = _ready(NEW, True)
    assert state.check({EVICTED.uid: EVICTED, NEW.uid: started}, lambda _: None, NOW) == []
    assert set(state.records) == {NEW.uid}
    assert state.evictions == []
    (revert,) = state.check({NEW.uid: _oom_first(started, NOW + 20)}, lambda _: None, NOW + 30)
    assert (revert.cause, revert.container) == (Cause.OOM_KILLED, "app")
    assert revert.decision.action is Action.RESIZE
    (change,) = revert.decision.changes
    assert (change.name, change.requests, change.limits) == (
        "app", Resources(None, 512 * MI), Resources(None, 1024 * MI)
    )  # fmt: skip
    message = revert.message()
    assert "revert of the values pod default/web-9 got when it replaced evicted pod web-1" in message
    assert "container app was OOM-killed after it; resized back to app: requests memory=536870912" in message
    assert state.held(NEW, NOW + 60) == {"app": NOW + 30 + 120}
    refused = revert.message(refused="Rejected: the pod cannot be resized")
    assert "could not resize back to app: requests memory=536870912, limits memory=1073741824: Rejected" in (
        refused
    )
    assert refused.endswith(message[message.index("; decreases held until") :])


def _oom_first(p: PodView, at: float) -> PodView:
    """`p` with its first container OOM-killed at `at` and restarted."""
    first, *rest = p.container_statuses
    killed = dataclasses.replace(
        first, last_terminated_reason="OOMKilled", last_terminated_at=at, restart_count=1
    )
    return dataclasses.replace(p, container_statuses=(killed, *rest))


def test_a_replacement_not_ready_yet_is_watched_for_readiness_once_it_is() -> None:
    state = ResizeGuard()
    state.watch_eviction(EVICTED, "default/web", EVICTED_AT, 600)
    starting = _ready(NEW, False)
    assert state.check({NEW.uid: starting}, lambda _: None, NOW) == []  # adopted; not Ready is no hurt yet
    assert state.check({NEW.uid: starting}, lambda _: None, NOW + 10) == []
    assert state.check({NEW.uid: _ready(NEW, True)}, lambda _: None, NOW + 20) == []
    (revert,) = state.check({NEW.uid: _ready(NEW, False)}, lambda _: None, NOW + 30)
    assert revert.cause is Cause.NOT_READY


def test_an_eviction_without_a_replacement_is_forgotten_after_the_window() -> None:
    state = ResizeGuard()
    state.watch_eviction(EVICTED, "default/web", EVICTED_AT, 600)
    assert state.check({}, lambda _: None, EVICTED_AT + 599) == []
    assert len(state.evictions) == 1
    assert state.check({}, lambda _: None, EVICTED_AT + 600) == []
    assert state.evictions == []
    # and a pod that appears later is not adopted
    assert state.check({NEW.uid: _oom_first(_ready(NEW, True), NOW)}, lambda _: None, NOW + 1) == []
    assert state.records == {}


@pytest.mark.parametrize(
    ("target_mem", "target_cpu", "action", "reason"),
    [
        ("128Mi", "500m", Action.SKIP, Reason.DECREASE_HELD),  # the new pod would get less memory
        ("128Mi", "2", Action.SKIP, Reason.DECREASE_HELD),  # ... even with more CPU: all or nothing
        ("2Gi", "2", Action.EVICT, Reason.OUTSIDE_RANGE),  # increases go
    ],
)
def test_a_recreate_plan_holds_evictions_that_would_decrease_during_the_backoff(
    target_mem: str, target_cpu: str, action: Action, reason: Reason
) -> None:
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    state.check({BEFORE.uid: _oom(AFTER, NOW - 10)}, lambda _: None, NOW - 5)
    # Outside the recommended range, so Recreate wants to evict at once.
    recs = [rec("app", cpu=target_cpu, mem=target_mem, lower=(target_cpu, target_mem),
                upper=(target_cpu, target_mem))]  # fmt: skip
    v = dataclasses.replace(vpa("Recreate", recs), annotations={ann.RESIZE_GUARD: "true"})
    pods = [_ready(AFTER, True), pod("web-2"), pod("web-3")]
    settings = UpdaterSettings(eviction_tolerance=1.0)  # every pod may go: only the hold stops one
    inputs = PassInputs(now=NOW, settings=settings, gates=GATES, replicas={KEY: 3}, guard=state)
    plan = plan_vpa(v, pods, inputs)
    (decision,) = [d for d in plan.decisions if d.pod.name == "web-1"]
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    if reason is Reason.DECREASE_HELD:
        assert decision.detail == "app: decreases held after a revert"
    # after the backoff the same eviction goes
    later = plan_vpa(v, pods, dataclasses.replace(inputs, now=NOW + BACKOFF_BASE_S))
    (decision,) = [d for d in later.decisions if d.pod.name == "web-1"]
    assert decision.action is Action.EVICT, decision.explain()


# --- a revert puts back only what can have hurt (the OOM-killed containers' memory, a lowered value) -------

# app and side: CPU 1000m → 250m, memory 512Mi / 1Gi → 256Mi / 512Mi (`_LOWER_BOTH`); side's CPU raised to
# 2000m instead (`_RAISE_SIDE_CPU`), or only side's CPU lowered (`_LOWER_SIDE_CPU`).
_TWO = [ctr(name, cpu="1000m", mem="512Mi", mem_limit="1Gi") for name in ("app", "side")]
_LOWERED = (Resources(250, 256 * MI), Resources(None, 512 * MI))
_LOWER_BOTH = PodDecision(
    pod("web-1", _TWO), Action.RESIZE, Reason.SIGNIFICANT_CHANGE,
    changes=(ContainerChange(0, "app", *_LOWERED, False), ContainerChange(1, "side", *_LOWERED, False)),
)  # fmt: skip
_RAISE_SIDE_CPU = PodDecision(
    pod("web-1", _TWO), Action.RESIZE, Reason.SIGNIFICANT_CHANGE,
    changes=(ContainerChange(0, "app", *_LOWERED, False),
             ContainerChange(1, "side", Resources(2000, 256 * MI), Resources(None, 512 * MI), False)),
)  # fmt: skip
_LOWER_SIDE_CPU = PodDecision(
    pod("web-1", _TWO), Action.RESIZE, Reason.SIGNIFICANT_CHANGE,
    changes=(ContainerChange(0, "app", *_LOWERED, False),
             ContainerChange(1, "side", Resources(250, None), Resources(), False)),
)  # fmt: skip
_LOW = ctr("app", cpu="250m", mem="256Mi", mem_limit="512Mi")
_SIDE_LOW = ctr("side", cpu="250m", mem="256Mi", mem_limit="512Mi")
_SIDE_RAISED = ctr("side", cpu="2000m", mem="256Mi", mem_limit="512Mi")
# Upper bounds far above the node: CPU is capped at the node's 4000m, memory at 1Gi is below it.
_UPPER = Recommendation(tuple(
    RecommendedContainerResources(name, Resources(250, 256 * MI), upper_bound=Resources(64_000, 1024 * MI))
    for name in ("app", "side")
))  # fmt: skip
_NODE = Resources(4000, 16 * 1024 * MI)
_MEM_UP = (1024 * MI, 2048 * MI)  # the upper bound, the limit in proportion
_CPU_UP = (4000, None)  # the upper bound capped at the node; no CPU limit


def _statuses(p: PodView, **by_name: dict[str, Any]) -> PodView:
    statuses = tuple(
        dataclasses.replace(s, **by_name[s.name]) if s.name in by_name else s for s in p.container_statuses
    )
    return dataclasses.replace(p, container_statuses=statuses)


_OOM = {"last_terminated_reason": "OOMKilled", "last_terminated_at": NOW - 10, "restart_count": 1}
_CRASH = {"last_terminated_reason": "Error", "last_terminated_at": NOW - 10, "restart_count": 1}


@pytest.mark.parametrize(
    ("decision", "side", "hurt_by", "ready", "expected"),
    [
        # An OOM kill puts back that container's memory only: CPU stays at 250m (it went to 4000m before).
        (_LOWER_BOTH, _SIDE_LOW, {"app": _OOM}, True, {("app", "memory"): _MEM_UP}),
        # ... and only the killed containers': side was lowered too, but not killed.
        (_LOWER_BOTH, _SIDE_LOW, {"app": _OOM, "side": _OOM}, True,
         {("app", "memory"): _MEM_UP, ("side", "memory"): _MEM_UP}),
        # A restart that is no OOM kill says nothing about which resource: the restarted container's
        # lowered ones go back.
        (_LOWER_BOTH, _SIDE_LOW, {"side": _CRASH}, True,
         {("side", "cpu"): _CPU_UP, ("side", "memory"): _MEM_UP}),
        # Not Ready: every changed container's lowered resources ...
        (_LOWER_BOTH, _SIDE_LOW, {}, False, {
            ("app", "cpu"): _CPU_UP, ("app", "memory"): _MEM_UP,
            ("side", "cpu"): _CPU_UP, ("side", "memory"): _MEM_UP,
        }),
        # ... but a resource the resize raised (side's CPU, 1000m → 2000m) is never put back down.
        (_RAISE_SIDE_CPU, _SIDE_RAISED, {}, False, {
            ("app", "cpu"): _CPU_UP, ("app", "memory"): _MEM_UP, ("side", "memory"): _MEM_UP,
        }),
        # An OOM kill of a container whose memory the resize did not touch: nothing to put back.
        (_LOWER_SIDE_CPU, ctr("side", cpu="250m", mem="512Mi", mem_limit="1Gi"), {"side": _OOM}, True, {}),
    ],
    ids=["oom-memory-only", "oom-killed-containers-only", "restart-lowered", "not-ready-lowered",
         "not-ready-never-lowers", "oom-unchanged-memory"],
)  # fmt: skip
def test_a_revert_puts_back_only_what_can_have_hurt(
    decision: PodDecision,
    side: dict[str, Any],
    hurt_by: dict[str, dict[str, Any]],
    ready: bool,
    expected: dict[tuple[str, str], tuple[int, int | None]],
) -> None:
    state = ResizeGuard()
    state.watch(_ready(pod("web-1", _TWO), True), decision, "default/web", RESIZED_AT, 600)
    now_pod = _statuses(_ready(pod("web-1", [_LOW, side]), ready), **hurt_by)
    reverts = state.check({BEFORE.uid: now_pod}, lambda _: _UPPER, NOW, lambda _: _NODE)
    if not expected:
        assert reverts == []
        assert state.held(now_pod, NOW + 1)  # nothing sent, the backoff holds all the same
        return
    (revert,) = reverts
    got = {
        (change.name, resource): (change.requests.get(resource), change.limits.get(resource))
        for change in revert.decision.changes
        for resource in ("cpu", "memory")
        if change.requests.get(resource) is not None or change.limits.get(resource) is not None
    }
    assert got == expected


def test_a_revert_leaves_values_the_pod_already_has_above_it() -> None:
    # Lowered to 256Mi, OOM-killed, then raised to 2Gi / 4Gi by someone else: nothing left to put back.
    state = ResizeGuard()
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    above = _oom(pod("web-1", [ctr("app", mem="2Gi", mem_limit="4Gi")]), NOW - 10)
    assert state.check({BEFORE.uid: above}, lambda _: None, NOW) == []


# --- a revert whose resize failed transiently is tried again ----------------------------------------------


def _failed_revert(state: ResizeGuard, hurt_pod: PodView) -> None:
    state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    (revert,) = state.check({BEFORE.uid: hurt_pod}, lambda _: None, NOW)
    state.retry(revert, NOW, 600)  # the loop's resize answered 503


def test_a_failed_revert_is_tried_again_on_the_next_passes() -> None:
    state = ResizeGuard()
    hurt_pod = _oom(AFTER, NOW - 10)
    _failed_revert(state, hurt_pod)
    (again,) = state.check({BEFORE.uid: hurt_pod}, lambda _: None, NOW + 60)
    assert (again.cause, again.failed, again.held_until) == (Cause.OOM_KILLED, 1, NOW + BACKOFF_BASE_S)
    (change,) = again.decision.changes
    assert (change.requests, change.limits) == (Resources(None, 512 * MI), Resources(None, 1024 * MI))
    # the backoff was counted once, for the revert, not for each attempt
    assert [b.reverts for b in state.backoffs.values()] == [1]
    state.retry(again, NOW + 60, 600)  # failed again
    (third,) = state.check({BEFORE.uid: hurt_pod}, lambda _: None, NOW + 120)
    assert third.failed == 2
    # that one went through: nothing more
    assert state.check({BEFORE.uid: hurt_pod}, lambda _: None, NOW + 180) == []


@pytest.mark.parametrize(
    ("pods", "at"),
    [
        ({}, NOW + 60),  # the pod is gone
        ({BEFORE.uid: _ready(AFTER, True)}, NOW + 60),  # Ready again: no longer hurt
        ({BEFORE.uid: _ready(AFTER, False)}, NOW + 600),  # one window after the failure
        ({BEFORE.uid: _ready(pod("web-1", [ctr("app", mem="1Gi", mem_limit="2Gi")]), False)}, NOW + 60),
    ],
    ids=["gone", "recovered", "window-over", "already-above"],
)
def test_a_failed_revert_is_dropped_once_there_is_nothing_to_undo(
    pods: dict[str, PodView], at: float
) -> None:
    state = ResizeGuard()
    _failed_revert(state, _ready(AFTER, False))  # the pod stopped being Ready
    assert state.check(pods, lambda _: None, at) == []
    assert state.retries == {}
    assert state.check({BEFORE.uid: _ready(AFTER, False)}, lambda _: None, at + 1) == []
    assert state.held(AFTER, at) == {"app": NOW + BACKOFF_BASE_S}  # the backoff holds all the same


# --- a VPA that dropped the guard after the resize gets no revert, first or again ---------------------------


def _guarded_vpa(annotation: str | None) -> VpaView:
    annotations = {} if annotation is None else {ann.RESIZE_GUARD: annotation}
    return dataclasses.replace(vpa("InPlace"), annotations=annotations)


@pytest.mark.parametrize(
    ("retry", "gates", "vpas", "reverted"),
    [
        (False, GATES, {"default/web": _guarded_vpa("true")}, True),
        (False, GATES, {"default/web": _guarded_vpa(None)}, False),  # annotation removed after the resize
        (False, GATES, {"default/web": _guarded_vpa("false")}, False),
        (False, GATES, {}, False),  # the VPA is gone, or no longer acted for
        (False, FeatureGates.parse("InPlace=true"), {"default/web": _guarded_vpa("true")}, False),
        (True, GATES, {"default/web": _guarded_vpa("true")}, True),
        (True, GATES, {"default/web": _guarded_vpa(None)}, False),
        (True, GATES, {}, False),
    ],
    ids=["first-asked", "first-dropped", "first-false", "first-vpa-gone", "first-gate-off",
         "retry-asked", "retry-dropped", "retry-vpa-gone"],
)
def test_a_vpa_that_dropped_the_guard_gets_no_revert(
    retry: bool, gates: FeatureGates, vpas: dict[str, VpaView], reverted: bool
) -> None:
    state = ResizeGuard()
    hurt_pod = _oom(AFTER, NOW - 10)
    at = NOW
    if retry:
        _failed_revert(state, hurt_pod)  # asked at the first revert, which failed transiently
        at = NOW + 60
    else:
        state.watch(_ready(BEFORE, True), DOWN, "default/web", RESIZED_AT, 600)
    reverts = state.check({BEFORE.uid: hurt_pod}, lambda _: None, at, guarded=guard_asked(gates, vpas))
    assert [r.failed for r in reverts] == ([int(retry)] if reverted else [])
    # Nothing is kept to revert later, and a revert not made counts no backoff (a retry's was counted
    # at its first attempt, when the VPA still asked).
    assert (state.records, state.retries) == ({}, {})
    assert [b.reverts for b in state.backoffs.values()] == ([1] if retry or reverted else [])
    assert state.check({BEFORE.uid: hurt_pod}, lambda _: None, at + 1) == []
