"""What the admission path reads from the process's watch caches without awaiting.

Owns: `NamespacesWithVpas` (namespaces holding at least one VPA, kept by the VPA cache's handlers: a pod in
any other namespace is answered without touching the API) and `LimitRanges` (every namespace's
LimitRanges, merged on demand and kept until one of them changes).

Must not: await anything on a lookup (the webhook's thread reads these while the main loop's handlers
change them); write to the API.
"""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any

import structlog

from vpa.aio.pacing import paced
from vpa.kube.watching import WatchCache
from vpa.logic.limitranges import NO_LIMITS, NamespaceLimits, namespace_limits
from vpa.model.limitrange import LimitRangeError, LimitRangeView, limitrange_from_dict
from vpa.model.vpa import VpaView

log = structlog.get_logger(__name__)


class NamespacesWithVpas:
    """Namespaces holding at least one VPA, kept by the VPA cache's handlers: a pod in any other
    namespace is answered without touching the API."""

    def __init__(self) -> None:
        self._counts: Tally[str] = Tally()
        self._counting = False

    async def attach(self, cache: WatchCache[VpaView]) -> None:
        """Count the cache's VPAs, then follow its events. The handlers go on with the snapshot counted
        (nothing awaited between the two), and the snapshot is counted `paced`: a large cluster's VPAs are
        counted while the main loop's other work goes on. Meanwhile a
        namespace's count may dip below zero (an update or a delete of a VPA not counted yet): no namespace
        is dropped until the snapshot is counted. Answer no review before it returns."""
        snapshot = cache.list()
        cache.on_add(self._add)
        cache.on_update(self._update)
        cache.on_delete(self._remove)
        self._counting = True
        try:
            async for vpa in paced(snapshot):
                self._counts[vpa.namespace] += 1
        finally:
            self._counting = False
            for namespace in [ns for ns, n in self._counts.items() if n <= 0]:
                del self._counts[namespace]

    def _add(self, vpa: VpaView) -> None:
        self._counts[vpa.namespace] += 1

    def _update(self, old: VpaView, new: VpaView) -> None:
        self._remove(old)
        self._add(new)

    def _remove(self, vpa: VpaView) -> None:
        self._counts[vpa.namespace] -= 1
        if self._counts[vpa.namespace] <= 0 and not self._counting:
            del self._counts[vpa.namespace]

    def __contains__(self, namespace: object) -> bool:
        return namespace in self._counts


class LimitRanges:
    """The LimitRanges of every namespace (a watch cache: the process's shared one, or our own), merged per
    namespace on demand."""

    def __init__(self, cache: WatchCache[LimitRangeView]) -> None:
        self.cache = cache
        self._merged: dict[str, NamespaceLimits] = {}
        self._changes = 0  # the webhook merges on its own thread while this cache's handlers forget
        if not cache.has_index("namespace"):  # the shared cache has it (`ControllerCaches`)
            cache.add_index("namespace", lambda lr: [lr.namespace])
        cache.on_add(self._forget)
        cache.on_update(lambda _old, new: self._forget(new))
        cache.on_delete(self._forget)

    def _forget(self, limit_range: LimitRangeView) -> None:
        self._changes += 1
        self._merged.pop(limit_range.namespace, None)

    def __call__(self, namespace: str) -> NamespaceLimits:
        merged = self._merged.get(namespace)
        if merged is None:
            changes = self._changes
            ranges = sorted(self.cache.by_index("namespace", namespace), key=lambda lr: lr.name)
            merged = namespace_limits(ranges) if ranges else NO_LIMITS
            if changes == self._changes:  # nothing changed while merging: the result may be kept
                self._merged[namespace] = merged
        return merged


def to_limit_range(obj: dict[str, Any]) -> LimitRangeView | None:
    try:
        return limitrange_from_dict(obj)
    except LimitRangeError as err:
        log.warning("skipping a LimitRange that does not convert", error=str(err))
        return None
