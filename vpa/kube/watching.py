"""Watch caches (informers): LIST then WATCH one resource and keep a trimmed, indexed copy in memory.

Owns: the list/watch loop for one collection (optionally one namespace, label and field selectors), its
cache keyed by `(namespace, name)`, secondary indexes, in-order event delivery to handlers, sync state, and
recovery: paged LIST parsed item by item in slices of a few milliseconds (the next page downloading
meanwhile) while the cyclic GC is paused, each object applied to the cache as it is parsed; WATCH from
the LIST's resourceVersion with bookmarks and a server-side `timeoutSeconds` plus a client read timeout; on
410 Gone (LIST continue, WATCH answer or an ERROR event) a fresh LIST that *replaces* the cache, synthesising
delete, update and add events for the difference (applied to the cache as each page is parsed, never
building a second cache beside it; an object LISTed at the resourceVersion the cache holds is the same
object, and is neither transformed nor applied again); reconnects with jittered backoff after any error; and a
watchdog that restarts a watch that has delivered neither event nor bookmark for `stall_timeout_s` of wall
time (never of the simulated clock the process may follow).

Size: over 600 lines because `WatchCache` is one state machine (LIST, WATCH, relist on 410, reconnect,
watchdog) over one cache and its indexes; every path changes the same state, and it reads best whole.

Must not: hand raw API dicts to anyone (`transform` turns them into model objects; `None` skips a malformed
or uninteresting object), block the event loop between pages, register global metrics, or write anything.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import gc
import operator
import random
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Final, Generic, TypeVar

import orjson
import structlog

from vpa.aio.cancelling import cancel_and_wait
from vpa.aio.pacing import paced
from vpa.kube import reachability
from vpa.kube.client import ApiError, Gone, KubeClient, Query
from vpa.kube.paging import PagedList
from vpa.model.clock import Clock, RealClock

T = TypeVar("T")
Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

log = structlog.get_logger(__name__)


@dataclass
class WatchStats:
    """Counters of what a cache has been through; also reported one by one to the `observer` hook."""

    lists: int = 0  # complete LISTs (the initial one included)
    relists: int = 0  # LISTs after the first (410 Gone, or an unrecoverable watch error)
    list_restarts: int = 0  # paged LISTs started over because the continue token expired
    unchanged: int = 0  # objects a re-LIST found at the cached resourceVersion (kept, not transformed again)
    watches: int = 0  # WATCH requests opened
    restarts: int = 0  # watches that ended and were reopened (server timeout, drop, stall, error)
    events: int = 0  # ADDED/MODIFIED/DELETED events applied
    bookmarks: int = 0
    gone: int = 0  # 410 answers
    stalls: int = 0  # watches restarted by the watchdog
    errors: int = 0  # failed LIST/WATCH attempts (followed by backoff)
    malformed: int = 0  # objects the transform rejected (or without metadata.name)
    handler_errors: int = 0  # exceptions raised by event handlers (logged, then ignored)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def counter_observer(counter: Any) -> Callable[[str, str, int], None]:
    """An `observer` that increments a `prometheus_client.Counter` with labels `cache` and `what` (a
    `WatchStats` field name), as `vpa_watch_cache_events_total` has them.

    The caller creates the counter (on whichever registry it owns); nothing is registered here.
    """

    def observe(cache: str, what: str, n: int) -> None:
        counter.labels(cache=cache, what=what).inc(n)

    return observe


_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic GC off while any cache LISTs (nested and interleaved LISTs share one pause): parsing tens
    of MB allocates millions of objects, and the GC would otherwise run full collections over the growing
    cache again and again (see research/tooling.md §2). When the last LIST ends, what was
    allocated meanwhile is frozen (moved out of the GC's generations; reference counting still frees it)
    before the GC resumes: the young collection that would otherwise follow at once scans every object the
    LIST created, and the parsed objects hold no reference cycles."""
    global _gc_pauses, _gc_was_enabled
    if _gc_pauses == 0:
        _gc_was_enabled = gc.isenabled()
        gc.disable()
    _gc_pauses += 1
    try:
        yield
    finally:
        _gc_pauses -= 1
        if _gc_pauses == 0 and _gc_was_enabled:
            gc.freeze()
            gc.enable()


def _as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


_OBJECT: Final = operator.itemgetter(1)  # an entry's object (C-level, for `list()` of 50,000)


class _Stalled(Exception):
    """The watchdog fired: no event or bookmark for too long."""


class WatchCache(Generic[T]):
    """An informer for one collection path, e.g. `/api/v1/pods` or `/apis/g/v/namespaces/ns/plural`.

    Run it with `task = asyncio.create_task(cache.run())`; `await cache.wait_synced()` before trusting it.
    Handlers run synchronously inside the cache's task, in the order the server produced the changes; they
    must be quick (hand work to a queue) and must not mutate the objects.
    """

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        path: str,
        transform: Callable[[dict[str, Any]], T | None],
        *,
        name: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        slice_s: float = 0.003,
        list_timeout_s: float = 60.0,
        watch_timeout_s: int | None = None,
        watch_read_timeout_s: float | None = None,
        stall_timeout_s: float | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        observer: Callable[[str, str, int], None] | None = None,
        rng: random.Random | None = None,
        wall_clock: Clock | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        # The stall watchdog measures the network, so it runs on wall time whatever clock the process
        # follows: on a simulated clock at 300x, 30 s of silence would otherwise be 0.1 s.
        self._wall = wall_clock if wall_clock is not None else RealClock()
        self._path = path
        self._transform = transform
        self.name = name or path
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._page_size = page_size
        self._slice_s = slice_s
        self._list_timeout_s = list_timeout_s
        self._watch_timeout_s = client.options.watch_timeout_s if watch_timeout_s is None else watch_timeout_s
        self._watch_read_timeout_s = (
            self._watch_timeout_s + 60.0 if watch_read_timeout_s is None else watch_read_timeout_s
        )
        self._stall_timeout_s = self._watch_timeout_s + 30.0 if stall_timeout_s is None else stall_timeout_s
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._observer = observer
        self._rng = rng or random.Random()

        # One table of (resourceVersion, object, key), not two. The key is kept in its entry so that a relist
        # can note the objects it saw by the cache's own key objects (`_list`).
        self._entries: dict[Key, tuple[str, T, Key]] = {}
        self._indexers: dict[str, Callable[[T], Iterable[str]]] = {}
        self._indices: dict[str, dict[str, set[Key]]] = {}
        self._on_add: list[Callable[[T], None]] = []
        self._on_update: list[Callable[[T, T], None]] = []
        self._on_delete: list[Callable[[T], None]] = []
        self._rv = ""
        self._synced = asyncio.Event()
        self._last_event = self._wall.monotonic()
        self.stats = WatchStats()

    # ----------------------------------------------------------------------------------- reading

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def resource_version(self) -> str:
        """The resourceVersion the cache is current at (from the last LIST, event or bookmark)."""
        return self._rv

    @property
    def last_event_monotonic(self) -> float:
        """Wall-clock monotonic reading of the last watch line (event or bookmark), or of the last LIST."""
        return self._last_event

    def get(self, namespace: str | None, name: str) -> T | None:
        entry = self._entries.get((namespace or "", name))
        return None if entry is None else entry[1]

    def list(self) -> list[T]:
        return list(map(_OBJECT, self._entries.values()))

    def keys(self) -> builtins.list[Key]:
        return list(self._entries)

    def resource_versions(self) -> dict[Key, str]:
        """Each cached object's resourceVersion (for consistency checks against the server)."""
        return {key: entry[0] for key, entry in self._entries.items()}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    # ----------------------------------------------------------------------------- indexes, handlers

    def add_index(self, name: str, key_fn: Callable[[T], Iterable[str]]) -> None:
        """Maintain `name`: index value → objects; `key_fn` returns every value an object is filed under."""
        if name in self._indexers:
            raise ValueError(f"index {name!r} already exists on {self.name}")
        self._indexers[name] = key_fn
        self._indices[name] = {}
        for key, (_, obj, _) in self._entries.items():
            self._file(name, key_fn, key, obj)

    def has_index(self, name: str) -> bool:
        return name in self._indexers

    def by_index(self, name: str, value: str) -> builtins.list[T]:
        keys = self._indices[name].get(value)
        if not keys:
            return []
        entries = self._entries
        # The webhook reads from its own thread while this loop's handlers change the cache: the keys are
        # copied in one step (tuple() of a set holds the GIL throughout), and a key just removed is skipped.
        return [entry[1] for key in tuple(keys) if (entry := entries.get(key)) is not None]

    def index_values(self, name: str) -> builtins.list[str]:
        return list(self._indices[name])

    def on_add(self, handler: Callable[[T], None]) -> None:
        self._on_add.append(handler)

    def on_update(self, handler: Callable[[T, T], None]) -> None:
        """`handler(old, new)`."""
        self._on_update.append(handler)

    def on_delete(self, handler: Callable[[T], None]) -> None:
        self._on_delete.append(handler)

    # ----------------------------------------------------------------------------------- the loop

    async def run(self) -> None:
        """LIST and WATCH until cancelled. Never returns on its own and never raises on API failures."""
        need_list = True
        failures = 0
        gones = 0  # 410 answers since the last watch that delivered something
        while True:
            try:
                if need_list:
                    await self._list_and_replace()
                    reachability.for_server(self._client.host).answered()
                    need_list = False
                    failures = 0
                progressed = await self._watch_once()
                self._count("restarts")
                failures = 0
                if progressed:
                    gones = 0
                if not progressed:
                    # A server that closes watches at once without a line must not make us spin; a short
                    # pause (not a growing one) keeps recovery fast when it was only a dropped connection.
                    await self._clock.sleep(self._backoff_s(0))
            except asyncio.CancelledError:
                raise
            except Gone as exc:
                self._count("gone")
                log.info("watch_cache_gone", cache=self.name, resource_version=self._rv, error=exc.message)
                need_list = True
                # A 410 is an answer: an outage's failed attempts end here (the first answer of an API server
                # back from a restart is often this one), and only 410 after 410 backs off. Relisting after
                # the outage's grown backoff would leave the cache stale that long for nothing.
                failures = 0
                gones += 1
                if gones > 1:
                    await self._clock.sleep(self._backoff_s(gones - 2))
            except _Stalled:
                self._count("stalls")
                self._count("restarts")
                log.warning(
                    "watch_cache_stalled",
                    cache=self.name,
                    silent_s=self._stall_timeout_s,
                    resource_version=self._rv,
                )
            except Exception as exc:
                self._count("errors")
                delay = self._backoff_s(failures)
                failures += 1
                # No answer at all is said once per outage, naming the server (`reachability`); each
                # cache's own retry is then a debug line.
                transport = isinstance(exc, ApiError) and exc.is_transport
                if transport:
                    reachability.for_server(self._client.host).failed(exc)
                (log.debug if transport else log.warning)(
                    "watch_cache_error",
                    cache=self.name,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in_s=round(delay, 3),
                    relist=need_list,
                )
                if self.has_synced and not need_list:
                    self._count("restarts")
                await self._clock.sleep(delay)

    def _backoff_s(self, attempt: int) -> float:
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2.0 ** min(attempt, 30))
        return ceiling * (0.5 + 0.5 * self._rng.random())

    def _count(self, what: str, n: int = 1) -> None:
        setattr(self.stats, what, getattr(self.stats, what) + n)
        if self._observer is not None:
            try:
                self._observer(self.name, what, n)
            except Exception:  # a metrics hook must never take the cache down
                log.exception("watch_cache_observer_failed", cache=self.name, counter=what)

    def _selectors(self, query: dict[str, str | int | bool]) -> dict[str, str | int | bool]:
        if self._label_selector:
            query["labelSelector"] = self._label_selector
        if self._field_selector:
            query["fieldSelector"] = self._field_selector
        return query

    # ------------------------------------------------------------------------------------------ LIST

    async def _list(self) -> tuple[set[Key], str]:
        """A paged LIST (`PagedList`: parsed an item at a time, paced, the next page downloading meanwhile)
        applied to the cache as it is parsed: each object applied at once (`_upsert`: added, updated, or
        dropped when the cache already holds its resourceVersion). Returns the keys the LIST held (the caller
        deletes the others) and its resourceVersion. Applying as it goes, never building a second cache
        beside the first, keeps a relist's peak memory at the cache plus a page. An object the cache already
        holds at the same resourceVersion (most of a relist's, after a 410) skips the transform: the same
        key and resourceVersion are the same object, and converting every pod again only to drop the copy
        would be much of a relist's CPU (`pod_from_dict`).

        The keys seen are the cache's own key objects (each entry keeps its key), not those just parsed: a
        set of every parsed key (a tuple and a name each, owned by nothing else once their objects were
        dropped) would be freed in one piece when a relist ended."""
        seen: set[Key] = set()
        unchanged = 0

        def restarted() -> None:
            # The continue token outlived the server's compaction window and the LIST starts over,
            # unpaged. What was applied stays (it was the server's state, as a watch event would have
            # been); what the new LIST lacks is deleted at its end.
            self._count("list_restarts")
            log.info("watch_cache_list_restart", cache=self.name, reason="continue token expired")
            seen.clear()

        pages = PagedList(self._client, self._path, self._selectors({}), page_size=self._page_size,
                          slice_s=self._slice_s, timeout_s=self._list_timeout_s, on_restart=restarted)
        with _gc_paused():
            async with contextlib.aclosing(pages.items()) as items:
                entries = self._entries
                async for obj in items:
                    identity = self._identity(obj)
                    if identity is None:
                        del obj
                        continue
                    key, rv = identity
                    entry = entries.get(key)
                    if entry is not None and rv and entry[0] == rv:
                        seen.add(entry[2])
                        unchanged += 1
                        del obj
                        continue
                    value = self._transformed(obj)
                    del obj
                    if value is not None:
                        seen.add(self._upsert(key, rv, value))
                        del value
        if unchanged:
            self._count("unchanged", unchanged)
        return seen, pages.resource_version

    def _convert(self, obj: Any) -> tuple[Key, str, T] | None:
        """(key, resourceVersion, transformed) or None for a malformed/skipped object (counted, logged)."""
        identity = self._identity(obj)
        if identity is None:
            return None
        value = self._transformed(obj)
        return None if value is None else (*identity, value)

    def _identity(self, obj: Any) -> tuple[Key, str] | None:
        """(key, resourceVersion) of an object, None (counted, logged) when it has no metadata.name."""
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name or not isinstance(metadata, dict):
            self._malformed(obj, "no metadata.name")
            return None
        namespace = metadata.get("namespace") or ""
        return (sys.intern(str(namespace)), name), str(metadata.get("resourceVersion") or "")

    def _transformed(self, obj: Any) -> T | None:
        """The transform's value, None (counted, logged) when it fails or rejects the object."""
        try:
            value = self._transform(obj)
        except Exception as exc:
            self._malformed(obj, f"{type(exc).__name__}: {exc}")
            return None
        if value is None:
            self._malformed(obj, "rejected by transform")
            return None
        return value

    def _malformed(self, obj: Any, why: str) -> None:
        self._count("malformed")
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        ident = (
            f"{metadata.get('namespace', '')}/{metadata.get('name', '?')}"
            if isinstance(metadata, dict)
            else "?"
        )
        log.warning("watch_cache_skipped_object", cache=self.name, object=ident, reason=why)

    async def _list_and_replace(self) -> None:
        seen, rv = await self._list()
        first = not self.has_synced
        await self._delete_unseen(seen)
        del seen
        self._count("lists")
        if not first:
            self._count("relists")
        self._rv = rv
        self._last_event = self._wall.monotonic()
        if first:
            log.info("watch_cache_synced", cache=self.name, objects=len(self._entries), resource_version=rv)
        self._synced.set()

    def _upsert(self, key: Key, rv: str, value: T) -> Key:
        """Apply one object, LISTed or from an ADDED/MODIFIED event: add it, replace an older version (telling
        handlers), or keep what the cache holds when its resourceVersion is the same (the new copy is dropped
        at once). Returns the key object the cache keeps for it."""
        entries = self._entries
        entry = entries.get(key)
        if entry is None:
            entries[key] = (rv, value, key)
            self._index_add(key, value)
            self._deliver_add(value)
            return key
        kept = entry[2]
        if entry[0] != rv:
            old = entry[1]
            self._index_remove(kept, old)
            entries[key] = (rv, value, kept)
            self._index_add(kept, value)
            self._deliver_update(old, value)
        return kept

    async def _delete_unseen(self, seen: set[Key]) -> None:
        """Make the cache equal to the LIST that just ended: delete (telling handlers) what it did not hold,
        `paced`. Together with `_upsert` during the LIST this replaces the cache, each change applied whole,
        so a reader between slices sees a cache some of whose objects are newer, as between
        watch events."""
        entries = self._entries
        if len(entries) == len(seen):
            return  # every cached key was LISTed (`seen` only holds keys now in the cache)
        gone = [key for key in entries if key not in seen]
        async for key in paced(gone, self._slice_s):
            entry = entries.pop(key, None)
            if entry is None:
                continue
            old = entry[1]
            self._index_remove(key, old)
            self._deliver_delete(old)

    # ----------------------------------------------------------------------------------------- WATCH

    async def _watch_once(self) -> bool:
        """One WATCH request. Returns whether any line arrived; raises Gone, _Stalled or other errors."""
        query = self._selectors(
            {
                "watch": "true",
                "resourceVersion": self._rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": self._watch_timeout_s,
            }
        )
        self._count("watches")
        self._last_event = self._wall.monotonic()
        progress = [False]
        reader = asyncio.create_task(self._consume(query, progress), name=f"watch:{self.name}")
        watchdog = asyncio.create_task(self._watchdog(), name=f"watchdog:{self.name}")
        try:
            await asyncio.wait({reader, watchdog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait((reader, watchdog))
        if reader.done() and not reader.cancelled() and reader.exception() is None:
            return progress[0]
        if reader.done() and not reader.cancelled():
            exc = reader.exception()
            assert exc is not None
            raise exc
        raise _Stalled()

    async def _watchdog(self) -> None:
        while True:
            remaining = self._last_event + self._stall_timeout_s - self._wall.monotonic()
            if remaining <= 0:
                return
            await self._wall.sleep(remaining)

    async def _consume(self, query: Query, progress: builtins.list[bool]) -> None:
        stream = self._client.stream_lines(self._path, query, read_timeout_s=self._watch_read_timeout_s)
        # A line already buffered is handed over without a pass through the event loop, so a burst of events
        # (a first loop's status writes, a rollout's pods) is `paced` like a LIST's items; the time the
        # stream waited for data counts too, costing at most one spare yield.
        async with contextlib.aclosing(stream) as lines:
            async for line in paced(lines, self._slice_s):
                self._last_event = self._wall.monotonic()
                progress[0] = True
                self._handle_line(line)

    def _handle_line(self, line: bytes) -> None:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ApiError(0, "BadWatchEvent", f"undecodable watch line: {line[:120]!r}") from exc
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if kind == "BOOKMARK":
            metadata = obj.get("metadata") if isinstance(obj, dict) else None
            rv = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
            if rv:
                self._rv = str(rv)
            self._count("bookmarks")
            return
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            code = int(status.get("code") or 0)
            error = ApiError.from_response(code, orjson.dumps(status))
            raise error
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("watch_cache_unknown_event", cache=self.name, type=kind)
            return
        self._count("events")
        self._apply(kind, obj)

    def _apply(self, kind: str, obj: Any) -> None:
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(metadata, dict) and metadata.get("resourceVersion"):
            # The stream's position advances even past objects we skip.
            self._rv = str(metadata["resourceVersion"])
        if kind == "DELETED":
            name = metadata.get("name") if isinstance(metadata, dict) else None
            if not isinstance(name, str) or not isinstance(metadata, dict):
                self._malformed(obj, "no metadata.name")
                return
            key = (str(metadata.get("namespace") or ""), name)
            entry = self._entries.pop(key, None)
            if entry is None:
                return
            old = entry[1]
            self._index_remove(key, old)
            # Hand out the final state when it converts; otherwise the last state we knew.
            try:
                final = self._transform(obj)
            except Exception:
                final = None
            self._deliver_delete(final if final is not None else old)
            return
        converted = self._convert(obj)
        if converted is None:
            # An object that turned malformed must not linger in its last good state.
            name = metadata.get("name") if isinstance(metadata, dict) else None
            if isinstance(name, str) and isinstance(metadata, dict):
                key = (str(metadata.get("namespace") or ""), name)
                gone = self._entries.pop(key, None)
                if gone is not None:
                    self._index_remove(key, gone[1])
                    self._deliver_delete(gone[1])
            return
        # Applied as a LISTed object is: a replay of what the cache holds (re-watch overlap) changes nothing.
        self._upsert(*converted)

    # --------------------------------------------------------------------------- index bookkeeping

    def _index_add(self, key: Key, obj: T) -> None:
        for name, key_fn in self._indexers.items():
            self._file(name, key_fn, key, obj)

    def _file(self, name: str, key_fn: Callable[[T], Iterable[str]], key: Key, obj: T) -> None:
        index = self._indices[name]
        for value in key_fn(obj):
            index.setdefault(value, set()).add(key)

    def _index_remove(self, key: Key, obj: T) -> None:
        for name, key_fn in self._indexers.items():
            index = self._indices[name]
            for value in key_fn(obj):
                bucket = index.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del index[value]

    # ------------------------------------------------------------------------------------- delivery

    def _deliver_add(self, obj: T) -> None:
        for handler in self._on_add:
            self._call(handler, obj)

    def _deliver_update(self, old: T, new: T) -> None:
        for handler in self._on_update:
            try:
                handler(old, new)
            except Exception:
                self._count("handler_errors")
                log.exception("watch_cache_handler_failed", cache=self.name, event="update")

    def _deliver_delete(self, obj: T) -> None:
        for handler in self._on_delete:
            self._call(handler, obj)

    def _call(self, handler: Callable[[T], None], obj: T) -> None:
        try:
            handler(obj)
        except Exception:
            self._count("handler_errors")
            log.exception("watch_cache_handler_failed", cache=self.name)
