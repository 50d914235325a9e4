"""The node agent: the scheduler and a kubelet per node, driven by watch events and virtual-time timers.

Owns: Node objects (capacity, allocatable, Ready), first-fit scheduling on requests (nodeSelector, required
node affinity, unschedulable nodes, pod count; pods that fit nowhere stay Pending with `PodScheduled=False`,
reason `Unschedulable`), pod start (phase, conditions, container statuses with `allocatedResources` and
`resources`, IPs, start time), in-place resize as the kubelet of the configured version does it (allocation
check: Infeasible above allocatable, Deferred above free room, retried in KEP priority order when room frees;
`PodResizeInProgress` until actuated, `Error` when a no-restart memory-limit decrease is below usage;
`status.resize` instead of conditions on 1.32; `RestartContainer` restarts the container), OOM kills when a
container's usage profile exceeds its memory limit (exit 137, `OOMKilled`, restart count, leak reset), Job
pods that complete after a virtual run time, graceful deletion (containers stop, then the pod is removed
with grace period 0), and, against a real control plane, each node's Lease heartbeat (scheduling is then
left to kube-scheduler: `ClusterOptions.schedule=False`).

Bookkeeping per node keeps two sums: the scheduler's view (max of desired unless Infeasible, allocated and
actual requests, per the KEP) and the kubelet's (max of allocated and actual). Everything is incremental:
one pod event touches one pod and one node; deferred resizes and pending pods are retried only when room
frees on a node.

Must not: run controllers (ReplicaSets etc. live in `workloads`) or compute metrics (`metrics`).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vpa.model.clock import VirtualClock
from vpa.model.quantity import format_cpu_millicores, format_memory_bytes
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.pods import (
    CPU,
    GUARANTEED,
    MEMORY,
    RESTART_CONTAINER,
    amount,
    container_amounts,
    effective_requests,
    is_sidecar,
    restart_policy_for,
)
from vpa.sim.cluster.profiles import Leak
from vpa.sim.cluster.runtime import Key, Runtime, key_of
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.contracts import ApiError, JsonObj, Store

RUN_SECONDS_ANNOTATION = "sim.vpa.dev/run-seconds"
_LEASES = "leases.coordination.k8s.io"
_NODE_LEASE_NS = "kube-node-lease"
_OOM_SCAN_STEP_S = 5.0
_OOM_HORIZON_S = 6 * 3600.0
_BACKOFF_RESET_S = 600.0


def rfc3339(t: float) -> str:
    return _rfc3339(int(t))


@functools.lru_cache(maxsize=4096)
def _rfc3339(t: int) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


def _limited(rl: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (rl or {}).items() if k in (CPU, MEMORY)}


def _resources_of(container: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    res = container.get("resources") or {}
    return {"requests": _limited(res.get("requests")), "limits": _limited(res.get("limits"))}


def _amounts(res: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """(requests, limits) as integers; memoised, so the returned dicts are shared and must not be changed."""
    key = (
        tuple(sorted((res.get("requests") or {}).items())),
        tuple(sorted((res.get("limits") or {}).items())),
    )
    try:
        return _amounts_cached(key)
    except TypeError:  # an unhashable value: not worth caching
        return _parse_amounts(res)


def _parse_amounts(res: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    return (
        container_amounts({"resources": {"requests": res.get("requests")}}, "requests"),
        container_amounts({"resources": {"limits": res.get("limits")}}, "limits"),
    )


@functools.lru_cache(maxsize=8192)
def _amounts_cached(key: tuple[tuple[Any, ...], tuple[Any, ...]]) -> tuple[dict[str, int], dict[str, int]]:
    return _parse_amounts({"requests": dict(key[0]), "limits": dict(key[1])})


# What a kubelet of the version declares in `status.declaredFeatures` (NodeDeclaredFeatures, beta 1.36, GA
# 1.37), as the release's own kubelet reports it on a hollow node. kube-apiserver's PodResizeValidator refuses
# (403) a resize the pod's node does not declare, a pod-level one for instance.
_DECLARED_1_36 = (
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "RestartAllContainersOnContainerExits",
)
DECLARED_FEATURES: dict[tuple[int, int], tuple[str, ...]] = {(1, 36): _DECLARED_1_36, (1, 37): _DECLARED_1_36}


def _fmt_amount(resource: str, value: int) -> str:
    return format_cpu_millicores(value) if resource == CPU else format_memory_bytes(value)


def _add_limit(total: int | None, limit: int | None) -> int | None:
    """A pod's memory limit is the sum of its containers'; one container without a limit leaves it unset."""
    return None if total is None or limit is None else total + limit


def _same(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> bool:
    return _amounts(a) == _amounts(b)


@dataclass
class ContainerRun:
    name: str
    image: str
    started_at: float
    allocated: dict[str, dict[str, Any]]
    actual: dict[str, dict[str, Any]]
    restart_count: int = 0
    last_terminated: JsonObj | None = None
    terminated: JsonObj | None = None  # set when the container exited for good
    waiting_until: float | None = None  # crash back-off
    crashes: int = 0  # consecutive crashes (for the back-off)
    # When an in-place resize last lowered the memory limit: usage before it was judged by the old limit, so
    # the OOM check never looks back past it.
    mem_limit_lowered_at: float = 0.0

    # Parsed (requests, limits) of `allocated` / `actual`, recomputed when those dicts are replaced (they are
    # never changed in place).
    _alloc_memo: tuple[Any, Any] = (None, None)
    _actual_memo: tuple[Any, Any] = (None, None)

    def allocated_amounts(self) -> tuple[dict[str, int], dict[str, int]]:
        if self._alloc_memo[0] is not self.allocated:
            self._alloc_memo = (self.allocated, _amounts(self.allocated))
        return self._alloc_memo[1]  # type: ignore[no-any-return]

    def actual_amounts(self) -> tuple[dict[str, int], dict[str, int]]:
        if self._actual_memo[0] is not self.actual:
            self._actual_memo = (self.actual, _amounts(self.actual))
        return self._actual_memo[1]  # type: ignore[no-any-return]

    def container_id(self, uid: str) -> str:
        digest = hashlib.sha256(f"{uid}/{self.name}/{self.restart_count}".encode()).hexdigest()
        return f"containerd://{digest}"


@dataclass
class PodRun:
    key: Key
    uid: str
    node: str
    pod_ip: str
    bound_at: float
    start_at: float
    containers: dict[str, ContainerRun] = field(default_factory=dict)
    phase: str = "Pending"
    pending: tuple[str, str, float, int] | None = None  # (reason, message, since, generation)
    pending_for: Any = None  # the desired resources an Infeasible verdict was about
    in_progress: tuple[str, str, float, int] | None = None  # (reason, message, since, generation)
    resize_error: str | None = None  # the last failed actuation's message, published one sync later
    actuate_at: float | None = None
    sched: tuple[int, int] = (0, 0)
    kube: tuple[int, int] = (0, 0)
    counted: bool = True
    stop_at: float | None = None
    complete_at: float | None = None
    cond_times: dict[str, tuple[str, str]] = field(default_factory=dict)
    timers: list[Any] = field(default_factory=list)
    oom_timers: dict[str, Any] = field(default_factory=dict)
    # The resourceVersion of our own last write: a watch event carrying it needs no sync unless `dirty`.
    last_rv: str | None = None
    dirty: bool = True


@dataclass
class NodeRun:
    name: str
    index: int
    cpu: int
    memory: int
    max_pods: int
    labels: dict[str, str]
    taints: list[JsonObj] = field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True
    sched_cpu: int = 0
    sched_mem: int = 0
    kube_cpu: int = 0
    kube_mem: int = 0
    pods: set[Key] = field(default_factory=set)
    deferred: set[Key] = field(default_factory=set)
    ip_counter: int = 0

    @property
    def ip(self) -> str:
        return f"10.0.{self.index // 250}.{self.index % 250 + 2}"


class NodeAgent:
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

    # --- registration ----------------------------------------------------------------------------------

    def register(self) -> None:
        self.rt.on_event("pods", self._on_pod)
        self.rt.on_event("nodes", self._on_node)

    async def create_nodes(self) -> None:
        o = self.options
        existing = {key_of(n)[1] for n in self.store.list("nodes")}
        for i in range(1, o.nodes + 1):
            name = f"{o.node_name_prefix}{i}"
            if name in existing:
                continue
            node = self._node_object(name, i - 1)
            created = await self.store.create("nodes", node, admit=False)
            if not (created.get("status") or {}).get("allocatable"):
                with_status = copy.deepcopy(created)
                with_status["status"] = node["status"]
                created = await self.store.update("nodes", with_status, subresource="status")
            self._on_node("ADDED", created, None)
        if o.node_lease_renew_s > 0:
            self.rt.after(0.0, self._renew_leases)

    async def _renew_leases(self, due: float) -> None:
        """The kubelet's heartbeat: each of our nodes renews its Lease in kube-node-lease."""
        o = self.options
        self.rt.after(o.node_lease_renew_s, self._renew_leases)  # the next round, whatever this one meets
        stamp = dt.datetime.fromtimestamp(due, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        duration = max(40, int(o.node_lease_renew_s * 4))
        for i in range(1, o.nodes + 1):
            name = f"{o.node_name_prefix}{i}"
            node = self.store.get("nodes", None, name)
            if node is None:
                continue
            lease = self.store.get(_LEASES, _NODE_LEASE_NS, name)
            spec = {"holderIdentity": name, "leaseDurationSeconds": duration, "renewTime": stamp}
            try:
                if lease is None:
                    md = node.get("metadata") or {}
                    owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": md.get("uid", "")}
                    await self.store.create(
                        _LEASES,
                        {
                            "apiVersion": "coordination.k8s.io/v1",
                            "kind": "Lease",
                            "metadata": {
                                "name": name,
                                "namespace": _NODE_LEASE_NS,
                                "ownerReferences": [owner],
                            },
                            "spec": spec,
                        },
                        admit=False,
                    )
                else:
                    await self.store.update(_LEASES, {**lease, "spec": {**(lease.get("spec") or {}), **spec}})
            except ApiError as err:
                if err.code not in (404, 409):
                    raise  # the runtime logs it; the next round retries

    def _node_object(self, name: str, index: int) -> JsonObj:
        o = self.options
        now = rfc3339(self.clock.now())
        resources = {
            "cpu": f"{o.node_cpu_millicores}m"
            if o.node_cpu_millicores % 1000
            else str(o.node_cpu_millicores // 1000),
            "memory": f"{o.node_memory_bytes // 1024}Ki",
            "pods": str(o.max_pods_per_node),
            "ephemeral-storage": "100Gi",
        }
        ip = NodeRun(name, index, 0, 0, 0, {}).ip
        major, minor = self.version
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64",
                    "node.kubernetes.io/instance-type": "sim",
                },
            },
            "spec": {"podCIDR": f"10.{64 + index // 256}.{index % 256}.0/24"},
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [
                    {
                        "type": t,
                        "status": "False",
                        "reason": r,
                        "message": m,
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                    for t, r, m in (
                        (
                            "MemoryPressure",
                            "KubeletHasSufficientMemory",
                            "kubelet has sufficient memory available",
                        ),
                        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    )
                ]
                + [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "nodeInfo": {
                    "kubeletVersion": f"v{major}.{minor}.0",
                    "kubeProxyVersion": f"v{major}.{minor}.0",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "containerd://2.1.0",
                    "osImage": "vpa sim",
                    "kernelVersion": "6.8.0",
                    "machineID": hashlib.md5(name.encode()).hexdigest(),
                    "systemUUID": hashlib.md5(name.encode()).hexdigest(),
                    "bootID": "",
                },
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                **(
                    {"declaredFeatures": list(DECLARED_FEATURES[self.version])}
                    if self.version in DECLARED_FEATURES
                    else {}
                ),
            },
        }

    # --- node events ----------------------------------------------------------------------------------------

    def _on_node(self, etype: str, obj: JsonObj, previous: JsonObj | None) -> None:
        name = key_of(obj)[1]
        if etype == "DELETED":
            node = self.nodes.pop(name, None)
            if node is not None:
                self.node_order.remove(name)
            self._shape_hint.clear()
            return
        status = obj.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        try:
            cpu = amount(CPU, alloc.get("cpu", "0"))
            mem = amount(MEMORY, alloc.get("memory", "0"))
            max_pods = int(amount("pods", alloc.get("pods", "110")))
        except Exception:
            return
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        node = self.nodes.get(name)
        if node is None:
            index = len(self.node_order)
            node = NodeRun(
                name, index, cpu, mem, max_pods, dict((obj.get("metadata") or {}).get("labels") or {})
            )
            self.nodes[name] = node
            self.node_order.append(name)
        else:
            node.cpu, node.memory, node.max_pods = cpu, mem, max_pods
            node.labels = dict((obj.get("metadata") or {}).get("labels") or {})
        was_schedulable = not node.unschedulable and node.ready
        node.unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
        node.ready = ready
        # The node lifecycle controller's taints stand for cordoned and not-ready nodes.
        taints = [dict(t) for t in (obj.get("spec") or {}).get("taints") or []]
        if node.unschedulable and not any(t.get("key") == _UNSCHEDULABLE for t in taints):
            taints.append({"key": _UNSCHEDULABLE, "effect": "NoSchedule"})
        if not ready and not any(t.get("key") == _NOT_READY for t in taints):
            taints.append({"key": _NOT_READY, "effect": "NoSchedule"})
        node.taints = taints
        self._shape_hint.clear()
        if (
            (not node.unschedulable and node.ready and not was_schedulable)
            or etype == "ADDED"
            or (previous is not None and previous.get("status", {}).get("allocatable") != alloc)
        ):
            self._room_freed(name)

    # --- pod events -----------------------------------------------------------------------------------------

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

    # --- scheduling -----------------------------------------------------------------------------------------

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
                if taint.get("key") == _UNSCHEDULABLE:
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

    def _new_run(self, k: Key, pod: JsonObj, node: NodeRun, now: float) -> PodRun:
        node.ip_counter += 1
        n = node.ip_counter
        ip = f"10.{64 + node.index // 256}.{node.index % 256}.{n % 253 + 1}"
        start_at = now + self.options.pod_start_delay_s
        run = PodRun(k, (pod.get("metadata") or {}).get("uid") or "", node.name, ip, now, start_at)
        for c in (pod.get("spec") or {}).get("containers") or []:
            res = _resources_of(c)
            run.containers[c["name"]] = ContainerRun(
                c["name"], str(c.get("image") or ""), start_at, copy.deepcopy(res), copy.deepcopy(res)
            )
        run.phase = "Running" if start_at <= now else "Pending"
        return run

    # --- the kubelet ----------------------------------------------------------------------------------------

    def _sched_view(self, pod: Mapping[str, Any], run: PodRun) -> tuple[int, int]:
        if not run.counted:
            return (0, 0)
        spec = pod.get("spec") or {}
        names = [c.get("name") for c in spec.get("containers") or []]
        alloc = effective_requests(
            spec,
            containers_override=[
                run.containers[n].allocated_amounts()[0] if n in run.containers else {} for n in names
            ],
        )
        actual = effective_requests(
            spec,
            containers_override=[
                run.containers[n].actual_amounts()[0] if n in run.containers else {} for n in names
            ],
        )
        infeasible = run.pending is not None and run.pending[0] == "Infeasible"
        desired = (0, 0) if infeasible else effective_requests(spec)
        return (max(desired[0], alloc[0], actual[0]), max(desired[1], alloc[1], actual[1]))

    def _kube_view(self, pod: Mapping[str, Any], run: PodRun) -> tuple[int, int]:
        if not run.counted:
            return (0, 0)
        spec = pod.get("spec") or {}
        names = [c.get("name") for c in spec.get("containers") or []]
        alloc = effective_requests(
            spec,
            containers_override=[
                run.containers[n].allocated_amounts()[0] if n in run.containers else {} for n in names
            ],
        )
        actual = effective_requests(
            spec,
            containers_override=[
                run.containers[n].actual_amounts()[0] if n in run.containers else {} for n in names
            ],
        )
        return (max(alloc[0], actual[0]), max(alloc[1], actual[1]))

    async def sync_pod(self, k: Key) -> None:
        pod = self.store.get("pods", k[0], k[1])
        run = self.runs.get(k)
        if pod is None:
            if run is not None:
                self._forget(run)
            return
        md = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        if run is not None and run.uid != md.get("uid"):
            self._forget(run)
            run = None
        if run is not None and not run.dirty and md.get("resourceVersion") == run.last_rv:
            return  # the echo of our own write
        if run is not None:
            run.dirty = False
        node = self.nodes.get(spec.get("nodeName") or "")
        if node is None:
            return
        now = self.clock.now()
        if run is None:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            # Bound by someone else (or before we started): the kubelet's admission check first.
            rejection = self._admission_failure(pod, node)
            if rejection is not None:
                await self._reject(pod, *rejection)
                return
            run = self._new_run(k, pod, node, now)
            self.runs[k] = run
            node.pods.add(k)
            self._account(run, self._sched_view(pod, run), self._kube_view(pod, run))
            self._after_start(pod, run)
        if md.get("deletionTimestamp"):
            await self._terminate(pod, run, now)
            return
        if run.phase in ("Succeeded", "Failed"):
            await self._write_status(pod, run)
            return
        if run.phase == "Pending" and run.start_at <= now:
            run.phase = "Running"
            for c in run.containers.values():
                c.started_at = max(c.started_at, run.start_at)
            self._after_start(pod, run)
        if run.phase == "Running":
            self._handle_resize(pod, run, node, now)
            for c in run.containers.values():
                if c.waiting_until is not None and c.waiting_until <= now:
                    c.waiting_until = None  # started_at already is the end of the back-off
                    self._arm_oom(pod, run, c)
        await self._write_status(pod, run)

    def _after_start(self, pod: Mapping[str, Any], run: PodRun) -> None:
        if run.phase == "Pending":
            run.timers.append(self.rt.at(run.start_at, self._enqueue_sync(run.key)))
            return
        if run.phase != "Running":
            return
        for c in run.containers.values():
            self._arm_oom(pod, run, c)
        if run.complete_at is None:
            duration = self._run_seconds(pod)
            if duration is not None:
                run.complete_at = run.start_at + duration
                run.timers.append(self.rt.at(run.complete_at, self._complete_cb(run.key, run.uid)))

    def _run_seconds(self, pod: Mapping[str, Any]) -> float | None:
        md = pod.get("metadata") or {}
        raw = (md.get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
        if raw is not None:
            try:
                return max(0.0, float(raw))
            except ValueError:
                return None
        if (pod.get("spec") or {}).get("restartPolicy", "Always") == "Always":
            return None
        for ref in md.get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                return self.options.job_run_s
        return None

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

    def _complete_cb(self, k: Key, uid: str) -> Any:
        async def fire(due: float) -> None:
            run = self.runs.get(k)
            pod = self.store.get("pods", k[0], k[1])
            if run is None or run.uid != uid or pod is None or run.phase != "Running":
                return
            for c in run.containers.values():
                c.terminated = {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": rfc3339(c.started_at),
                    "finishedAt": rfc3339(due),
                    "containerID": c.container_id(uid),
                }
            run.phase = "Succeeded"
            self._release(pod, run)
            await self._write_status(pod, run)

        return fire

    def _release(self, pod: Mapping[str, Any], run: PodRun) -> None:
        """A terminal pod no longer holds node resources."""
        for timer in run.oom_timers.values():
            self.rt.cancel(timer)
        run.oom_timers.clear()
        if run.counted:
            run.counted = False
            node = self.nodes.get(run.node)
            if node is not None:
                node.deferred.discard(run.key)
            self._account(run, (0, 0), (0, 0))

    async def _terminate(self, pod: JsonObj, run: PodRun, now: float) -> None:
        if run.stop_at is None:
            deadline = parse_time((pod.get("metadata") or {}).get("deletionTimestamp")) or now
            run.stop_at = min(deadline, now + self.options.pod_termination_s)
            if run.stop_at > now:
                run.timers.append(self.rt.at(run.stop_at, self._enqueue_sync(run.key)))
                return
        elif run.stop_at > now:
            return
        if run.phase == "Running":
            # SIGTERM honoured: every container exits 0 and the kubelet reports the terminal phase before it
            # removes the pod (pods being deleted reach Succeeded/Failed first, as since Kubernetes 1.27).
            for c in run.containers.values():
                if c.terminated is None:
                    c.terminated = {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": rfc3339(c.started_at),
                        "finishedAt": rfc3339(now),
                        "containerID": c.container_id(run.uid),
                    }
            run.phase = "Succeeded"
            self._release(pod, run)
            try:
                await self._write_status(pod, run)
            except ApiError as err:
                if err.code != 404:
                    raise
                self._forget(run)
                return
        try:
            result = await self.store.delete("pods", run.key[0], run.key[1], grace_period_s=0)
        except ApiError as err:
            if err.code != 404:
                raise
            result = None
        if result is not None:
            self.rt.observe("pods", result, deleted=True)
        self._forget(run)

    # --- resize ---------------------------------------------------------------------------------------------

    def _handle_resize(self, pod: JsonObj, run: PodRun, node: NodeRun, now: float) -> None:
        spec = pod.get("spec") or {}
        generation = int((pod.get("metadata") or {}).get("generation") or 0)
        desired = {
            c["name"]: _resources_of(c)
            for c in spec.get("containers") or []
            if c.get("name") in run.containers
        }
        changed = any(not _same(desired[n], run.containers[n].allocated) for n in desired)
        if changed:
            desired_key = {n: _amounts(r) for n, r in desired.items()}
            if run.pending is not None and run.pending[0] == "Infeasible" and run.pending_for == desired_key:
                pass  # never re-evaluated until the spec changes again
            else:
                verdict, message = self._admit_resize(spec, run, node)
                if verdict == "":
                    for n, res in desired.items():
                        run.containers[n].allocated = copy.deepcopy(res)
                    run.pending = None
                    run.pending_for = None
                    node.deferred.discard(run.key)
                    if run.in_progress is None or run.in_progress[0] == "Error":
                        run.in_progress = ("", "", now, generation)
                    run.actuate_at = now + self.options.resize_actuation_s
                    run.timers.append(self.rt.at(run.actuate_at, self._enqueue_sync(run.key)))
                    self.resize_events.append((run.key, "Accepted"))
                else:
                    since = run.pending[2] if run.pending is not None and run.pending[0] == verdict else now
                    run.pending = (verdict, message, since, generation)
                    run.pending_for = desired_key
                    if verdict == "Deferred":
                        node.deferred.add(run.key)
                    else:
                        node.deferred.discard(run.key)
                    self.resize_events.append((run.key, verdict))
        elif run.pending is not None:
            # The spec went back to what is allocated: nothing is pending any more.
            run.pending = None
            run.pending_for = None
            node.deferred.discard(run.key)
        if run.actuate_at is not None and run.actuate_at <= now:
            self._actuate(pod, run, now)
        self._account(run, self._sched_view(pod, run), self._kube_view(pod, run))

    def _admit_resize(self, spec: Mapping[str, Any], run: PodRun, node: NodeRun) -> tuple[str, str]:
        cpu, mem = effective_requests(spec)
        if mem > node.memory:
            return (
                "Infeasible",
                f"Node didn't have enough capacity: memory, requested: {mem}, capacity: {node.memory}",
            )
        if cpu > node.cpu:
            return (
                "Infeasible",
                f"Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {node.cpu}",
            )
        used_cpu = node.kube_cpu - run.kube[0]
        used_mem = node.kube_mem - run.kube[1]
        if used_cpu + cpu > node.cpu:
            return "Deferred", (
                f"Node didn't have enough resource: cpu, requested: {cpu}, used: {used_cpu}, "
                f"capacity: {node.cpu}"
            )
        if used_mem + mem > node.memory:
            return "Deferred", (
                f"Node didn't have enough resource: memory, requested: {mem}, used: {used_mem}, "
                f"capacity: {node.memory}"
            )
        return "", ""

    def _actuate(self, pod: JsonObj, run: PodRun, now: float) -> None:
        spec = pod.get("spec") or {}
        specs = {c.get("name"): c for c in spec.get("containers") or []}
        # From 1.35 the kubelet checks every decreasing memory limit, the pod's and each container's, before
        # it changes anything (one refusal holds the whole in-place part of the resize back).
        refusal = self._memory_decrease_refusal(pod, run, specs, now) if self.version >= (1, 35) else ""
        errors: list[str] = [refusal] if refusal else []
        for name, c in run.containers.items():
            if _same(c.allocated, c.actual):
                continue
            container = specs.get(name) or {}
            (new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            changed = {
                r
                for r in (CPU, MEMORY)
                if new_req.get(r) != old_req.get(r) or new_lim.get(r) != old_lim.get(r)
            }
            restart = any(restart_policy_for(container, r) == RESTART_CONTAINER for r in changed)
            if restart:
                self._restart_container(pod, run, c, now, {"exitCode": 137, "reason": "Error"}, resize=True)
                c.actual = copy.deepcopy(c.allocated)
                continue
            if refusal:
                continue
            new_mem_lim, old_mem_lim = new_lim.get(MEMORY), old_lim.get(MEMORY)
            if (
                self.version < (1, 35)
                and new_mem_lim is not None
                and (old_mem_lim is None or new_mem_lim < old_mem_lim)
            ):
                usage = self.usage.memory_bytes(
                    pod, container, now, run.start_at, c.started_at, old_req, old_lim
                )
                if usage > new_mem_lim:
                    if self.version >= (1, 34):
                        errors.append(
                            f"attempting to set container {name!r} memory limit ({new_mem_lim}) below "
                            f"current usage ({usage})"
                        )
                    else:
                        errors.append(
                            f"attempting to set pod memory limit ({new_mem_lim}) below current usage "
                            f"({usage})"
                        )
                    continue
            if new_mem_lim is not None and old_mem_lim is not None and new_mem_lim < old_mem_lim:
                c.mem_limit_lowered_at = now
            c.actual = copy.deepcopy(c.allocated)
            self._arm_oom(pod, run, c, since=now)
        if errors:
            since = run.in_progress[2] if run.in_progress is not None else now
            gen = run.in_progress[3] if run.in_progress is not None else 0
            message = "; ".join(errors)
            if self.version >= (1, 35):
                # The kubelet sets the Error condition after that sync's status was written: it reaches the
                # API with the next sync, carrying the message of the attempt before.
                shown, run.resize_error = run.resize_error, message
                if shown is not None:
                    run.in_progress = ("Error", shown, since, gen)
            else:
                run.in_progress = ("Error", message, since, gen)
            run.actuate_at = now + self.options.kubelet_retry_s
            run.timers.append(self.rt.at(run.actuate_at, self._enqueue_sync(run.key)))
        else:
            run.in_progress = None
            run.actuate_at = None
            run.resize_error = None

    def _memory_decrease_refusal(
        self, pod: Mapping[str, Any], run: PodRun, specs: Mapping[Any, Mapping[str, Any]], now: float
    ) -> str:
        """The kubelet's refusal of a memory-limit decrease at or above current usage, or "".

        As `validateMemoryResizeAction` (1.35+): the pod's limit (the sum of its containers', when every
        one has a limit) is checked first against the pod's usage, then each container resized in place
        (not restarted) whose limit goes down against its own usage; a refusal is `usage >= new limit`. The
        container's part quotes the name Go-style and, as the kubelet's does, reports the pod's usage.
        """
        sidecars = [c for c in (pod.get("spec") or {}).get("initContainers") or [] if is_sidecar(c)]
        usage: dict[str, int] = {}
        old_pod_limit: int | None = 0
        new_pod_limit: int | None = 0
        for name, c in run.containers.items():
            (_new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            container = specs.get(name) or {"name": name}
            usage[name] = self.usage.memory_bytes(
                pod, container, now, run.start_at, c.started_at, old_req, old_lim
            )
            old_pod_limit = _add_limit(old_pod_limit, old_lim.get(MEMORY))
            new_pod_limit = _add_limit(new_pod_limit, new_lim.get(MEMORY))
        pod_usage = sum(usage.values())
        for side in sidecars:
            req, lim = container_amounts(side, "requests"), container_amounts(side, "limits")
            pod_usage += self.usage.memory_bytes(pod, side, now, run.start_at, run.start_at, req, lim)
            old_pod_limit = _add_limit(old_pod_limit, lim.get(MEMORY))
            new_pod_limit = _add_limit(new_pod_limit, lim.get(MEMORY))
        parts: list[str] = []
        pod_decrease = new_pod_limit is not None and (old_pod_limit is None or new_pod_limit < old_pod_limit)
        if pod_decrease and new_pod_limit is not None and pod_usage >= new_pod_limit:
            parts.append(
                f"attempting to set pod memory limit ({new_pod_limit}) below current usage ({pod_usage})"
            )
        for name, c in run.containers.items():
            (new_req, new_lim), (old_req, old_lim) = c.allocated_amounts(), c.actual_amounts()
            container = specs.get(name) or {}
            changed = {
                r
                for r in (CPU, MEMORY)
                if new_req.get(r) != old_req.get(r) or new_lim.get(r) != old_lim.get(r)
            }
            if any(restart_policy_for(container, r) == RESTART_CONTAINER for r in changed):
                continue
            new_mem, old_mem = new_lim.get(MEMORY), old_lim.get(MEMORY)
            if new_mem is None or (old_mem is not None and new_mem >= old_mem):
                continue
            if usage[name] >= new_mem:
                parts.append(
                    f'attempting to set container "{name}" memory limit ({new_mem}) below current usage '
                    f"({pod_usage})"
                )
        return f"cannot decrease memory limits: [{', '.join(parts)}]" if parts else ""

    # --- container restarts and OOM -------------------------------------------------------------------------

    def _restart_container(
        self,
        pod: Mapping[str, Any],
        run: PodRun,
        c: ContainerRun,
        at: float,
        terminated: JsonObj,
        resize: bool = False,
    ) -> None:
        c.last_terminated = {
            **terminated,
            "startedAt": rfc3339(c.started_at),
            "finishedAt": rfc3339(at),
            "containerID": c.container_id(run.uid),
        }
        c.restart_count += 1
        # Kubelet crash back-off: the first crash restarts at once, then base·2^(n−2) capped at 5 min; a
        # container that ran 10 minutes starts over. Restarts the kubelet itself asked for have no back-off.
        if resize:
            backoff = 0.0
        else:
            c.crashes = 1 if at - c.started_at >= _BACKOFF_RESET_S else c.crashes + 1
            base = self.options.crash_backoff_s
            backoff = 0.0 if c.crashes <= 1 or base <= 0 else min(300.0, base * 2 ** min(c.crashes - 2, 10))
        c.started_at = at + backoff
        if backoff > 0:
            c.waiting_until = at + backoff
            run.timers.append(self.rt.at(c.waiting_until, self._enqueue_sync(run.key)))
        else:
            c.waiting_until = None
        self._arm_oom(pod, run, c)

    def _arm_oom(
        self, pod: Mapping[str, Any], run: PodRun, c: ContainerRun, since: float | None = None
    ) -> None:
        """Arm the OOM kill of `c` at its usage's first crossing of its memory limit, searched from the
        container's (re)start, or from `since` (a resize: the usage before it met the older limit)."""
        self.rt.cancel(run.oom_timers.pop(c.name, None))
        if not run.counted or run.phase != "Running" or c.terminated is not None:
            return
        req, lim = c.actual_amounts()
        limit = lim.get(MEMORY)
        if limit is None:
            return
        container: Mapping[str, Any] = next(
            (x for x in (pod.get("spec") or {}).get("containers") or [] if x.get("name") == c.name), {}
        )
        profile = self.usage.profile(pod, container, MEMORY, req, lim)
        if profile.upper_bound() <= limit:
            return
        now = self.clock.now()
        # Timers carry their due time: after a long advance(), kills replay at the right instants, so the
        # search starts at the container's (re)start unless that is beyond the scan horizon, and never before
        # an in-place decrease of the limit: the kernel judges only usage after it against the new limit.
        start = c.started_at if now - c.started_at <= _OOM_HORIZON_S else now
        if since is not None:
            start = max(start, since)
        # ... and on every later arming too (a restart, a re-scan, changed usage), not just the resize's.
        start = max(start, c.mem_limit_lowered_at)
        crossing: float | None
        if isinstance(profile, Leak):
            crossing = profile.crossing(limit, c.started_at)
            if crossing is not None:
                # Strictly above the limit, to the whole second the kernel would notice it in.
                crossing = max(start, math.floor(crossing) + 1.0)
        else:
            crossing = None
            t = start
            while t <= start + _OOM_HORIZON_S:
                if profile.value(t, run.start_at, c.started_at) > limit:
                    crossing = t
                    break
                t += _OOM_SCAN_STEP_S
            if crossing is None:
                run.oom_timers[c.name] = self.rt.at(
                    start + _OOM_HORIZON_S, self._rearm_cb(run.key, run.uid, c.name)
                )
                return
        if crossing is None:
            return
        run.oom_timers[c.name] = self.rt.at(crossing, self._oom_cb(run.key, run.uid, c.name, c.started_at))

    def _rearm_cb(self, k: Key, uid: str, name: str) -> Any:
        def fire(_due: float) -> None:
            run = self.runs.get(k)
            pod = self.store.get("pods", k[0], k[1])
            if run is None or run.uid != uid or pod is None or name not in run.containers:
                return
            self._arm_oom(pod, run, run.containers[name])

        return fire

    def _oom_cb(self, k: Key, uid: str, name: str, started_at: float) -> Any:
        async def fire(due: float) -> None:
            run = self.runs.get(k)
            pod = self.store.get("pods", k[0], k[1])
            if (
                run is None
                or run.uid != uid
                or pod is None
                or name not in run.containers
                or run.phase != "Running"
            ):
                return
            c = run.containers[name]
            if c.started_at != started_at or (pod.get("metadata") or {}).get("deletionTimestamp"):
                return
            self.oom_kills += 1
            policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
            terminated = {"exitCode": 137, "reason": "OOMKilled"}
            if policy == "Never":
                c.terminated = {
                    **terminated,
                    "startedAt": rfc3339(c.started_at),
                    "finishedAt": rfc3339(due),
                    "containerID": c.container_id(uid),
                }
                if all(x.terminated is not None for x in run.containers.values()):
                    run.phase = "Failed"
                    self._release(pod, run)
            else:
                self._restart_container(pod, run, c, due, terminated)
            await self._write_status(pod, run)

        return fire

    def usage_changed(self, namespace: str, name: str) -> None:
        run = self.runs.get((namespace, name))
        pod = self.store.get("pods", namespace, name)
        if run is None or pod is None:
            return
        for c in run.containers.values():
            self._arm_oom(pod, run, c)

    # --- status ---------------------------------------------------------------------------------------------

    def _cond(self, run: PodRun, ctype: str, status: str, now: float) -> str:
        prior = run.cond_times.get(ctype)
        if prior is not None and prior[0] == status:
            return prior[1]
        stamp = rfc3339(now)
        run.cond_times[ctype] = (status, stamp)
        return stamp

    def _status(self, pod: Mapping[str, Any], run: PodRun) -> JsonObj:
        now = self.clock.now()
        old = pod.get("status") or {}
        spec = pod.get("spec") or {}
        generation = (pod.get("metadata") or {}).get("generation")
        node = self.nodes.get(run.node)
        running = run.phase == "Running"
        statuses: list[JsonObj] = []
        all_ready = running
        for container in spec.get("containers") or []:
            c = run.containers.get(container.get("name"))
            if c is None:
                continue
            state: JsonObj
            ready = False
            if c.terminated is not None:
                state = {"terminated": dict(c.terminated)}
            elif not running:
                state = {"waiting": {"reason": "ContainerCreating"}}
            elif c.waiting_until is not None and c.waiting_until > now:
                state = {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off restarting failed "
                        f"container {c.name} in pod {run.key[1]}_{run.key[0]}({run.uid})",
                    }
                }
            else:
                state = {"running": {"startedAt": rfc3339(c.started_at)}}
                ready = True
            all_ready = all_ready and ready
            image = c.image
            digest = hashlib.sha256(image.encode()).hexdigest()
            entry: JsonObj = {
                "name": c.name,
                "state": state,
                "lastState": {"terminated": dict(c.last_terminated)} if c.last_terminated else {},
                "ready": ready,
                "restartCount": c.restart_count,
                "image": image,
                "imageID": f"{image.split(':')[0]}@sha256:{digest}",
                "started": "running" in state,
                "allocatedResources": dict(c.allocated.get("requests") or {}),
                "resources": {k: dict(v) for k, v in c.actual.items() if v},
            }
            if "running" in state or "terminated" in state:
                entry["containerID"] = c.container_id(run.uid)
            statuses.append(entry)
        conds: list[JsonObj] = []
        init_done = run.phase != "Pending"
        completed = run.phase in ("Succeeded", "Failed")
        ready_status = "True" if all_ready and not completed else "False"
        cond_specs: list[tuple[str, str, str | None]] = [
            ("PodReadyToStartContainers", "True" if not completed else "False", None),
            ("Initialized", "True" if init_done else "False", None),
            (
                "Ready",
                ready_status,
                "PodCompleted" if completed else (None if all_ready else "ContainersNotReady"),
            ),
            (
                "ContainersReady",
                ready_status,
                "PodCompleted" if completed else (None if all_ready else "ContainersNotReady"),
            ),
            ("PodScheduled", "True", None),
        ]
        for ctype, cstatus, reason in cond_specs:
            cond: JsonObj = {
                "type": ctype,
                "status": cstatus,
                "lastProbeTime": None,
                "lastTransitionTime": self._cond(run, ctype, cstatus, now),
            }
            if reason:
                cond["reason"] = reason
            if self.version >= (1, 34) and generation is not None:
                cond["observedGeneration"] = generation
            conds.append(cond)
        # Carry over conditions other writers own (DisruptionTarget from the eviction API, readiness gates).
        mine = {c[0] for c in cond_specs} | {"PodResizePending", "PodResizeInProgress"}
        for cond in old.get("conditions") or []:
            if cond.get("type") not in mine:
                conds.append(dict(cond))
        status: JsonObj = {
            "phase": run.phase,
            "conditions": conds,
            "hostIP": node.ip if node else "",
            "hostIPs": [{"ip": node.ip}] if node else [],
            "podIP": run.pod_ip,
            "podIPs": [{"ip": run.pod_ip}],
            "startTime": rfc3339(run.bound_at),
            "containerStatuses": statuses,
            **self._init_statuses(spec, run, running),
            "qosClass": old.get("qosClass"),
        }
        if self.version >= (1, 33):
            if run.pending is not None:
                reason, message, since, gen = run.pending
                cond = {
                    "type": "PodResizePending",
                    "status": "True",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": rfc3339(now),
                    "lastTransitionTime": rfc3339(since),
                }
                if self.version >= (1, 34):
                    cond["observedGeneration"] = gen
                conds.append(cond)
            if run.in_progress is not None:
                reason, message, since, gen = run.in_progress
                cond = {
                    "type": "PodResizeInProgress",
                    "status": "True",
                    "lastProbeTime": rfc3339(now),
                    "lastTransitionTime": rfc3339(since),
                }
                if reason:
                    cond["reason"] = reason
                    cond["message"] = message
                if self.version >= (1, 34):
                    cond["observedGeneration"] = gen
                conds.append(cond)
        else:
            resize: str | None = None
            if run.pending is not None:
                resize = run.pending[0]
            elif run.in_progress is not None:
                resize = "InProgress"
            elif old.get("resize") == "Proposed" and self._proposed_pending(pod, run):
                resize = "Proposed"
            if resize is not None:
                status["resize"] = resize
        if self.version >= (1, 34) and generation is not None:
            status["observedGeneration"] = generation
        if self.version >= (1, 36):
            status.update(self._pod_level_status(spec, run, old, self.version))
        if status["qosClass"] is None:
            status.pop("qosClass")
        return status

    @staticmethod
    def _pod_level_status(
        spec: Mapping[str, Any], run: PodRun, old: Mapping[str, Any], version: tuple[int, int]
    ) -> JsonObj:
        """`status.allocatedResources` and `status.resources` of the pod (1.36+, where the kubelet's
        `InPlacePodLevelResourcesVerticalScaling` is on by default), for every pod.

        As the kubelet reports them: the allocated aggregate of the requests (`PodRequests`); and what the
        pod cgroup holds: CPU request and both limits as actuated, the memory request as allocated (it is
        not written to a cgroup). A limit appears only when every container has one. Pod-level
        `spec.resources` stand for the containers' aggregate (the stand-in does not resize them). A 1.36
        kubelet keeps the memory request it first reported (it carries the old status's value over).
        """
        names = [c.get("name") for c in spec.get("containers") or []]
        runs = [run.containers.get(n) for n in names]
        if any(c is None for c in runs):
            return {}
        allocated = [c.allocated_amounts() for c in runs if c is not None]
        actual = [c.actual_amounts() for c in runs if c is not None]
        alloc_cpu, alloc_mem = effective_requests(spec, containers_override=[r for r, _ in allocated])
        actual_cpu, _ = effective_requests(spec, containers_override=[r for r, _ in actual])
        limits: dict[str, str] = {}
        sidecar_limits = [
            container_amounts(c, "limits") for c in spec.get("initContainers") or [] if is_sidecar(c)
        ]
        for resource in (CPU, MEMORY):
            values = [lim.get(resource) for _, lim in actual] + [lim.get(resource) for lim in sidecar_limits]
            if values and all(v is not None for v in values):
                limits[resource] = _fmt_amount(resource, sum(v for v in values if v is not None))
        pod_spec = container_amounts(spec, "limits") if isinstance(spec.get("resources"), Mapping) else {}
        for resource, value in pod_spec.items():
            limits[resource] = _fmt_amount(resource, value)
        requests = {CPU: _fmt_amount(CPU, actual_cpu), MEMORY: _fmt_amount(MEMORY, alloc_mem)}
        kept = ((old.get("resources") or {}).get("requests") or {}).get(MEMORY)
        if version == (1, 36) and kept is not None:
            requests[MEMORY] = kept
        out: JsonObj = {
            "allocatedResources": {CPU: _fmt_amount(CPU, alloc_cpu), MEMORY: _fmt_amount(MEMORY, alloc_mem)},
            "resources": {"requests": requests, **({"limits": limits} if limits else {})},
        }
        return out

    @staticmethod
    def _init_statuses(spec: Mapping[str, Any], run: PodRun, running: bool) -> JsonObj:
        """Init containers ran to completion before the pod started; native sidecars keep running.

        Simplification: init containers take no time, and sidecars run with their spec resources (the
        node agent resizes regular containers only)."""
        inits = spec.get("initContainers") or []
        if not inits:
            return {}
        out: list[JsonObj] = []
        started = rfc3339(run.start_at)
        for c in inits:
            res = _resources_of(c)
            sidecar = c.get("restartPolicy") == "Always"
            digest = hashlib.sha256(f"{run.uid}/{c.get('name')}/0".encode()).hexdigest()
            state: JsonObj
            if not running:
                state = {"waiting": {"reason": "PodInitializing"}}
            elif sidecar:
                state = {"running": {"startedAt": started}}
            else:
                state = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": started,
                        "containerID": f"containerd://{digest}",
                    }
                }
            image = str(c.get("image") or "")
            out.append(
                {
                    "name": c.get("name"),
                    "state": state,
                    "lastState": {},
                    "ready": running and sidecar,
                    "restartCount": 0,
                    "image": image,
                    "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
                    "started": sidecar and running,
                    "containerID": f"containerd://{digest}",
                    "allocatedResources": dict(res.get("requests") or {}),
                    "resources": {k: dict(v) for k, v in res.items() if v},
                }
            )
        return {"initContainerStatuses": out}

    @staticmethod
    def _proposed_pending(pod: Mapping[str, Any], run: PodRun) -> bool:
        for c in (pod.get("spec") or {}).get("containers") or []:
            cr = run.containers.get(c.get("name"))
            if cr is not None and not _same(_resources_of(c), cr.allocated):
                return True
        return False

    def _admission_failure(self, pod: Mapping[str, Any], node: NodeRun) -> tuple[str, str] | None:
        """The kubelet's resource check for a pod someone else bound (`OutOfcpu` / `OutOfmemory`)."""
        cpu, mem = effective_requests(pod.get("spec") or {})
        for resource, requested, used, capacity in (
            ("cpu", cpu, node.kube_cpu, node.cpu),
            ("memory", mem, node.kube_mem, node.memory),
        ):
            if requested and used + requested > capacity:
                return (
                    f"OutOf{resource}",
                    f"Pod was rejected: Node didn't have enough resource: {resource}, "
                    f"requested: {requested}, used: {used}, capacity: {capacity}",
                )
        if len(node.pods) >= node.max_pods:
            return "OutOfpods", "Pod was rejected: Node didn't have enough resource: pods"
        return None

    async def _reject(self, pod: JsonObj, reason: str, message: str) -> None:
        status = dict(pod.get("status") or {})
        if status.get("phase") == "Failed" and status.get("reason") == reason:
            return
        status.update(
            {"phase": "Failed", "reason": reason, "message": message, "startTime": rfc3339(self.clock.now())}
        )
        result = await self.store.update("pods", {**pod, "status": status}, subresource="status")
        self.rt.observe("pods", result)

    async def _write_status(self, pod: JsonObj, run: PodRun) -> None:
        status = self._status(pod, run)
        if status == (pod.get("status") or {}):
            return
        new = dict(pod)
        new["status"] = status
        result = await self.store.update("pods", new, subresource="status")
        run.last_rv = (result.get("metadata") or {}).get("resourceVersion")
        self.rt.observe("pods", result)


_RESOURCE_REASONS = frozenset({"Insufficient cpu", "Insufficient memory", "Too many pods"})
_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_NOT_READY = "node.kubernetes.io/not-ready"


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
