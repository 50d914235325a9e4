"""Resource requests: the `Resources` mixin of `ApiServer`.

Owns: parsing `/api/v1/...` and `/apis/<group>/<version>/...` paths (namespaces, the legacy `/watch/`
prefix, subresources) into a verb, the group and version documents at those paths, injected faults for
resource requests, and GET, create, update, patch, delete (delete options, 200 / 202 and the `Status` an
immediate deletion answers) and deletecollection on the store; it hands LIST and WATCH to `listwatch`,
subresources and aggregated APIs to `subresources`, and serves the events.k8s.io view of Events.

Must not: implement object semantics (the store does) or kind behaviour (hooks do).
"""

from __future__ import annotations

import contextlib

from aiohttp import web

from vpa.sim.apiserver import views
from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.server.common import (
    bool_param,
    json_response,
    parse_dry_run,
    wants_table,
)
from vpa.sim.apiserver.server.core import ServerCore
from vpa.sim.apiserver.store import (
    not_found,
)
from vpa.sim.contracts import ApiError, JsonObj


class Resources(ServerCore):
    """Resource paths and the verbs served on stored objects and their views."""

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
                return json_response(doc)
        version = rest[0]
        rest = rest[1:]
        if not rest:
            if request.method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            doc2 = self._resource_list(group, version)
            if doc2 is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return json_response(doc2)
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
        is_watch = watch_prefix or bool_param(request, "watch")
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
            if wants_table(request):
                return self._table_response(request, rt, version, [entry.obj], None)
            return self._object_response(rt, version, entry.obj, entry.raw)
        if verb == "create":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            self._check_body_kind(rt, body, version)
            obj = await self.store.create(
                rt.key, body, dry_run=parse_dry_run(request), version=version, namespace=namespace or None
            )
            return self._object_response(rt, version, obj, None, status=201)
        if verb == "update":
            assert name is not None
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            self._check_body_kind(rt, body, version)
            obj = await self.store.update(
                rt.key,
                body,
                dry_run=parse_dry_run(request),
                version=version,
                namespace=namespace or "",
                name=name,
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
                dry_run=parse_dry_run(request),
                version=version,
                field_manager=request.query.get("fieldManager"),
                force=bool_param(request, "force"),
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
                return json_response(
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
        return json_response(
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
            parse_dry_run(request)
            opts["dryRun"] = ["All"]
        elif opts.get("dryRun"):
            opts["dryRun"] = ["All"]
        else:
            opts.pop("dryRun", None)
        pp = opts.get("propagationPolicy")
        if pp is not None and pp not in ("Orphan", "Background", "Foreground"):
            raise ApiError(400, "BadRequest", f"invalid propagationPolicy {pp!r}")
        return opts

    # ------------------------------------------------------------------ views (events.k8s.io)

    async def _view(
        self, request: web.Request, rt: ResourceType, verb: str, namespace: str | None, name: str | None
    ) -> web.StreamResponse:
        """Serve a resource that is another API's view of stored objects (events.k8s.io/v1 Events)."""
        key, to_view, from_view = views.VIEWS[rt.key]
        dry = parse_dry_run(request)
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
            if wants_table(request):
                return self._table_response(request, rt, rt.version, objs, meta)
            return json_response(
                {"kind": rt.list_kind, "apiVersion": rt.api_version(), "metadata": meta, "items": objs}
            )
        if verb == "create":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            created = await self.store.create(key, from_view(body), dry_run=dry, namespace=namespace or None)
            return json_response(to_view(created), status=201)
        if verb == "deletecollection" or name is None:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        entry = self.store.entry(key, namespace, name)
        if verb == "get":
            if entry is None:
                raise not_found(rt, name)
            if wants_table(request):
                return self._table_response(request, rt, rt.version, [to_view(entry.obj)], None)
            return json_response(to_view(entry.obj))
        if verb == "update":
            body = await self._body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
            updated = await self.store.update(
                key, from_view(body), dry_run=dry, namespace=namespace or "", name=name
            )
            return json_response(to_view(updated))
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
            return json_response(to_view(updated))
        # delete
        if entry is None:
            raise not_found(rt, name)
        await self.store.delete(key, namespace, name, dry_run=dry)
        return json_response(to_view(entry.obj))
