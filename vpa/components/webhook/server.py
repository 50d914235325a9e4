"""The webhook's HTTP side: the aiohttp application around an `Admitter`.

Owns: `AdmissionServer` (any path, POST only, JSON only, a body of at most `MAX_BODY_BYTES`; a review that
cannot be read answers 400, a body over the limit 413 and a non-JSON content type 415, after which the API
server applies the failure policy, `Ignore` by default) and the per-step latency observations.

Must not: decide anything (that is the `Admitter`), or run on any loop but the webhook's.
"""

from __future__ import annotations

import time
from typing import Final

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from vpa.components.connections import (
    DEFAULT_LIMITS,
    ConnectionDrops,
    ConnectionLimits,
    read_body,
)
from vpa.components.webhook.admitter import Admitter, BadReview, Verdict

log = structlog.get_logger(__name__)

MAX_BODY_BYTES: Final = 5 * 1024 * 1024


class AdmissionServer:
    """The aiohttp application around an `Admitter`: any path, POST, JSON only, 5 MiB at most."""

    def __init__(
        self,
        admitter: Admitter,
        limits: ConnectionLimits = DEFAULT_LIMITS,
        drops: ConnectionDrops | None = None,
    ) -> None:
        self.admitter = admitter
        self.requests = 0
        """Requests received on any path, well-formed or not: proof that the API server reaches us."""
        self.limits = limits
        self.drops = drops if drops is not None else ConnectionDrops(CollectorRegistry())
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        self.app.router.add_route("*", "/", self.handle)  # the path the API server calls: matched first
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        metrics = self.admitter.metrics
        started = time.perf_counter()
        if request.method != "POST":
            return web.Response(status=405, text="only POST is served\n", headers={"Allow": "POST"})
        if request.content_type != "application/json":
            return web.Response(status=415, text=f"expected application/json, got {request.content_type!r}\n")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return web.Response(status=413, text="request payload too large\n")
        try:
            body = await read_body(request, self.limits, self.drops, "admission-controller")
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text="request payload too large\n")
        if body is None:  # the body did not arrive in time: the connection is gone
            return web.Response(status=408, text="request body timed out\n")
        read_done = time.perf_counter()
        metrics.step["read_request"].observe(read_done - started)
        try:
            api_version, review_request, uid = Admitter.parse(body)
        except BadReview as err:
            metrics.admission("error", "unknown", time.perf_counter() - started)
            return web.Response(status=400, text=f"{err}\n")
        try:
            verdict = await self.admitter.admit(review_request)
        except Exception as exc:  # the Admitter catches its own; this is the last line of defence
            log.error("admission failed; allowing without changes", error=repr(exc), exc_info=True)
            verdict = Verdict(outcome="error")
        admit_done = time.perf_counter()
        metrics.step["admit"].observe(admit_done - read_done)
        payload = Admitter.response_body(api_version, uid, verdict)
        built = time.perf_counter()
        metrics.step["build_response"].observe(built - admit_done)
        response = web.Response(body=payload, content_type="application/json")
        done = time.perf_counter()
        # aiohttp writes the response after we return: `write_response` covers handing it over.
        metrics.step["write_response"].observe(done - built)
        metrics.step["total"].observe(done - started)
        metrics.admission(verdict.outcome, verdict.resource, done - started)
        return response
