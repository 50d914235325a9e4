"""Slow and stalled clients against the admission webhook over real TLS on 127.0.0.1.

`stalled_clients_scenario` opens `stalled` TLS connections that stop part-way (headers sent with a
Content-Length and part of the body; headers half sent; nothing after the handshake), keeps sending real
AdmissionReviews meanwhile, and returns what happened: how many real reviews were answered, and how long
the stalled connections stayed open. The short form runs in the tests, the long one in `benchmarks.faults`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from tests.integration.components.test_webhook_helpers import (
    SERVICES,
    cert_flags,
    running_webhook,
    write_certs,
)
from vpa.components.connections import ConnectionLimits
from vpa.sim import SimCluster

HOST = "vpa-webhook.kube-system.svc"
REVIEW = orjson.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app"}]}},
        },
    }
)
STALLS = (
    # headers complete with a Content-Length, then only part of the body
    b'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":',
    # half the headers
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Ty",
    # nothing at all after the handshake
    b"",
)


@dataclass
class SlowClientResult:
    stalled_opened: int = 0
    stalled_closed_by_server: int = 0
    longest_stall_s: float = 0.0
    reviews_answered: int = 0
    review_failures: list[str] = field(default_factory=list)
    slowest_review_s: float = 0.0
    drops: dict[str, float] = field(default_factory=dict)


async def _review(port: int, client: ssl.SSLContext) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=HOST)
    try:
        writer.write(
            b"POST / HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(REVIEW)).encode() + b"\r\n\r\n" + REVIEW
        )
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or orjson.loads(body)["response"]["allowed"] is not True:
        raise AssertionError(head[:100])


async def _stall(port: int, client: ssl.SSLContext, data: bytes, give_up_s: float) -> float | None:
    """Open, send `data`, then wait for the server to close; seconds until it did (None: it never did)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=HOST)
    started = time.monotonic()
    try:
        if data:
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await asyncio.wait_for(reader.read(), give_up_s)
            return time.monotonic() - started
        return time.monotonic() - started
    except TimeoutError:
        return None
    finally:
        writer.transport.abort()


async def stalled_clients_scenario(
    tmp: Path, *, stalled: int, limits: ConnectionLimits, review_clients: int = 4, give_up_s: float = 10.0
) -> SlowClientResult:
    certs_dir = write_certs(tmp / "certs")
    client = ssl.create_default_context(cadata=(certs_dir / "caCert.pem").read_text())
    result = SlowClientResult()
    async with (
        SimCluster(nodes=1, behaviour=False, webhook_services=dict(SERVICES)) as cluster,
        running_webhook(cluster, *cert_flags(certs_dir), limits=limits) as controller,
    ):
        stop = asyncio.Event()

        async def reviews() -> None:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    await _review(controller.port, client)
                    result.reviews_answered += 1
                except (AssertionError, OSError, ssl.SSLError) as exc:
                    result.review_failures.append(repr(exc))
                result.slowest_review_s = max(result.slowest_review_s, time.monotonic() - started)

        loaders = [asyncio.create_task(reviews()) for _ in range(review_clients)]
        stalls = [
            asyncio.create_task(_stall(controller.port, client, STALLS[i % len(STALLS)], give_up_s))
            for i in range(stalled)
        ]
        result.stalled_opened = stalled
        outcomes = await asyncio.gather(*stalls)
        stop.set()
        await asyncio.gather(*loaders)
        closed = [s for s in outcomes if s is not None]
        result.stalled_closed_by_server = len(closed)
        result.longest_stall_s = max(closed, default=0.0)
        for metric in controller.drops.counter.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.labels["server"] == "admission-controller":
                    result.drops[sample.labels["reason"]] = sample.value
    return result
