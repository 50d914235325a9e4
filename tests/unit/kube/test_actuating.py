"""How the updater's writes are classified (`vpa.kube.actuating`): pure, no API server."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from vpa.kube.actuating import (
    Outcome,
    classify_eviction_error,
    classify_resize_error,
    eviction_body,
    has_cause,
    pod_path,
)
from vpa.kube.client import ApiError


def _error(status: int, causes: list[dict[str, Any]] | None = None) -> ApiError:
    body: dict[str, Any] = {"kind": "Status", "status": "Failure", "code": status, "message": "m"}
    if causes is not None:
        body["details"] = {"name": "web", "kind": "pods", "causes": causes}
    return ApiError.from_response(status, orjson.dumps(body))


@pytest.mark.parametrize(
    ("status", "causes", "expected"),
    [
        (403, [{"reason": "NodeCapacity", "message": "cpu"}], Outcome.INFEASIBLE),
        (403, [{"type": "NodeCapacity"}], Outcome.INFEASIBLE),
        (403, [{"type": "UnsupportedPlatform", "message": "windows"}], Outcome.INFEASIBLE),
        (403, [{"reason": "FieldValueForbidden"}], Outcome.REJECTED),
        (403, None, Outcome.REJECTED),
        (422, [{"reason": "FieldValueInvalid", "field": "spec.containers[0].resources"}], Outcome.REJECTED),
        (409, None, Outcome.REJECTED),
        (404, None, Outcome.GONE),
        (500, None, Outcome.FAILED),
        (503, None, Outcome.FAILED),
        (429, None, Outcome.FAILED),
        (0, None, Outcome.FAILED),
    ],
    ids=[
        "403-node-capacity",
        "403-node-capacity-as-type",
        "403-unsupported-platform",
        "403-other-cause",
        "403-no-cause",
        "422-invalid",
        "409-conflict",
        "404-gone",
        "500-transient",
        "503-transient",
        "429-transient",
        "no-answer",
    ],
)
def test_resize_errors(status: int, causes: list[dict[str, Any]] | None, expected: Outcome) -> None:
    assert classify_resize_error(_error(status, causes)) is expected


def test_a_resize_the_authorizer_refuses_is_retried_not_evicted_for() -> None:
    # RBAC answers so for a few seconds after a kube-apiserver restart: a failure of the caller, not a
    # refusal of the resize, so InPlaceOrRecreate must not fall back to eviction.
    message = (
        'pods "web" is forbidden: User "system:serviceaccount:kube-system:vpa" cannot patch resource '
        '"pods/resize" in API group "" in the namespace "default"'
    )
    body = {"kind": "Status", "status": "Failure", "code": 403, "reason": "Forbidden", "message": message,
            "details": {"name": "web", "kind": "pods"}}
    assert classify_resize_error(ApiError.from_response(403, orjson.dumps(body))) is Outcome.FAILED


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, Outcome.BLOCKED), (404, Outcome.GONE), (409, Outcome.REJECTED), (500, Outcome.FAILED)],
    ids=["429-pdb", "404-gone", "409-uid-precondition", "500"],
)
def test_eviction_errors(status: int, expected: Outcome) -> None:
    assert classify_eviction_error(_error(status)) is expected


def test_has_cause_tolerates_malformed_details() -> None:
    error = _error(403)
    error.body["details"] = {"causes": "NodeCapacity"}
    assert not has_cause(error, "NodeCapacity")
    error.body["details"] = ["NodeCapacity"]
    assert not has_cause(error, "NodeCapacity")


def test_eviction_body_carries_the_uid_precondition() -> None:
    assert eviction_body("ns", "web-1", "u-1") == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": "ns"},
        "deleteOptions": {"preconditions": {"uid": "u-1"}},
    }
    assert "deleteOptions" not in eviction_body("ns", "web-1")


def test_pod_paths() -> None:
    assert pod_path("ns", "web-1", "resize") == "/api/v1/namespaces/ns/pods/web-1/resize"
    assert pod_path("ns", "web-1", "eviction") == "/api/v1/namespaces/ns/pods/web-1/eviction"
    assert pod_path("ns", "web-1") == "/api/v1/namespaces/ns/pods/web-1"
