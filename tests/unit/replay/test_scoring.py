"""The evaluation scorer: per-day relative slack, OOM and throttling proxies, update triggers, time to
first recommendation."""

from __future__ import annotations

import pytest

from vpa.replay.scoring import DAY_S, Scorer, p95

T0 = 100 * DAY_S  # a day boundary
GIB = 2**30


def test_nothing_is_scored_before_the_first_recommendation() -> None:
    scorer = Scorer()
    assert scorer.observe("a", T0, 5.0, 10 * GIB) is False
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
    assert scorer.observe("a", T0 + 60, None, usage) is oom
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
