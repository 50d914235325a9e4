"""VPA status writes (the recommender's; the updater's conditions) and VPA checkpoint objects.

Owns: `VpaStatusWriter` (a JSON merge patch of the whole `status` on the `/status` subresource, with the
explicit merge-patch content type; retried by the client like any idempotent call), `VpaConditionWriter`
(the same for `status.conditions` alone: the updater's resize-guard condition) and `CheckpointStore`
(listing checkpoints, all namespaces or one; writing one as upstream's `CreateOrUpdateVpaCheckpoint`
does — replace `/status` with a JSON patch, create the object when it does not exist yet; deleting one).

Must not: decide whether a write is needed (the recommender compares statuses), build status or
checkpoint content (`vpa.kube.converting` and `vpa.logic.recommender.checkpointing` do), or swallow errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from vpa.kube.client import ApiError, JsonObj, KubeClient, api_path
from vpa.kube.converting import condition_to_dict, vpa_status_to_dict
from vpa.kube.paging import PagedList
from vpa.model.vpa import Condition, VpaStatus

VPA_GROUP: Final = "autoscaling.k8s.io"
VPA_VERSION: Final = "v1"
VPAS: Final = "verticalpodautoscalers"
CHECKPOINTS: Final = "verticalpodautoscalercheckpoints"


class VpaStatusWriter:
    """Writes a VPA's status with a merge patch on `/status`."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def write(self, namespace: str, name: str, status: VpaStatus) -> None:
        await self._client.patch_custom_object(
            VPA_GROUP, VPA_VERSION, VPAS, namespace, name, {"status": vpa_status_to_dict(status)},
            subresource="status",
        )


class VpaConditionWriter:
    """Writes only a VPA's `status.conditions` (a merge patch on `/status` that names no other field): the
    updater's own conditions, without touching the recommendation the recommender writes. A merge patch
    replaces the list, so the caller passes every condition it wants kept."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def write(self, namespace: str, name: str, conditions: Sequence[Condition]) -> None:
        body = {"status": {"conditions": [condition_to_dict(c) for c in conditions]}}
        await self._client.patch_custom_object(
            VPA_GROUP, VPA_VERSION, VPAS, namespace, name, body, subresource="status"
        )


def _pointer(segment: str) -> str:
    """One JSON-pointer reference token (RFC 6901)."""
    return segment.replace("~", "~0").replace("/", "~1")


class CheckpointStore:
    """VerticalPodAutoscalerCheckpoint objects: list, create-or-update, delete."""

    def __init__(self, client: KubeClient, namespace: str | None = None) -> None:
        self._client = client
        self._namespace = namespace or None

    async def list(self) -> list[JsonObj]:
        """Every checkpoint (in the configured namespace, if any), paged."""
        path = api_path(VPA_GROUP, VPA_VERSION, CHECKPOINTS, namespace=self._namespace)
        return await PagedList(self._client, path).dicts()

    async def write(self, namespace: str, name: str, vpa_name: str, container_name: str,
                    status: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> None:
        """Replace the checkpoint's status (a JSON patch, so stale histogram buckets do not survive the
        way they would under a merge patch) and set `annotations` (each key replaced; an object without
        annotations, as upstream writes them, gets the map); create the object on 404."""
        path = api_path(VPA_GROUP, VPA_VERSION, CHECKPOINTS, namespace=namespace, name=name)
        # `add` on an existing member replaces it, and also works on an object without a status.
        ops: list[dict[str, Any]] = [{"op": "add", "path": "/status", "value": status}]
        ops += [{"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value}
                for key, value in (annotations or {}).items()]
        try:
            try:
                await self._client.json_patch(path, ops, idempotent=True)
            except ApiError as err:
                if not annotations or err.status not in (400, 422, 500):
                    raise
                # No annotations map yet (a checkpoint upstream wrote, or an older one of ours).
                await self._client.json_patch(
                    path,
                    [ops[0], {"op": "add", "path": "/metadata/annotations", "value": dict(annotations)}],
                    idempotent=True)
            return
        except ApiError as err:
            if not err.is_not_found:
                raise
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            metadata["annotations"] = dict(annotations)
        body = {
            "apiVersion": f"{VPA_GROUP}/{VPA_VERSION}",
            "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": metadata,
            "spec": {"vpaObjectName": vpa_name, "containerName": container_name},
            "status": dict(status),
        }
        await self._client.create(api_path(VPA_GROUP, VPA_VERSION, CHECKPOINTS, namespace=namespace), body)

    async def delete(self, namespace: str, name: str) -> None:
        path = api_path(VPA_GROUP, VPA_VERSION, CHECKPOINTS, namespace=namespace, name=name)
        await self._client.delete(path)
