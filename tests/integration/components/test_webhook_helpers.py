"""Shared set-up for the admission-controller tests: certificates on disk, a running component, a TLS client.

The component runs inside a real `Runtime` (shared client and caches, as in production) against a
`SimCluster`, listening on 127.0.0.1 and an ephemeral port that is then mapped to the `vpa-webhook`
Service in the cluster's webhook table.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from vpa.app.runtime import ComponentSpec, Runtime
from vpa.components.context import ComponentContext
from vpa.components.webhook import AdmissionController
from vpa.flags.commands import parse_run_args
from vpa.kube import certificates as certs
from vpa.sim import SimCluster

SERVICE = ("kube-system", "vpa-webhook")
SERVICES = {SERVICE: ("127.0.0.1", 0)}
KUBECTL = Path(sys.executable).parent / "kubectl"
VPA = "verticalpodautoscalers.autoscaling.k8s.io"


def built(run: Callable[[ComponentContext], Awaitable[None]]) -> Callable[[ComponentContext], Any]:
    """Adapt a `run(ctx)` test coroutine to `ComponentSpec.build` (called once, returns the work)."""
    return lambda ctx: functools.partial(run, ctx)


HOOKS = "mutatingwebhookconfigurations.admissionregistration.k8s.io"


def kubectl_binary() -> str | None:
    return str(KUBECTL) if KUBECTL.exists() else shutil.which("kubectl")


def write_certs(directory: Path, *, service: str = "vpa-webhook", namespace: str = "kube-system") -> Path:
    """A CA and a serving pair for the Service names: caCert.pem, serverCert.pem, serverKey.pem."""
    now = time.time()
    ca, ca_key = certs.generate_ca(now, 86_400)
    cert, key = certs.generate_serving_cert(
        ca, ca_key, certs.service_dns_names(service, namespace), now, 86_400
    )
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in (("caCert.pem", ca), ("serverCert.pem", cert), ("serverKey.pem", key)):
        (directory / name).write_bytes(data)
    return directory


def cert_flags(directory: Path) -> list[str]:
    return [
        f"--client-ca-file={directory / 'caCert.pem'}",
        f"--tls-cert-file={directory / 'serverCert.pem'}",
        f"--tls-private-key={directory / 'serverKey.pem'}",
    ]


async def wait_for(predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def running_webhook(
    cluster: SimCluster,
    *flags: str,
    **options: Any,
) -> AsyncIterator[AdmissionController]:
    """Run the admission controller in a Runtime until the block exits; map the Service to its port.

    The cluster must be built with `webhook_services={SERVICE: ("127.0.0.1", 0)}` (an empty mapping is
    replaced by a private one); the real port is filled in once the server listens."""
    settings = parse_run_args(
        [
            f"--kubeconfig={cluster.kubeconfig_path}",
            "--address=127.0.0.1:0",
            "--components=admission-controller",
            "--status-lease-update-interval=1s",
            *flags,
        ],
        env={"NAMESPACE": "kube-system"},
    )
    holder: list[AdmissionController] = []
    ready = asyncio.Event()

    async def run(ctx: ComponentContext) -> None:
        controller = AdmissionController(ctx, host="127.0.0.1", port=0, **options)
        holder.append(controller)
        try:
            await controller.start()
            cluster.admission.services[SERVICE] = ("127.0.0.1", controller.port)
            ready.set()
            await asyncio.Event().wait()
        finally:
            await controller.stop()

    runtime = Runtime(
        settings, components=[ComponentSpec("admission-controller", lambda ctx: functools.partial(run, ctx))]
    )
    task = asyncio.create_task(runtime.run(install_signal_handlers=False))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        waiter.cancel()
        runtime.stop_event.set()
        raise AssertionError(f"admission controller did not start (runtime: {await task})")
    try:
        yield holder[0]
    finally:
        runtime.stop_event.set()
        assert await asyncio.wait_for(task, 15) == 0


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


async def kubectl(cluster: SimCluster, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    binary = kubectl_binary()
    assert binary is not None
    proc = await asyncio.create_subprocess_exec(
        binary,
        "--kubeconfig",
        str(cluster.kubeconfig_path),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
