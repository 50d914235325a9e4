"""Start-up checks of `vpa run` that come before any side effect: nothing is written to the cluster (the
certificate Secret, the webhook configuration, Leases, Events) until they pass.

Owns: checking that the kubeconfig kubectl would use loads and has the context asked for; that the
metrics/health address and the webhook port can be bound (each bound and released at once); and that
certificate files given with `--tls-cert-file` / `--tls-private-key` / `--client-ca-file` exist and are
PEM a TLS server can load. Each failure is a `StartupError`: one line naming the flag and the file.

Must not: connect to the API server, keep a socket open, or write anything.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from vpa.kube import kubeconfig as kubeconfigs
from vpa.model.settings import AdmissionSettings, RunSettings, StartupError, parse_host_port

_DEFAULTS = AdmissionSettings()


def check(settings: RunSettings) -> None:
    """All checks, cheapest first; raises StartupError on the first problem."""
    check_kubeconfig(settings)
    host, port = parse_host_port(settings.address)
    check_port("--address", settings.address, host, port)
    if settings.runs("admission-controller"):
        check_port("--port", str(settings.admission.port), host, settings.admission.port)
        check_certificate_files(settings.admission)


def check_kubeconfig(settings: RunSettings) -> None:
    common = settings.common
    choice = kubeconfigs.choose(common.kubeconfig, common.kubeconfig_env, common.default_kubeconfig)
    if choice.in_cluster:
        return  # the in-cluster configuration is read (and its failure reported) when the client is built
    try:
        kubeconfigs.load(choice, common.context)
    except kubeconfigs.KubeconfigError as err:
        raise StartupError(str(err)) from None


def check_port(flag: str, given: str, host: str, port: int) -> None:
    """Bind `host:port` and release it: taken or not allowed is a StartupError naming `flag`."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As the servers bind (aiohttp sets SO_REUSEADDR): a port in TIME_WAIT is free, a listening one not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
        except OSError as err:
            raise StartupError(f"{flag} {given}: cannot listen: {err.strerror or err}") from None


def _given(admission: AdmissionSettings) -> bool:
    """The certificate flags were set (not upstream's in-cluster default paths): their files must exist."""
    return (admission.tls_cert_file, admission.tls_private_key) != (
        _DEFAULTS.tls_cert_file, _DEFAULTS.tls_private_key)


def _holds(path: str, marker: str) -> bool:
    try:
        return marker.encode() in Path(path).read_bytes()
    except OSError:
        return False


def check_certificate_files(admission: AdmissionSettings) -> None:
    """Given files must exist; existing files must be a PEM certificate and its key (and a PEM CA)."""
    cert, key, ca = admission.tls_cert_file, admission.tls_private_key, admission.client_ca_file
    files = {"--tls-cert-file": cert, "--tls-private-key": key}
    present = {flag: path for flag, path in files.items() if Path(path).is_file()}
    if not present:
        if _given(admission):
            raise StartupError(
                f"--tls-cert-file {cert} / --tls-private-key {key}: no such files (give existing PEM files, "
                "or neither flag for self-managed certificates)")
        return  # self-managed certificates, or the webhook's own "one is missing" error
    for flag, path in files.items():
        if flag not in present:
            raise StartupError(f"{flag} {path}: no such file")
    for flag, path, marker, what in (
        ("--tls-cert-file", cert, "-----BEGIN CERTIFICATE-----", "a PEM certificate"),
        ("--tls-private-key", key, "PRIVATE KEY-----", "a PEM private key"),
    ):
        if not _holds(path, marker):
            raise StartupError(f"{flag} {path}: not {what}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError, ValueError):
        raise StartupError(
            f"--tls-cert-file {cert} / --tls-private-key {key}: the key does not load with the certificate "
            "(not its key, encrypted, or malformed PEM)") from None
    if not Path(ca).is_file():
        if ca != _DEFAULTS.client_ca_file:
            raise StartupError(f"--client-ca-file {ca}: no such file")
        return
    try:
        context.load_verify_locations(cafile=ca)
    except (ssl.SSLError, OSError, ValueError):
        raise StartupError(f"--client-ca-file {ca}: not a PEM certificate") from None
