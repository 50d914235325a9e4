"""The evaluation scorer: per-day relative slack, OOM and throttling proxies, update triggers, time to
first recommendation."""

from __future__ import annotations

import pytest

from vpa.replay.scoring import DAY_S, Scorer, p95

T0 = 100 * DAY_S  # a day boundary
GIB = 2**30


def test_nothing_is_scored_before_the_first_recommendation() -> None:
    scorer = Scorer()
    assert scorer.observe("a", T0, 5.0, 10 * GIB).above_target is False
    [score] = scorer.scores()
    assert (score.days, score.oom_proxies, score.time_to_first_s, score.memory_slack) == (0, 0, None, None)


@pytest.mark.parametrize(("usage", "slack", "mean_slack", "oom"), [
    (GIB // 2, 0.5, 0.5, False),     # half the limit used
    (GIB, 0.0, 0.0, False),          # exactly at the limit: no slack, no overrun
    (2 * GIB, -1.0, 0.0, True),      # above: Autopilot's slack goes negative, the mean slack stops at 0
])
def test_memory_slack_and_oom_proxy(usage: int, slack: float, mean_slack: float, oom: bool) -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (1000, GIB), (500, GIB // 2), (2000, 2 * GIB))
    assert scorer.observe("a", T0 + 60, None, usage).above_target is oom
    [score] = scorer.scores()
    assert score.memory_slack == pytest.approx(slack)
    assert score.memory_mean_slack == pytest.approx(mean_slack)
    assert (score.oom_proxies, score.oom_days) == (int(oom), int(oom))


def test_slack_is_computed_per_day_then_averaged_over_days() -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (1000, 1000), (None, None), (None, None))
    # Day 1, limit 1000 then 2000: usage 100 ×19 and 900 once. p95 of 20 values is the 19th smallest
    # (100); mean limit (1000×10 + 2000×10)/20 = 1500 → (1500 − 100)/1500. Mean slack: 0.9 ×9 + 0.1
    # (usage 900 under 1000) ... computed below sample by sample.
    usages = [100] * 9 + [900] + [100] * 10
    mean_slacks = []
    for index, usage in enumerate(usages):
        if index == 10:
            scorer.recommend("a", T0 + 1000, (1000, 2000), (None, None), (None, None))
        limit = 1000 if index < 10 else 2000
        mean_slacks.append((limit - usage) / limit)
        scorer.observe("a", T0 + 100 + index * 100, None, usage)
    day1, day1_mean = (1500 - 100) / 1500, sum(mean_slacks) / 20
    # Day 2: one sample, 500 under 2000.
    scorer.observe("a", T0 + DAY_S + 10, None, 500)
    day2 = 0.75
    [score] = scorer.scores()
    assert score.days == 2
    assert score.memory_slack == pytest.approx((day1 + day2) / 2)
    assert score.memory_mean_slack == pytest.approx((day1_mean + day2) / 2)
    summary = scorer.summary()
    assert summary.memory_slack == pytest.approx((day1 + day2) / 2)
    assert summary.days == 2


@pytest.mark.parametrize(("values", "expected"), [
    ([5.0], 5.0),
    ([float(v) for v in range(1, 21)], 19.0),   # 19 of 20 values (95%) at or below 19
    ([float(v) for v in range(1, 101)], 95.0),
    ([float(v) for v in range(1, 22)], 20.0),   # 95% of 21 is 19.95: the 20th value
])
def test_p95(values: list[float], expected: float) -> None:
    assert p95(values) == expected


def test_cpu_slack_and_throttling_proxies() -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (500, GIB), (None, None), (None, None))
    scorer.observe("a", T0 + 1, 0.25, None)   # slack 0.5
    scorer.observe("a", T0 + 2, 0.75, None)   # throttled, slack 0
    scorer.observe("a", T0 + DAY_S, 0.75, None)  # throttled on a second day
    [score] = scorer.scores()
    assert (score.throttle_proxies, score.throttle_days) == (2, 2)
    assert score.cpu_mean_slack == pytest.approx((0.25 + 0.0) / 2)
    # Day 1: mean limit 0.5, p95 of (0.25, 0.75) is 0.75 → −0.5; day 2: −0.5.
    assert score.cpu_slack == pytest.approx(-0.5)
    summary = scorer.summary()
    assert summary.throttle_proxies_per_day == pytest.approx(1.0)
    assert summary.throttle_day_share == pytest.approx(1.0)


@pytest.mark.parametrize(("bounds", "updates"), [
    # The request (the first target, 1000m/1Gi) still within the new bounds: no update.
    (((800, GIB // 2), (1200, 2 * GIB)), 0),
    # Below the new lower bound (CPU): an update.
    (((1100, GIB // 2), (1500, 2 * GIB)), 1),
    # Above the new upper bound (memory): an update.
    (((800, GIB // 4), (1200, GIB // 2)), 1),
])
def test_update_triggers(bounds: tuple[tuple[int, int], tuple[int, int]], updates: int) -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (1000, GIB), (900, GIB // 2), (1100, 2 * GIB))
    scorer.recommend("a", T0 + 3600, (1300, GIB // 3), bounds[0], bounds[1])
    [score] = scorer.scores()
    assert score.updates == updates


def test_time_to_first_recommendation() -> None:
    scorer = Scorer()
    scorer.observe("a", T0, 0.1, GIB)
    scorer.recommend("a", T0 + 600, (None, None), (None, None), (None, None))  # nothing yet
    scorer.recommend("a", T0 + 3600, (100, GIB), (None, None), (None, None))
    assert scorer.scores()[0].time_to_first_s == 3600
    assert scorer.summary().mean_time_to_first_s == 3600


# --- what is applied ------------------------------------------------------------------------------------

STEP = 300.0


def _applied_run(usages: list[int], request: int = 1000) -> Scorer:
    """One key, `request` bytes applied at T0 (CPU 1 core), then one memory sample every 5 minutes."""
    scorer = Scorer()
    scorer.recommend("a", T0, (1000, request), (None, None), (None, None))
    scorer.apply("a", T0, 1000, request)
    for index, usage in enumerate(usages):
        scorer.observe("a", T0 + (index + 1) * STEP, None, usage)
    return scorer


def test_one_overrun_run_of_three_samples_is_one_run_and_three_samples() -> None:
    scorer = _applied_run([500, 1500, 1600, 1700, 800])
    [score] = scorer.scores()
    assert (score.memory_overruns, score.memory_runs, score.memory_run_days) == (3, 1, 1)
    summary = scorer.summary()
    assert (summary.memory_overruns, summary.memory_runs, summary.memory_run_day_share) == (3, 1, 1.0)


@pytest.mark.parametrize(("usages", "samples", "runs"), [
    ([500, 900, 1000], 0, 0),                  # at the limit is not over it
    ([1001], 1, 1),
    ([1500, 500, 1500, 500, 1500], 3, 3),      # three separate runs
    ([1500, 1500, 500, 1500, 1500, 1500], 5, 2),
])
def test_overrun_samples_and_runs(usages: list[int], samples: int, runs: int) -> None:
    [score] = _applied_run(usages).scores()
    assert (score.memory_overruns, score.memory_runs) == (samples, runs)


def test_memory_held_and_clipped_slack_follow_the_applied_request() -> None:
    scorer = _applied_run([250, 2000])  # slack 0.75, then 0 (over the limit, clipped)
    scorer.apply("a", T0 + 2 * STEP + 1, 1000, 4000)  # a change, counted on its day
    scorer.observe("a", T0 + 3 * STEP, None, 1000)  # slack 0.75 under 4000
    [score] = scorer.scores()
    # The first sample comes STEP after the first application, with no earlier sample: it holds nothing.
    held = (1000 * STEP + 4000 * STEP) / 2**30 / 3600
    assert score.memory_held_gib_h == pytest.approx(held)
    assert score.memory_applied_slack == pytest.approx((0.75 + 0 + 0.75) / 3)
    assert score.changes == 1
    assert [memory for _, memory, _ in score.applied] == [1000, 4000]
    assert scorer.summary().changes_per_day == pytest.approx(1.0)


def test_a_gap_in_the_trace_holds_at_most_an_hour() -> None:
    scorer = Scorer()
    scorer.observe("a", T0 - STEP, None, 100)  # before the first recommendation: not scored
    scorer.recommend("a", T0, (1000, 1000), (None, None), (None, None))
    scorer.apply("a", T0, 1000, 1000)
    scorer.observe("a", T0 + 5 * 3600, None, 100)  # five hours later
    [score] = scorer.scores()
    assert score.memory_held_gib_h == pytest.approx(1000 / 2**30)


def test_an_overrun_under_a_new_applied_value_is_a_new_run() -> None:
    scorer = _applied_run([1500, 1500])
    scorer.apply("a", T0 + 2 * STEP + 1, 1000, 1200)
    scorer.observe("a", T0 + 3 * STEP, None, 1500)
    [score] = scorer.scores()
    assert (score.memory_overruns, score.memory_runs, score.changes) == (3, 2, 1)


def test_cpu_above_the_applied_request_is_a_throttling_proxy() -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (500, GIB), (None, None), (None, None))
    scorer.apply("a", T0, 500, GIB)
    for index, cores in enumerate([0.25, 0.6, 0.7, 0.1, 0.9]):
        scorer.observe("a", T0 + (index + 1) * STEP, cores, None)
    [score] = scorer.scores()
    assert (score.cpu_overruns, score.cpu_runs, score.cpu_run_days) == (3, 2, 1)
    assert score.cpu_applied_slack == pytest.approx((0.5 + 0 + 0 + 0.8 + 0) / 5)
    assert score.cpu_held_core_h == pytest.approx(0.5 * 4 * STEP / 3600)


def test_overrun_days_are_counted_per_key_day() -> None:
    scorer = _applied_run([1500])
    scorer.observe("a", T0 + DAY_S + 10, None, 500)
    scorer.observe("a", T0 + 2 * DAY_S + 10, None, 1500)
    summary = scorer.summary()
    assert (summary.days, summary.memory_runs) == (3, 2)
    assert summary.memory_run_day_share == pytest.approx(2 / 3)
    assert summary.memory_runs_per_day == pytest.approx(2 / 3)
