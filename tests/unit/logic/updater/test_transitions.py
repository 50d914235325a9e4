"""`Transitions`: a condition's keys reported only when they enter or leave it."""

from __future__ import annotations

import pytest

from vpa.logic.updater.transitions import Changes, Transitions


@pytest.mark.parametrize(
    ("checks", "expected"),
    [
        pytest.param([[]], [Changes()], id="nothing ever in the condition says nothing"),
        pytest.param([["a"], ["a"], ["a"]], [Changes(("a",)), Changes(), Changes()],
                     id="a key that stays is reported once"),
        pytest.param([["a", "b"], ["b"], []], [Changes(("a", "b")), Changes(left=(("a", 1),)),
                                               Changes(left=(("b", 2),))],
                     id="each key leaves with the number of checks it spent in the condition"),
        pytest.param([["a"], [], ["a"]], [Changes(("a",)), Changes(left=(("a", 1),)), Changes(("a",))],
                     id="coming back is a new entry"),
        pytest.param([["a", "a"]], [Changes(("a",))], id="duplicates in one check count once"),
    ],
)
def test_changes_per_check(checks: list[list[str]], expected: list[Changes[str]]) -> None:
    transitions: Transitions[str] = Transitions()
    assert [transitions.update(present) for present in checks] == expected


def test_checks_counts_consecutive_checks() -> None:
    transitions: Transitions[str] = Transitions()
    for _ in range(3):
        transitions.update(["a"])
    assert (transitions.checks("a"), transitions.checks("b"), "a" in transitions, len(transitions)) == (
        3, 0, True, 1
    )
