"""`Slices`: a paced task alone gets the whole slice of a loop pass; several share one slice per pass, each
still progressing in every pass."""

from __future__ import annotations

import asyncio
import time

from vpa.aio.pacing import MIN_SLICE_S, Slices


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
