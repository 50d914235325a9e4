"""Kubernetes resource quantities, exactly as apimachinery parses and prints them.

Owns: parsing a quantity string (`100m`, `1.5Gi`, `129e6`, `-1`), the rounding Kubernetes applies
(up to nano precision, away from zero; capped at 2**63-1), conversion to exact integer millicores and
bytes, the canonical string form `kubectl` shows (`1536Mi`, `1500m`, `1e3`, `2k`) for every value a
`Quantity` can hold (past the `E` suffix, more digits: `1000E`), and `in_pod_range` (whether an amount
may be written into a pod's resources: not negative, at most 2**63-1).

Must not: use floats for parsed values, or know anything about pods or VPAs. Pure stdlib.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

NANO: Final = 10**9
MAX_VALUE: Final = 2**63 - 1

_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXPONENT: Final[dict[int, str]] = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_MAX_DECIMAL_EXPONENT: Final = max(_DECIMAL_BY_EXPONENT)
_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 1,
    "Mi": 2,
    "Gi": 3,
    "Ti": 4,
    "Pi": 5,
    "Ei": 6,
}
_BINARY_BY_POWER: Final[dict[int, str]] = {v: k for k, v in _BINARY_SUFFIXES.items()}

# Sign, mantissa (at least one digit; "1.", ".5" and "1.5" are fine) and the rest (the suffix).
_QUANTITY_RE: Final = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)$")
_EXPONENT_RE: Final = re.compile(r"^[eE]([+-]?[0-9]+)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message names the string and the reason."""


def _round_away_from_zero(value: Fraction) -> int:
    """Round to an integer away from zero, as apimachinery's RoundUp does."""
    if value.denominator == 1:
        return value.numerator
    magnitude = -(-abs(value.numerator) // value.denominator)
    return magnitude if value > 0 else -magnitude


@dataclass(frozen=True, slots=True, order=False)
class Quantity:
    """An exact quantity: an integer count of nano-units plus the format it was written in.

    Equality ignores the format (`1Ki == 1024`), as `Quantity.Cmp` does.
    """

    nanos: int
    format: Format = "DecimalSI"

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string the way `resource.ParseQuantity` does, or raise QuantityError."""
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string, got {type(text).__name__}")
        if text == "":
            raise QuantityError("quantity is empty")
        match = _QUANTITY_RE.match(text)
        if match is None:
            raise QuantityError(f"quantity {text!r} is not a number with an optional unit suffix")
        sign, mantissa_text, suffix = match.groups()
        whole, _, fraction_digits = mantissa_text.partition(".")
        mantissa = Fraction(int(whole or "0") * 10 ** len(fraction_digits) + int(fraction_digits or "0"),
                            10 ** len(fraction_digits))
        fmt: Format
        if suffix in _DECIMAL_SUFFIXES:
            value = mantissa * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
            fmt = "DecimalSI"
        elif suffix in _BINARY_SUFFIXES:
            value = mantissa * 1024 ** _BINARY_SUFFIXES[suffix]
            fmt = "BinarySI"
        else:
            exponent_match = _EXPONENT_RE.match(suffix)
            if exponent_match is None:
                raise QuantityError(
                    f"quantity {text!r} has an unknown suffix {suffix!r} "
                    "(expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<exponent>)"
                )
            exponent = int(exponent_match.group(1))
            if abs(exponent) > 64:
                # Anything past this is beyond the int64 cap or below nano precision anyway.
                exponent = 64 if exponent > 0 else -64
            value = mantissa * Fraction(10) ** exponent
            fmt = "DecimalExponent"
        if sign == "-":
            value = -value
        nanos = _round_away_from_zero(value * NANO)
        cap = MAX_VALUE * NANO
        if nanos > cap:
            nanos = cap
        elif nanos < -cap:
            nanos = -cap
        return cls(nanos, fmt)

    @classmethod
    def from_millis(cls, millis: int, fmt: Format = "DecimalSI") -> Quantity:
        return cls(millis * 10**6, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: Format = "DecimalSI") -> Quantity:
        return cls(value * NANO, fmt)

    # --- exact integer views ------------------------------------------------------------------

    @property
    def millis(self) -> int:
        """Value in thousandths, rounded away from zero (`MilliValue`): CPU millicores."""
        return _round_away_from_zero(Fraction(self.nanos, 10**6))

    @property
    def value(self) -> int:
        """Whole value rounded away from zero (`Value`): bytes for memory."""
        return _round_away_from_zero(Fraction(self.nanos, NANO))

    def as_fraction(self) -> Fraction:
        return Fraction(self.nanos, NANO)

    def is_zero(self) -> bool:
        return self.nanos == 0

    # --- comparison (format-insensitive) ------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.nanos == other.nanos
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    # --- canonical string ---------------------------------------------------------------------

    def __str__(self) -> str:
        return self.canonical()

    def canonical(self) -> str:
        """The string Kubernetes serialises this quantity as (`Quantity.String`)."""
        if self.nanos == 0:
            return "0"
        fmt = self.format
        if fmt == "BinarySI":
            if -1024 * NANO < self.nanos < 1024 * NANO or self.nanos % NANO != 0:
                fmt = "DecimalSI"  # small or fractional binary values print as decimal
            else:
                return _format_binary(self.nanos // NANO)
        return _format_decimal(self.nanos, fmt)


def _format_binary(value: int) -> str:
    magnitude, sign = abs(value), "-" if value < 0 else ""
    power = 0
    while power < 6 and magnitude % 1024 == 0:
        magnitude //= 1024
        power += 1
    return f"{sign}{magnitude}{_BINARY_BY_POWER.get(power, '')}"


def _format_decimal(nanos: int, fmt: Format) -> str:
    magnitude, sign = abs(nanos), "-" if nanos < 0 else ""
    exponent = -9
    while magnitude % 10 == 0:
        magnitude //= 10
        exponent += 1
    while exponent % 3 != 0:
        magnitude *= 10
        exponent -= 1
    if fmt == "DecimalExponent":
        suffix = "" if exponent == 0 else f"e{exponent}"
    else:
        if exponent > _MAX_DECIMAL_EXPONENT:  # past `E`: more digits in front of the largest suffix
            magnitude *= 10 ** (exponent - _MAX_DECIMAL_EXPONENT)
            exponent = _MAX_DECIMAL_EXPONENT
        suffix = _DECIMAL_BY_EXPONENT[exponent]
    return f"{sign}{magnitude}{suffix}"


# --- convenience helpers used all over the code base -----------------------------------------------


def in_pod_range(amount: int) -> bool:
    """Whether a millicore or byte count may go into a pod's resources: 0 ≤ amount ≤ 2**63-1."""
    return 0 <= amount <= MAX_VALUE


def parse_quantity(text: str) -> Quantity:
    """Parse `text`; raise QuantityError with a message naming the string when it is not a quantity."""
    return Quantity.parse(text)


def cpu_millicores(text: str) -> int:
    """`"250m"` → 250, `"1"` → 1000, `"0.0001"` → 1 (rounded up as `MilliValue` does)."""
    return Quantity.parse(text).millis


def memory_bytes(text: str) -> int:
    """`"1Gi"` → 1073741824, `"1.5k"` → 1500 (rounded up as `Value` does)."""
    return Quantity.parse(text).value


def format_cpu_millicores(millicores: int) -> str:
    """Canonical CPU string for a millicore count: 250 → `250m`, 1000 → `1`, 1500 → `1500m`."""
    return Quantity.from_millis(millicores).canonical()


def format_memory_bytes(value: int, fmt: Format = "BinarySI") -> str:
    """Canonical memory string for a byte count: 1073741824 → `1Gi`, 1000 → `1000`, 1536 → `1536`."""
    return Quantity.from_int(value, fmt).canonical()


def format_memory_bytes_as_written(value: int) -> str:
    """Memory for a patch, in the form a VPA recommendation is written: binary (`256Mi`) when that is no
    longer than the decimal form, else decimal (`300M`, `279172665`). A canonical recommendation string
    (`256Mi`, `300M`, `2G`, plain bytes) round-trips to itself, as upstream's patches keep its format."""
    binary = format_memory_bytes(value, "BinarySI")
    decimal = format_memory_bytes(value, "DecimalSI")
    return binary if len(binary) <= len(decimal) else decimal
