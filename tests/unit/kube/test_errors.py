"""`ApiError.is_unauthorized`: the authorizer's 403 about the caller, not an admission plugin's."""

from __future__ import annotations

import pytest

from vpa.kube.errors import ApiError

RBAC = ('pods "web-1" is forbidden: User "system:serviceaccount:kube-system:vpa" cannot patch resource '
        '"pods/resize" in API group "" in the namespace "default"')


@pytest.mark.parametrize(
    ("status", "message", "unauthorized"),
    [
        (403, RBAC, True),
        (403, 'pods is forbidden: User "x" cannot list resource "pods" in API group ""', True),
        # An admission plugin's refusal of this request, not of the caller.
        (403, "Pod resize cannot be applied: the node cannot hold it", False),
        (403, 'pods "web-1" is forbidden: exceeded quota: compute', False),
        (404, RBAC, False),
        (0, "connection refused", False),
    ],
)
def test_only_the_authorizers_403_is_unauthorized(status: int, message: str, unauthorized: bool) -> None:
    assert ApiError(status, "Forbidden", message).is_unauthorized is unauthorized
