"""Actuation I/O of the updater: evict, resize in place, mark in-place-updated (spec §4.6, §4.7, §10).

Owns: the three writes the updater makes to pods and how their answers are classified:
- `evict`: POST a `policy/v1` Eviction to `pods/<name>/eviction` (PDB-aware). A 429 is the API server's
  "this would violate a PodDisruptionBudget" answer, not throttling, so it is never retried here
  (`max_retries=0`): it comes back as `Outcome.BLOCKED` and the loop tries again next time. The Eviction
  carries `deleteOptions.preconditions.uid`, so a StatefulSet pod recreated under the same name between
  the decision and the call is never evicted by mistake (upstream sends no precondition).
- `resize`: a JSON Patch (`application/json-patch+json`) to `pods/<name>/resize`. A 403 whose Status
  carries a cause of type `NodeCapacity` or `UnsupportedPlatform` (Kubernetes ≥ 1.36 `PodResizeValidator`:
  the resize can never fit the node, or the node's OS cannot resize) is `Outcome.INFEASIBLE`; a 403 from
  the authorizer about the caller (RBAC, also for a few seconds after a kube-apiserver restart) is
  `Outcome.FAILED` like a transient error, never a reason to evict instead; any other refusal by the API
  server is `Outcome.REJECTED` (422 QoS change, 409, an admission plugin's 403). The patch
  only `add`s absolute values, so sending it twice is harmless: 429, 5xx and transport errors are retried
  by the client, and if they persist the result is `Outcome.FAILED` — transient, not a refusal (AEP-8818:
  "patch fails with transient error → do nothing, retry next loop"; upstream treats it as a failed
  update and falls back to eviction).
- `mark_in_place_updated`: the merge patch setting `vpaInPlaceUpdated=true` on the pod itself.

A 404 (the pod is gone) is `Outcome.GONE` for every call. Every call has a client-side timeout.

Must not: decide what to evict or resize (the caller executes `vpa.logic.updater.plan` decisions), wait on
the updater's rate limiters, record events or metrics, or retry a refusal.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.kube.client import ApiError, KubeClient, api_path

NODE_CAPACITY: Final = "NodeCapacity"
"""StatusCause type of the 1.36+ admission-time resize rejection (kubernetes/kubernetes#136043)."""
UNSUPPORTED_PLATFORM: Final = "UnsupportedPlatform"
"""The same plugin's cause for a node whose OS cannot resize in place (upstream VPA 1.8.1 handles only
`NodeCapacity` and retries this one every loop; it can never succeed on that node either)."""

JsonObj = dict[str, Any]


class Outcome(enum.StrEnum):
    DONE = "Done"
    BLOCKED = "Blocked"
    """Eviction refused with 429: a PodDisruptionBudget allows no disruption now."""
    GONE = "Gone"
    """404: the pod no longer exists."""
    INFEASIBLE = "Infeasible"
    """Resize refused with 403 and a `NodeCapacity` or `UnsupportedPlatform` cause: it can never be done on
    this node."""
    REJECTED = "Rejected"
    """Any other refusal (validation, QoS change, conflict, forbidden)."""
    FAILED = "Failed"
    """Transient: no answer, 5xx or 429 after the client's retries; the server did not refuse the change."""


@dataclass(frozen=True, slots=True)
class Result:
    outcome: Outcome
    status: int = 0
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.DONE


DONE: Final = Result(Outcome.DONE)


def has_cause(error: ApiError, cause_type: str) -> bool:
    """True when the error's Status lists a cause of `cause_type` (`details.causes[].reason` on the wire,
    which is `StatusCause.Type`; `type` is accepted too)."""
    details = error.body.get("details")
    if not isinstance(details, Mapping):
        return False
    causes = details.get("causes")
    if not isinstance(causes, list):
        return False
    return any(
        isinstance(cause, Mapping) and cause_type in (cause.get("reason"), cause.get("type"))
        for cause in causes
    )


def _transient(error: ApiError) -> bool:
    return error.status == 0 or error.status >= 500 or error.status == 429


def classify_resize_error(error: ApiError) -> Outcome:
    if error.status == 404:
        return Outcome.GONE
    if error.status == 403 and (has_cause(error, NODE_CAPACITY) or has_cause(error, UNSUPPORTED_PLATFORM)):
        return Outcome.INFEASIBLE
    if _transient(error) or error.is_unauthorized:  # RBAC just after a restart: never a reason to evict
        return Outcome.FAILED
    return Outcome.REJECTED


def classify_eviction_error(error: ApiError) -> Outcome:
    if error.status == 404:
        return Outcome.GONE
    if error.status == 429:
        return Outcome.BLOCKED
    if _transient(error):
        return Outcome.FAILED
    return Outcome.REJECTED


def _failed(outcome: Outcome, error: ApiError) -> Result:
    return Result(outcome, error.status, error.message)


def pod_path(namespace: str, name: str, subresource: str | None = None) -> str:
    return api_path("", "v1", "pods", namespace=namespace, name=name, subresource=subresource)


def eviction_body(namespace: str, name: str, uid: str = "") -> JsonObj:
    body: JsonObj = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    return body


class Actuator:
    """The updater's writes to pods, each answered with a `Result` instead of an exception."""

    def __init__(self, client: KubeClient, *, timeout_s: float = 10.0) -> None:
        self._client = client
        self._timeout_s = timeout_s

    async def evict(self, namespace: str, name: str, uid: str = "") -> Result:
        try:
            await self._client.create(
                pod_path(namespace, name, "eviction"),
                eviction_body(namespace, name, uid),
                timeout_s=self._timeout_s,
                max_retries=0,
            )
        except ApiError as error:
            return _failed(classify_eviction_error(error), error)
        return DONE

    async def resize(self, namespace: str, name: str, operations: list[JsonObj]) -> Result:
        try:
            await self._client.json_patch(
                pod_path(namespace, name, "resize"), operations, timeout_s=self._timeout_s, idempotent=True
            )
        except ApiError as error:
            return _failed(classify_resize_error(error), error)
        return DONE

    async def mark_in_place_updated(self, namespace: str, name: str, patch: JsonObj) -> Result:
        try:
            await self._client.merge_patch(pod_path(namespace, name), patch, timeout_s=self._timeout_s)
        except ApiError as error:
            outcome = Outcome.GONE if error.status == 404 else Outcome.REJECTED
            return _failed(Outcome.FAILED if _transient(error) else outcome, error)
        return DONE
