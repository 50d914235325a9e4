"""A scripted HTTP server for client tests: answers each request with the next canned response.

Also records what it received (method, path, query, headers, body) so tests can check the wire format.
Binds 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict


@dataclass
class Canned:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    lines: list[bytes] | None = None  # a streaming (watch) answer


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, str]
    headers: CIMultiDict[str]
    body: bytes


class ScriptedServer:
    def __init__(self) -> None:
        self.script: deque[Canned] = deque()
        self.default = Canned(200, {"kind": "Status", "status": "Success"})
        self.received: list[Received] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    def then(self, status: int = 200, body: Any = None, **headers: str) -> ScriptedServer:
        self.script.append(Canned(status, body, {k.replace("_", "-"): v for k, v in headers.items()}))
        return self

    def stream(self, lines: list[bytes]) -> ScriptedServer:
        self.script.append(Canned(200, None, {}, lines))
        return self

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append(
            Received(
                request.method,
                request.path,
                dict(request.query),
                CIMultiDict(request.headers),
                await request.read(),
            )
        )
        canned = self.script.popleft() if self.script else self.default
        if canned.lines is not None:
            resp = web.StreamResponse(status=canned.status)
            resp.content_type = "application/json"
            await resp.prepare(request)
            for line in canned.lines:
                await resp.write(line + b"\n")
            await resp.write_eof()
            return resp
        return web.Response(
            status=canned.status,
            body=(canned.body if isinstance(canned.body, bytes)  # sent as is (a malformed body, say)
                  else orjson.dumps(canned.body) if canned.body is not None else b""),
            headers=canned.headers,
            content_type="application/json",
        )

    async def __aenter__(self) -> ScriptedServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    if details:
        body["details"] = details
    return body
