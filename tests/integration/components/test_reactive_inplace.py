"""Reactive in-place updates end to end: `vpa run` (recommender and updater) against `vpa sim` on one
virtual clock. With the default flags an OOM kill and a recommendation change reach the pod as an in-place
resize within seconds of virtual time; with the reactive flags off (upstream's behaviour) nothing happens
until the next tick. The scenarios are the benchmark's (`benchmarks/reactive_inplace.py`)."""

from __future__ import annotations

from benchmarks.reactive_inplace import TARGET_S, oom_to_resize, recommendation_to_resize


async def test_a_recommendation_change_is_resized_within_seconds() -> None:
    outcome = await recommendation_to_resize(reactive=True, limit_s=2 * TARGET_S)
    assert outcome.latency_s is not None
    assert outcome.latency_s < TARGET_S


async def test_tick_only_waits_for_the_next_loop() -> None:
    outcome = await recommendation_to_resize(reactive=False, limit_s=2 * TARGET_S)
    assert outcome.latency_s is None  # the next updater loop is 43 s away


async def test_an_oom_kill_raises_memory_in_place_within_seconds() -> None:
    outcome = await oom_to_resize(reactive=True, limit_s=2 * TARGET_S)
    assert outcome.latency_s is not None
    assert outcome.latency_s < TARGET_S
