"""The small typed readers every converter is built from, and `ConversionError`.

Owns: reading a map, list, string, int, bool, enum, timestamp, quantity, `Resources` or string map out of
raw JSON with a `ConversionError` naming the offending field (e.g.
`spec.resourcePolicy.containerPolicies[1].minAllowed.cpu`) when its type is wrong; RFC 3339 timestamps to
Unix seconds and back (`parse_time`, `format_time`). The underscored readers are the package's own: callers
outside `vpa.kube.converting` use the converters.

Must not: know any kind's fields, do I/O, log or decide anything.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from vpa.kube.converting.interning import _EMPTY_MAP, _NO_RESOURCES, Interner
from vpa.model import quantity
from vpa.model.resources import CPU, MEMORY, Resources

_E = TypeVar("_E")


class ConversionError(ValueError):
    """A raw object that does not convert. `field` is the JSON path of the culprit (`spec.targetRef`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


# --- small typed readers ----------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _map(value: object, field: str) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the ABC check's cost
        return value
    if value is None:
        return _EMPTY_MAP
    if not isinstance(value, Mapping):
        raise ConversionError(field, f"expected an object, got {_type_name(value)}")
    return value


def _list(value: object, field: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConversionError(field, f"expected a list, got {_type_name(value)}")
    return value


def _str(value: object, field: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConversionError(field, f"expected a string, got {_type_name(value)}")
    return value


def _required_str(value: object, field: str) -> str:
    if value is None:
        raise ConversionError(field, "is required")
    return _str(value, field)


def _optional_str(value: object, field: str) -> str | None:
    return None if value is None else _str(value, field)


def _int(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversionError(field, f"expected an integer, got {_type_name(value)}")
    return value


def _bool(value: object, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConversionError(field, f"expected a boolean, got {_type_name(value)}")
    return value


def _enum(value: object, field: str, enum_type: type[_E]) -> _E | None:
    text = _str(value, field)
    if value is None or text == "":
        return None
    try:
        return enum_type(text)  # type: ignore[call-arg]
    except ValueError:
        accepted = ", ".join(str(member) for member in enum_type)  # type: ignore[attr-defined]
        raise ConversionError(field, f"unknown value {text!r} (expected one of {accepted})") from None


def parse_time(value: str) -> float:
    """RFC3339 (`2026-01-01T00:00:00Z`, fractional seconds and offsets allowed) → Unix seconds.

    Raises ValueError for anything else.
    """
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def format_time(timestamp: float) -> str:
    """Unix seconds → RFC3339 in UTC with whole seconds, as `metav1.Time` serialises."""
    return datetime.fromtimestamp(int(timestamp), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: object, field: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConversionError(field, f"expected an RFC3339 timestamp string, got {_type_name(value)}")
    try:
        return parse_time(value)
    except ValueError:
        raise ConversionError(field, f"{value!r} is not an RFC3339 timestamp") from None


def _lenient_time(value: object) -> float | None:
    """A timestamp only `vpa report` reads: one that does not parse is treated as absent, so it never
    costs the recommender an eviction event."""
    try:
        return _time(value, "") if value else None
    except ConversionError:
        return None


def _quantity_text(value: object, field: str) -> str:
    # int-or-string: JSON numbers are quantities too (`cpu: 2`).
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ConversionError(field, f"expected a quantity, got {_type_name(value)}")


def _resources(value: object, field: str, interner: Interner) -> Resources:
    """A ResourceList (only cpu and memory are kept) → shared Resources. Bad quantities name the field."""
    if value is None:
        return _NO_RESOURCES
    resource_list = _map(value, field)
    cpu_raw = resource_list.get(CPU)
    memory_raw = resource_list.get(MEMORY)
    # Fast path: the same pair of strings was converted before (replicas; status equal to spec). Only
    # strings: JSON numbers and booleans must not alias (`True == 1`) and go the checked way.
    raw_key: tuple[str | None, str | None] | None = None
    if (cpu_raw is None or type(cpu_raw) is str) and (memory_raw is None or type(memory_raw) is str):
        raw_key = (cpu_raw, memory_raw)
        known = interner.known_resources(raw_key)
        if known is not None:
            return known
    cpu = memory = None
    try:
        if cpu_raw is not None:
            cpu = interner.quantity(CPU, _quantity_text(cpu_raw, f"{field}.cpu"))
    except quantity.QuantityError as err:
        raise ConversionError(f"{field}.cpu", str(err)) from None
    try:
        if memory_raw is not None:
            memory = interner.quantity(MEMORY, _quantity_text(memory_raw, f"{field}.memory"))
    except quantity.QuantityError as err:
        raise ConversionError(f"{field}.memory", str(err)) from None
    resources = interner.resources(cpu, memory)
    if raw_key is not None:
        interner.remember_resources(raw_key, resources)
    return resources


def _optional_resources(value: object, field: str, interner: Interner) -> Resources | None:
    return None if value is None else _resources(value, field, interner)


def _string_map(
    value: object, field: str, interner: Interner | None, keep: Callable[[str], bool] | None = None
) -> Mapping[str, str]:
    """A label or annotation map. With an interner, strings and the map itself are shared; without one,
    a fresh dict is returned. `keep` filters keys."""
    raw = _map(value, field)
    if not raw:
        return _EMPTY_MAP if interner is not None else {}
    items: list[tuple[str, str]] = []
    # Label values recur per workload: the interner's tables, not the interpreter's, when there is one.
    share: Callable[[str], str] = sys.intern if interner is None else interner.text
    for key, item in raw.items():
        if keep is not None and not keep(key):
            continue
        if not isinstance(item, str):
            raise ConversionError(f"{field}[{key!r}]", f"expected a string, got {_type_name(item)}")
        items.append((share(key), share(item) if len(item) <= 64 else item))
    if interner is None:
        return dict(items)
    return interner.string_map(tuple(items))
