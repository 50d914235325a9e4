"""What every workload controller shares: `ControllerBase`, the resource names and the naming helpers.

Owns: the runtime, store, clock and options the controllers work with, one pending wake-up per object,
creating an owned pod from a template (through `store.create(admit=True)`, so mutating webhooks see every
CREATE), Events about an object (repeats counted as client-go's recorder does), deleting a pod, writing a
status, the order a scale-down removes pods in, and kube's pod-template hash (`ComputeHash`) and controller
owner references.

Must not: sync any kind itself (the mixins in this package do, `controllers` routes events to them).
"""

from __future__ import annotations

import copy
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from vpa.model.clock import VirtualClock
from vpa.sim import timestamps
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.pods import controller_of, is_ready
from vpa.sim.cluster.runtime import Key, Runtime
from vpa.sim.contracts import ApiError, JsonObj, Store

# One logger for the package: the name the workload controllers have always logged under.
log = logging.getLogger("vpa.sim.cluster.workloads")

_SAFE_CHARS = "bcdfghjklmnpqrstvwxz2456789"
# client-go's event recorder remembers this many distinct events to count their repeats.
_REPEATED_EVENTS_KEPT = 4096

DEPLOYMENTS = "deployments.apps"
REPLICASETS = "replicasets.apps"
STATEFULSETS = "statefulsets.apps"
DAEMONSETS = "daemonsets.apps"
JOBS = "jobs.batch"
CRONJOBS = "cronjobs.batch"
RCS = "replicationcontrollers"
PDBS = "poddisruptionbudgets.policy"
NAMESPACES = "namespaces"
SERVICEACCOUNTS = "serviceaccounts"


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """apimachinery `rand.SafeEncodeString`: map each byte onto consonants and digits."""
    return "".join(_SAFE_CHARS[ord(ch) % len(_SAFE_CHARS)] for ch in text)


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """`ComputeHash`: FNV-32a of the template (canonical JSON here) and the collision count, safe-encoded."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    return safe_encode(str(fnv32a(data)))


def owner_ref(obj: Mapping[str, Any]) -> JsonObj:
    md = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": md.get("name"),
        "uid": md.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_active(pod: Mapping[str, Any]) -> bool:
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and (pod.get("status") or {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


class ControllerBase:
    """State and helpers shared by the controller mixins that make up `Controllers`."""

    def __init__(self, runtime: Runtime, store: Store, clock: VirtualClock, options: ClusterOptions) -> None:
        self.rt = runtime
        self.store = store
        self.clock = clock
        self.options = options
        self._timers: dict[tuple[str, Key], Any] = {}
        # Events sent with `repeat=True`: (involved uid, type, reason, message) → the Event's name.
        self._repeated_events: OrderedDict[tuple[str, str, str, str], str] = OrderedDict()

    def _wake_at(self, resource: str, k: Key, due: float) -> None:
        """One pending wake-up per object: a later sync replaces the earlier timer."""
        self.rt.cancel(self._timers.get((resource, k)))
        sync = self._sync_for(resource)
        self._timers[(resource, k)] = self.rt.at(due, lambda _d: self.rt.enqueue(resource, k, sync))

    def _sync_for(self, resource: str) -> Callable[[Key], Any]:
        """The sync function of `resource`'s controller (implemented by `Controllers`)."""
        raise NotImplementedError

    # --- helpers --------------------------------------------------------------------------------------------

    def _owned_pods(self, owner: Mapping[str, Any]) -> list[JsonObj]:
        uid = (owner.get("metadata") or {}).get("uid") or ""
        return [p for p in self.rt.cache("pods").owned_by(uid) if (controller_of(p) or {}).get("uid") == uid]

    async def _create_pod(
        self,
        owner: Mapping[str, Any],
        template: Mapping[str, Any],
        *,
        name: str | None = None,
        generate_name: str | None = None,
        extra_labels: Mapping[str, str] | None = None,
        spec_patch: Mapping[str, Any] | None = None,
    ) -> JsonObj | None:
        md = owner.get("metadata") or {}
        tmd = template.get("metadata") or {}
        pod_md: JsonObj = {
            "namespace": md.get("namespace"),
            "labels": {**(tmd.get("labels") or {}), **(extra_labels or {})},
            "ownerReferences": [owner_ref(owner)],
        }
        if tmd.get("annotations"):
            pod_md["annotations"] = dict(tmd["annotations"])
        if tmd.get("finalizers"):
            pod_md["finalizers"] = list(tmd["finalizers"])
        if name is not None:
            pod_md["name"] = name
        else:
            pod_md["generateName"] = generate_name or f"{md.get('name')}-"
        spec = copy.deepcopy(template.get("spec") or {})
        if spec_patch:
            spec.update(copy.deepcopy(dict(spec_patch)))
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_md, "spec": spec}
        try:
            created = await self.store.create("pods", pod, admit=True)
        except ApiError as err:
            if err.code == 409:
                return None
            log.info(
                "sim: %s %s/%s failed to create a pod: %s",
                owner.get("kind"),
                md.get("namespace"),
                md.get("name"),
                err.message,
            )
            await self._event(owner, "Warning", "FailedCreate", f"Error creating: {err.message}")
            return None
        # Seen in the cache at once, so the next sync counts it even before its watch event arrives.
        self.rt.observe("pods", created)
        return created

    async def _event(
        self, obj: Mapping[str, Any], etype: str, reason: str, message: str, *, repeat: bool = False
    ) -> None:
        """An Event about `obj`. With `repeat` (warnings sent on every sync), one identical to an earlier one
        bumps that Event's `count` and `lastTimestamp` instead of adding another, as client-go's recorder
        does; the last `_REPEATED_EVENTS_KEPT` of them are remembered, as many as its cache holds."""
        md = obj.get("metadata") or {}
        now = timestamps.rfc3339(self.clock.now())
        ns = md.get("namespace") or "default"
        key = (str(md.get("uid")), etype, reason, message)
        seen = self._repeated_events.get(key) if repeat else None
        prior = self.store.get("events", ns, seen) if seen else None
        if prior is not None:
            bumped = {**prior, "count": int(prior.get("count") or 1) + 1, "lastTimestamp": now}
            try:
                await self.store.update("events", bumped)
            except ApiError:
                pass
            else:
                self._repeated_events.move_to_end(key)
                return
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{md.get('name')}.", "namespace": md.get("namespace") or "default"},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": md.get("name"),
                "namespace": md.get("namespace"),
                "uid": md.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": etype,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": "controllermanager"},
            "reportingComponent": "controllermanager",
        }
        try:
            created = await self.store.create("events", event, admit=False)
        except ApiError:
            return
        if repeat:
            self._repeated_events[key] = str(created["metadata"]["name"])
            self._repeated_events.move_to_end(key)
            if len(self._repeated_events) > _REPEATED_EVENTS_KEPT:
                self._repeated_events.popitem(last=False)

    async def _delete_pod(self, pod: Mapping[str, Any]) -> None:
        md = pod.get("metadata") or {}
        try:
            result = await self.store.delete("pods", md.get("namespace"), md.get("name") or "")
        except ApiError as err:
            if err.code != 404:
                raise
            return
        if result is not None:
            gone = (
                not (result.get("metadata") or {}).get("deletionTimestamp")
                or (result.get("metadata") or {}).get("deletionGracePeriodSeconds") == 0
            )
            self.rt.observe("pods", result, deleted=gone)

    async def _write_status(self, resource: str, obj: JsonObj, status: JsonObj) -> None:
        if (obj.get("status") or {}) == status:
            return
        new = dict(obj)
        new["status"] = status
        result = await self.store.update(resource, new, subresource="status")
        self.rt.observe(resource, result)

    def _get(self, resource: str, k: Key) -> JsonObj | None:
        return self.store.get(resource, k[0], k[1])

    @staticmethod
    def _delete_rank(pod: Mapping[str, Any]) -> tuple[int, int, int, str]:
        """Which pods a scale-down removes first: unscheduled, pending, not ready, then the newest."""
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        return (
            0 if not spec.get("nodeName") else 1,
            0 if status.get("phase") == "Pending" else 1,
            1 if is_ready(pod) else 0,
            "".join(chr(0x10FFFF - ord(c)) for c in (pod.get("metadata") or {}).get("creationTimestamp", "")),
        )
