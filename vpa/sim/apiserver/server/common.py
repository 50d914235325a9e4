"""What every part of the simulated API server's HTTP layer shares: media types, small helpers, audit records.

Owns: the JSON media type and the body / patch media types the server accepts, `json_response` and
`error_response` (an `ApiError` as a `Status` body, with `Retry-After` when it has one), the query
parameters read everywhere (`dryRun`, boolean flags, whether the client asked for a `Table`), API Priority
and Fairness response headers, and `AuditRecord`.

Must not: hold server state or route requests (that is `core`), or know about the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aiohttp import web

from vpa.sim.contracts import ApiError

JSON = "application/json"
BODY_TYPES = {"application/json", "application/yaml", "application/apply-patch+yaml"}
SubresourceVerb = Literal["GET", "POST", "PUT", "PATCH"]
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON, headers=headers)


def error_response(err: ApiError) -> web.Response:
    headers = {}
    if err.retry_after_s is not None:
        headers["Retry-After"] = str(err.retry_after_s)
    return json_response(err.status(), status=err.code, headers=headers)


# API Priority and Fairness (kube-apiserver 1.35, on by default): every request it classifies is answered
# with the UIDs of the FlowSchema and PriorityLevelConfiguration that matched. Every client of the simulator
# acts as a cluster admin (group system:masters), which the mandatory `exempt` FlowSchema sends to the
# `exempt` priority level: never queued or rejected. The UIDs are fixed here; a real server generates them.
PF_FLOW_SCHEMA_UID_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PF_PRIORITY_LEVEL_UID_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
EXEMPT_FLOW_SCHEMA_UID = "8e1a9d2c-0f4b-4c55-9a36-5d3f1b0e7a01"
EXEMPT_PRIORITY_LEVEL_UID = "8e1a9d2c-0f4b-4c55-9a36-5d3f1b0e7a02"


async def priority_and_fairness_headers(request: web.Request, response: web.StreamResponse) -> None:
    if not request.path.startswith("/sim/"):
        response.headers[PF_FLOW_SCHEMA_UID_HEADER] = EXEMPT_FLOW_SCHEMA_UID
        response.headers[PF_PRIORITY_LEVEL_UID_HEADER] = EXEMPT_PRIORITY_LEVEL_UID


def wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def parse_dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise ApiError(400, "BadRequest", f'Invalid dry run value: "{v}": supported values: "All"')
    return bool(values)


def bool_param(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One write the server answered: when (wall clock), what, its status, and the client's bearer token."""

    time: float
    method: str
    path: str
    status: int
    token: str
