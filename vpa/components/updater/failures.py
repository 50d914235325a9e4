"""How a failed updater pass is logged: an API outage is expected, a bug is not.

Owns: `log_pass_failure`, for the loop, the prompt pass and the unboost pass. A failure the API's state
explains — no answer (connection refused or reset, a timeout), a 5xx, a 429, a 409, the authorizer's 403
for a few seconds after a kube-apiserver restart, or a pass that ran out of time — is one warning line with
the error and no traceback: during an outage it comes every pass, and the stack says nothing the error does
not. Anything else keeps its traceback at error level.

Must not: retry, swallow `CancelledError`, or decide what a pass does next.
"""

from __future__ import annotations

import structlog

from vpa.kube.errors import ApiError
from vpa.kube.leasing import DeadlineExceeded

log = structlog.get_logger(__name__)


def expected_failure(error: BaseException) -> bool:
    """True for a failure an API outage or restart explains (see the module docstring)."""
    if isinstance(error, DeadlineExceeded | TimeoutError | ConnectionError):
        return True
    if isinstance(error, ApiError):
        status = error.status
        return status == 0 or status >= 500 or status in (409, 429) or error.is_unauthorized
    return False


def log_pass_failure(event: str, error: Exception) -> None:
    """Log a pass that raised `error` (call from its `except` block): a warning line for an expected
    failure, the traceback at error level for anything else."""
    if expected_failure(error):
        log.warning(event, error=f"{type(error).__name__}: {error}")
    else:
        log.exception(event)
