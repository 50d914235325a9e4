"""Whether a VPA status the recommender computed is worth a write over the one the VPA object holds.

Owns: `worth_writing`, the rule `--bounds-write-tolerance` sets (ours). With a tolerance of 0 (the default)
every difference is written, as upstream does. With a tolerance above 0, a status whose only changes are
lowerBound or upperBound amounts, each within that fraction of the amount in the object's status, is not
written: every bound a VPA shows then stays within the tolerance of the recommender's current value, while
targets, uncapped targets, conditions, the observed generation and the set of containers and resources are
always written as computed.

Why: a VPA's bounds carry a confidence factor that grows with every minute of history, so they move a little
in every loop, long after its targets settled (targets move in whole histogram buckets). Upstream writes
each such move: one status write per VPA per loop, each costing kube-apiserver CPU and an etcd write, for
changes nothing acts on.

Must not: do I/O or read a clock; decide anything but this comparison.
"""

from __future__ import annotations

from vpa.model.resources import Resources
from vpa.model.vpa import RecommendedContainerResources, VpaStatus


def worth_writing(old: VpaStatus, new: VpaStatus, bound_tolerance: float) -> bool:
    """True when `new` should replace `old` (the status in the VPA object): it differs from `old`, and,
    with `bound_tolerance` above 0, not only by bounds within that fraction of `old`'s."""
    if new == old:
        return False
    if bound_tolerance <= 0:
        return True
    if new.conditions != old.conditions or new.observed_generation != old.observed_generation:
        return True
    if new.recommendation is None or old.recommendation is None:
        return True
    before, after = old.recommendation.containers, new.recommendation.containers
    if len(before) != len(after):
        return True
    return any(_container_moved(was, now, bound_tolerance) for was, now in zip(before, after, strict=True))


def _container_moved(was: RecommendedContainerResources, now: RecommendedContainerResources,
                     tolerance: float) -> bool:
    if was.container_name != now.container_name:
        return True
    if was.target != now.target or was.uncapped_target != now.uncapped_target:
        return True
    return _bound_moved(was.lower_bound, now.lower_bound, tolerance) or _bound_moved(
        was.upper_bound, now.upper_bound, tolerance)


def _bound_moved(was: Resources, now: Resources, tolerance: float) -> bool:
    return _amount_moved(was.cpu_millicores, now.cpu_millicores, tolerance) or _amount_moved(
        was.memory_bytes, now.memory_bytes, tolerance)


def _amount_moved(was: int | None, now: int | None, tolerance: float) -> bool:
    if was is None or now is None:
        return was != now
    return abs(now - was) > tolerance * abs(was)
