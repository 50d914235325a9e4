"""`StallProbe` on a loop of its own thread (the webhook's): a stall caused by another thread holding the GIL
is counted as waiting, the other thread's stack at that moment is in the report, and so is (where the kernel
keeps scheduler statistics) how much of the stall the loop's thread spent waiting for a CPU, and how much
it spent on one."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vpa.components.loop_thread import LoopThread
from vpa.components.stallprobe import _TICK_S, WAITING, StallProbe, open_schedstat, run_delay_s, steal_s


def _keeps_schedstat() -> bool:
    fd = open_schedstat()
    if fd is not None:
        os.close(fd)
    return fd is not None


def test_run_delay_reads_the_threads_scheduler_wait_or_nothing(tmp_path: Path) -> None:
    assert run_delay_s(None) is None
    garbled = tmp_path / "schedstat"
    garbled.write_bytes(b"no numbers\n")
    assert _read(garbled, run_delay_s) is None
    own = open_schedstat()
    if own is None:
        pytest.skip("this kernel keeps no per-thread scheduler statistics")
    try:
        delay = run_delay_s(own)
        assert delay is not None
        assert delay >= 0.0
    finally:
        os.close(own)


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
        # When sorted() returns and the main thread gives the GIL away, the sampler and the loop's own
        # thread both want it; only if the sampler is first is the stall seen with the main thread still
        # in the hold (the loop's heartbeat first ends the stall unseen). A loaded machine makes the
        # sampler lose that race more often, so hold again, within a bound, until one stall is seen.
        deadline = time.monotonic() + 20.0
        held: list[str] = []
        while not held and time.monotonic() < deadline:
            for _ in range(3):
                _hold_the_gil_in_one_c_call(values)
                await asyncio.sleep(0.02)
            report = probe.render()
            held = _held_by_main(report)
    finally:
        await thread.call(stop())
        await thread.stop()
    assert held, report
    assert max(float(section.split(" ms", 1)[0]) for section in held) >= 20.0, report
    assert any(WAITING[0] in section.split("meanwhile in main:", 1)[0] for section in held), report


def _held_by_main(report: str) -> list[str]:
    """The report's stalls with the main thread seen in the hold (on a loaded machine the loop's thread may
    also stall waiting for a CPU while the main thread sleeps, and such a stall can be listed first)."""
    stalls = [section for section in report.split("\n--- ")[1:] if "meanwhile in main:" in section]
    return [section for section in stalls
            if "_hold_the_gil_in_one_c_call" in section.split("meanwhile in main:", 1)[1]]


async def test_a_stall_says_how_long_its_thread_waited_for_a_cpu() -> None:
    """A loop held by a blocking sleep: its thread neither runs nor waits for a CPU, and the report says
    so (the time runnable in the run queue is a part of the stall, here next to nothing)."""
    if not _keeps_schedstat():
        pytest.skip("this kernel keeps no per-thread scheduler statistics")
    probe = StallProbe()
    probe.start()
    try:
        await asyncio.sleep(0.02)
        time.sleep(0.08)  # noqa: ASYNC251 - the point: the loop thread blocks, a stall wanting no CPU
        await asyncio.sleep(0.02)
        report = probe.render()
    finally:
        await probe.stop()
    heading = report.split("\n--- ", 2)[1].split("\n", 1)[0]
    stall_ms = float(heading.split(" ms", 1)[0])
    assert stall_ms >= 70.0, report
    assert "waiting for a CPU" in heading, report
    cpu_wait_ms = float(heading.split("waiting for a CPU ", 1)[1].split(" ms", 1)[0])
    assert 0.0 <= cpu_wait_ms < stall_ms / 2, report
    assert _on_a_cpu_ms(heading) < stall_ms / 2, report  # asleep: no CPU time of its own


def _on_a_cpu_ms(heading: str) -> float:
    return float(heading.split("the loop thread on a CPU ", 1)[1].split(" ms", 1)[0])


async def test_a_stall_says_how_much_of_it_the_loop_thread_ran() -> None:
    """A loop held by a busy callback: the stall's CPU time, read by the heartbeat on the loop's own thread,
    is most of it (all of it but what a loaded machine's hypervisor takes away)."""
    probe = StallProbe()
    probe.start()
    try:
        await asyncio.sleep(0.02)
        end = time.perf_counter() + 0.08
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0.02)
        report = probe.render()
    finally:
        await probe.stop()
    heading = report.split("\n--- ", 2)[1].split("\n", 1)[0]
    assert float(heading.split(" ms", 1)[0]) >= 70.0, report
    assert _on_a_cpu_ms(heading) >= 30.0, report


def test_steal_is_read_from_the_cpu_line_or_nothing(tmp_path: Path) -> None:
    assert steal_s(None) is None
    stat = tmp_path / "stat"
    stat.write_bytes(b"cpu  10 0 5 100 2 0 1 37 0 0\ncpu0 5 0 2 50 1 0 0 20 0 0\n")
    assert _read(stat, steal_s) == pytest.approx(37 * _TICK_S)
    stat.write_bytes(b"intr 1 2 3\n")
    assert _read(stat, steal_s) is None


def _read(path: Path, reader: Callable[[int], float | None]) -> float | None:
    """`reader` applied to a descriptor of `path`, closed afterwards."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return reader(fd)
    finally:
        os.close(fd)


async def test_a_stall_says_how_much_the_hypervisor_stole_meanwhile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The machine's steal counter read at each heartbeat: a stall's share is its end's value less its start's
    (here a counter that jumps 30 ms while the loop is blocked)."""
    stolen = [1.0]
    stat = tmp_path / "stat"
    stat.write_bytes(b"")
    monkeypatch.setattr("vpa.components.stallprobe.open_stat", lambda: os.open(stat, os.O_RDONLY))
    monkeypatch.setattr("vpa.components.stallprobe.steal_s", lambda fd: None if fd is None else stolen[0])
    probe = StallProbe()
    probe.start()
    try:
        await asyncio.sleep(0.02)
        stolen[0] = 1.03
        time.sleep(0.05)  # noqa: ASYNC251 - the point: the loop thread blocks
        await asyncio.sleep(0.02)
        report = probe.render()
    finally:
        await probe.stop()
    heading = report.split("\n--- ", 2)[1].split("\n", 1)[0]
    assert "hypervisor steal 30 ms" in heading, report


async def test_a_stall_says_when_it_began_on_the_clock_other_processes_read() -> None:
    """Each stall's heading gives its start on `time.monotonic()` (the system's monotonic clock, which a
    benchmark's other processes read too), so it can be set beside what they saw meanwhile."""
    probe = StallProbe()
    probe.start()
    try:
        await asyncio.sleep(0.02)
        before = time.monotonic()
        time.sleep(0.05)  # noqa: ASYNC251 - the point: a stall of known start
        after = time.monotonic()
        await asyncio.sleep(0.02)
        report = probe.render()
    finally:
        await probe.stop()
    heading = report.split("\n--- ", 2)[1].split("\n", 1)[0]
    started = float(heading.split(", from ", 1)[1].split(" s on the monotonic clock", 1)[0])
    assert before - 0.05 <= started <= after, report  # the last heartbeat: a beat before, or a lag
