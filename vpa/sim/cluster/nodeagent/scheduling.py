"""The scheduler: the `Scheduling` mixin of `NodeAgent`.

Owns: pod events (an unbound pod queues for scheduling unless another scheduler, a scheduling gate or, with
`ClusterOptions.schedule=False`, kube-scheduler owns it; a bound pod goes to the kubelet; a deleted one is
forgotten); the scheduling pass in priority then creation order; first fit on requests with nodeSelector,
required node affinity, taints and tolerations, unschedulable nodes and pod count, remembering per request
shape where to start; `PodScheduled=False`, reason `Unschedulable`, with kube-scheduler's message; binding.

Must not: start containers or write a bound pod's status beyond the one its binding carries (`kubelet`,
`status`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vpa.sim.cluster.nodeagent.common import UNSCHEDULABLE_TAINT, rfc3339
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import NodeRun
from vpa.sim.cluster.pods import effective_requests
from vpa.sim.cluster.runtime import Key, key_of
from vpa.sim.contracts import ApiError, JsonObj

_RESOURCE_REASONS = frozenset({"Insufficient cpu", "Insufficient memory", "Too many pods"})


class Scheduling(AgentCore):
    """Pod events, first-fit scheduling and binding."""

    def _on_pod(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        k = key_of(obj)
        md = obj.get("metadata") or {}
        if etype == "DELETED":
            run = self.runs.get(k)
            if run is not None and run.uid == md.get("uid"):
                self._forget(run)
            self.pending.pop(k, None)
            self.usage.forget(md.get("uid") or "")
            return
        spec = obj.get("spec") or {}
        if not spec.get("nodeName"):
            if not self.options.schedule:
                return  # a real scheduler binds it; the watch brings it back with spec.nodeName
            if md.get("deletionTimestamp") or (obj.get("status") or {}).get("phase") in (
                "Succeeded",
                "Failed",
            ):
                self.pending.pop(k, None)
                return
            if (spec.get("schedulerName") or "default-scheduler") != "default-scheduler":
                return
            if spec.get("schedulingGates"):
                return
            if k not in self.pending or previous is None or previous.get("spec") != spec:
                self._to_try[k] = None
                self.rt.enqueue("scheduler", ("", ""), self._schedule_pass)
            self.pending[k] = None
            return
        self.pending.pop(k, None)
        self._to_try.pop(k, None)
        self.rt.enqueue("kubelet", k, self.sync_pod)

    async def _schedule_pass(self, _key: Key) -> None:
        def order(k: Key) -> tuple[int, str, str]:
            pod = self.store.get("pods", k[0], k[1]) or {}
            md = pod.get("metadata") or {}
            return (
                -int((pod.get("spec") or {}).get("priority") or 0),
                md.get("creationTimestamp") or "",
                f"{k[0]}/{k[1]}",
            )

        batch = self._to_try
        self._to_try = {}
        for k in sorted(batch, key=order):
            if k not in self.pending:
                continue
            pod = self.store.get("pods", k[0], k[1])
            if (
                pod is None
                or (pod.get("spec") or {}).get("nodeName")
                or (pod.get("metadata") or {}).get("deletionTimestamp")
            ):
                self.pending.pop(k, None)
                continue
            try:
                await self._schedule_one(k, pod, batch[k])
            except ApiError as err:
                if err.code not in (404, 409):
                    raise
                if err.code == 404:
                    self.pending.pop(k, None)

    def _fits(self, node: NodeRun, pod: Mapping[str, Any], cpu: int, mem: int) -> str | None:
        """None when the pod fits `node`, else the reason (for the Unschedulable message)."""
        spec = pod.get("spec") or {}
        tolerations = spec.get("tolerations") or []
        for taint in node.taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in tolerations
            ):
                if taint.get("key") == UNSCHEDULABLE_TAINT:
                    return "node(s) were unschedulable"
                return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
        selector = spec.get("nodeSelector") or {}
        if any(node.labels.get(k) != v for k, v in selector.items()):
            return "node(s) didn't match Pod's node affinity/selector"
        if not _affinity_matches(spec, node):
            return "node(s) didn't match Pod's node affinity/selector"
        if len(node.pods) >= node.max_pods:
            return "Too many pods"
        if node.sched_cpu + cpu > node.cpu:
            return "Insufficient cpu"
        if node.sched_mem + mem > node.memory:
            return "Insufficient memory"
        return None

    async def _schedule_one(self, k: Key, pod: JsonObj, only: set[str] | None) -> None:
        spec = pod.get("spec") or {}
        cpu, mem = effective_requests(spec)
        if only is not None:
            # A retry after room freed: only those nodes changed, and the first of them that fits is the
            # first fit overall (every other node refused this pod before). No fit: the reason stands.
            for name in sorted(only, key=lambda n: self.nodes[n].index if n in self.nodes else 1 << 30):
                node = self.nodes.get(name)
                if node is not None and self._fits(node, pod, cpu, mem) is None:
                    await self._bind(k, pod, node)
                    return
            return
        # First-fit remembers, per request shape, the first node that could still take such a pod (nodes
        # before it were full for that shape; freeing room clears the hints). Constrained pods scan all.
        constrained = bool(spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity"))
        shape = (cpu, mem)
        start = 0 if constrained else self._shape_hint.get(shape, 0)
        chosen: NodeRun | None = None
        reasons: dict[str, int] = {}
        # The hint may only skip nodes that were too full; a node refused for another reason (a taint this pod
        # did not tolerate) may suit the next pod of the same shape.
        hint: int | None = None
        for i in range(start, len(self.node_order)):
            node = self.nodes[self.node_order[i]]
            reason = self._fits(node, pod, cpu, mem)
            if reason is None:
                chosen = node
                if not constrained:
                    self._shape_hint[shape] = i if hint is None else hint
                break
            if hint is None and reason not in _RESOURCE_REASONS:
                hint = i
            reasons[reason] = reasons.get(reason, 0) + 1
        if chosen is None:
            if start > 0:
                # Nodes before the hint were full for this shape when last checked: count them too.
                for i in range(start):
                    reason = self._fits(self.nodes[self.node_order[i]], pod, cpu, mem) or "Insufficient cpu"
                    reasons[reason] = reasons.get(reason, 0) + 1
            await self._mark_unschedulable(pod, reasons)
            return
        await self._bind(k, pod, chosen)

    async def _mark_unschedulable(self, pod: JsonObj, reasons: dict[str, int]) -> None:
        total = len(self.node_order)
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        message = (
            f"0/{total} nodes are available: {detail}." if total else "no nodes available to schedule pods"
        )
        if total:
            message += (
                f" preemption: 0/{total} nodes are available: {total} No preemption victims found for "
                "incoming "
                "pod."
            )
        status = pod.get("status") or {}
        cur = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if cur is not None and cur.get("status") == "False" and cur.get("message") == message:
            return
        new = copy.deepcopy(pod)
        st = new.setdefault("status", {})
        conds = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conds.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(self.clock.now()),
            }
        )
        st["conditions"] = conds
        st["phase"] = "Pending"
        result = await self.store.update("pods", new, subresource="status")
        self.rt.observe("pods", result)

    async def _bind(self, k: Key, pod: JsonObj, node: NodeRun) -> None:
        now = self.clock.now()
        new = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node.name}}  # the store copies it
        run = self._new_run(k, new, node, now)
        new["status"] = self._status(new, run)
        result = await self.store.update("pods", new, subresource="binding")
        self.pending.pop(k, None)
        run.last_rv = (result.get("metadata") or {}).get("resourceVersion")
        run.dirty = False
        self.runs[k] = run
        node.pods.add(k)
        self._account(run, self._sched_view(result, run), self._kube_view(result, run))
        self.rt.observe("pods", result)
        self._after_start(result, run)
        if (result.get("metadata") or {}).get("generation") != (new["metadata"] or {}).get("generation"):
            self._kick(k)  # the write bumped metadata.generation: report it as observed


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def _affinity_matches(spec: Mapping[str, Any], node: NodeRun) -> bool:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    for term in terms:
        ok = True
        for expr in term.get("matchExpressions") or []:
            ok = ok and _expr_matches(
                expr, node.labels.get(expr.get("key", "")), expr.get("key", "") in node.labels
            )
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name":
                ok = ok and _expr_matches(expr, node.name, True)
        if ok:
            return True
    return False


def _expr_matches(expr: Mapping[str, Any], value: str | None, present: bool) -> bool:
    op = expr.get("operator")
    values = expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            a, b = int(value or ""), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False
