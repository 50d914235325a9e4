"""Rate-limited logging for events any client can cause: a counter per reason plus one sampled line.

Owns: `SampledLog` — `event(reason, **fields)` counts every occurrence in a Prometheus counter (labelled by
reason) and logs at most one line per reason per `interval_s` (wall clock), carrying how many occurrences
the previous interval suppressed. Used where unauthenticated input (AdmissionReviews for resources we do not
handle, pods that do not convert) would otherwise write one ERROR/WARNING line per request.

Must not: decide anything about the events it counts, or drop the count (the counter sees every event).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter

log = structlog.get_logger(__name__)


class SampledLog:
    """Counts events by reason; logs the first of each `interval_s` window with the suppressed count."""

    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        documentation: str,
        *,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.counter = Counter(name, documentation, ["reason"], registry=registry)
        self.interval_s = interval_s
        self._clock = clock
        self._next: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def event(self, reason: str, message: str, *, level: str = "warning", **fields: Any) -> bool:
        """Count one event; True when this one was logged."""
        self.counter.labels(reason=reason).inc()
        now = self._clock()
        if now < self._next.get(reason, -float("inf")):
            self._suppressed[reason] = self._suppressed.get(reason, 0) + 1
            return False
        self._next[reason] = now + self.interval_s
        suppressed = self._suppressed.pop(reason, 0)
        getattr(log, level)(message, reason=reason, suppressed=suppressed, **fields)
        return True
