"""The DaemonSet controller: `DaemonSets`.

Owns: one pod per node matching the template's nodeSelector, pinned with required node affinity on
`metadata.name` and the tolerations kube's DaemonSet controller adds, surplus pods deleted, and the
DaemonSet's status.

Must not: schedule or run pods (the node agent does), or call the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.pods import is_ready
from vpa.sim.cluster.runtime import Key
from vpa.sim.cluster.workloads.base import (
    DAEMONSETS,
    ControllerBase,
    is_active,
    template_hash,
)
from vpa.sim.contracts import JsonObj


class DaemonSets(ControllerBase):
    """DaemonSet: one pinned pod per node, and status."""

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
            if not is_active(pod):
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
        active = [p for p in self._owned_pods(ds) if is_active(p)]
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
