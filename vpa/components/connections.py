"""Connection limits for our HTTP servers (the admission webhook and the metrics/health server).

Owns: `ConnectionLimits` (how long a client may take for the TLS handshake and its request headers, how
long for a request body, how long a keep-alive connection may sit idle, how many connections are served at
once), `ConnectionGuard` (applies them to an aiohttp `web.Server`: a connection over the cap is closed at
once, one that has not completed its first request's headers within `header_timeout_s` is aborted, each
counted in `vpa_http_connection_drops_total{server,reason}`), `GuardedSite` (a `web.TCPSite` that passes
the handshake timeout to the listening socket) and `read_body` (a body read bounded by `body_timeout_s`).

Why: file descriptors are shared with the API client and the watch streams, so clients that open
connections and stall (headers sent, body never; or nothing at all) must not be able to hold them forever.
Idle keep-alive connections and stalls between requests are aiohttp's `keepalive_timeout`, set from
`idle_timeout_s` by `runner_kwargs`.

Must not: decide anything about requests (handlers do), or bind anything but the address it is given.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

log = structlog.get_logger(__name__)

DROP_REASONS: Final = ("limit", "header_timeout", "body_timeout")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Timeouts in seconds and the connection cap (a Go `http.Server`'s ReadHeaderTimeout, ReadTimeout and
    IdleTimeout, plus a cap Go's server lacks)."""

    header_timeout_s: float = 10.0  # TLS handshake, then the first request's headers
    body_timeout_s: float = 10.0  # the whole body, once the headers are in
    idle_timeout_s: float = 60.0  # a keep-alive connection between requests
    max_connections: int = 1024

    def runner_kwargs(self) -> dict[str, Any]:
        """What `web.AppRunner` needs for the idle timeout."""
        return {"keepalive_timeout": self.idle_timeout_s}


DEFAULT_LIMITS: Final = ConnectionLimits()


class ConnectionDrops:
    """`vpa_http_connection_drops_total{server,reason}`: one registry holds it once for all servers."""

    def __init__(self, registry: CollectorRegistry) -> None:
        existing = getattr(registry, "_vpa_connection_drops", None)
        if existing is None:
            existing = Counter(
                "vpa_http_connection_drops_total",
                "Connections our HTTP servers closed: over the cap, headers or body too slow.",
                ["server", "reason"],
                registry=registry,
            )
            registry._vpa_connection_drops = existing  # type: ignore[attr-defined]
        self.counter: Counter = existing

    def count(self, server: str, reason: str) -> None:
        self.counter.labels(server=server, reason=reason).inc()


class ConnectionGuard:
    """Applies `limits` to an aiohttp `web.Server` (after `runner.setup()`, before a site starts)."""

    def __init__(
        self,
        server: web.Server,
        limits: ConnectionLimits,
        drops: ConnectionDrops,
        name: str,
    ) -> None:
        self.limits = limits
        self.name = name
        self._drops = drops
        self._server = server
        self._deadlines: dict[object, asyncio.TimerHandle] = {}
        self._made = server.connection_made
        self._lost = server.connection_lost
        self._factory = server.request_factory
        server.connection_made = self._connection_made  # type: ignore[method-assign]
        server.connection_lost = self._connection_lost  # type: ignore[method-assign]
        server.request_factory = self._request_factory

    @property
    def open_connections(self) -> int:
        return len(self._server.connections)

    def _connection_made(self, handler: Any, transport: asyncio.Transport) -> None:
        if len(self._server.connections) >= self.limits.max_connections:
            self._drops.count(self.name, "limit")
            transport.abort()
            return
        self._made(handler, transport)
        loop = asyncio.get_running_loop()
        self._deadlines[handler] = loop.call_later(
            self.limits.header_timeout_s, self._expire, handler, transport
        )

    def _connection_lost(self, handler: Any, exc: BaseException | None = None) -> None:
        deadline = self._deadlines.pop(handler, None)
        if deadline is not None:
            deadline.cancel()
        self._lost(handler, exc)

    def _request_factory(self, message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> Any:
        deadline = self._deadlines.pop(protocol, None)
        if deadline is not None:
            deadline.cancel()
        return self._factory(message, payload, protocol, writer, task)

    def _expire(self, handler: object, transport: asyncio.Transport) -> None:
        if self._deadlines.pop(handler, None) is not None:
            self._drops.count(self.name, "header_timeout")
            transport.abort()


class GuardedSite(web.TCPSite):
    """A `web.TCPSite` whose TLS handshake must finish within `header_timeout_s`."""

    __slots__ = ("_handshake_timeout_s",)

    def __init__(
        self, runner: web.BaseRunner, host: str | None, port: int, *, limits: ConnectionLimits, **kwargs: Any
    ) -> None:
        super().__init__(runner, host, port, **kwargs)
        self._handshake_timeout_s = limits.header_timeout_s

    async def start(self) -> None:
        self._runner._reg_site(self)
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        extra: dict[str, Any] = {}
        if self._ssl_context is not None:
            extra["ssl_handshake_timeout"] = self._handshake_timeout_s
        self._server = await loop.create_server(
            server,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
            **extra,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


async def read_body(
    request: web.Request, limits: ConnectionLimits, drops: ConnectionDrops, name: str
) -> bytes | None:
    """The request body, or None (connection aborted, counted) when it takes over `body_timeout_s`."""
    try:
        return await asyncio.wait_for(request.read(), limits.body_timeout_s)
    except TimeoutError:
        drops.count(name, "body_timeout")
        if request.transport is not None:
            request.transport.abort()
        return None
