"""TLS material: Go cipher names, server contexts, live certificate swaps, self-managed bundles."""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest
from cryptography import x509

from vpa.kube import certificates as certs

NOW = time.time()
NAMES = certs.service_dns_names("vpa-webhook", "kube-system")


def _pair(names: tuple[str, ...] = NAMES) -> tuple[bytes, bytes, bytes]:
    ca, ca_key = certs.generate_ca(NOW, 86_400)
    cert, key = certs.generate_serving_cert(ca, ca_key, names, NOW, 3_600)
    return ca, cert, key


def test_service_dns_names() -> None:
    assert NAMES == (
        "vpa-webhook",
        "vpa-webhook.kube-system",
        "vpa-webhook.kube-system.svc",
        "vpa-webhook.kube-system.svc.cluster.local",
    )


def test_go_cipher_names_map_to_openssl_and_tls13_names_are_ignored() -> None:
    assert (
        certs.openssl_cipher_list(["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"])
        == "ECDHE-ECDSA-AES128-GCM-SHA256"
    )
    assert certs.openssl_cipher_list(["TLS_AES_256_GCM_SHA384"]) is None
    with pytest.raises(certs.CertificateError, match="unknown cipher suite"):
        certs.openssl_cipher_list(["TLS_FOO"])


@pytest.mark.parametrize(
    "ciphers", [(), ("TLS_AES_128_GCM_SHA256",)], ids=["no --tls-ciphers", "only TLS 1.3 names"]
)
def test_default_tls12_suites_are_go_defaults_without_cbc(ciphers: tuple[str, ...]) -> None:
    _, cert, key = _pair()
    ctx = certs.server_context(cert, key, ciphers=ciphers)
    tls12 = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    }
    assert "ECDHE-ECDSA-AES128-SHA256" not in tls12


def test_an_explicit_cipher_list_replaces_the_default() -> None:
    _, cert, key = _pair()
    ctx = certs.server_context(cert, key, ciphers=["TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"])
    tls12 = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES128-SHA256"}


def test_server_context_honours_min_version_and_rejects_a_foreign_key() -> None:
    _, cert, key = _pair()
    ctx = certs.server_context(cert, key, min_tls_version="tls1_3")
    assert ctx.minimum_version is ssl.TLSVersion.TLSv1_3
    _, _, other_key = _pair()
    with pytest.raises(certs.CertificateError):
        certs.server_context(cert, other_key)
    with pytest.raises(certs.CertificateError, match="min-tls-version"):
        certs.server_context(cert, key, min_tls_version="tls1_1")


async def _peer_cert(port: int, ca: bytes) -> bytes:
    client = ssl.create_default_context(cadata=ca.decode())
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=client, server_hostname="vpa-webhook.kube-system.svc"
    )
    sslobj = writer.get_extra_info("ssl_object")
    der: bytes = sslobj.getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return der


def _der(pem: bytes) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


async def test_rotating_context_serves_the_new_pair_to_new_handshakes() -> None:
    ca, cert1, key1 = _pair()
    ca_key_ca = certs.generate_ca(NOW, 86_400)
    # A second pair from a second CA: a client trusting only the first CA must then fail.
    cert2, key2 = certs.generate_serving_cert(ca_key_ca[0], ca_key_ca[1], NAMES, NOW, 3_600)
    rotating = certs.RotatingServerContext(cert1, key1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=rotating.listening)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await _peer_cert(port, ca) == _der(cert1)
        rotating.swap(cert2, key2)
        assert await _peer_cert(port, ca_key_ca[0]) == _der(cert2)
        with pytest.raises(ssl.SSLCertVerificationError):
            await _peer_cert(port, ca)
        # A bad pair is refused and the current one stays.
        with pytest.raises(certs.CertificateError):
            rotating.swap(cert1, key2)
        assert await _peer_cert(port, ca_key_ca[0]) == _der(cert2)
        assert rotating.swaps == 1
    finally:
        server.close()
        await server.wait_closed()


def test_bundle_round_trips_through_secret_data() -> None:
    bundle = certs.make_bundle(NAMES, NOW, certs.SelfManagedPolicy())
    secret = {"data": bundle.to_secret_data()}
    assert certs.CertificateBundle.from_secret(secret) == bundle
    with pytest.raises(certs.CertificateError):
        certs.CertificateBundle.from_secret({"data": {"caCert.pem": "!!"}})


def test_serving_cert_covers_the_service_names_and_chains_to_the_ca() -> None:
    bundle = certs.make_bundle(NAMES, NOW, certs.SelfManagedPolicy())
    cert = x509.load_pem_x509_certificate(bundle.cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert tuple(san.get_values_for_type(x509.DNSName)) == NAMES
    ca = x509.load_pem_x509_certificate(bundle.ca_cert_pem)
    cert.verify_directly_issued_by(ca)
    assert isinstance(cert.public_key().curve, type(ca.public_key().curve))  # type: ignore[union-attr]
    assert cert.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]


def test_renewal_is_due_before_expiry_or_when_a_name_is_missing() -> None:
    policy = certs.SelfManagedPolicy(
        ca_valid_s=1000 * 86_400, cert_valid_s=60 * 86_400, renew_before_s=10 * 86_400
    )
    bundle = certs.make_bundle(NAMES, NOW, policy)
    assert not certs.needs_renewal(bundle, NAMES, NOW, policy)
    assert certs.needs_renewal(bundle, NAMES, NOW + 51 * 86_400, policy)
    assert certs.needs_renewal(bundle, (*NAMES, "extra.example"), NOW, policy)
    # Renewing the serving certificate keeps a CA that stays valid long enough…
    renewed = certs.make_bundle(NAMES, NOW + 51 * 86_400, policy, previous=bundle)
    assert renewed.ca_cert_pem == bundle.ca_cert_pem
    assert renewed.cert_pem != bundle.cert_pem
    # …and a CA close to its end is replaced, the old one kept second in the bundle.
    late = NOW + 985 * 86_400
    rotated = certs.make_bundle(NAMES, late, policy, previous=bundle)
    cas = x509.load_pem_x509_certificates(rotated.ca_cert_pem)
    assert len(cas) == 2
    assert cas[1] == x509.load_pem_x509_certificate(bundle.ca_cert_pem)
    x509.load_pem_x509_certificate(rotated.cert_pem).verify_directly_issued_by(cas[0])
