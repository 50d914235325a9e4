"""TLS over real sockets: certificate rotation under load; self-managed certificates shared by replicas."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
import ssl
from pathlib import Path

import orjson
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from prometheus_client import CollectorRegistry

from tests.integration.components.test_webhook_helpers import (
    HOOKS,
    SERVICE,
    SERVICES,
    VPA,
    built,
    cert_flags,
    running_webhook,
    wait_for,
    write_certs,
)
from vpa.app.runtime import ComponentSpec, Runtime
from vpa.components.context import ComponentContext
from vpa.components.webhook import AdmissionController
from vpa.flags.commands import parse_run_args
from vpa.kube import certificates as certs
from vpa.sim import SimCluster

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
HOST = "vpa-webhook.kube-system.svc"


async def _one_request(port: int, client: ssl.SSLContext) -> bytes:
    """A fresh connection (full handshake), one admission POST; returns the served certificate (DER)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=HOST)
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
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
    assert head.startswith(b"HTTP/1.1 200"), head
    assert orjson.loads(body)["response"]["allowed"] is True
    return der


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificates(pem)[0].public_bytes(Encoding.DER)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


async def test_rotated_files_are_served_to_new_connections_without_a_failed_request(tmp_path: Path) -> None:
    first = write_certs(tmp_path / "first")
    second = write_certs(tmp_path / "second")
    live = tmp_path / "live"
    live.mkdir()
    for name in ("caCert.pem", "serverCert.pem", "serverKey.pem"):
        (live / name).write_bytes((first / name).read_bytes())
    # The client trusts both CAs, as the API server does while the caBundle is being rolled.
    both = (first / "caCert.pem").read_bytes() + (second / "caCert.pem").read_bytes()
    client = ssl.create_default_context(cadata=both.decode())
    old_der, new_der = (
        _der((first / "serverCert.pem").read_bytes()),
        _der((second / "serverCert.pem").read_bytes()),
    )

    async with (
        SimCluster(nodes=1, behaviour=False, webhook_services=dict(SERVICES)) as cluster,
        running_webhook(cluster, *cert_flags(live), "--reload-cert=true", cert_poll_s=0.05) as controller,
    ):
        config = cluster.store.get(HOOKS, None, "vpa-webhook-config")
        assert config is not None
        uid = config["metadata"]["uid"]
        served: list[bytes] = []
        failures: list[BaseException] = []
        stop = asyncio.Event()

        async def load() -> None:
            while not stop.is_set():
                try:
                    served.append(await _one_request(controller.port, client))
                except (AssertionError, OSError, ssl.SSLError) as exc:
                    failures.append(exc)

        loaders = [asyncio.create_task(load()) for _ in range(4)]
        await wait_for(lambda: len(served) >= 20, what="requests before rotation")
        # The key first, then the certificate: for a moment the pair does not match (kept the old one).
        _replace(live / "serverKey.pem", (second / "serverKey.pem").read_bytes())
        await asyncio.sleep(0.2)
        _replace(live / "serverCert.pem", (second / "serverCert.pem").read_bytes())
        _replace(live / "caCert.pem", (second / "caCert.pem").read_bytes())
        await wait_for(lambda: served[-1] == new_der, what="the new certificate being served")
        count = len(served)
        await wait_for(lambda: len(served) >= count + 20, what="requests after rotation")
        stop.set()
        await asyncio.gather(*loaders)

        assert failures == []
        assert served[0] == old_der
        first_new = served.index(new_der)
        assert all(der == old_der for der in served[:first_new])
        assert all(der == new_der for der in served[first_new + 4 :])  # only in-flight handshakes lag
        assert controller.tls is not None
        assert controller.tls.swaps == 1

        # The CA change reached the webhook configuration, updated in place.
        def registered_second_ca() -> bool:
            stored = cluster.store.get(HOOKS, None, "vpa-webhook-config")
            assert stored is not None
            bundle = stored["webhooks"][0]["clientConfig"]["caBundle"]
            return base64.b64decode(bundle) == (second / "caCert.pem").read_bytes()

        await wait_for(registered_second_ca, what="caBundle update")
        stored = cluster.store.get(HOOKS, None, "vpa-webhook-config")
        assert stored is not None
        assert stored["metadata"]["uid"] == uid


async def test_two_replicas_serve_the_same_self_managed_certificate(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    settings = parse_run_args(
        [
            "--address=127.0.0.1:0",
            "--components=admission-controller",
            f"--client-ca-file={missing / 'ca.pem'}",
            f"--tls-cert-file={missing / 'cert.pem'}",
            f"--tls-private-key={missing / 'key.pem'}",
        ],
        env={"NAMESPACE": "kube-system"},
    )
    async with SimCluster(nodes=1, behaviour=False, webhook_services=dict(SERVICES)) as cluster:
        settings = dataclasses.replace(
            settings, common=dataclasses.replace(settings.common, kubeconfig=str(cluster.kubeconfig_path))
        )
        replicas: list[AdmissionController] = []
        started = asyncio.Event()

        async def run(ctx: ComponentContext) -> None:
            # Two replicas: same cluster, separate metrics registries, started at the same moment.
            pair = [
                AdmissionController(
                    dataclasses.replace(ctx, registry=CollectorRegistry()), host="127.0.0.1", port=0
                )
                for _ in range(2)
            ]
            replicas.extend(pair)
            try:
                await asyncio.gather(*(replica.start() for replica in pair))
                cluster.admission.services[SERVICE] = ("127.0.0.1", pair[0].port)
                started.set()
                await asyncio.Event().wait()
            finally:
                for replica in pair:
                    await replica.stop()

        runtime = Runtime(
            settings,
            components=[ComponentSpec("admission-controller", built(run))],
        )
        task = asyncio.create_task(runtime.run(install_signal_handlers=False))
        try:
            await asyncio.wait_for(started.wait(), 20)
            secret = cluster.store.get("secrets", "kube-system", certs.SECRET_NAME)
            assert secret is not None
            bundle = certs.CertificateBundle.from_secret(secret)
            # One replica created the Secret; the other read it.
            assert sum(replica.secret_store.created for replica in replicas if replica.secret_store) == 1
            client = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())
            for replica in replicas:
                assert await _one_request(replica.port, client) == _der(bundle.cert_pem)
            config = cluster.store.get(HOOKS, None, "vpa-webhook-config")
            assert config is not None
            assert base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"]) == bundle.ca_cert_pem
            # The API server verifies our self-managed certificate with the registered caBundle.
            vpa = {
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": {"name": "v", "namespace": "default"},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
            }
            created = await cluster.store.create(VPA, yaml.safe_load(yaml.safe_dump(vpa)))
            assert created["spec"]["updatePolicy"] == {"updateMode": "Recreate"}
        finally:
            runtime.stop_event.set()
            assert await asyncio.wait_for(task, 15) == 0


async def test_self_managed_certificate_is_renewed_and_swapped(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    policy = certs.SelfManagedPolicy(ca_valid_s=400 * 86_400, cert_valid_s=86_400, renew_before_s=2 * 86_400)
    async with (
        SimCluster(nodes=1, behaviour=False, webhook_services=dict(SERVICES)) as cluster,
        running_webhook(
            cluster,
            f"--tls-cert-file={missing / 'c'}",
            f"--tls-private-key={missing / 'k'}",
            secret_poll_s=0.05,
            self_managed_policy=policy,
        ) as controller,
    ):
        # A one-day certificate with a two-day renewal window is renewed at the next poll, every poll:
        # each renewal is served to new connections.
        assert controller.tls is not None
        await wait_for(lambda: controller.tls is not None and controller.tls.swaps >= 1, what="renewal")
        secret = cluster.store.get("secrets", "kube-system", certs.SECRET_NAME)
        assert secret is not None
        bundle = certs.CertificateBundle.from_secret(secret)
        client = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())
        served = await _one_request(controller.port, client)
        assert served in {_der(bundle.cert_pem), _der(controller.tls.cert_pem)}
