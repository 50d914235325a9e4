"""The seam between the simulated API server and the simulated cluster's behaviour.

Owns: the error type every part of the simulator raises to produce a Kubernetes `Status` response, the
object-store protocol that controllers and the node agent program against, and the hook signatures through
which kind-specific semantics (pod validation, defaulting, subresources such as `eviction` and `resize`,
aggregated APIs such as `metrics.k8s.io`) plug into the generic API server.

Must not: hold state or do I/O. The API server (`vpa.sim.apiserver`) implements `Store`; the cluster
behaviour (`vpa.sim.cluster`) registers hooks. Objects are plain JSON dicts exactly as the wire carries
them; a dict returned by the store must be treated as read-only (copy before changing it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

JsonObj = dict[str, Any]
Operation = Literal["CREATE", "UPDATE", "DELETE"]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


class ApiError(Exception):
    """An error the API server turns into a `Status` object with this HTTP code and reason.

    `causes` become `details.causes` (e.g. `[{"reason": "NodeCapacity", "message": ..., "field": ...}]`).
    """

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        causes: list[dict[str, str]] | None = None,
        kind: str | None = None,
        name: str | None = None,
        group: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes or []
        self.kind = kind
        self.name = name
        self.group = group
        self.retry_after_s = retry_after_s

    def status(self) -> JsonObj:
        """The `Status` body kube-apiserver would send."""
        details: JsonObj = {}
        if self.name is not None:
            details["name"] = self.name
        if self.group is not None:
            details["group"] = self.group
        if self.kind is not None:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        if self.retry_after_s is not None:
            details["retryAfterSeconds"] = self.retry_after_s
        body: JsonObj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            body["details"] = details
        return body


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    object: JsonObj


class Store(Protocol):
    """The cluster state as controllers and the node agent see it (in-process, no HTTP).

    `resource` names are `plural` for the core group and `plural.group` otherwise: `pods`, `nodes`,
    `deployments.apps`, `poddisruptionbudgets.policy`, `leases.coordination.k8s.io`,
    `verticalpodautoscalers.autoscaling.k8s.io`. Cluster-scoped resources take `namespace=None`/"".
    Every write goes through the same validation, defaulting, resourceVersion and watch machinery as a
    write over HTTP, so controllers' writes are visible to watchers and clients.
    """

    def get(self, resource: str, namespace: str | None, name: str) -> JsonObj | None: ...

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[JsonObj]: ...

    async def create(self, resource: str, obj: JsonObj, *, admit: bool = True) -> JsonObj:
        """Create; `admit=True` runs mutating then validating admission webhooks as a client write would."""
        ...

    async def update(self, resource: str, obj: JsonObj, *, subresource: str | None = None) -> JsonObj:
        """Replace (PUT semantics). A stale `metadata.resourceVersion` raises ApiError 409 Conflict."""
        ...

    async def delete(
        self, resource: str, namespace: str | None, name: str, *, grace_period_s: int | None = None
    ) -> JsonObj | None:
        """Delete (graceful for pods: sets deletionTimestamp first). Returns the object's last state."""
        ...

    def subscribe(self, resource: str) -> AsyncIterator[WatchEvent]:
        """In-process watch of every change to `resource` from now on (all namespaces)."""
        ...


@dataclass(frozen=True, slots=True)
class SubresourceRequest:
    """A request to a subresource that a hook serves (`pods/eviction`, `pods/resize`, ...)."""

    verb: Literal["GET", "POST", "PUT", "PATCH"]
    resource: str
    subresource: str
    namespace: str | None
    name: str
    body: JsonObj | list[Any] | None
    content_type: str | None
    query: Mapping[str, str] = field(default_factory=dict)


# Raises ApiError to reject. Called for every CREATE/UPDATE/DELETE of `resource`, from HTTP and in-process
# writes alike, after defaulting and before the object is stored. `old` is None on CREATE; `new` is the old
# object on DELETE. `subresource` is None for the main resource, "status" for /status and so on.
Validator = Callable[[Operation, JsonObj | None, JsonObj, str | None], None]

# May change `new` in place before validation (LimitRange defaults, QoS class, scheduling fields...).
Defaulter = Callable[[Operation, JsonObj | None, JsonObj, str | None], None]

# Serves a subresource; returns (http_status, body). Raise ApiError for failures.
SubresourceHandler = Callable[[SubresourceRequest], Awaitable[tuple[int, JsonObj]]]

# Serves GET of an aggregated API resource (e.g. metrics.k8s.io/v1beta1 pods): returns the items for a
# namespace (None = all namespaces), optionally one named item (None = list).
AggregatedLister = Callable[[str | None, str | None, str | None], list[JsonObj]]


class HookRegistry(Protocol):
    """What the API server offers cluster behaviour to plug in kind-specific semantics."""

    def add_validator(self, resource: str, validator: Validator) -> None: ...

    def add_defaulter(self, resource: str, defaulter: Defaulter) -> None: ...

    def add_subresource(self, resource: str, subresource: str, handler: SubresourceHandler) -> None: ...

    def add_aggregated_resource(
        self,
        *,
        group: str,
        version: str,
        plural: str,
        kind: str,
        namespaced: bool,
        lister: AggregatedLister,
    ) -> None:
        """Serve a read-only (get, list) resource that is computed, not stored (metrics.k8s.io)."""
        ...
