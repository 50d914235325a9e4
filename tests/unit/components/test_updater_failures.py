"""How a failed updater pass is logged: an API outage is one warning line, a bug keeps its traceback."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from vpa.components.updater.failures import expected_failure, log_pass_failure
from vpa.kube.errors import ApiError, Conflict, ServerError, TooManyRequests, TransportError
from vpa.kube.leasing import DeadlineExceeded

REFUSED = "PATCH /api/v1/namespaces/default/pods/web-1/resize: ClientConnectorError: Connection refused"
RBAC = 'pods "web-1" is forbidden: User "system:serviceaccount:kube-system:vpa" cannot patch resource "pods"'


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TransportError(REFUSED), True),
        (ServerError(503, "ServiceUnavailable", "etcdserver: leader changed"), True),
        (ServerError(500, "InternalError", "Internal error occurred"), True),
        (TooManyRequests(429, "TooManyRequests", "too many requests"), True),
        (Conflict(409, "Conflict", "the object has been modified"), True),
        (ApiError(403, "Forbidden", RBAC), True),  # the authorizer, for a few seconds after a restart
        (DeadlineExceeded("API call exceeded 60.000 s"), True),
        (TimeoutError(), True),
        (ConnectionRefusedError(111, "Connection refused"), True),
        (ApiError(422, "Invalid", "spec.containers[0].resources: Invalid value"), False),
        (ApiError(403, "Forbidden", "admission webhook denied the request"), False),
        (ApiError(404, "NotFound", 'pods "web-1" not found'), False),
        (KeyError("uid"), False),
        (ValueError("bad"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_expected_failures_are_a_warning_line_and_bugs_keep_the_traceback(
    error: Exception, expected: bool
) -> None:
    assert expected_failure(error) is expected
    with capture_logs() as logs:
        try:
            raise error
        except Exception as err:
            log_pass_failure("updater_prompt_pass_failed", err)
    (entry,) = logs
    assert entry["event"] == "updater_prompt_pass_failed"
    if expected:
        assert entry["log_level"] == "warning"
        assert "exc_info" not in entry
        assert entry["error"] == f"{type(error).__name__}: {error}"
    else:
        assert entry["log_level"] == "error"
        assert entry["exc_info"] is True
