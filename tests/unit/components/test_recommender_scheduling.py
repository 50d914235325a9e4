"""When the recommender loops and how much it writes per loop: the first loop at once (not an interval after
start), checkpoint writing bounded by the next tick, and checkpoints spread over loops beyond 1,000 VPAs."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.components.test_recommender_slices import (
    T0,
    Listing,
    NoMetrics,
    Resolver,
    Sink,
    _pod,
    _vpa,
)
from vpa.components.recommender import Recommender
from vpa.components.recommender import checkpoints as checkpoints_module
from vpa.components.recommender.loop import tick_forever
from vpa.model.clock import VirtualClock
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings


async def test_first_loop_runs_at_once_then_every_interval() -> None:
    clock = VirtualClock(start=T0)
    started = clock.monotonic()
    calls: list[tuple[float, float]] = []

    async def run_once(next_loop_at: float) -> None:
        calls.append((clock.monotonic() - started, next_loop_at - started))
        if len(calls) == 3:
            raise asyncio.CancelledError

    async def restore() -> None:
        pass

    task = asyncio.create_task(tick_forever(clock, 60.0, None, lambda: None, restore, run_once))
    for _ in range(5):
        await asyncio.sleep(0)
    assert calls == [(0.0, 60.0)]  # upstream's ticker would wait 60 s first
    clock.advance(60.0)
    for _ in range(5):
        await asyncio.sleep(0)
    clock.advance(60.0)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
    assert calls == [(0.0, 60.0), (60.0, 120.0), (120.0, 180.0)]


def _recommender(vpas: int, clock: VirtualClock) -> tuple[Recommender, Sink]:
    pods = [_pod(f"app-{i}-pod", f"app-{i}", "Running") for i in range(vpas)]
    views = [_vpa(f"app-{i}") for i in range(vpas)]
    selectors = {f"app-{i}": Selector.from_match_labels({"app": f"app-{i}"}) for i in range(vpas)}
    sink = Sink()
    rec = Recommender(RecommenderSettings(), pods=Listing(pods), vpas=Listing(views), clock=clock,
                      metrics_source=NoMetrics(), resolver=Resolver(selectors), status_writer=sink,
                      checkpoints=sink)
    return rec, sink


@pytest.mark.parametrize(
    ("vpas", "spread_min", "per_loop"),
    [
        (40, 1000, [40, 40]),  # up to the minimum: every VPA every loop, as upstream
        (40, 10, [10, 10, 10, 10, 10]),  # beyond it: max(workers, minimum, a tenth), oldest first
    ],
    ids=["small-cluster-all", "spread"],
)
async def test_checkpoints_spread_over_loops(monkeypatch: pytest.MonkeyPatch, vpas: int, spread_min: int,
                                             per_loop: list[int]) -> None:
    monkeypatch.setattr(checkpoints_module, "SPREAD_MIN", spread_min)
    clock = VirtualClock(start=T0)
    rec, sink = _recommender(vpas, clock)
    written: list[int] = []
    for _ in per_loop:
        before = len(sink.checkpoints)
        await rec.run_once()
        written.append(len(sink.checkpoints) - before)
        clock.advance(60)
    assert written == per_loop
    # Oldest first: after vpas/per_loop loops every VPA has been written once.
    assert len(set(sink.checkpoints)) == vpas


async def test_checkpoint_writing_stops_before_the_next_tick() -> None:
    clock = VirtualClock(start=T0)
    rec, _ = _recommender(40, clock)
    # The next tick is already (nearly) due: only the guaranteed one VPA per worker is written.
    report = await rec.run_once(next_loop_at=clock.monotonic() + 1.0)
    assert report.checkpoints_written == rec.settings.update_worker_count
    report = await rec.run_once(next_loop_at=clock.monotonic() + 60.0)
    assert report.checkpoints_written == 40
