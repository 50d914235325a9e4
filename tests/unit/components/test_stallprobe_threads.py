"""`StallProbe` on a loop of its own thread (the webhook's): a stall caused by another thread holding the GIL
is counted as waiting, and the other thread's stack at that moment is in the report."""

from __future__ import annotations

import asyncio
import random
import threading

from vpa.components.loop_thread import LoopThread
from vpa.components.stallprobe import WAITING, StallProbe


def _hold_the_gil_in_one_c_call(values: list[float]) -> None:
    sorted(values)  # one C call: no switch interval applies inside it


async def test_a_webhook_loop_stall_names_the_main_threads_code() -> None:
    values = [random.random() for _ in range(1_500_000)]
    probe = StallProbe(count_waiting=True, also_sample={"main": threading.get_ident()})
    thread = LoopThread("probe-test")
    thread.start()

    async def start() -> None:
        probe.start()

    async def stop() -> None:
        await probe.stop()

    try:
        await thread.call(start())
        await asyncio.sleep(0.05)
        for _ in range(3):
            _hold_the_gil_in_one_c_call(values)
            await asyncio.sleep(0.02)
        report = probe.render()
    finally:
        await thread.call(stop())
        await thread.stop()
    first = report.split("\n--- ", 2)[1]
    assert float(first.split(" ms", 1)[0]) >= 20.0, report
    own, meanwhile = first.split("meanwhile in main:", 1)
    assert WAITING[0] in own, report
    assert "test_a_webhook_loop_stall_names_the_main_threads_code" in meanwhile or (
        "_hold_the_gil_in_one_c_call" in meanwhile), report
