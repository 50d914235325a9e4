"""Update priority (spec §4.4–4.5): diff, bounds, quick OOM, triggers, eviction requirements, order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.logic.updater.test_support import DAY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.priority import (
    ContainerTarget,
    PodPriority,
    Trigger,
    compute_priority,
    considered_containers,
    evaluate,
    eviction_requirements_met,
    is_quick_oom,
    observed_names,
    oom_threshold_s,
    recommendations_by_name,
    sort_key,
)
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import RecommendedContainerResources, VpaView

SETTINGS = UpdaterSettings()


def _targets(p: PodView, v: VpaView) -> list[ContainerTarget]:
    assert v.recommendation is not None
    return considered_containers(p, v, recommendations_by_name(v.recommendation), observed_names(p, {}))


def _priority(p: PodView, v: VpaView) -> PodPriority:
    return compute_priority(_targets(p, v))


@pytest.mark.parametrize(
    ("containers", "recs", "expected"),
    [
        # cpu 500m → 530m (6%) and memory 1000Mi → 1060Mi (6%): the per-resource ratios add up to 0.12
        ([ctr(cpu="500m", mem="1000Mi")], [rec(cpu="530m", mem="1060Mi")], (True, False, 0.12)),
        # sums over containers first: 200m+300m → 250m+250m is no diff at all for cpu
        (
            [ctr("a", cpu="200m", mem="1Gi"), ctr("b", cpu="300m", mem="1Gi")],
            [rec("a", cpu="250m", mem="1Gi"), rec("b", cpu="250m", mem="1Gi")],
            (True, False, 0.0),
        ),
        # scaling down: no scale-up, diff 0.5
        ([ctr(cpu="1", mem="1Gi")], [rec(cpu="500m", mem="1Gi")], (False, False, 0.5)),
        # a missing request counts as zero (ΣRequest floored at 1 milli) and is scale-up + outside
        ([ctr(cpu=None, mem="1Gi")], [rec(cpu="100m", mem="1Gi")], (True, True, 99.0)),
        # below the lower bound
        (
            [ctr(cpu="100m", mem="1Gi")],
            [rec(cpu="100m", mem="1Gi", lower=("200m", "1Mi"))],
            (False, True, 0.0),
        ),
        # above the upper bound
        (
            [ctr(cpu="100m", mem="1Gi")],
            [rec(cpu="100m", mem="1Gi", upper=("100", "512Mi"))],
            (False, True, 0.0),
        ),
    ],
    ids=[
        "cpu6%+mem6%=0.12",
        "sum-over-containers",
        "scale-down",
        "missing-request",
        "below-lower",
        "above-upper",
    ],
)
def test_priority_table(containers: list, recs: list, expected: tuple[bool, bool, float]) -> None:  # type: ignore[type-arg]
    got = _priority(pod(containers=containers), vpa(recs=recs))
    assert (got.scale_up, got.outside_range) == expected[:2]
    assert got.resource_diff == pytest.approx(expected[2])


def test_actual_resources_win_over_spec() -> None:
    # spec says 500m but the kubelet reports 250m actually configured: the diff is against 250m
    p = pod(
        containers=[ctr(cpu="500m", mem="1Gi")],
        actual={"app": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
    )
    assert _priority(p, vpa(recs=[rec(cpu="500m", mem="1Gi")])).resource_diff == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("observed", "expected_names"),
    [(None, ["app", "sidecar"]), ("app", ["app"]), ("NOT A LABEL!", ["app", "sidecar"]), ("", [])],
    ids=["absent→all", "listed-only", "unparseable→all", "empty→none"],
)
def test_observed_containers(observed: str | None, expected_names: list[str]) -> None:
    p = pod(containers=[ctr("app"), ctr("sidecar")], observed=observed)
    v = vpa(recs=[rec("app"), rec("sidecar")])
    assert [t.name for t in _targets(p, v)] == expected_names


def test_policy_off_and_controlled_resources() -> None:
    p = pod(containers=[ctr("app", cpu="100m", mem="100Mi"), ctr("off", cpu="100m", mem="100Mi")])
    v = vpa(
        recs=[rec("app", cpu="200m", mem="400Mi"), rec("off", cpu="900m", mem="900Mi")],
        policies=[
            {"containerName": "off", "mode": "Off"},
            {"containerName": "app", "controlledResources": ["cpu"]},
        ],
    )
    # only app's cpu counts: 100m → 200m
    assert _priority(p, v).resource_diff == pytest.approx(1.0)


def test_requests_only_caps_target_at_limit() -> None:
    p = pod(containers=[ctr(cpu="100m", mem="100Mi", cpu_limit="200m", mem_limit="1Gi")])
    v = vpa(
        recs=[rec(cpu="500m", mem="100Mi")],
        policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}],
    )
    (target,) = _targets(p, v)
    assert target.recommendation.target.cpu_millicores == 200
    assert _priority(p, v).resource_diff == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("age_s", "ran_s", "per_vpa", "gate", "expected"),
    [
        (600.0, 599.0, None, False, True),  # under the 10 min flag, killed 1 s ago
        (600.0, 600.0, None, False, False),  # strictly less than
        (120.0, 100.0, 60, True, False),  # per-VPA 60 s with PerVPAConfig
        (120.0, 100.0, 60, False, True),  # per-VPA value ignored without the gate
        # upstream 1.8.1: the kill must also be recent; started 11 min ago, killed after 30 s: 10.5 min ago
        (660.0, 30.0, None, False, False),
        (629.0, 30.0, None, False, True),  # killed 599 s ago
        (630.0, 30.0, None, False, False),  # killed exactly 600 s ago: strictly less than
        (DAY, 5.0, None, False, False),  # a quick OOM of yesterday
        (90.0, 10.0, 60, True, False),  # ran 10 s, killed 80 s ago > the VPA's 60 s
        (60.0, 10.0, 60, True, True),  # killed 50 s ago
    ],
    ids=[
        "under-flag",
        "at-flag",
        "per-vpa",
        "per-vpa-gate-off",
        "old-oom",
        "recent-oom",
        "oom-at-threshold-age",
        "yesterday",
        "per-vpa-oom-too-old",
        "per-vpa-recent",
    ],
)
def test_quick_oom(age_s: float, ran_s: float, per_vpa: int | None, gate: bool, expected: bool) -> None:
    p = pod(age_s=age_s, oom=("app", ran_s))
    v = vpa(evict_after_oom_s=per_vpa)
    assert is_quick_oom(p, v, oom_threshold_s(v, SETTINGS, gate), None, NOW) is expected


def test_quick_oom_ignores_unobserved_and_off_containers() -> None:
    two = [ctr("app"), ctr("side")]
    p = pod(containers=two, age_s=60.0, oom=("side", 5.0), observed="app")
    assert not is_quick_oom(p, vpa(), 600.0, frozenset({"app"}), NOW)
    v = vpa(policies=[{"containerName": "side", "mode": "Off"}])
    assert not is_quick_oom(pod(containers=two, age_s=60.0, oom=("side", 5.0)), v, 600.0, None, NOW)
    assert is_quick_oom(pod(containers=two, age_s=60.0, oom=("side", 5.0)), vpa(), 600.0, None, NOW)


@pytest.mark.parametrize(
    ("priority", "quick", "age_s", "expected"),
    [
        (PodPriority(False, True, 0.0), False, 60.0, (Trigger.OUTSIDE_RANGE, Trigger.OUTSIDE_RANGE)),
        (PodPriority(True, False, 0.05), True, 60.0, (Trigger.QUICK_OOM, Trigger.QUICK_OOM)),
        (
            PodPriority(False, False, 0.0),
            True,
            60.0,
            (Trigger.QUICK_OOM_NO_CHANGE, Trigger.QUICK_OOM_NO_CHANGE),
        ),
        (
            PodPriority(True, False, 0.2),
            False,
            13 * 3600.0,
            (Trigger.SIGNIFICANT_CHANGE, Trigger.SIGNIFICANT_CHANGE),
        ),
        # young pod: Recreate waits for 12 h, a disruption-free update does not (AEP-4016)
        (
            PodPriority(True, False, 0.2),
            False,
            11 * 3600.0,
            (Trigger.NOT_LONG_LIVED, Trigger.SIGNIFICANT_CHANGE),
        ),
        (PodPriority(True, False, 0.09), False, DAY, (Trigger.BELOW_THRESHOLD, Trigger.BELOW_THRESHOLD)),
        (PodPriority(True, False, 0.1), False, DAY, (Trigger.SIGNIFICANT_CHANGE, Trigger.SIGNIFICANT_CHANGE)),
        (PodPriority(False, False, 0.0), False, DAY, (Trigger.NO_CHANGE, Trigger.NO_CHANGE)),
    ],
    ids=[
        "outside",
        "quick-oom",
        "quick-oom-no-diff",
        "long-lived",
        "young",
        "below-0.1",
        "at-0.1",
        "nothing",
    ],
)
def test_triggers(
    priority: PodPriority, quick: bool, age_s: float, expected: tuple[Trigger, Trigger]
) -> None:
    got = evaluate(priority, quick, pod(age_s=age_s), NOW, SETTINGS)
    assert (got.recreate, got.disruption_free) == expected


def test_disruptive_resize_restarts_the_12h_clock() -> None:
    old = pod(age_s=DAY)
    prio = PodPriority(True, False, 0.5)
    assert evaluate(prio, False, old, NOW, SETTINGS).recreate is Trigger.SIGNIFICANT_CHANGE
    assert (
        evaluate(prio, False, old, NOW, SETTINGS, disrupted_at=NOW - 3600).recreate is Trigger.NOT_LONG_LIVED
    )


def test_no_start_time_blocks_only_in_range_recreate() -> None:
    p = pod()
    from dataclasses import replace

    p = replace(p, start_time=None)
    got = evaluate(PodPriority(True, False, 0.5), False, p, NOW, SETTINGS)
    assert got.recreate is Trigger.NO_START_TIME
    assert got.disruption_free is Trigger.SIGNIFICANT_CHANGE


HIGHER_CPU = {"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}
LOWER_MEM = {"resources": ["memory"], "changeRequirement": "TargetLowerThanRequests"}
HIGHER_ANY = {"resources": ["cpu", "memory"], "changeRequirement": "TargetHigherThanRequests"}


@pytest.mark.parametrize(
    ("requirements", "target", "expected"),
    [
        ([], ("100m", "100Mi"), True),
        ([HIGHER_CPU], ("300m", "100Mi"), True),
        ([HIGHER_CPU], ("100m", "900Mi"), False),
        ([HIGHER_CPU, LOWER_MEM], ("300m", "100Mi"), True),  # all requirements must hold ...
        ([HIGHER_CPU, LOWER_MEM], ("300m", "300Mi"), False),  # ... memory is not lower
        ([HIGHER_ANY], ("100m", "300Mi"), True),  # any listed resource suffices
    ],
    ids=["none", "cpu-up", "cpu-not-up", "all-hold", "one-fails", "any-resource"],
)
def test_eviction_requirements(requirements: list, target: tuple[str, str], expected: bool) -> None:  # type: ignore[type-arg]
    p = pod(containers=[ctr(cpu="200m", mem="200Mi")])
    v = vpa(recs=[rec(cpu=target[0], mem=target[1])], eviction_requirements=requirements)
    assert eviction_requirements_met(v, _targets(p, v), p) is expected


def test_eviction_requirements_container_without_request_is_admitted() -> None:
    p = pod(containers=[ctr(cpu=None, mem="200Mi")])
    v = vpa(recs=[rec(cpu="100m", mem="100Mi")], eviction_requirements=[HIGHER_CPU])
    assert eviction_requirements_met(v, _targets(p, v), p)


def test_order_scale_up_first_then_larger_diff_then_name() -> None:
    entries = [
        ("d", PodPriority(False, True, 5.0)),
        ("c", PodPriority(True, False, 0.2)),
        ("b", PodPriority(True, False, 0.9)),
        ("a", PodPriority(True, False, 0.2)),
    ]
    pods = {name: pod(f"web-{name}") for name, _ in entries}
    ordered = sorted(entries, key=lambda e: sort_key(pods[e[0]], e[1]))
    assert [name for name, _ in ordered] == ["b", "a", "c", "d"]


maybe = st.one_of(st.none(), st.integers(0, 10**7))
resources = st.builds(Resources, maybe, maybe)
container_targets = st.lists(
    st.tuples(
        resources,
        resources,
        resources,
        resources,
        st.sampled_from([("cpu",), ("memory",), ("cpu", "memory")]),
    ),
    min_size=1,
    max_size=3,
)


@given(container_targets)
def test_fast_priority_equals_the_generic_one(entries: list[tuple[Any, ...]]) -> None:
    targets = [
        ContainerTarget(
            i, f"c{i}", controlled, "cpu" in controlled, "memory" in controlled, False,
            RecommendedContainerResources(f"c{i}", target, lower, upper), requests, Resources(),
        )
        for i, (requests, target, lower, upper, controlled) in enumerate(entries)
    ]  # fmt: skip
    everything = {(t.name, r) for t in targets for r in t.controlled}
    fast, generic = compute_priority(targets), compute_priority(targets, everything)
    assert (fast.scale_up, fast.outside_range) == (generic.scale_up, generic.outside_range)
    assert fast.resource_diff == pytest.approx(generic.resource_diff, rel=1e-12)
