"""The watch cache against the simulated API server: sync, order, drops, 410, bookmarks, stalls, indexes."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

import pytest

from vpa.kube.client import KubeClient
from vpa.kube.watching import WatchCache
from vpa.model.clock import VirtualClock
from vpa.sim import SimCluster

from .helpers import (
    CONFIGMAPS,
    Cm,
    cm_from_dict,
    delete_cm,
    ensure_namespace,
    eventually,
    new_client,
    put_cm,
    server_state,
    wait_cache_equals_server,
)


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=1, behaviour=False) as c:
        for ns in ("ns-a", "ns-b", "ns-c"):
            await ensure_namespace(c, ns)
        yield c


@pytest.fixture
def clock() -> VirtualClock:
    # Time runs 20x faster than real time: backoffs of seconds take tens of milliseconds.
    return VirtualClock(time_scale=20.0)


@pytest.fixture
async def client(cluster: SimCluster, clock: VirtualClock) -> AsyncIterator[KubeClient]:
    c = await new_client(cluster, clock)
    async with c:
        yield c


@contextlib.asynccontextmanager
async def running(cache: WatchCache[Cm]) -> AsyncIterator[WatchCache[Cm]]:
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        yield cache
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def cm_cache(
    client: KubeClient, clock: VirtualClock, path: str = CONFIGMAPS, **kwargs: object
) -> WatchCache[Cm]:
    return WatchCache(client, clock, path, cm_from_dict, name="configmaps", **kwargs)  # type: ignore[arg-type]


async def test_initial_paged_sync_equals_server(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    for i in range(230):
        await put_cm(cluster, f"ns-{'abc'[i % 3]}", f"cm-{i:03d}", app=f"app-{i % 7}", i=str(i))
    cache = cm_cache(client, clock, page_size=50)
    synced_before_run = cache.has_synced
    assert not synced_before_run
    async with running(cache):
        assert cache.has_synced
        assert len(cache) == 230
        assert cache.resource_versions() == await server_state(client)
        cm = cache.get("ns-b", "cm-001")
        assert cm is not None
        assert cm.data == (("i", "1"),)
        assert cache.stats.lists == 1
        assert cache.stats.relists == 0
        assert cache.resource_version  # the LIST's resourceVersion


async def test_events_are_delivered_in_order(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    await put_cm(cluster, "ns-a", "before", v="0")
    seen: list[tuple[str, str, str]] = []
    cache = cm_cache(client, clock)
    cache.on_add(lambda cm: seen.append(("add", cm.name, dict(cm.data).get("v", ""))))
    cache.on_update(
        lambda old, new: seen.append(("update", new.name, f"{dict(old.data)['v']}->{dict(new.data)['v']}"))
    )
    cache.on_delete(lambda cm: seen.append(("delete", cm.name, dict(cm.data).get("v", ""))))
    async with running(cache):
        assert seen == [("add", "before", "0")]
        await put_cm(cluster, "ns-a", "x", v="1")
        await put_cm(cluster, "ns-a", "x", v="2")
        await put_cm(cluster, "ns-a", "x", v="3")
        await delete_cm(cluster, "ns-a", "x")
        await put_cm(cluster, "ns-b", "y", v="1")
        await put_cm(cluster, "ns-a", "before", v="9")
        expected = [
            ("add", "before", "0"),
            ("add", "x", "1"),
            ("update", "x", "1->2"),
            ("update", "x", "2->3"),
            ("delete", "x", "3"),
            ("add", "y", "1"),
            ("update", "before", "0->9"),
        ]
        await eventually(lambda: len(seen) >= len(expected), what="all events")
        assert seen == expected
        assert cache.stats.events == 6


async def test_drop_mid_stream_loses_and_duplicates_nothing(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    delivered: list[tuple[str, str]] = []
    cache = cm_cache(client, clock)
    cache.on_add(lambda cm: delivered.append((cm.name, cm.rv)))
    cache.on_update(lambda old, new: delivered.append((new.name, new.rv)))
    async with running(cache):
        for i in range(20):
            await put_cm(cluster, "ns-a", f"cm-{i}", v="1")
        await eventually(lambda: len(cache) == 20, what="first batch")
        # Changes made while the stream is down must be replayed from history on the re-watch.
        cluster.faults.pause()
        assert cluster.faults.drop_watches() >= 1
        for i in range(10):
            await put_cm(cluster, "ns-a", f"cm-{i}", v="2")
        for i in range(10, 15):
            await delete_cm(cluster, "ns-a", f"cm-{i}")
        await put_cm(cluster, "ns-b", "late", v="1")
        cluster.faults.resume()
        await wait_cache_equals_server(cache, client)
        assert cache.stats.relists == 0  # history covered the gap: no re-LIST needed
        assert cache.stats.restarts >= 1
        assert len(delivered) == len(set(delivered)), "an event was delivered twice"
        assert all(
            dict(cm.data)["v"] == "2" for cm in cache.list() if cm.name in {f"cm-{i}" for i in range(10)}
        )


async def test_gone_relists_replaces_cache_and_synthesises_events(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    """After a 410 the LIST replaces the cache with events for the difference; what it holds at the cached
    resourceVersion is kept as it is (counted as unchanged), so only new and changed objects go through the
    transform."""
    for name in ("keep", "change", "vanish"):
        await put_cm(cluster, "ns-a", name, v="1")
    transformed: list[str] = []

    def counting(obj: dict[str, object]) -> Cm | None:
        transformed.append(obj["metadata"]["name"])  # type: ignore[index]
        return cm_from_dict(obj)

    events: list[tuple[str, str]] = []
    cache: WatchCache[Cm] = WatchCache(client, clock, CONFIGMAPS, counting, name="configmaps")
    async with running(cache):
        assert sorted(transformed) == ["change", "keep", "vanish"]
        transformed.clear()
        kept = cache.get("ns-a", "keep")
        cache.on_add(lambda cm: events.append(("add", cm.name)))
        cache.on_update(lambda old, new: events.append(("update", new.name)))
        cache.on_delete(lambda cm: events.append(("delete", cm.name)))
        cluster.faults.pause()  # hold the re-watch until history is gone
        cluster.faults.drop_watches()
        await put_cm(cluster, "ns-a", "change", v="2")
        await delete_cm(cluster, "ns-a", "vanish")
        await put_cm(cluster, "ns-a", "new", v="1")
        cluster.faults.compact()
        cluster.faults.resume()
        await eventually(lambda: cache.stats.relists >= 1, what="a re-LIST")
        await wait_cache_equals_server(cache, client)
        assert cache.stats.gone >= 1
        assert sorted(events) == [("add", "new"), ("delete", "vanish"), ("update", "change")]
        assert cache.get("ns-a", "vanish") is None
        assert dict(cache.get("ns-a", "change").data)["v"] == "2"  # type: ignore[union-attr]
        assert sorted(transformed) == ["change", "new"]
        assert cache.stats.unchanged == 1
        assert cache.get("ns-a", "keep") is kept  # the cached object itself, not a copy


async def test_bookmarks_advance_the_resource_version(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    cache = cm_cache(client, clock, path="/api/v1/namespaces/ns-a/configmaps")
    async with running(cache):
        await eventually(lambda: cache.stats.watches >= 1)
        start_rv = cache.resource_version
        # Changes elsewhere move the server's resourceVersion but produce no event for this cache.
        for i in range(5):
            await put_cm(cluster, "ns-b", f"other-{i}")
        server_rv = (await client.get("/api/v1/namespaces/ns-b/configmaps"))["metadata"]["resourceVersion"]
        await asyncio.sleep(0.05)
        cluster.faults.bookmark()
        await eventually(lambda: cache.stats.bookmarks >= 1, what="a bookmark")
        assert cache.stats.events == 0
        assert int(cache.resource_version) >= int(server_rv) > int(start_rv)
        assert len(cache) == 0
        # After compaction, a re-watch from the bookmarked resourceVersion needs no re-LIST.
        cluster.faults.compact()
        cluster.faults.drop_watches()
        await put_cm(cluster, "ns-a", "mine")
        await eventually(lambda: len(cache) == 1, what="the event after the re-watch")
        assert cache.stats.relists == 0


async def test_hundred_forced_drops_in_a_row(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    rng = random.Random(42)
    names = [f"cm-{i}" for i in range(30)]
    for name in names[:15]:
        await put_cm(cluster, "ns-a", name, v="0")
    delivered: list[tuple[str, str]] = []
    cache = cm_cache(client, clock)
    cache.on_add(lambda cm: delivered.append((cm.name, cm.rv)))
    cache.on_update(lambda old, new: delivered.append((new.name, new.rv)))
    drops = 0
    async with running(cache):
        for round_ in range(100):
            for _ in range(rng.randint(1, 3)):
                name = rng.choice(names)
                ns = rng.choice(["ns-a", "ns-b"])
                if cluster.store.get("configmaps", ns, name) is not None and rng.random() < 0.3:
                    await delete_cm(cluster, ns, name)
                else:
                    await put_cm(cluster, ns, name, v=str(round_))
            # Wait until the cache's watch is open again, then cut it.
            for _ in range(500):
                closed = cluster.faults.drop_watches()
                if closed:
                    drops += 1
                    break
                await asyncio.sleep(0.005)
        assert drops == 100
        await wait_cache_equals_server(cache, client, timeout_s=20)
        fresh = await server_state(client)
        assert cache.resource_versions() == fresh
        for (ns, name), _rv in fresh.items():
            obj = cluster.store.get("configmaps", ns, name)
            assert obj is not None
            assert cache.get(ns, name) == cm_from_dict(obj)
        assert len(delivered) == len(set(delivered)), "an event was delivered twice"
        assert cache.stats.restarts >= 100


async def test_indexes_follow_updates_and_deletes(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    await put_cm(cluster, "ns-a", "one", app="web")
    await put_cm(cluster, "ns-a", "two", app="web")
    await put_cm(cluster, "ns-b", "three", app="db")
    cache = cm_cache(client, clock)
    cache.add_index("app", lambda cm: [cm.app])
    async with running(cache):
        # An index added after the sync is built from what is cached.
        cache.add_index("namespace", lambda cm: [cm.namespace])

        def names(index: str, value: str) -> set[str]:
            return {cm.name for cm in cache.by_index(index, value)}

        assert names("app", "web") == {"one", "two"}
        assert names("namespace", "ns-b") == {"three"}
        await put_cm(cluster, "ns-a", "two", app="db")  # moves between index values
        await delete_cm(cluster, "ns-a", "one")
        await put_cm(cluster, "ns-c", "four", app="web")
        await eventually(lambda: cache.get("ns-c", "four") is not None and cache.get("ns-a", "one") is None)
        await eventually(lambda: names("app", "db") == {"two", "three"}, what="re-indexed update")
        assert names("app", "web") == {"four"}
        assert names("namespace", "ns-a") == {"two"}
        assert names("namespace", "ns-c") == {"four"}
        assert cache.by_index("app", "nothing") == []
        assert "web" in cache.index_values("app")
        await delete_cm(cluster, "ns-c", "four")
        await eventually(lambda: cache.get("ns-c", "four") is None)
        assert "web" not in cache.index_values("app")  # empty buckets are dropped
        with pytest.raises(ValueError):
            cache.add_index("app", lambda cm: [cm.app])


async def test_index_buckets_follow_updates_and_deletes(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    """Index buckets, built as objects arrive or from the cache when the index is added later, answer
    lookups, follow an update that moves an object out, and are dropped once deletes empty them."""
    for name in ("one", "two", "three", "four"):
        await put_cm(cluster, "ns-a", name, app="web")
    await put_cm(cluster, "ns-b", "five", app="db")
    cache = cm_cache(client, clock)
    cache.add_index("app", lambda cm: [cm.app])
    async with running(cache):
        cache.add_index("namespace", lambda cm: [cm.namespace])  # built from the cache

        def names(index: str, value: str) -> set[str]:
            return {cm.name for cm in cache.by_index(index, value)}

        assert names("app", "web") == names("namespace", "ns-a") == {"one", "two", "three", "four"}
        await put_cm(cluster, "ns-a", "two", app="db")
        await eventually(lambda: names("app", "db") == {"two", "five"}, what="re-indexed update")
        assert names("app", "web") == {"one", "three", "four"}
        for name in ("one", "two", "three", "four"):
            await delete_cm(cluster, "ns-a", name)
        await eventually(lambda: not names("namespace", "ns-a"), what="deletes")
        assert "ns-a" not in cache.index_values("namespace")  # the emptied bucket is dropped
        assert "web" not in cache.index_values("app")


async def test_malformed_object_is_skipped_and_counted(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    await put_cm(cluster, "ns-a", "good-1")
    await put_cm(cluster, "ns-a", "bad", malformed="yes")
    await put_cm(cluster, "ns-a", "skipped", skip="yes")
    await put_cm(cluster, "ns-a", "good-2")
    deleted: list[str] = []
    cache = cm_cache(client, clock)
    cache.on_delete(lambda cm: deleted.append(cm.name))
    async with running(cache):
        assert {cm.name for cm in cache.list()} == {"good-1", "good-2"}
        assert cache.stats.malformed == 2
        await put_cm(cluster, "ns-a", "bad", malformed="no")  # repaired: now it appears
        await put_cm(cluster, "ns-a", "good-1", malformed="yes")  # broken: it must not linger
        await put_cm(cluster, "ns-a", "good-3")  # and the cache keeps going
        await eventually(lambda: cache.get("ns-a", "good-3") is not None)
        assert {cm.name for cm in cache.list()} == {"bad", "good-2", "good-3"}
        assert deleted == ["good-1"]
        assert cache.stats.malformed == 3


async def test_stalled_watch_is_restarted(cluster: SimCluster, client: KubeClient) -> None:
    clock = VirtualClock()  # frozen: only the test moves (wall) time
    cache = cm_cache(client, VirtualClock(time_scale=20.0), stall_timeout_s=60.0, wall_clock=clock)
    async with running(cache):
        await eventually(lambda: cache.stats.watches == 1)
        clock.advance(59.0)
        await asyncio.sleep(0.05)
        assert cache.stats.stalls == 0
        clock.advance(2.0)
        await eventually(lambda: cache.stats.stalls == 1, what="the watchdog")
        await eventually(lambda: cache.stats.watches == 2, what="a new watch")
        await put_cm(cluster, "ns-a", "after-stall")
        await eventually(
            lambda: cache.get("ns-a", "after-stall") is not None, what="an event on the new watch"
        )
        assert cache.stats.relists == 0
        assert cache.last_event_monotonic == clock.monotonic()


async def test_namespace_and_label_selector(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    await put_cm(cluster, "ns-a", "web-1", app="web")
    await put_cm(cluster, "ns-a", "db-1", app="db")
    await put_cm(cluster, "ns-b", "web-2", app="web")
    cache = cm_cache(client, clock, path="/api/v1/namespaces/ns-a/configmaps", label_selector="app=web")
    async with running(cache):
        assert [cm.name for cm in cache.list()] == ["web-1"]
        await put_cm(cluster, "ns-a", "web-3", app="web")
        await put_cm(cluster, "ns-a", "db-2", app="db")
        await put_cm(cluster, "ns-b", "web-4", app="web")
        await eventually(lambda: cache.get("ns-a", "web-3") is not None)
        await asyncio.sleep(0.05)
        assert sorted(cm.name for cm in cache.list()) == ["web-1", "web-3"]


async def test_watch_errors_back_off_and_recover(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    cache = cm_cache(client, clock)
    async with running(cache):
        fault = cluster.faults.inject(verb="watch", resource="configmaps", code=500, count=3)
        cluster.faults.drop_watches()
        await put_cm(cluster, "ns-a", "during-errors")
        await eventually(lambda: cache.get("ns-a", "during-errors") is not None, what="recovery")
        assert fault.hits == 3
        assert cache.stats.errors == 3
        await wait_cache_equals_server(cache, client)


async def test_pod_cache_with_the_production_converter(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    from tests.builders import make_pod
    from vpa.kube.converting import Interner, pod_from_dict
    from vpa.model.pod import PodView

    interner = Interner()

    def owner_keys(pod: PodView) -> list[str]:
        return [f"{pod.namespace}/{pod.owner.kind}/{pod.owner.name}"] if pod.owner else []

    for i in range(6):
        raw = make_pod(f"web-{i}", namespace="ns-a" if i < 4 else "ns-b", owner_name=f"web-{i % 2}")
        raw["metadata"].pop("resourceVersion", None)
        raw["metadata"].pop("uid", None)
        await cluster.store.create("pods", raw)
    cache: WatchCache[PodView] = WatchCache(
        client, clock, "/api/v1/pods", lambda obj: pod_from_dict(obj, interner=interner), name="pods"
    )
    cache.add_index("namespace", lambda pod: [pod.namespace])
    cache.add_index("owner", owner_keys)
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        assert len(cache) == 6
        assert {p.name for p in cache.by_index("owner", "ns-a/ReplicaSet/web-0")} == {"web-0", "web-2"}
        assert {p.name for p in cache.by_index("namespace", "ns-b")} == {"web-4", "web-5"}
        await cluster.store.delete("pods", "ns-a", "web-2", grace_period_s=0)
        await eventually(lambda: cache.get("ns-a", "web-2") is None, what="the pod deletion")
        assert {p.name for p in cache.by_index("owner", "ns-a/ReplicaSet/web-0")} == {"web-0"}
        pod = cache.get("ns-a", "web-0")
        assert pod is not None
        assert pod.containers[0].name == "app"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_fast_simulated_clock_does_not_stall_a_quiet_watch(cluster: SimCluster) -> None:
    # 30 s of virtual silence pass in 10 ms at 3000x: the watchdog must measure the network in wall time.
    fast = VirtualClock(time_scale=3000.0)
    async with await new_client(cluster, fast) as client:
        cache = cm_cache(client, fast, path="/api/v1/namespaces/ns-a/configmaps", stall_timeout_s=30.0)
        async with running(cache):
            await asyncio.sleep(1.0)
            assert cache.stats.stalls == 0
            await put_cm(cluster, "ns-a", "still-watching")
            await eventually(lambda: len(cache) == 1, what="an event on the same watch")

async def test_list_and_relist_yield_to_the_event_loop_between_slices(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    """With a zero slice the cache yields after every object it parses and every change a relist applies,
    so other tasks (the webhook, in production) run throughout one 120-object LIST page; the cache still
    ends equal to the server."""
    for i in range(120):
        await put_cm(cluster, "ns-a", f"cm-{i:03d}", i=str(i))
    ticks = [0]
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            ticks[0] += 1
            await asyncio.sleep(0)

    tick_task = asyncio.create_task(ticker())
    cache = cm_cache(client, clock, page_size=500, slice_s=0.0)
    async with running(cache):
        listed = ticks[0]
        assert listed >= 120  # at least one yield per parsed object (one page, one request)
        for i in range(120):
            await put_cm(cluster, "ns-a", f"cm-{i:03d}", i=str(i + 1))
        await wait_cache_equals_server(cache, client)
        relists = cache.stats.relists
        cluster.faults.pause()  # hold the re-watch until history is gone
        cluster.faults.drop_watches()
        for i in range(120):
            await put_cm(cluster, "ns-a", f"cm-{i:03d}", i=str(i + 2))
        cluster.faults.compact()
        before = ticks[0]
        cluster.faults.resume()
        await eventually(lambda: cache.stats.relists > relists, what="a re-LIST")
        assert ticks[0] - before >= 120  # the relist parsed and applied in slices too
        await wait_cache_equals_server(cache, client)
    stop.set()
    await tick_task
