"""Certificates and the kubeconfig for the simulated API server.

Owns: generating throwaway CAs and EC P-256 certificates signed by them (serving certificates for
127.0.0.1/localhost, client certificates for the real control plane's components), building the
server's `ssl.SSLContext`, and writing a kubeconfig (certificate-authority-data + a bearer token) that
kubectl and kubernetes-asyncio accept.

Must not: serve anything or read files other than the ones it writes.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True, slots=True)
class ServingCerts:
    ca_cert_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as d:
            cert = Path(d, "tls.crt")
            key = Path(d, "tls.key")
            cert.write_bytes(self.cert_pem + self.ca_cert_pem)
            key.write_bytes(self.key_pem)
            ctx.load_cert_chain(cert, key)
        return ctx


@dataclass(frozen=True)
class CertificateAuthority:
    """A throwaway CA: its key signs the certificates `issue` makes."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def new_ca(common_name: str) -> CertificateAuthority:
    """A self-signed EC P-256 CA valid for ten years."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return CertificateAuthority(ca_key, ca_cert)


def issue(
    ca: CertificateAuthority,
    common_name: str,
    hosts: tuple[str, ...] = (),
    *,
    client: bool = False,
    organizations: tuple[str, ...] = (),
) -> tuple[bytes, bytes]:
    """A leaf certificate signed by `ca`: (cert PEM, PKCS#8 key PEM). Serving unless `client`."""
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def generate_certs(
    common_name: str = "vpa-sim", hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
) -> ServingCerts:
    ca = new_ca(f"{common_name}-ca")
    cert_pem, key_pem = issue(ca, common_name, hosts)
    return ServingCerts(ca_cert_pem=ca.cert_pem, cert_pem=cert_pem, key_pem=key_pem)


def kubeconfig_text(url: str, ca_cert_pem: bytes, token: str = "vpa-sim-token", name: str = "vpa-sim") -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca_cert_pem).decode(),
                },
            }
        ],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write_kubeconfig(
    path: Path, url: str, ca_cert_pem: bytes, token: str = "vpa-sim-token", name: str = "vpa-sim"
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(kubeconfig_text(url, ca_cert_pem, token, name))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path
