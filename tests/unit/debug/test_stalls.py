"""`StallProbe` (`--profiling`'s `/debug/stalls`): a stall held by a busy callback is reported with the loop
thread's CPU time in it (the callback spins for a given CPU time, so a loaded machine only lengthens it)."""

from __future__ import annotations

import asyncio
import time

from vpa.debug.stalls import StallProbe


def _on_a_cpu_ms(heading: str) -> float:
    return float(heading.split("the loop thread on a CPU ", 1)[1].split(" ms", 1)[0])


async def test_a_stall_says_how_much_of_it_the_loop_thread_ran() -> None:
    probe = StallProbe()
    probe.start()
    try:
        await asyncio.sleep(0.02)
        end = time.thread_time() + 0.08
        while time.thread_time() < end:
            pass
        await asyncio.sleep(0.02)
        report = probe.render()
    finally:
        await probe.stop()
    heading = report.split("\n--- ", 2)[1].split("\n", 1)[0]
    assert float(heading.split(" ms", 1)[0]) >= 70.0, report
    assert _on_a_cpu_ms(heading) >= 75.0, report
