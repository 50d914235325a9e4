"""Watch-cache paths that need a server misbehaving on cue: expired continue, ERROR events, bad lines."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from typing import Any

import orjson

from vpa.kube.client import KubeClient
from vpa.kube.watching import WatchCache
from vpa.model.clock import VirtualClock

from .helpers import Cm, cm_from_dict, configmap, eventually
from .scripted import ScriptedServer, status_body


def item(name: str, rv: str, **data: str) -> dict[str, object]:
    obj = configmap("ns", name, **data)
    obj["metadata"]["resourceVersion"] = rv
    return obj


def page(items: list[dict[str, object]], rv: str, cont: str = "") -> dict[str, object]:
    metadata = {"resourceVersion": rv}
    if cont:
        metadata["continue"] = cont
    return {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": metadata, "items": items}


def event(kind: str, obj: dict[str, object]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj})


async def start(
    server: ScriptedServer, clock: VirtualClock, transform: Any = cm_from_dict, **kwargs: object
) -> tuple[WatchCache[Cm], asyncio.Task[None]]:
    from kubernetes_asyncio.client import ApiClient, Configuration

    config = Configuration(host=server.url)
    client = KubeClient(ApiClient(config), clock)
    cache: WatchCache[Cm] = WatchCache(client, clock, "/api/v1/configmaps", transform, **kwargs)  # type: ignore[arg-type]
    return cache, asyncio.create_task(cache.run())


def recorded(cache: WatchCache[Cm]) -> list[tuple[str, str]]:
    """What the cache's handlers hear from now on, as (add | update | delete, name)."""
    events: list[tuple[str, str]] = []
    cache.on_add(lambda cm: events.append(("add", cm.name)))
    cache.on_update(lambda old, new: events.append(("update", new.name)))
    cache.on_delete(lambda cm: events.append(("delete", cm.name)))
    return events


async def stop(cache: WatchCache[Cm], task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await cache._client.close()


async def test_expired_continue_token_restarts_the_list_unpaged() -> None:
    clock = VirtualClock(time_scale=50.0)
    async with ScriptedServer() as server:
        server.then(200, page([item("a", "5")], "10", cont="tok-1"))
        server.then(410, status_body(410, "Expired", "The provided continue parameter is too old"))
        server.then(200, page([item("a", "5"), item("b", "11")], "12"))
        server.stream([])  # the watch: ends at once; later requests get the default answer
        cache, task = await start(server, clock, page_size=1)
        try:
            await asyncio.wait_for(cache.wait_synced(), 5)
            assert sorted(cm.name for cm in cache.list()) == ["a", "b"]
            assert cache.stats.list_restarts == 1
            assert cache.resource_version == "12"
            await eventually(lambda: len(server.received) >= 4, what="the watch request")
        finally:
            await stop(cache, task)
    first, second, third = server.received[:3]
    assert first.query["limit"] == "1"
    assert second.query["continue"] == "tok-1"
    assert "limit" not in third.query
    assert "continue" not in third.query
    watch = server.received[3]
    assert watch.query["watch"] == "true"
    assert watch.query["resourceVersion"] == "12"
    assert watch.query["allowWatchBookmarks"] == "true"
    assert watch.query["timeoutSeconds"] == "300"


async def test_a_relist_whose_continue_token_expires_deletes_what_the_unpaged_list_lacks() -> None:
    """A relist that starts over unpaged: what its first pages applied stays applied, and the objects it
    deletes at its end are those cached (before the relist or by its first pages) that the unpaged LIST
    does not hold (in no promised order: the cache is sharded by key hash); an unchanged object is neither
    updated nor deleted."""
    clock = VirtualClock(time_scale=50.0)
    async with ScriptedServer() as server:
        server.then(200, page([item("a", "5"), item("b", "6"), item("c", "7")], "10"))
        server.stream([event("ERROR", status_body(410, "Expired", "too old resource version: 10 (20)"))])
        server.then(200, page([item("a", "5"), item("d", "30")], "40", cont="tok-1"))
        server.then(410, status_body(410, "Expired", "The provided continue parameter is too old"))
        server.then(200, page([item("a", "5"), item("c", "41", v="2"), item("e", "42")], "43"))
        server.stream([])
        cache, task = await start(server, clock, page_size=2)
        events = recorded(cache)
        try:
            await asyncio.wait_for(cache.wait_synced(), 5)
            events.clear()  # the first LIST's adds
            await eventually(lambda: cache.stats.relists == 1, what="the relist")
            assert sorted(cm.name for cm in cache.list()) == ["a", "c", "e"]
            assert cache.stats.list_restarts == 1
            assert cache.resource_version == "43"
            assert events[:3] == [("add", "d"), ("update", "c"), ("add", "e")]
            assert sorted(events[3:]) == [("delete", "b"), ("delete", "d")]
        finally:
            await stop(cache, task)


async def test_error_event_410_relists_and_bad_lines_reconnect() -> None:
    clock = VirtualClock(time_scale=50.0)
    async with ScriptedServer() as server:
        server.then(200, page([item("a", "5", v="1")], "10"))
        server.stream([event("MODIFIED", item("a", "11", v="2")), b"{not json"])
        server.stream(
            [
                event("ADDED", item("b", "12")),
                event("ERROR", status_body(410, "Expired", "too old resource version: 12 (20)")),
            ]
        )
        server.then(200, page([item("b", "12"), item("c", "21")], "22"))
        cache, task = await start(server, clock)
        try:
            await eventually(lambda: cache.stats.relists == 1, what="relist after the ERROR event")
            assert sorted(cm.name for cm in cache.list()) == ["b", "c"]
            assert cache.stats.gone == 1
            assert cache.stats.errors == 1  # the undecodable line
            assert cache.resource_version == "22"
        finally:
            await stop(cache, task)
    queries = [r.query for r in server.received]
    assert queries[1]["resourceVersion"] == "10"
    assert queries[2]["resourceVersion"] == "11"  # resumed after the last good event
    assert "watch" not in queries[3]


class _TimedServer(ScriptedServer):
    """Records, per request, when it arrived on `clock` (virtual seconds)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock
        self.times: list[float] = []

    async def _handle(self, request: Any) -> Any:
        self.times.append(self.clock.now())
        return await super()._handle(request)


async def test_a_410_after_an_outage_relists_at_once() -> None:
    """An API server back from a restart answers the resumed watch 410: the cache relists at once, not after
    the backoff the outage's failed attempts grew (the cache would stay stale that long), while a 410 after
    a 410 still backs off."""
    clock = VirtualClock(time_scale=50.0)
    gone = status_body(410, "Expired", "too old resource version: 10 (20)")
    timed = _TimedServer(clock)
    async with timed as server:
        server.then(200, page([item("a", "5")], "10"))
        for _ in range(6):
            server.then(503, status_body(503, "ServiceUnavailable", "the server is restarting"))
        server.then(410, gone)  # request 7: the resumed watch, once the server is back
        server.then(200, page([item("b", "21")], "22"))  # 8: the relist
        server.then(410, gone)  # 9: the next watch, 410 again
        server.then(200, page([item("b", "21")], "23"))  # 10: a second relist, after a pause
        server.stream([])
        cache, task = await start(server, clock)
        try:
            await eventually(lambda: cache.stats.relists == 2, what="both relists")
            assert [cm.name for cm in cache.list()] == ["b"]
        finally:
            await stop(cache, task)
    t = timed.times
    assert t[6] - t[5] >= 4.0, "the outage's attempts back off"
    assert t[8] - t[7] < 1.0, f"relisted {t[8] - t[7]:.1f} s after the first answer"
    assert t[10] - t[9] >= 0.25, "a 410 after a 410 backs off"


class _Tracked:
    """A cached value whose copies alive at once are counted (weak references)."""

    def __init__(self, cm: Cm) -> None:
        self.namespace, self.name, self.rv = cm.namespace, cm.name, cm.rv
        self.app, self.data = cm.app, cm.data


async def test_relist_applies_each_page_to_the_cache_without_a_second_copy() -> None:
    """A relist of 40 objects in pages of 10, 36 of them unchanged: the cache is updated as each page is
    parsed, so at no point are more values alive than the cache holds plus the one being converted (a relist
    that built a new cache beside the old one before swapping would hold up to 80); handlers hear exactly
    the difference."""
    clock = VirtualClock(time_scale=50.0)
    live: weakref.WeakSet[_Tracked] = weakref.WeakSet()
    peak = [0]

    def tracked(obj: dict[str, Any]) -> _Tracked | None:
        cm = cm_from_dict(obj)
        if cm is None:
            return None
        value = _Tracked(cm)
        live.add(value)
        peak[0] = max(peak[0], len(live))
        return value

    names = [f"cm-{i:02d}" for i in range(40)]
    listed = [item(name, "5") for name in names]
    relisted = [item(name, "5") for name in names[:36]] + [item(names[36], "30", v="2"), item("new", "31")]
    async with ScriptedServer() as server:
        server.then(200, page(listed, "10"))
        server.stream([event("ERROR", status_body(410, "Expired", "too old resource version: 10 (20)"))])
        for at in range(0, 40, 10):
            cont = f"tok-{at}" if at + 10 < 40 else ""
            server.then(200, page(relisted[at:at + 10], "40", cont=cont))
        server.stream([])
        cache, task = await start(server, clock, transform=tracked, page_size=10)
        events = recorded(cache)
        try:
            await asyncio.wait_for(cache.wait_synced(), 5)
            events.clear()  # the first LIST's adds
            peak[0] = 0
            await eventually(lambda: cache.stats.relists == 1, what="the relist")
            assert sorted(cache.keys()) == sorted(("ns", n) for n in [*names[:37], "new"])
            assert cache.resource_version == "40"
            assert sorted(events) == [
                ("add", "new"), ("delete", "cm-37"), ("delete", "cm-38"), ("delete", "cm-39"),
                ("update", "cm-36"),
            ]
            assert peak[0] <= 41, f"{peak[0]} values alive at once during the relist"
        finally:
            await stop(cache, task)


async def test_a_burst_of_watch_events_is_handled_in_slices() -> None:
    # 3,000 events of 0.1 ms each, sent at once: buffered lines are handed over without passing through the
    # event loop, so without slices one network chunk (hundreds of events) would hold it in one go.
    clock = VirtualClock()
    order: list[str] = []

    def slow(obj: dict[str, Any]) -> Cm | None:
        until = time.perf_counter() + 0.0001
        while time.perf_counter() < until:
            pass
        order.append("event")
        return cm_from_dict(obj)

    async def ticker() -> None:
        while True:
            order.append("tick")
            await asyncio.sleep(0)

    async with ScriptedServer() as server:
        server.then(200, page([], "10"))
        server.stream([event("ADDED", item(f"cm-{i}", str(11 + i))) for i in range(3000)])
        cache, task = await start(server, clock, transform=slow, slice_s=0.003)
        tick = asyncio.create_task(ticker())
        try:
            await eventually(lambda: len(cache.list()) == 3000, what="every event applied")
        finally:
            tick.cancel()
            await stop(cache, task)
    longest = run = 0
    for what in order:
        run = run + 1 if what == "event" else 0
        longest = max(longest, run)
    # About 30 events per 3 ms slice; a whole chunk of the stream is several hundred.
    assert longest < 150, longest
