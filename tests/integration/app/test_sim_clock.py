"""`--clock=sim`: vpa follows the simulator's virtual time, including manual jumps."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from vpa.kube.client import KubeClient
from vpa.kube.clocking import SimClock, SimClockError
from vpa.model.clock import RealClock
from vpa.sim import SimCluster


async def test_follows_virtual_time_and_jumps() -> None:
    async with SimCluster(nodes=1, behaviour=False, time_scale=0.0) as cluster:
        client = await KubeClient.from_config(RealClock(), kubeconfig=str(cluster.kubeconfig_path))
        clock = SimClock(client, resync_interval_s=0.05)
        try:
            await clock.start()
            assert clock.now() == pytest.approx(cluster.clock.now(), abs=0.01)
            # A sleep of an hour of virtual time ends when the simulator's clock is advanced by an hour.
            sleeper = asyncio.create_task(clock.sleep(3600))
            await asyncio.sleep(0.1)
            assert not sleeper.done()
            cluster.clock.advance(3601)
            await asyncio.wait_for(sleeper, timeout=2)
            assert clock.now() >= cluster.clock.now() - 0.01
            # A running clock is extrapolated at the published scale.
            cluster.clock.set_time_scale(1000.0)
            await asyncio.sleep(0.2)
            before = clock.now()
            await asyncio.sleep(0.1)
            assert clock.now() - before == pytest.approx(100, rel=0.5)
        finally:
            await clock.stop()
            await client.close()


async def test_a_cluster_without_a_virtual_clock_is_a_clear_error(tmp_path: Path) -> None:
    # A real API server has no /sim/v1/clock: anything but the simulator answers 404 there.
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    client = await KubeClient.from_config(RealClock(), kubeconfig=str(kubeconfig))
    try:
        with pytest.raises(SimClockError, match="does not publish a virtual clock"):
            await SimClock(client).start()
    finally:
        await client.close()
        await runner.cleanup()
