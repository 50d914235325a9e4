"""Fault injection for the simulated API server's HTTP clients.

Owns: injected failures and latency matched by verb, resource, subresource and user agent (with an
optional hit budget), pausing all requests until resumed, and the store-level faults (dropping watch
streams, compacting history so old resourceVersions expire).

Must not: affect in-process `Store` calls: the cluster behaviour (controllers, node agent) never sees
faults; only HTTP clients (the autoscaler, kubectl) do.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vpa.sim.contracts import ApiError

if TYPE_CHECKING:
    from vpa.sim.apiserver.store import ObjectStore

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_ids = itertools.count(1)


@dataclass(eq=False)
class FaultHandle:
    """One injected fault; `hits` counts matched requests; `remove()` withdraws it."""

    verb: str
    resource: str
    code: int | None
    latency_s: float
    count: int | None
    user_agent: str | None
    subresource: str | None
    id: int = field(default_factory=lambda: next(_ids))
    hits: int = 0
    _owner: Faults | None = None

    def matches(self, verb: str, resource: str, subresource: str | None, user_agent: str) -> bool:
        if self.count is not None and self.hits >= self.count:
            return False
        if self.verb != "*" and self.verb != verb:
            return False
        if self.resource != "*" and self.resource != resource:
            return False
        if self.subresource is not None and self.subresource != (subresource or ""):
            return False
        return not (self.user_agent is not None and self.user_agent not in user_agent)

    def remove(self) -> None:
        if self._owner is not None:
            self._owner.remove(self)

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "verb": self.verb,
            "resource": self.resource,
            "code": self.code,
            "latencySeconds": self.latency_s,
            "count": self.count,
            "userAgent": self.user_agent,
            "subresource": self.subresource,
            "hits": self.hits,
        }


class Faults:
    """`cluster.faults`: the fault knobs tests and `/sim/v1/faults/...` use."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._handles: list[FaultHandle] = []
        self._running = asyncio.Event()
        self._running.set()

    def drop_watches(self) -> int:
        """Close every open HTTP watch stream; returns how many were closed."""
        return self._store.drop_watches()

    def compact(self) -> None:
        """Forget event history: every older resourceVersion now gets 410 Expired."""
        self._store.compact()

    def bookmark(self) -> None:
        """Send a BOOKMARK now on every watch that asked for bookmarks."""
        self._store.bookmark_all()

    def inject(
        self,
        verb: str = "*",
        resource: str = "*",
        code: int | None = 500,
        latency_s: float = 0.0,
        count: int | None = None,
        user_agent: str | None = None,
        subresource: str | None = None,
    ) -> FaultHandle:
        if code is not None and not 400 <= code <= 599:
            raise ValueError(f"fault code must be an HTTP error code, got {code}")
        h = FaultHandle(verb, resource, code, float(latency_s), count, user_agent, subresource)
        h._owner = self
        self._handles.append(h)
        return h

    def remove(self, handle: FaultHandle) -> None:
        if handle in self._handles:
            self._handles.remove(handle)

    def clear(self) -> None:
        self._handles.clear()
        self.resume()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def list(self) -> list[dict[str, Any]]:
        return [h.describe() for h in self._handles]

    async def before_request(
        self, verb: str, resource: str, subresource: str | None, user_agent: str
    ) -> None:
        """Called by the HTTP layer for every resource request; sleeps and/or raises as injected."""
        if not self._running.is_set():
            await self._running.wait()
        for h in list(self._handles):
            if not h.matches(verb, resource, subresource, user_agent):
                continue
            h.hits += 1
            if h.latency_s > 0:
                await asyncio.sleep(h.latency_s)
            if h.code is not None:
                reason = _REASONS.get(h.code, "InternalError")
                retry = 1 if h.code == 429 else None
                raise ApiError(
                    h.code, reason, f"injected fault: {reason} ({verb} {resource})", retry_after_s=retry
                )
            return
