"""Durations as the upstream VPA's flags spell them: Go `time.Duration` and Prometheus durations.

Owns: parsing Go durations exactly as `time.ParseDuration` does (`300ms`, `1.5h`, `1h30m`, `-1m`, `10µs`,
a bare `0`), parsing Prometheus durations as `model.ParseDuration` does (`8d`, `1w`, `1y`, `1h30m`, units in
decreasing order, integers only), and printing both back in their canonical forms (Go `Duration.String()`:
`1m0s`, `24h0m0s`, `1.5s`; Prometheus: `8d`, `1w`, `1h30m`).

Values are exact integer nanoseconds; the `*_s` helpers convert to float seconds, the unit settings use.

Must not: accept anything the Go functions reject, or reject anything they accept. Pure stdlib.
"""

from __future__ import annotations

from typing import Final

NANOSECOND: Final = 1
MICROSECOND: Final = 1_000
MILLISECOND: Final = 1_000_000
SECOND: Final = 1_000_000_000
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE
DAY: Final = 24 * HOUR
WEEK: Final = 7 * DAY
YEAR: Final = 365 * DAY

_INT64_OVERFLOW: Final = 1 << 63  # Go works in uint64 and checks against this bound

_GO_UNITS: Final[dict[str, int]] = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,  # U+00B5 micro sign
    "\u03bcs": MICROSECOND,  # U+03BC Greek small letter mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
GO_UNITS_HELP: Final = "ns, us, µs, ms, s, m, h"

# Prometheus units with their position: a duration must use them in strictly increasing position.
_PROMETHEUS_UNITS: Final[dict[str, tuple[int, int]]] = {
    "y": (1, YEAR),
    "w": (2, WEEK),
    "d": (3, DAY),
    "h": (4, HOUR),
    "m": (5, MINUTE),
    "s": (6, SECOND),
    "ms": (7, MILLISECOND),
}
PROMETHEUS_UNITS_HELP: Final = "y, w, d, h, m, s, ms"


class DurationError(ValueError):
    """A string that is not a duration. `reason` is the short explanation; str() also names the text."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid duration {_quote(text)}: {reason}")
        self.text = text
        self.reason = reason


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _is_digit(char: str) -> bool:
    return "0" <= char <= "9"


# --- Go time.ParseDuration ----------------------------------------------------------------------------


def parse_go_duration_ns(text: str) -> int:
    """Parse a Go duration into integer nanoseconds, or raise DurationError.

    A faithful port of `time.ParseDuration`: an optional sign, then one or more `<number><unit>` terms,
    where a number may have a fraction (`1.5h`, `.5s`, `1.s`). A bare `0` (or `+0`, `-0`) needs no unit.
    Fractions are converted through float64 arithmetic exactly as Go does, so results agree to the
    nanosecond.
    """
    not_a_duration = DurationError(text, f"not a duration (use a number and a unit, units: {GO_UNITS_HELP})")
    rest = text
    negative = False
    if rest and rest[0] in "+-":
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if rest == "":
        raise not_a_duration
    total = 0
    while rest:
        if not (rest[0] == "." or _is_digit(rest[0])):
            raise not_a_duration
        # Leading integer: overflow is an error.
        index = 0
        whole = 0
        while index < len(rest) and _is_digit(rest[index]):
            if whole > _INT64_OVERFLOW // 10:
                raise DurationError(text, "out of range")
            whole = whole * 10 + int(rest[index])
            if whole > _INT64_OVERFLOW:
                raise DurationError(text, "out of range")
            index += 1
        has_whole = index > 0
        rest = rest[index:]
        # Optional fraction: digits past int64 precision are consumed and ignored.
        fraction, scale, has_fraction = 0, 1.0, False
        if rest.startswith("."):
            rest = rest[1:]
            index = 0
            overflowed = False
            while index < len(rest) and _is_digit(rest[index]):
                if not overflowed:
                    if fraction > (_INT64_OVERFLOW - 1) // 10:
                        overflowed = True
                    else:
                        candidate = fraction * 10 + int(rest[index])
                        if candidate > _INT64_OVERFLOW:
                            overflowed = True
                        else:
                            fraction = candidate
                            scale *= 10
                index += 1
            has_fraction = index > 0
            rest = rest[index:]
        if not has_whole and not has_fraction:
            raise not_a_duration
        # Unit: everything up to the next digit or period.
        index = 0
        while index < len(rest) and not (rest[index] == "." or _is_digit(rest[index])):
            index += 1
        if index == 0:
            raise DurationError(text, f"missing unit (units: {GO_UNITS_HELP}; only 0 may omit it)")
        unit_text, rest = rest[:index], rest[index:]
        unit = _GO_UNITS.get(unit_text)
        if unit is None:
            raise DurationError(text, f"unknown unit {_quote(unit_text)} (units: {GO_UNITS_HELP})")
        if whole > _INT64_OVERFLOW // unit:
            raise DurationError(text, "out of range")
        term = whole * unit
        if fraction > 0:
            # Go: v += uint64(float64(f) * (float64(unit) / scale)), truncating toward zero.
            term += int(float(fraction) * (float(unit) / scale))
            if term > _INT64_OVERFLOW:
                raise DurationError(text, "out of range")
        total += term
        if total > _INT64_OVERFLOW:
            raise DurationError(text, "out of range")
    if negative:
        return -total
    if total > _INT64_OVERFLOW - 1:
        raise DurationError(text, "out of range")
    return total


def parse_go_duration_s(text: str) -> float:
    """Parse a Go duration into float seconds (`"1m"` → 60.0, `"300ms"` → 0.3)."""
    return parse_go_duration_ns(text) / SECOND


def _format_fraction(value: int, precision: int) -> tuple[str, int]:
    """Go's fmtFrac: the fractional digits of value / 10**precision without trailing zeros."""
    digits = ""
    printed = False
    for _ in range(precision):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits = str(digit) + digits
        value //= 10
    return ("." + digits if printed else ""), value


def format_go_duration_ns(nanoseconds: int) -> str:
    """Go's `Duration.String()`: `0s`, `1.5µs`, `300ms`, `10s`, `1m0s`, `24h0m0s`, `-1m30s`."""
    magnitude = abs(nanoseconds)
    sign = "-" if nanoseconds < 0 else ""
    if magnitude == 0:
        return "0s"
    if magnitude < SECOND:
        if magnitude < MICROSECOND:
            precision, unit = 0, "ns"
        elif magnitude < MILLISECOND:
            precision, unit = 3, "µs"
        else:
            precision, unit = 6, "ms"
        fraction, whole = _format_fraction(magnitude, precision)
        return f"{sign}{whole}{fraction}{unit}"
    fraction, seconds = _format_fraction(magnitude, 9)
    text = f"{seconds % 60}{fraction}s"
    minutes = seconds // 60
    if minutes > 0:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours > 0:
            text = f"{hours}h{text}"
    return sign + text


def format_go_duration_s(seconds: float) -> str:
    """Go's `Duration.String()` of a float number of seconds (rounded to the nanosecond)."""
    return format_go_duration_ns(round(seconds * SECOND))


# --- Prometheus model.ParseDuration ------------------------------------------------------------------


def parse_prometheus_duration_ns(text: str) -> int:
    """Parse a Prometheus duration (`8d`, `1w`, `1h30m`, `0`) into integer nanoseconds.

    Units `y` (365 d), `w`, `d`, `h`, `m`, `s`, `ms`, each at most once and from largest to smallest;
    integers only; no sign. A bare `0` needs no unit.
    """
    if text == "0":
        return 0
    if text == "":
        raise DurationError(text, "empty duration string")
    invalid = DurationError(
        text,
        f"not a Prometheus duration (integers with units, largest first; units: {PROMETHEUS_UNITS_HELP})",
    )
    rest = text
    total = 0
    last_position = 0
    while rest:
        if not _is_digit(rest[0]):
            raise invalid
        index = 0
        while index < len(rest) and _is_digit(rest[index]):
            index += 1
        value = int(rest[:index])
        if value >= 1 << 64:  # strconv.ParseUint range
            raise invalid
        rest = rest[index:]
        index = 0
        while index < len(rest) and not _is_digit(rest[index]):
            index += 1
        if index == 0:
            raise invalid
        unit_text, rest = rest[:index], rest[index:]
        unit = _PROMETHEUS_UNITS.get(unit_text)
        if unit is None:
            raise DurationError(text, f"unknown unit {_quote(unit_text)} (units: {PROMETHEUS_UNITS_HELP})")
        position, multiplier = unit
        if position <= last_position:
            raise invalid
        last_position = position
        if value > _INT64_OVERFLOW // multiplier:
            raise DurationError(text, "out of range")
        total += value * multiplier
        if total > _INT64_OVERFLOW - 1:
            raise DurationError(text, "out of range")
    return total


def parse_prometheus_duration_s(text: str) -> float:
    """Parse a Prometheus duration into float seconds (`"8d"` → 691200.0)."""
    return parse_prometheus_duration_ns(text) / SECOND


def format_prometheus_duration_ns(nanoseconds: int) -> str:
    """Prometheus' `Duration.String()`: millisecond precision, years and weeks only when exact."""
    if nanoseconds < 0:
        raise ValueError("Prometheus durations cannot be negative")
    millis = nanoseconds // MILLISECOND
    if millis == 0:
        return "0s"
    text = ""
    for unit, unit_ns, exact_only in (
        ("y", YEAR, True),
        ("w", WEEK, True),
        ("d", DAY, False),
        ("h", HOUR, False),
        ("m", MINUTE, False),
        ("s", SECOND, False),
        ("ms", MILLISECOND, False),
    ):
        multiplier = unit_ns // MILLISECOND
        if exact_only and millis % multiplier != 0:
            continue
        count = millis // multiplier
        if count > 0:
            text += f"{count}{unit}"
            millis -= count * multiplier
    return text


def format_prometheus_duration_s(seconds: float) -> str:
    """Prometheus' `Duration.String()` of a float number of seconds."""
    return format_prometheus_duration_ns(round(seconds * SECOND))
