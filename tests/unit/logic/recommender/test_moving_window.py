"""The moving-window recommender: its three models, the per-container margin, decreases only at interval
boundaries, the ladder, upstream's CPU and fallback, and state that rebuilds after a restart."""

from __future__ import annotations

import dataclasses

import pytest

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.checkpointing import aggregate_from_checkpoint_status, checkpoint_status
from vpa.logic.recommender.estimation import PercentilePodRecommender
from vpa.logic.recommender.moving_window import (
    MovingWindowConfig,
    MovingWindowPodRecommender,
    interval_start,
    ladder_step_up,
    moving_window_limit,
)
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore
from vpa.replay.replaying import Replayer

MIB = 1024 * 1024
GIB = 1024 * MIB
SLOT = 300.0
TINY = 1e-9  # a model's margin that takes it out of the maximum
T0 = 1_767_225_600.0  # midnight, a slot and interval boundary

RECENT_ONLY = MovingWindowConfig(daily_margin=TINY, level_margin=TINY, min_margin=1.5, max_margin=1.5)
DAILY_ONLY = MovingWindowConfig(daily_margin=1.0, level_margin=TINY, min_margin=TINY, max_margin=TINY)
LEVEL_ONLY = MovingWindowConfig(daily_margin=TINY, level_margin=1.0, level_quantile=0.5, min_margin=TINY,
                                max_margin=TINY)
MARGIN = MovingWindowConfig(daily_margin=TINY, level_margin=TINY, min_margin=1.0, max_margin=3.0,
                            margin_quantile=1.0, lookback_s=SLOT, half_life_s=1e12)


def limit(peaks: dict[int, float], config: MovingWindowConfig, minimum: float = 0.0) -> float:
    """`moving_window_limit` over slots given as {slot number: peak} (lookback maxima computed here)."""
    slots = sorted(peaks)
    values = [peaks[s] for s in slots]
    lookback = config.lookback_slots
    before = [max((peaks[o] for o in slots if s - lookback <= o < s), default=0.0) for s in slots]
    return moving_window_limit(slots, values, before, SLOT, config, minimum)


@pytest.mark.parametrize(("peaks", "config", "minimum", "expected"), [
    # Nothing held: no limit.
    ({}, RECENT_ONLY, 0.0, 0.0),
    # Recent, inside the first interval (slots 0-11): the interval's own peak × margin.
    ({0: 800.0, **dict.fromkeys(range(1, 12), 100.0)}, RECENT_ONLY, 0.0, 1200.0),
    # The next interval (starting at slot 12): slot 11 counts at age 0, slot 0 decayed by 2^(-11/12).
    ({0: 800.0, **dict.fromkeys(range(1, 13), 100.0)}, RECENT_ONLY, 0.0, 1.5 * 800.0 * 2 ** (-11 / 12)),
    # Same time yesterday, for the interval starting at slot 300: slots 6 (one day and 30 min earlier)
    # to 35 (one day minus 1 h after the interval's end, i.e. 1 h after it, a day ago); 5 and 36 are out.
    ({5: 900.0, 6: 500.0, 35: 400.0, 36: 1000.0, 300: 1.0}, DAILY_ONLY, 0.0, 500.0),
    # Level: the median of the slots before the interval (1..12 at slots 0..11; interval starts at 12).
    ({**{s: float(s + 1) for s in range(12)}, 12: 0.5}, LEVEL_ONLY, 0.0, 6.0),
    # Margin: the largest jump (150 over 100 in the slot before) → 1.5 × the largest peak.
    ({**dict.fromkeys(range(12), 100.0), 6: 150.0, 12: 100.0}, MARGIN, 0.0, 225.0),
    # Jumps are measured against at least the per-pod minimum: none left above 1 → the margin's floor.
    ({**dict.fromkeys(range(12), 100.0), 6: 150.0, 12: 100.0}, MARGIN, 200.0, 150.0),
    # No jump measurable yet (first interval): the largest margin.
    ({0: 100.0, 1: 100.0}, MARGIN, 0.0, 300.0),
])
def test_moving_window_limit(peaks: dict[int, float], config: MovingWindowConfig, minimum: float,
                             expected: float) -> None:
    assert limit(peaks, config, minimum) == pytest.approx(expected)


@pytest.mark.parametrize(("value", "step", "expected"), [
    (MIB, 0.1, MIB),                      # on a rung
    (1.05 * MIB, 0.1, 1.1 * MIB),         # up to the next rung
    (1.1 * MIB, 0.1, 1.1 * MIB),          # on a rung (no float creep to the one above)
    (1.0 * GIB, 0.1, MIB * 1.1 ** 73),    # 1.1^72 < 1024 < 1.1^73
    (123.0, 0.0, 123.0),                  # step 0: unchanged
    (0.0, 0.1, 0.0),
])
def test_ladder_step_up(value: float, step: float, expected: float) -> None:
    assert ladder_step_up(value, step) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("newest", "expected"), [(0, 0), (11, 0), (12, 12), (299, 288)])
def test_interval_start(newest: int, expected: int) -> None:
    assert interval_start(newest, SLOT, MovingWindowConfig()) == expected


@pytest.mark.parametrize(("change", "message"), [
    ({"slot_s": 0}, "slot_s"),
    ({"half_life_s": -1}, "half_life_s"),
    ({"decrease_interval_s": 0}, "decrease_interval_s"),
    ({"min_margin": 2.0, "max_margin": 1.5}, "max_margin"),
    ({"window_s": 86_400.0}, "window_s"),
    ({"level_quantile": 0}, "level_quantile"),
    ({"margin_quantile": 1.5}, "margin_quantile"),
    ({"step": -0.1}, "step"),
    ({"daily_before_s": -1}, "daily_before_s"),
    ({"min_history_s": -1}, "min_history_s"),
])
def test_invalid_config(change: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MovingWindowConfig(**change)


# --- the recommender -------------------------------------------------------------------------------------


def _state(memory: list[float], config: AggregationConfig) -> AggregateContainerState:
    """An aggregate with a CPU sample and a memory sample every 5 minutes from T0."""
    state = AggregateContainerState(config, T0)
    for index, value in enumerate(memory):
        at = T0 + index * SLOT
        state.add_cpu_sample(200 + (index % 7) * 10, at)
        state.add_memory_peak(int(value), at)
        assert state.recent is not None
        state.recent.add(value, at)
    return state


RECOMMENDER = MovingWindowPodRecommender()
TRACKING = RECOMMENDER.aggregation(AggregationConfig())


def test_upstreams_recommendation_until_an_hour_is_held() -> None:
    state = _state([GIB] * 11, TRACKING)  # 55 minutes
    assert RECOMMENDER.recommend({"app": state}) == PercentilePodRecommender().recommend({"app": state})


def test_cpu_is_upstreams_and_memory_bounds_equal_the_target() -> None:
    state = _state([GIB] * 30, TRACKING)
    ours = RECOMMENDER.recommend({"app": state})["app"]
    default = PercentilePodRecommender().recommend({"app": state})["app"]
    assert ours.target.cpu_millicores == default.target.cpu_millicores
    assert ours.lower_bound.cpu_millicores == default.lower_bound.cpu_millicores
    assert ours.upper_bound.cpu_millicores == default.upper_bound.cpu_millicores
    memory = ours.target.memory_bytes
    assert memory is not None
    assert ours.lower_bound.memory_bytes == memory == ours.upper_bound.memory_bytes
    # A steady 1 GiB: the level model (× 1.1) on the next 10% rung, below upstream's target.
    assert memory == int(ladder_step_up(1.1 * GIB, 0.1))
    assert memory < (default.target.memory_bytes or 0)


def test_per_pod_minimum_and_controlled_resources() -> None:
    small = RECOMMENDER.recommend({"app": _state([10 * MIB] * 30, TRACKING)})["app"]
    assert small.target.memory_bytes == 250 * MIB
    state = _state([GIB] * 30, TRACKING)
    state.controlled_resources = ("cpu",)
    only_cpu = RECOMMENDER.recommend({"app": state})["app"]
    assert only_cpu.target.memory_bytes is None
    assert only_cpu.upper_bound.memory_bytes is None


def test_memo_does_not_change_the_result() -> None:
    state = _state([GIB, 2 * GIB, GIB] * 20, TRACKING)
    first = RECOMMENDER.recommend({"app": state})
    assert state.recent is not None
    assert state.recent.memo
    assert RECOMMENDER.recommend({"app": state}) == first
    fresh = _state([GIB, 2 * GIB, GIB] * 20, TRACKING)  # same samples, empty memo
    assert RECOMMENDER.recommend({"app": fresh}) == first


def test_after_a_restart_upstreams_recommendation_until_recent_usage_refills() -> None:
    state = _state([GIB] * 300, TRACKING)
    restored = aggregate_from_checkpoint_status(checkpoint_status(state, T0 + 300 * SLOT), TRACKING, T0)
    assert restored.recent is not None
    assert len(restored.recent) == 0
    assert (RECOMMENDER.recommend({"app": restored})
            == PercentilePodRecommender().recommend({"app": restored}))


def test_only_its_own_core_keeps_recent_usage() -> None:
    ours = RecommenderCore(RecommenderConfig(), MovingWindowPodRecommender())
    upstream = RecommenderCore(RecommenderConfig())
    assert ours.config.aggregation.tracks_recent_usage
    assert not upstream.config.aggregation.tracks_recent_usage


def test_replayed_target_rises_at_once_and_falls_only_at_interval_starts() -> None:
    """Replay two days of a container idling at 300 MiB with a 1.5 GiB burst every 7 hours, recomputing
    every 5 minutes: after a burst sample the next target covers it; a target below the previous one
    only comes in the first recomputation of a new interval (hour)."""
    replayer = Replayer(RecommenderConfig(), "moving-window")
    previous: int | None = None
    burst_seen = False
    for index in range(2 * 288):
        at = T0 + index * SLOT
        if index:
            items = replayer.recommendations(at)
            memory = items[0].target.memory_bytes if items else None
            if memory is not None and previous is not None and index >= 13:
                newest_slot = int((at - SLOT) // SLOT)
                if memory < previous:
                    assert newest_slot % 12 == 0, f"decrease inside an interval at sample {index}"
                if burst_seen:
                    assert memory >= 1.5 * GIB
            previous = memory
        burst = index % 84 == 42
        burst_seen = burst
        replayer.apply(at, "app", 0.2, int(1.5 * GIB) if burst else 300 * MIB, False)


def test_default_sample_path_is_unchanged() -> None:
    """With upstream's algorithm no aggregate keeps recent usage (its sample path stays upstream's)."""
    replayer = Replayer(RecommenderConfig(), "default")
    replayer.apply(T0, "app", 0.2, GIB, False)
    aggregates = replayer.core.cluster.merged_states("replay", "app").values()
    assert aggregates
    assert all(a.recent is None for a in aggregates)


def test_window_config_reaches_the_aggregates() -> None:
    window = dataclasses.replace(MovingWindowConfig(), slot_s=60.0, lookback_s=600.0)
    aggregation = MovingWindowPodRecommender(window=window).aggregation(AggregationConfig())
    state = AggregateContainerState(aggregation, T0)
    assert state.recent is not None
    assert (state.recent.slot_s, state.recent.lookback_slots) == (60.0, 10)
