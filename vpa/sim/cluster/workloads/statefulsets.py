"""The StatefulSet controller: `StatefulSets`.

Owns: ordinal pods `<sts>-<i>` (hostname, subdomain, pod-name, pod-index and revision labels), recreated
under the same name once the old pod is gone; OrderedReady creates one pod at a time, Parallel all at
once; scale-down from the highest ordinal; rolling update replacing the highest-ordinal stale pod once all
are ready; and the StatefulSet's status.

Must not: schedule or run pods (the node agent does), or call the network.
"""

from __future__ import annotations

from vpa.sim.cluster.pods import is_ready
from vpa.sim.cluster.runtime import Key
from vpa.sim.cluster.workloads.base import (
    STATEFULSETS,
    ControllerBase,
    is_active,
    template_hash,
)
from vpa.sim.contracts import JsonObj


class StatefulSets(ControllerBase):
    """StatefulSet: ordinal pods, rolling update and status."""

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
            if not parallel and not (is_ready(pod) and is_active(pod)):
                break
        for pod_name, pod in sorted(pods.items(), key=lambda kv: -_ordinal(kv[0])):
            if _ordinal(pod_name) >= replicas and is_active(pod):
                await self._delete_pod(pod)
                if not parallel:
                    break
        # Rolling update: replace the highest-ordinal pod of an old revision, one at a time.
        if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate":
            stale = [
                p
                for n, p in pods.items()
                if _ordinal(n) < replicas
                and is_active(p)
                and ((p.get("metadata") or {}).get("labels") or {}).get("controller-revision-hash")
                != revision
            ]
            all_ready = all(is_ready(p) for p in pods.values() if is_active(p))
            if stale and all_ready:
                await self._delete_pod(max(stale, key=lambda p: _ordinal(p["metadata"]["name"])))
        pods_now = [p for p in self._owned_pods(sts) if is_active(p)]
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


def _ordinal(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1
