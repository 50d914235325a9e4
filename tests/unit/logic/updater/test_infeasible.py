"""The infeasible-attempt rule of InPlace mode (AEP-8818)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vpa.logic.updater.infeasible import InfeasibleAttempts, is_lower_somewhere
from vpa.model.resources import Resources

ATTEMPT = {"app": Resources(1000, 2000), "side": Resources(100, 200)}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (ATTEMPT, False),  # same recommendation → skip
        ({"app": Resources(1000, 2000), "side": Resources(100, 199)}, True),  # lower in one resource → retry
        (
            {"app": Resources(5000, 9000), "side": Resources(99, 900)},
            True,
        ),  # lower somewhere, higher elsewhere
        ({"app": Resources(1001, 2000), "side": Resources(100, 200)}, False),  # higher only → skip
        ({"app": Resources(None, 2000)}, False),  # nothing comparable lower
        ({"other": Resources(1, 1)}, False),  # unknown container is not comparable
    ],
    ids=["same", "lower-one", "mixed", "higher", "partial-equal", "unknown-container"],
)
def test_should_retry(target: dict[str, Resources], expected: bool) -> None:
    tracker = InfeasibleAttempts().record("uid-1", ATTEMPT)
    assert tracker.should_retry("uid-1", target) is expected
    assert InfeasibleAttempts().should_retry("uid-1", target)  # nothing recorded → try


def test_success_clears_and_gone_pods_are_forgotten() -> None:
    tracker = InfeasibleAttempts().record("a", ATTEMPT).record("b", ATTEMPT)
    cleared = tracker.clear("a")
    assert "a" not in cleared
    assert cleared.should_retry("a", ATTEMPT)
    assert "a" in tracker  # immutable: the old value is unchanged
    assert cleared.clear("a") is cleared
    forgotten = tracker.forget_missing(["b", "c"])
    assert len(forgotten) == 1
    assert "b" in forgotten
    assert forgotten.forget_missing({"b"}) is forgotten


def test_record_copies_its_input() -> None:
    attempt = dict(ATTEMPT)
    tracker = InfeasibleAttempts().record("a", attempt)
    attempt["app"] = Resources(1, 1)
    assert tracker.attempt("a") == ATTEMPT


values = st.one_of(st.none(), st.integers(0, 10**6))
attempts = st.dictionaries(st.sampled_from(["a", "b"]), st.builds(Resources, values, values), max_size=2)


@given(attempts, attempts)
def test_lower_somewhere_matches_definition(new: dict[str, Resources], old: dict[str, Resources]) -> None:
    expected = any(
        o is not None and n is not None and n < o
        for name in old.keys() & new.keys()
        for o, n in (
            (old[name].cpu_millicores, new[name].cpu_millicores),
            (old[name].memory_bytes, new[name].memory_bytes),
        )
    )
    assert is_lower_somewhere(new, old) is expected
    assert not is_lower_somewhere(old, old)
