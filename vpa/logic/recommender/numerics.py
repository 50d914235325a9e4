"""Floating-point and time arithmetic exactly as upstream's Go recommender computes it.

Owns: the handful of operations whose last bits decide whether a recommendation equals upstream's —
`go_pow` (Go's `math.Pow` for integral exponents: repeated squaring on the frexp mantissa), `go_exp2`
(Go's pure-Go `math.Exp2`, which amd64 uses), `go_log` (the FreeBSD-derived algorithm Go's `math.Log`
runs on amd64), the `ResourceAmount` conversions (truncation toward zero, clamping to [0, 1e14], and the
NaN case), and `time.Time.Round` / `time.Duration.Truncate` on Unix-second timestamps.

Must not: keep state, read the clock, or know about histograms or pods. Stdlib only.
"""

from __future__ import annotations

import math
from typing import Final

MAX_RESOURCE_AMOUNT: Final = 100_000_000_000_000  # upstream MaxResourceAmount = 1e14
# Go converts NaN to int64 as the "integer indefinite" value on amd64. Upstream reaches it when an empty
# histogram (amount 0) meets an infinite confidence factor (0 × Inf); the per-pod minimum then replaces it.
GO_NAN_AS_INT64: Final = -(2**63)

# Seconds from Go's zero time (0001-01-01T00:00:00Z) to the Unix epoch: `time.Time.Round` counts from there.
GO_ZERO_TIME_TO_UNIX_S: Final = 62_135_596_800
_NS: Final = 1_000_000_000


def go_pow(x: float, y: float) -> float:
    """Go's `math.Pow(x, y)` for integral `y` (the only kind upstream's recommender uses).

    Go multiplies frexp mantissas by repeated squaring and applies the exponent at the end, which
    differs in the last bits from C's `pow` (one memory bucket start differs after truncation).
    """
    if y == 0:
        return 1.0
    if y == 1:
        return x
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == 0:
        return math.inf if y < 0 else 0.0
    if math.isinf(x):
        if x > 0:
            return math.inf if y > 0 else 0.0
        # (-Inf)^y for integral y: sign depends on parity.
        magnitude = math.inf if y > 0 else 0.0
        return -magnitude if int(y) % 2 == 1 else magnitude
    if y != int(y):
        raise ValueError(f"go_pow supports integral exponents only, got {y!r}")
    yi = abs(int(y))
    a1 = 1.0
    ae = 0
    x1, xe = math.frexp(x)
    i = yi
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):
            # Overflow or underflow is certain; Go folds the exponent in and stops.
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    return _go_ldexp(a1, ae)


def _go_ldexp(frac: float, exp: int) -> float:
    try:
        return math.ldexp(frac, exp)
    except OverflowError:
        return math.copysign(math.inf, frac)


_EXP2_LN2_HI: Final = 6.93147180369123816490e-01
_EXP2_LN2_LO: Final = 1.90821492927058770002e-10
_EXP_P1: Final = 1.66666666666666657415e-01
_EXP_P2: Final = -2.77777777770155933842e-03
_EXP_P3: Final = 6.61375632143793436117e-05
_EXP_P4: Final = -1.65339022054652515390e-06
_EXP_P5: Final = 4.13813679705723846039e-08


def go_exp2(x: float) -> float:
    """Go's `math.Exp2(x)` (pure Go on amd64): argument reduction to |r| ≤ ln2/2 and a degree-5
    polynomial. Not always the correctly rounded 2**x that C returns; decay weights use it."""
    if math.isnan(x) or x == math.inf:
        return x
    if x == -math.inf:
        return 0.0
    if x > 1.0239999999999999e03:
        return math.inf
    if x < -1.0740e03:
        return 0.0
    if x > 0:
        k = int(x + 0.5)
    elif x < 0:
        k = int(x - 0.5)
    else:
        k = 0
    t = x - float(k)
    hi = t * _EXP2_LN2_HI
    lo = -t * _EXP2_LN2_LO
    r = hi - lo
    tt = r * r
    c = r - tt * (_EXP_P1 + tt * (_EXP_P2 + tt * (_EXP_P3 + tt * (_EXP_P4 + tt * _EXP_P5))))
    y = 1 - ((lo - (r * c) / (2 - c)) - hi)
    return _go_ldexp(y, k)


_LOG_LN2_HI: Final = 6.93147180369123816490e-01
_LOG_LN2_LO: Final = 1.90821492927058770002e-10
_LOG_L1: Final = 6.666666666666735130e-01
_LOG_L2: Final = 3.999999999940941908e-01
_LOG_L3: Final = 2.857142874366239149e-01
_LOG_L4: Final = 2.222219843214978396e-01
_LOG_L5: Final = 1.818357216161805012e-01
_LOG_L6: Final = 1.531383769920937332e-01
_LOG_L7: Final = 1.479819860511658591e-01
_HALF_SQRT2: Final = 7.07106781186547524401e-01


def go_log(x: float) -> float:
    """Go's `math.Log(x)` as amd64 computes it (same reduction and polynomial order as the Go source)."""
    if math.isnan(x) or x == math.inf:
        return x
    if x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    f1, ki = math.frexp(x)
    if f1 < _HALF_SQRT2:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (_LOG_L1 + s4 * (_LOG_L3 + s4 * (_LOG_L5 + s4 * _LOG_L7)))
    t2 = s4 * (_LOG_L2 + s4 * (_LOG_L4 + s4 * _LOG_L6))
    big_r = t1 + t2
    hfsq = 0.5 * f * f
    return k * _LOG_LN2_HI - ((hfsq - (s * (hfsq + big_r) + k * _LOG_LN2_LO)) - f)


# --- ResourceAmount (int64 millicores / bytes) ----------------------------------------------------------


def amount_from_float(amount: float) -> int:
    """Upstream `resourceAmountFromFloat`: clamp to [0, 1e14] and truncate toward zero; NaN as Go/amd64."""
    if amount > MAX_RESOURCE_AMOUNT:
        return MAX_RESOURCE_AMOUNT
    if amount < 0:
        return 0
    if amount != amount:  # NaN
        return GO_NAN_AS_INT64
    return int(amount)


def cpu_amount_from_cores(cores: float) -> int:
    """Upstream `CPUAmountFromCores`: `trunc(cores × 1000)` millicores (clamped)."""
    return amount_from_float(cores * 1000.0)


def cores_from_cpu_amount(millicores: int) -> float:
    return float(millicores) / 1000.0


def scale_amount(amount: int, factor: float) -> int:
    """Upstream `ScaleResource`: `trunc(float(amount) × factor)`, clamped (0 × Inf is NaN, kept as Go)."""
    return amount_from_float(float(amount) * factor)


# --- Go time arithmetic on Unix seconds -----------------------------------------------------------------


def _to_ns(seconds: float) -> int:
    whole = math.floor(seconds)
    return int(whole) * _NS + round((seconds - whole) * _NS)


def go_round_time(unix_s: float, step_s: float) -> float:
    """`time.Time.Round(step)`: nearest multiple of `step` counted from Go's zero time, halves rounding up.

    For a 24 h step the multiples fall on UTC midnight. `step_s <= 0` returns the time unchanged.
    """
    step_ns = _to_ns(step_s)
    if step_ns <= 0:
        return unix_s
    absolute_ns = _to_ns(unix_s) + GO_ZERO_TIME_TO_UNIX_S * _NS
    remainder = absolute_ns % step_ns
    if remainder + remainder < step_ns:
        rounded = absolute_ns - remainder
    else:
        rounded = absolute_ns + (step_ns - remainder)
    return (rounded - GO_ZERO_TIME_TO_UNIX_S * _NS) / _NS


def go_truncate_duration(duration_s: float, step_s: float) -> float:
    """`time.Duration.Truncate(step)`: round toward zero to a multiple of `step` (unchanged if step <= 0)."""
    step_ns = _to_ns(step_s)
    if step_ns <= 0:
        return duration_s
    duration_ns = _to_ns(duration_s)
    magnitude = abs(duration_ns) - abs(duration_ns) % step_ns
    return math.copysign(magnitude, duration_ns) / _NS if duration_ns else 0.0
