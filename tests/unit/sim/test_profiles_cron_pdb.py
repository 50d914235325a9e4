"""Usage profiles, cron schedules, PDB arithmetic and pod patches: pure tables."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from vpa.sim import timestamps
from vpa.sim.cluster import cron, disruption, patching, profiles
from vpa.sim.contracts import ApiError

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
H = 3600.0


def at(hour: float) -> float:
    return T0 + hour * H


PROFILE_CASES: list[tuple[str, str, dict[str, Any], float, float, float, float]] = [
    # id, resource, spec, t, pod_start, container_start, expected
    ("constant-cpu", "cpu", {"type": "constant", "value": "250m"}, at(5), T0, T0, 250.0),
    ("constant-number-is-cores", "cpu", {"type": "constant", "value": 0.5}, at(5), T0, T0, 500.0),
    (
        "daily-peak",
        "cpu",
        {"type": "daily", "base": "500m", "amplitude": "300m", "peak_hour": 14},
        at(14),
        T0,
        T0,
        800.0,
    ),
    (
        "daily-trough",
        "cpu",
        {"type": "daily", "base": "500m", "amplitude": "300m", "peak_hour": 14},
        at(2),
        T0,
        T0,
        200.0,
    ),
    (
        "daily-next-day-peak",
        "cpu",
        {"type": "daily", "base": "500m", "amplitude": "300m", "peak_hour": 14},
        at(38),
        T0,
        T0,
        800.0,
    ),
    (
        "spike-on",
        "memory",
        {"type": "spikes", "base": "100Mi", "height": "100Mi", "period_s": 600, "duration_s": 60},
        T0 + 30,
        T0,
        T0,
        200.0 * 2**20,
    ),
    (
        "spike-off",
        "memory",
        {"type": "spikes", "base": "100Mi", "height": "100Mi", "period_s": 600, "duration_s": 60},
        T0 + 61,
        T0,
        T0,
        100.0 * 2**20,
    ),
    (
        "trend-slope",
        "memory",
        {"type": "trend", "start": "100Mi", "per_hour": "10Mi"},
        at(3),
        T0,
        T0,
        130.0 * 2**20,
    ),
    (
        "trend-clamped",
        "memory",
        {"type": "trend", "start": "100Mi", "per_hour": "10Mi", "max": "120Mi"},
        at(3),
        T0,
        T0,
        120.0 * 2**20,
    ),
    (
        "leak-from-container-start",
        "memory",
        {"type": "leak", "start": "100Mi", "per_hour": "50Mi"},
        at(3),
        T0,
        at(1),
        200.0 * 2**20,
    ),
]


@pytest.mark.parametrize(
    ("resource", "spec", "t", "pod_start", "cstart", "expected"),
    [c[1:] for c in PROFILE_CASES],
    ids=[c[0] for c in PROFILE_CASES],
)
def test_profile_values(
    resource: str, spec: dict[str, Any], t: float, pod_start: float, cstart: float, expected: float
) -> None:
    prof = profiles.parse_profile(resource, spec, "test")
    assert prof.value(t, pod_start, cstart) == pytest.approx(expected)
    assert prof.upper_bound() >= expected


def test_leak_crossing_is_closed_form() -> None:
    leak = profiles.Leak(100.0, 50.0)
    assert leak.crossing(200.0, T0) == pytest.approx(T0 + 2 * H)
    assert profiles.Leak(100.0, 0.0).crossing(200.0, T0) is None


def test_noise_is_deterministic_and_bounded() -> None:
    spec = {"type": "constant", "value": "1", "noise": 0.2, "seed": 7}
    a = profiles.parse_profile("cpu", spec, "x")
    b = profiles.parse_profile("cpu", spec, "x")
    values = [a.value(T0 + 15 * i, T0, T0) for i in range(200)]
    assert values == [b.value(T0 + 15 * i, T0, T0) for i in range(200)]
    assert min(values) >= 800
    assert max(values) <= 1200
    assert len(set(values)) > 50


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "nope"}, "unknown profile type"),
        ({"type": "constant"}, "needs 'value'"),
        ({"type": "constant", "value": "lots"}, "test.value"),
        ({"type": "spikes", "base": "1", "height": "1", "period_s": 0}, "period_s"),
    ],
    ids=["unknown-type", "missing-field", "bad-quantity", "bad-period"],
)
def test_profile_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(profiles.ProfileError, match=message):
        profiles.parse_profile("cpu", spec, "test")


def test_annotation_and_trace_csv(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "timestamp,container,cpu_cores,memory_bytes\n"
        "1000,a,0.5,100\n1300,a,1.5,\n1600,a,0.25,300\n1000,b,2,5\n"
    )
    text = json.dumps(
        {
            "app": {"trace": {"path": str(trace), "key": "a"}},
            "side": {"cpu": {"type": "constant", "value": "10m"}},
        }
    )
    parsed = profiles.parse_annotation(text)
    cpu, mem = parsed["app"].cpu, parsed["app"].memory
    assert cpu is not None
    assert mem is not None
    # Relative to pod start, step function, looping after the last sample + one step.
    assert cpu.value(T0 + 0, T0, T0) == 500.0
    assert cpu.value(T0 + 301, T0, T0) == 1500.0
    assert cpu.value(T0 + 600, T0, T0) == 250.0
    assert cpu.value(T0 + 900, T0, T0) == 500.0  # looped
    assert mem.value(T0 + 301, T0, T0) == 100.0  # empty memory cell: the series has no sample there
    absolute = profiles.parse_profile(
        "cpu", {"type": "trace", "path": str(trace), "key": "b", "mode": "absolute", "loop": False}, "x"
    )
    assert absolute.value(5000, 0, 0) == 2000.0
    assert parsed["side"].memory is None
    with pytest.raises(profiles.ProfileError, match="no rows"):
        profiles.parse_profile("cpu", {"type": "trace", "path": str(trace), "key": "zzz"}, "x")


def test_default_profile_uses_request_then_limit_then_floor() -> None:
    assert profiles.default_profile("cpu", 400, 1000, 0.5).amount == 200
    assert profiles.default_profile("cpu", None, 1000, 0.5).amount == 500
    assert profiles.default_profile("memory", None, None, 0.5).amount == 32 * 2**20


# --- cron -----------------------------------------------------------------------------------------


def ts(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


CRON_CASES = [
    ("every-5-min", "*/5 * * * *", "2026-01-01T00:02:00", "2026-01-01T00:05:00"),
    ("strictly-after", "*/5 * * * *", "2026-01-01T00:05:00", "2026-01-01T00:10:00"),
    ("hourly", "@hourly", "2026-01-01T00:00:30", "2026-01-01T01:00:00"),
    ("daily", "@daily", "2026-01-01T10:00:00", "2026-01-02T00:00:00"),
    ("list-and-range", "0 9-17/4,22 * * *", "2026-01-01T13:30:00", "2026-01-01T17:00:00"),
    (
        "weekday-name",
        "30 6 * * mon",
        "2026-01-01T00:00:00",
        "2026-01-05T06:30:00",
    ),  # 2026-01-01 is a Thursday
    ("sunday-as-7", "0 0 * * 7", "2026-01-01T00:00:00", "2026-01-04T00:00:00"),
    ("dom-or-dow", "0 0 13 * fri", "2026-01-01T00:00:00", "2026-01-02T00:00:00"),
    ("month-name", "0 0 1 mar *", "2026-01-01T00:00:00", "2026-03-01T00:00:00"),
    ("every-duration", "@every 90s", "2026-01-01T00:00:00", "2026-01-01T00:01:30"),
]


@pytest.mark.parametrize(
    ("expr", "after", "expected"), [c[1:] for c in CRON_CASES], ids=[c[0] for c in CRON_CASES]
)
def test_cron_next(expr: str, after: str, expected: str) -> None:
    assert cron.parse(expr).next_after(ts(after)) == ts(expected)


@pytest.mark.parametrize(
    "expr",
    ["* * * *", "61 * * * *", "*/0 * * * *", "@fortnightly", "TZ=UTC * * * * *", "a * * * *"],
    ids=["four-fields", "out-of-range", "zero-step", "bad-descriptor", "tz-prefix", "garbage"],
)
def test_cron_rejects(expr: str) -> None:
    with pytest.raises(cron.CronError):
        cron.parse(expr)


# --- PodDisruptionBudget --------------------------------------------------------------------------


def ready_pod(
    name: str, ready: bool = True, deleting: bool = False, owner: str | None = "rs"
) -> dict[str, Any]:
    """A pod the ReplicaSet `owner` controls (its uid is its name); with `owner=None`, no controller."""
    md: dict[str, Any] = {"name": name}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner is not None:
        md["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": True},
        ]
    return {
        "metadata": md,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def unmanaged(name: str, ready: bool = True) -> dict[str, Any]:
    return ready_pod(name, ready=ready, owner=None)


def finished(name: str, phase: str = "Succeeded", owner: str | None = "rs") -> dict[str, Any]:
    """A pod that ran to the end: the kubelet reports it not Ready (reason PodCompleted)."""
    done = ready_pod(name, ready=False, owner=owner)
    done["status"]["phase"] = phase
    return done


def scale_of(replicas: dict[str, int]) -> Any:
    """An `expected_scale` summing each distinct controller's replicas; it refuses pods without one, as
    `compute` must not pass them, and a controller it does not know, as the controllers' finder does."""

    def expected_scale(pods: Any) -> int:
        uids = set()
        for pod in pods:
            refs = [r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")]
            assert refs, f"pod {pod['metadata']['name']} has no controller"
            if refs[0]["uid"] not in replicas:
                name = disruption.go_quote(pod["metadata"]["name"])
                raise disruption.ScaleError(f"found no controllers for pod {name}")
            uids.add(refs[0]["uid"])
        return sum(replicas[u] for u in uids)

    return expected_scale


PDB_CASES = [
    # id, spec, pods, controller scale, (expected, desired, healthy, allowed)
    (
        "min-available-int",
        {"minAvailable": 2},
        [ready_pod("a"), ready_pod("b"), ready_pod("c")],
        3,
        (3, 2, 3, 1),
    ),
    (
        "min-available-int-violated",
        {"minAvailable": 3},
        [ready_pod("a"), ready_pod("b"), ready_pod("c")],
        3,
        (3, 3, 3, 0),
    ),
    (
        "min-available-percent-rounds-up",
        {"minAvailable": "50%"},
        [ready_pod("a"), ready_pod("b"), ready_pod("c")],
        3,
        (3, 2, 3, 1),
    ),
    (
        "max-unavailable-int",
        {"maxUnavailable": 1},
        [ready_pod("a"), ready_pod("b"), ready_pod("c")],
        3,
        (3, 2, 3, 1),
    ),
    (
        "max-unavailable-percent-rounds-up",
        {"maxUnavailable": "34%"},
        [ready_pod("a"), ready_pod("b"), ready_pod("c")],
        3,
        (3, 1, 3, 2),
    ),
    (
        "max-unavailable-counts-missing-pods",
        {"maxUnavailable": 1},
        [ready_pod("a"), ready_pod("b")],
        3,
        (3, 2, 2, 0),
    ),
    (
        "neither-min-nor-max-expects-none",
        {},
        [ready_pod("a"), ready_pod("b"), ready_pod("c")],
        3,
        (0, 0, 3, 0),
    ),
    (
        "unready-and-deleting-not-healthy",
        {"minAvailable": 1},
        [ready_pod("a", ready=False), ready_pod("b", deleting=True), ready_pod("c")],
        3,
        (3, 1, 1, 0),
    ),
    # Pods that have finished still match the selector: an integer minAvailable expects them (kube lists
    # every matching pod), though they are never healthy.
    (
        "min-available-int-expects-finished-pods",
        {"minAvailable": 1},
        [ready_pod("a"), finished("b"), finished("c", phase="Failed")],
        3,
        (3, 1, 1, 0),
    ),
    (
        "min-available-int-finished-pods-allow-none",
        {"minAvailable": 1},
        [ready_pod("a"), ready_pod("b"), finished("c")],
        3,
        (3, 1, 2, 1),
    ),
    # With maxUnavailable the controller's scale is what is expected, finished pods or not.
    (
        "max-unavailable-finished-pods-not-healthy",
        {"maxUnavailable": 1},
        [ready_pod("a"), ready_pod("b"), finished("c")],
        3,
        (3, 2, 2, 0),
    ),
]


@pytest.mark.parametrize(
    ("spec", "pods", "scale", "expected"), [c[1:] for c in PDB_CASES], ids=[c[0] for c in PDB_CASES]
)
def test_pdb_compute(
    spec: dict[str, Any], pods: list[dict[str, Any]], scale: int, expected: tuple[int, int, int, int]
) -> None:
    budget = disruption.compute({"spec": spec}, pods, lambda _p: scale, T0)
    assert (
        budget.expected_pods,
        budget.desired_healthy,
        budget.current_healthy,
        budget.disruptions_allowed,
    ) == expected


UnmanagedCase = tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, int], Any, tuple[str, ...]]

UNMANAGED_CASES: list[UnmanagedCase] = [
    # id, spec, pods, replicas of each controller, (expected, desired, healthy, allowed), unmanaged named
    # Pods with no controller add nothing to the scale a maxUnavailable or percentage budget is taken of,
    # but they are healthy pods all the same; over them alone the budget expects none and allows nothing.
    (
        "only-unmanaged-max-unavailable-zero",
        {"maxUnavailable": 0},
        [unmanaged("a"), unmanaged("b")],
        {},
        (0, 0, 2, 0),
        ("a", "b"),
    ),
    (
        "only-unmanaged-max-unavailable-int",
        {"maxUnavailable": 1},
        [unmanaged("a"), unmanaged("b")],
        {},
        (0, 0, 2, 0),
        ("a", "b"),
    ),
    (
        "only-unmanaged-max-unavailable-percent",
        {"maxUnavailable": "50%"},
        [unmanaged("a"), unmanaged("b")],
        {},
        (0, 0, 2, 0),
        ("a", "b"),
    ),
    (
        "only-unmanaged-min-available-percent",
        {"minAvailable": "50%"},
        [unmanaged("a"), unmanaged("b", ready=False)],
        {},
        (0, 0, 1, 0),
        ("a", "b"),
    ),
    # An integer minAvailable counts the matching pods themselves: no controller is looked up, none named.
    (
        "only-unmanaged-min-available-int",
        {"minAvailable": 1},
        [unmanaged("a"), unmanaged("b")],
        {},
        (2, 1, 2, 1),
        (),
    ),
    (
        "min-available-int-with-an-unknown-controller",
        {"minAvailable": 1},
        [ready_pod("a", owner="gone"), unmanaged("b")],
        {},
        (2, 1, 2, 1),
        (),
    ),
    # With a controller of 3 replicas and one stray pod: the scale is 3, the healthy pods are 4.
    (
        "mixed-max-unavailable-int",
        {"maxUnavailable": 1},
        [ready_pod("a"), ready_pod("b"), ready_pod("c"), unmanaged("stray")],
        {"rs": 3},
        (3, 2, 4, 2),
        ("stray",),
    ),
    (
        "mixed-max-unavailable-percent-rounds-up",
        {"maxUnavailable": "34%"},
        [ready_pod("a"), ready_pod("b"), ready_pod("c"), unmanaged("stray")],
        {"rs": 3},
        (3, 1, 4, 3),
        ("stray",),
    ),
    (
        "mixed-min-available-percent-rounds-up",
        {"minAvailable": "34%"},
        [ready_pod("a"), ready_pod("b"), ready_pod("c"), unmanaged("stray")],
        {"rs": 3},
        (3, 2, 4, 2),
        ("stray",),
    ),
    (
        "mixed-min-available-int",
        {"minAvailable": 3},
        [ready_pod("a"), ready_pod("b"), ready_pod("c"), unmanaged("stray")],
        {"rs": 3},
        (4, 3, 4, 1),
        (),
    ),
    (
        "mixed-two-controllers-and-an-unready-stray",
        {"maxUnavailable": 1},
        [ready_pod("a"), ready_pod("b", owner="other"), unmanaged("stray", ready=False)],
        {"rs": 1, "other": 2},
        (3, 2, 2, 0),
        ("stray",),
    ),
]


@pytest.mark.parametrize(
    ("spec", "pods", "replicas", "expected", "named"),
    [c[1:] for c in UNMANAGED_CASES],
    ids=[c[0] for c in UNMANAGED_CASES],
)
def test_pdb_compute_with_unmanaged_pods(
    spec: dict[str, Any],
    pods: list[dict[str, Any]],
    replicas: dict[str, int],
    expected: tuple[int, int, int, int],
    named: tuple[str, ...],
) -> None:
    budget = disruption.compute({"spec": spec}, pods, scale_of(replicas), T0)
    assert (
        budget.expected_pods,
        budget.desired_healthy,
        budget.current_healthy,
        budget.disruptions_allowed,
    ) == expected
    assert budget.unmanaged_pods == named
    status = disruption.status_of({"spec": spec}, budget, T0)
    (cond,) = status["conditions"]
    allowed = expected[3] > 0
    assert (cond["status"], cond["reason"]) == (
        ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
    )


SYNC_FAILED_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], str]] = [
    # id, spec, pods, the error: what kube still reports as SyncFailed next to unmanaged pods
    (
        "controller-not-found",
        {"maxUnavailable": 1},
        [unmanaged("a"), ready_pod("b", owner="gone")],
        'found no controllers for pod "b"',
    ),
    (
        "percent-without-a-percent-sign",
        {"maxUnavailable": "1"},
        [unmanaged("a")],
        "invalid value for IntOrString: invalid type: string is not a percentage",
    ),
    (
        "min-available-not-a-number",
        {"minAvailable": "most"},
        [unmanaged("a")],
        "invalid value for IntOrString: invalid value 'most'",
    ),
]


@pytest.mark.parametrize(
    ("spec", "pods", "message"),
    [c[1:] for c in SYNC_FAILED_CASES],
    ids=[c[0] for c in SYNC_FAILED_CASES],
)
def test_pdb_compute_still_fails_where_kube_does(
    spec: dict[str, Any], pods: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(disruption.ScaleError) as info:
        disruption.compute({"spec": spec}, pods, scale_of({}), T0)
    assert str(info.value) == message


LATER = T0 + 30


def cond(status: str, reason: str, message: str = "", at: float = T0, **extra: Any) -> dict[str, Any]:
    return {
        "type": "DisruptionAllowed",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": timestamps.rfc3339(at),
        **extra,
    }


PAUSED: dict[str, Any] = {
    "type": "Paused",
    "status": "True",
    "reason": "ByHand",
    "message": "",
    "lastTransitionTime": "2025-12-31T00:00:00Z",
}
COUNTS = {"currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}

FAIL_SAFE_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # id, the budget's status before a failed sync (its generation is 2), the status written after it
    # Never synced: it stays unobserved, so an eviction still hears "being processed"; the counts are zeros.
    (
        "never-synced",
        {},
        {
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
            "disruptionsAllowed": 0,
            "conditions": [cond("False", "SyncFailed", "boom", at=LATER)],
        },
    ),
    # Synced at generation 1 and allowing one: the counts and observedGeneration stay, the condition flips.
    (
        "was-allowing",
        {
            **COUNTS,
            "disruptionsAllowed": 1,
            "observedGeneration": 1,
            "disruptedPods": {"a": "2026-01-01T00:00:00Z"},
            "conditions": [PAUSED, cond("True", "SufficientPods", observedGeneration=1)],
        },
        {
            **COUNTS,
            "disruptionsAllowed": 0,
            "observedGeneration": 1,
            "disruptedPods": {"a": "2026-01-01T00:00:00Z"},
            "conditions": [PAUSED, cond("False", "SyncFailed", "boom", at=LATER, observedGeneration=1)],
        },
    ),
    # Already refusing: the status does not change, so neither does the time of the transition.
    (
        "was-insufficient",
        {
            **COUNTS,
            "disruptionsAllowed": 0,
            "observedGeneration": 2,
            "conditions": [cond("False", "InsufficientPods", observedGeneration=2)],
        },
        {
            **COUNTS,
            "disruptionsAllowed": 0,
            "observedGeneration": 2,
            "conditions": [cond("False", "SyncFailed", "boom", observedGeneration=2)],
        },
    ),
]


@pytest.mark.parametrize(
    ("before", "after"), [c[1:] for c in FAIL_SAFE_CASES], ids=[c[0] for c in FAIL_SAFE_CASES]
)
def test_failed_sync_keeps_the_status_and_sets_only_its_condition(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    pdb = {"metadata": {"name": "b", "generation": 2}, "status": before}
    written = disruption.sync_failed_status(pdb, "boom", LATER)
    assert written == after
    # Failing again later writes the same status: nothing for the API server to store.
    again = disruption.sync_failed_status({**pdb, "status": written}, "boom", LATER + 60)
    assert again == written


STATUS_CONDITION_CASES: list[tuple[str, list[dict[str, Any]], int, list[dict[str, Any]]]] = [
    # id, conditions before, disruptions allowed now, conditions written (generation 3)
    ("first", [], 1, [cond("True", "SufficientPods", at=LATER, observedGeneration=3)]),
    (
        "unchanged-keeps-time",
        [cond("True", "SufficientPods", observedGeneration=2)],
        2,
        [cond("True", "SufficientPods", observedGeneration=3)],
    ),
    (
        "recovered-from-failed-sync",
        [PAUSED, cond("False", "SyncFailed", "boom", observedGeneration=2)],
        0,
        [PAUSED, cond("False", "InsufficientPods", observedGeneration=3)],
    ),
    (
        "flips",
        [cond("False", "InsufficientPods", observedGeneration=3), PAUSED],
        1,
        [cond("True", "SufficientPods", at=LATER, observedGeneration=3), PAUSED],
    ),
]


@pytest.mark.parametrize(
    ("before", "allowed", "after"),
    [c[1:] for c in STATUS_CONDITION_CASES],
    ids=[c[0] for c in STATUS_CONDITION_CASES],
)
def test_synced_status_sets_its_condition_among_the_others(
    before: list[dict[str, Any]], allowed: int, after: list[dict[str, Any]]
) -> None:
    pdb = {"metadata": {"name": "b", "generation": 3}, "status": {"conditions": before}}
    budget = disruption.Budget(2, 2 - allowed, 2, allowed, {})
    status = disruption.status_of(pdb, budget, LATER)
    assert status["conditions"] == after
    assert status["observedGeneration"] == 3


def owned(name: str, kind: str, owner: str, uid: str | None = None, api: str = "apps/v1") -> dict[str, Any]:
    """A pod controlled by the `kind` named `owner` (its uid is its name unless `uid` says otherwise)."""
    ref = {"apiVersion": api, "kind": kind, "name": owner, "uid": uid or owner, "controller": True}
    return {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [ref]}}


def workload(name: str, replicas: int, uid: str | None = None, dep: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "uid": uid or name}
    if dep is not None:
        md["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": dep, "uid": dep, "controller": True}
        ]
    return {"metadata": md, "spec": {"replicas": replicas}}


ScaleCase = tuple[str, list[dict[str, Any]], dict[tuple[str, str], dict[str, Any]], int | str]

EXPECTED_SCALE_CASES: list[ScaleCase] = [
    # id, pods, the objects there are (resource, name), the expected scale or the sync's error
    (
        "replica-set-counted-once",
        [owned("a", "ReplicaSet", "rs"), owned("b", "ReplicaSet", "rs")],
        {("replicasets.apps", "rs"): workload("rs", 3)},
        3,
    ),
    (
        "two-replica-sets-of-one-deployment",
        [owned("a", "ReplicaSet", "old"), owned("b", "ReplicaSet", "new")],
        {
            ("replicasets.apps", "old"): workload("old", 1, dep="d"),
            ("replicasets.apps", "new"): workload("new", 4, dep="d"),
            ("deployments.apps", "d"): workload("d", 4),
        },
        4,
    ),
    # Its Deployment gone (or a namesake with another uid): the ReplicaSet's own replicas count.
    (
        "deployment-gone",
        [owned("a", "ReplicaSet", "rs")],
        {("replicasets.apps", "rs"): workload("rs", 2, dep="d")},
        2,
    ),
    (
        "deployment-namesake",
        [owned("a", "ReplicaSet", "rs")],
        {
            ("replicasets.apps", "rs"): workload("rs", 2, dep="d"),
            ("deployments.apps", "d"): workload("d", 5, uid="other"),
        },
        2,
    ),
    (
        "stateful-set-and-rc",
        [owned("a", "StatefulSet", "sts"), owned("b", "ReplicationController", "rc", api="v1")],
        {
            ("statefulsets.apps", "sts"): workload("sts", 2),
            ("replicationcontrollers", "rc"): workload("rc", 1),
        },
        3,
    ),
    (
        "replica-set-namesake",
        [owned("a", "ReplicaSet", "rs")],
        {("replicasets.apps", "rs"): workload("rs", 3, uid="recreated")},
        'found no controllers for pod "a"',
    ),
    ("replica-set-gone", [owned("a", "ReplicaSet", "rs")], {}, 'found no controllers for pod "a"'),
    # Owners with no scale subresource fail the sync whether or not they exist.
    (
        "daemon-set",
        [owned("a", "DaemonSet", "ds")],
        {("daemonsets.apps", "ds"): workload("ds", 0)},
        "daemonsets.apps does not implement the scale subresource",
    ),
    (
        "job",
        [owned("a", "Job", "j", api="batch/v1")],
        {},
        "jobs.batch does not implement the scale subresource",
    ),
    (
        "cron-job",
        [owned("a", "CronJob", "cj", api="batch/v1")],
        {},
        "cronjobs.batch does not implement the scale subresource",
    ),
]


@pytest.mark.parametrize(
    ("pods", "objects", "expected"),
    [c[1:] for c in EXPECTED_SCALE_CASES],
    ids=[c[0] for c in EXPECTED_SCALE_CASES],
)
def test_expected_scale_finds_controllers_as_kube_does(
    pods: list[dict[str, Any]], objects: dict[tuple[str, str], dict[str, Any]], expected: int | str
) -> None:
    def get(resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        assert namespace == "ns"
        return objects.get((resource, name))

    if isinstance(expected, str):
        with pytest.raises(disruption.ScaleError) as info:
            disruption.expected_scale(pods, get)
        assert str(info.value) == expected
    else:
        assert disruption.expected_scale(pods, get) == expected


SELECTOR_TEXT_CASES: list[tuple[str, dict[str, Any] | None, str]] = [
    ("nil", None, "nil"),
    (
        "empty",
        {},
        "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}",
    ),
    (
        "labels-sorted",
        {"matchLabels": {"tier": "web", "app": "fid"}},
        "&LabelSelector{MatchLabels:map[string]string{app: fid,tier: web,},"
        "MatchExpressions:[]LabelSelectorRequirement{},}",
    ),
    (
        "expressions",
        {
            "matchExpressions": [
                {"key": "app", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ]
        },
        "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{"
        "LabelSelectorRequirement{Key:app,Operator:In,Values:[a b],},"
        "LabelSelectorRequirement{Key:canary,Operator:DoesNotExist,Values:[],},},}",
    ),
]


@pytest.mark.parametrize(
    ("selector", "text"), [c[1:] for c in SELECTOR_TEXT_CASES], ids=[c[0] for c in SELECTOR_TEXT_CASES]
)
def test_selector_as_go_prints_it(selector: dict[str, Any] | None, text: str) -> None:
    assert disruption.go_label_selector(selector) == text
    assert f"(selector: {text}) were found to be unmanaged." in disruption.unmanaged_pods_message(selector)


def test_pdb_disrupted_pods_count_until_they_expire() -> None:
    pdb = {"spec": {"minAvailable": 1}, "status": {"disruptedPods": {"a": timestamps.rfc3339(T0)}}}
    pods = [ready_pod("a"), ready_pod("b")]
    assert disruption.compute(pdb, pods, lambda _p: 2, T0 + 10).current_healthy == 1
    assert disruption.compute(pdb, pods, lambda _p: 2, T0 + 200).current_healthy == 2


SCALE_CASES = [
    ("int", 3, 10, True, 3),
    ("percent-up", "25%", 10, True, 3),
    ("percent-down", "25%", 10, False, 2),
    ("zero", "0%", 7, True, 0),
]


@pytest.mark.parametrize(
    ("raw", "total", "up", "expected"), [c[1:] for c in SCALE_CASES], ids=[c[0] for c in SCALE_CASES]
)
def test_scaled_value(raw: Any, total: int, up: bool, expected: int) -> None:
    assert disruption.scaled_value(raw, total, up) == expected


def test_eviction_verdicts() -> None:
    pdb: dict[str, Any] = {
        "metadata": {"name": "b", "generation": 1},
        "status": {
            "observedGeneration": 1,
            "disruptionsAllowed": 0,
            "desiredHealthy": 2,
            "currentHealthy": 2,
        },
    }
    with pytest.raises(ApiError) as info:
        disruption.eviction_verdict(pdb, ready_pod("a"))
    assert info.value.code == 429
    assert info.value.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert (
        info.value.causes[0]["message"] == "The disruption budget b needs 2 healthy pods and has 2 currently"
    )
    # An unready pod may go while the budget is healthy (IfHealthyBudget).
    assert disruption.eviction_verdict(pdb, ready_pod("a", ready=False)) == disruption.Verdict(True, False)
    stale = {**pdb, "metadata": {"name": "b", "generation": 2}}
    with pytest.raises(ApiError, match="disruption budget"):
        disruption.eviction_verdict(stale, ready_pod("a"))
    allowed: dict[str, Any] = {**pdb, "status": {**pdb["status"], "disruptionsAllowed": 1}}
    assert disruption.eviction_verdict(allowed, ready_pod("a")) == disruption.Verdict(True, True)
    consumed = disruption.consume(allowed, "a", T0)
    assert consumed["status"]["disruptionsAllowed"] == 0
    assert consumed["status"]["disruptedPods"] == {"a": "2026-01-01T00:00:00Z"}
    assert allowed["status"]["disruptionsAllowed"] == 1  # the input is not changed


CONSUME_CASES: list[tuple[str, int, list[dict[str, Any]], list[dict[str, Any]]]] = [
    # id, disruptions allowed before the eviction, conditions before, conditions after (at LATER)
    (
        "the-last-one-turns-the-condition",
        1,
        [PAUSED, cond("True", "SufficientPods", observedGeneration=1)],
        [PAUSED, cond("False", "InsufficientPods", at=LATER, observedGeneration=1)],
    ),
    (
        "the-last-one-without-a-condition",
        1,
        [],
        [cond("False", "InsufficientPods", at=LATER, observedGeneration=1)],
    ),
    (
        "one-left-keeps-it",
        2,
        [cond("True", "SufficientPods", observedGeneration=1)],
        [cond("True", "SufficientPods", observedGeneration=1)],
    ),
]


@pytest.mark.parametrize(
    ("allowed", "before", "after"), [c[1:] for c in CONSUME_CASES], ids=[c[0] for c in CONSUME_CASES]
)
def test_eviction_taking_the_last_disruption_sets_the_condition(
    allowed: int, before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> None:
    pdb = {
        "metadata": {"name": "b", "generation": 1},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "conditions": before},
    }
    consumed = disruption.consume(pdb, "a", LATER)
    assert consumed["status"]["disruptionsAllowed"] == allowed - 1
    assert consumed["status"]["conditions"] == after
    assert pdb["status"]["conditions"] == before  # the input is not changed


def refusing(current: int, desired: int, cond: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": 1,
        "disruptionsAllowed": 0,
        "currentHealthy": current,
        "desiredHealthy": desired,
    }
    if cond is not None:
        status["conditions"] = [{"type": "DisruptionAllowed", "status": "False", **cond}]
    return {"metadata": {"name": "b", "generation": 1}, "status": status}


REFUSAL_CASES = [
    # id, budget allowing no disruption, the 429's DisruptionBudget cause
    (
        "failed-sync-first",
        refusing(0, 0, {"reason": "SyncFailed", "message": 'found no controllers for pod "a"'}),
        "The disruption budget b does not allow evicting pods currently because it failed sync: "
        'found no controllers for pod "a"',
    ),
    (
        "too-few-healthy",
        refusing(2, 2, {"reason": "InsufficientPods", "message": ""}),
        "The disruption budget b needs 2 healthy pods and has 2 currently",
    ),
    # Over pods without a controller: more healthy than desired, yet none expected, so none allowed.
    (
        "healthy-enough-no-message",
        refusing(2, 0, {"reason": "InsufficientPods", "message": ""}),
        "The disruption budget b does not allow evicting pods currently",
    ),
    (
        "healthy-enough-condition-says-why",
        refusing(3, 1, {"reason": "Paused", "message": "by hand"}),
        "The disruption budget b does not allow evicting pods currently (Paused): by hand",
    ),
    (
        "healthy-enough-no-condition",
        refusing(3, 1),
        "The disruption budget b does not allow evicting pods currently",
    ),
]


@pytest.mark.parametrize(("pdb", "cause"), [c[1:] for c in REFUSAL_CASES], ids=[c[0] for c in REFUSAL_CASES])
def test_eviction_refusal_says_why(pdb: dict[str, Any], cause: str) -> None:
    with pytest.raises(ApiError) as info:
        disruption.eviction_verdict(pdb, ready_pod("a"))
    assert info.value.code == 429
    assert info.value.causes == [{"reason": "DisruptionBudget", "message": cause}]


def test_eviction_checks_in_kube_order() -> None:
    # The unhealthy-pod policy comes before the budget's generation is checked.
    stale = {**refusing(2, 1), "metadata": {"name": "b", "generation": 2}}
    always = {**stale, "spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    assert disruption.eviction_verdict(always, ready_pod("a", ready=False)) == disruption.Verdict(True, False)
    assert disruption.eviction_verdict(stale, ready_pod("a", ready=False)) == disruption.Verdict(True, False)
    # Too many unconfirmed evictions is refused (403) before a budget allowing none (429).
    crowded = refusing(1, 1)
    crowded["status"]["disruptedPods"] = {f"p{i}": "2026-01-01T00:00:00Z" for i in range(2001)}
    with pytest.raises(ApiError) as info:
        disruption.eviction_verdict(crowded, ready_pod("a"))
    assert info.value.code == 403


FORBIDDEN_CASES: list[tuple[str, dict[str, Any], str]] = [
    # id, the budget's status, the 403's message
    (
        "negative",
        {"observedGeneration": 1, "disruptionsAllowed": -1},
        'poddisruptionbudget.policy "b" is forbidden: pdb disruptions allowed is negative',
    ),
    (
        "too-many-unconfirmed",
        {
            "observedGeneration": 1,
            "disruptionsAllowed": 1,
            "disruptedPods": {f"p{i}": "2026-01-01T00:00:00Z" for i in range(2001)},
        },
        'poddisruptionbudget.policy "b" is forbidden: DisruptedPods map too big - too many evictions not '
        "confirmed by PDB controller",
    ),
]


@pytest.mark.parametrize(
    ("status", "message"), [c[1:] for c in FORBIDDEN_CASES], ids=[c[0] for c in FORBIDDEN_CASES]
)
def test_eviction_forbidden_names_the_budget(status: dict[str, Any], message: str) -> None:
    pdb = {"metadata": {"name": "b", "generation": 1}, "status": status}
    with pytest.raises(ApiError) as info:
        disruption.eviction_verdict(pdb, ready_pod("a"))
    assert (info.value.code, info.value.reason, info.value.message) == (403, "Forbidden", message)
    details = info.value.status()["details"]
    assert (details["group"], details["kind"], details["name"]) == ("policy", "poddisruptionbudget", "b")


# --- patches --------------------------------------------------------------------------------------

POD: dict[str, Any] = {
    "spec": {
        "containers": [
            {"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "image": "y"},
        ]
    }
}

PATCH_CASES: list[tuple[str, Any, str, Any]] = [
    (
        "strategic-by-name",
        {"spec": {"containers": [{"name": "b", "resources": {"requests": {"cpu": "2"}}}]}},
        patching.STRATEGIC_MERGE_PATCH,
        lambda p: (
            p["spec"]["containers"][1]["resources"]["requests"]["cpu"] == "2"
            and p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
        ),
    ),
    (
        "strategic-null-deletes",
        {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": None}}}]}},
        patching.STRATEGIC_MERGE_PATCH,
        lambda p: p["spec"]["containers"][0]["resources"]["requests"] == {},
    ),
    (
        "merge-replaces-lists",
        {"spec": {"containers": [{"name": "b"}]}},
        patching.MERGE_PATCH,
        lambda p: p["spec"]["containers"] == [{"name": "b"}],
    ),
    (
        "json-patch",
        [
            {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "3"},
            {"op": "add", "path": "/spec/containers/1/resources", "value": {"limits": {"cpu": "1"}}},
        ],
        patching.JSON_PATCH,
        lambda p: (
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "3"
            and p["spec"]["containers"][1]["resources"] == {"limits": {"cpu": "1"}}
        ),
    ),
]


@pytest.mark.parametrize(
    ("body", "ctype", "check"), [c[1:] for c in PATCH_CASES], ids=[c[0] for c in PATCH_CASES]
)
def test_patches(body: Any, ctype: str, check: Any) -> None:
    out = patching.apply_patch(POD, body, ctype)
    assert check(out)
    assert POD["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"  # input untouched


def test_json_patch_missing_path_is_422() -> None:
    with pytest.raises(ApiError) as info:
        patching.apply_patch(
            POD, [{"op": "replace", "path": "/spec/nope/x", "value": 1}], patching.JSON_PATCH
        )
    assert info.value.code == 422


def test_trace_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "timestamp": [0, 300, 600],
            "container": ["k", "k", "k"],
            "cpu_cores": [0.1, None, 0.3],
            "memory_bytes": [1000, 2000, 3000],
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, str(path))
    usage = profiles.UsageProfile.from_json(
        {"trace": {"path": "t.parquet", "key": "k"}}, "x", profiles.TraceCache(tmp_path)
    )
    assert usage.cpu is not None
    assert usage.memory is not None
    assert usage.memory.value(T0 + 450, T0, T0) == 2000.0
    # The CPU series skips the empty cell: 100m until the 600 s sample.
    assert usage.cpu.value(T0 + 450, T0, T0) == pytest.approx(100.0)
    assert usage.cpu.value(T0 + 600, T0, T0) == pytest.approx(300.0)


def test_trace_key_picked_per_pod(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    rows = "".join(f"0,vm-{i},{i},{i * 100}\n" for i in range(8))
    trace.write_text("timestamp,container,cpu_cores,memory_bytes\n" + rows)
    text = json.dumps({"app": {"trace": {"path": str(trace), "key": "*"}}})
    picks = set()
    for pod in (f"default/web-{i}" for i in range(20)):
        first = profiles.parse_annotation(text, pod=pod)["app"].cpu
        again = profiles.parse_annotation(text, pod=pod)["app"].cpu
        assert first is not None
        assert again is not None
        assert first.value(T0, T0, T0) == again.value(T0, T0, T0)  # stable per pod
        picks.add(first.value(T0, T0, T0))
    assert len(picks) > 3  # different pods replay different keys
    listed = json.dumps({"app": {"cpu": {"type": "trace", "path": str(trace), "keys": ["vm-2"]}}})
    cpu = profiles.parse_annotation(listed, pod="default/x")["app"].cpu
    assert cpu is not None
    assert cpu.value(T0, T0, T0) == 2000.0
