"""The store's shared vocabulary: API errors, the request context, object helpers, the admission seam.

Owns: kube-apiserver's NotFound / Conflict / Invalid errors, the identities writes are made as
(`DEFAULT_USER`, `CONTROLLER_USER`), the per-request context variables (`WARNINGS`, `REQUEST_USER`,
`FIELD_VALIDATION`), timestamps and deep copies, the spec-changed and same-object tests the write paths
share, and the `Admission` protocol the store calls webhooks through.

Must not: hold state or know the store's classes; everything here is a pure function or a declaration.
"""

from __future__ import annotations

import builtins
import copy
import time
from contextvars import ContextVar
from typing import Any, Protocol

import orjson

from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.contracts import ApiError, JsonObj, Operation

DEFAULT_USER: JsonObj = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
CONTROLLER_USER: JsonObj = {
    "username": "system:kube-controller-manager",
    "groups": ["system:authenticated"],
}


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def deep_copy(obj: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(obj))
    except TypeError:
        return copy.deepcopy(obj)


def not_found(rt: ResourceType, name: str) -> ApiError:
    res = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(
        404, "NotFound", f'{res} "{name}" not found', name=name, kind=rt.plural, group=rt.group or None
    )


def conflict(rt: ResourceType, name: str) -> ApiError:
    res = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {res} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        name=name,
        kind=rt.plural,
        group=rt.group or None,
    )


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; causes are (field, reason, message-detail) triples as kube formats them."""
    kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    details = [f"{f}: {m}" for f, _, m in causes]
    joined = details[0] if len(details) == 1 else "[" + ", ".join(details) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {joined}',
        causes=[{"reason": r, "message": m, "field": f} for f, r, m in causes],
        kind=rt.kind,
        name=name,
        group=rt.group or None,
    )


class Admission(Protocol):
    """What the store needs of admission webhooks (implemented in `admission.py`)."""

    async def mutate(
        self,
        rt: ResourceType,
        op: Operation,
        obj: JsonObj,
        old: JsonObj | None,
        subresource: str | None,
        *,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> tuple[JsonObj, list[str]]: ...

    async def validate(
        self,
        rt: ResourceType,
        op: Operation,
        obj: JsonObj | None,
        old: JsonObj | None,
        subresource: str | None,
        *,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> list[str]: ...

    def active(self) -> bool: ...


# Admission warnings of the current request; the HTTP layer sets a list and turns it into Warning headers.
WARNINGS: ContextVar[builtins.list[str] | None] = ContextVar("sim_admission_warnings", default=None)


# Who is writing: HTTP requests set the client's identity; in-process writes (controllers, node agent)
# default to the controller manager's, as kube-apiserver's admission sees them.
REQUEST_USER: ContextVar[JsonObj] = ContextVar("sim_request_user", default=CONTROLLER_USER)

# The request's fieldValidation directive (Strict, Warn, Ignore); the HTTP layer sets it per request.
FIELD_VALIDATION: ContextVar[str] = ContextVar("sim_field_validation", default="Ignore")


def add_warnings(warnings: builtins.list[str]) -> None:
    sink = WARNINGS.get()
    if sink is not None and warnings:
        sink.extend(w for w in warnings if w not in sink)


def spec_changed(rt: ResourceType, old: JsonObj, new: JsonObj) -> bool:
    skip = {"metadata", "status"} if rt.status_subresource else {"metadata"}
    keys = (set(old) | set(new)) - skip - {"apiVersion", "kind"}
    if any(old.get(k) != new.get(k) for k in keys):
        return True
    return bool(new["metadata"].get("deletionTimestamp")) and not old["metadata"].get("deletionTimestamp")


def same_object(old: JsonObj, new: JsonObj) -> bool:
    if old.keys() != new.keys():
        return False
    for k, v in new.items():
        if k == "metadata":
            omd = old["metadata"]
            if omd.keys() != v.keys():
                return False
            if any(omd[mk] != mv for mk, mv in v.items() if mk != "resourceVersion"):
                return False
        elif old[k] != v:
            return False
    return True
