"""Webhook Services on a real control plane: `--webhook-service NAMESPACE/NAME=HOST:PORT`, as `vpa sim` does.

Owns: for each mapped Service, a TCP forwarder listening on a loopback address of its own at port 443 and
copying bytes both ways to HOST:PORT (TLS passes through untouched, so the API server still checks the
webhook's certificate against `NAME.NAMESPACE.svc`), and the ExternalName Service whose name is that
address. Why: a webhook registered by Service reference is called at the Service's port (443 unless the
registration says otherwise), an ExternalName Service carries no port mapping, and endpoint validation
refuses loopback addresses, so the only way to reach a loopback HOST:PORT is an address of our own at 443.

Must not: look into the traffic, or listen anywhere but 127.0.0.0/8.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from vpa.sim.contracts import ApiError, JsonObj

Caller = Callable[..., Awaitable[JsonObj]]
_FIRST = ipaddress.IPv4Address("127.77.0.1")
_PORT = 443


class Forwarder:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.address = ""
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self, taken: set[str]) -> None:
        """Listen on the first free 127.77.x.y:443 not in `taken`."""
        for i in range(4096):
            address = str(_FIRST + i)
            if address in taken:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, _PORT))
            except PermissionError:
                sock.close()
                raise OSError(
                    f"--webhook-service on a real control plane listens on {address}:{_PORT}, which needs "
                    "root, CAP_NET_BIND_SERVICE, or sysctl net.ipv4.ip_unprivileged_port_start=443"
                ) from None
            except OSError:
                sock.close()
                continue
            self._server = await asyncio.start_server(self._serve, sock=sock)
            self.address = address
            return
        raise OSError(f"no free loopback address with port {_PORT} for a webhook Service forwarder")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            self._conns.discard(task)
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                w.close()
            self._conns.discard(task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._conns):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.write_eof()


async def map_services(call: Caller, services: dict[tuple[str, str], tuple[str, int]]) -> list[Forwarder]:
    """Start a forwarder per Service and create (or repoint) the ExternalName Services."""
    forwarders: list[Forwarder] = []
    taken: set[str] = set()
    for (namespace, name), target in sorted(services.items()):
        fwd = Forwarder(target)
        await fwd.start(taken)
        taken.add(fwd.address)
        forwarders.append(fwd)
        await _ensure_namespace(call, namespace)
        service: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "type": "ExternalName",
                "externalName": fwd.address,
                "ports": [{"name": "https", "port": _PORT, "protocol": "TCP"}],
            },
        }
        path = f"/api/v1/namespaces/{namespace}/services"
        try:
            await call("POST", path, service)
        except ApiError as err:
            if err.code != 409:
                raise
            await call("DELETE", f"{path}/{name}")
            await call("POST", path, service)
    return forwarders


async def _ensure_namespace(call: Caller, namespace: str) -> None:
    try:
        await call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": namespace}})  # fmt: skip
    except ApiError as err:
        if err.code != 409:
            raise
