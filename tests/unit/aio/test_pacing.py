"""`Slices`: a paced task alone gets the whole slice of a loop pass; several share one slice per pass, each
still progressing in every pass. `Deference`: a paced task of another thread waits at its slice boundary while
the owning thread's work is under way, until it is done or for at most `max_wait_s`."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from vpa.aio import pacing
from vpa.aio.pacing import MIN_SLICE_S, Deference, Slices


def _item() -> None:
    until = time.perf_counter() + 0.0001  # 0.1 ms of CPU per item
    while time.perf_counter() < until:
        pass


async def _passes(tasks: int, items: int) -> list[list[int]]:
    """Items done by each task between two runs of a ticker that yields every pass."""
    passes: list[list[int]] = [[0] * tasks]
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            passes.append([0] * tasks)
            await asyncio.sleep(0)

    async def work(index: int) -> None:
        slices = Slices(0.003)
        for _ in range(items):
            _item()
            passes[-1][index] += 1
            if slices.due():
                await slices.pause()

    tick = asyncio.create_task(ticker())
    await asyncio.gather(*(work(i) for i in range(tasks)))
    done.set()
    await tick
    return [p for p in passes if sum(p)]


async def test_a_task_alone_gets_the_whole_slice() -> None:
    passes = await _passes(1, 600)
    assert max(sum(p) for p in passes) >= 20  # about 30 items of 0.1 ms in a 3 ms slice


async def test_tasks_share_one_slice_per_pass_and_each_progresses() -> None:
    passes = await _passes(4, 600)
    steady = passes[2:-4]  # after the first passes (each task's first slice is whole) and before the ends
    assert steady
    # Four tasks of their own 3 ms slices would do about 120 items per pass; sharing one, about 30-40.
    assert max(sum(p) for p in steady) < 80, max(sum(p) for p in steady)
    assert all(all(n >= 1 for n in p) for p in steady)  # none waits a pass out
    assert MIN_SLICE_S <= 0.003 / 4


async def test_a_slice_smaller_than_the_minimum_is_kept() -> None:
    others = [Slices(0.003) for _ in range(3)]
    zero = Slices(0.0)
    for _ in range(3):
        await asyncio.gather(*(s.pause() for s in [*others, zero]))
        assert zero.budget_s == 0.0  # yields after every item, as asked
        assert all(s.budget_s == 0.003 / 4 for s in others)  # 3 ms shared by four


def _on_thread(work: object) -> None:
    thread = threading.Thread(target=work)  # type: ignore[arg-type]
    thread.start()
    thread.join()


def _timed_defer(deference: Deference) -> float:
    started = time.perf_counter()
    deference.defer()
    return time.perf_counter() - started


def test_nothing_wanted_means_no_wait() -> None:
    deference = Deference(max_wait_s=1.0)
    assert _timed_defer(deference) < 0.05
    _on_thread(deference.wanted)
    _on_thread(deference.unwanted)  # a wake-up that brought no work
    assert _timed_defer(deference) < 0.05
    assert deference.waits == 0


def test_other_threads_wait_until_the_work_is_done() -> None:
    deference = Deference(max_wait_s=5.0)
    entered = threading.Event()
    release = threading.Event()

    def review() -> None:
        deference.enter()
        deference.unwanted()  # a read without data in the middle of a review does not end it
        entered.set()
        release.wait()
        time.sleep(0.05)
        deference.leave()

    owner = threading.Thread(target=review)
    owner.start()
    entered.wait()
    release.set()
    waited = _timed_defer(deference)
    owner.join()
    assert 0.04 <= waited < 2.0
    assert deference.waits == 1
    assert deference.waited_s == pytest.approx(waited, abs=0.01)


def test_the_wait_is_bounded_and_the_owner_never_waits() -> None:
    deference = Deference(max_wait_s=0.05)
    waits: list[float] = []

    def owner() -> None:
        deference.enter()  # never left
        waits.append(_timed_defer(deference))

    _on_thread(owner)
    assert waits[0] < 0.02
    assert 0.0 <= _timed_defer(deference) <= 0.05 + 0.02
    assert _timed_defer(deference) < 0.02  # past `max_wait_s` since it was last wanted: no wait at all


async def test_slices_defer_at_their_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    deference = Deference(max_wait_s=0.05, pass_max_s=1.0)
    monkeypatch.setattr(pacing, "DEFERENCE", deference)
    _on_thread(deference.enter)
    slices = Slices(0.0)
    started = time.perf_counter()
    await slices.pause()
    assert time.perf_counter() - started >= 0.04
    assert deference.waits == 1


async def test_one_loop_pass_gives_way_for_at_most_its_budget() -> None:
    """Work wanted throughout: waits in one pass add up to `pass_max_s`, then the pass carries on without
    waiting; the loop's next pass may give way again."""
    deference = Deference(max_wait_s=1.0, pass_max_s=0.03)
    entered = threading.Event()
    done = threading.Event()

    def review() -> None:  # a review under way that never ends while the test runs
        deference.enter()
        entered.set()
        done.wait()
        deference.leave()

    owner = threading.Thread(target=review)
    owner.start()
    entered.wait()
    try:
        first = _timed_defer(deference)
        second = _timed_defer(deference)
        assert 0.02 <= first + second <= 0.03 + 0.02
        assert _timed_defer(deference) < 0.005  # the pass's budget is spent
        assert deference.cut_short >= 1
        await asyncio.sleep(0)  # the next pass
        await asyncio.sleep(0)
        assert 0.02 <= _timed_defer(deference) <= 0.03 + 0.02
    finally:
        done.set()
        owner.join()


def test_without_a_running_loop_each_wait_is_bounded_alone() -> None:
    deference = Deference(max_wait_s=0.05, pass_max_s=0.001)
    _on_thread(deference.enter)  # never left
    assert 0.04 <= _timed_defer(deference) <= 0.05 + 0.02


def test_a_timer_that_falls_due_in_a_slice_runs_before_the_next_slice_on_uvloop() -> None:
    """The loop `vpa run` uses: a timer (the lag monitor's, a lease renewal's) that fell due while a slice
    ran wakes its task ahead of the slice's next step, so a tick waits for one slice, not two."""
    import uvloop

    async def run() -> list[str]:
        log: list[str] = []
        done = asyncio.Event()

        async def ticker() -> None:
            while not done.is_set():
                log.append("tick")
                await asyncio.sleep(0.001)  # due within every 3 ms slice

        async def paced() -> None:
            slices = Slices(0.003)
            for _ in range(600):  # 60 ms of items, about 20 slices
                _item()
                if slices.due():
                    log.append("slice")
                    await slices.pause()
            done.set()

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.002)
        await paced()
        await ticking
        return log

    log = uvloop.run(run())
    assert log.count("slice") >= 10
    pattern = "".join("s" if entry == "slice" else "t" for entry in log)
    assert "ss" not in pattern, pattern  # never two slices without a tick between them
