"""The errors the Kubernetes API client raises: `ApiError` for every non-2xx answer, a subclass for each
answer a caller acts on (404 `NotFound`, 409 `Conflict`, 410 `Gone`, 429 `TooManyRequests`, 5xx
`ServerError`) and `TransportError` (status 0) when no answer came at all, each with the server's reason,
message, `Status` body and `Retry-After` (header, else the body's `details.retryAfterSeconds`).

Must not: send requests or decide retries (`vpa.kube.client` does both).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

_AUTHORIZER_REFUSAL: Final = re.compile(r" cannot [a-z]+ resource ")
"""The authorizer's wording: `User "..." cannot <verb> resource "<resource>" in API group ...`."""


class ApiError(Exception):
    """A non-2xx answer from the API server (or, with status 0, no answer at all)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: dict[str, Any] | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body: dict[str, Any] = body if body is not None else {}
        self.retry_after_s = retry_after_s

    @property
    def is_not_found(self) -> bool:
        return self.status == 404

    @property
    def is_conflict(self) -> bool:
        return self.status == 409

    @property
    def is_gone(self) -> bool:
        return self.status == 410

    @property
    def is_too_many_requests(self) -> bool:
        return self.status == 429

    @property
    def is_server_error(self) -> bool:
        return self.status >= 500

    @property
    def is_unauthorized(self) -> bool:
        """A 403 from the authorizer about the caller (`User "..." cannot patch resource "pods/resize"`), not
        an admission plugin's refusal of the request: RBAC answers so for a few seconds after a
        kube-apiserver restart, as well as when the role lacks the verb."""
        return self.status == 403 and _AUTHORIZER_REFUSAL.search(self.message) is not None

    @property
    def is_transport(self) -> bool:
        return self.status == 0

    @staticmethod
    def from_response(status: int, raw: bytes, headers: Mapping[str, str] | None = None) -> ApiError:
        """Build the most specific error for an HTTP answer whose body is (usually) a `Status`."""
        body: dict[str, Any] = {}
        if raw:
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                body = parsed
        reason = str(body.get("reason") or _DEFAULT_REASONS.get(status, "Unknown"))
        message = str(body.get("message") or (raw[:200].decode("utf-8", "replace") if raw else reason))
        retry_after = _retry_after_s(headers, body)
        cls: type[ApiError] = ApiError
        if status == 404:
            cls = NotFound
        elif status == 409:
            cls = Conflict
        elif status == 410:
            cls = Gone
        elif status == 429:
            cls = TooManyRequests
        elif status >= 500:
            cls = ServerError
        return cls(status, reason, message, body, retry_after_s=retry_after)


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: stale resourceVersion on update, or AlreadyExists on create."""


class Gone(ApiError):
    """410: the resourceVersion (or continue token) is too old; the caller must LIST afresh."""


class TooManyRequests(ApiError):
    """429: throttled by the API server (or a PodDisruptionBudget refused an eviction)."""


class ServerError(ApiError):
    """5xx."""


class TransportError(ApiError):
    """No HTTP answer: connection refused or reset, DNS, TLS, or a client-side timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "TransportError", message)


_DEFAULT_REASONS: Final[dict[int, str]] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _retry_after_s(headers: Mapping[str, str] | None, body: Mapping[str, Any]) -> float | None:
    if headers is not None:
        value = headers.get("Retry-After")
        if value:
            try:
                seconds = float(value)
            except ValueError:
                pass  # an HTTP date: kube-apiserver only sends seconds, fall back to the body
            else:
                return max(0.0, seconds)
    details = body.get("details")
    if isinstance(details, dict):
        from_body = details.get("retryAfterSeconds")
        if isinstance(from_body, int | float):
            return max(0.0, float(from_body))
    return None
