"""`worth_writing`: with no tolerance every change is written (upstream); with one, a status whose only
changes are bounds within that fraction of the object's is not, and everything else is always written."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vpa.logic.recommender.statuswrites import worth_writing
from vpa.model.resources import Resources
from vpa.model.vpa import Condition, Recommendation, RecommendedContainerResources, VpaStatus

MIB = 1024 * 1024
PROVIDED = Condition("RecommendationProvided", "True", 1_700_000_000.0)


TARGET, LOWER, UPPER = Resources(250, 256 * MIB), Resources(100, 128 * MIB), Resources(1000, 1024 * MIB)


def _container(name: str = "app", *, target: Resources = TARGET, lower: Resources = LOWER,
               upper: Resources = UPPER, uncapped: Resources | None = None) -> RecommendedContainerResources:
    return RecommendedContainerResources(name, target, lower, upper, target if uncapped is None else uncapped)


def _status(*containers: RecommendedContainerResources, conditions: tuple[Condition, ...] = (PROVIDED,),
            generation: int | None = 3) -> VpaStatus:
    return VpaStatus(Recommendation(containers or (_container(),)), conditions, generation)


OLD = _status()
CASES = [
    # (what, new status, tolerance, written)
    ("the same status, no tolerance", OLD, 0.0, False),
    ("the same status, a tolerance", OLD, 0.01, False),
    ("an upper bound 0.5% higher, no tolerance: written as upstream does",
     _status(_container(upper=Resources(1005, 1024 * MIB))), 0.0, True),
    ("an upper bound 0.5% higher, 1%", _status(_container(upper=Resources(1005, 1024 * MIB))), 0.01, False),
    ("an upper bound exactly 1% higher, 1%", _status(_container(upper=Resources(1010, 1024 * MIB))), 0.01,
     False),
    ("an upper bound 1.1% higher, 1%", _status(_container(upper=Resources(1011, 1024 * MIB))), 0.01, True),
    ("a lower bound's memory 2% lower, 1%", _status(_container(lower=Resources(100, int(128 * MIB * 0.98)))),
     0.01, True),
    ("a lower bound's memory 0.9% lower, 1%",
     _status(_container(lower=Resources(100, int(128 * MIB * 0.991)))), 0.01, False),
    ("both bounds within 1%, 1%",
     _status(_container(lower=Resources(101, 128 * MIB - 4096), upper=Resources(995, 1024 * MIB + 65536))),
     0.01, False),
    ("a target 1 millicore higher, a large tolerance", _status(_container(target=Resources(251, 256 * MIB))),
     0.5, True),
    ("an uncapped target changed, a large tolerance",
     _status(_container(uncapped=Resources(300, 256 * MIB))), 0.5, True),
    ("a bound gains memory it did not have", _status(_container(upper=Resources(1000, None))), 0.5, True),
    ("a condition changed", _status(conditions=(replace(PROVIDED, status="False"),)), 0.5, True),
    ("the observed generation changed", _status(generation=4), 0.5, True),
    ("a container added", _status(_container(), _container("sidecar")), 0.5, True),
    ("a container renamed", _status(_container("other")), 0.5, True),
    ("the recommendation removed", VpaStatus(None, (PROVIDED,), 3), 0.5, True),
    ("a lower bound halved and a bit, 50%", _status(_container(lower=Resources(49, 128 * MIB))), 0.5, True),
]


@pytest.mark.parametrize(("new", "tolerance", "written"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_a_status_is_written_unless_only_its_bounds_moved_within_the_tolerance(
        new: VpaStatus, tolerance: float, written: bool) -> None:
    assert worth_writing(OLD, new, tolerance) is written


def test_a_bound_that_was_zero_is_written_when_it_moves() -> None:
    old = _status(_container(lower=Resources(0, 128 * MIB)))
    assert worth_writing(old, _status(_container(lower=Resources(1, 128 * MIB))), 0.5)
    assert not worth_writing(old, old, 0.5)


def test_a_first_recommendation_is_always_written() -> None:
    assert worth_writing(VpaStatus(), OLD, 0.5)
    assert worth_writing(VpaStatus(None, (PROVIDED,), 3), OLD, 0.5)
