"""The simulated API server's state, routes and the helpers its parts share: `ServerCore`.

Owns: the server's state (store, faults, Kubernetes version, bookmark interval, readiness, audit list, open
watch streams), the aiohttp application and its route table, the middleware that answers `ApiError` as a
`Status`, turns unexpected exceptions into 500 `InternalError`, sets the per-request warning sink, field
validation mode and user, records audits and emits `Warning` headers; decoding request bodies (JSON, YAML,
protobuf) and patch bodies; object and `Table` responses; closing watch streams on shutdown.

Must not: serve a particular endpoint (the mixins do: `control`, `discovery`, `resources`, `listwatch`,
`subresources`); it declares what it and the mixins call of each other, and `ApiServer` in the package puts
them together.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import yaml
from aiohttp import hdrs, web

from vpa.sim.apiserver import protobuf, tables
from vpa.sim.apiserver.compression import compress_large_responses
from vpa.sim.apiserver.faults import Faults
from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.server.common import (
    BODY_TYPES,
    JSON,
    PATCH_TYPES,
    AuditRecord,
    error_response,
    json_response,
    priority_and_fairness_headers,
)
from vpa.sim.apiserver.store import (
    DEFAULT_USER,
    FIELD_VALIDATION,
    REQUEST_USER,
    WARNINGS,
    ObjectStore,
)
from vpa.sim.contracts import ApiError, JsonObj

# The name the server logged under before it was a package.
_log = logging.getLogger("vpa.sim.apiserver.server")


class ServerCore:
    """State, routes, middleware and the body and response helpers shared by the mixins of `ApiServer`."""

    def __init__(
        self,
        store: ObjectStore,
        faults: Faults,
        *,
        kubernetes_version: tuple[int, int] = (1, 37),
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
        self.app.on_response_prepare.append(priority_and_fairness_headers)
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
            return error_response(
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
            resp = error_response(err)
        except web.HTTPException:
            raise
        except Exception as err:
            # A bug or a malformed body the handlers did not anticipate: answer like kube-apiserver's panic
            # recovery (500 InternalError Status) and keep serving.
            _log.exception("internal error serving %s %s", request.method, request.path)
            resp = error_response(ApiError(500, "InternalError", f"Internal error occurred: {err!r}"))
        finally:
            WARNINGS.reset(token)
            FIELD_VALIDATION.reset(fv_token)
            REQUEST_USER.reset(user_token)
        if (
            self.audit is not None
            and request.method not in ("GET", "HEAD", "OPTIONS")
            and (request.path.startswith(("/api/", "/apis/")))
        ):
            bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
            self.audit.append(AuditRecord(time.time(), request.method, request.path, resp.status, bearer))
        if sink and not resp.prepared:
            for w in sink:
                # RFC 7234 warn-text, quoted as kube-apiserver quotes it (backslash escapes).
                text = " ".join(w.split()).replace("\\", "\\\\").replace('"', '\\"')
                resp.headers.add("Warning", f'299 - "{text}"')
        return resp

    # ------------------------------------------------------------------ bodies and responses

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
        if ctype and ctype not in BODY_TYPES:
            # Protobuf and CBOR bodies are refused the way kube-apiserver refuses unknown media types;
            # client-go then falls back to JSON.
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(sorted(BODY_TYPES))}",
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

    async def _patch_body(self, request: web.Request) -> tuple[str, Any]:
        ctype = request.content_type
        ptype = PATCH_TYPES.get(ctype)
        if ptype is None:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(PATCH_TYPES)}",
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
        return json_response(self._table(request, rt, version, objs, meta, headers=True))

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

    async def close_streams(self) -> None:
        self.store.drop_watches()
        for t in list(self._streams):
            t.cancel()

    # ------------------------------------------------------------------ implemented by the mixins

    async def _version(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _health(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _clock(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _clock_advance(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _faults_list(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _faults_action(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _openapi_v3_root(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _openapi_v3_gv(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _api_root(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    async def _apis_root(self, request: web.Request) -> web.Response:
        raise NotImplementedError

    def _groups(self) -> dict[str, list[str]]:
        raise NotImplementedError

    def _group_doc(self, group: str, versions: list[str]) -> JsonObj:
        raise NotImplementedError

    def _resource_list(self, group: str, version: str) -> JsonObj | None:
        raise NotImplementedError

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def _list(
        self, request: web.Request, rt: ResourceType, version: str, namespace: str | None
    ) -> web.Response:
        raise NotImplementedError

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
        raise NotImplementedError

    async def _subresource(
        self, request: web.Request, rt: ResourceType, version: str, namespace: str | None, name: str, sub: str
    ) -> web.StreamResponse:
        raise NotImplementedError

    async def _aggregated(
        self, request: web.Request, agg: Any, namespace: str | None, name: str | None
    ) -> web.Response:
        raise NotImplementedError
