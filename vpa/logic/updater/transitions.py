"""Which things are in a condition now, reported as changes only: the basis of "one line per change".

Owns: `Transitions`, a set of keys (VPAs, a lease, a component) that were in some condition (skipped because
a gate is off, a stale dependency) at the last check, and `update(present)`, which answers which keys
entered the condition and which left it since, and how many checks each has spent in it. Loops log (and
record Kubernetes Events for) the entries and exits and stay silent while nothing changes.

Must not: log, emit events or read a clock; callers decide what a change means.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Changes(Generic[K]):
    entered: tuple[K, ...] = ()
    """Keys in the condition now that were not at the last check, in the order given."""
    left: tuple[tuple[K, int], ...] = ()
    """Keys no longer in the condition, each with how many checks in a row it had been in it."""


@dataclass(slots=True)
class Transitions(Generic[K]):
    """Keys in a condition and for how many consecutive checks (`update` once per loop)."""

    _checks: dict[K, int] = field(default_factory=dict)

    def update(self, present: Iterable[K]) -> Changes[K]:
        now: dict[K, int] = {}
        entered: list[K] = []
        for key in present:
            if key in now:
                continue
            previous = self._checks.get(key)
            if previous is None:
                entered.append(key)
            now[key] = (previous or 0) + 1
        left = tuple((key, count) for key, count in self._checks.items() if key not in now)
        self._checks = now
        return Changes(tuple(entered), left)

    def checks(self, key: K) -> int:
        """How many consecutive checks `key` has been in the condition (0: not in it)."""
        return self._checks.get(key, 0)

    def __contains__(self, key: object) -> bool:
        return key in self._checks

    def __len__(self) -> int:
        return len(self._checks)
