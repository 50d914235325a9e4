"""Recent usage: one peak per slot over a bounded window, each slot's lookback maximum, merging, and the
memo that is dropped whenever a slot other than the newest changes."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.recent_usage import RecentUsage

SLOT = 300.0
T0 = 1_767_225_600.0  # a slot boundary


def fed(samples: list[tuple[float, float]], window_s: float = 3600.0, lookback: int = 2) -> RecentUsage:
    recent = RecentUsage(SLOT, window_s, lookback)
    for offset, value in samples:
        recent.add(value, T0 + offset)
    return recent


def slot(offset: float) -> int:
    return int((T0 + offset) // SLOT)


@pytest.mark.parametrize(("samples", "expected"), [
    # One slot: its largest sample.
    ([(0, 10), (60, 30), (299, 20)], [(0, 30, 0)]),
    # Consecutive slots; `before` is the largest of the 2 slots before each (0 when none).
    ([(0, 10), (300, 30), (600, 20), (900, 5)], [(0, 10, 0), (300, 30, 10), (600, 20, 30), (900, 5, 30)]),
    # A gap: slots further back than the lookback do not count.
    ([(0, 50), (1200, 10)], [(0, 50, 0), (1200, 10, 0)]),
    # A late sample of an older slot raises that slot and the lookback of the slots after it.
    ([(0, 10), (300, 20), (600, 5), (100, 40)], [(0, 40, 0), (300, 20, 40), (600, 5, 40)]),
    # A late sample of a missing slot is inserted in order.
    ([(0, 10), (600, 5), (300, 20)], [(0, 10, 0), (300, 20, 10), (600, 5, 20)]),
    # The window (1 h: the newest slot and the 11 before it) drops older slots, and ignores samples
    # that old; a lookback maximum stays what it was when its slot was recorded.
    ([(0, 99), (300, 1), (3600, 2), (200, 77)], [(300, 1, 99), (3600, 2, 0)]),
])
def test_slots(samples: list[tuple[float, float]], expected: list[tuple[float, float, float]]) -> None:
    recent = fed(samples)
    assert list(zip(recent.slots(), recent.peaks(), recent.before(), strict=True)) == [
        (slot(offset), float(peak), float(before)) for offset, peak, before in expected]


@pytest.mark.parametrize(("samples", "covered"), [
    ([], 0.0),
    ([(0, 1)], 300.0),
    ([(0, 1), (3599, 1)], 3600.0),
])
def test_covered(samples: list[tuple[float, float]], covered: float) -> None:
    assert fed(samples).covered_s() == covered


def test_merge_is_the_slotwise_maximum_and_recomputes_lookbacks() -> None:
    a = fed([(0, 10), (600, 30)])
    b = fed([(0, 20), (300, 5), (900, 1)])
    a.merge(b)
    assert list(zip(a.slots(), a.peaks(), a.before(), strict=True)) == [
        (slot(0), 20.0, 0.0), (slot(300), 5.0, 20.0), (slot(600), 30.0, 20.0), (slot(900), 1.0, 30.0)]


def test_merge_into_empty_copies_and_shares_the_memo() -> None:
    live = fed([(0, 10), (300, 20)])
    live.memo[(1, 0.0)] = (1.0, 2.0, 3.0)
    merged = RecentUsage(SLOT, 3600.0, 2)
    merged.merge(live)
    assert list(merged.peaks()) == [10.0, 20.0]
    assert merged.memo is live.memo
    merged.add(99, T0 + 600)  # the copy's own samples do not reach the original
    assert list(live.peaks()) == [10.0, 20.0]


@pytest.mark.parametrize(("offset", "value", "kept"), [
    (300, 50, True),    # the newest slot grows: earlier slots unchanged, memo kept
    (600, 50, True),    # a new newest slot
    (0, 50, False),     # an older slot grows
    (0, 1, True),       # ... not above its peak: nothing changes
    (150, 50, False),   # an older slot (the first) grows
])
def test_memo_dropped_when_an_older_slot_changes(offset: float, value: float, kept: bool) -> None:
    recent = fed([(0, 10), (300, 20)])
    memo = recent.memo
    memo[(1, 0.0)] = (1.0, 2.0, 3.0)
    recent.add(value, T0 + offset)
    assert (recent.memo is memo) == kept


@pytest.mark.parametrize(("slot_s", "window_s", "lookback", "message"), [
    (0, 3600, 1, "slot"),
    (300, 100, 1, "window"),
    (300, 3600, 0, "lookback"),
])
def test_invalid(slot_s: float, window_s: float, lookback: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecentUsage(slot_s, window_s, lookback)
