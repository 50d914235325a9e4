"""Merging a namespace's LimitRanges into the one `Container` item and one `Pod` item VPA caps against.

Owns: `NamespaceLimits` and `merge_limit_ranges` (upstream `limitsChecker.getLimitRangeItem`, spec §5.4):
for every item of the wanted type that has at least one of `min`/`max`/`default`, the merged `max` keeps
the lowest value per resource, the merged `min` the highest, and `default` is the last item's whole
`default` list (not merged per resource). No such item ⇒ None.

The order of LimitRanges decides which `default` is "last"; upstream uses its lister's order, which is
unspecified. Callers pass them in a stable order (the cache's, e.g. by name) so results are reproducible.

Must not: read the API or cache anything; cap recommendations (that is `vpa.logic.capping`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from vpa.model.limitrange import LIMIT_TYPE_CONTAINER, LIMIT_TYPE_POD, LimitRangeItemView, LimitRangeView
from vpa.model.resources import Resources


@dataclass(frozen=True, slots=True)
class NamespaceLimits:
    """The merged LimitRange items of one namespace; None when the namespace has none of that type."""

    container: LimitRangeItemView | None = None
    pod: LimitRangeItemView | None = None


NO_LIMITS = NamespaceLimits()


def _pick(a: int | None, b: int | None, choose: Callable[[int, int], int]) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return choose(a, b)


def _merge(
    result: Resources | None, item: Resources | None, choose: Callable[[int, int], int]
) -> Resources | None:
    if item is None:
        return result
    if result is None:
        return item
    return Resources(
        _pick(result.cpu_millicores, item.cpu_millicores, choose),
        _pick(result.memory_bytes, item.memory_bytes, choose),
    )


def merge_limit_ranges(ranges: Iterable[LimitRangeView], limit_type: str) -> LimitRangeItemView | None:
    """The merged item of `limit_type` (`Container` or `Pod`) over `ranges`, or None."""
    minimum: Resources | None = None
    maximum: Resources | None = None
    default: Resources | None = None
    found = False
    for limit_range in ranges:
        for item in limit_range.items:
            if item.type != limit_type or (item.max is None and item.min is None and item.default is None):
                continue
            found = True
            if item.default is not None:
                default = item.default
            maximum = _merge(maximum, item.max, min)
            minimum = _merge(minimum, item.min, max)
    if not found:
        return None
    return LimitRangeItemView(type=limit_type, min=minimum, max=maximum, default=default)


def namespace_limits(ranges: Iterable[LimitRangeView]) -> NamespaceLimits:
    """Both merged items for one namespace's LimitRanges (pass each namespace's ranges separately)."""
    ranges = tuple(ranges)
    if not ranges:
        return NO_LIMITS
    return NamespaceLimits(
        container=merge_limit_ranges(ranges, LIMIT_TYPE_CONTAINER),
        pod=merge_limit_ranges(ranges, LIMIT_TYPE_POD),
    )
