"""The recommender's second OOM source: a watch of core/v1 Events with `fieldSelector=reason=Evicted`.

Owns: `eviction_event_cache` — a `WatchCache` of `EventView`s (LIST + WATCH, re-LIST on 410, reconnect with
backoff, as every cache) on the Events of `--vpa-object-namespace` or all namespaces. Its add handlers see
each event once per cache lifetime, existing ones included (as upstream's watch without a resourceVersion
starts with every existing event).

Must not: interpret the events (that is `vpa.logic.recommender.evictions`) or decide anything.
"""

from __future__ import annotations

from typing import Any, Final

import structlog

from vpa.kube import converting
from vpa.kube.client import KubeClient, api_path
from vpa.kube.watching import WatchCache
from vpa.model.clock import Clock
from vpa.model.event import EventView

log = structlog.get_logger(__name__)

EVICTED_FIELD_SELECTOR: Final = "reason=Evicted"


def eviction_event_cache(
    client: KubeClient, clock: Clock, namespace: str | None = None
) -> WatchCache[EventView]:
    """A cache of `Evicted` events; run it with `cache.run()` and register `on_add` handlers first."""

    def to_event(obj: dict[str, Any]) -> EventView | None:
        try:
            return converting.event_from_dict(obj)
        except converting.ConversionError as err:
            log.warning("skipping an event that does not convert", error=str(err))
            return None

    return WatchCache(client, clock, api_path("", "v1", "events", namespace=namespace), to_event,
                      name="evicted-events", field_selector=EVICTED_FIELD_SELECTOR)
