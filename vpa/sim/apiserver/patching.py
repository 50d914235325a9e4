"""The four PATCH flavours kube-apiserver accepts, applied to plain JSON documents.

Owns: JSON merge patch (RFC 7386), JSON patch (RFC 6902, including `test`, `move`, `copy`), strategic
merge patch (lists merged by their patchMergeKey; the directives kubectl sends: `$patch: replace|delete|
merge`, `$setElementOrder/<list>`, `$retainKeys`, `$deleteFromPrimitiveList/<list>`) and the simulator's
approximation of server-side apply (`apply`): the applied configuration is merged like a strategic merge
patch (built-ins) or a merge patch (custom resources); field ownership is not tracked.

Must not: touch the store. Inputs are never mutated; errors are `ApiError` (400 malformed, 422 failed).
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.contracts import ApiError

# Field name → patchMergeKey for lists merged by key (Kubernetes' struct tags, context-free here).
# Lists without `patchStrategy:"merge"` (e.g. `status.containerStatuses`) are atomic: a patch replaces them.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "resizePolicy": "resourceName",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "addresses": "type",
    "webhooks": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
}
# Lists of primitives merged as sets (patchStrategy=merge on []string).
PRIMITIVE_MERGE = {"finalizers"}


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # Container ports merge by containerPort, Service ports by port.
        for it in items:
            if isinstance(it, dict):
                return "containerPort" if "containerPort" in it else "port"
        return "containerPort"
    return MERGE_KEYS.get(field)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# ---------------------------------------------------------------- JSON patch


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(400, "BadRequest", f"invalid JSON pointer: {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _resolve_parent(doc: Any, tokens: list[str], path: str) -> tuple[Any, str]:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise _patch_failed(f"doc is missing path: {path}")
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                idx = int(t)
            except ValueError:
                raise _patch_failed(f"invalid array index in path {path}") from None
            if not 0 <= idx < len(cur):
                raise _patch_failed(f"doc is missing path: {path}: index out of range")
            cur = cur[idx]
        else:
            raise _patch_failed(f"doc is missing path: {path}")
    return cur, tokens[-1]


def _patch_failed(msg: str) -> ApiError:
    return ApiError(422, "Invalid", msg)


def _get(doc: Any, path: str) -> Any:
    tokens = _split_pointer(path)
    if not tokens:
        return doc
    parent, last = _resolve_parent(doc, tokens, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise _patch_failed(f"doc is missing path: {path}")
        return parent[last]
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            raise _patch_failed(f"invalid array index in path {path}") from None
        if not 0 <= idx < len(parent):
            raise _patch_failed(f"doc is missing path: {path}: index out of range")
        return parent[idx]
    raise _patch_failed(f"doc is missing path: {path}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _split_pointer(path)
    if not tokens:
        return value
    parent, last = _resolve_parent(doc, tokens, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                idx = int(last)
            except ValueError:
                raise _patch_failed(f"invalid array index in path {path}") from None
            if not 0 <= idx <= len(parent):
                raise _patch_failed(f"unable to add to {path}: index out of range")
            parent.insert(idx, value)
    else:
        raise _patch_failed(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _split_pointer(path)
    if not tokens:
        raise _patch_failed("cannot remove the document root")
    parent, last = _resolve_parent(doc, tokens, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise _patch_failed(f"unable to remove nonexistent key: {last}: missing value")
        return parent.pop(last)
    if isinstance(parent, list):
        try:
            idx = int(last)
        except ValueError:
            raise _patch_failed(f"invalid array index in path {path}") from None
        if not 0 <= idx < len(parent):
            raise _patch_failed(f"unable to remove {path}: index out of range")
        return parent.pop(idx)
    raise _patch_failed(f"doc is missing path: {path}")


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, "BadRequest", f"missing value for {kind} operation at {path}")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            tokens = _split_pointer(path)
            if not tokens:
                doc = copy.deepcopy(op["value"])
            else:
                parent, last = _resolve_parent(doc, tokens, path)
                if isinstance(parent, list):
                    parent[int(last)] = copy.deepcopy(op["value"])
                else:
                    parent[last] = copy.deepcopy(op["value"])
        elif kind == "move":
            value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            value = copy.deepcopy(_get(doc, op.get("from", "")))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise _patch_failed(f"testing value {path} failed: test failed")
        else:
            raise ApiError(400, "BadRequest", f"unexpected JSON patch operation {kind!r}")
    return doc


# ---------------------------------------------------------------- strategic merge patch


def _key_of(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else item


def _order(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    wanted = [_key_of(o, key) if key else o for o in order]
    pos = {k: i for i, k in enumerate(wanted)}

    def sort_key(pair: tuple[int, Any]) -> tuple[int, int]:
        i, it = pair
        k = _key_of(it, key) if key else it
        try:
            return (0, pos[k]) if k in pos else (1, i)
        except TypeError:
            return (1, i)

    return [it for _, it in sorted(enumerate(items), key=sort_key)]


def _merge_sorted(left: list[Any], right: list[Any], server: list[Any], key: str) -> list[Any]:
    """apimachinery's order for a merged keyed list without `$setElementOrder`: the patch's items (`left`,
    in patch order) and the server-only items (`right`, in server order) interleaved by their server
    positions; an item the server did not have goes before whatever it is compared with."""
    pos: dict[Any, int] = {}
    for i, item in enumerate(server):
        with contextlib.suppress(TypeError):
            pos.setdefault(_key_of(item, key), i)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
            continue
        if j >= len(right):
            out.append(left[i])
            i += 1
            continue
        try:
            li, ri = pos.get(_key_of(left[i], key)), pos.get(_key_of(right[j], key))
        except TypeError:
            li = ri = None
        if li is not None and ri is not None and ri < li:
            out.append(right[j])
            j += 1
        else:
            out.append(left[i])
            i += 1
    return out


def _merge_list(field: str, original: list[Any], patch: list[Any], normalize: bool = True) -> list[Any]:
    key = _merge_key(field, patch or original)
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if field in PRIMITIVE_MERGE and all(not isinstance(p, dict) for p in patch):
        out = list(original)
        for p in patch:
            if p not in out:
                out.append(p)
        return out
    if key is None:
        return [strip_directives(copy.deepcopy(p)) for p in patch]
    out = [copy.deepcopy(o) for o in original]
    for p in patch:
        if not isinstance(p, dict):
            raise ApiError(400, "BadRequest", f"{field}: expected objects keyed by {key}")
        k = p.get(key)
        idx = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == k), None)
        if p.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge(None, p))
        else:
            out[idx] = strategic_merge(out[idx], p)
    if not normalize:
        return out
    patched = [p.get(key) for p in patch if isinstance(p, dict) and p.get("$patch") != "delete"]
    in_patch = {k for k in patched if isinstance(k, (str, int))}
    left = sorted(
        (o for o in out if isinstance(o, dict) and o.get(key) in in_patch),
        key=lambda o: patched.index(o.get(key)),
    )
    right = [o for o in out if not (isinstance(o, dict) and o.get(key) in in_patch)]
    return _merge_sorted(left, right, original, key)


def strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def strategic_merge(original: Any, patch: Any) -> Any:
    """Strategic merge patch of `patch` onto `original` (neither mutated)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return strip_directives(copy.deepcopy({k: v for k, v in patch.items() if k != "$patch"}))
    if patch.get("$patch") == "delete":
        return None
    out: dict[str, Any] = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list):
            cur = out.get(k)
            out[k] = _merge_list(
                k, cur if isinstance(cur, list) else [], v, f"$setElementOrder/{k}" not in patch
            )
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                out.pop(k, None)
            else:
                out[k] = strategic_merge(out.get(k), v)
        else:
            out[k] = v
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if not isinstance(v, list):
                raise ApiError(400, "BadRequest", "invalid patch: $deleteFromPrimitiveList needs a list")
            cur = out.get(field)
            if isinstance(cur, list):
                out[field] = [x for x in cur if x not in v]
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            field = k.split("/", 1)[1]
            cur = out.get(field)
            if isinstance(cur, list) and isinstance(v, list):
                out[field] = _order(cur, v, _merge_key(field, cur))
    if retain is not None:
        if not isinstance(retain, list):
            raise ApiError(400, "BadRequest", "invalid patch: $retainKeys must be a list")
        out = {k: v for k, v in out.items() if k in retain}
    return out


def apply_patch(patch_type: str, original: Any, body: Any, rt: ResourceType) -> Any:
    if patch_type == "json":
        return json_patch(original, body)
    if patch_type == "merge":
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "merge patch must be a JSON object")
        return merge_patch(original, body)
    if patch_type == "strategic":
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "strategic merge patch must be a JSON object")
        return strategic_merge(original, body)
    if patch_type == "apply":
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "apply patch must be an object")
        if rt.strategic_merge:
            return strategic_merge(original, body)
        return merge_patch(original, body)
    raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {patch_type!r}")
