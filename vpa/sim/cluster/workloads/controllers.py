"""All workload controllers as one object, `Controllers`, and the routing of watch events to them.

Owns: registering the event handlers on the runtime, which object's sync a change enqueues (a pod or a
ReplicaSet or Job wakes its controller owner, a pod its PodDisruptionBudgets, a node every DaemonSet),
and the service-account controller (the `default` ServiceAccount of every namespace), too small for a
module of its own.

Must not: sync any workload kind itself (the mixins do).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vpa.sim.cluster import disruption
from vpa.sim.cluster.pods import controller_of, selector_matches
from vpa.sim.cluster.runtime import Key, key_of
from vpa.sim.cluster.workloads.base import (
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    NAMESPACES,
    PDBS,
    RCS,
    REPLICASETS,
    SERVICEACCOUNTS,
    STATEFULSETS,
)
from vpa.sim.cluster.workloads.batch import CronJobs, Jobs
from vpa.sim.cluster.workloads.budgets import Budgets
from vpa.sim.cluster.workloads.daemonsets import DaemonSets
from vpa.sim.cluster.workloads.replicas import Deployments, ReplicaSets
from vpa.sim.cluster.workloads.statefulsets import StatefulSets
from vpa.sim.contracts import ApiError, JsonObj

# The owner kinds the controllers here run, by kind: the disruption controller's table of them, one list.
_KIND_RESOURCE = {kind: resource for (_, kind), (resource, _) in disruption.OWNER_RESOURCES.items()}


class Controllers(ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, CronJobs, Budgets):
    """All workload controllers, sharing the runtime's caches and work queue."""

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
