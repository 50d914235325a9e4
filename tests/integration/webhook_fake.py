"""A fake HTTPS mutating admission webhook on 127.0.0.1 for the simulated cluster's admission tests.

It answers every AdmissionReview POSTed to `/mutate` with `allowed: true` and the JSON patch its `patch_for`
callable returns for the review, and records each review it saw. Its serving certificate is signed by a CA
of its own, for the webhook configuration's `caBundle`.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from vpa.sim.apiserver.tls import generate_certs

Review = dict[str, Any]


@dataclass
class FakeWebhook:
    port: int
    ca_bundle: str  # base64 PEM, for `clientConfig.caBundle`
    reviews: list[Review] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"


@contextlib.asynccontextmanager
async def patching_webhook(
    patch_for: Callable[[Review], list[dict[str, Any]]], hosts: Sequence[str] = ("127.0.0.1",)
) -> AsyncIterator[FakeWebhook]:
    """Serve the fake webhook (certificate valid for `hosts`) until the context exits."""
    certs = generate_certs("webhook", tuple(hosts))
    reviews: list[Review] = []

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        reviews.append(review)
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "allowed": True,
                    "patchType": "JSONPatch",
                    "patch": base64.b64encode(orjson.dumps(patch_for(review))).decode(),
                },
            }
        )

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_context())
    await site.start()
    assert site._server is not None
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield FakeWebhook(port, base64.b64encode(certs.ca_cert_pem).decode(), reviews)
    finally:
        await runner.cleanup()
