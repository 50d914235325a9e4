"""The machinery the simulated controllers and node agent run on: caches, a work queue, virtual-time timers.

Owns: one in-process watch subscription per resource, caches of the objects last seen (watch events plus
the writers' own results, so a controller never acts twice on the same gap), a deduplicating FIFO work queue
of (handler, key) items served by one worker task, a heap of timers in virtual time whose callbacks receive
their due time (so a long `advance()` replays overdue events at the right virtual instants), and `settle()`,
which returns once no event, work item or due timer is pending.

Must not: know any kind's semantics; handlers live in `nodeagent` and `workloads`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vpa.aio.cancelling import cancel_and_wait
from vpa.model.clock import VirtualClock
from vpa.sim.contracts import ApiError, JsonObj, Store, WatchEvent

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
EventHandler = Callable[[str, JsonObj, JsonObj | None], None]
Reconcile = Callable[[Key], Awaitable[None]]
TimerCallback = Callable[[float], Awaitable[None] | None]


def key_of(obj: JsonObj) -> Key:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


def rv_of(obj: JsonObj) -> int:
    """The object's resourceVersion as a number (0 when absent or not a number)."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass
class Cache:
    """Objects of one resource as last seen, with an owner-uid index. Values are store dicts: read-only."""

    resource: str
    objects: dict[Key, JsonObj] = field(default_factory=dict)
    by_owner: dict[str, set[Key]] = field(default_factory=dict)
    by_namespace: dict[str, set[Key]] = field(default_factory=dict)
    _dead: set[str] = field(default_factory=set)

    def apply(self, obj: JsonObj, deleted: bool = False) -> tuple[JsonObj | None, bool]:
        """Record `obj`; returns (previous object, whether the cache changed)."""
        k = key_of(obj)
        md = obj.get("metadata") or {}
        uid = md.get("uid") or ""
        cur = self.objects.get(k)
        cur_uid = (cur.get("metadata") or {}).get("uid") if cur is not None else None
        if deleted:
            if uid:
                self._dead.add(uid)
            if cur is not None and cur_uid == uid:
                self._remove(k, cur)
                return cur, True
            return cur, False
        if uid in self._dead:
            return cur, False
        if cur is not None and cur_uid == uid and rv_of(cur) >= rv_of(obj):
            return cur, False
        if cur is not None:
            self._unindex(k, cur)
        self.objects[k] = obj
        self._index(k, obj)
        return cur, True

    def _remove(self, k: Key, obj: JsonObj) -> None:
        self.objects.pop(k, None)
        self._unindex(k, obj)

    def _index(self, k: Key, obj: JsonObj) -> None:
        self.by_namespace.setdefault(k[0], set()).add(k)
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("uid"):
                self.by_owner.setdefault(ref["uid"], set()).add(k)

    def _unindex(self, k: Key, obj: JsonObj) -> None:
        ns = self.by_namespace.get(k[0])
        if ns is not None:
            ns.discard(k)
            if not ns:
                del self.by_namespace[k[0]]
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            owned = self.by_owner.get(ref.get("uid") or "")
            if owned is not None:
                owned.discard(k)
                if not owned:
                    del self.by_owner[ref["uid"]]

    def get(self, k: Key) -> JsonObj | None:
        return self.objects.get(k)

    def owned_by(self, uid: str) -> list[JsonObj]:
        return [self.objects[k] for k in self.by_owner.get(uid, ()) if k in self.objects]

    def in_namespace(self, namespace: str) -> Iterator[JsonObj]:
        for k in list(self.by_namespace.get(namespace, ())):
            obj = self.objects.get(k)
            if obj is not None:
                yield obj

    def __len__(self) -> int:
        return len(self.objects)


@dataclass(order=True)
class _Timer:
    due: float
    seq: int
    callback: TimerCallback = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Runtime:
    """Watches, caches, the work queue and the timers shared by every simulated controller."""

    def __init__(self, store: Store, clock: VirtualClock) -> None:
        self.store = store
        self.clock = clock
        self.caches: dict[str, Cache] = {}
        self._handlers: dict[str, list[EventHandler]] = {}
        self._queue: OrderedDict[tuple[str, Key], Reconcile] = OrderedDict()
        self._timers: list[_Timer] = []
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[Any]] = []
        self._work = asyncio.Event()
        self._timer_changed = asyncio.Event()
        self._busy = 0
        self.progress = 0  # bumped on every event, work item and timer: settle() watches it
        self.errors = 0
        self._started = False

    # --- registration -----------------------------------------------------------------------------------

    def cache(self, resource: str) -> Cache:
        cache = self.caches.get(resource)
        if cache is None:
            cache = self.caches[resource] = Cache(resource)
        return cache

    def on_event(self, resource: str, handler: EventHandler) -> None:
        """`handler(event_type, obj, previous)` for every watch event of `resource` (after caching it)."""
        self.cache(resource)
        self._handlers.setdefault(resource, []).append(handler)

    # --- lifecycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        for resource in list(self.caches):
            iterator = self.store.subscribe(resource).__aiter__()
            # The first __anext__ registers the watcher; start it before listing so nothing is missed.
            first = asyncio.ensure_future(iterator.__anext__())
            await asyncio.sleep(0)
            self._tasks.append(
                asyncio.create_task(self._consume(resource, iterator, first), name=f"sim-watch-{resource}")
            )
            for obj in self.store.list(resource):
                self._dispatch(resource, "ADDED", obj)
        self._tasks.append(asyncio.create_task(self._worker(), name="sim-worker"))
        self._tasks.append(asyncio.create_task(self._timer_loop(), name="sim-timers"))

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()

    async def _consume(self, resource: str, iterator: Any, first: asyncio.Future[WatchEvent]) -> None:
        try:
            event: WatchEvent = await first
            while True:
                self._dispatch(resource, event.type, event.object)
                event = await iterator.__anext__()
        except StopAsyncIteration:
            return

    def _dispatch(self, resource: str, etype: str, obj: JsonObj) -> None:
        self.progress += 1
        previous, _changed = self.cache(resource).apply(obj, deleted=etype == "DELETED")
        for handler in self._handlers.get(resource, ()):
            try:
                handler(etype, obj, previous)
            except Exception:  # a handler bug must not kill the watch
                self.errors += 1
                log.exception("sim handler for %s failed", resource)

    def observe(self, resource: str, obj: JsonObj | None, deleted: bool = False) -> None:
        """Record the result of one of our own writes in the cache right away (the watch event follows)."""
        if obj is not None:
            self.cache(resource).apply(obj, deleted=deleted)

    # --- work queue -----------------------------------------------------------------------------------------

    def enqueue(self, name: str, key: Key, reconcile: Reconcile) -> None:
        item = (name, key)
        if item not in self._queue:
            self._queue[item] = reconcile
            self._work.set()

    async def _worker(self) -> None:
        while True:
            if not self._queue:
                self._work.clear()
                await self._work.wait()
                continue
            (name, key), reconcile = self._queue.popitem(last=False)
            self._busy += 1
            self.progress += 1
            try:
                await reconcile(key)
            except ApiError as err:
                if err.code in (409, 404):
                    # Conflict or gone: the next watch event (or this retry) brings fresh state.
                    self.after(0.0, _requeue(self, name, key, reconcile))
                else:
                    self.errors += 1
                    log.warning("sim %s %s: %s %s", name, key, err.code, err.message)
                    self.after(5.0, _requeue(self, name, key, reconcile))
            except Exception:
                self.errors += 1
                log.exception("sim %s %s failed", name, key)
                self.after(5.0, _requeue(self, name, key, reconcile))
            finally:
                self._busy -= 1
            # Let watch consumers run between items so caches stay fresh.
            await asyncio.sleep(0)

    # --- timers ---------------------------------------------------------------------------------------------

    def at(self, due: float, callback: TimerCallback) -> _Timer:
        timer = _Timer(due, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        self._timer_changed.set()
        return timer

    def after(self, delay_s: float, callback: TimerCallback) -> _Timer:
        return self.at(self.clock.now() + max(0.0, delay_s), callback)

    @staticmethod
    def cancel(timer: _Timer | None) -> None:
        if timer is not None:
            timer.cancelled = True

    def _next_due(self) -> float | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].due if self._timers else None

    async def _timer_loop(self) -> None:
        while True:
            due = self._next_due()
            now = self.clock.now()
            if due is not None and due <= now:
                timer = heapq.heappop(self._timers)
                self.progress += 1
                self._busy += 1
                try:
                    result = timer.callback(timer.due)
                    if result is not None:
                        await result
                except Exception:
                    self.errors += 1
                    log.exception("sim timer failed")
                finally:
                    self._busy -= 1
                await asyncio.sleep(0)
                continue
            self._timer_changed.clear()
            waiter = asyncio.ensure_future(self._timer_changed.wait())
            sleeper = asyncio.ensure_future(self.clock.sleep(due - now)) if due is not None else None
            waits = [waiter] + ([sleeper] if sleeper is not None else [])
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for fut in waits:
                    if not fut.done():
                        fut.cancel()

    # --- settling -------------------------------------------------------------------------------------------

    def pending(self) -> bool:
        due = self._next_due()
        return bool(self._queue) or self._busy > 0 or (due is not None and due <= self.clock.now())

    async def settle(self, *, quiet_rounds: int = 4, timeout_s: float = 600.0) -> None:
        """Return when no work is queued or running, no timer is due and nothing moved for a few turns."""
        deadline = time.monotonic() + timeout_s
        quiet = 0
        last = -1
        while quiet < quiet_rounds:
            await asyncio.sleep(0)
            if self.pending() or self.progress != last:
                quiet = 0
                last = self.progress
                if time.monotonic() > deadline:
                    log.warning("sim settle gave up after %.0f s with work pending", timeout_s)
                    return
                continue
            quiet += 1


def _requeue(runtime: Runtime, name: str, key: Key, reconcile: Reconcile) -> TimerCallback:
    def fire(_due: float) -> None:
        runtime.enqueue(name, key, reconcile)

    return fire
