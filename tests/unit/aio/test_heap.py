"""The GC policy: automatic full collections held back while installed, scheduled ones run and measured,
thresholds restored on cancel."""

from __future__ import annotations

import asyncio
import gc

from prometheus_client import CollectorRegistry

from vpa.aio.heap import HeapKeeper


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_hold_stops_automatic_full_collections_and_restore_undoes_it() -> None:
    before = gc.get_threshold()
    keeper = HeapKeeper()
    keeper.hold()
    try:
        assert keeper.holding
        assert gc.get_threshold()[:2] == before[:2]  # young collections unchanged
        full_before = gc.get_stats()[2]["collections"]
        # Long-lived objects promoted in numbers that start several full collections by default.
        kept = [_Cycle() for _ in range(len(gc.get_objects()) * 2)]
        assert gc.get_stats()[2]["collections"] == full_before
        del kept
    finally:
        keeper.restore()
    assert gc.get_threshold() == before
    assert not keeper.holding


def test_scheduled_collection_frees_cycles_and_is_exported() -> None:
    registry = CollectorRegistry()
    keeper = HeapKeeper(registry)
    cycles = [_Cycle() for _ in range(100)]
    del cycles  # unreachable now; no allocation until the collection, so no young collection frees them first
    collected, seconds = keeper.collect()
    assert collected >= 100
    assert seconds >= 0
    assert registry.get_sample_value("vpa_gc_full_collections_total") == 1
    assert registry.get_sample_value("vpa_gc_full_collection_seconds") == seconds


async def test_run_collects_on_its_interval_and_restores_on_cancel() -> None:
    before = gc.get_threshold()
    registry = CollectorRegistry()
    keeper = HeapKeeper(registry, interval_s=0.05)
    task = asyncio.create_task(keeper.run())
    # At least two collections on the 50 ms interval; a loaded machine may take longer than 0.3 s for them.
    deadline = asyncio.get_running_loop().time() + 10.0
    while (registry.get_sample_value("vpa_gc_full_collections_total") or 0) < 2:
        assert asyncio.get_running_loop().time() < deadline, "fewer than two collections in 10 s"
        await asyncio.sleep(0.05)
    assert keeper.holding
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gc.get_threshold() == before
    runs = registry.get_sample_value("vpa_gc_full_collections_total")
    assert runs is not None
    assert runs >= 2
