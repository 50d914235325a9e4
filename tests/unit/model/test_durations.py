"""Durations: Go `time.ParseDuration` / `Duration.String()`, Prometheus `model.ParseDuration` / `String()`.

Covers: every Go unit and form (fractions, signs, bare 0, concatenated terms, both micro signs), the exact
error cases (missing unit, unknown unit, junk, overflow at the int64 edge), Go's canonical printing, and
Prometheus forms (units in order, integers only, `y`/`w`/`d`) with their printing.
"""

from __future__ import annotations

import pytest

from vpa.model import durations
from vpa.model.durations import DurationError

NS, US, MS, S, M, H = 1, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000, 3_600_000_000_000


@pytest.mark.parametrize(
    ("text", "expected_ns"),
    [
        ("1m", M),
        ("12h", 12 * H),
        ("1h30m", H + 30 * M),
        ("1.5h", H + 30 * M),
        ("300ms", 300 * MS),
        ("10us", 10 * US),
        ("10\u00b5s", 10 * US),
        ("10\u03bcs", 10 * US),
        ("7ns", 7 * NS),
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("0s", 0),
        ("-1m", -M),
        ("+5s", 5 * S),
        (".5s", 500 * MS),
        ("1.s", S),
        ("1.0000000001s", S),  # beyond nanoseconds: truncated like Go
        ("2h45m30.5s", 2 * H + 45 * M + 30 * S + 500 * MS),
        ("1m1m", 2 * M),  # Go accepts repeated units and adds them
        ("0.333333333s", 333_333_333),
        ("9223372036854775807ns", 2**63 - 1),
        ("2562047h47m16.854775807s", 2**63 - 1),
        ("-9223372036854775808ns", -(2**63)),
    ],
    ids=lambda value: str(value),
)
def test_go_duration_parses(text: str, expected_ns: int) -> None:
    assert durations.parse_go_duration_ns(text) == expected_ns


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not a duration"),
        ("abc", "not a duration"),
        ("-", "not a duration"),
        (".", "not a duration"),
        (".s", "not a duration"),
        ("1", "missing unit"),
        ("10", "missing unit"),
        ("1m1", "missing unit"),
        ("1d", 'unknown unit "d"'),
        ("1 m", 'unknown unit " m"'),
        ("1m ", 'unknown unit "m "'),
        ("1M", 'unknown unit "M"'),
        ("1m-5s", 'unknown unit "m-"'),
        ("9223372036854775808ns", "out of range"),
        ("2562047h47m16.854775808s", "out of range"),
        ("99999999999999999999s", "out of range"),
    ],
    ids=lambda value: repr(value),
)
def test_go_duration_rejects(text: str, reason: str) -> None:
    with pytest.raises(DurationError) as caught:
        durations.parse_go_duration_ns(text)
    assert caught.value.reason.startswith(reason)
    assert f'"{text}"' in str(caught.value)


@pytest.mark.parametrize(
    ("nanoseconds", "expected"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1_100, "1.1µs"),
        (2_200_000, "2.2ms"),
        (300 * MS, "300ms"),
        (S, "1s"),
        (1_500 * MS, "1.5s"),
        (10 * S, "10s"),
        (M, "1m0s"),
        (H, "1h0m0s"),
        (24 * H, "24h0m0s"),
        (H + 30 * M, "1h30m0s"),
        (12 * H, "12h0m0s"),
        (-M, "-1m0s"),
        (-(2**63), "-2562047h47m16.854775808s"),
        (2**63 - 1, "2562047h47m16.854775807s"),
    ],
    ids=lambda value: str(value),
)
def test_go_duration_formats(nanoseconds: int, expected: str) -> None:
    assert durations.format_go_duration_ns(nanoseconds) == expected


@pytest.mark.parametrize("text", ["1m0s", "24h0m0s", "1.5s", "300ms", "10µs", "-1h2m3.5s"], ids=str)
def test_go_duration_round_trips(text: str) -> None:
    assert durations.format_go_duration_ns(durations.parse_go_duration_ns(text)) == text


def test_go_duration_seconds_helpers() -> None:
    assert durations.parse_go_duration_s("1m30s") == 90.0
    assert durations.parse_go_duration_s("250ms") == 0.25
    assert durations.format_go_duration_s(86400.0) == "24h0m0s"
    assert durations.format_go_duration_s(0.5) == "500ms"


@pytest.mark.parametrize(
    ("text", "expected_ns"),
    [
        ("0", 0),
        ("8d", 8 * 24 * H),
        ("1w", 7 * 24 * H),
        ("1y", 365 * 24 * H),
        ("1h", H),
        ("1h30m", H + 30 * M),
        ("5m", 5 * M),
        ("30s", 30 * S),
        ("100ms", 100 * MS),
        ("1y2w3d4h5m6s7ms", 365 * 24 * H + 14 * 24 * H + 3 * 24 * H + 4 * H + 5 * M + 6 * S + 7 * MS),
        ("0s", 0),
        ("90d", 90 * 24 * H),
    ],
    ids=lambda value: str(value),
)
def test_prometheus_duration_parses(text: str, expected_ns: int) -> None:
    assert durations.parse_prometheus_duration_ns(text) == expected_ns


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty duration string"),
        ("1", "not a Prometheus duration"),
        ("-1h", "not a Prometheus duration"),
        ("1.5h", 'unknown unit "."'),  # integers only: the "." reads as a unit, as in Prometheus
        ("1m1h", "not a Prometheus duration"),  # largest unit first
        ("1h1h", "not a Prometheus duration"),  # each unit once
        ("d", "not a Prometheus duration"),
        ("1x", 'unknown unit "x"'),
        ("1us", 'unknown unit "us"'),
        ("1h ", 'unknown unit "h "'),
        ("300y", "out of range"),
    ],
    ids=lambda value: repr(value),
)
def test_prometheus_duration_rejects(text: str, reason: str) -> None:
    with pytest.raises(DurationError) as caught:
        durations.parse_prometheus_duration_ns(text)
    assert caught.value.reason.startswith(reason)


@pytest.mark.parametrize(
    ("nanoseconds", "expected"),
    [
        (0, "0s"),
        (8 * 24 * H, "8d"),
        (7 * 24 * H, "1w"),
        (14 * 24 * H, "2w"),
        (365 * 24 * H, "1y"),
        (90 * 24 * H, "90d"),  # not 12w6d: weeks only when exact
        (H, "1h"),
        (H + 30 * M, "1h30m"),
        (25 * H, "1d1h"),
        (1_500 * MS, "1s500ms"),
        (999 * US, "0s"),  # millisecond precision
    ],
    ids=lambda value: str(value),
)
def test_prometheus_duration_formats(nanoseconds: int, expected: str) -> None:
    assert durations.format_prometheus_duration_ns(nanoseconds) == expected


def test_prometheus_seconds_helpers() -> None:
    assert durations.parse_prometheus_duration_s("8d") == 691200.0
    assert durations.format_prometheus_duration_s(3600.0) == "1h"
    with pytest.raises(ValueError):
        durations.format_prometheus_duration_ns(-1)
