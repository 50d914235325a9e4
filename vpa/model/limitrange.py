"""LimitRanges as the admission controller reads them: per-item min, max and default, in exact integers.

Owns: `LimitRangeItemView` (one `spec.limits[]` entry: its `type` and the cpu/memory amounts of `min`, `max`,
`default`; `defaultRequest` and `maxLimitRequestRatio` are not used by VPA and not kept), `LimitRangeView`
(namespace, name, items), `LimitRangeError` (names the offending field) and `limitrange_from_dict`, the
conversion of a raw `v1 LimitRange` object. Raw JSON is plain data, so this conversion lives here rather
than in `vpa.kube` (whose adapters call it).

Must not: merge LimitRanges or cap anything (that is `vpa.logic.limitranges` / `vpa.logic.capping`), do
I/O, or import anything outside the standard library and `vpa.model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.model import quantity
from vpa.model.resources import CPU, MEMORY, Resources

LIMIT_TYPE_CONTAINER: Final = "Container"
LIMIT_TYPE_POD: Final = "Pod"
NO_RESOURCES: Final = Resources()


class LimitRangeError(ValueError):
    """A raw LimitRange that does not convert. `field` is the JSON path of the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


@dataclass(frozen=True, slots=True)
class LimitRangeItemView:
    """One `spec.limits[]` entry. `None` for a whole list means the list was absent (upstream treats an
    absent list differently from a present one when merging: an item with none of min/max/default is
    ignored)."""

    type: str
    min: Resources | None = None
    max: Resources | None = None
    default: Resources | None = None


@dataclass(frozen=True, slots=True)
class LimitRangeView:
    namespace: str
    name: str
    items: tuple[LimitRangeItemView, ...] = ()


def _resource_list(value: object, field: str) -> Resources | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise LimitRangeError(field, f"expected an object, got {type(value).__name__}")
    amounts: dict[str, int | None] = {CPU: None, MEMORY: None}
    for resource in (CPU, MEMORY):
        raw = value.get(resource)
        if raw is None:
            continue
        where = f"{field}.{resource}"
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise LimitRangeError(where, f"expected a quantity, got {type(raw).__name__}")
        try:
            parsed = quantity.Quantity.parse(raw if isinstance(raw, str) else str(raw))
        except quantity.QuantityError as err:
            raise LimitRangeError(where, str(err)) from None
        amounts[resource] = parsed.millis if resource == CPU else parsed.value
    return Resources(amounts[CPU], amounts[MEMORY])


def _str(value: object, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise LimitRangeError(field, f"expected a string, got {type(value).__name__}")
    return value


def limitrange_from_dict(obj: Mapping[str, Any]) -> LimitRangeView:
    """A `v1 LimitRange` object → LimitRangeView. Raises LimitRangeError naming the field
    (`spec.limits[1].max.memory`) for wrong types and bad quantities."""
    if not isinstance(obj, Mapping):
        raise LimitRangeError("<limitrange>", f"expected an object, got {type(obj).__name__}")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise LimitRangeError("metadata", f"expected an object, got {type(metadata).__name__}")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise LimitRangeError("spec", f"expected an object, got {type(spec).__name__}")
    raw_limits = spec.get("limits") or []
    if not isinstance(raw_limits, list):
        raise LimitRangeError("spec.limits", f"expected a list, got {type(raw_limits).__name__}")
    items: list[LimitRangeItemView] = []
    for index, raw in enumerate(raw_limits):
        where = f"spec.limits[{index}]"
        if not isinstance(raw, Mapping):
            raise LimitRangeError(where, f"expected an object, got {type(raw).__name__}")
        items.append(
            LimitRangeItemView(
                type=_str(raw.get("type"), f"{where}.type"),
                min=_resource_list(raw.get("min"), f"{where}.min"),
                max=_resource_list(raw.get("max"), f"{where}.max"),
                default=_resource_list(raw.get("default"), f"{where}.default"),
            )
        )
    return LimitRangeView(
        namespace=_str(metadata.get("namespace"), "metadata.namespace"),
        name=_str(metadata.get("name"), "metadata.name"),
        items=tuple(items),
    )
