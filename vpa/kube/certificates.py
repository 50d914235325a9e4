"""The webhook's TLS material: server contexts, rotation of certificate files, self-managed certificates.

Owns:
- `server_context` (an `ssl.SSLContext` from PEM bytes with `--min-tls-version` and `--tls-ciphers`, Go
  cipher-suite names translated to OpenSSL names; TLS 1.3 suites are not configurable, as in Go; without
  TLS 1.2 names, `DEFAULT_TLS12_CIPHERS`: ECDHE with AES-GCM or ChaCha20-Poly1305, never a CBC suite);
- `RotatingServerContext`: the context a listening socket is created with. Its SNI callback (called by
  OpenSSL for every ClientHello, with or without SNI) points each new connection at the *current*
  context, so swapping in a new certificate needs no restart and leaves open connections alone;
- `CertificateFiles`: the `--tls-cert-file` / `--tls-private-key` / `--client-ca-file` triple, with a
  fingerprint (inode, mtime, size of each) to poll for rotation — a Secret volume's `..data` symlink swap
  changes the inode;
- self-managed certificates: a CA and an EC P-256 serving certificate for the Service DNS names, kept in a
  Secret (`SecretCertificateStore`) so every replica serves the same pair: create-if-absent (the loser of a
  create race reads the winner's), renewal before expiry with a resourceVersion-guarded replace (again the
  loser reads the winner's). When the CA itself is renewed, the previous CA stays in the bundle so clients
  holding the old caBundle keep verifying until the webhook configuration is updated.

Must not: serve requests, know about admission, or register webhooks (that is `webhookregistering`).
Private keys never leave memory except through the Secret and the short-lived 0600 temporary file
`ssl.SSLContext.load_cert_chain` needs.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vpa.kube.client import ApiError, Conflict, KubeClient, NotFound, api_path
from vpa.model.clock import Clock

log = structlog.get_logger(__name__)

# Go (crypto/tls) cipher suite names → OpenSSL names, for `--tls-ciphers` with TLS 1.2.
GO_TO_OPENSSL_CIPHERS: Final[Mapping[str, str | None]] = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    # TLS 1.3 suites: always enabled; Go ignores them in CipherSuites, and so do we.
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}

# With no `--tls-ciphers`, TLS 1.2 offers only ECDHE key exchange with AEAD ciphers: the AES-GCM and
# ChaCha20-Poly1305 part of Go crypto/tls's default list (OpenSSL's own default would add CBC suites such as
# ECDHE-ECDSA-AES128-SHA256, which Go never offers by default).
DEFAULT_TLS12_CIPHERS: Final = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
)

SECRET_NAME: Final = "vpa-webhook-certs"
SECRET_KEYS: Final = ("caCert.pem", "caKey.pem", "serverCert.pem", "serverKey.pem")
DAY_S: Final = 86_400.0


class CertificateError(ValueError):
    """TLS material that cannot be used (missing file, key not matching the certificate, bad PEM)."""


# --------------------------------------------------------------------------------------- contexts


def openssl_cipher_list(go_names: Iterable[str]) -> str | None:
    """The OpenSSL cipher string for `--tls-ciphers`; None when only TLS 1.3 names (or none) were given."""
    names: list[str] = []
    for go_name in go_names:
        if go_name not in GO_TO_OPENSSL_CIPHERS:
            raise CertificateError(f"--tls-ciphers: unknown cipher suite {go_name!r}")
        openssl_name = GO_TO_OPENSSL_CIPHERS[go_name]
        if openssl_name is not None and openssl_name not in names:
            names.append(openssl_name)
    return ":".join(names) or None


def _tls_version(min_tls_version: str) -> ssl.TLSVersion:
    if min_tls_version == "tls1_2":
        return ssl.TLSVersion.TLSv1_2
    if min_tls_version == "tls1_3":
        return ssl.TLSVersion.TLSv1_3
    raise CertificateError(f"--min-tls-version must be tls1_2 or tls1_3, not {min_tls_version!r}")


def _base_context(min_tls_version: str, ciphers: Iterable[str]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _tls_version(min_tls_version)
    ctx.options |= ssl.OP_NO_COMPRESSION
    cipher_list = openssl_cipher_list(ciphers) or openssl_cipher_list(DEFAULT_TLS12_CIPHERS)
    if cipher_list is not None:
        try:
            ctx.set_ciphers(cipher_list)
        except ssl.SSLError as err:
            raise CertificateError(f"--tls-ciphers: this OpenSSL supports none of {cipher_list}") from err
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def server_context(
    cert_pem: bytes, key_pem: bytes, *, min_tls_version: str = "tls1_2", ciphers: Iterable[str] = ()
) -> ssl.SSLContext:
    """A server context serving `cert_pem` (leaf first, then any chain) with `key_pem`."""
    ctx = _base_context(min_tls_version, ciphers)
    # load_cert_chain only reads files: a private temporary directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="vpa-tls-") as tmp:
        cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as key_file:
            key_file.write(key_pem)
        cert_path.write_bytes(cert_pem)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except (ssl.SSLError, OSError) as err:
            raise CertificateError(f"cannot load the certificate and key: {err}") from err
    return ctx


class RotatingServerContext:
    """A listening context whose new connections are served by whatever context is current.

    `listening` goes to the server socket once; `swap(cert, key)` changes what the next handshakes present.
    The listening context is built like the served ones (OpenSSL takes protocol limits and ciphers from it,
    and wants a certificate on it before the SNI callback runs).
    """

    def __init__(
        self, cert_pem: bytes, key_pem: bytes, *, min_tls_version: str = "tls1_2", ciphers: Iterable[str] = ()
    ) -> None:
        self._min_tls_version = min_tls_version
        self._ciphers = tuple(ciphers)
        self.current = self._build(cert_pem, key_pem)
        self.cert_pem = cert_pem
        self.swaps = 0
        self.listening = self._build(cert_pem, key_pem)
        self.listening.sni_callback = self._pick

    def _build(self, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
        return server_context(cert_pem, key_pem, min_tls_version=self._min_tls_version, ciphers=self._ciphers)

    def _pick(self, sslobj: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> int | None:
        sslobj.context = self.current
        return None

    def swap(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Serve a new pair from the next handshake on; raises CertificateError (keeping the old one)."""
        self.current = self._build(cert_pem, key_pem)
        self.cert_pem = cert_pem
        self.swaps += 1


# --------------------------------------------------------------------------------------------- files


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    """`--tls-cert-file`, `--tls-private-key` and `--client-ca-file`."""

    cert_file: str
    key_file: str
    ca_file: str

    def exist(self) -> bool:
        return Path(self.cert_file).is_file() and Path(self.key_file).is_file()

    def fingerprint(self) -> tuple[tuple[int, int, int], ...]:
        """(inode, mtime_ns, size) of each file (zeros for a missing one); any change means "reload"."""
        out: list[tuple[int, int, int]] = []
        for path in (self.cert_file, self.key_file, self.ca_file):
            try:
                st = os.stat(path)
            except OSError:
                out.append((0, 0, 0))
            else:
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def read_pair(self) -> tuple[bytes, bytes]:
        try:
            return Path(self.cert_file).read_bytes(), Path(self.key_file).read_bytes()
        except OSError as err:
            raise CertificateError(f"cannot read the serving certificate or key: {err}") from err

    def read_ca(self) -> bytes:
        """The CA bundle for the webhook configuration; b"" when the file is absent or unreadable."""
        try:
            return Path(self.ca_file).read_bytes()
        except OSError:
            return b""


# -------------------------------------------------------------------------------- self-managed certs


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names the API server may use for a Service-backed webhook."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _when(timestamp: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC)


def generate_ca(now: float, valid_s: float, common_name: str = "vpa_webhook_ca") -> tuple[bytes, bytes]:
    """A self-signed EC P-256 CA: (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_when(now - 3600))
        .not_valid_after(_when(now + valid_s))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def generate_serving_cert(
    ca_cert_pem: bytes, ca_key_pem: bytes, dns_names: Iterable[str], now: float, valid_s: float
) -> tuple[bytes, bytes]:
    """An EC P-256 serving certificate for `dns_names`, signed by the (first) CA in `ca_cert_pem`."""
    names = list(dns_names)
    ca_cert = x509.load_pem_x509_certificates(ca_cert_pem)[0]
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise CertificateError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[-2] if len(names) > 1 else names[0])])
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_when(now - 3600))
        .not_valid_after(_when(min(now + valid_s, ca_cert.not_valid_after_utc.timestamp())))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def not_after(cert_pem: bytes) -> float:
    """Expiry (Unix seconds) of the first certificate in `cert_pem`."""
    return x509.load_pem_x509_certificates(cert_pem)[0].not_valid_after_utc.timestamp()


@dataclass(frozen=True, slots=True)
class CertificateBundle:
    """What the Secret holds. `ca_cert_pem` may hold two CAs (new first) right after a CA renewal."""

    ca_cert_pem: bytes
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def to_secret_data(self) -> dict[str, str]:
        values = (self.ca_cert_pem, self.ca_key_pem, self.cert_pem, self.key_pem)
        return {k: base64.b64encode(v).decode() for k, v in zip(SECRET_KEYS, values, strict=True)}

    @staticmethod
    def from_secret(secret: Mapping[str, Any]) -> CertificateBundle:
        data = secret.get("data")
        if not isinstance(data, Mapping):
            raise CertificateError("the certificate Secret has no data")
        try:
            values = [base64.b64decode(str(data[k]), validate=True) for k in SECRET_KEYS]
        except (KeyError, ValueError) as err:
            raise CertificateError(f"the certificate Secret lacks or garbles a key: {err}") from err
        return CertificateBundle(*values)


@dataclass(frozen=True, slots=True)
class SelfManagedPolicy:
    """Lifetimes. Renew the serving certificate when less than `renew_before_s` is left (the CA when less
    than twice that is left, so a renewed serving certificate never outlives its CA)."""

    ca_valid_s: float = 10 * 365 * DAY_S
    cert_valid_s: float = 365 * DAY_S
    renew_before_s: float = 30 * DAY_S


def make_bundle(
    dns_names: Iterable[str],
    now: float,
    policy: SelfManagedPolicy,
    previous: CertificateBundle | None = None,
) -> CertificateBundle:
    """A fresh bundle: a new serving certificate, reusing `previous`'s CA while it stays valid long enough,
    else a new CA with the old one kept second in the bundle (for clients still trusting only the old)."""
    names = tuple(dns_names)
    ca_cert_pem, ca_key_pem = b"", b""
    if previous is not None and not_after(previous.ca_cert_pem) - now > 2 * policy.renew_before_s:
        ca_cert_pem, ca_key_pem = previous.ca_cert_pem, previous.ca_key_pem
    if not ca_cert_pem:
        ca_cert_pem, ca_key_pem = generate_ca(now, policy.ca_valid_s)
        if previous is not None and not_after(previous.ca_cert_pem) > now:
            first_old = x509.load_pem_x509_certificates(previous.ca_cert_pem)[0]
            ca_cert_pem += first_old.public_bytes(serialization.Encoding.PEM)
    cert_pem, key_pem = generate_serving_cert(ca_cert_pem, ca_key_pem, names, now, policy.cert_valid_s)
    return CertificateBundle(ca_cert_pem, ca_key_pem, cert_pem, key_pem)


def needs_renewal(
    bundle: CertificateBundle, dns_names: Iterable[str], now: float, policy: SelfManagedPolicy
) -> bool:
    """True when the serving certificate expires within `renew_before_s` or misses one of `dns_names`."""
    try:
        cert = x509.load_pem_x509_certificates(bundle.cert_pem)[0]
        sans = set(
            cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
                x509.DNSName
            )
        )
    except (ValueError, x509.ExtensionNotFound):
        return True
    if not set(dns_names) <= sans:
        return True
    return cert.not_valid_after_utc.timestamp() - now < policy.renew_before_s


class SecretCertificateStore:
    """Self-managed certificates shared through one Secret, so every replica serves the same pair."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        namespace: str,
        service: str,
        name: str = SECRET_NAME,
        policy: SelfManagedPolicy | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self.namespace = namespace
        self.name = name
        self.dns_names = service_dns_names(service, namespace)
        self.policy = policy or SelfManagedPolicy()
        self.created = 0  # Secrets this instance created or replaced (tests and logs)

    def _path(self, name: str | None = None) -> str:
        return api_path("", "v1", "secrets", namespace=self.namespace, name=name)

    def _secret(self, bundle: CertificateBundle, resource_version: str | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "vpa-admission-controller"},
        }
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": "Opaque",
            "data": bundle.to_secret_data(),
        }

    async def ensure(self) -> CertificateBundle:
        """The current bundle: read it, create it if absent, renew it if due. Races resolve to the winner."""
        for _ in range(5):
            try:
                secret = await self._client.get(self._path(self.name))
            except NotFound:
                # Key generation and signing off the event loop: CPU work the caches' LISTs would wait behind.
                bundle = await asyncio.to_thread(make_bundle, self.dns_names, self._clock.now(), self.policy)
                try:
                    await self._client.create(self._path(), self._secret(bundle), max_retries=2)
                except Conflict:
                    log.info("certificate Secret created by another replica; using theirs", secret=self.name)
                    continue
                self.created += 1
                log.info("created self-managed webhook certificates", secret=f"{self.namespace}/{self.name}")
                return bundle
            try:
                current: CertificateBundle | None = CertificateBundle.from_secret(secret)
            except CertificateError as err:
                log.warning("certificate Secret unusable; replacing it", error=str(err))
                current = None
            now = self._clock.now()
            if current is not None and not needs_renewal(current, self.dns_names, now, self.policy):
                return current
            bundle = await asyncio.to_thread(make_bundle, self.dns_names, now, self.policy, previous=current)
            rv = str((secret.get("metadata") or {}).get("resourceVersion") or "")
            try:
                await self._client.replace(self._path(self.name), self._secret(bundle, rv), max_retries=2)
            except Conflict:
                log.info("certificate Secret renewed by another replica; using theirs", secret=self.name)
                continue
            self.created += 1
            log.info("renewed self-managed webhook certificates", secret=f"{self.namespace}/{self.name}")
            return bundle
        raise ApiError(
            409, "Conflict", f"could not settle the certificate Secret {self.namespace}/{self.name}"
        )
