"""The updater's decisions in an evaluation (`vpa.replay.applying`): upstream's Recreate rules decide
which recommendation is applied; an applied one sets both resources and restarts the pod's age."""

from __future__ import annotations

import pytest

from vpa.model.resources import Resources
from vpa.model.vpa import RecommendedContainerResources
from vpa.replay.applying import AppliedRequests

T0 = 1_767_225_600.0
H = 3600.0
MIB = 2**20


def rec(cpu: int, memory: int, lower: tuple[int, int] | None = None,
        upper: tuple[int, int] | None = None) -> RecommendedContainerResources:
    """A recommendation whose bounds are the target ±50% unless given."""
    target = Resources(cpu, memory)
    low = Resources(*lower) if lower else Resources(cpu // 2, memory // 2)
    high = Resources(*upper) if upper else Resources(cpu * 3 // 2, memory * 3 // 2)
    return RecommendedContainerResources("a", target, low, high, target)


def started(cpu: int = 1000, memory: int = 1000 * MIB) -> AppliedRequests:
    applied = AppliedRequests()
    assert applied.recommend("a", T0, rec(cpu, memory)) == Resources(cpu, memory)  # the first application
    return applied


@pytest.mark.parametrize(("after_s", "item", "expected"), [
    # inside the bounds, pod younger than 12 h: not applied, however large the change
    (1 * H, rec(1000, 1300 * MIB, lower=(500, 800 * MIB)), None),
    # inside the bounds, older than 12 h, a change of 30%: applied, both resources
    (13 * H, rec(1100, 1300 * MIB, lower=(500, 800 * MIB)), Resources(1100, 1300 * MIB)),
    # older than 12 h but the change is under 10% (4% + 5%): not applied
    (13 * H, rec(1040, 1050 * MIB, lower=(500, 800 * MIB)), None),
    # the memory request below the lower bound, young pod: applied, CPU follows the target too
    (1 * H, rec(1010, 1300 * MIB, lower=(500, 1100 * MIB)), Resources(1010, 1300 * MIB)),
    # the CPU request above the upper bound: applied
    (1 * H, rec(400, 1000 * MIB, upper=(600, 2000 * MIB)), Resources(400, 1000 * MIB)),
    # no change at all, even when old: nothing
    (13 * H, rec(1000, 1000 * MIB), None),
])
def test_the_updater_rules(after_s: float, item: RecommendedContainerResources,
                           expected: Resources | None) -> None:
    applied = started()
    assert applied.recommend("a", T0 + after_s, item) == expected
    assert applied.requests("a") == (expected or Resources(1000, 1000 * MIB))


def test_an_applied_update_restarts_the_pod_age() -> None:
    applied = started()
    assert applied.recommend("a", T0 + 13 * H, rec(1000, 1300 * MIB)) is not None
    # 14 h after the first start but only 1 h after the update: the 12-hour rule does not apply
    assert applied.recommend("a", T0 + 14 * H, rec(1000, 1000 * MIB)) is None
    assert applied.recommend("a", T0 + 26 * H, rec(1000, 1000 * MIB)) == Resources(1000, 1000 * MIB)


@pytest.mark.parametrize(("oom_after_s", "decided_after_s", "expected"), [
    # OOM-killed 5 min after starting, decided 5 min later: the fast path, any change
    (5 * 60.0, 10 * 60.0, Resources(1000, 1020 * MIB)),
    # the same kill, decided 55 min later: the kill is older than 10 min (upstream 1.8.1), nothing
    (5 * 60.0, H, None),
    # 20 min after starting: a young pod, a 2% change, nothing
    (20 * 60.0, 25 * 60.0, None),
])
def test_quick_oom_fast_path(oom_after_s: float, decided_after_s: float, expected: Resources | None) -> None:
    applied = started()
    applied.oom("a", T0 + oom_after_s)
    assert applied.recommend("a", T0 + decided_after_s, rec(1000, 1020 * MIB)) == expected


def test_the_quick_oom_counts_from_the_container_restart() -> None:
    applied = started()
    applied.oom("a", T0 + 30 * 60)  # not quick: 30 min after the pod started
    applied.oom("a", T0 + 35 * 60)  # quick: 5 min after the restart the first kill caused
    assert applied.recommend("a", T0 + 40 * 60, rec(1000, 1020 * MIB)) == Resources(1000, 1020 * MIB)


def test_no_target_applies_nothing() -> None:
    applied = AppliedRequests()
    empty = RecommendedContainerResources("a", Resources(), Resources(), Resources(), Resources())
    assert applied.recommend("a", T0, empty) is None
    assert applied.requests("a") is None
