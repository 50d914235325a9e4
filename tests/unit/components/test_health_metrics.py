"""The collectors the metrics server exposes as client_golang does: counters named without `_total`
(typed `counter`) and histograms with `_sum` even when buckets are negative."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from vpa.components.health import LoopHistogram, UnsuffixedCounter, render_metrics


def test_unsuffixed_counter_keeps_its_name_and_counter_type() -> None:
    registry = CollectorRegistry()
    counter = UnsuffixedCounter("vpa_things_count", "Things.", ["kind"], registry=registry)
    counter.labels(kind="a").inc()
    counter.labels(kind="a").inc(2)
    counter.labels(kind="b").inc(0)
    text = render_metrics(registry).decode()
    assert "# TYPE vpa_things_count counter\n" in text
    assert 'vpa_things_count{kind="a"} 3.0\n' in text
    assert 'vpa_things_count{kind="b"} 0.0\n' in text
    assert "_total" not in text
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels(kind="a").inc(-1)
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels(other="a")


def test_loop_histogram_buckets_are_inclusive_and_sum_survives_negative_buckets() -> None:
    registry = CollectorRegistry()
    histogram = LoopHistogram("vpa_diffs", "Diffs.", ["r"], (-1.0, 0.0, 1e6), registry=registry)
    for value in (-2.0, -1.0, 0.0, 0.5, 1e6, 3e6):
        histogram.labels("cpu").observe(value)

    def sample(suffix: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"vpa_diffs{suffix}", {"r": "cpu", **labels})

    assert [sample("_bucket", le=le) for le in ("-1.0", "0.0", "1e+06", "+Inf")] == [2.0, 3.0, 5.0, 6.0]
    assert sample("_count") == 6.0
    assert sample("_sum") == -2.0 - 1.0 + 0.5 + 1e6 + 3e6
    assert "# TYPE vpa_diffs histogram\n" in render_metrics(registry).decode()
