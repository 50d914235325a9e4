"""Label and field selectors as kube-apiserver parses and applies them to stored objects.

Owns: parsing the string forms (`a=b,c!=d,e in (x,y),f notin (z),g,!h` for labels; `k=v,k==v,k!=v` for
fields), matching parsed selectors against JSON objects, and turning a structured `LabelSelector`
(`matchLabels` / `matchExpressions`) into its string form (the `scale` subresource's `status.selector`).

Must not: know about storage or HTTP. Errors are `ApiError` 400 BadRequest, as the real server answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vpa.sim.contracts import ApiError

JsonObj = dict[str, Any]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_CMP_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.op
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op == "=":
            return labels.get(self.key) == self.values[0]
        if op == "!=":
            return labels.get(self.key) != self.values[0]
        if op == "in":
            return self.key in labels and labels[self.key] in self.values
        # notin: a missing key matches, as in apimachinery.
        return labels.get(self.key) not in self.values


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in (s.strip() for s in parts) if p]


def parse_label_selector(text: str | None) -> list[Requirement]:
    if not text or not text.strip():
        return []
    reqs: list[Requirement] = []
    for part in _split_top_level(text):
        m = _CMP_RE.match(part)
        if m:
            op = "=" if m.group(2) in ("=", "==") else "!="
            reqs.append(Requirement(m.group(1), op, (m.group(3),)))
            continue
        m = _SET_RE.match(part)
        if m:
            neg, key, setop, values = m.groups()
            if setop:
                if neg:
                    raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
                vals = tuple(v.strip() for v in values.split(",") if v.strip())
                reqs.append(Requirement(key, setop, vals))
            else:
                reqs.append(Requirement(key, "!" if neg else "exists"))
            continue
        raise ApiError(400, "BadRequest", f"unable to parse requirement: found '{part}', expected: selector")
    return reqs


def labels_match(reqs: list[Requirement], obj: JsonObj) -> bool:
    if not reqs:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


def _get_path(obj: JsonObj, path: str) -> str | None:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
        if cur is None:
            return None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


# Fields every kind supports, plus per-kind ones (kube-apiserver registers these per resource).
_COMMON_FIELDS = {"metadata.name", "metadata.namespace"}
_KIND_FIELDS: dict[str, set[str]] = {
    "pods": {
        "spec.nodeName",
        "status.phase",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "events": {
        "reason",
        "type",
        "source",
        "reportingComponent",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
    },
    "nodes": {"spec.unschedulable"},
    "namespaces": {"status.phase"},
    "secrets": {"type"},
    "replicasets.apps": {"status.replicas"},
    "jobs.batch": {"status.successful"},
}


FieldMatcher = Callable[[JsonObj], bool]


def parse_field_selector(text: str | None, resource: str) -> list[tuple[str, str, str]]:
    if not text or not text.strip():
        return []
    allowed = _COMMON_FIELDS | _KIND_FIELDS.get(resource, set())
    out: list[tuple[str, str, str]] = []
    for part in _split_top_level(text):
        m = _CMP_RE.match(part)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector: {part!r}")
        key, op, value = m.groups()
        if key not in allowed:
            raise ApiError(
                400,
                "BadRequest",
                f"field label not supported: {key}",
            )
        out.append((key, "!=" if op == "!=" else "=", value))
    return out


def fields_match(reqs: list[tuple[str, str, str]], obj: JsonObj) -> bool:
    for key, op, value in reqs:
        actual = _get_path(obj, key)
        if actual is None:
            actual = ""
        if (actual == value) != (op == "="):
            return False
    return True


def selector_to_string(selector: JsonObj | None) -> str:
    """A structured LabelSelector as the string kube-apiserver puts into `scale.status.selector`."""
    if not selector:
        return ""
    parts: list[str] = []
    for k, v in sorted((selector.get("matchLabels") or {}).items()):
        parts.append(f"{k}={v}")
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), sorted(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
