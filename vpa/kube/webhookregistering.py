"""Self-registration of the admission webhook: the `MutatingWebhookConfiguration` `vpa-webhook-config`.

Owns: `webhook_configuration` (the object, field by field as upstream's `selfRegistration`, spec §5.1) and
`register_webhook` (create it when absent; otherwise **replace it in place** with the stored
resourceVersion, keeping its uid — upstream deletes and recreates it, which opens a window in which pods
are admitted without the webhook). A CA change is the same call with the new bundle.

Decisions that differ from upstream:
- `namespaceSelector`: ignored namespaces → `kubernetes.io/metadata.name NotIn [...]`; none ignored and
  `--vpa-object-namespace` set → `In [<ns>]`; neither → no selector (upstream's empty-string split always
  produced `NotIn [""]`, spec §11.10);
- `--register-by-url`: `https://` is prefixed when `--webhook-address` has no scheme (upstream pastes
  `<address>:<port>` verbatim, which the API server rejects without a scheme).

Must not: serve, generate certificates, or read files (the caller passes the CA bundle bytes).
"""

from __future__ import annotations

import base64
from typing import Any, Final

import structlog

from vpa.kube.client import Conflict, KubeClient, NotFound, api_path
from vpa.model.settings import AdmissionSettings, CommonSettings

log = structlog.get_logger(__name__)

CONFIG_NAME: Final = "vpa-webhook-config"
WEBHOOK_NAME: Final = "vpa.k8s.io"
NAMESPACE_LABEL: Final = "kubernetes.io/metadata.name"
_GROUP, _VERSION, _PLURAL = "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"


def configuration_path(name: str | None = None) -> str:
    return api_path(_GROUP, _VERSION, _PLURAL, name=name)


def namespace_selector(common: CommonSettings) -> dict[str, Any] | None:
    ignored = [ns for ns in common.ignored_vpa_object_namespaces if ns]
    if ignored:
        return {"matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "NotIn", "values": ignored}]}
    if common.vpa_object_namespace:
        return {
            "matchExpressions": [
                {"key": NAMESPACE_LABEL, "operator": "In", "values": [common.vpa_object_namespace]}
            ]
        }
    return None


def client_config(admission: AdmissionSettings, ca_bundle: bytes) -> dict[str, Any]:
    config: dict[str, Any]
    if admission.register_by_url:
        address = admission.webhook_address
        if "://" not in address:
            address = "https://" + address
        config = {"url": f"{address}:{admission.webhook_port}" if admission.webhook_port else address}
    else:
        config = {
            "service": {"namespace": admission.webhook_service_namespace, "name": admission.webhook_service}
        }
    if ca_bundle:
        config["caBundle"] = base64.b64encode(ca_bundle).decode()
    return config


def webhook_configuration(
    admission: AdmissionSettings, common: CommonSettings, ca_bundle: bytes
) -> dict[str, Any]:
    """The `MutatingWebhookConfiguration` this admission controller registers."""
    webhook: dict[str, Any] = {
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": ["autoscaling.k8s.io"],
                "apiVersions": ["*"],
                "resources": ["verticalpodautoscalers"],
            },
        ],
        "clientConfig": client_config(admission, ca_bundle),
        "failurePolicy": "Fail" if admission.webhook_failure_policy_fail else "Ignore",
        "sideEffects": "None",
        "timeoutSeconds": admission.webhook_timeout_seconds,
    }
    selector = namespace_selector(common)
    if selector is not None:
        webhook["namespaceSelector"] = selector
    metadata: dict[str, Any] = {"name": CONFIG_NAME}
    if admission.webhook_labels:
        metadata["labels"] = dict(admission.webhook_labels)
    return {
        "apiVersion": f"{_GROUP}/{_VERSION}",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [webhook],
    }


def registered_ca_bundle(config: dict[str, Any]) -> bytes:
    """The caBundle of webhook `vpa.k8s.io` in a stored configuration (b"" if none)."""
    for webhook in config.get("webhooks") or []:
        if isinstance(webhook, dict) and webhook.get("name") == WEBHOOK_NAME:
            raw = (webhook.get("clientConfig") or {}).get("caBundle")
            if isinstance(raw, str) and raw:
                return base64.b64decode(raw)
    return b""


async def register_webhook(
    client: KubeClient, desired: dict[str, Any], *, attempts: int = 5
) -> dict[str, Any]:
    """Create `desired` when absent, else replace the stored object in place (uid kept); returns the stored.

    The stored object's other labels are replaced too: the object is ours, its content is the flags'.
    Conflicts (another replica writing at the same moment) are retried with a fresh read.
    """
    name = desired["metadata"]["name"]
    last: Conflict | None = None
    for _ in range(attempts):
        try:
            current = await client.get(configuration_path(name))
        except NotFound:
            try:
                created = await client.create(configuration_path(), desired)
            except Conflict as err:  # created by another replica meanwhile: replace theirs
                last = err
                continue
            log.info("registered the webhook configuration", name=name)
            return created
        body = dict(desired)
        metadata = dict(desired["metadata"])
        metadata["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion", "")
        body["metadata"] = metadata
        try:
            replaced = await client.replace(configuration_path(name), body)
        except Conflict as err:
            last = err
            continue
        log.info("updated the webhook configuration in place", name=name)
        return replaced
    assert last is not None
    raise last
