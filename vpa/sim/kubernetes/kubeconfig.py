"""Reading a kubeconfig for `vpa sim agent`: the current context's server, CA and credentials.

Owns: resolving `current-context` (or a named one) to its cluster and user, and reading the server URL, the
CA (`certificate-authority-data` or `certificate-authority`), and a bearer token (`token`, `tokenFile`) or a
client certificate (`client-certificate(-data)` with `client-key(-data)`), relative paths resolved against
the kubeconfig's folder. Errors are `ValueError`s naming the file and what is missing.

Must not: run exec plugins or auth providers (a laptop's kubeconfig for a real control plane has neither).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_pem: bytes | None
    token: str | None
    client_cert: tuple[bytes, bytes] | None


def _named(doc: dict[str, Any], section: str, name: str, path: Path) -> dict[str, Any]:
    for entry in doc.get(section) or []:
        if entry.get("name") == name:
            value: dict[str, Any] = entry.get(section.rstrip("s")) or {}
            return value
    raise ValueError(f"{path}: no {section.rstrip('s')} named {name!r}")


def _data_or_file(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    data = entry.get(f"{key}-data")
    if data:
        return base64.b64decode(str(data))
    file = entry.get(key)
    if file:
        return (base / str(file)).read_bytes()
    return None


def load(path: Path, context: str | None = None) -> Credentials:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: cannot read the kubeconfig ({err})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a kubeconfig")
    name = context or doc.get("current-context")
    if not name:
        raise ValueError(f"{path}: no current-context (name one with --context)")
    ctx = _named(doc, "contexts", name, path)
    cluster = _named(doc, "clusters", str(ctx.get("cluster")), path)
    user = _named(doc, "users", str(ctx.get("user")), path)
    server = cluster.get("server")
    if not server:
        raise ValueError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
    base = path.parent
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    cert = _data_or_file(user, "client-certificate", base)
    key = _data_or_file(user, "client-key", base)
    if not token and not (cert and key):
        raise ValueError(f"{path}: user {ctx.get('user')!r} has neither a token nor a client certificate")
    return Credentials(
        server=str(server),
        ca_pem=_data_or_file(cluster, "certificate-authority", base),
        token=str(token) if token else None,
        client_cert=(cert, key) if cert and key else None,
    )
