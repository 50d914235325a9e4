"""The raise-on-overrun recommender: oom-averse's limit plus headroom, raised to the recent peak × margin once
usage went above it, with a lower bound that makes the updater apply the raise at its next pass."""

from __future__ import annotations

from typing import Any

import pytest

from vpa.logic.recommender.aggregation import AggregateContainerState, AggregationConfig
from vpa.logic.recommender.checkpointing import aggregate_from_checkpoint_status, checkpoint_status
from vpa.logic.recommender.cost_aware import OomAversePodRecommender, pod_recommender_for
from vpa.logic.recommender.raise_on_overrun import (
    RaiseOnOverrunConfig,
    RaiseOnOverrunPodRecommender,
    overrun_raise,
    recent_peak,
    with_headroom,
)
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore
from vpa.replay.evaluating import evaluate_one
from vpa.replay.traces import Trace

MIB = 1024 * 1024
GIB = 1024 * MIB
SLOT = 300.0
HOUR = 3600.0
DAY = 86_400.0
T0 = 1_767_225_600.0  # a midnight

# --- pure functions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("slots", "peaks", "span_s", "expected"), [
    ((), (), HOUR, 0.0),
    # The last hour is the newest slot and the 11 before it (slots 89..100 here).
    ((10, 88, 89, 100), (9.0, 5.0, 3.0, 1.0), HOUR, 3.0),
    ((10, 88, 89, 100), (9.0, 5.0, 3.0, 1.0), DAY, 9.0),
    # A span shorter than a slot still covers the newest slot.
    ((10, 88, 89, 100), (9.0, 5.0, 3.0, 1.0), 1.0, 1.0),
    # Counted back from the newest slot held, not from a clock: a gap leaves the last hour of data.
    ((0, 1, 2), (4.0, 6.0, 2.0), HOUR, 6.0),
])
def test_recent_peak(slots: tuple[int, ...], peaks: tuple[float, ...], span_s: float,
                     expected: float) -> None:
    assert recent_peak(slots, peaks, SLOT, span_s) == expected


@pytest.mark.parametrize(("args", "expected"), [
    # (base, lower, upper, trigger peak, hold peak, margin) -> (target, lower, upper)
    # No peak of the day above the base: the base and its bounds; the lower bound is at least the
    # last hour's peak, so only a request that was overrun is below it.
    ((1000, 800, 1500, 700, 900, 1.2), (1000, 800, 1500)),
    ((1000, 800, 1500, 950, 950, 1.2), (1000, 950, 1500)),
    # A peak of the day above the base: the target is that peak × margin, the upper bound follows.
    ((1000, 800, 1500, 700, 2000, 1.2), (2400, 800, 2400)),
    # ... and when that peak is in the last hour the lower bound is the peak: a request below it (an
    # overrun in progress) is outside the bounds and the updater applies the raise now.
    ((1000, 800, 1500, 2000, 2000, 1.2), (2400, 2000, 2400)),
    # Margin 1: the raise is the peak itself.
    ((1000, 800, 1500, 1100, 1100, 1.0), (1100, 1100, 1500)),
    # A lower bound above the target never stays above it.
    ((1000, 1200, 1500, 0, 0, 1.2), (1000, 1000, 1500)),
])
def test_overrun_raise(args: tuple[float, ...], expected: tuple[float, float, float]) -> None:
    assert overrun_raise(*args) == pytest.approx(expected)


@pytest.mark.parametrize(("limit", "headroom", "reference", "expected"), [
    # Below the reference, the headroom is that share of the limit ...
    (500 * MIB, 0.1, GIB, 550 * MIB),
    (250 * MIB, 0.1, GIB, 275 * MIB),
    (GIB, 0.1, GIB, 1.1 * GIB),
    # ... above it, the same number of bytes whatever the limit (10% of 1 GiB).
    (4 * GIB, 0.1, GIB, 4 * GIB + 0.1 * GIB),
    (100 * GIB, 0.1, GIB, 100 * GIB + 0.1 * GIB),
    (4 * GIB, 0.2, 2 * GIB, 4 * GIB + 0.4 * GIB),
    # No headroom, or no limit: unchanged.
    (4 * GIB, 0.0, GIB, 4 * GIB),
    (0.0, 0.1, GIB, 0.0),
])
def test_with_headroom(limit: float, headroom: float, reference: float, expected: float) -> None:
    assert with_headroom(limit, headroom, reference) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("change", "message"), [
    ({"headroom": -0.1}, "headroom must not be negative"),
    ({"headroom_reference_bytes": 0.0}, "headroom_reference_bytes must be greater than 0"),
    ({"margin": 0.9}, "margin must be at least 1"),
    ({"trigger_s": 0.0}, "trigger_s must be greater than 0"),
    ({"slot_s": -1.0}, "slot_s must be greater than 0"),
    ({"hold_s": 1800.0}, r"hold_s \(1800.0\) must be at least trigger_s \(3600.0\)"),
])
def test_config_rejects(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RaiseOnOverrunConfig(**change)


# --- the recommender --------------------------------------------------------------------------------------

RECOMMENDER = RaiseOnOverrunPodRecommender()
TRACKING = RECOMMENDER.aggregation(AggregationConfig())


LOW = 40 * GIB
HIGH = 100 * GIB
"""A large container (an overrun is cheap per byte for oom-averse), so its limit does not cover a new
peak of 2.5 times its usual one."""


def _state(memory: list[float], days: int = 6, level: float = LOW) -> AggregateContainerState:
    """An aggregate with `days` days of a steady daily peak at `level` in its histogram, then a CPU and a
    memory sample every 5 minutes from the next day on, with `memory` as usage (its peak that day's)."""
    state = AggregateContainerState(TRACKING, T0)
    for day in range(days):
        state.add_memory_peak(int(level), T0 + day * DAY)
    start = T0 + days * DAY
    for index, value in enumerate(memory):
        at = start + index * SLOT
        state.add_cpu_sample(200 + (index % 7) * 10, at)
        assert state.recent is not None
        state.recent.add(value, at)
    if memory:
        state.add_memory_peak(int(max(memory)), start)
    return state


def _with_headroom(memory: int | None) -> int:
    r = RECOMMENDER.raising
    return int(with_headroom(float(memory or 0), r.headroom, r.headroom_reference_bytes))


@pytest.mark.parametrize(("level", "added"), [
    # A large container: about 102 MiB (10% of 1 GiB) above oom-averse's limit.
    (LOW, 0.1 * GIB),
    # A small one: 10% of its limit.
    (400 * MIB, None),
])
def test_without_a_peak_above_the_base_it_is_oom_averses_plus_headroom(level: float,
                                                                       added: float | None) -> None:
    state = _state([0.9 * level] * 24, level=level)
    ours = RECOMMENDER.recommend({"app": state})["app"]
    base = OomAversePodRecommender().recommend({"app": state})["app"]
    base_memory = base.target.memory_bytes or 0
    expected = _with_headroom(base_memory)
    assert ours.target.memory_bytes == expected
    assert expected - base_memory == pytest.approx(added if added is not None else 0.1 * base_memory,
                                                   rel=1e-6)
    assert ours.target.cpu_millicores == base.target.cpu_millicores
    assert ours.upper_bound.memory_bytes == max(expected, base.upper_bound.memory_bytes or 0)
    assert ours.upper_bound.cpu_millicores == base.upper_bound.cpu_millicores
    assert ours.lower_bound.cpu_millicores == base.lower_bound.cpu_millicores
    assert ours.lower_bound.memory_bytes == max(base.lower_bound.memory_bytes or 0, int(0.9 * level))


@pytest.mark.parametrize(("excess", "raised"), [
    # A peak above oom-averse's limit but within the headroom (about 102 MiB here) is no overrun of the
    # base: no raise, the target stays the base with its headroom.
    (0.05 * GIB, False),
    # Just above the headroom: the raise, the peak × margin.
    (0.15 * GIB, True),
])
def test_a_peak_within_the_headroom_is_not_raised_for(excess: float, raised: bool) -> None:
    state = _state([0.9 * LOW] * 24)
    base_memory = OomAversePodRecommender().recommend({"app": state})["app"].target.memory_bytes or 0
    peak = base_memory + excess
    assert state.recent is not None
    state.recent.add(peak, T0 + 6 * DAY + 24 * SLOT)  # recent usage only: the histogram is unchanged
    assert OomAversePodRecommender().recommend({"app": state})["app"].target.memory_bytes == base_memory
    ours = RECOMMENDER.recommend({"app": state})["app"]
    expected = int(RECOMMENDER.raising.margin * peak) if raised else _with_headroom(base_memory)
    assert ours.target.memory_bytes == expected
    assert ours.lower_bound.memory_bytes == int(peak)  # overrun in the last hour: outside the bounds


def test_a_peak_above_the_base_raises_target_and_lower_bound() -> None:
    margin = RECOMMENDER.raising.margin
    state = _state([0.9 * LOW] * 24 + [HIGH] + [0.9 * LOW] * 5)
    ours = RECOMMENDER.recommend({"app": state})["app"]
    base = OomAversePodRecommender().recommend({"app": state})["app"]
    assert (base.target.memory_bytes or 0) < HIGH
    assert ours.target.memory_bytes == int(margin * HIGH)
    assert ours.lower_bound.memory_bytes == HIGH
    assert ours.upper_bound.memory_bytes == max(int(margin * HIGH), base.upper_bound.memory_bytes or 0)
    assert ours.target.cpu_millicores == base.target.cpu_millicores
    # An hour later the peak no longer sets the lower bound; the target holds it for the day.
    later = _state([0.9 * LOW] * 24 + [HIGH] + [0.9 * LOW] * 20)
    held = RECOMMENDER.recommend({"app": later})["app"]
    assert held.target.memory_bytes == int(margin * HIGH)
    assert (held.lower_bound.memory_bytes or 0) < HIGH


def test_the_raise_ends_after_the_hold() -> None:
    hold_slots = int(RECOMMENDER.raising.hold_s / SLOT)
    state = _state([0.9 * LOW] * 24 + [HIGH] + [0.9 * LOW] * (hold_slots + 1))
    ours = RECOMMENDER.recommend({"app": state})["app"]
    base = OomAversePodRecommender().recommend({"app": state})["app"].target
    assert ours.target.memory_bytes == _with_headroom(base.memory_bytes)
    assert ours.target.cpu_millicores == base.cpu_millicores


def test_per_pod_minimum_and_controlled_resources() -> None:
    small = RECOMMENDER.recommend({"app": _state([10 * MIB] * 30, days=0)})["app"]
    # The per-pod minimum, then its headroom (the minimum is kept: the target is never below it).
    assert small.target.memory_bytes == 275 * MIB
    state = _state([0.9 * LOW] * 24 + [HIGH])
    state.controlled_resources = ("cpu",)
    only_cpu = RECOMMENDER.recommend({"app": state})["app"]
    assert only_cpu.target.memory_bytes is None
    assert only_cpu.lower_bound.memory_bytes is None


def test_after_a_restart_the_base_limit_until_new_samples() -> None:
    state = _state([0.9 * LOW] * 24 + [HIGH])
    assert (RECOMMENDER.recommend({"app": state})["app"].target.memory_bytes or 0) > HIGH
    restored = aggregate_from_checkpoint_status(checkpoint_status(state, T0 + 7 * DAY), TRACKING, T0)
    assert restored.recent is not None
    assert len(restored.recent) == 0
    ours = RECOMMENDER.recommend({"app": restored})["app"]
    base = OomAversePodRecommender().recommend({"app": restored})["app"]
    assert ours.target.memory_bytes == _with_headroom(base.target.memory_bytes)
    assert ours.lower_bound == base.lower_bound
    assert ours.upper_bound.memory_bytes == max(_with_headroom(base.target.memory_bytes),
                                                base.upper_bound.memory_bytes or 0)


def test_selected_by_name_and_its_core_keeps_recent_usage() -> None:
    assert type(pod_recommender_for("raise-on-overrun")) is RaiseOnOverrunPodRecommender
    core = RecommenderCore(RecommenderConfig(), pod_recommender_for("raise-on-overrun"))
    assert core.config.aggregation.tracks_recent_usage
    assert core.config.aggregation.recent_usage_window_s == RaiseOnOverrunConfig().hold_s


def _recurring_trace(days: int = 4, hours: int = 24) -> Trace:
    """One large container at 100 GiB for `days` days, then at 130 GiB every other hour for `hours` hours."""
    trace = Trace([], [], [], [], [])
    start = T0 + days * DAY
    for index in range(int((days * DAY + hours * HOUR) / SLOT)):
        at = T0 + 30 + index * SLOT
        high = at >= start and int((at - start) // HOUR) % 2 == 0
        trace.timestamps.append(at)
        trace.containers.append("app")
        trace.cpu_cores.append(0.2)
        trace.memory_bytes.append((130 if high else 100) * GIB)
        trace.oom.append(False)
    return trace


@pytest.mark.parametrize("closed_loop", [False, True])
def test_replayed_recurring_overrun_is_one_run(closed_loop: bool) -> None:
    """A large container whose usage goes 30% above its level every other hour: oom-averse, pricing an
    overrun of so many bytes low, keeps a limit below those peaks and is overrun every time; this one is
    overrun once, raises at the next hourly recomputation and holds the raise."""
    trace = _recurring_trace()
    config = RecommenderConfig()
    ours = evaluate_one(trace, "raise-on-overrun", config, HOUR, closed_loop, plot_keys=0).keys[0]
    base = evaluate_one(trace, "oom-averse", config, HOUR, closed_loop, plot_keys=0).keys[0]
    assert base.memory_runs >= 6
    assert ours.memory_runs == 1
    assert ours.memory_overruns <= 12  # at most the hour up to the next recomputation
    assert ours.changes == 1
    # The raise: the peak × margin; in the closed loop the peak seen is the OOM kill's bumped amount
    # (usage above the limit is never observed), which here is just under 130 GiB.
    raised = ours.applied[-1][1]
    assert raised is not None
    if closed_loop:
        assert 130 * GIB < raised < int(RaiseOnOverrunConfig().margin * 130 * GIB)
    else:
        assert raised == int(RaiseOnOverrunConfig().margin * 130 * GIB)
