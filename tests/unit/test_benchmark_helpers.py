"""The benchmarks' shared helpers: the event loop they run `vpa run`'s code on, the steal they report and
the ticker that times and attributes their stalls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import uvloop

from benchmarks import LoopTicker, Stall, cpu_floor, run_loop, steal_share


def test_benchmarks_run_the_components_on_the_loop_vpa_run_uses() -> None:
    async def which() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert issubclass(run_loop(which()), uvloop.Loop)


@pytest.mark.parametrize(
    ("start", "end", "seconds", "cpus", "expected"),
    [
        (10.0, 10.5, 10.0, 2, "0.50 s (2.5% of 2 CPUs)"),
        (3.0, 3.0, 4.0, 1, "0.00 s (0.0% of 1 CPUs)"),
        (None, 1.0, 4.0, 2, "not reported"),  # a kernel without a steal counter
        (1.0, None, 4.0, 2, "not reported"),
        (1.0, 2.0, 0.0, 2, "not reported"),  # an empty window has no share
    ],
)
def test_a_windows_steal_is_given_as_seconds_and_a_share_of_the_cpus(
    monkeypatch: pytest.MonkeyPatch, start: float | None, end: float | None, seconds: float, cpus: int,
    expected: str,
) -> None:
    monkeypatch.setattr("benchmarks.os.cpu_count", lambda: cpus)
    assert steal_share(start, end, seconds) == expected


def test_a_stall_is_described_by_its_parts() -> None:
    stall = Stall(seconds=0.0227, span_s=0.0237, cpu_s=0.0051, wait_s=0.0003, own_s=0.0098)
    assert stall.describe() == ("22.7 ms (of its 23.7 ms: on a CPU 5.1, waiting for one 0.3, neither 18.3);"
                                " the loop's own longest 9.8 ms")
    assert "waiting" not in Stall(0.01, 0.011, 0.011, None, 0.01).describe()  # no per-thread statistics


def test_the_ticker_tells_a_loop_held_on_a_cpu_from_one_blocked_off_it() -> None:
    async def measure() -> tuple[Stall, Stall]:
        ticker = LoopTicker()
        ticker.start()
        await asyncio.sleep(0.02)
        end = time.perf_counter() + 0.04
        while time.perf_counter() < end:  # held on a CPU: its own work
            pass
        await asyncio.sleep(0.02)
        busy = ticker.window()
        await asyncio.sleep(0.02)
        time.sleep(0.04)  # noqa: ASYNC251 - the point: held off any CPU
        await asyncio.sleep(0.02)
        return busy, await ticker.stop()

    busy, blocked = run_loop(measure())
    assert busy.seconds >= 0.035
    assert busy.cpu_s >= 0.010  # all 40 ms but for what a loaded machine's hypervisor takes away
    assert busy.own_s >= 0.010
    assert blocked.seconds >= 0.035
    assert blocked.cpu_s < 0.010
    assert blocked.own_s < 0.010  # the window began afresh: the busy stall is not in it


def _spin_with_one_jump(
    monkeypatch: pytest.MonkeyPatch, wall_jump_s: float, cpu_jump_s: float,
) -> cpu_floor.Spin:
    """`cpu_floor.spin(0.5)` on fake clocks read every 0.1 ms of CPU, the wall clock jumping by
    `wall_jump_s` and the thread's CPU time by `cpu_jump_s` once, after the 1,000th read."""
    reads = {"wall": 0, "cpu": 0}

    def clock(which: str, jump_s: float) -> Callable[[], float]:
        def read() -> float:
            reads[which] += 1
            return reads[which] * 0.0001 + (jump_s if reads[which] > 1000 else 0.0)
        return read

    monkeypatch.setattr("benchmarks.cpu_floor.time.perf_counter", clock("wall", wall_jump_s))
    monkeypatch.setattr("benchmarks.cpu_floor.time.thread_time", clock("cpu", cpu_jump_s))
    return cpu_floor.spin(0.5)


def test_the_cpu_floor_is_the_longest_gap_its_cpu_time_did_not_cover(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spinning thread reads its clocks every 0.1 ms of CPU; once, the vCPU is taken away for 20 ms (no
    read happens meanwhile: the next one finds the wall clock 20 ms on and its CPU time where it was)."""
    found = _spin_with_one_jump(monkeypatch, 0.020, 0.0)
    assert found.without_cpu_s == pytest.approx(0.020, abs=0.0002)
    assert found.share_without == pytest.approx(0.020 / 0.5, abs=0.002)
    assert found.counted_s == pytest.approx(0.0001, abs=0.00002)  # every other step was on a CPU


def test_the_cpu_floor_tells_a_stall_counted_as_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once, one step of the spin takes 15 ms and the thread's CPU time advances by as much (a vCPU
    stopped without the guest's clocks telling it): not a gap without a CPU, the longest counted step."""
    found = _spin_with_one_jump(monkeypatch, 0.015, 0.015)
    assert found.without_cpu_s == 0.0
    assert found.share_without == pytest.approx(0.0, abs=0.001)
    assert found.counted_s == pytest.approx(0.0151, abs=0.0002)
