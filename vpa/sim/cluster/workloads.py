"""Workload controllers of kube-controller-manager, simplified but faithful where the VPA looks.

Owns: Deployment → ReplicaSet (`<deployment>-<pod-template-hash>`, label `pod-template-hash`, controller owner
references with blockOwnerDeletion; a template change creates a new ReplicaSet scaled to the full replica
count and scales the old ones to zero), ReplicaSet and ReplicationController (replica count kept; missing pods
created from the template with generateName `<owner>-` through `store.create(admit=True)`, so mutating
webhooks see every CREATE; surplus pods deleted, least useful first), StatefulSet (ordinal pods `<sts>-<i>`,
recreated under the same name once the old pod is gone; OrderedReady creates one pod at a time), DaemonSet
(one pod per schedulable node, pinned with required node affinity on `metadata.name`), Job (pods run, then
succeed; parallelism and completions; status and Complete condition), CronJob (Jobs at the schedule's
virtual times; only the most recent missed time is started; Allow/Forbid/Replace; history limits), and the
disruption controller (PodDisruptionBudget status), and the service-account controller's `default`
ServiceAccount in every namespace. Status of every workload (replicas, ready, available,
updated, observedGeneration). Cascading deletion is the API server's garbage collector.

Must not: schedule or run pods (the node agent does), or call the network.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vpa.model.clock import VirtualClock
from vpa.sim.cluster import cron, disruption
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.pods import controller_of, is_ready, map_selector_matches, selector_matches
from vpa.sim.cluster.runtime import Key, Runtime, key_of
from vpa.sim.contracts import ApiError, JsonObj, Store

log = logging.getLogger(__name__)

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

# The owner kinds the controllers here run, by kind: the disruption controller's table of them, one list.
_KIND_RESOURCE = {kind: resource for (_, kind), (resource, _) in disruption.OWNER_RESOURCES.items()}


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


def _is_active(pod: Mapping[str, Any]) -> bool:
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and (pod.get("status") or {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


class Controllers:
    """All workload controllers, sharing the runtime's caches and work queue."""

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

    def register(self) -> None:
        rt = self.rt
        rt.on_event("pods", self._on_pod)
        rt.on_event("nodes", self._on_node)
        rt.on_event(DEPLOYMENTS, self._simple(DEPLOYMENTS, self.sync_deployment))
        rt.on_event(REPLICASETS, self._on_replicaset)
        rt.on_event(RCS, self._simple(RCS, self.sync_rc))
        rt.on_event(STATEFULSETS, self._simple(STATEFULSETS, self.sync_statefulset))
        rt.on_event(DAEMONSETS, self._simple(DAEMONSETS, self.sync_daemonset))
        rt.on_event(JOBS, self._on_job)
        rt.on_event(CRONJOBS, self._simple(CRONJOBS, self.sync_cronjob))
        rt.on_event(PDBS, self._simple(PDBS, self.sync_pdb))
        rt.on_event(NAMESPACES, self._on_namespace)
        rt.on_event(SERVICEACCOUNTS, self._on_service_account)

    # --- event routing --------------------------------------------------------------------------------------

    def _sync_for(self, resource: str) -> Callable[[Key], Any]:
        return {
            DEPLOYMENTS: self.sync_deployment,
            REPLICASETS: self.sync_replicaset,
            RCS: self.sync_rc,
            STATEFULSETS: self.sync_statefulset,
            DAEMONSETS: self.sync_daemonset,
            JOBS: self.sync_job,
            CRONJOBS: self.sync_cronjob,
            PDBS: self.sync_pdb,
        }[resource]

    def _simple(
        self, resource: str, sync: Callable[[Key], Any]
    ) -> Callable[[str, JsonObj, JsonObj | None], None]:
        def handler(etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
            self.rt.enqueue(resource, key_of(obj), sync)

        return handler

    def _on_namespace(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        if etype != "DELETED":
            self.rt.enqueue(SERVICEACCOUNTS, (key_of(obj)[1], "default"), self.sync_default_service_account)

    def _on_service_account(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        k = key_of(obj)
        if etype == "DELETED" and k[1] == "default":
            self.rt.enqueue(SERVICEACCOUNTS, k, self.sync_default_service_account)

    async def sync_default_service_account(self, k: Key) -> None:
        """The service-account controller: every live namespace has a ServiceAccount named `default`."""
        namespace = self.store.get(NAMESPACES, None, k[0])
        if namespace is None or (namespace.get("metadata") or {}).get("deletionTimestamp"):
            return
        if self.store.get(SERVICEACCOUNTS, k[0], "default") is not None:
            return
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": k[0]},
        }
        try:
            self.rt.observe(SERVICEACCOUNTS, await self.store.create(SERVICEACCOUNTS, account, admit=False))
        except ApiError as err:
            if err.code not in (403, 404, 409):  # terminating or gone namespace, or already there
                raise

    def _enqueue_owner(self, obj: Mapping[str, Any], namespace: str) -> None:
        ref = controller_of(obj)
        if ref is None:
            return
        resource = _KIND_RESOURCE.get(str(ref.get("kind")))
        if resource is None:
            return
        self.rt.enqueue(resource, (namespace, str(ref.get("name"))), self._sync_for(resource))

    def _on_pod(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        self._enqueue_owner(obj, ns)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for pdb in self.rt.cache(PDBS).in_namespace(ns):
            if selector_matches((pdb.get("spec") or {}).get("selector"), labels):
                self.rt.enqueue(PDBS, key_of(pdb), self.sync_pdb)

    def _on_node(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        for ds in list(self.rt.cache(DAEMONSETS).objects.values()):
            self.rt.enqueue(DAEMONSETS, key_of(ds), self.sync_daemonset)

    def _on_replicaset(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        self.rt.enqueue(REPLICASETS, key_of(obj), self.sync_replicaset)
        self._enqueue_owner(obj, key_of(obj)[0])

    def _on_job(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        self.rt.enqueue(JOBS, key_of(obj), self.sync_job)
        self._enqueue_owner(obj, key_of(obj)[0])

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
        now = disruption.rfc3339(self.clock.now())
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

    # --- ReplicaSet / ReplicationController -----------------------------------------------------------------

    async def sync_replicaset(self, k: Key) -> None:
        rs = self._get(REPLICASETS, k)
        if rs is not None:
            await self._sync_replicas(
                REPLICASETS,
                rs,
                lambda labels: selector_matches((rs.get("spec") or {}).get("selector"), labels),
            )

    async def sync_rc(self, k: Key) -> None:
        rc = self._get(RCS, k)
        if rc is not None:
            await self._sync_replicas(
                RCS, rc, lambda labels: map_selector_matches((rc.get("spec") or {}).get("selector"), labels)
            )

    async def _sync_replicas(
        self, resource: str, owner: JsonObj, matches: Callable[[Mapping[str, str]], bool]
    ) -> None:
        md = owner.get("metadata") or {}
        if md.get("deletionTimestamp"):
            return
        spec = owner.get("spec") or {}
        want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        pods = [p for p in self._owned_pods(owner) if matches((p.get("metadata") or {}).get("labels") or {})]
        active = [p for p in pods if _is_active(p)]
        if len(active) < want:
            template = spec.get("template") or {}
            for _ in range(want - len(active)):
                if await self._create_pod(owner, template) is None:
                    break
        elif len(active) > want:
            for pod in sorted(active, key=self._delete_rank)[: len(active) - want]:
                await self._delete_pod(pod)
        pods = [p for p in self._owned_pods(owner) if matches((p.get("metadata") or {}).get("labels") or {})]
        active = [p for p in pods if _is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        labels = (spec.get("template") or {}).get("metadata", {}).get("labels") or {}
        status: JsonObj = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                1
                for p in active
                if all(((p.get("metadata") or {}).get("labels") or {}).get(a) == b for a, b in labels.items())
            ),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": md.get("generation", 1),
        }
        for key in ("readyReplicas", "availableReplicas", "fullyLabeledReplicas"):
            if status.get(key) == 0:
                status.pop(key)
        await self._write_status(resource, owner, status)

    # --- Deployment -----------------------------------------------------------------------------------------

    async def sync_deployment(self, k: Key) -> None:
        dep = self._get(DEPLOYMENTS, k)
        if dep is None or (dep.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = dep.get("metadata") or {}
        spec = dep.get("spec") or {}
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        template = spec.get("template") or {}
        collision = int((dep.get("status") or {}).get("collisionCount") or 0)
        pth = template_hash(template, collision)
        name = f"{md.get('name')}-{pth}"
        owned = [
            rs
            for rs in self.rt.cache(REPLICASETS).owned_by(md.get("uid") or "")
            if (controller_of(rs) or {}).get("uid") == md.get("uid")
        ]
        current = next((rs for rs in owned if (rs.get("metadata") or {}).get("name") == name), None)
        revision = 1 + max(
            (
                int(
                    ((rs.get("metadata") or {}).get("annotations") or {}).get(
                        "deployment.kubernetes.io/revision", "0"
                    )
                    or 0
                )
                for rs in owned
            ),
            default=0,
        )
        if current is None:
            rs_template = copy.deepcopy(template)
            rs_template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = pth
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = pth
            rs: JsonObj = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": name,
                    "namespace": md.get("namespace"),
                    "labels": {
                        **(template.get("metadata", {}).get("labels") or {}),
                        "pod-template-hash": pth,
                    },
                    "annotations": {
                        "deployment.kubernetes.io/revision": str(revision),
                        "deployment.kubernetes.io/desired-replicas": str(replicas),
                        "deployment.kubernetes.io/max-replicas": str(replicas + 1),
                    },
                    "ownerReferences": [owner_ref(dep)],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": selector,
                    "template": rs_template,
                    "minReadySeconds": spec.get("minReadySeconds", 0),
                },
            }
            try:
                current = await self.store.create(REPLICASETS, rs, admit=True)
            except ApiError as err:
                if err.code != 409:
                    raise
                current = self.store.get(REPLICASETS, md.get("namespace"), name)
                if current is None:
                    return
            self.rt.observe(REPLICASETS, current)
            await self._event(
                dep, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {replicas}"
            )
        elif (current.get("spec") or {}).get("replicas") != replicas:
            new = copy.deepcopy(current)
            new["spec"]["replicas"] = replicas
            new["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/desired-replicas"] = str(
                replicas
            )
            result = await self.store.update(REPLICASETS, new)
            self.rt.observe(REPLICASETS, result)
            current = result
        for rs in owned:
            if (rs.get("metadata") or {}).get("name") != name and (rs.get("spec") or {}).get("replicas"):
                new = copy.deepcopy(rs)
                new["spec"]["replicas"] = 0
                result = await self.store.update(REPLICASETS, new)
                self.rt.observe(REPLICASETS, result)
                await self._event(
                    dep,
                    "Normal",
                    "ScalingReplicaSet",
                    f"Scaled down replica set {rs['metadata']['name']} from "
                    f"{(rs.get('spec') or {}).get('replicas')} to 0",
                )
        owned = [
            rs
            for rs in self.rt.cache(REPLICASETS).owned_by(md.get("uid") or "")
            if (controller_of(rs) or {}).get("uid") == md.get("uid")
        ]
        total = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in owned)
        ready = sum(int((rs.get("status") or {}).get("readyReplicas") or 0) for rs in owned)
        available = sum(int((rs.get("status") or {}).get("availableReplicas") or 0) for rs in owned)
        cur_status = (self.rt.cache(REPLICASETS).get(key_of(current)) or current).get("status") or {}
        updated = int(cur_status.get("replicas") or 0)
        now = disruption.rfc3339(self.clock.now())
        old_conds = {c.get("type"): c for c in (dep.get("status") or {}).get("conditions") or []}

        def cond(ctype: str, ok: bool, reason: str, message: str) -> JsonObj:
            prior = old_conds.get(ctype)
            status_s = "True" if ok else "False"
            keep = prior is not None and prior.get("status") == status_s and prior.get("reason") == reason
            return {
                "type": ctype,
                "status": status_s,
                "reason": reason,
                "message": message,
                "lastUpdateTime": prior.get("lastUpdateTime") if keep and prior else now,
                "lastTransitionTime": prior.get("lastTransitionTime") if keep and prior else now,
            }

        strategy = spec.get("strategy") or {}
        max_unavailable: object = 0
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            max_unavailable = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
        try:
            # maxUnavailable rounds down (maxSurge would round up).
            min_available = replicas - disruption.scaled_value(max_unavailable, replicas, False)
        except disruption.ScaleError:
            min_available = replicas
        status: JsonObj = {
            "observedGeneration": md.get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "conditions": [
                cond(
                    "Available",
                    available >= min_available,
                    "MinimumReplicasAvailable"
                    if available >= min_available
                    else "MinimumReplicasUnavailable",
                    "Deployment has minimum availability."
                    if available >= min_available
                    else "Deployment does not have minimum availability.",
                ),
                cond(
                    "Progressing",
                    True,
                    "NewReplicaSetAvailable" if updated == replicas == available else "ReplicaSetUpdated",
                    f'ReplicaSet "{name}" has successfully progressed.'
                    if updated == replicas == available
                    else f'ReplicaSet "{name}" is progressing.',
                ),
            ],
        }
        if total - available > 0:
            status["unavailableReplicas"] = total - available
        for key in ("readyReplicas", "availableReplicas", "updatedReplicas", "replicas"):
            if status.get(key) == 0:
                status.pop(key)
        if collision:
            status["collisionCount"] = collision
        await self._write_status(DEPLOYMENTS, dep, status)

    # --- StatefulSet ----------------------------------------------------------------------------------------

    async def sync_statefulset(self, k: Key) -> None:
        sts = self._get(STATEFULSETS, k)
        if sts is None or (sts.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = sts.get("metadata") or {}
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        template = spec.get("template") or {}
        revision = f"{md.get('name')}-{template_hash(template)}"
        parallel = spec.get("podManagementPolicy") == "Parallel"
        pods: dict[str, JsonObj] = {
            str((p.get("metadata") or {}).get("name")): p for p in self._owned_pods(sts)
        }
        name = md.get("name")
        for i in range(replicas):
            pod_name = f"{name}-{i}"
            pod = pods.get(pod_name)
            if pod is None:
                if self.store.get("pods", md.get("namespace"), pod_name) is not None:
                    break  # the previous incarnation is still terminating
                labels = {
                    "statefulset.kubernetes.io/pod-name": pod_name,
                    "apps.kubernetes.io/pod-index": str(i),
                    "controller-revision-hash": revision,
                }
                spec_patch: JsonObj = {"hostname": pod_name}
                if spec.get("serviceName"):
                    spec_patch["subdomain"] = spec["serviceName"]
                created = await self._create_pod(
                    sts, template, name=pod_name, extra_labels=labels, spec_patch=spec_patch
                )
                if created is None or not parallel:
                    break
                continue
            if not parallel and not (is_ready(pod) and _is_active(pod)):
                break
        for pod_name, pod in sorted(pods.items(), key=lambda kv: -_ordinal(kv[0])):
            if _ordinal(pod_name) >= replicas and _is_active(pod):
                await self._delete_pod(pod)
                if not parallel:
                    break
        # Rolling update: replace the highest-ordinal pod of an old revision, one at a time.
        if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate":
            stale = [
                p
                for n, p in pods.items()
                if _ordinal(n) < replicas
                and _is_active(p)
                and ((p.get("metadata") or {}).get("labels") or {}).get("controller-revision-hash")
                != revision
            ]
            all_ready = all(is_ready(p) for p in pods.values() if _is_active(p))
            if stale and all_ready:
                await self._delete_pod(max(stale, key=lambda p: _ordinal(p["metadata"]["name"])))
        pods_now = [p for p in self._owned_pods(sts) if _is_active(p)]
        ready = sum(1 for p in pods_now if is_ready(p))
        updated = sum(
            1
            for p in pods_now
            if ((p.get("metadata") or {}).get("labels") or {}).get("controller-revision-hash") == revision
        )
        status: JsonObj = {
            "observedGeneration": md.get("generation", 1),
            "replicas": len(pods_now),
            "readyReplicas": ready,
            "currentReplicas": updated,
            "updatedReplicas": updated,
            "availableReplicas": ready,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        await self._write_status(STATEFULSETS, sts, status)

    # --- DaemonSet ------------------------------------------------------------------------------------------

    async def sync_daemonset(self, k: Key) -> None:
        ds = self._get(DAEMONSETS, k)
        if ds is None or (ds.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = ds.get("metadata") or {}
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        nodes = [
            n
            for n in self.store.list("nodes")
            if all(((n.get("metadata") or {}).get("labels") or {}).get(a) == b for a, b in selector.items())
        ]
        wanted = {(n.get("metadata") or {}).get("name") for n in nodes}
        revision = template_hash(template)
        by_node: dict[str, list[JsonObj]] = {}
        for pod in self._owned_pods(ds):
            if not _is_active(pod):
                continue
            node = _pinned_node(pod)
            by_node.setdefault(node or "", []).append(pod)
        for node_name in sorted(n for n in wanted if n):
            if node_name in by_node:
                continue
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node_name]}
                                ]
                            }
                        ]
                    }
                }
            }
            tolerations = list((template.get("spec") or {}).get("tolerations") or [])
            for key, effect in (
                ("node.kubernetes.io/not-ready", "NoExecute"),
                ("node.kubernetes.io/unreachable", "NoExecute"),
                ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ):
                tolerations.append({"key": key, "operator": "Exists", "effect": effect})
            await self._create_pod(
                ds,
                template,
                extra_labels={
                    "controller-revision-hash": revision,
                    "pod-template-generation": str(md.get("generation", 1)),
                },
                spec_patch={"affinity": affinity, "tolerations": tolerations},
            )
        for node_name, pods in by_node.items():
            extra = pods[1:] if node_name in wanted else pods
            for pod in extra:
                await self._delete_pod(pod)
        active = [p for p in self._owned_pods(ds) if _is_active(p)]
        scheduled = sum(1 for p in active if (p.get("spec") or {}).get("nodeName"))
        ready = sum(1 for p in active if is_ready(p))
        status: JsonObj = {
            "observedGeneration": md.get("generation", 1),
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": scheduled,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": scheduled,
        }
        if len(wanted) - ready > 0:
            status["numberUnavailable"] = len(wanted) - ready
        await self._write_status(DAEMONSETS, ds, status)

    # --- Job ------------------------------------------------------------------------------------------------

    async def sync_job(self, k: Key) -> None:
        job = self._get(JOBS, k)
        if job is None or (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = job.get("metadata") or {}
        spec = job.get("spec") or {}
        old = job.get("status") or {}
        if any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in old.get("conditions") or []
        ):
            return
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        backoff_limit = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
        pods = self._owned_pods(job)
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        active = [p for p in pods if _is_active(p)]
        now = disruption.rfc3339(self.clock.now())
        done = (succeeded >= int(completions)) if completions is not None else (succeeded > 0 and not active)
        failed_out = failed > backoff_limit
        if not done and not failed_out and not spec.get("suspend"):
            remaining = (int(completions) - succeeded) if completions is not None else parallelism
            want_active = (
                min(parallelism, remaining)
                if completions is not None
                else (parallelism if succeeded == 0 else 0)
            )
            template = copy.deepcopy(spec.get("template") or {})
            labels = {
                "batch.kubernetes.io/controller-uid": md.get("uid") or "",
                "batch.kubernetes.io/job-name": md.get("name") or "",
                "controller-uid": md.get("uid") or "",
                "job-name": md.get("name") or "",
            }
            for _ in range(max(0, want_active - len(active))):
                await self._create_pod(job, template, extra_labels=labels)
        pods = self._owned_pods(job)
        active = [p for p in pods if _is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        status: JsonObj = {
            "startTime": old.get("startTime") or now,
            "active": len(active),
            "ready": ready,
            "succeeded": succeeded,
            "failed": failed,
            "terminating": sum(1 for p in pods if (p.get("metadata") or {}).get("deletionTimestamp")),
            "uncountedTerminatedPods": {},
        }
        if done:
            status["completionTime"] = now
            status["conditions"] = [
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
            ]
        elif failed_out:
            status["conditions"] = [
                {
                    "type": "FailureTarget",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                    "lastProbeTime": now,
                    "lastTransitionTime": now,
                },
            ]
        for key in ("active", "ready", "succeeded", "failed", "terminating"):
            if status.get(key) == 0 and key not in ("ready", "terminating"):
                status.pop(key)
        await self._write_status(JOBS, job, status)

    # --- CronJob --------------------------------------------------------------------------------------------

    async def sync_cronjob(self, k: Key) -> None:
        cj = self._get(CRONJOBS, k)
        if cj is None or (cj.get("metadata") or {}).get("deletionTimestamp"):
            return
        md = cj.get("metadata") or {}
        spec = cj.get("spec") or {}
        status = copy.deepcopy(cj.get("status") or {})
        try:
            schedule = cron.parse(str(spec.get("schedule") or ""))
        except cron.CronError as err:
            await self._event(cj, "Warning", "UnparseableSchedule", f"unparseable schedule: {err}")
            return
        now = self.clock.now()
        jobs = [
            j
            for j in self.rt.cache(JOBS).owned_by(md.get("uid") or "")
            if (controller_of(j) or {}).get("uid") == md.get("uid")
        ]
        # Forget finished jobs from `active`; enforce history limits.
        active = [j for j in jobs if not _job_finished(j)]
        status["active"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": j["metadata"]["name"],
                "namespace": j["metadata"].get("namespace"),
                "uid": j["metadata"].get("uid"),
            }
            for j in sorted(active, key=lambda j: j["metadata"]["name"])
        ]
        if not status["active"]:
            status.pop("active")
        for finished_type, limit_key, default in (
            ("Complete", "successfulJobsHistoryLimit", 3),
            ("Failed", "failedJobsHistoryLimit", 1),
        ):
            limit = spec.get(limit_key, default)
            done = sorted(
                (j for j in jobs if _job_finished(j) == finished_type),
                key=lambda j: (j.get("status") or {}).get("startTime") or "",
            )
            for job in done[: max(0, len(done) - int(limit))]:
                try:
                    await self.store.delete(JOBS, job["metadata"].get("namespace"), job["metadata"]["name"])
                except ApiError as err:
                    if err.code != 404:
                        raise
        last = (
            disruption.parse_time(status.get("lastScheduleTime"))
            or disruption.parse_time(md.get("creationTimestamp"))
            or now
        )
        # Find the most recent missed time (<= now) after `last`.
        scheduled: float | None = None
        t = schedule.next_after(last)
        missed = 0
        while t <= now:
            scheduled = t
            missed += 1
            if missed > 100:
                # Too many missed start times: kube gives up on the backlog and starts the latest one.
                t_latest = t
                while True:
                    nxt = schedule.next_after(t_latest)
                    if nxt > now:
                        break
                    t_latest = nxt
                scheduled = t_latest
                break
            t = schedule.next_after(t)
        deadline = spec.get("startingDeadlineSeconds")
        if (
            scheduled is not None
            and not spec.get("suspend")
            and (deadline is None or scheduled + float(deadline) >= now)
        ):
            policy = spec.get("concurrencyPolicy") or "Allow"
            if policy == "Forbid" and active:
                scheduled = None  # skipped; retried on the next schedule
            else:
                if policy == "Replace":
                    for job in active:
                        await self.store.delete(
                            JOBS, job["metadata"].get("namespace"), job["metadata"]["name"]
                        )
                job_name = f"{md.get('name')}-{int(scheduled // 60)}"
                template = spec.get("jobTemplate") or {}
                tmd = template.get("metadata") or {}
                job = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": job_name,
                        "namespace": md.get("namespace"),
                        "labels": dict(tmd.get("labels") or {}),
                        "annotations": {
                            **(tmd.get("annotations") or {}),
                            "batch.kubernetes.io/cronjob-scheduled-timestamp": disruption.rfc3339(scheduled),
                        },
                        "ownerReferences": [owner_ref(cj)],
                    },
                    "spec": copy.deepcopy(template.get("spec") or {}),
                }
                try:
                    created = await self.store.create(JOBS, job, admit=True)
                    self.rt.observe(JOBS, created)
                    await self._event(cj, "Normal", "SuccessfulCreate", f"Created job {job_name}")
                    status.setdefault("active", []).append(
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job_name,
                            "namespace": md.get("namespace"),
                            "uid": created["metadata"].get("uid"),
                        }
                    )
                except ApiError as err:
                    if err.code != 409:
                        raise
        if scheduled is not None:
            status["lastScheduleTime"] = disruption.rfc3339(scheduled)
        successful = [j for j in jobs if _job_finished(j) == "Complete"]
        if successful:
            status["lastSuccessfulTime"] = max(
                (j.get("status") or {}).get("completionTime") or "" for j in successful
            )
        await self._write_status(CRONJOBS, cj, status)
        nxt = schedule.next_after(max(now, disruption.parse_time(status.get("lastScheduleTime")) or now))
        self._wake_at(CRONJOBS, key_of(cj), nxt)

    # --- PodDisruptionBudget --------------------------------------------------------------------------------

    def _expected_scale(self, pods: Sequence[Mapping[str, Any]]) -> int:
        return disruption.expected_scale(pods, self.store.get)

    async def sync_pdb(self, k: Key) -> None:
        pdb = self._get(PDBS, k)
        if pdb is None:
            return
        selector = (pdb.get("spec") or {}).get("selector")
        # Every matching pod, terminal ones too, as kube lists them: a Succeeded or Failed pod is never Ready,
        # so it counts toward an integer minAvailable's expectedPods (and its controller's scale) only.
        pods = [
            p
            for p in self.rt.cache("pods").in_namespace(k[0])
            if selector_matches(selector, (p.get("metadata") or {}).get("labels") or {})
        ]
        now = self.clock.now()
        # kube sends these at every sync too (counted as one Event each).
        if not pods:
            await self._event(pdb, "Normal", "NoPods", "No matching pods found", repeat=True)
        try:
            budget = disruption.compute(pdb, pods, self._expected_scale, now)
        except disruption.ScaleError as err:
            message = f"Failed to calculate the number of expected pods: {err}"
            await self._event(pdb, "Warning", "CalculateExpectedPodCountFailed", message, repeat=True)
            status = disruption.sync_failed_status(pdb, str(err), now)
        else:
            status = disruption.status_of(pdb, budget, now)
            if budget.unmanaged_pods:
                # kube logs them at V(4) and warns on the budget at every sync (counted as one Event).
                log.debug("sim: PodDisruptionBudget %s/%s: unmanaged pods %s", *k, budget.unmanaged_pods)
                message = disruption.unmanaged_pods_message(selector)
                await self._event(pdb, "Warning", "UnmanagedPods", message, repeat=True)
        await self._write_status(PDBS, pdb, status)
        # Disrupted-pod entries expire: look again when the oldest one would.
        stamps = [disruption.parse_time(s) for s in (status.get("disruptedPods") or {}).values()]
        due = [s + disruption.DELETION_TIMEOUT_S + 1 for s in stamps if s is not None]
        if due:
            self._wake_at(PDBS, k, min(due))


def _ordinal(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _pinned_node(pod: Mapping[str, Any]) -> str | None:
    spec = pod.get("spec") or {}
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and expr.get("values"):
                return str(expr["values"][0])
    return spec.get("nodeName")


def _job_finished(job: Mapping[str, Any]) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None
