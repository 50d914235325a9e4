"""A small fake of the Prometheus HTTP API (`/api/v1/query_range`, `/api/v1/query`) on 127.0.0.1.

It answers only the queries a test registers (anything else is a 400 `bad_data`, as Prometheus answers a
bad query), evaluates range queries at `start + k × step` up to `end` as Prometheus does, records every
request (method, path, parameters, Authorization header), and can be told to fail the next requests of
a path with given status codes or to refuse POST with 405.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Series:
    labels: dict[str, str]
    value: Callable[[float], float]
    """Value at a time (Unix seconds)."""


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    authorization: str | None


def _number(value: float) -> str:
    return "NaN" if value != value else repr(float(value))


@dataclass
class FakePrometheus:
    range_series: dict[str, list[Series]] = field(default_factory=dict)
    """Query string → the series `query_range` returns for it."""
    instant_series: dict[str, list[Series]] = field(default_factory=dict)
    """Query string → the series `query` returns for it (as a vector unless `instant_as_matrix`)."""
    instant_as_matrix: bool = False
    refuse_post: bool = False
    failures: dict[str, list[int]] = field(default_factory=dict)
    """Path → status codes to answer the next requests with, one per request."""
    requests: list[Request] = field(default_factory=list)
    url: str = ""

    async def _handle(self, request: web.Request) -> web.Response:
        params = dict(request.query) if request.method == "GET" else {
            k: str(v) for k, v in (await request.post()).items()}
        self.requests.append(Request(request.method, request.path, params,
                                     request.headers.get("Authorization")))
        if request.method == "POST" and self.refuse_post:
            return web.json_response({"status": "error", "errorType": "bad_data", "error": "no POST"},
                                     status=405)
        pending = self.failures.get(request.path)
        if pending:
            status = pending.pop(0)
            return web.json_response({"status": "error", "errorType": "internal", "error": "injected"},
                                     status=status)
        query = params.get("query", "")
        if request.path == "/api/v1/query_range":
            if query not in self.range_series:
                return _bad(f"unexpected range query {query!r}")
            start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
            times = []
            t = start
            while t <= end:
                times.append(t)
                t += step
            result: list[dict[str, Any]] = [
                {"metric": s.labels, "values": [[t, _number(s.value(t))] for t in times]}
                for s in self.range_series[query]]
            return _ok("matrix", result)
        if query not in self.instant_series:
            return _bad(f"unexpected instant query {query!r}")
        at = float(params["time"])
        if self.instant_as_matrix:
            return _ok("matrix", [{"metric": s.labels, "values": [[at - 60, _number(s.value(at - 60))],
                                                                   [at, _number(s.value(at))]]}
                                  for s in self.instant_series[query]])
        return _ok("vector", [{"metric": s.labels, "value": [at, _number(s.value(at))]}
                              for s in self.instant_series[query]])


def _ok(result_type: str, result: list[dict[str, Any]]) -> web.Response:
    return web.json_response({"status": "success", "data": {"resultType": result_type, "result": result}})


def _bad(message: str) -> web.Response:
    return web.json_response({"status": "error", "errorType": "bad_data", "error": message}, status=400)


@contextlib.asynccontextmanager
async def serve(fake: FakePrometheus, ssl_context: ssl.SSLContext | None = None,
                ) -> AsyncIterator[FakePrometheus]:
    app = web.Application()
    app.router.add_route("*", "/api/v1/query_range", fake._handle)
    app.router.add_route("*", "/api/v1/query", fake._handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    try:
        port = runner.addresses[0][1]
        fake.url = f"{'https' if ssl_context is not None else 'http'}://127.0.0.1:{port}"
        yield fake
    finally:
        await runner.cleanup()
