"""Go-exact arithmetic: Pow by repeated squaring, Exp2, Log, ResourceAmount conversions, Go time rounding."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vpa.logic.recommender.numerics import (
    GO_NAN_AS_INT64,
    MAX_RESOURCE_AMOUNT,
    amount_from_float,
    cpu_amount_from_cores,
    go_exp2,
    go_log,
    go_pow,
    go_round_time,
    go_truncate_duration,
    scale_amount,
)

MIDNIGHT = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400.0


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (1.05, 0, 1.0),
        (1.05, 1, 1.05),
        (2.0, 10, 1024.0),
        (2.0, -2, 0.25),
        (math.inf, 1, math.inf),  # no history: upper bound factor 1 + 1/0
        (math.inf, -2, 0.0),  # no history: lower bound factor (1 + 0.001/0)^-2
        (0.0, -2, math.inf),
    ],
    ids=["zero-exponent", "one", "power-of-two", "negative", "inf-one", "inf-negative", "zero-negative"],
)
def test_go_pow_special_and_exact_cases(x: float, y: float, expected: float) -> None:
    assert go_pow(x, y) == expected


def test_go_pow_differs_from_c_pow_where_upstream_says() -> None:
    # Spec §3.8: the memory bucket 4 start truncates to 43101249 with Go's Pow, 43101250 with C's pow.
    growth = 1.05 - 1
    assert int(1e7 * (go_pow(1.05, 4) - 1) / growth) == 43_101_249
    assert int(1e7 * (math.pow(1.05, 4) - 1) / growth) == 43_101_250


def test_go_pow_negative_two_is_one_over_square() -> None:
    # Spec §3.8: the lower-bound factor is 1/(x·x), which differs from x**-2 in the last place for some x.
    for history in (1 / 24, 1.0, 7.0, 8.0, 12.345):
        x = 1 + 0.001 / history
        assert go_pow(x, -2) == 1 / (x * x)


@given(st.floats(min_value=-60.0, max_value=120.0, allow_nan=False))
def test_go_exp2_is_within_one_ulp_of_the_true_value(x: float) -> None:
    assert abs(go_exp2(x) - 2.0**x) <= 2 * math.ulp(2.0**x)


@pytest.mark.parametrize("k", [-3, 0, 1, 7, 99, 100], ids=lambda k: f"2^{k}")
def test_go_exp2_is_exact_at_integers(k: int) -> None:
    assert go_exp2(float(k)) == 2.0**k


@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False))
def test_go_log_is_within_one_ulp_of_the_true_value(x: float) -> None:
    assert abs(go_log(x) - math.log(x)) <= 2 * math.ulp(math.log(x)) + 1e-300


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5, 500),
        (0.0999, 99),  # truncation, not rounding: 99.9 m -> 99 m
        (-0.2, 0),  # negative amounts clamp to 0
        (2e11, MAX_RESOURCE_AMOUNT),  # clamp to 1e14 millicores
    ],
    ids=["half-core", "truncates", "negative", "clamps"],
)
def test_cpu_amount_from_cores(value: float, expected: int) -> None:
    assert cpu_amount_from_cores(value) == expected


def test_nan_amount_is_go_integer_indefinite() -> None:
    assert amount_from_float(math.nan) == GO_NAN_AS_INT64
    assert scale_amount(0, math.inf) == GO_NAN_AS_INT64  # 0 × Inf
    assert scale_amount(5, math.inf) == MAX_RESOURCE_AMOUNT


@pytest.mark.parametrize(
    ("unix_s", "step_s", "expected"),
    [
        (MIDNIGHT + 11 * 3600, DAY, MIDNIGHT),  # 11:00 rounds down to midnight
        (MIDNIGHT + 12 * 3600, DAY, MIDNIGHT + DAY),  # exactly half rounds up
        (MIDNIGHT + 13 * 3600, DAY, MIDNIGHT + DAY),
        (MIDNIGHT + 1799, 3600.0, MIDNIGHT),
        (MIDNIGHT + 5.5, 0.0, MIDNIGHT + 5.5),  # non-positive step: unchanged
    ],
    ids=["down", "half-up", "up", "hour", "zero-step"],
)
def test_go_round_time_counts_from_year_one(unix_s: float, step_s: float, expected: float) -> None:
    assert go_round_time(unix_s, step_s) == expected


@pytest.mark.parametrize(
    ("duration_s", "step_s", "expected"),
    [(0.0, DAY, 0.0), (DAY - 1, DAY, 0.0), (DAY, DAY, DAY), (2.5 * DAY, DAY, 2 * DAY)],
    ids=["zero", "just-under", "exact", "two-and-half"],
)
def test_go_truncate_duration(duration_s: float, step_s: float, expected: float) -> None:
    assert go_truncate_duration(duration_s, step_s) == expected


# Outputs of Go's math package (go1.19.8 linux/amd64) for inputs where C's libm gives a different last bit.
# Decay exponents of minutely samples with a 24 h half-life (k/1440), Log arguments of FindBucket for k
# millicores (k/1000 × 0.05/0.01 + 1), lower-bound factors for 1 day and 8 days of history, bucket starts.
@pytest.mark.parametrize(
    ("function", "argument", "go_result"),
    [
        (go_exp2, 86 / 1440, "0x1.0ad1e216da1b6p+0"),
        (go_exp2, 97 / 1440, "0x1.0c3c836f7b02ep+0"),
        (go_exp2, 131 / 1440, "0x1.10a9965546ee8p+0"),
        (go_log, 18 / 1000 * 0.05 / 0.01 + 1, "0x1.60fbdd2fffc36p-4"),
        (go_log, 68 / 1000 * 0.05 / 0.01 + 1, "0x1.2bb195520355ep-2"),
        (lambda history: go_pow(1 + 0.001 / history, -2.0), 1.0, "0x1.fefa3faa4d8d6p-1"),
        (lambda history: go_pow(1 + 0.001 / history, -2.0), 8.0, "0x1.ffdf3cf6f0268p-1"),
        (lambda n: go_pow(1.05, n), 4.0, "0x1.372b6ae7d566dp+0"),
        (lambda n: go_pow(1.05, n), 8.0, "0x1.7a3a851c5f065p+0"),
    ],
    ids=["exp2-86", "exp2-97", "exp2-131", "log-18m", "log-68m", "lower-1d", "lower-8d", "pow-4", "pow-8"],
)
def test_matches_go_bit_for_bit(function: object, argument: float, go_result: str) -> None:
    assert callable(function)
    assert function(argument) == float.fromhex(go_result)
