"""Label selectors, readiness and controller owners of wire-form objects.

Owns: `metav1.LabelSelector` and map-selector matching, a pod's Ready condition, and an object's
controller owner reference.

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# --- labels -------------------------------------------------------------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None selects nothing, {} selects everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def map_selector_matches(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """ReplicationController `spec.selector` (plain map): empty selects nothing."""
    if not selector:
        return False
    return all(labels.get(k) == v for k, v in selector.items())


def is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None
