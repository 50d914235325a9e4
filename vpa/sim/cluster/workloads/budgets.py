"""The disruption controller: `Budgets`, the status of every PodDisruptionBudget.

Owns: listing a budget's pods, computing its status through `vpa.sim.cluster.disruption`, the NoPods,
CalculateExpectedPodCountFailed and UnmanagedPods Events kube sends on every sync, and a wake-up when
the oldest disrupted-pod entry expires.

Must not: decide evictions (that is the eviction subresource in `podapi`) or call the network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vpa.sim import timestamps
from vpa.sim.cluster import disruption
from vpa.sim.cluster.pods import selector_matches
from vpa.sim.cluster.runtime import Key
from vpa.sim.cluster.workloads.base import (
    PDBS,
    ControllerBase,
    log,
)


class Budgets(ControllerBase):
    """PodDisruptionBudget: status from the matching pods."""

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
        stamps = [timestamps.parse_time(s) for s in (status.get("disruptedPods") or {}).values()]
        due = [s + disruption.DELETION_TIMEOUT_S + 1 for s in stamps if s is not None]
        if due:
            self._wake_at(PDBS, k, min(due))
