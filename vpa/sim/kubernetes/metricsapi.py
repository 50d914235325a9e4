"""`metrics.k8s.io/v1beta1` served to a real API server's aggregation layer, from the simulator's `Metrics`.

Owns: a small HTTPS server on 127.0.0.1 (its own CA and a serving certificate for the Service's DNS name)
answering discovery (`/apis`, `/apis/metrics.k8s.io/v1beta1`) and GET of PodMetrics and NodeMetrics (list,
per namespace, by name, with `labelSelector`) through the same listers `vpa sim` plugs into its own API
server; and `register()`, which creates the ExternalName Service and the APIService that make the real API
server proxy `metrics.k8s.io` here.

Why ExternalName: with `--enable-aggregator-routing` the API server resolves a Service through its
EndpointSlices, and endpoint validation refuses loopback addresses. Without it, the API server dials a
Service's ClusterIP, or for an ExternalName Service `externalName:port` directly: `127.0.0.1` and the
APIService's port reach this server, and TLS is still checked against `<service>.<namespace>.svc`.

Must not: compute metrics (`vpa.sim.cluster.metrics` does) or authenticate the proxy (loopback only).
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from vpa.sim.apiserver.compression import compress_large_responses
from vpa.sim.apiserver.tls import ServingCerts, generate_certs
from vpa.sim.contracts import AggregatedLister, ApiError, JsonObj

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
SERVICE_NAMESPACE = "kube-system"
SERVICE_NAME = "vpa-sim-metrics"

Caller = Callable[..., Awaitable[JsonObj]]


def _json(doc: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=status, content_type="application/json")


class MetricsApi:
    def __init__(self, list_pods: AggregatedLister, list_nodes: AggregatedLister) -> None:
        self._list_pods = list_pods
        self._list_nodes = list_nodes
        self.certs: ServingCerts = generate_certs(
            SERVICE_NAME,
            ("127.0.0.1", f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc", f"{SERVICE_NAME}.{SERVICE_NAMESPACE}"),
        )
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=[compress_large_responses])
        base = f"/apis/{GROUP}/{VERSION}"
        app.router.add_get("/apis", self._groups)
        app.router.add_get(f"/apis/{GROUP}", self._group)
        app.router.add_get(base, self._resources)
        app.router.add_get(f"{base}/pods", self._pods)
        app.router.add_get(f"{base}/namespaces/{{namespace}}/pods", self._pods)
        app.router.add_get(f"{base}/namespaces/{{namespace}}/pods/{{name}}", self._pods)
        app.router.add_get(f"{base}/nodes", self._nodes)
        app.router.add_get(f"{base}/nodes/{{name}}", self._nodes)
        app.router.add_get("/healthz", self._ok)
        app.router.add_get("/readyz", self._ok)
        ctx: ssl.SSLContext = self.certs.server_context()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def register(self, call: Caller) -> None:
        """Create (or replace) the ExternalName Service and the APIService pointing the aggregator here."""
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
            },
        }
        await _create_or_replace(call, f"/api/v1/namespaces/{SERVICE_NAMESPACE}/services", service)
        apiservice = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"{VERSION}.{GROUP}"},
            "spec": {
                "group": GROUP,
                "version": VERSION,
                "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE_NAME, "port": self.port},
                "caBundle": base64.b64encode(self.certs.ca_cert_pem).decode(),
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        }
        await _create_or_replace(call, "/apis/apiregistration.k8s.io/v1/apiservices", apiservice)

    # --- handlers ----------------------------------------------------------------------------------------

    async def _ok(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _groups(self, _request: web.Request) -> web.Response:
        return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group_doc()]})

    async def _group(self, _request: web.Request) -> web.Response:
        return _json({"kind": "APIGroup", "apiVersion": "v1", **self._group_doc()})

    @staticmethod
    def _group_doc() -> JsonObj:
        gv = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
        return {"name": GROUP, "versions": [gv], "preferredVersion": gv}

    async def _resources(self, _request: web.Request) -> web.Response:
        verbs = ["get", "list"]
        return _json(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/{VERSION}",
                "resources": [
                    {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
                     "verbs": verbs},
                    {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
                     "verbs": verbs},
                ],
            }
        )  # fmt: skip

    async def _pods(self, request: web.Request) -> web.Response:
        return self._serve(request, self._list_pods, "PodMetrics", request.match_info.get("namespace"))

    async def _nodes(self, request: web.Request) -> web.Response:
        return self._serve(request, self._list_nodes, "NodeMetrics", None)

    @staticmethod
    def _serve(
        request: web.Request, lister: AggregatedLister, kind: str, namespace: str | None
    ) -> web.Response:
        name = request.match_info.get("name")
        try:
            items = lister(namespace, name, request.query.get("labelSelector"))
        except ApiError as err:
            return _json(err.status(), err.code)
        if name is not None:
            return _json(items[0])
        return _json(
            {
                "kind": f"{kind}List",
                "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {"resourceVersion": ""},
                "items": items,
            }
        )


async def _create_or_replace(call: Caller, collection: str, obj: JsonObj) -> None:
    name = obj["metadata"]["name"]
    try:
        await call("POST", collection, obj)
    except ApiError as err:
        if err.code != 409:
            raise
        current = await call("GET", f"{collection}/{name}")
        obj = {
            **obj,
            "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        if obj["kind"] == "Service":
            obj["spec"] = {**obj["spec"]}
        await call("PUT", f"{collection}/{name}", obj)
