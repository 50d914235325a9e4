"""Watch drops and 410 Expired under churn, then a final cache-equals-server check.

`watch_churn_scenario` runs a `WatchCache` against a `SimCluster` over loopback HTTPS while objects are
created, updated and deleted; every round cuts the cache's watch (`faults.drop_watches`), and every
`gone_every`-th round also pauses the API, changes objects and compacts history (`faults.compact`), so the
re-watch gets 410 Expired and the cache must re-LIST. At the end the cache must equal the server (every
object at its resourceVersion) and no event may have been delivered twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass

from tests.integration.kube.helpers import (
    CONFIGMAPS,
    cm_from_dict,
    delete_cm,
    ensure_namespace,
    new_client,
    put_cm,
    server_state,
    wait_cache_equals_server,
)
from vpa.kube.watching import WatchCache
from vpa.model.clock import VirtualClock
from vpa.sim import SimCluster


@dataclass
class WatchChurnResult:
    drops: int = 0
    gones: int = 0
    relists: int = 0
    objects: int = 0
    duplicate_events: int = 0
    cache_equals_server: bool = False


async def watch_churn_scenario(
    *, rounds: int, gone_every: int = 5, names: int = 40, seed: int = 13
) -> WatchChurnResult:
    rng = random.Random(seed)
    result = WatchChurnResult()
    clock = VirtualClock(time_scale=20.0)  # back-offs of seconds take tens of milliseconds
    async with SimCluster(nodes=1, behaviour=False) as cluster:
        for ns in ("ns-a", "ns-b"):
            await ensure_namespace(cluster, ns)
        client = await new_client(cluster, clock)
        async with client:
            cache = WatchCache(client, clock, CONFIGMAPS, cm_from_dict, name="configmaps")
            delivered: list[tuple[str, str, str]] = []
            cache.on_add(lambda cm: delivered.append((cm.namespace, cm.name, cm.rv)))
            cache.on_update(lambda _old, new: delivered.append((new.namespace, new.name, new.rv)))
            task = asyncio.create_task(cache.run())
            try:
                await asyncio.wait_for(cache.wait_synced(), 10)
                for round_ in range(rounds):
                    gone = round_ % gone_every == gone_every - 1
                    if gone:
                        cluster.faults.pause()  # hold the re-watch until history is gone
                    for _ in range(rng.randint(1, 4)):
                        ns, name = rng.choice(["ns-a", "ns-b"]), f"cm-{rng.randrange(names)}"
                        if cluster.store.get("configmaps", ns, name) is not None and rng.random() < 0.3:
                            await delete_cm(cluster, ns, name)
                        else:
                            await put_cm(cluster, ns, name, v=str(round_))
                    if gone:
                        cluster.faults.drop_watches()
                        cluster.faults.compact()
                        cluster.faults.resume()
                        result.drops += 1
                        continue
                    for _ in range(500):  # wait until the watch is open again, then cut it
                        if cluster.faults.drop_watches():
                            result.drops += 1
                            break
                        await asyncio.sleep(0.005)
                await wait_cache_equals_server(cache, client, timeout_s=30)
                fresh = await server_state(client)
                result.cache_equals_server = cache.resource_versions() == fresh and all(
                    cache.get(ns, name) == cm_from_dict(cluster.store.get("configmaps", ns, name) or {})
                    for ns, name in fresh
                )
                result.objects = len(fresh)
                result.duplicate_events = len(delivered) - len(set(delivered))
                result.gones = cache.stats.gone
                result.relists = cache.stats.relists
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return result
