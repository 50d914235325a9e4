"""Kubernetes Events (`core/v1`), recorded without ever blocking the caller and aggregated like client-go.

Owns: `EventRecorder`. `record(...)` only enqueues (a bounded queue; when it is full the event is dropped
and counted). A background task (`run()`) writes them: the same involvedObject, type, reason, message and
source seen again within `aggregation_window_s` becomes a merge PATCH of `count` and `lastTimestamp` on the
existing Event instead of a new object, as client-go's EventCorrelator/EventLogger does; new Events are
named `<object name>.<hex nanoseconds>` and carry `source.component`/`source.host`,
`reportingController`/`reportingInstance`. A per-key token bucket (client-go's spam filter: burst 25,
one token per 5 minutes) keeps a hot loop from flooding the API server; every write also passes the
client's QPS limiter.

Must not: raise into, or await inside, the caller's code path; retry forever; emit anything but Events.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import structlog

from vpa.kube.client import KubeClient, NotFound, api_path
from vpa.kube.ratelimiting import TokenBucket
from vpa.model.clock import Clock

log = structlog.get_logger(__name__)

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The `involvedObject` of an Event."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""
    field_path: str = ""

    def to_json(self) -> dict[str, str]:
        ref = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "apiVersion": self.api_version,
        }
        if self.uid:
            ref["uid"] = self.uid
        if self.resource_version:
            ref["resourceVersion"] = self.resource_version
        if self.field_path:
            ref["fieldPath"] = self.field_path
        return ref


@dataclass
class EventStats:
    created: int = 0
    patched: int = 0  # aggregated into an existing Event
    dropped: int = 0  # the queue was full
    throttled: int = 0  # refused by the per-key spam filter
    failed: int = 0  # the API refused or did not answer


@dataclass(slots=True)
class _Pending:
    ref: ObjectRef
    type: EventType
    reason: str
    message: str
    at: float  # clock.now() when recorded
    stamp: float  # stamp_clock.now() when recorded: the Event's timestamps


@dataclass(slots=True)
class _Seen:
    namespace: str
    name: str
    count: int
    first_timestamp: str
    last_seen: float


def _rfc3339(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class EventRecorder:
    """Queue Events from anywhere; `run()` (one background task) writes and aggregates them."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        component: str,
        host: str | None = None,
        queue_size: int = 1000,
        aggregation_window_s: float = 600.0,
        cache_size: int = 4096,
        spam_burst: int = 25,
        spam_qps: float = 1.0 / 300.0,
        write_timeout_s: float = 10.0,
        stamp_clock: Clock | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        # The Events' timestamps: people read them with kubectl, which compares them with the wall clock, so
        # a process on a simulated clock stamps them with the wall clock (else "337d" ages).
        self._stamp_clock = stamp_clock if stamp_clock is not None else clock
        self.component = component
        self.host = host if host is not None else socket.gethostname()
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=queue_size)
        self._window_s = aggregation_window_s
        self._cache_size = cache_size
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._spam: OrderedDict[tuple[str, ...], TokenBucket] = OrderedDict()
        self._spam_burst = spam_burst
        self._spam_qps = spam_qps
        self._write_timeout_s = write_timeout_s
        self._last_nanos = 0
        self.stats = EventStats()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop `run()` writes from

    def record(self, ref: ObjectRef, type_: EventType, reason: str, message: str) -> bool:
        """Queue an Event; never blocks. Returns False (and counts it) when the queue is full. Callable from
        another thread's loop (the admission webhook's): the Event is then handed to `run()`'s loop."""
        pending = _Pending(ref, type_, reason, message, self._clock.now(), self._stamp_clock.now())
        loop = self._loop
        if loop is not None and not loop.is_closed() and _running_loop() is not loop:
            loop.call_soon_threadsafe(self._enqueue, pending)
            return True
        return self._enqueue(pending)

    def _enqueue(self, pending: _Pending) -> bool:
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            self.stats.dropped += 1
            return False
        return True

    def normal(self, ref: ObjectRef, reason: str, message: str) -> bool:
        return self.record(ref, "Normal", reason, message)

    def warning(self, ref: ObjectRef, reason: str, message: str) -> bool:
        return self.record(ref, "Warning", reason, message)

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def flush(self) -> None:
        """Wait until every queued Event has been written (or given up on)."""
        await self._queue.join()

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            item = await self._queue.get()
            try:
                await self._write(item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a recorder must outlive any single bad write
                self.stats.failed += 1
                log.warning("event_write_failed", reason=item.reason, error=f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    # -------------------------------------------------------------------------------------- writing

    def _key(self, item: _Pending) -> tuple[str, ...]:
        ref = item.ref
        return (
            self.component,
            self.host,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            ref.api_version,
            item.type,
            item.reason,
            item.message,
        )

    def _allowed(self, key: tuple[str, ...]) -> bool:
        bucket = self._spam.get(key)
        if bucket is None:
            bucket = TokenBucket(self._spam_qps, self._spam_burst, self._clock)
            self._spam[key] = bucket
            if len(self._spam) > self._cache_size:
                self._spam.popitem(last=False)
        else:
            self._spam.move_to_end(key)
        return bucket.try_acquire()

    def _event_name(self, ref: ObjectRef, at: float) -> str:
        nanos = int(at * 1e9)
        # Two Events for the same object within one clock tick (a frozen virtual clock) still get
        # distinct names.
        if nanos <= self._last_nanos:
            nanos = self._last_nanos + 1
        self._last_nanos = nanos
        return f"{ref.name}.{nanos:x}"

    async def _write(self, item: _Pending) -> None:
        key = self._key(item)
        if not self._allowed(key):
            self.stats.throttled += 1
            return
        namespace = item.ref.namespace or "default"
        now = _rfc3339(item.stamp)
        seen = self._seen.get(key)
        if seen is not None and item.at - seen.last_seen <= self._window_s:
            seen.count += 1
            seen.last_seen = item.at
            self._seen.move_to_end(key)
            patch = {"count": seen.count, "lastTimestamp": now, "message": item.message}
            path = api_path("", "v1", "events", namespace=seen.namespace, name=seen.name)
            try:
                await self._client.merge_patch(path, patch, timeout_s=self._write_timeout_s)
            except NotFound:
                # The Event expired (the API server's event TTL): start a new one.
                del self._seen[key]
            else:
                self.stats.patched += 1
                return
        name = self._event_name(item.ref, item.at)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": item.ref.to_json(),
            "reason": item.reason,
            "message": item.message,
            "type": item.type,
            "source": {"component": self.component, "host": self.host},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        await self._client.create(
            api_path("", "v1", "events", namespace=namespace), body, timeout_s=self._write_timeout_s
        )
        self.stats.created += 1
        self._seen[key] = _Seen(namespace, name, 1, now, item.at)
        if len(self._seen) > self._cache_size:
            self._seen.popitem(last=False)

    def discard_pending(self) -> int:
        """Drop whatever is still queued (shutdown without waiting); returns how many were dropped."""
        before = self.stats.dropped
        with contextlib.suppress(asyncio.QueueEmpty):
            while True:
                self._queue.get_nowait()
                self._queue.task_done()
                self.stats.dropped += 1
        return self.stats.dropped - before
