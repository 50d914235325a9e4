"""The simulated API server's HTTP surface (aiohttp): Kubernetes REST paths plus the `/sim/v1` control API.

Owns: routing `/api`, `/apis`, `/api/v1/...`, `/apis/<group>/<version>/...` (and the legacy `/watch/`
prefix) onto the store; discovery documents (legacy, and aggregated apidiscovery.k8s.io/v2 when asked);
`/version`, `/healthz`, `/readyz`, `/livez`; a minimal `/openapi/v3` (PATCH operations advertising
`fieldValidation` for kubectl's probe, custom resources' schemas for `kubectl explain`; no requestBody, so
kubectl's client-side apply computes strategic merge patches from its compiled-in types; `/openapi/v2`
answers 404); LIST with `limit`/`continue`; chunked WATCH streams with bookmarks, `timeoutSeconds`,
`sendInitialEvents` and 410 `Expired`; `Table` output; `status`/`scale` subresources; hook-served
subresources and aggregated APIs; the events.k8s.io view of Events; JSON, YAML and (for kubectl's typed
clients) protobuf request bodies; gzip for bodies over 128 KiB (`compression`); `Status` errors; faults
(resource requests only: discovery, `/version` and `/sim/v1` are never paused or failed).

Server-side apply (`application/apply-patch+yaml`) is approximated: the applied configuration is merged
like a strategic merge patch (built-ins) or a merge patch (custom resources), creating the object when it
is missing; field ownership and conflicts are not tracked.

Control API (JSON):
  GET  /sim/v1/clock                 -> {"now": <unix seconds float>, "timeScale": x}
  POST /sim/v1/clock/advance         {"seconds": n}  -> advance virtual time, then settle; answers the clock
  POST /sim/v1/faults/drop-watches   -> {"dropped": n}
  POST /sim/v1/faults/compact        -> {"compactedResourceVersion": "n"}
  POST /sim/v1/faults/bookmark       -> send a BOOKMARK on every watch that allows them
  POST /sim/v1/faults/inject         {"verb","resource","code","latencySeconds","count","userAgent",
                                      "subresource"} -> {"id": n, ...}
  GET  /sim/v1/faults                -> the injected faults with their hit counts
  POST /sim/v1/faults/clear | /pause | /resume

Audit: with `audit` set to a list, every write (any method but GET, HEAD, OPTIONS) on a resource path is
appended as an `AuditRecord` (wall-clock time, method, path, status, the bearer token that made it), as
kube-apiserver's audit log records the user: tests attribute writes to the client that made them.

Must not: implement object semantics (the store does) or kind behaviour (hooks do).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import orjson
import yaml
from aiohttp import hdrs, web

from vpa.sim.apiserver import protobuf, tables, views
from vpa.sim.apiserver.compression import compress_large_responses
from vpa.sim.apiserver.faults import Faults
from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.selectors import selector_to_string
from vpa.sim.apiserver.store import (
    DEFAULT_USER,
    FIELD_VALIDATION,
    REQUEST_USER,
    WARNINGS,
    Event,
    ObjectStore,
    Watcher,
    deep_copy,
    not_found,
)
from vpa.sim.contracts import ApiError, JsonObj, SubresourceRequest

_log = logging.getLogger(__name__)
JSON = "application/json"
_BODY_TYPES = {"application/json", "application/yaml", "application/apply-patch+yaml"}
SubresourceVerb = Literal["GET", "POST", "PUT", "PATCH"]
_PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
# Metadata of subresources other helpers register, for discovery.
_SUBRESOURCE_INFO: dict[str, tuple[str, str, str, list[str]]] = {
    "eviction": ("policy", "v1", "Eviction", ["create"]),
    "binding": ("", "v1", "Binding", ["create"]),
    "resize": ("", "v1", "Pod", ["get", "patch", "update"]),
    "ephemeralcontainers": ("", "v1", "Pod", ["get", "patch", "update"]),
    "log": ("", "v1", "Pod", ["get"]),
    "exec": ("", "v1", "PodExecOptions", ["create", "get"]),
}


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON, headers=headers)


def _error_response(err: ApiError) -> web.Response:
    headers = {}
    if err.retry_after_s is not None:
        headers["Retry-After"] = str(err.retry_after_s)
    return _json(err.status(), status=err.code, headers=headers)


# API Priority and Fairness (kube-apiserver 1.35, on by default): every request it classifies is answered
# with the UIDs of the FlowSchema and PriorityLevelConfiguration that matched. Every client of the simulator
# acts as a cluster admin (group system:masters), which the mandatory `exempt` FlowSchema sends to the
# `exempt` priority level: never queued or rejected. The UIDs are fixed here; a real server generates them.
PF_FLOW_SCHEMA_UID_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PF_PRIORITY_LEVEL_UID_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
EXEMPT_FLOW_SCHEMA_UID = "8e1a9d2c-0f4b-4c55-9a36-5d3f1b0e7a01"
EXEMPT_PRIORITY_LEVEL_UID = "8e1a9d2c-0f4b-4c55-9a36-5d3f1b0e7a02"


async def _priority_and_fairness_headers(request: web.Request, response: web.StreamResponse) -> None:
    if not request.path.startswith("/sim/"):
        response.headers[PF_FLOW_SCHEMA_UID_HEADER] = EXEMPT_FLOW_SCHEMA_UID
        response.headers[PF_PRIORITY_LEVEL_UID_HEADER] = EXEMPT_PRIORITY_LEVEL_UID


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for v in values:
        if v != "All":
            raise ApiError(400, "BadRequest", f'Invalid dry run value: "{v}": supported values: "All"')
    return bool(values)


def _bool_param(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")



@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One write the server answered: when (wall clock), what, its status, and the client's bearer token."""

    time: float
    method: str
    path: str
    status: int
    token: str

class ApiServer:
    """Builds the aiohttp application over an `ObjectStore`."""

    def __init__(
        self,
        store: ObjectStore,
        faults: Faults,
        *,
        kubernetes_version: tuple[int, int] = (1, 35),
        bookmark_interval_s: float = 5.0,
        advance: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.faults = faults
        self.kubernetes_version = kubernetes_version
        self.bookmark_interval_s = bookmark_interval_s
        self._advance = advance
        self.ready = True
        self.audit: list[AuditRecord] | None = None
        self._streams: set[asyncio.Task[Any]] = set()
        self.app = web.Application(
            client_max_size=64 * 2**20, middlewares=[compress_large_responses, self._errors]
        )
        self.app.on_response_prepare.append(_priority_and_fairness_headers)
        r = self.app.router
        r.add_get("/version", self._version)
        r.add_get("/version/", self._version)
        for p in ("/healthz", "/readyz", "/livez"):
            r.add_get(p, self._health)
            r.add_get(p + "/{check:.*}", self._health)
        r.add_get("/openapi/v2", self._openapi_v2)
        r.add_get("/openapi/v3", self._openapi_v3_root)
        r.add_get("/openapi/v3/{gv:.+}", self._openapi_v3_gv)
        r.add_get("/sim/v1/clock", self._clock)
        r.add_post("/sim/v1/clock/advance", self._clock_advance)
        r.add_get("/sim/v1/faults", self._faults_list)
        r.add_post("/sim/v1/faults/{action}", self._faults_action)
        r.add_route("*", "/api", self._api_root)
        r.add_route("*", "/api/", self._api_root)
        r.add_route("*", "/apis", self._apis_root)
        r.add_route("*", "/apis/", self._apis_root)
        r.add_route("*", "/api/{rest:.+}", self._resource)
        r.add_route("*", "/apis/{rest:.+}", self._resource)

    # ------------------------------------------------------------------ middleware

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        sink: list[str] = []
        token = WARNINGS.set(sink)
        mode = request.query.get("fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            WARNINGS.reset(token)
            return _error_response(
                ApiError(
                    400, "BadRequest", f'fieldValidation must be one of "Ignore", "Warn", "Strict": {mode}'
                )
            )
        fv_token = FIELD_VALIDATION.set(mode)
        # Any bearer token is accepted; every client acts as a cluster admin.
        user_token = REQUEST_USER.set(DEFAULT_USER)
        try:
            resp = await handler(request)
        except ApiError as err:
            resp = _error_response(err)
        except web.HTTPException:
            raise
        except Exception as err:
            # A bug or a malformed body the handlers did not anticipate: answer like kube-apiserver's panic
            # recovery (500 InternalError Status) and keep serving.
            _log.exception("internal error serving %s %s", request.method, request.path)
            resp = _error_response(ApiError(500, "InternalError", f"Internal error occurred: {err!r}"))
        finally:
            WARNINGS.reset(token)
            FIELD_VALIDATION.reset(fv_token)
            REQUEST_USER.reset(user_token)
        if self.audit is not None and request.method not in ("GET", "HEAD", "OPTIONS") and (
            request.path.startswith(("/api/", "/apis/"))
        ):
            bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
            self.audit.append(AuditRecord(time.time(), request.method, request.path, resp.status, bearer))
        if sink and not resp.prepared:
            for w in sink:
                # RFC 7234 warn-text, quoted as kube-apiserver quotes it (backslash escapes).
                text = " ".join(w.split()).replace("\\", "\\\\").replace('"', '\\"')
                resp.headers.add("Warning", f'299 - "{text}"')
        return resp

    # ------------------------------------------------------------------ misc endpoints

    async def _version(self, request: web.Request) -> web.Response:
        major, minor = self.kubernetes_version
        return _json(
            {
                "major": str(major),
                "minor": str(minor),
                "emulationMajor": str(major),
                "emulationMinor": str(minor),
                "minCompatibilityMajor": str(major),
                "minCompatibilityMinor": str(max(0, minor - 1)),
                "gitVersion": f"v{major}.{minor}.0",
                "gitCommit": "0" * 40,
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.24.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )

    async def _health(self, request: web.Request) -> web.Response:
        if request.path.startswith("/readyz") and not self.ready:
            return web.Response(status=500, text="[-]sim not ready\nreadyz check failed")
        return web.Response(text="ok")

    async def _clock(self, request: web.Request) -> web.Response:
        c = self.store.clock
        return _json({"now": c.now(), "timeScale": c.time_scale})

    async def _clock_advance(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict) or not isinstance(body.get("seconds"), (int, float)):
            raise ApiError(400, "BadRequest", 'expected {"seconds": <number>}')
        seconds = float(body["seconds"])
        if seconds < 0:
            raise ApiError(400, "BadRequest", "seconds must be >= 0")
        if self._advance is not None:
            await self._advance(seconds)
        else:
            self.store.clock.advance(seconds)
        return await self._clock(request)

    async def _faults_list(self, request: web.Request) -> web.Response:
        return _json({"faults": self.faults.list(), "paused": self.faults.paused})

    async def _faults_action(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        f = self.faults
        if action == "drop-watches":
            return _json({"dropped": f.drop_watches()})
        if action == "compact":
            f.compact()
            return _json({"compactedResourceVersion": str(self.store.compacted_rv)})
        if action == "bookmark":
            f.bookmark()
            return _json({})
        if action == "clear":
            f.clear()
            return _json({})
        if action == "pause":
            f.pause()
            return _json({"paused": True})
        if action == "resume":
            f.resume()
            return _json({"paused": False})
        if action == "inject":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "expected a JSON object")
            try:
                h = f.inject(
                    verb=str(body.get("verb", "*")),
                    resource=str(body.get("resource", "*")),
                    code=body.get("code", 500),
                    latency_s=float(body.get("latencySeconds", body.get("latency_s")) or 0.0),
                    count=body.get("count"),
                    user_agent=body.get("userAgent", body.get("user_agent")),
                    subresource=body.get("subresource"),
                )
            except ValueError as exc:
                raise ApiError(400, "BadRequest", str(exc)) from exc
            return _json(h.describe(), status=201)
        raise ApiError(404, "NotFound", f"unknown fault action {action!r}")

    # ------------------------------------------------------------------ openapi

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _gv_paths(self) -> dict[str, list[ResourceType]]:
        out: dict[str, list[ResourceType]] = {}
        for rt in self.store.registry.all():
            for v in rt.versions:
                gv = f"apis/{rt.group}/{v}" if rt.group else f"api/{v}"
                out.setdefault(gv, []).append(rt)
        return out

    async def _openapi_v3_root(self, request: web.Request) -> web.Response:
        paths = {}
        for gv, rts in self._gv_paths().items():
            h = hashlib.sha256(",".join(sorted(r.key for r in rts)).encode()).hexdigest()[:32].upper()
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={h}"}
        return _json({"paths": paths})

    async def _openapi_v3_gv(self, request: web.Request) -> web.Response:
        gv = request.match_info["gv"]
        rts = self._gv_paths().get(gv)
        if rts is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        version = gv.rsplit("/", 1)[1]
        paths: JsonObj = {}
        # Custom resources' structural schemas, so `kubectl explain` works for them.
        schemas: JsonObj = {}
        for rt in rts:
            schema = rt.schemas.get(version) if rt.crd else None
            if schema:
                name = ".".join([*reversed(rt.group.split(".")), version, rt.kind])
                gvk_ext = [{"group": rt.group, "version": version, "kind": rt.kind}]
                schemas[name] = dict(schema, **{"x-kubernetes-group-version-kind": gvk_ext})
        for rt in rts:
            prefix = f"/{gv}/namespaces/{{namespace}}/" if rt.namespaced else f"/{gv}/"
            gvk = {"group": rt.group, "version": version, "kind": rt.kind}
            # Field validation is done server-side: advertise the parameter on PATCH (kubectl's probe).
            # No requestBody: kubectl then computes apply patches from its compiled-in types (built-ins)
            # or as JSON merge patches (custom resources).
            paths[f"{prefix}{rt.plural}/{{name}}"] = {
                "patch": {
                    "x-kubernetes-group-version-kind": gvk,
                    "x-kubernetes-action": "patch",
                    "parameters": [
                        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "OK"}},
                },
            }
        return _json(
            {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": "v1"},
                "paths": paths,
                "components": {"schemas": schemas},
            }
        )

    # ------------------------------------------------------------------ discovery

    def _wants_aggregated(self, request: web.Request) -> bool:
        accept = request.headers.get("Accept", "")
        return "as=APIGroupDiscoveryList" in accept and "g=apidiscovery.k8s.io;v=v2;" in accept + ";"

    def _aggregated_discovery(self, core: bool) -> web.Response:
        """apidiscovery.k8s.io/v2 APIGroupDiscoveryList: every group/version/resource in one document."""
        items: list[JsonObj] = []
        for group, versions in self._groups().items():
            if (group == "") != core:
                continue
            vdocs: list[JsonObj] = []
            for version in versions:
                doc = self._resource_list(group, version)
                if doc is None:
                    continue
                by_name: dict[str, JsonObj] = {}
                for res in doc["resources"]:
                    name, _, sub = res["name"].partition("/")
                    kind = {
                        "group": res.get("group", group),
                        "version": res.get("version", version),
                        "kind": res["kind"],
                    }
                    if not sub:
                        entry: JsonObj = {
                            "resource": name,
                            "responseKind": kind,
                            "scope": "Namespaced" if res["namespaced"] else "Cluster",
                            "singularResource": res.get("singularName") or name,
                            "verbs": res["verbs"],
                        }
                        for key in ("shortNames", "categories"):
                            if res.get(key):
                                entry[key] = res[key]
                        by_name[name] = entry
                    elif name in by_name:
                        by_name[name].setdefault("subresources", []).append(
                            {"subresource": sub, "responseKind": kind, "verbs": res["verbs"]}
                        )
                vdocs.append(
                    {"version": version, "resources": list(by_name.values()), "freshness": "Current"}
                )
            items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": vdocs})
        body = {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }
        return web.Response(
            body=orjson.dumps(body),
            headers={
                "Content-Type": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                "Vary": "Accept",
            },
        )

    async def _api_root(self, request: web.Request) -> web.Response:
        if self._wants_aggregated(request):
            return self._aggregated_discovery(core=True)
        host = request.host or "127.0.0.1"
        return _json(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
            }
        )

    def _groups(self) -> dict[str, list[str]]:
        gvs = self.store.registry.group_versions()
        for agg in self.store.hooks.aggregated.values():
            vs = gvs.setdefault(agg.group, [])
            if agg.version not in vs:
                vs.append(agg.version)
        return gvs

    def _group_doc(self, group: str, versions: list[str]) -> JsonObj:
        return {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
        }

    async def _apis_root(self, request: web.Request) -> web.Response:
        if self._wants_aggregated(request):
            return self._aggregated_discovery(core=False)
        groups = [self._group_doc(g, vs) for g, vs in self._groups().items() if g]
        return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})

    def _resource_list(self, group: str, version: str) -> JsonObj | None:
        resources: list[JsonObj] = []
        found = False
        for rt in self.store.registry.all():
            if rt.group != group or version not in rt.versions:
                continue
            found = True
            doc: JsonObj = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(rt.verbs),
            }
            if rt.short_names:
                doc["shortNames"] = list(rt.short_names)
            if rt.categories:
                doc["categories"] = list(rt.categories)
            doc["storageVersionHash"] = hashlib.sha256(rt.key.encode()).hexdigest()[:11]
            resources.append(doc)
            if rt.has_status:
                resources.append(
                    {
                        "name": f"{rt.plural}/status",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": rt.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if rt.scale is not None:
                resources.append(
                    {
                        "name": f"{rt.plural}/scale",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
            for key, sub in self.store.hooks.subresources:
                if key != rt.key or sub in ("status", "scale"):
                    continue
                g, v, kind, verbs = _SUBRESOURCE_INFO.get(
                    sub, (rt.group, rt.version, rt.kind, ["get", "patch", "update", "create"])
                )
                entry: JsonObj = {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
                if (g, v) != (rt.group, version):
                    entry["group"], entry["version"] = g, v
                resources.append(entry)
        for agg in self.store.hooks.aggregated.values():
            if agg.group == group and agg.version == version:
                found = True
                resources.append(
                    {
                        "name": agg.plural,
                        "singularName": "",
                        "namespaced": agg.namespaced,
                        "kind": agg.kind,
                        "verbs": ["get", "list"],
                    }
                )
        if not found:
            return None
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # ------------------------------------------------------------------ resource requests

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        # aiohttp reports a missing Content-Type as application/octet-stream; kube-apiserver reads such a
        # body (`kubectl create --raw -f -` sends none) as JSON.
        ctype = request.content_type if hdrs.CONTENT_TYPE in request.headers else ""
        if ctype == protobuf.PROTOBUF:
            try:
                return protobuf.decode(raw)
            except (protobuf.ProtobufError, KeyError, UnicodeDecodeError) as exc:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the simulated API server cannot decode this protobuf body ({exc}); send JSON instead",
                ) from exc
        if ctype and ctype not in _BODY_TYPES:
            # Protobuf and CBOR bodies are refused the way kube-apiserver refuses unknown media types;
            # client-go then falls back to JSON.
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(sorted(_BODY_TYPES))}",
            )
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            if "yaml" in ctype:
                try:
                    return yaml.safe_load(raw)
                except yaml.YAMLError as exc:
                    raise ApiError(400, "BadRequest", f"error decoding YAML: {exc}") from exc
            raise ApiError(
                400, "BadRequest", "the body of the request could not be decoded as JSON"
            ) from None

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[0] == "api":
            group = ""
            rest = parts[1:]
        else:
            group = parts[1]
            rest = parts[2:]
            if not rest:
                gvs = self._groups().get(group)
                if not gvs:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                doc = self._group_doc(group, gvs)
                doc.update({"kind": "APIGroup", "apiVersion": "v1"})
                return _json(doc)
        version = rest[0]
        rest = rest[1:]
        if not rest:
            if request.method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            doc2 = self._resource_list(group, version)
            if doc2 is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return _json(doc2)
        watch_prefix = False
        if rest[0] == "watch":
            watch_prefix = True
            rest = rest[1:]
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace = rest[1]
            rest = rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        plural = rest[0]
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        agg = self.store.hooks.aggregated.get((group, version, plural))
        if agg is not None:
            return await self._aggregated(request, agg, namespace, name)
        rt = self.store.registry.by_url(group, version, plural)
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if namespace is not None and not rt.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        method = request.method
        is_watch = watch_prefix or _bool_param(request, "watch")
        verb = {
            "GET": ("watch" if is_watch else ("get" if name else "list")),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method)
        if verb is None:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        await self.faults.before_request(verb, rt.key, sub, request.headers.get("User-Agent", ""))
        if sub is not None:
            assert name is not None
            return await self._subresource(request, rt, version, namespace, name, sub)
        if rt.namespaced and namespace is None and method in ("POST",):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if verb not in rt.verbs and verb != "deletecollection":
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if rt.key in views.VIEWS:
            return await self._view(request, rt, verb, namespace, name)
        if verb == "watch":
            return await self._watch(request, rt, version, namespace, name)
        if verb == "list":
            return await self._list(request, rt, version, namespace)
        assert name is not None or verb in ("create", "deletecollection")
        if verb == "get":
            assert name is not None
            entry = self.store.entry(rt.key, namespace, name)
            if entry is None:
                raise not_found(rt, name)
            if _wants_table(request):
                return self._table_response(request, rt, version, [entry.obj], None)
            return self._object_response(rt, version, entry.obj, entry.raw)
        if verb == "create":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            self._check_body_kind(rt, body, version)
            obj = await self.store.create(
                rt.key, body, dry_run=_dry_run(request), version=version, namespace=namespace or None
            )
            return self._object_response(rt, version, obj, None, status=201)
        if verb == "update":
            assert name is not None
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            self._check_body_kind(rt, body, version)
            obj = await self.store.update(
                rt.key, body, dry_run=_dry_run(request), version=version, namespace=namespace or "", name=name
            )
            return self._object_response(rt, version, obj, None)
        if verb == "patch":
            assert name is not None
            ptype, body = await self._patch_body(request)
            obj = await self.store.patch(
                rt.key,
                namespace,
                name,
                ptype,
                body,
                dry_run=_dry_run(request),
                version=version,
                field_manager=request.query.get("fieldManager"),
                force=_bool_param(request, "force"),
            )
            return self._object_response(rt, version, obj, None)
        if verb == "delete":
            assert name is not None
            opts = await self._delete_options(request)
            before = self.store.entry(rt.key, namespace, name)
            obj2 = await self.store.delete(
                rt.key,
                namespace,
                name,
                grace_period_s=opts.get("gracePeriodSeconds"),
                propagation=opts.get("propagationPolicy"),
                preconditions=opts.get("preconditions"),
                dry_run=opts.get("dryRun") is not None,
            )
            still = self.store.entry(rt.key, namespace, name)
            # kube-apiserver answers 200 even when deletion is pending (graceful pods, finalizers), except
            # 202 when the client explicitly asked for orphanDependents=false.
            pending = still is not None and before is not None and not opts.get("dryRun")
            status = 202 if pending and opts.get("orphanDependents") is False else 200
            if obj2 is None or (still is None and rt.key != "pods" and not opts.get("dryRun")):
                # Immediate deletion answers a Status naming the object (pods answer the object itself:
                # kube-apiserver's ReturnDeletedObject).
                md = (obj2 or {}).get("metadata") or {}
                details: JsonObj = {"name": name, "kind": rt.plural, "uid": md.get("uid", "")}
                if rt.group:
                    details["group"] = rt.group
                return _json(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": details,
                    }
                )
            return self._object_response(rt, version, obj2, None, status=status)
        # deletecollection
        opts = await self._delete_options(request)
        entries = self.store.iter_entries(
            rt.key,
            namespace,
            label_selector=request.query.get("labelSelector"),
            field_selector=request.query.get("fieldSelector"),
        )
        deleted = []
        for e in entries:
            md = e.obj["metadata"]
            with contextlib.suppress(ApiError):
                o = await self.store.delete(
                    rt.key,
                    md.get("namespace"),
                    md["name"],
                    grace_period_s=opts.get("gracePeriodSeconds"),
                    propagation=opts.get("propagationPolicy"),
                    dry_run=opts.get("dryRun") is not None,
                )
                if o is not None:
                    deleted.append(o)
        return _json(
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version(version),
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": deleted,
            }
        )

    def _check_body_kind(self, rt: ResourceType, body: JsonObj, version: str) -> None:
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({body.get('apiVersion', '')}) does not match the "
                f"expected API version ({rt.api_version(version)})"
                if body.get("apiVersion") and body.get("apiVersion") != rt.api_version(version)
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})",
            )
        av = body.get("apiVersion")
        if av and av != rt.api_version(version):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({av}) does not match the expected "
                f"API version ({rt.api_version(version)})",
            )

    async def _patch_body(self, request: web.Request) -> tuple[str, Any]:
        ctype = request.content_type
        ptype = _PATCH_TYPES.get(ctype)
        if ptype is None:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(_PATCH_TYPES)}",
            )
        raw = await request.read()
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            if ptype != "apply":
                raise ApiError(400, "BadRequest", "the patch could not be decoded as JSON") from None
            try:
                body = yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise ApiError(400, "BadRequest", f"error decoding YAML: {exc}") from exc
        return ptype, body

    async def _delete_options(self, request: web.Request) -> JsonObj:
        body = await self._body(request) if request.can_read_body else None
        opts: JsonObj = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if "gracePeriodSeconds" in q:
            try:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError as exc:
                raise ApiError(400, "BadRequest", "invalid gracePeriodSeconds") from exc
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if q.get("orphanDependents") == "false":
            opts["orphanDependents"] = False
        if q.get("orphanDependents") == "true" or opts.get("orphanDependents") is True:
            opts["propagationPolicy"] = "Orphan"
        if "dryRun" in q:
            _dry_run(request)
            opts["dryRun"] = ["All"]
        elif opts.get("dryRun"):
            opts["dryRun"] = ["All"]
        else:
            opts.pop("dryRun", None)
        pp = opts.get("propagationPolicy")
        if pp is not None and pp not in ("Orphan", "Background", "Foreground"):
            raise ApiError(400, "BadRequest", f"invalid propagationPolicy {pp!r}")
        return opts

    def _object_response(
        self, rt: ResourceType, version: str, obj: JsonObj, raw: bytes | None, status: int = 200
    ) -> web.Response:
        if obj.get("apiVersion") != rt.api_version(version):
            obj = dict(obj)
            obj["apiVersion"] = rt.api_version(version)
            raw = None
        return web.Response(
            body=raw if raw is not None else orjson.dumps(obj), status=status, content_type=JSON
        )

    def _table_response(
        self, request: web.Request, rt: ResourceType, version: str, objs: list[JsonObj], meta: JsonObj | None
    ) -> web.Response:
        return _json(self._table(request, rt, version, objs, meta, headers=True))

    def _table(
        self,
        request: web.Request,
        rt: ResourceType,
        version: str,
        objs: list[JsonObj],
        meta: JsonObj | None,
        *,
        headers: bool,
    ) -> JsonObj:
        cols, printer = tables.columns_and_printer(rt, version)
        include = request.query.get("includeObject", "Metadata")
        now = self.store.clock.now()
        out: JsonObj = {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta or {},
            "columnDefinitions": tables.column_definitions(cols) if headers else [],
            "rows": [tables.row(o, printer, now, include) for o in objs],
        }
        return out

    # ------------------------------------------------------------------ list

    async def _list(
        self, request: web.Request, rt: ResourceType, version: str, namespace: str | None
    ) -> web.Response:
        q = request.query
        store = self.store
        rv_param = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        if rv_param and rv_param != "0":
            try:
                want = int(rv_param)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from exc
            if want > store.rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {want}, current: {store.rv}",
                    causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    retry_after_s=1,
                )
            floor = store.compacted_for(rt.key)
            if match == "Exact" and want < floor:
                raise ApiError(410, "Expired", f"too old resource version: {want} ({floor})")
        limit_raw = q.get("limit", "0")
        try:
            limit = int(limit_raw)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid limit {limit_raw!r}") from exc
        start: tuple[str, str] | None = None
        list_rv = store.rv
        if q.get("continue"):
            list_rv, start = store.decode_continue(q["continue"], rt.key)
        entries = store.iter_entries(
            rt.key,
            namespace,
            label_selector=q.get("labelSelector"),
            field_selector=q.get("fieldSelector"),
            start=start,
            limit=limit + 1 if limit > 0 else None,
        )
        meta: JsonObj = {"resourceVersion": str(list_rv)}
        if limit > 0 and len(entries) > limit:
            entries = entries[:limit]
            last = entries[-1].obj["metadata"]
            meta["continue"] = store.encode_continue(list_rv, (last.get("namespace", ""), last["name"]))
            if not q.get("labelSelector") and not q.get("fieldSelector"):
                total = (
                    len(store.iter_entries(rt.key, namespace, start=start))
                    if namespace
                    else _remaining(store.sorted_keys(rt.key), start)
                )
                meta["remainingItemCount"] = max(0, total - limit)
        if _wants_table(request):
            return self._table_response(request, rt, version, [e.obj for e in entries], meta)
        api_version = rt.api_version(version)
        head = orjson.dumps({"kind": rt.list_kind, "apiVersion": api_version, "metadata": meta})
        if version != rt.version and rt.crd:
            raws = [orjson.dumps(dict(e.obj, apiVersion=api_version)) for e in entries]
        else:
            raws = [e.raw for e in entries]
        body = head[:-1] + b',"items":[' + b",".join(raws) + b"]}"
        return web.Response(body=body, content_type=JSON)

    # ------------------------------------------------------------------ watch

    async def _watch(
        self,
        request: web.Request,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        name: str | None,
        *,
        storage_key: str | None = None,
        transform: Callable[[JsonObj], JsonObj] | None = None,
    ) -> web.StreamResponse:
        q = request.query
        field_selector = q.get("fieldSelector")
        if name:
            field_selector = f"metadata.name={name}" + (f",{field_selector}" if field_selector else "")
        rv_param = q.get("resourceVersion", "")
        send_initial = _bool_param(request, "sendInitialEvents")
        bookmarks = _bool_param(request, "allowWatchBookmarks")
        if send_initial and (q.get("resourceVersionMatch") != "NotOlderThan" or not bookmarks):
            raise ApiError(
                422,
                "Invalid",
                "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true",
            )
        since: int | None = None
        if rv_param and rv_param != "0":
            try:
                since = int(rv_param)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from exc
        initial = send_initial or since is None
        timeout_s = 1800.0
        if q.get("timeoutSeconds"):
            try:
                timeout_s = float(q["timeoutSeconds"])
            except ValueError as exc:
                raise ApiError(400, "BadRequest", "invalid timeoutSeconds") from exc
        table = _wants_table(request)
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        resp.enable_chunked_encoding()
        try:
            watcher = self.store.add_watcher(
                storage_key or rt.key,
                namespace,
                label_selector=q.get("labelSelector"),
                field_selector=field_selector,
                since_rv=since,
                initial=initial,
            )
        except ApiError as err:
            if err.code != 410:
                raise
            await resp.prepare(request)
            await resp.write(orjson.dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            await resp.write_eof()
            return resp
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            await resp.prepare(request)
            await self._pump(
                request,
                resp,
                watcher,
                rt,
                version,
                timeout_s,
                bookmarks,
                send_initial,
                table,
                since,
                transform,
            )
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.remove_watcher(watcher)
            if task is not None:
                self._streams.discard(task)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp

    async def _pump(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        w: Watcher,
        rt: ResourceType,
        version: str,
        timeout_s: float,
        bookmarks: bool,
        send_initial: bool,
        table: bool,
        since: int | None,
        transform: Callable[[JsonObj], JsonObj] | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        api_version = rt.api_version(version)
        convert = version != rt.version and rt.crd
        initial_pending = send_initial
        first_table = True
        last_rv = since or 0

        def bookmark(annotate: bool = False) -> bytes:
            md: JsonObj = {"resourceVersion": str(max(self.store.rv, last_rv))}
            if annotate:
                md["annotations"] = {"k8s.io/initial-events-end": "true"}
            return (
                orjson.dumps(
                    {
                        "type": "BOOKMARK",
                        "object": {"kind": rt.kind, "apiVersion": api_version, "metadata": md},
                    }
                )
                + b"\n"
            )

        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            chunks: list[bytes] = []
            if w.queue.empty():
                if initial_pending:
                    initial_pending = False
                    await resp.write(bookmark(annotate=True))
                    continue
                try:
                    item = await asyncio.wait_for(
                        w.queue.get(), timeout=min(remaining, self.bookmark_interval_s)
                    )
                except TimeoutError:
                    if bookmarks:
                        await resp.write(bookmark())
                    continue
            else:
                item = w.queue.get_nowait()
            items: list[Event | str | None] = [item]
            while not w.queue.empty() and len(items) < 1000:
                items.append(w.queue.get_nowait())
            closing = False
            for it in items:
                if it is None:
                    closing = True
                    break
                if isinstance(it, str):
                    if bookmarks:
                        chunks.append(bookmark())
                    continue
                last_rv = max(last_rv, it.rv)
                if table:
                    tbl = self._table(
                        request, rt, version, [it.obj], {"resourceVersion": str(it.rv)}, headers=first_table
                    )
                    first_table = False
                    chunks.append(orjson.dumps({"type": it.type, "object": tbl}) + b"\n")
                elif transform is not None:
                    chunks.append(orjson.dumps({"type": it.type, "object": transform(it.obj)}) + b"\n")
                elif convert:
                    chunks.append(
                        orjson.dumps({"type": it.type, "object": dict(it.obj, apiVersion=api_version)})
                        + b"\n"
                    )
                else:
                    chunks.append(it.line())
            if chunks:
                await resp.write(b"".join(chunks))
            if closing:
                return

    # ------------------------------------------------------------------ views (events.k8s.io)

    async def _view(
        self, request: web.Request, rt: ResourceType, verb: str, namespace: str | None, name: str | None
    ) -> web.StreamResponse:
        """Serve a resource that is another API's view of stored objects (events.k8s.io/v1 Events)."""
        key, to_view, from_view = views.VIEWS[rt.key]
        dry = _dry_run(request)
        if verb == "watch":
            return await self._watch(
                request, rt, rt.version, namespace, name, storage_key=key, transform=to_view
            )
        if verb == "list":
            q = request.query
            entries = self.store.iter_entries(
                key, namespace, label_selector=q.get("labelSelector"), field_selector=q.get("fieldSelector")
            )
            objs = [to_view(e.obj) for e in entries]
            meta = {"resourceVersion": str(self.store.rv)}
            if _wants_table(request):
                return self._table_response(request, rt, rt.version, objs, meta)
            return _json(
                {"kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": meta, "items": objs}
            )
        if verb == "create":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            created = await self.store.create(key, from_view(body), dry_run=dry, namespace=namespace or None)
            return _json(to_view(created), status=201)
        if verb == "deletecollection" or name is None:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        entry = self.store.entry(key, namespace, name)
        if verb == "get":
            if entry is None:
                raise not_found(rt, name)
            if _wants_table(request):
                return self._table_response(request, rt, rt.version, [to_view(entry.obj)], None)
            return _json(to_view(entry.obj))
        if verb == "update":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            updated = await self.store.update(
                key, from_view(body), dry_run=dry, namespace=namespace or "", name=name
            )
            return _json(to_view(updated))
        if verb == "patch":
            from vpa.sim.apiserver import patching

            if entry is None:
                raise not_found(rt, name)
            ptype, pbody = await self._patch_body(request)
            if ptype == "strategic":
                ptype = "merge"  # events carry no list merge keys worth keeping apart
            patched = patching.apply_patch(ptype, to_view(entry.obj), pbody, rt)
            if not isinstance(patched, dict):
                raise ApiError(422, "Invalid", "the patch produced a non-object document")
            patched.setdefault("metadata", {}).setdefault(
                "resourceVersion", entry.obj["metadata"]["resourceVersion"]
            )
            updated = await self.store.update(
                key, from_view(patched), dry_run=dry, namespace=namespace or "", name=name
            )
            return _json(to_view(updated))
        # delete
        if entry is None:
            raise not_found(rt, name)
        await self.store.delete(key, namespace, name, dry_run=dry)
        return _json(to_view(entry.obj))

    # ------------------------------------------------------------------ subresources

    async def _subresource(
        self, request: web.Request, rt: ResourceType, version: str, namespace: str | None, name: str, sub: str
    ) -> web.StreamResponse:
        method = request.method
        handler = self.store.hooks.subresources.get((rt.key, sub))
        if handler is not None:
            body: Any = None
            if method in ("POST", "PUT", "PATCH"):
                if method == "PATCH":
                    ptype, body = await self._patch_body(request)
                    del ptype
                else:
                    body = await self._body(request)
            sreq = SubresourceRequest(
                verb=cast(SubresourceVerb, method),
                resource=rt.key,
                subresource=sub,
                namespace=namespace,
                name=name,
                body=body,
                # The body has been read by now, so `can_read_body` is False: go by the method instead.
                content_type=request.content_type if method in ("POST", "PUT", "PATCH") else None,
                query=dict(request.query),
            )
            status, out = await handler(sreq)
            return _json(out, status=status)
        if sub == "status" and rt.has_status:
            if method == "GET":
                entry = self.store.entry(rt.key, namespace, name)
                if entry is None:
                    raise not_found(rt, name)
                return self._object_response(rt, version, entry.obj, entry.raw)
            if method == "PUT":
                body = await self._body(request)
                if not isinstance(body, dict):
                    raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
                obj = await self.store.update(
                    rt.key,
                    body,
                    subresource="status",
                    dry_run=_dry_run(request),
                    version=version,
                    namespace=namespace or "",
                    name=name,
                )
                return self._object_response(rt, version, obj, None)
            if method == "PATCH":
                ptype, pbody = await self._patch_body(request)
                obj = await self.store.patch(
                    rt.key,
                    namespace,
                    name,
                    ptype,
                    pbody,
                    subresource="status",
                    dry_run=_dry_run(request),
                    version=version,
                    field_manager=request.query.get("fieldManager"),
                )
                return self._object_response(rt, version, obj, None)
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if sub == "scale" and rt.scale is not None:
            return await self._scale(request, rt, namespace, name)
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _scale_of(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        assert rt.scale is not None
        spec = rt.scale
        found = tables.jsonpath(obj, spec.spec_replicas_path)
        replicas = found[0] if found and isinstance(found[0], int) else 0
        st = tables.jsonpath(obj, spec.status_replicas_path)
        status: JsonObj = {"replicas": st[0] if st and isinstance(st[0], int) else 0}
        if spec.selector_from_spec:
            sel = (obj.get("spec") or {}).get("selector")
            if rt.key == "replicationcontrollers" and isinstance(sel, dict) and "matchLabels" not in sel:
                sel = {"matchLabels": sel}
            text = selector_to_string(sel if isinstance(sel, dict) else None)
            if text:
                status["selector"] = text
        elif spec.label_selector_path:
            s = tables.jsonpath(obj, spec.label_selector_path)
            if s and isinstance(s[0], str):
                status["selector"] = s[0]
        md = obj["metadata"]
        smd = {
            k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md
        }
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": smd,
            "spec": {"replicas": replicas},
            "status": status,
        }

    async def _scale(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str
    ) -> web.Response:
        entry = self.store.entry(rt.key, namespace, name)
        if entry is None:
            raise not_found(rt, name)
        current = self._scale_of(rt, entry.obj)
        if request.method == "GET":
            return _json(current)
        if request.method == "PUT":
            new_scale = await self._body(request)
        elif request.method == "PATCH":
            from vpa.sim.apiserver import patching

            ptype, pbody = await self._patch_body(request)
            new_scale = patching.apply_patch("merge" if ptype == "apply" else ptype, current, pbody, rt)
        else:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if not isinstance(new_scale, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        replicas = (new_scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(
                422,
                "Invalid",
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas}: must be greater than or equal to 0",
                causes=[
                    {
                        "reason": "FieldValueInvalid",
                        "message": "must be greater than or equal to 0",
                        "field": "spec.replicas",
                    }
                ],
            )
        want_rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        obj = deep_copy(entry.obj)
        if want_rv:
            obj["metadata"]["resourceVersion"] = want_rv
        assert rt.scale is not None
        _set_path(obj, rt.scale.spec_replicas_path, replicas)
        updated = await self.store.update(
            rt.key, obj, dry_run=_dry_run(request), namespace=namespace or "", name=name, subresource="scale"
        )
        return _json(self._scale_of(rt, updated))

    # ------------------------------------------------------------------ aggregated APIs

    async def _aggregated(
        self, request: web.Request, agg: Any, namespace: str | None, name: str | None
    ) -> web.Response:
        if request.method != "GET":
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if _bool_param(request, "watch"):
            raise ApiError(405, "MethodNotAllowed", "watch is not supported on this resource")
        selector = request.query.get("labelSelector")
        await self.faults.before_request(
            "get" if name else "list",
            f"{agg.plural}.{agg.group}",
            None,
            request.headers.get("User-Agent", ""),
        )
        items = agg.lister(namespace, name, selector)
        api_version = f"{agg.group}/{agg.version}"
        if name is not None:
            if not items:
                raise ApiError(
                    404,
                    "NotFound",
                    f'{agg.plural}.{agg.group} "{name}" not found',
                    name=name,
                    kind=agg.plural,
                    group=agg.group,
                )
            return _json(items[0])
        # The lister applies the label selector itself (it knows the labels of what it computes from).
        return _json(
            {
                "kind": f"{agg.kind}List",
                "apiVersion": api_version,
                "metadata": {"resourceVersion": ""},
                "items": items,
            }
        )

    async def close_streams(self) -> None:
        self.store.drop_watches()
        for t in list(self._streams):
            t.cancel()


def _remaining(keys: list[tuple[str, str]], start: tuple[str, str] | None) -> int:
    if start is None:
        return len(keys)
    import bisect

    return len(keys) - bisect.bisect_right(keys, start)


def _set_path(obj: JsonObj, path: str, value: Any) -> None:
    parts = [p for p in path.strip(".").split(".") if p]
    cur = obj
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[parts[-1]] = value
