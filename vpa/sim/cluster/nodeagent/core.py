"""The node agent's state and its per-node bookkeeping: `AgentCore`.

Owns: the runtime, store, clock, options and usage it works with; the nodes in creation order, the pods'
run records, the pending pods and the nodes to try each on next, first fit's per-shape hints, the OOM-kill
count and resize events; the two sums per node (the scheduler's view: max of desired unless Infeasible,
allocated and actual requests, per the KEP; the kubelet's: max of allocated and actual; init containers and
pod-level resources as tracked, `_tracked_spec`), kept incrementally
by `_account`; forgetting a pod; and, when room frees on a node, retrying its deferred resizes in KEP-1287
order and the pending pods on it. `_kick` syncs a pod for a reason of our own.

Must not: write to the store or hold node, scheduling, kubelet, resize, restart or status logic (`nodes`,
`scheduling`, `kubelet`, `resize`, `restarts`, `status`); it declares what it and the mixins call of each
other, and `NodeAgent` in the package puts them together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vpa.model.clock import VirtualClock
from vpa.sim.cluster.nodeagent.runs import ContainerRun, NodeRun, PodRun
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.pods import GUARANTEED, effective_requests
from vpa.sim.cluster.runtime import Key, Runtime
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.contracts import JsonObj, Store


class AgentCore:
    """State and the per-node sums shared by the mixins that make up `NodeAgent`."""

    def __init__(
        self,
        runtime: Runtime,
        store: Store,
        clock: VirtualClock,
        options: ClusterOptions,
        usage: UsageRegistry,
    ) -> None:
        self.rt = runtime
        self.store = store
        self.clock = clock
        self.options = options
        self.version = options.kubernetes_version
        self.usage = usage
        self.nodes: dict[str, NodeRun] = {}
        self.node_order: list[str] = []
        self.runs: dict[Key, PodRun] = {}
        self.pending: dict[Key, None] = {}
        # Pending pods to try on the next pass: None = every node (new or changed pod), else only the nodes
        # where room freed since (the others did not fit before and have not changed).
        self._to_try: dict[Key, set[str] | None] = {}
        self._shape_hint: dict[tuple[int, int], int] = {}
        self.oom_kills = 0
        self.resize_events: list[tuple[Key, str]] = []  # (pod, "Deferred"/"Infeasible"/...) for diagnostics

    def _forget(self, run: PodRun) -> None:
        for timer in run.timers:
            self.rt.cancel(timer)
        for timer in run.oom_timers.values():
            self.rt.cancel(timer)
        self.runs.pop(run.key, None)
        node = self.nodes.get(run.node)
        if node is None:
            return
        node.deferred.discard(run.key)
        if run.key in node.pods:
            node.pods.discard(run.key)
            self._account(run, (0, 0), (0, 0))
            self._room_freed(run.node)

    def _account(self, run: PodRun, sched: tuple[int, int], kube: tuple[int, int]) -> None:
        node = self.nodes.get(run.node)
        if node is None:
            run.sched, run.kube = sched, kube
            return
        freed = (
            sched[0] < run.sched[0]
            or sched[1] < run.sched[1]
            or kube[0] < run.kube[0]
            or kube[1] < run.kube[1]
        )
        node.sched_cpu += sched[0] - run.sched[0]
        node.sched_mem += sched[1] - run.sched[1]
        node.kube_cpu += kube[0] - run.kube[0]
        node.kube_mem += kube[1] - run.kube[1]
        run.sched, run.kube = sched, kube
        if freed:
            self._room_freed(run.node)

    def _room_freed(self, node_name: str) -> None:
        self._shape_hint.clear()
        node = self.nodes.get(node_name)
        if node is not None and node.deferred:
            for k in self._deferred_order(node):
                self._kick(k)
        if self.pending and node_name in self.nodes:
            for k in self.pending:
                nodes = self._to_try.get(k, set())
                if nodes is not None:
                    nodes.add(node_name)
                    self._to_try[k] = nodes
            self.rt.enqueue("scheduler", ("", ""), self._schedule_pass)

    def _deferred_order(self, node: NodeRun) -> list[Key]:
        """KEP-1287 retry order: not increasing first, then priority, QoS (Guaranteed first), wait time."""

        def rank(k: Key) -> tuple[int, int, int, float]:
            pod = self.store.get("pods", k[0], k[1]) or {}
            run = self.runs.get(k)
            spec = pod.get("spec") or {}
            desired = effective_requests(spec)
            increasing = 1 if run is None or desired[0] > run.kube[0] or desired[1] > run.kube[1] else 0
            qos = 0 if (pod.get("status") or {}).get("qosClass") == GUARANTEED else 1
            since = run.pending[2] if run is not None and run.pending is not None else 0.0
            return (increasing, -int(spec.get("priority") or 0), qos, since)

        return sorted(node.deferred, key=rank)

    def _sched_view(self, pod: Mapping[str, Any], run: PodRun) -> tuple[int, int]:
        if not run.counted:
            return (0, 0)
        spec = pod.get("spec") or {}
        alloc, actual = self._held(spec, run)
        infeasible = run.pending is not None and run.pending[0] == "Infeasible"
        desired = (0, 0) if infeasible else effective_requests(spec)
        return (max(desired[0], alloc[0], actual[0]), max(desired[1], alloc[1], actual[1]))

    def _kube_view(self, pod: Mapping[str, Any], run: PodRun) -> tuple[int, int]:
        if not run.counted:
            return (0, 0)
        alloc, actual = self._held(pod.get("spec") or {}, run)
        return (max(alloc[0], actual[0]), max(alloc[1], actual[1]))

    @staticmethod
    def _tracked_spec(spec: Mapping[str, Any], run: PodRun, actual: bool) -> Mapping[str, Any]:
        """`spec` with its init containers' and pod-level resources as the kubelet allocated (or, with
        `actual`, actuated) them; the regular containers' are passed to `effective_requests` separately."""
        if not run.inits and run.pod_level is None:
            return spec
        out = dict(spec)
        if run.inits:
            inits = []
            for c in spec.get("initContainers") or []:
                rec = run.inits.get(c.get("name"))
                inits.append(
                    c if rec is None else {**c, "resources": rec.actual if actual else rec.allocated}
                )
            out["initContainers"] = inits
        if run.pod_level is not None and isinstance(spec.get("resources"), Mapping):
            out["resources"] = run.pod_level.actual if actual else run.pod_level.allocated
        return out

    @classmethod
    def _held(cls, spec: Mapping[str, Any], run: PodRun) -> tuple[tuple[int, int], tuple[int, int]]:
        """The pod's (CPU, memory) requests as allocated and as actuated, from its containers' runs, its
        init containers' and its pod-level record."""
        names = [c.get("name") for c in spec.get("containers") or []]
        alloc = effective_requests(
            cls._tracked_spec(spec, run, actual=False),
            containers_override=[
                run.containers[n].allocated_amounts()[0] if n in run.containers else {} for n in names
            ],
        )
        actual = effective_requests(
            cls._tracked_spec(spec, run, actual=True),
            containers_override=[
                run.containers[n].actual_amounts()[0] if n in run.containers else {} for n in names
            ],
        )
        return alloc, actual

    def _enqueue_sync(self, k: Key) -> Any:
        def fire(_due: float) -> None:
            self._kick(k)

        return fire

    def _kick(self, k: Key) -> None:
        """Sync a pod for a reason of our own (a timer, room freed), even if nobody changed it."""
        run = self.runs.get(k)
        if run is not None:
            run.dirty = True
        self.rt.enqueue("kubelet", k, self.sync_pod)

    # --- implemented by the mixins --------------------------------------------------------------------------

    def _on_pod(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        raise NotImplementedError

    async def _schedule_pass(self, _key: Key) -> None:
        raise NotImplementedError

    def _new_run(self, k: Key, pod: JsonObj, node: NodeRun, now: float) -> PodRun:
        raise NotImplementedError

    async def sync_pod(self, k: Key) -> None:
        raise NotImplementedError

    def _after_start(self, pod: Mapping[str, Any], run: PodRun) -> None:
        raise NotImplementedError

    def _release(self, pod: Mapping[str, Any], run: PodRun) -> None:
        raise NotImplementedError

    def _handle_resize(self, pod: JsonObj, run: PodRun, node: NodeRun, now: float) -> None:
        raise NotImplementedError

    def _restart_container(
        self,
        pod: Mapping[str, Any],
        run: PodRun,
        c: ContainerRun,
        at: float,
        terminated: JsonObj,
        resize: bool = False,
    ) -> None:
        raise NotImplementedError

    def _arm_oom(
        self, pod: Mapping[str, Any], run: PodRun, c: ContainerRun, since: float | None = None
    ) -> None:
        raise NotImplementedError

    def _status(self, pod: Mapping[str, Any], run: PodRun) -> JsonObj:
        raise NotImplementedError

    async def _write_status(self, pod: JsonObj, run: PodRun) -> None:
        raise NotImplementedError
