"""`vpa sim` holds CPython's automatic full collections back while it serves (as `vpa run` does) and gives
the thresholds back when it stops."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from pathlib import Path
from typing import Any, cast

from vpa.sim.main import _run


class FakeCluster:
    url = "https://127.0.0.1:1"
    kubeconfig_path = Path("kubeconfig")
    version = (1, 35)

    def __init__(self) -> None:
        self.thresholds_while_serving: tuple[int, int, int] | None = None
        self.stopped = False

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True


async def test_full_collections_are_held_while_serving_and_restored_after() -> None:
    before = gc.get_threshold()
    cluster = FakeCluster()

    async def observe_then_stop() -> None:
        await asyncio.sleep(0.1)  # the keeper holds on its first step
        cluster.thresholds_while_serving = gc.get_threshold()
        os.kill(os.getpid(), signal.SIGTERM)

    observer = asyncio.create_task(observe_then_stop())
    assert await _run(cast(Any, cluster)) == 0
    await observer
    assert cluster.stopped
    assert cluster.thresholds_while_serving is not None
    assert cluster.thresholds_while_serving[:2] == before[:2]
    assert cluster.thresholds_while_serving[2] > 1_000_000  # never reached by young collections
    assert gc.get_threshold() == before
