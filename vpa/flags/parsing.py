"""A command-line parser that accepts what Go's `flag` / spf13 `pflag` accept, and the value kinds it reads.

Owns: splitting argv into flags and positional arguments with Go syntax (`--flag=value`, `--flag value`,
`-flag`, `-flag=value`, bare booleans `--leader-elect`, `--leader-elect=false`, `--` ends the flags,
`_` in names read as `-` like Kubernetes' word-separator normalisation), and the value kinds: Go integers
(`strconv.ParseInt` base 0: `10`, `0x1f`, `017`, `1_000`), floats (`strconv.ParseFloat`), booleans
(`strconv.ParseBool`), Go and Prometheus durations, Kubernetes quantities, comma lists and choices.
Errors are one line naming the flag and the value.

Must not: know which flags exist (that is `vpa.flags.table`), read the environment, or print.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from vpa.model import durations, features, quantity


class FlagError(ValueError):
    """A command line the parser rejects. `str()` is the one-line message, without the program name."""


@dataclass(frozen=True, slots=True)
class Kind:
    """How a flag's text becomes a value, and how the value prints in help and docs.

    `parse` raises ValueError whose message (or `reason`, for DurationError) explains what is wrong.
    """

    type_name: str
    parse: Callable[[str], object]
    format: Callable[[object], str]
    is_bool: bool = False


# --- Go number and boolean syntax ---------------------------------------------------------------------

_GO_INT_RE: Final = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0(?:_?[0-7])*|[1-9](?:_?[0-9])*)"
)
_GO_DECIMAL_FLOAT_RE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_GO_HEX_FLOAT_RE: Final = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
)
_GO_SPECIAL_FLOATS: Final = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
                             "+infinity": math.inf, "-infinity": -math.inf, "nan": math.nan}
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1


def parse_go_int(text: str, *, minimum: int = INT64_MIN, maximum: int = INT64_MAX) -> int:
    """`strconv.ParseInt(text, 0, 64)`: decimal, `0x`/`0o`/`0b` prefixes, a leading `0` for octal, `_`."""
    if not _GO_INT_RE.fullmatch(text):
        raise ValueError("not an integer")
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-").replace("_", "")
    if len(digits) > 1 and digits[0] == "0" and digits[1] in "0123456789":
        magnitude = int(digits[1:], 8)
    else:
        magnitude = int(digits, 0)
    value = sign * magnitude
    if not minimum <= value <= maximum:
        raise ValueError(f"value out of range [{minimum}, {maximum}]")
    return value


def parse_go_uint(text: str) -> int:
    """`strconv.ParseUint(text, 0, 64)`: as parse_go_int, without a sign."""
    if text.startswith(("+", "-")):
        raise ValueError("not an unsigned integer")
    return parse_go_int(text, minimum=0, maximum=UINT64_MAX)


def _underscores_ok(text: str) -> bool:
    """Go's `underscoreOK`: each `_` sits between digits (a base prefix counts as a digit)."""
    body = text[1:] if text[:1] in "+-" else text
    saw = "^"  # ^ start, 0 digit or prefix, _ underscore, ! anything else
    index = 0
    is_hex = False
    if len(body) >= 2 and body[0] == "0" and body[1].lower() in "box":
        index, saw, is_hex = 2, "0", body[1].lower() == "x"
    for char in body[index:]:
        if "0" <= char <= "9" or (is_hex and char.lower() in "abcdef"):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def parse_go_float(text: str) -> float:
    """`strconv.ParseFloat(text, 64)`: decimal and hex (`0x1p-2`) forms, `_` between digits, `Inf`,
    `Infinity`, `NaN`."""
    special = _GO_SPECIAL_FLOATS.get(text.lower())
    if special is not None:
        return special
    if "_" in text:
        if not _underscores_ok(text):
            raise ValueError("not a number")
        text = text.replace("_", "")
    if _GO_DECIMAL_FLOAT_RE.fullmatch(text):
        value = float(text)
    elif _GO_HEX_FLOAT_RE.fullmatch(text):
        value = float.fromhex(text)
    else:
        raise ValueError("not a number")
    if math.isinf(value):
        raise ValueError("value out of range")
    return value


def parse_bool(text: str) -> bool:
    try:
        return features.parse_go_bool(text)
    except ValueError:
        raise ValueError("not a boolean (use true or false, 1 or 0)") from None


def format_go_float(value: float) -> str:
    """`strconv.FormatFloat(v, 'g', -1, 64)`, as pflag prints float defaults: `0.15`, `50`, `1.048576e+08`.

    Shortest round-trip digits; exponent form when the decimal exponent is below -4 or at least 6.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digit_tuple, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(str(d) for d in digit_tuple)
    decimal_exponent = len(digits) + exponent - 1
    prefix = "-" if sign else ""
    if decimal_exponent < -4 or decimal_exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exponent_sign = "+" if decimal_exponent >= 0 else "-"
        return f"{prefix}{mantissa}e{exponent_sign}{abs(decimal_exponent):02d}"
    if exponent >= 0:
        return prefix + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    return f"{prefix}0.{'0' * -point}{digits}"


def _format_float(value: object) -> str:
    assert isinstance(value, float)
    return format_go_float(value)


# --- kinds ---------------------------------------------------------------------------------------------


def _str(value: object) -> str:
    return str(value)


def _quoted(value: object) -> str:
    """A string default as pflag shows it (Go `%q`): empty shows nothing, quotes are escaped."""
    if value == "":
        return ""
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _bool_text(value: object) -> str:
    return "true" if value else "false"


def _go_duration(text: str) -> float:
    try:
        return durations.parse_go_duration_s(text)
    except durations.DurationError as error:
        raise ValueError(error.reason) from None


def _prometheus_duration(text: str) -> float:
    try:
        return durations.parse_prometheus_duration_s(text)
    except durations.DurationError as error:
        raise ValueError(error.reason) from None


def _format_seconds_go(value: object) -> str:
    assert isinstance(value, float)
    return durations.format_go_duration_s(value)


def _format_seconds_prometheus(value: object) -> str:
    assert isinstance(value, float)
    return durations.format_prometheus_duration_s(value)


def _cpu_millicores(text: str) -> int:
    try:
        return quantity.Quantity.parse(text).millis
    except quantity.QuantityError as error:
        raise ValueError(str(error)) from None


def _memory_bytes(text: str) -> int:
    try:
        return quantity.Quantity.parse(text).value
    except quantity.QuantityError as error:
        raise ValueError(str(error)) from None


def _format_cpu(value: object) -> str:
    return "" if value is None else quantity.format_cpu_millicores(int(str(value)))


def _format_memory(value: object) -> str:
    return "" if value is None else quantity.format_memory_bytes(int(str(value)))


def _string_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _format_list(value: object) -> str:
    assert isinstance(value, tuple)
    return ",".join(str(item) for item in value)


BOOL: Final = Kind("bool", parse_bool, _bool_text, is_bool=True)
INT: Final = Kind("int", parse_go_int, _str)
UINT: Final = Kind("uint", parse_go_uint, _str)
FLOAT: Final = Kind("float", parse_go_float, _format_float)
STRING: Final = Kind("string", str, _quoted)
DURATION: Final = Kind("duration", _go_duration, _format_seconds_go)
PROMETHEUS_DURATION: Final = Kind("duration", _prometheus_duration, _format_seconds_prometheus)
CPU_QUANTITY: Final = Kind("quantity", _cpu_millicores, _format_cpu)
MEMORY_QUANTITY: Final = Kind("quantity", _memory_bytes, _format_memory)
STRING_LIST: Final = Kind("strings", _string_list, _format_list)


def choice(*choices: str, type_name: str = "string") -> Kind:
    """A string that must be one of `choices` (exact spelling)."""

    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return text

    return Kind(type_name, parse, _str)


def custom(type_name: str, parse: Callable[[str], object], format: Callable[[object], str] = _str) -> Kind:
    """A kind with its own parser (which raises ValueError with the reason)."""
    return Kind(type_name, parse, format)


# --- the parser ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """What the parser needs to know of one flag."""

    name: str
    kind: Kind
    repeatable: bool = False
    """Every occurrence is kept (in order) instead of the last one winning, e.g. `--feature-gates`."""


@dataclass(slots=True)
class ParsedArgs:
    """The result of parsing: each given flag's value(s) and the positional arguments, in order."""

    values: dict[str, object] = field(default_factory=dict)
    """Flag name → parsed value (the last occurrence), or the list of values for repeatable flags."""
    positionals: list[str] = field(default_factory=list)
    help_requested: bool = False

    def given(self, name: str) -> bool:
        return name in self.values


def _normalise(name: str) -> str:
    return name.replace("_", "-")


def _invalid(name: str, value: str, error: ValueError) -> FlagError:
    reason = str(error)
    return FlagError(f'invalid value "{value}" for flag --{name}: {reason}')


def parse_go_flags(argv: Sequence[str], specs: Mapping[str, FlagSpec]) -> ParsedArgs:
    """Parse `argv` against `specs` with Go/pflag syntax; flags and positionals may be interleaved.

    `-h`, `-help` and `--help` request help (unless a flag of that name exists). Raises FlagError.
    """
    parsed = ParsedArgs()
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--":
            parsed.positionals.extend(argv[index:])
            break
        if not arg.startswith("-") or arg == "-":
            parsed.positionals.append(arg)
            continue
        body = arg[2:] if arg.startswith("--") else arg[1:]
        if body == "" or body.startswith(("-", "=")):
            raise FlagError(f"bad flag syntax: {arg}")
        raw_name, has_value, value = body.partition("=")
        name = _normalise(raw_name)
        spec = specs.get(name)
        if spec is None:
            if name in ("h", "help"):
                parsed.help_requested = True
                continue
            as_typed = arg.partition("=")[0]
            raise FlagError(f"unknown flag: {as_typed}" + (f' (in "{arg}")' if has_value else ""))
        if not has_value:
            if spec.kind.is_bool:
                value = "true"
            elif index < len(argv):
                value = argv[index]
                index += 1
            else:
                raise FlagError(f"flag needs an argument: --{name}")
        try:
            result = spec.kind.parse(value)
        except ValueError as error:
            raise _invalid(name, value, error) from None
        if spec.repeatable:
            previous = parsed.values.setdefault(name, [])
            assert isinstance(previous, list)
            previous.append(result)
        else:
            parsed.values[name] = result
    return parsed
