"""Discovery and OpenAPI: the `Discovery` mixin of `ApiServer`.

Owns: `/api` and `/apis` (legacy `APIVersions` / `APIGroupList`, or aggregated apidiscovery.k8s.io/v2
`APIGroupDiscoveryList` when the client asks for it), the group and version documents (`APIGroup`,
`APIResourceList` with status, scale, hook-served subresources and aggregated APIs), and a minimal
`/openapi/v3` (PATCH operations advertising `fieldValidation` for kubectl's probe, custom resources'
schemas for `kubectl explain`; no requestBody, so kubectl's client-side apply computes strategic merge
patches from its compiled-in types); `/openapi/v2` answers 404.

Must not: read or change objects; it only describes what the registry and hooks hold.
"""

from __future__ import annotations

import hashlib

import orjson
from aiohttp import web

from vpa.sim.apiserver.registry import ResourceType
from vpa.sim.apiserver.server.common import (
    json_response,
)
from vpa.sim.apiserver.server.core import ServerCore
from vpa.sim.contracts import ApiError, JsonObj

# Metadata of subresources other helpers register, for discovery.
_SUBRESOURCE_INFO: dict[str, tuple[str, str, str, list[str]]] = {
    "eviction": ("policy", "v1", "Eviction", ["create"]),
    "binding": ("", "v1", "Binding", ["create"]),
    "resize": ("", "v1", "Pod", ["get", "patch", "update"]),
    "ephemeralcontainers": ("", "v1", "Pod", ["get", "patch", "update"]),
    "log": ("", "v1", "Pod", ["get"]),
    "exec": ("", "v1", "PodExecOptions", ["create", "get"]),
}


class Discovery(ServerCore):
    """Discovery documents and OpenAPI."""

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
        return json_response({"paths": paths})

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
        return json_response(
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
        return json_response(
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
        return json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})

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
