"""VerticalPodAutoscaler admission (CREATE/UPDATE): validation, warnings and defaulting over the raw JSON.

Owns: `validate_vpa` (spec §5.7), a pure function over the raw object (a plain `Mapping`, because a malformed
object must be rejected with a message naming the field — it may not convert to a `VpaView` at all) and
the old object on UPDATE. It returns a `VpaAdmission`: field errors formatted as apimachinery formats them
(`spec.updatePolicy.updateMode: Unsupported value: "Sometimes": supported values: "Initial", …`), warnings,
and the defaulting JSON patch (`add /spec/updatePolicy {"updateMode": "Recreate"}` when absent).

Rules are upstream's, in upstream's order, with these decisions:
- gated fields (`InPlace`, `PerVPAConfig` fields, `startupBoost`, AEP-9936's `initialDelaySeconds`) are
  allowed when the gate is on **or** the old object on UPDATE already used the feature (upstream's
  "feature allowed" options);
- a CREATE without `spec.targetRef` is rejected (upstream's check is dead code, spec §11.9);
- unknown `controlledValues` are rejected (upstream leaves it to the CRD enum; `VpaView` cannot hold them);
- `controlledResources` other than cpu/memory are errors, or warnings when the same container policy of
  the old object already listed that value;
- our own annotations (`vpa.dev/memory-limit-decrease`, `vpa.dev/resize-guard`, `…/resize-guard-window`)
  must parse; a bad value
  is an `Invalid value` / `Unsupported value` error naming the annotation key;
- wrong JSON types and unparsable quantities are `Invalid value` errors naming the field (upstream answers
  with an internal error); the function never raises.

Size: over 600 lines because it is one walk over the VPA object (`_Validator`, a method per part of the
spec) in upstream's order, each rule a few lines; it reads best whole, beside upstream's.

Must not: read feature gates from anywhere but its argument, log, or do I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.logic.initialdelay import MAX_INITIAL_DELAY_S
from vpa.model import annotations as ann
from vpa.model.durations import DurationError, parse_go_duration_s
from vpa.model.features import (
    CPU_STARTUP_BOOST,
    DAEMONSET_SCOPE,
    IN_PLACE,
    PER_VPA_CONFIG,
    VPA_INITIAL_DELAY,
    FeatureGates,
)
from vpa.model.quantity import Quantity, QuantityError
from vpa.model.resources import CPU, MEMORY

REQUIRED: Final = "Required value"
FORBIDDEN: Final = "Forbidden"
INVALID: Final = "Invalid value"
NOT_SUPPORTED: Final = "Unsupported value"
TOO_MANY: Final = "Too many"

# Sorted bytewise, as upstream prints the list (Go `sort.Strings`); `Auto` is accepted but not offered.
SUPPORTED_UPDATE_MODES: Final = ("InPlace", "InPlaceOrRecreate", "Initial", "Off", "Recreate")
SCALING_MODES: Final = ("Auto", "Off")
CONTROLLED_VALUES: Final = ("RequestsAndLimits", "RequestsOnly")
CONTROLLED_RESOURCES: Final = (CPU, MEMORY)
BOOST_TYPES: Final = ("Factor", "Quantity")
DEFAULT_UPDATE_POLICY: Final = {"updateMode": "Recreate"}
PER_VPA_CONFIG_FIELDS: Final = (
    "oomBumpUpRatio",
    "oomMinBumpUp",
    "memoryAggregationIntervalSeconds",
    "memoryAggregationIntervalCount",
    "recommendationPercentiles",
)

AUTO_DEPRECATION_WARNING: Final = (
    'spec.updatePolicy: "Auto" mode is deprecated and will be removed in a future API version. Use explicit '
    "update modes like: [InPlace InPlaceOrRecreate Initial Off Recreate]. "
    "See https://github.com/kubernetes/autoscaler/issues/8424 for more details."
)
_MISSING: Final = object()


def _go_value(value: object) -> str:
    """A bad value as apimachinery prints it: strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return str(int(value))  # Go's %v prints an integral float without a fraction: -1, not -1.0
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, default=str, sort_keys=True)[:200]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field error (apimachinery `field.Error`). `str()` is the text the API server shows."""

    type: str
    field: str
    detail: str = ""
    bad_value: object = None

    def __str__(self) -> str:
        if self.type in (REQUIRED, FORBIDDEN):
            body = self.type
        else:
            body = f"{self.type}: {_go_value(self.bad_value)}"
        if self.detail:
            body = f"{body}: {self.detail}"
        return f"{self.field}: {body}"


@dataclass(frozen=True, slots=True)
class VpaAdmission:
    """The admission verdict for a VPA object: allowed iff no errors; `patch` defaults it (JSON patch)."""

    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors

    def message(self) -> str:
        """All errors joined as the API server's Invalid status does: `[e1, e2]` for several."""
        texts = [str(error) for error in self.errors]
        return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _supported(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(json.dumps(v) for v in values)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _get(obj: object, *path: str | int) -> object:
    """A nested value of a possibly malformed object; `_MISSING` when any step is absent or mistyped."""
    current: object = obj
    for step in path:
        if isinstance(step, int):
            if not isinstance(current, list) or step >= len(current):
                return _MISSING
            current = current[step]
        else:
            if not isinstance(current, Mapping) or step not in current:
                return _MISSING
            current = current[step]
    return current


def _present(value: object) -> bool:
    return value is not _MISSING and value is not None


class _Validator:
    def __init__(self, gates: FeatureGates, old: object) -> None:
        self.errors: list[FieldError] = []
        self.warnings: list[str] = []
        self.old = old
        self.allow_boost = gates.enabled(CPU_STARTUP_BOOST) or self._old_uses_boost()
        self.allow_per_vpa = gates.enabled(PER_VPA_CONFIG) or self._old_uses_per_vpa_config()
        self.allow_initial_delay = gates.enabled(VPA_INITIAL_DELAY) or _present(
            _get(old, "spec", "updatePolicy", "initialDelaySeconds")
        )
        old_scope = _get(old, "spec", "scope")
        self.allow_scope = gates.enabled(DAEMONSET_SCOPE) or (isinstance(old_scope, str) and old_scope != "")
        self.allow_in_place = (
            gates.enabled(IN_PLACE) or _get(old, "spec", "updatePolicy", "updateMode") == "InPlace"
        )

    # --- the old object (UPDATE) ------------------------------------------------------------------------

    def _old_policies(self) -> list[Mapping[str, Any]]:
        policies = _get(self.old, "spec", "resourcePolicy", "containerPolicies")
        if not isinstance(policies, list):
            return []
        return [p for p in policies if isinstance(p, Mapping)]

    def _old_uses_boost(self) -> bool:
        if _present(_get(self.old, "spec", "startupBoost", "cpu")):
            return True
        return any(p.get("startupBoost") is not None for p in self._old_policies())

    def _old_uses_per_vpa_config(self) -> bool:
        if _present(_get(self.old, "spec", "updatePolicy", "evictAfterOOMSeconds")):
            return True
        return any(p.get(name) is not None for p in self._old_policies() for name in PER_VPA_CONFIG_FIELDS)

    def _old_controlled_resource(self, container_name: object, value: str) -> bool:
        for policy in self._old_policies():
            resources = policy.get("controlledResources")
            # upstream accepts the resource when any old container policy had it, whichever container
            if isinstance(resources, list) and value in resources:
                return True
        return False

    # --- typed readers that report instead of raising --------------------------------------------------

    def _wrong_type(self, field: str, value: object, expected: str) -> None:
        self.errors.append(FieldError(INVALID, field, f"expected {expected}, got {_type_name(value)}", value))

    def _map(self, value: object, field: str) -> Mapping[str, Any] | None:
        if isinstance(value, Mapping):
            return value
        self._wrong_type(field, value, "an object")
        return None

    def _list(self, value: object, field: str) -> list[Any] | None:
        if isinstance(value, list):
            return value
        self._wrong_type(field, value, "an array")
        return None

    def _str(self, value: object, field: str) -> str | None:
        if isinstance(value, str):
            return value
        self._wrong_type(field, value, "a string")
        return None

    def _int(self, value: object, field: str) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        self._wrong_type(field, value, "an integer")
        return None

    def _quantity(self, value: object, field: str) -> Quantity | None:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self._wrong_type(field, value, "a quantity (string or number)")
            return None
        try:
            return Quantity.parse(value if isinstance(value, str) else str(value))
        except QuantityError as err:
            self.errors.append(FieldError(INVALID, field, str(err), value))
            return None

    # --- spec -------------------------------------------------------------------------------------------

    def spec(self, spec: Mapping[str, Any], create: bool) -> None:
        target = spec.get("targetRef")
        if target is None:
            if create:
                self.errors.append(
                    FieldError(
                        REQUIRED,
                        "spec.targetRef",
                        "If you're using v1beta1 version of the API, please migrate to v1",
                    )
                )
        elif (target_map := self._map(target, "spec.targetRef")) is not None:
            for key in ("apiVersion", "kind", "name"):
                if target_map.get(key) is not None:
                    self._str(target_map[key], f"spec.targetRef.{key}")
        update_policy = spec.get("updatePolicy")
        if (
            update_policy is not None
            and (policy := self._map(update_policy, "spec.updatePolicy")) is not None
        ):
            self.update_policy(policy, "spec.updatePolicy")
        resource_policy = spec.get("resourcePolicy")
        if (
            resource_policy is not None
            and (rp := self._map(resource_policy, "spec.resourcePolicy")) is not None
        ):
            self.resource_policy(rp, "spec.resourcePolicy")
        if spec.get("startupBoost") is not None:
            self.startup_boost(spec["startupBoost"], "spec.startupBoost")
        if spec.get("scope") is not None:
            self._scope(spec["scope"], target)
        recommenders = spec.get("recommenders")
        if recommenders is not None and (items := self._list(recommenders, "spec.recommenders")) is not None:
            for index, item in enumerate(items):
                where = f"spec.recommenders[{index}]"
                if (entry := self._map(item, where)) is not None:
                    if entry.get("name") is None:
                        self.errors.append(FieldError(REQUIRED, f"{where}.name"))
                    else:
                        self._str(entry["name"], f"{where}.name")
            if len(items) > 1:
                self.errors.append(
                    FieldError(TOO_MANY, "spec.recommenders", "must have at most 1 item", len(items))
                )

    def update_policy(self, policy: Mapping[str, Any], path: str) -> None:
        mode_path = f"{path}.updateMode"
        raw_mode = policy.get("updateMode")
        if raw_mode is None:
            self.errors.append(
                FieldError(REQUIRED, mode_path, "updateMode is required if UpdatePolicy is used")
            )
        elif (mode := self._str(raw_mode, mode_path)) is not None:
            if mode == "Auto":
                self.warnings.append(AUTO_DEPRECATION_WARNING)
            elif mode not in SUPPORTED_UPDATE_MODES:
                self.errors.append(
                    FieldError(NOT_SUPPORTED, mode_path, _supported(SUPPORTED_UPDATE_MODES), mode)
                )
            if mode == "InPlace" and not self.allow_in_place:
                self.errors.append(
                    FieldError(
                        FORBIDDEN,
                        mode_path,
                        f"in order to use UpdateMode InPlace, you must enable feature gate {IN_PLACE} "
                        "in the admission-controller args",
                    )
                )
        if policy.get("minReplicas") is not None:
            replicas = self._int(policy["minReplicas"], f"{path}.minReplicas")
            if replicas is not None and replicas <= 0:
                self.errors.append(
                    FieldError(INVALID, f"{path}.minReplicas", "minReplicas has to be positive", replicas)
                )
        if policy.get("evictAfterOOMSeconds") is not None:
            self._gated_int(policy["evictAfterOOMSeconds"], f"{path}.evictAfterOOMSeconds")
        if policy.get("initialDelaySeconds") is not None:
            self._initial_delay(policy["initialDelaySeconds"], f"{path}.initialDelaySeconds")
        requirements = policy.get("evictionRequirements")
        if requirements is not None and (items := self._list(requirements, f"{path}.evictionRequirements")):
            for index, item in enumerate(items):
                where = f"{path}.evictionRequirements[{index}]"
                if (entry := self._map(item, where)) is None:
                    continue
                if entry.get("resources") is not None and (
                    names := self._list(entry["resources"], f"{where}.resources")
                ):
                    for i, name in enumerate(names):
                        self._str(name, f"{where}.resources[{i}]")
                if entry.get("changeRequirement") is not None:
                    self._str(entry["changeRequirement"], f"{where}.changeRequirement")

    def _scope(self, value: object, target: object) -> None:
        """AEP-10031: gated by `DaemonSetScope` (an old object that had it keeps it); only for a DaemonSet."""
        if (scope := self._str(value, "spec.scope")) is None or scope == "":
            return
        if not self.allow_scope:
            self.errors.append(
                FieldError(
                    FORBIDDEN, "spec.scope", f"not supported when feature flag {DAEMONSET_SCOPE} is disabled"
                )
            )
            return
        kind = target.get("kind") if isinstance(target, Mapping) else None
        if kind != "DaemonSet":
            self.errors.append(
                FieldError(FORBIDDEN, "spec.scope", f"only a DaemonSet target can be scoped, not {kind}")
            )

    def annotations(self, value: object) -> None:
        """Our own VPA annotations: a value the updater could not read is rejected here, naming the key."""
        if not isinstance(value, Mapping):
            return
        raw = value.get(ann.MEMORY_LIMIT_DECREASE)
        field = f"metadata.annotations[{ann.MEMORY_LIMIT_DECREASE}]"
        if raw is not None and (text := self._str(raw, field)) is not None:
            try:
                ann.parse_memory_limit_decrease(text)
            except ValueError as err:
                detail = str(err).removeprefix(f"{ann.MEMORY_LIMIT_DECREASE}: ")
                self.errors.append(FieldError(INVALID, field, detail, text))
        raw = value.get(ann.RESIZE_GUARD)
        field = f"metadata.annotations[{ann.RESIZE_GUARD}]"
        if raw is not None and (text := self._str(raw, field)) is not None and text not in ("true", "false"):
            self.errors.append(FieldError(NOT_SUPPORTED, field, _supported(("false", "true")), text))
        raw = value.get(ann.RESIZE_GUARD_WINDOW)
        field = f"metadata.annotations[{ann.RESIZE_GUARD_WINDOW}]"
        if raw is not None and (text := self._str(raw, field)) is not None:
            try:
                seconds = parse_go_duration_s(text)
            except DurationError as err:
                self.errors.append(FieldError(INVALID, field, str(err), text))
            else:
                if seconds <= 0:
                    self.errors.append(FieldError(INVALID, field, "must be a positive duration", text))

    def _initial_delay(self, value: object, field: str) -> None:
        """AEP-9936: gated by `VPAInitialDelay` (an old object that had it keeps it), 1 to 7776000."""
        number = self._int(value, field)
        if number is None:
            return
        if not self.allow_initial_delay:
            self.errors.append(
                FieldError(
                    FORBIDDEN, field, f"not supported when feature flag {VPA_INITIAL_DELAY} is disabled"
                )
            )
        elif not 1 <= number <= MAX_INITIAL_DELAY_S:
            self.errors.append(
                FieldError(INVALID, field, f"must be between 1 and {MAX_INITIAL_DELAY_S} seconds", number)
            )

    def _gated_int(self, value: object, field: str) -> None:
        number = self._int(value, field)
        if number is None:
            return
        if not self.allow_per_vpa:
            self.errors.append(
                FieldError(FORBIDDEN, field, f"not supported when feature flag {PER_VPA_CONFIG} is disabled")
            )
        elif number < 1:
            self.errors.append(FieldError(INVALID, field, "must be greater than or equal to 1", number))

    def resource_policy(self, policy: Mapping[str, Any], path: str) -> None:
        raw = policy.get("containerPolicies")
        if raw is None or (items := self._list(raw, f"{path}.containerPolicies")) is None:
            return
        for index, item in enumerate(items):
            where = f"{path}.containerPolicies[{index}]"
            if (entry := self._map(item, where)) is not None:
                self.container_policy(entry, where)

    def container_policy(self, policy: Mapping[str, Any], path: str) -> None:
        name = policy.get("containerName")
        if name is None or name == "":
            self.errors.append(FieldError(REQUIRED, f"{path}.containerName"))
        else:
            self._str(name, f"{path}.containerName")
        mode = None
        if policy.get("mode") is not None:
            mode = self._str(policy["mode"], f"{path}.mode")
            if mode is not None and mode not in SCALING_MODES:
                self.errors.append(FieldError(NOT_SUPPORTED, f"{path}.mode", _supported(SCALING_MODES), mode))
        minimum = self._resource_list(policy.get("minAllowed"), f"{path}.minAllowed")
        maximum = self._resource_list(policy.get("maxAllowed"), f"{path}.maxAllowed")
        for resource, low in minimum.items():
            high = maximum.get(resource)
            if high is not None and high < low:
                self.errors.append(
                    FieldError(
                        INVALID,
                        f"{path}.maxAllowed[{resource}]",
                        f'max resource for {resource} is lower than min of "{low.canonical()}"',
                        high.canonical(),
                    )
                )
        values = None
        if policy.get("controlledValues") is not None:
            values = self._str(policy["controlledValues"], f"{path}.controlledValues")
            if values is not None and values not in CONTROLLED_VALUES:
                self.errors.append(
                    FieldError(
                        NOT_SUPPORTED, f"{path}.controlledValues", _supported(CONTROLLED_VALUES), values
                    )
                )
        if mode == "Off" and values == "RequestsAndLimits":
            self.errors.append(
                FieldError(
                    FORBIDDEN,
                    f"{path}.controlledValues",
                    "controlledValues shouldn't be specified if container scaling mode is off",
                )
            )
        raw_resources = policy.get("controlledResources")
        if raw_resources is not None and (names := self._list(raw_resources, f"{path}.controlledResources")):
            for index, raw_name in enumerate(names):
                where = f"{path}.controlledResources[{index}]"
                if (
                    resource_name := self._str(raw_name, where)
                ) is None or resource_name in CONTROLLED_RESOURCES:
                    continue
                if self._old_controlled_resource(name, resource_name):
                    # upstream 1.8.1's wording, so a client sees the same warning from either webhook
                    self.warnings.append(
                        f'{where}: unsupported value "{resource_name}" is allowed only because it is present '
                        f'in the existing VPA object; supported values: "{CPU}", "{MEMORY}"'
                    )
                else:
                    self.errors.append(
                        FieldError(NOT_SUPPORTED, where, _supported(CONTROLLED_RESOURCES), resource_name)
                    )
        self._per_vpa_quantities(policy, path)
        for field_name in ("memoryAggregationIntervalSeconds", "memoryAggregationIntervalCount"):
            if policy.get(field_name) is not None:
                self._gated_int(policy[field_name], f"{path}.{field_name}")
        if policy.get("startupBoost") is not None:
            self.startup_boost(policy["startupBoost"], f"{path}.startupBoost")
        if policy.get("recommendationPercentiles") is not None:
            self._percentiles(policy["recommendationPercentiles"], f"{path}.recommendationPercentiles")

    def _percentiles(self, value: object, path: str) -> None:
        """AEP-9970: gated by `PerVPAConfig` (kept when the old object had it); `target` required, 1..100.
        The order against the recommender's bound percentiles is the recommender's check (`ConfigInvalid`)."""
        if (percentiles := self._map(value, path)) is None:
            return
        if not self.allow_per_vpa:
            self.errors.append(
                FieldError(FORBIDDEN, path, f"not supported when feature flag {PER_VPA_CONFIG} is disabled")
            )
            return
        for resource, raw in percentiles.items():
            where = f"{path}.{resource}"
            if resource not in CONTROLLED_RESOURCES:
                self.errors.append(
                    FieldError(NOT_SUPPORTED, path, _supported(CONTROLLED_RESOURCES), resource)
                )
                continue
            if (entry := self._map(raw, where)) is None:
                continue
            if entry.get("target") is None:
                self.errors.append(FieldError(REQUIRED, f"{where}.target"))
                continue
            target = self._int(entry["target"], f"{where}.target")
            if target is not None and not 1 <= target <= 100:
                self.errors.append(
                    FieldError(INVALID, f"{where}.target", "must be between 1 and 100", target)
                )

    def _per_vpa_quantities(self, policy: Mapping[str, Any], path: str) -> None:
        disabled = f"not supported when feature flag {PER_VPA_CONFIG} is disabled"
        if policy.get("oomBumpUpRatio") is not None:
            field = f"{path}.oomBumpUpRatio"
            ratio_quantity = self._quantity(policy["oomBumpUpRatio"], field)
            if ratio_quantity is not None:
                if not self.allow_per_vpa:
                    self.errors.append(FieldError(FORBIDDEN, field, disabled))
                elif (ratio := ratio_quantity.millis / 1000.0) < 1.0:
                    self.errors.append(
                        FieldError(INVALID, field, "must be greater than or equal to 1.0", ratio)
                    )
        if policy.get("oomMinBumpUp") is not None:
            field = f"{path}.oomMinBumpUp"
            bump = self._quantity(policy["oomMinBumpUp"], field)
            if bump is not None:
                if not self.allow_per_vpa:
                    self.errors.append(FieldError(FORBIDDEN, field, disabled))
                elif bump.value < 0:
                    self.errors.append(
                        FieldError(INVALID, field, "must be greater than or equal to 0", bump.value)
                    )

    def _resource_list(self, value: object, path: str) -> dict[str, Quantity]:
        """Parse a ResourceList; check CPU is whole millicores and memory whole bytes."""
        out: dict[str, Quantity] = {}
        if value is None or (resources := self._map(value, path)) is None:
            return out
        for resource, raw in resources.items():
            field = f"{path}[{resource}]"
            parsed = self._quantity(raw, field)
            if parsed is None:
                continue
            out[str(resource)] = parsed
            if parsed.nanos < 0:
                self.errors.append(
                    FieldError(INVALID, field, "must be greater than or equal to 0", parsed.canonical())
                )
            elif resource == CPU and parsed.nanos % 10**6:
                self.errors.append(
                    FieldError(INVALID, field, "must be a whole number of milli CPUs", parsed.canonical())
                )
            elif resource == MEMORY and parsed.nanos % 10**9:
                self.errors.append(
                    FieldError(INVALID, field, "must be a whole number of bytes", parsed.canonical())
                )
        return out

    def startup_boost(self, value: object, path: str) -> None:
        if not self.allow_boost:
            self.errors.append(
                FieldError(
                    FORBIDDEN,
                    path,
                    f"in order to use startupBoost, you must enable feature gate {CPU_STARTUP_BOOST} "
                    "in the admission-controller args",
                )
            )
            return
        if (boost := self._map(value, path)) is None or boost.get("cpu") is None:
            return
        cpu_path = f"{path}.cpu"
        if (cpu := self._map(boost["cpu"], cpu_path)) is None:
            return
        raw_type = cpu.get("type")
        boost_type = "" if raw_type is None else self._str(raw_type, f"{cpu_path}.type")
        if cpu.get("durationSeconds") is not None:
            self._int(cpu["durationSeconds"], f"{cpu_path}.durationSeconds")
        if boost_type is None:
            return
        if boost_type == "":
            self.errors.append(FieldError(REQUIRED, f"{cpu_path}.type", "must be either Factor or Quantity"))
        elif boost_type == "Factor":
            if cpu.get("factor") is None:
                self.errors.append(FieldError(REQUIRED, f"{cpu_path}.factor", "required when type is Factor"))
            elif (factor := self._int(cpu["factor"], f"{cpu_path}.factor")) is not None and factor < 1:
                self.errors.append(
                    FieldError(INVALID, f"{cpu_path}.factor", "must be >= 1 for type Factor", factor)
                )
        elif boost_type == "Quantity":
            field = f"{cpu_path}.quantity"
            if cpu.get("quantity") is None:
                self.errors.append(FieldError(REQUIRED, field, "required when type is Quantity"))
            elif (amount := self._quantity(cpu["quantity"], field)) is not None and amount.nanos % 10**6:
                self.errors.append(
                    FieldError(INVALID, field, "must be a whole number of milli CPUs", amount.canonical())
                )
        else:
            self.errors.append(
                FieldError(NOT_SUPPORTED, f"{cpu_path}.type", _supported(BOOST_TYPES), boost_type)
            )


def validate_vpa(
    obj: object, gates: FeatureGates, *, old: object = None, create: bool | None = None
) -> VpaAdmission:
    """Validate and default a VPA being created (`old` None) or updated (`old` = the stored object).

    `create` defaults to `old is None`. Never raises, whatever `obj` and `old` hold.
    """
    is_create = old is None if create is None else create
    validator = _Validator(gates, old)
    if not isinstance(obj, Mapping):
        validator._wrong_type("<object>", obj, "an object")
        return VpaAdmission(errors=tuple(validator.errors))
    raw_spec = obj.get("spec")
    spec: Mapping[str, Any] | None = {} if raw_spec is None else validator._map(raw_spec, "spec")
    if spec is not None:
        validator.spec(spec, is_create)
    validator.annotations(_get(obj, "metadata", "annotations"))
    if validator.errors:
        return VpaAdmission(errors=tuple(validator.errors), warnings=tuple(validator.warnings))
    patch: tuple[dict[str, Any], ...] = ()
    if raw_spec is None:
        patch = ({"op": "add", "path": "/spec", "value": {"updatePolicy": dict(DEFAULT_UPDATE_POLICY)}},)
    elif spec is not None and spec.get("updatePolicy") is None:
        patch = ({"op": "add", "path": "/spec/updatePolicy", "value": dict(DEFAULT_UPDATE_POLICY)},)
    return VpaAdmission(warnings=tuple(validator.warnings), patch=patch)
