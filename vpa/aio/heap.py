"""The process's cyclic-garbage-collection policy: when full (oldest-generation) collections run.

Owns: holding back CPython's automatic full collections and running them on a fixed wall-clock interval
instead, measured and exported; and collecting the youngest generation on a short timer. Why: a collection
stops the event loop (the webhook, the leases, every timer) for as long as it scans.
- A full collection scans every tracked object, and the recommender keeps about 20 per tracked container
  (histograms, aggregates, views, recommendations): in a large cluster, a pause users notice. CPython 3.11
  starts one by itself whenever a quarter as many objects as survived the last one have been promoted,
  which the recommender loop does every few loops. Held back, it runs every `FULL_COLLECTION_INTERVAL_S`
  instead; what it would have freed meanwhile (reference cycles that outlived two young collections) waits
  until then.
- A young collection scans the youngest generation, which is meant to hold at most ~700 objects. But
  CPython's counter is lowered by every freed object, old ones included, so when one recommender loop frees
  the previous loop's hundreds of thousands of status objects, the youngest generation grows unchecked and
  its next collection scans all of it; the middle generation, never triggered for the same reason, grows
  for a whole loop step. Collecting them on a `YOUNG_INTERVAL_S` timer (run when
  the event loop gets control, i.e. at every yield of paced work) bounds each to what a few slices
  allocated.

Both processes install it: `vpa run` (`vpa.app.runtime`) and `vpa sim`, whose store of a large cluster's pods
made its own automatic full collections long and frequent while it answered a recommender loop's writes
(every answer waited meanwhile). It sits outside the layers so that the simulator, which must not
import the autoscaler, can use it too.

Must not: import anything of the autoscaler or the simulator; be installed by library code or tests that
do not restore it (`restore()` undoes `hold()`); read the virtual clock (garbage accumulates in real time).
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Final

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

log = structlog.get_logger(__name__)

FULL_COLLECTION_INTERVAL_S: Final = 3600.0
YOUNG_INTERVAL_S: Final = 0.01
_NEVER: Final = 2**31 - 1  # a threshold for generation 2 that young collections never reach


class HeapKeeper:
    """Holds automatic full collections back while installed and runs one every `interval_s` of wall time."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 interval_s: float = FULL_COLLECTION_INTERVAL_S, young_interval_s: float = YOUNG_INTERVAL_S,
                 ) -> None:
        self.interval_s = interval_s
        self.young_interval_s = young_interval_s
        self._saved: tuple[int, int, int] | None = None
        self._seconds: Gauge | None = None
        self._collections: Counter | None = None
        if registry is not None:
            self._seconds = Gauge(
                "vpa_gc_full_collection_seconds",
                "Duration of the last scheduled full cyclic-GC collection (the event loop stops meanwhile).",
                registry=registry)
            self._collections = Counter(
                "vpa_gc_full_collections", "Scheduled full cyclic-GC collections run.", registry=registry)

    def hold(self) -> None:
        """Stop CPython from starting full collections by itself (young ones stay automatic)."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], _NEVER)

    def restore(self) -> None:
        """Give the thresholds back as they were before `hold()`."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    @property
    def holding(self) -> bool:
        return self._saved is not None

    def collect(self) -> tuple[int, float]:
        """One full collection now; returns (objects collected, seconds)."""
        started = time.perf_counter()
        collected = gc.collect()
        seconds = time.perf_counter() - started
        if self._seconds is not None and self._collections is not None:
            self._seconds.set(seconds)
            self._collections.inc()
        return collected, seconds

    async def run(self) -> None:
        """Hold full collections; collect the youngest generation every `young_interval_s` and everything
        every `interval_s`, until cancelled; then restore the thresholds."""
        self.hold()
        try:
            next_full = time.monotonic() + self.interval_s
            while True:
                await asyncio.sleep(self.young_interval_s)
                # The middle generation too once enough young collections fed it (its automatic trigger
                # rarely fires for the reason above, so without this it would grow for a whole loop).
                gc.collect(1 if gc.get_count()[1] >= gc.get_threshold()[1] else 0)
                if time.monotonic() >= next_full:
                    collected, seconds = self.collect()
                    log.info("gc_full_collection", collected=collected, seconds=round(seconds, 3))
                    next_full = time.monotonic() + self.interval_s
        finally:
            self.restore()
