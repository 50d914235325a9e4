"""Endpoints outside the Kubernetes REST paths: the `Control` mixin of `ApiServer`.

Owns: `/version`, `/healthz`, `/readyz` (failing while the server is not ready), `/livez`, and the `/sim/v1`
control API: the virtual clock (read, advance then settle) and fault injection (drop watches, compact,
bookmark, inject, list, clear, pause, resume). These are never paused or failed by injected faults.

Must not: serve Kubernetes resources or discovery.
"""

from __future__ import annotations

from aiohttp import web

from vpa.sim.apiserver.server.common import (
    json_response,
)
from vpa.sim.apiserver.server.core import ServerCore
from vpa.sim.contracts import ApiError


class Control(ServerCore):
    """`/version`, health checks and the `/sim/v1` control API."""

    async def _version(self, request: web.Request) -> web.Response:
        major, minor = self.kubernetes_version
        return json_response(
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
        return json_response({"now": c.now(), "timeScale": c.time_scale})

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
        return json_response({"faults": self.faults.list(), "paused": self.faults.paused})

    async def _faults_action(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        f = self.faults
        if action == "drop-watches":
            return json_response({"dropped": f.drop_watches()})
        if action == "compact":
            f.compact()
            return json_response({"compactedResourceVersion": str(self.store.compacted_rv)})
        if action == "bookmark":
            f.bookmark()
            return json_response({})
        if action == "clear":
            f.clear()
            return json_response({})
        if action == "pause":
            f.pause()
            return json_response({"paused": True})
        if action == "resume":
            f.resume()
            return json_response({"paused": False})
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
            return json_response(h.describe(), status=201)
        raise ApiError(404, "NotFound", f"unknown fault action {action!r}")
