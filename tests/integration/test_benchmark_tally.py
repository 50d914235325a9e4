"""The benchmarks' `Tally` against `vpa sim` over HTTPS: a count of VPAs with a recommendation kept by the
project's informer, which follows changes and deletions, stamps when it first reached what it was asked for,
starts over after its watch's version was compacted away, and gives up when the watched process exits."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from benchmarks.control_plane import VPAS, Tally, _vpa, is_recommended
from tests.integration.sim.helpers import tls_session
from vpa.sim import SimCluster

NS = "/apis/autoscaling.k8s.io/v1/namespaces/default/verticalpodautoscalers"


def _recommended() -> dict[str, object]:
    target = {"cpu": "100m", "memory": "100Mi"}
    rec = {"containerName": "app", "target": target, "lowerBound": target, "upperBound": target,
           "uncappedTarget": target}  # fmt: skip
    return {"status": {"recommendation": {"containerRecommendations": [rec]}}}


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster(behaviour=False, bookmark_interval_s=0.2) as c:
        yield c


async def _recommend(http: aiohttp.ClientSession, i: int) -> None:
    async with http.patch(f"{NS}/app-{i:04d}/status", json=_recommended(),
                          headers={"Content-Type": "application/merge-patch+json"}) as resp:  # fmt: skip
        assert resp.status == 200, await resp.text()


def _stamped(tally: Tally) -> bool:
    return tally.reached is not None


async def _eventually(tally: Tally, count: int) -> None:
    for _ in range(200):
        if tally.count == count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the tally stayed at {tally.count}, not {count}")


async def test_the_count_follows_recommendations_deletions_and_a_compacted_watch(cluster: SimCluster) -> None:
    async with tls_session(cluster) as http:
        for i in range(4):
            async with http.post(NS, json=_vpa(i)) as resp:
                assert resp.status == 201
        await _recommend(http, 0)
        tally = Tally(cluster.kubeconfig_path, VPAS, is_recommended)
        try:
            await tally.start()
            assert tally.count == 1  # from the LIST
            tally.expect(3)
            await _recommend(http, 1)
            await _eventually(tally, 2)
            assert not _stamped(tally)
            await _recommend(http, 2)
            await _eventually(tally, 3)
            assert _stamped(tally)  # stamped by the event that made it three
            async with http.delete(f"{NS}/app-0000") as resp:
                assert resp.status == 200
            await _eventually(tally, 2)

            # The watch dropped, its next attempt refused (the tally waits a second), and its version
            # compacted away meanwhile, while a VPA was recommended: the tally lists again and sees it.
            fault = {"verb": "watch", "resource": "verticalpodautoscalers.autoscaling.k8s.io",
                     "code": 500, "count": 1}
            async with http.post("/sim/v1/faults/inject", json=fault) as resp:
                assert resp.status in (200, 201), await resp.text()
            async with http.post("/sim/v1/faults/drop-watches") as resp:
                assert resp.status == 200
            await _recommend(http, 3)
            async with http.post("/sim/v1/faults/compact") as resp:
                assert resp.status == 200
            await _eventually(tally, 3)
            async with http.get("/sim/v1/faults") as resp:
                assert [f["hits"] for f in (await resp.json())["faults"]] == [1]
        finally:
            await tally.close()


async def test_waiting_stops_when_the_watched_process_exits(cluster: SimCluster, tmp_path: Path) -> None:
    tally = Tally(cluster.kubeconfig_path, VPAS, is_recommended)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "print('gone for good')",
                                                stdout=asyncio.subprocess.DEVNULL)  # fmt: skip
    await proc.wait()
    log = tmp_path / "log"
    log.write_text("the process's last words")
    try:
        await tally.start()
        with pytest.raises(RuntimeError, match="the process exited: the process's last words"):
            await tally.until(1, "a recommendation", proc, log, 60)
        assert tally.count == 0
    finally:
        await tally.close()
