"""The ReplicaSet, ReplicationController and Deployment controllers: `ReplicaSets` and `Deployments`.

Owns: keeping a ReplicaSet's or ReplicationController's replica count (missing pods created from the
template with generateName `<owner>-`, surplus pods deleted, least useful first) and its status; a
Deployment's ReplicaSet `<deployment>-<pod-template-hash>` (label `pod-template-hash`, revision
annotations; a template change creates a new one at the full replica count and scales the old ones to
zero), ScalingReplicaSet Events, and the Deployment's status with its Available and Progressing conditions.

Must not: schedule or run pods (the node agent does), or call the network.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

from vpa.sim import timestamps
from vpa.sim.cluster import disruption
from vpa.sim.cluster.pods import controller_of, is_ready, map_selector_matches, selector_matches
from vpa.sim.cluster.runtime import Key, key_of
from vpa.sim.cluster.workloads.base import (
    DEPLOYMENTS,
    RCS,
    REPLICASETS,
    ControllerBase,
    is_active,
    owner_ref,
    template_hash,
)
from vpa.sim.contracts import ApiError, JsonObj


class ReplicaSets(ControllerBase):
    """ReplicaSet and ReplicationController: the replica count and status."""

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
        active = [p for p in pods if is_active(p)]
        if len(active) < want:
            template = spec.get("template") or {}
            for _ in range(want - len(active)):
                if await self._create_pod(owner, template) is None:
                    break
        elif len(active) > want:
            for pod in sorted(active, key=self._delete_rank)[: len(active) - want]:
                await self._delete_pod(pod)
        pods = [p for p in self._owned_pods(owner) if matches((p.get("metadata") or {}).get("labels") or {})]
        active = [p for p in pods if is_active(p)]
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


class Deployments(ControllerBase):
    """Deployment: its ReplicaSets, their scale and its status."""

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
        now = timestamps.rfc3339(self.clock.now())
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
