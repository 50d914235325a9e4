"""Subresources and aggregated APIs: the `Subresources` mixin of `ApiServer`.

Owns: subresources served by hooks (the request handed over as a `SubresourceRequest`), `status` (GET,
PUT, PATCH through the store's status rules), `scale` (an `autoscaling/v1` `Scale` read from and written to
the paths the resource type names), and aggregated APIs (GET and LIST answered by a hook's lister, with
faults applied; no WATCH).

Must not: implement what a hook-served subresource does (the hook does) or the status rules (the store).
"""

from __future__ import annotations

from typing import Any, cast

from aiohttp import web

from vpa.sim.apiserver import tables
from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.selectors import selector_to_string
from vpa.sim.apiserver.server.common import (
    SubresourceVerb,
    bool_param,
    json_response,
    parse_dry_run,
)
from vpa.sim.apiserver.server.core import ServerCore
from vpa.sim.apiserver.store import (
    deep_copy,
    not_found,
)
from vpa.sim.contracts import ApiError, JsonObj, SubresourceRequest


class Subresources(ServerCore):
    """Hook-served, status and scale subresources, and aggregated APIs."""

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
            return json_response(out, status=status)
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
                    dry_run=parse_dry_run(request),
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
                    dry_run=parse_dry_run(request),
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
            return json_response(current)
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
            rt.key,
            obj,
            dry_run=parse_dry_run(request),
            namespace=namespace or "",
            name=name,
            subresource="scale",
        )
        return json_response(self._scale_of(rt, updated))

    # ------------------------------------------------------------------ aggregated APIs

    async def _aggregated(
        self, request: web.Request, agg: Any, namespace: str | None, name: str | None
    ) -> web.Response:
        if request.method != "GET":
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if bool_param(request, "watch"):
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
            return json_response(items[0])
        # The lister applies the label selector itself (it knows the labels of what it computes from).
        return json_response(
            {
                "kind": f"{agg.kind}List",
                "apiVersion": api_version,
                "metadata": {"resourceVersion": ""},
                "items": items,
            }
        )


def _set_path(obj: JsonObj, path: str, value: Any) -> None:
    parts = [p for p in path.strip(".").split(".") if p]
    cur = obj
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[parts[-1]] = value
