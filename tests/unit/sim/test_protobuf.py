"""The protobuf request-body decoder on the kinds client-go controllers write (Leases, webhook
configurations, Events): bodies are encoded here by hand with field numbers from k8s.io/api's
generated.proto, so a wrong generated table fails the test."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from vpa.sim.apiserver import protobuf


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _v(num: int, value: int) -> bytes:
    return _varint(num << 3) + _varint(value)


def _b(num: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return _varint(num << 3 | 2) + _varint(len(raw)) + raw


def _body(api_version: str, kind: str, message: bytes) -> bytes:
    type_meta = _b(1, api_version) + _b(2, kind)
    return protobuf.MAGIC + _b(1, type_meta) + _b(2, message)


def _meta(name: str, namespace: str = "", **labels: str) -> bytes:
    out = _b(1, name) + (_b(3, namespace) if namespace else b"")
    for k, val in labels.items():
        out += _b(11, _b(1, k) + _b(2, val))
    return out


def test_lease_with_micro_times_and_an_explicit_zero_pointer() -> None:
    renew = _v(1, 1_767_225_601) + _v(2, 123_456_789)  # MicroTime: seconds, nanos
    spec = _b(1, "vpa-admission-controller") + _v(2, 0) + _b(4, renew) + _v(5, 3)
    lease = _meta("vpa-admission-controller", "kube-system") + b""
    body = _body("coordination.k8s.io/v1", "Lease", _b(1, lease) + _b(2, spec))
    assert protobuf.decode(body) == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vpa-admission-controller", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": "vpa-admission-controller",
            "leaseDurationSeconds": 0,  # a pointer: an explicit zero is kept
            "renewTime": "2026-01-01T00:00:01.123456Z",
            "leaseTransitions": 3,
        },
    }


def test_mutating_webhook_configuration_with_inline_rules_and_bytes() -> None:
    service = _b(1, "kube-system") + _b(2, "vpa-webhook") + _v(4, 443)
    client = _b(1, service) + _b(2, b"\x00PEM\xff")
    rule = _b(1, "") + _b(2, "v1") + _b(3, "pods")  # Rule: apiGroups, apiVersions, resources
    rule_with_ops = _b(1, "CREATE") + _b(2, rule)  # operations, then the inlined Rule
    hook = (
        _b(1, "vpa.k8s.io")
        + _b(2, client)
        + _b(3, rule_with_ops)
        + _b(4, "Ignore")
        + _b(6, "None")
        + _v(7, 30)
        + _b(8, "v1")
        + _b(5, b"")  # namespaceSelector: an empty pointer message stays an empty object
    )
    body = _body(
        "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", _b(1, _meta("vpa")) + _b(2, hook)
    )
    obj = protobuf.decode(body)
    assert obj["webhooks"] == [
        {
            "name": "vpa.k8s.io",
            "clientConfig": {
                "service": {"namespace": "kube-system", "name": "vpa-webhook", "port": 443},
                "caBundle": base64.b64encode(b"\x00PEM\xff").decode(),
            },
            "rules": [
                {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
            ],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": 30,
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": {},
        }
    ]


def test_core_and_events_api_events() -> None:
    involved = _b(1, "Pod") + _b(2, "default") + _b(3, "web-1") + _b(5, "v1")
    first = _v(1, 1_767_225_600)
    core = (
        _b(1, _meta("web-1.abc", "default"))
        + _b(2, involved)
        + _b(3, "EvictedByVPA")
        + _b(4, "Pod was evicted")
        + _b(5, _b(1, "vpa-updater"))
        + _b(6, first)
        + _b(7, first)
        + _v(8, 1)
        + _b(9, "Normal")
        + _b(10, b"")  # eventTime unset: Go writes an empty message, JSON has none
        + _b(14, "")
        + _b(15, "")
    )
    assert protobuf.decode(_body("v1", "Event", core)) == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web-1.abc", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1", "apiVersion": "v1"},
        "reason": "EvictedByVPA",
        "message": "Pod was evicted",
        "source": {"component": "vpa-updater"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
        "reportingComponent": "",  # no omitempty upstream
        "reportingInstance": "",
    }
    new = (
        _b(1, _meta("web-1.def", "default"))
        + _b(2, _v(1, 1_767_225_600) + _v(2, 5_000))
        + _b(4, "vpa-updater")
        + _b(7, "InPlaceResizedByVPA")
        + _b(8, involved)
        + _b(10, "resized")
        + _b(11, "Normal")
    )
    obj = protobuf.decode(_body("events.k8s.io/v1", "Event", new))
    assert obj["eventTime"] == "2026-01-01T00:00:00.000005Z"
    assert obj["regarding"]["name"] == "web-1"
    assert obj["note"] == "resized"
    assert (obj["reportingController"], obj["reason"], obj["type"]) == (
        "vpa-updater",
        "InPlaceResizedByVPA",
        "Normal",
    )


def test_pod_inline_volume_source_quantities_and_repeated_integers() -> None:
    volume = _b(1, "scratch") + _b(2, _b(2, _b(2, _b(1, "64Mi"))))  # VolumeSource.emptyDir.sizeLimit
    requests = _b(2, _b(1, "cpu") + _b(2, _b(1, "250m")))
    container = _b(1, "app") + _b(2, "nginx") + _b(8, requests)
    security = _v(4, 1000) + _v(4, 2000)  # supplementalGroups, one element per field
    packed = _b(4, _varint(3000) + _varint(4000))  # ...or packed
    spec = _b(1, volume) + _b(2, container) + _b(14, security + packed)
    pod: dict[str, Any] = protobuf.decode(
        _body("v1", "Pod", _b(1, _meta("p", "default", app="web")) + _b(2, spec))
    )
    assert pod["metadata"] == {"name": "p", "namespace": "default", "labels": {"app": "web"}}
    assert pod["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert pod["spec"]["containers"] == [
        {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "250m"}}}
    ]
    assert pod["spec"]["securityContext"] == {"supplementalGroups": [1000, 2000, 3000, 4000]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_body("coordination.k8s.io/v1", "Lease", _b(2, _v(99, 1))), "field 99"),
        (_body("example.com/v1", "Widget", b""), "example.com/v1 Widget"),
        (b"{}", "magic"),
        (_body("v1", "ConfigMap", _b(1, b"\x0a\x05ab")), "truncated"),
    ],
)
def test_undecodable_bodies_say_why(body: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError, match=message):
        protobuf.decode(body)


def test_every_kind_a_vpa_controller_writes_is_covered() -> None:
    kinds = protobuf.kinds()
    for kind in [
        ("coordination.k8s.io/v1", "Lease"),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        ("v1", "Event"),
        ("events.k8s.io/v1", "Event"),
        ("v1", "Pod"),
        ("policy/v1", "Eviction"),
        ("coordination.k8s.io/v1", "DeleteOptions"),
    ]:
        assert kind in kinds, kind
