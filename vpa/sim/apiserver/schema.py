"""Structural-schema handling for custom resources: validation, pruning and defaulting.

Owns: checking a custom object against its CRD version's `openAPIV3Schema` the way apiextensions-apiserver
does for what the VPA CRDs use (types, `required`, `enum`, `minimum`/`maximum`, lengths, `pattern`,
`minItems`/`maxItems`, `nullable`, `x-kubernetes-int-or-string`, `anyOf`/`oneOf`/`allOf`), pruning unknown
fields unless `x-kubernetes-preserve-unknown-fields` is set, and applying `default`s. Errors come back as
(field path, reason, message) triples in kube-apiserver's wording.

Must not: know about storage or HTTP. CEL `x-kubernetes-validations` are not evaluated (an object that fails
the schema gets kube-apiserver's "some validation rules were not checked" cause, as it would there).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import orjson

Cause = tuple[str, str, str]
_ROOT_KEEP = {"apiVersion", "kind", "metadata"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, (dict, list)):
        return '"' + _type_name(value) + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _type_ok(expected: str, value: Any) -> bool:
    actual = _type_name(value)
    if expected == "number":
        return actual in ("number", "integer")
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        return True
    return actual == expected


def validate_and_prune(
    schema: dict[str, Any], obj: dict[str, Any], pruned: list[str] | None = None
) -> list[Cause]:
    """Validate `obj` in place (pruning and defaulting it); return the errors.

    Paths of pruned (unknown) fields are appended to `pruned` when given (field validation).
    """
    if pruned is None:
        pruned = []
    errors: list[Cause] = []
    props = schema.get("properties") or {}
    for k in list(obj):
        if k in _ROOT_KEEP:
            continue
        if k in props:
            obj[k] = _walk(props[k], obj[k], k, errors, pruned)
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            pruned.append(k)
            del obj[k]
    for k, sub in props.items():
        if k in _ROOT_KEEP or k in obj:
            continue
        if "default" in sub:
            obj[k] = _walk(sub, copy.deepcopy(sub["default"]), k, errors, pruned)
    for req in schema.get("required") or []:
        if req not in obj:
            errors.append((req, "FieldValueRequired", "Required value"))
    if errors and _has_rules(schema):
        # kube-apiserver skips CEL rules on an object that fails its schema, and says so as a last cause.
        errors.append(("<nil>", "FieldValueInvalid", _RULES_SKIPPED))
    return errors


_RULES_SKIPPED = (
    "Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


def _has_rules(schema: Any) -> bool:
    """Whether any part of the schema carries `x-kubernetes-validations` (CEL rules)."""
    if isinstance(schema, dict):
        return "x-kubernetes-validations" in schema or any(_has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_rules(v) for v in schema)
    return False


def _walk(schema: dict[str, Any], value: Any, path: str, errors: list[Cause], pruned: list[str]) -> Any:
    if value is None:
        if schema.get("nullable"):
            return None
        # kube-apiserver prunes nulls of non-nullable fields that have no default; treat as a type error.
        if "default" in schema:
            return copy.deepcopy(schema["default"])
        errors.append(
            (
                path,
                "FieldValueTypeInvalid",
                f'Invalid value: "null": {path} in body must be of type {schema.get("type", "object")}: '
                '"null"',
            )
        )
        return value
    int_or_string = schema.get("x-kubernetes-int-or-string")
    expected = schema.get("type")
    if int_or_string:
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append(
                (
                    path,
                    "FieldValueTypeInvalid",
                    f"Invalid value: {_show(value)}: {path} in body must be of type integer,string: "
                    f'"{_type_name(value)}"',
                )
            )
            return value
    elif expected and not _type_ok(expected, value):
        errors.append(
            (
                path,
                "FieldValueTypeInvalid",
                f'Invalid value: "{_type_name(value)}": {path} in body must be of type {expected}: '
                f'"{_type_name(value)}"',
            )
        )
        return value
    for sub in schema.get("allOf") or []:
        _check_value(sub, value, path, errors)
    for key in ("anyOf", "oneOf"):
        alts = schema.get(key)
        if alts:
            matched = 0
            for alt in alts:
                trial: list[Cause] = []
                _check_value(alt, value, path, trial)
                if not trial:
                    matched += 1
            if matched == 0 or (key == "oneOf" and matched > 1):
                errors.append(
                    (
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body must match "
                        f"{'at least one' if key == 'anyOf' else 'exactly one'} schema in {key}",
                    )
                )
    _check_value(schema, value, path, errors, alternative=False)
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        embedded = schema.get("x-kubernetes-embedded-resource")
        if props is not None or addl is not None or not preserve:
            for k in list(value):
                sub_path = f"{path}.{k}"
                if props and k in props:
                    value[k] = _walk(props[k], value[k], sub_path, errors, pruned)
                elif isinstance(addl, dict):
                    value[k] = _walk(addl, value[k], sub_path, errors, pruned)
                elif addl is True or preserve or (embedded and k in _ROOT_KEEP):
                    continue
                else:
                    pruned.append(sub_path)
                    del value[k]
        for k, sub in (props or {}).items():
            if k not in value and "default" in sub:
                value[k] = _walk(sub, copy.deepcopy(sub["default"]), f"{path}.{k}", errors, pruned)
        for req in schema.get("required") or []:
            if req not in value:
                errors.append((f"{path}.{req}", "FieldValueRequired", "Required value"))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, it in enumerate(value):
                value[i] = _walk(items, it, f"{path}[{i}]", errors, pruned)
    return value


def _check_value(
    schema: dict[str, Any], value: Any, path: str, errors: list[Cause], alternative: bool = True
) -> None:
    """Scalar/collection constraints of one schema node (no recursion into properties)."""
    expected = schema.get("type")
    if expected and not schema.get("x-kubernetes-int-or-string") and not _type_ok(expected, value):
        errors.append(
            (
                path,
                "FieldValueTypeInvalid",
                f'Invalid value: "{_type_name(value)}": {path} in body must be of type {expected}: '
                f'"{_type_name(value)}"',
            )
        )
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(_show(e) for e in enum)
        errors.append(
            (
                path,
                "FieldValueNotSupported",
                f"Unsupported value: {_show(value)}: supported values: {supported}",
            )
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        mn, mx = schema.get("minimum"), schema.get("maximum")
        if mn is not None:
            if schema.get("exclusiveMinimum") and value <= mn:
                errors.append(
                    (
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body should be greater than {mn}",
                    )
                )
            elif value < mn:
                errors.append(
                    (
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body should be greater than or "
                        f"equal to {mn}",
                    )
                )
        if mx is not None:
            if schema.get("exclusiveMaximum") and value >= mx:
                errors.append(
                    (
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body should be less than {mx}",
                    )
                )
            elif value > mx:
                errors.append(
                    (
                        path,
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body should be less than or equal to {mx}",
                    )
                )
    if isinstance(value, str):
        if schema.get("minLength") is not None and len(value) < schema["minLength"]:
            errors.append(
                (
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be at least "
                    f"{schema['minLength']} chars long",
                )
            )
        if schema.get("maxLength") is not None and len(value) > schema["maxLength"]:
            errors.append(
                (path, "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes")
            )
        pattern = schema.get("pattern")
        if pattern and re.search(pattern, value) is None:
            errors.append(
                (
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should match '{pattern}'",
                )
            )
    if isinstance(value, list):
        if schema.get("minItems") is not None and len(value) < schema["minItems"]:
            errors.append(
                (
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {len(value)}: {path} in body should have at least "
                    f"{schema['minItems']} items",
                )
            )
        if schema.get("maxItems") is not None and len(value) > schema["maxItems"]:
            errors.append(
                (
                    path,
                    "FieldValueTooMany",
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                )
            )
    if isinstance(value, dict):
        if schema.get("minProperties") is not None and len(value) < schema["minProperties"]:
            errors.append(
                (
                    path,
                    "FieldValueInvalid",
                    f"Invalid value: {len(value)}: {path} in body should have at least "
                    f"{schema['minProperties']} properties",
                )
            )
        if alternative:
            # In anyOf/oneOf/allOf branches `required` is a constraint of the branch itself.
            for req in schema.get("required") or []:
                if req not in value:
                    errors.append((f"{path}.{req}", "FieldValueRequired", "Required value"))
