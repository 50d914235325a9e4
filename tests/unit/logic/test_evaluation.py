"""The evaluation scorer: per-day relative slack, OOM and throttling proxies, update triggers, time to
first recommendation."""

from __future__ import annotations

import pytest

from vpa.logic.evaluation import DAY_S, Scorer

T0 = 100 * DAY_S  # a day boundary
GIB = 2**30


def test_nothing_is_scored_before_the_first_recommendation() -> None:
    scorer = Scorer()
    assert scorer.observe("a", T0, 5.0, 10 * GIB) is False
    [score] = scorer.scores()
    assert (score.days, score.oom_proxies, score.time_to_first_s, score.memory_slack) == (0, 0, None, None)


@pytest.mark.parametrize(("usage", "slack", "oom"), [
    (GIB // 2, 0.5, False),     # half the limit used
    (GIB, 0.0, False),          # exactly at the limit: no slack, no overrun
    (2 * GIB, 0.0, True),       # above: no slack (not negative), an OOM proxy
])
def test_memory_slack_and_oom_proxy(usage: int, slack: float, oom: bool) -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (1000, GIB), (500, GIB // 2), (2000, 2 * GIB))
    assert scorer.observe("a", T0 + 60, None, usage) is oom
    [score] = scorer.scores()
    assert score.memory_slack == pytest.approx(slack)
    assert (score.oom_proxies, score.oom_days) == (int(oom), int(oom))


def test_slack_is_averaged_per_day_then_over_days() -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (1000, 1000), (None, None), (None, None))
    # Day 1: three samples at slack 0, 0, 0.9 → 0.3; day 2: one sample at slack 0.5 → 0.5.
    for offset, usage in ((10, 1000), (20, 1000), (30, 100)):
        scorer.observe("a", T0 + offset, None, usage)
    scorer.observe("a", T0 + DAY_S + 10, None, 500)
    [score] = scorer.scores()
    assert score.days == 2
    assert score.memory_slack == pytest.approx(0.4)
    summary = scorer.summary()
    assert summary.memory_slack == pytest.approx(0.4)
    assert summary.days == 2


def test_cpu_slack_and_throttling_proxies() -> None:
    scorer = Scorer()
    scorer.recommend("a", T0, (500, GIB), (None, None), (None, None))
    scorer.observe("a", T0 + 1, 0.25, None)   # slack 0.5
    scorer.observe("a", T0 + 2, 0.75, None)   # throttled, slack 0
    scorer.observe("a", T0 + DAY_S, 0.75, None)  # throttled on a second day
    [score] = scorer.scores()
    assert (score.throttle_proxies, score.throttle_days) == (2, 2)
    assert score.cpu_slack == pytest.approx((0.25 + 0.0) / 2)
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
