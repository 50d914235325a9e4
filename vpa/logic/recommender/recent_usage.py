"""Recent memory usage of one aggregate: the peak of each short time slot over a bounded window.

Owns: `RecentUsage` — per slot of `slot_s` seconds (slot `n` covers `[n·slot_s, (n+1)·slot_s)`), the
largest memory sample seen in it, for the slots of the last `window_s` seconds up to the newest one,
and beside each slot the largest peak of the `lookback_slots` slots before it (what a jump is measured
against; as seen when the slot was recorded, so it outlives those slots leaving the window);
adding a sample, merging two trackers (slot-wise maximum), copying, and reading the slots back in time
order. Only the `moving-window` recommender reads it (`vpa.logic.recommender.moving_window`); the
aggregates of a
recommender running another algorithm carry none.

It is deliberately not part of checkpoints: after a restart it starts empty and refills from new samples
within `window_s`, and the recommender reading it falls back to upstream's estimate until it holds enough
history (see `vpa.logic.recommender.moving_window`).

Must not: estimate anything, read the clock, or know about pods, VPAs or histograms.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence


class RecentUsage:
    """Slot peaks in time order, bounded to `window_s` of slots ending with the newest one."""

    __slots__ = ("_before", "_peaks", "_slots", "lookback_slots", "memo", "slot_s", "window_slots")

    def __init__(self, slot_s: float, window_s: float, lookback_slots: int = 12) -> None:
        if not slot_s > 0:
            raise ValueError(f"recent usage slot must be greater than 0, got {slot_s}")
        if not window_s >= slot_s:
            raise ValueError(f"recent usage window ({window_s}) must be at least one slot ({slot_s})")
        self.slot_s = float(slot_s)
        if lookback_slots < 1:
            raise ValueError(f"recent usage lookback must be at least one slot, got {lookback_slots}")
        self.window_slots = max(1, math.ceil(window_s / slot_s))
        self.lookback_slots = lookback_slots
        self._slots: list[int] = []
        self._peaks: list[float] = []
        self._before: list[float] = []  # per slot: the largest peak of the lookback slots before it (0: none)
        # A reader's memo of values computed from the slots before a given slot only: shared with copies
        # (so a fresh merged copy reuses it), replaced by a new one whenever a slot other than the newest
        # changes. Keys and values are the reader's (vpa.logic.recommender.moving_window).
        self.memo: dict[tuple[int, float], tuple[float, float, float]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, value: float, timestamp: float) -> None:
        """Record one sample; one older than the window (relative to the newest slot) is ignored."""
        slot = math.floor(timestamp / self.slot_s)
        slots, peaks = self._slots, self._peaks
        if not slots or slot > slots[-1]:
            self._before.append(self._max_before(len(slots), slot))
            slots.append(slot)
            peaks.append(float(value))
            self._prune()
            return
        if slot <= slots[-1] - self.window_slots:
            return
        index = bisect.bisect_left(slots, slot)
        if index < len(slots) and slots[index] == slot:
            if value <= peaks[index]:
                return
            peaks[index] = float(value)
            if index < len(slots) - 1:
                self.memo = {}
        else:
            self.memo = {}
            slots.insert(index, slot)
            peaks.insert(index, float(value))
            self._before.insert(index, self._max_before(index, slot))
        self._refresh_after(index)

    def _max_before(self, index: int, slot: int) -> float:
        """The largest peak among held slots before position `index` within the lookback of `slot`."""
        slots, peaks = self._slots, self._peaks
        best = 0.0
        position = index - 1
        while position >= 0 and slots[position] >= slot - self.lookback_slots:
            if peaks[position] > best:
                best = peaks[position]
            position -= 1
        return best

    def _refresh_after(self, index: int) -> None:
        """Recompute the lookback maxima of the slots whose lookback covers position `index`."""
        slots = self._slots
        limit = slots[index] + self.lookback_slots
        position = index + 1
        while position < len(slots) and slots[position] <= limit:
            self._before[position] = self._max_before(position, slots[position])
            position += 1

    def _prune(self) -> None:
        oldest = self._slots[-1] - self.window_slots
        if self._slots[0] <= oldest:
            cut = bisect.bisect_right(self._slots, oldest)
            del self._slots[:cut]
            del self._peaks[:cut]
            del self._before[:cut]

    def merge(self, other: RecentUsage) -> None:
        """Slot-wise maximum of both (the samples of several pods of one container name), lookback maxima
        included."""
        if not other._slots:
            return
        if not self._slots and other.lookback_slots == self.lookback_slots:
            self._slots = list(other._slots)
            self._peaks = list(other._peaks)
            self._before = list(other._before)
            self.memo = other.memo
            self._prune()
            return
        merged: dict[int, float] = dict(zip(self._slots, self._peaks, strict=True))
        seen: dict[int, float] = dict(zip(self._slots, self._before, strict=True))
        for slot, peak, before in zip(other._slots, other._peaks, other._before, strict=True):
            if peak > merged.get(slot, -math.inf):
                merged[slot] = peak
            if before > seen.get(slot, 0.0):
                seen[slot] = before
        self._slots = sorted(merged)
        self._peaks = [merged[slot] for slot in self._slots]
        self._before = [max(self._max_before(index, slot), seen[slot])
                        for index, slot in enumerate(self._slots)]
        self.memo = {}
        self._prune()

    def copy(self) -> RecentUsage:
        clone = RecentUsage.__new__(RecentUsage)
        clone.slot_s = self.slot_s
        clone.window_slots = self.window_slots
        clone.lookback_slots = self.lookback_slots
        clone._slots = list(self._slots)
        clone._peaks = list(self._peaks)
        clone._before = list(self._before)
        clone.memo = self.memo
        return clone

    def slots(self) -> Sequence[int]:
        """The held slots' numbers, oldest first (slot `n` starts at `n × slot_s`); a read-only view."""
        return self._slots

    def peaks(self) -> Sequence[float]:
        """Each held slot's peak, in the order of `slots`; a read-only view."""
        return self._peaks

    def before(self) -> Sequence[float]:
        """Per slot (in the order of `slots`), the largest peak of the held slots within
        `lookback_slots` before it, 0 when there is none; a read-only view."""
        return self._before

    def covered_s(self) -> float:
        """Time from the oldest held slot's start to the newest one's end (0 when empty)."""
        if not self._slots:
            return 0.0
        return (self._slots[-1] - self._slots[0] + 1) * self.slot_s
