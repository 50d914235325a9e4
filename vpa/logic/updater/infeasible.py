"""The infeasible-attempt rule of `InPlace` mode (AEP-8818): remember what could not fit, retry only lower.

Owns: `InfeasibleAttempts`, an immutable value mapping a pod UID to the per-container requests of the resize
that was found infeasible, and the rule `should_retry`: a new target is worth trying only when it is lower
than the recorded attempt in at least one container resource.

Ownership: the value is immutable; every change returns a new value (or the same one when nothing
changed), so the updater loop owns the one current value and replaces it. Sizes stay small (only pods whose
resize did not fit), so copy-on-write is cheap.

The loop records from both detection paths: the `PodResizePending/Infeasible` condition (the decision pass
reports the pod's `spec` requests, which hold the values that did not fit — AEP-8818, where upstream stores
the VPA's raw recommendation instead) and a resize rejected with 403 + StatusCause `NodeCapacity` (the loop
records the requests it attempted). It clears a pod after a successful resize patch (AEP-8818; upstream
never clears) and forgets pods that are gone.

Must not: touch the API, read the clock, or know about update modes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from vpa.model.resources import CPU, MEMORY, Resources

Attempt = Mapping[str, Resources]
"""Container name → the requests that were attempted."""

_RESOURCES: Final = (CPU, MEMORY)


def _frozen(attempt: Attempt) -> Attempt:
    return MappingProxyType(dict(attempt))


@dataclass(frozen=True, slots=True)
class InfeasibleAttempts:
    """Pod UID → the infeasible attempt. Build empty with `InfeasibleAttempts()`."""

    _by_uid: Mapping[str, Attempt] = field(default_factory=lambda: MappingProxyType({}))

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid

    def attempt(self, uid: str) -> Attempt | None:
        return self._by_uid.get(uid)

    def record(self, uid: str, attempted: Attempt) -> InfeasibleAttempts:
        """Remember `attempted` (replacing an older record) for the pod `uid`."""
        updated = dict(self._by_uid)
        updated[uid] = _frozen(attempted)
        return InfeasibleAttempts(MappingProxyType(updated))

    def clear(self, uid: str) -> InfeasibleAttempts:
        """Drop the pod's record (after a successful resize)."""
        if uid not in self._by_uid:
            return self
        updated = dict(self._by_uid)
        del updated[uid]
        return InfeasibleAttempts(MappingProxyType(updated))

    def forget_missing(self, live_uids: Iterable[str]) -> InfeasibleAttempts:
        """Keep only the records of pods still alive."""
        live = live_uids if isinstance(live_uids, AbstractSet) else set(live_uids)  # a set, or made one
        kept = {uid: attempt for uid, attempt in self._by_uid.items() if uid in live}
        if len(kept) == len(self._by_uid):
            return self
        return InfeasibleAttempts(MappingProxyType(kept))

    def should_retry(self, uid: str, new_target: Attempt) -> bool:
        """True when nothing is recorded for the pod, or `new_target` is lower than the recorded attempt in
        at least one container resource both name. Equal or higher everywhere → False (it would not fit)."""
        recorded = self._by_uid.get(uid)
        if recorded is None:
            return True
        return is_lower_somewhere(new_target, recorded)


def is_lower_somewhere(new: Attempt, old: Attempt) -> bool:
    """True if some container resource present in both has a smaller value in `new`."""
    for name, old_resources in old.items():
        new_resources = new.get(name)
        if new_resources is None:
            continue
        for resource in _RESOURCES:
            old_value = old_resources.get(resource)
            new_value = new_resources.get(resource)
            if old_value is not None and new_value is not None and new_value < old_value:
                return True
    return False
