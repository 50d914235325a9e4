"""Fault control of a real control plane (`vpa sim --control-plane=kubernetes --fault-control`).

Owns: a small HTTP server on a free loopback port whose URL carries a random secret (printed by `vpa sim`
as `fault control: <url>`), with which a test harness in another process crashes and restarts
kube-apiserver and compacts etcd while everything else keeps running:

* `GET  <url>` — `{"kube-apiserver": <pid or null>, "etcd": <client URL>}`;
* `POST <url>/kube-apiserver/kill` — SIGKILL by its PID, answered once it has exited (`{"pid": ...}`);
* `POST <url>/kube-apiserver/start` — started again with the same flags, port and certificates, answered
  once /readyz says ok (`{"pid": ...}`; 409 while it still runs);
* `POST <url>/etcd/compact` — etcd compacted at its current revision (`{"revision": ...}`).

Must not: listen anywhere but 127.0.0.1, act without the secret, or touch a process the control plane did
not start (`ControlPlane` holds the PIDs).
"""

from __future__ import annotations

import secrets

import orjson
from aiohttp import web

from vpa.sim.kubernetes.controlplane import ControlPlane, ControlPlaneError


def _json(doc: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=status, content_type="application/json")


class FaultControl:
    """Start with `await start()` (then `url` is set), stop with `await stop()`."""

    def __init__(self, control_plane: ControlPlane) -> None:
        self.control_plane = control_plane
        self.url = ""
        self._secret = secrets.token_hex(16)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        base = f"/{self._secret}"
        app.router.add_get(base, self._state)
        app.router.add_post(base + "/kube-apiserver/kill", self._kill)
        app.router.add_post(base + "/kube-apiserver/start", self._start)
        app.router.add_post(base + "/etcd/compact", self._compact)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}{base}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _state(self, _request: web.Request) -> web.Response:
        cp = self.control_plane
        return _json({"kube-apiserver": cp.pid("kube-apiserver"), "etcd": cp.etcd_url})

    async def _kill(self, _request: web.Request) -> web.Response:
        return _json({"pid": await self.control_plane.kill_apiserver()})

    async def _start(self, _request: web.Request) -> web.Response:
        try:
            return _json({"pid": await self.control_plane.start_apiserver()})
        except ControlPlaneError as err:
            return _json({"error": str(err)}, status=409)

    async def _compact(self, _request: web.Request) -> web.Response:
        try:
            return _json({"revision": await self.control_plane.compact_etcd()})
        except ControlPlaneError as err:
            return _json({"error": str(err)}, status=502)
