"""Applying a PATCH body to a pod for the subresources this package serves (`pods/resize`).

Owns: RFC 6902 JSON Patch, RFC 7386 JSON merge patch, and strategic merge patch with the merge keys of the
core/v1 Pod schema (containers and init containers by `name`, resize policies by `resourceName`, conditions
by `type`, env and volumes by `name`, ports by `containerPort`, volume mounts by `mountPath`), including the
`$patch: delete|replace`, `$retainKeys` and `$setElementOrder/...` directives.

Must not: touch the store or know what the patched object means. Raises ApiError (400/422) for bad patches.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from vpa.sim.contracts import ApiError, JsonObj

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

# Field name → merge key for lists under a pod (strategic merge). Lists not named here are replaced.
_MERGE_KEYS: Final[dict[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "resizePolicy": "resourceName",
    "conditions": "type",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
}


def apply_patch(obj: JsonObj, body: Any, content_type: str | None) -> JsonObj:
    """Return a patched deep copy of `obj`."""
    kind = (content_type or STRATEGIC_MERGE_PATCH).split(";", 1)[0].strip()
    if kind == JSON_PATCH or (content_type is None and isinstance(body, list)):
        # Only a JSON Patch is a list: accept it even when the caller lost the content type.
        if not isinstance(body, list):
            raise ApiError(400, "BadRequest", "json patch must be a list of operations")
        return json_patch(obj, body)
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "patch body must be a JSON object")
    if kind == MERGE_PATCH:
        return dict(merge_patch(obj, body))
    if kind in (STRATEGIC_MERGE_PATCH, "application/json", APPLY_PATCH):
        return dict(strategic_merge(obj, body))
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - "
        f"accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}",
    )


# --- RFC 7386 -----------------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# --- strategic merge ----------------------------------------------------------------------------------------


def strategic_merge(target: Any, patch: Any, field: str | None = None) -> Any:
    if isinstance(patch, list):
        return _merge_list(target, patch, field)
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(out.get(name), list) and isinstance(value, list):
                out[name] = [v for v in out[name] if v not in value]
            continue
        if value is None:
            out.pop(key, None)
            continue
        merged = strategic_merge(out.get(key), value, key)
        if merged is None:
            out.pop(key, None)
        else:
            out[key] = merged
    if isinstance(retain, list):
        for key in list(out):
            if key not in retain:
                out.pop(key)
    return out


def _merge_list(target: Any, patch: list[Any], field: str | None) -> list[Any]:
    key = _MERGE_KEYS.get(field or "")
    if key is None or not isinstance(target, list):
        items = [p for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
        return copy.deepcopy(items)
    out = copy.deepcopy(target)
    for item in patch:
        if not isinstance(item, dict):
            out.append(copy.deepcopy(item))
            continue
        if item.get("$patch") == "replace":
            return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
        ident = item.get(key)
        index = next(
            (
                i
                for i, existing in enumerate(out)
                if isinstance(existing, dict) and existing.get(key) == ident
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
            continue
        if index is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if v is not None})
        else:
            out[index] = strategic_merge(out[index], item)
    return out


# --- RFC 6902 -----------------------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(
            422,
            "Invalid",
            f"the server rejected our request due to an error in our request: invalid JSON pointer {path!r}",
        )
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _missing(path)
    return node, parts[-1]


def _missing(path: str) -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f"the server rejected our request due to an error in our request: "
        f'doc is missing path: "{path}": missing value',
    )


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _missing(path)
    return node


def json_patch(obj: JsonObj, operations: list[Any]) -> JsonObj:
    doc: Any = copy.deepcopy(obj)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise ApiError(400, "BadRequest", 'json patch operation must be an object with "op"')
        name, path = op["op"], str(op.get("path", ""))
        if name == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our "
                    f"request: testing value {path} failed",
                )
            continue
        if name in ("move", "copy"):
            value = copy.deepcopy(_get(doc, str(op.get("from", ""))))
            if name == "move":
                doc = _remove(doc, str(op.get("from", "")))
            doc = _add(doc, path, value)
            continue
        if name == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif name == "remove":
            doc = _remove(doc, path)
        elif name == "replace":
            _get(doc, path)
            doc = _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        else:
            raise ApiError(400, "BadRequest", f"unknown json patch operation {name!r}")
    if not isinstance(doc, dict):
        raise ApiError(422, "Invalid", "json patch must leave an object")
    return doc


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise _missing(path)
    else:
        raise _missing(path)
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        parent.pop(int(last))
    else:
        raise _missing(path)
    return doc
