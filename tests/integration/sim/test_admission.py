"""Admission webhooks: the simulated API server calls real HTTPS webhooks as kube-apiserver does.

A tiny aiohttp webhook server with its own throwaway CA stands in for the VPA admission controller.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from vpa.sim import SimCluster
from vpa.sim.apiserver.tls import ServingCerts, generate_certs
from vpa.sim.contracts import ApiError

Responder = Callable[[dict[str, Any]], Any]


@dataclass
class Webhook:
    certs: ServingCerts
    port: int = 0
    reviews: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    responder: Responder | None = None
    delay_s: float = 0.0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.certs.ca_cert_pem).decode()

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        self.paths.append(request.path)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": True}
        if self.responder is not None:
            response.update(self.responder(review["request"]))
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    certs = generate_certs("webhook", ("127.0.0.1", "vpa-webhook.kube-system.svc"))
    hook = Webhook(certs)
    app = web.Application()
    app.router.add_post("/mutate", hook.handle)
    app.router.add_post("/validate", hook.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_context())
    await site.start()
    server = site._server
    assert server is not None
    hook.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    yield hook
    await runner.cleanup()


def _patch(ops: list[dict[str, Any]]) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "patch": base64.b64encode(orjson.dumps(ops)).decode()}


def _config(config_name: str, name: str, client_config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    webhook = {
        "name": name,
        "clientConfig": client_config,
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
        ],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
    }
    webhook.update(extra)
    return {"metadata": {"name": config_name}, "webhooks": [webhook]}


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName" if name.endswith("-") else "name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }


@pytest.fixture
async def http(cluster: SimCluster) -> AsyncIterator[aiohttp.ClientSession]:
    ctx = ssl.create_default_context(cadata=cluster.ca_cert_pem.decode())
    async with aiohttp.ClientSession(base_url=cluster.url, connector=aiohttp.TCPConnector(ssl=ctx)) as s:
        yield s


MUTATING = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
VALIDATING = "validatingwebhookconfigurations.admissionregistration.k8s.io"


async def test_mutating_webhook_over_tls_patch_applied_and_warning(
    cluster: SimCluster, webhook: Webhook, http: aiohttp.ClientSession
) -> None:
    webhook.responder = lambda req: dict(
        _patch([{"op": "add", "path": "/metadata/annotations", "value": {"vpaUpdates": "cpu request"}}]),
        warnings=["resources were adjusted"],
    )
    url = f"https://127.0.0.1:{webhook.port}/mutate"
    await cluster.store.create(
        MUTATING, _config("m", "vpa.k8s.io", {"url": url, "caBundle": webhook.ca_bundle})
    )
    async with http.post("/api/v1/namespaces/default/pods", json=_pod("web-")) as r:
        assert r.status == 201, await r.text()
        pod = await r.json()
        assert r.headers.getall("Warning") == ['299 - "resources were adjusted"']
    assert pod["metadata"]["annotations"] == {"vpaUpdates": "cpu request"}
    assert pod["metadata"]["name"].startswith("web-")
    (review,) = webhook.reviews
    assert review["apiVersion"] == "admission.k8s.io/v1"
    req = review["request"]
    assert req["operation"] == "CREATE"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["namespace"] == "default"
    assert "name" not in req  # generateName is resolved after mutating admission, as in kube-apiserver
    assert req["object"]["metadata"]["generateName"] == "web-"
    assert req["oldObject"] is None
    assert req["dryRun"] is False
    assert req["userInfo"]["username"] == "system:admin"  # an HTTP client
    assert req["options"]["kind"] == "CreateOptions"
    # In-process writes go through the same admission unless admit=False.
    created = await cluster.store.create(
        "pods", dict(_pod("inproc"), metadata={"name": "inproc", "namespace": "default"})
    )
    assert created["metadata"]["annotations"] == {"vpaUpdates": "cpu request"}
    assert webhook.reviews[-1]["request"]["userInfo"]["username"] == "system:kube-controller-manager"
    raw = await cluster.store.create(
        "pods", {"metadata": {"name": "raw", "namespace": "default"}, "spec": {"containers": []}}, admit=False
    )
    assert "annotations" not in raw["metadata"]
    assert len(webhook.reviews) == 2


async def test_service_reference_is_mapped_and_verified_against_service_dns_name(
    webhook: Webhook,
) -> None:
    services = {("kube-system", "vpa-webhook"): ("127.0.0.1", webhook.port)}
    webhook.responder = lambda req: _patch(
        [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]
    )
    async with SimCluster(behaviour=False, webhook_services=services) as cluster:
        cfg = _config(
            "m",
            "vpa.k8s.io",
            {
                "service": {
                    "namespace": "kube-system",
                    "name": "vpa-webhook",
                    "path": "/mutate",
                    "port": 443,
                },
                "caBundle": webhook.ca_bundle,
            },
        )
        await cluster.store.create(MUTATING, cfg)
        pod = await cluster.store.create(
            "pods", dict(_pod("p"), metadata={"name": "p", "namespace": "default", "labels": {"a": "b"}})
        )
        assert pod["metadata"]["labels"] == {"a": "b", "mutated": "yes"}


async def test_failure_policy_ignore_fail_wrong_ca_and_timeout(cluster: SimCluster, webhook: Webhook) -> None:
    store = cluster.store
    # Nothing listens on this port.
    dead = {"url": "https://127.0.0.1:9/mutate", "caBundle": webhook.ca_bundle}
    await store.create(MUTATING, _config("ignore", "ignore.example.com", dead, failurePolicy="Ignore"))
    ok = await store.create("pods", dict(_pod("a"), metadata={"name": "a", "namespace": "default"}))
    assert ok["metadata"]["name"] == "a"
    await store.create(MUTATING, _config("fail", "fail.example.com", dead, failurePolicy="Fail"))
    with pytest.raises(ApiError) as err:
        await store.create("pods", dict(_pod("b"), metadata={"name": "b", "namespace": "default"}))
    assert err.value.code == 500
    assert 'failed calling webhook "fail.example.com"' in err.value.message
    assert store.get("pods", "default", "b") is None
    await store.delete(MUTATING, None, "fail")
    # A CA that did not sign the webhook's certificate: TLS verification fails, so Fail rejects.
    other_ca = base64.b64encode(generate_certs("other").ca_cert_pem).decode()
    url = f"https://127.0.0.1:{webhook.port}/mutate"
    await store.create(MUTATING, _config("badca", "badca.example.com", {"url": url, "caBundle": other_ca}))
    with pytest.raises(ApiError) as err:
        await store.create("pods", dict(_pod("c"), metadata={"name": "c", "namespace": "default"}))
    assert err.value.code == 500
    assert webhook.reviews == []
    await store.delete(MUTATING, None, "badca")
    # timeoutSeconds is honoured: a slow webhook fails the request after ~1 s, not after it answers.
    webhook.delay_s = 5.0
    await store.create(
        MUTATING,
        _config("slow", "slow.example.com", {"url": url, "caBundle": webhook.ca_bundle}, timeoutSeconds=1),
    )
    started = time.monotonic()
    with pytest.raises(ApiError) as err:
        await store.create("pods", dict(_pod("d"), metadata={"name": "d", "namespace": "default"}))
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 3.0
    assert "failed calling webhook" in err.value.message


async def test_validating_webhook_denial_and_selectors(
    cluster: SimCluster, webhook: Webhook, http: aiohttp.ClientSession
) -> None:
    webhook.responder = lambda req: {
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": "pods must not be called evil"},
    }
    url = f"https://127.0.0.1:{webhook.port}/validate"
    cfg = _config(
        "v",
        "deny.example.com",
        {"url": url, "caBundle": webhook.ca_bundle},
        objectSelector={"matchLabels": {"check": "yes"}},
        namespaceSelector={
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default"]}
            ]
        },
    )
    await cluster.store.create(VALIDATING, cfg)
    async with http.post("/api/v1/namespaces/default/pods", json=_pod("evil", {"check": "yes"})) as r:
        assert r.status == 403
        status = await r.json()
    assert (
        status["message"]
        == 'admission webhook "deny.example.com" denied the request: pods must not be called evil'
    )
    assert status["reason"] == "Forbidden"
    # The object selector skips unlabelled pods; the namespace selector skips other namespaces.
    async with http.post("/api/v1/namespaces/default/pods", json=_pod("plain")) as r:
        assert r.status == 201
    async with http.post("/api/v1/namespaces/kube-system/pods", json=_pod("evil", {"check": "yes"})) as r:
        assert r.status == 201
    assert len(webhook.reviews) == 1
    # Validating webhooks see the generated name.
    webhook.responder = None
    async with http.post("/api/v1/namespaces/default/pods", json=_pod("gen-", {"check": "yes"})) as r:
        assert r.status == 201
    assert webhook.reviews[-1]["request"]["name"].startswith("gen-")
    # Dry runs reach webhooks with dryRun=true and store nothing.
    async with http.post(
        "/api/v1/namespaces/default/pods?dryRun=All", json=_pod("dry", {"check": "yes"})
    ) as r:
        assert r.status == 201
    assert webhook.reviews[-1]["request"]["dryRun"] is True
    assert cluster.store.get("pods", "default", "dry") is None


async def test_update_rules_and_subresource_matching(cluster: SimCluster, webhook: Webhook) -> None:
    url = f"https://127.0.0.1:{webhook.port}/mutate"
    cfg = _config("u", "upd.example.com", {"url": url, "caBundle": webhook.ca_bundle})
    cfg["webhooks"][0]["rules"] = [
        {
            "apiGroups": ["autoscaling.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["verticalpodautoscalers"],
        }
    ]
    await cluster.store.create(MUTATING, cfg)
    vpa = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    await cluster.store.create("verticalpodautoscalers.autoscaling.k8s.io", vpa)
    await cluster.store.patch(
        "verticalpodautoscalers.autoscaling.k8s.io",
        "default",
        "v",
        "merge",
        {"spec": {"updatePolicy": {"updateMode": "Off"}}},
    )
    # A /status write is the "verticalpodautoscalers/status" resource: not matched by this rule.
    current = cluster.store.get("verticalpodautoscalers.autoscaling.k8s.io", "default", "v")
    assert current is not None
    await cluster.store.update(
        "verticalpodautoscalers.autoscaling.k8s.io",
        dict(current, status={"conditions": []}),
        subresource="status",
    )
    ops = [r["request"]["operation"] for r in webhook.reviews]
    assert ops == ["CREATE", "UPDATE"]
    update = webhook.reviews[1]["request"]
    assert update["oldObject"]["spec"].get("updatePolicy") is None
    assert update["object"]["spec"]["updatePolicy"] == {"updateMode": "Off"}
    assert update["name"] == "v"


async def test_mutating_webhooks_run_before_validating_ones_which_see_the_mutation(
    cluster: SimCluster, webhook: Webhook, http: aiohttp.ClientSession
) -> None:
    def respond(req: dict[str, Any]) -> dict[str, Any]:
        annotations = req["object"]["metadata"].get("annotations") or {}
        if webhook.paths[-1] == "/mutate":
            return _patch([{"op": "add", "path": "/metadata/annotations", "value": {"mutated": "yes"}}])
        # The validating webhook: it must see the mutating webhook's patch; it denies pods labelled deny.
        if annotations.get("mutated") != "yes":
            return {"allowed": False, "status": {"code": 400, "message": "not mutated first"}}
        if req["object"]["metadata"]["labels"].get("deny") == "yes":
            return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "denied"}}
        return {}

    webhook.responder = respond
    base = f"https://127.0.0.1:{webhook.port}"
    # Registered validating first, so the order cannot come from the order of registration.
    await cluster.store.create(
        VALIDATING,
        _config("v", "validate.example.com", {"url": f"{base}/validate", "caBundle": webhook.ca_bundle}),
    )
    await cluster.store.create(
        MUTATING, _config("m", "mutate.example.com", {"url": f"{base}/mutate", "caBundle": webhook.ca_bundle})
    )
    async with http.post("/api/v1/namespaces/default/pods", json=_pod("ok")) as r:
        assert r.status == 201, await r.text()
        assert (await r.json())["metadata"]["annotations"] == {"mutated": "yes"}
    assert webhook.paths == ["/mutate", "/validate"]
    assert "annotations" not in webhook.reviews[0]["request"]["object"]["metadata"]
    assert webhook.reviews[1]["request"]["object"]["metadata"]["annotations"] == {"mutated": "yes"}
    # A validating denial blocks the create, after the mutation ran.
    async with http.post("/api/v1/namespaces/default/pods", json=_pod("bad", {"deny": "yes"})) as r:
        assert r.status == 403
        status = await r.json()
    assert status["message"] == 'admission webhook "validate.example.com" denied the request: denied'
    assert webhook.paths[2:] == ["/mutate", "/validate"]
    assert cluster.store.get("pods", "default", "bad") is None
    assert cluster.store.get("pods", "default", "ok") is not None
