"""Nodes and their heartbeats: the `Nodes` mixin of `NodeAgent`.

Owns: registering the agent's watch handlers; creating the configured Node objects (capacity and
allocatable, the pressure conditions and Ready, addresses, nodeInfo of the configured kubelet version,
`declaredFeatures` where the version declares them); against a real control plane, each node's Lease
heartbeat in kube-node-lease; and node events: allocatable, labels, Ready and the taints that stand for
cordoned and not-ready nodes, with pending pods retried when a node becomes schedulable or changes.

Must not: touch pods (scheduling is `scheduling`, the kubelet's work `kubelet`).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib

from vpa.sim.cluster.nodeagent.common import NOT_READY_TAINT, UNSCHEDULABLE_TAINT, rfc3339
from vpa.sim.cluster.nodeagent.core import AgentCore
from vpa.sim.cluster.nodeagent.runs import NodeRun
from vpa.sim.cluster.pods import CPU, MEMORY, amount
from vpa.sim.cluster.runtime import key_of
from vpa.sim.contracts import ApiError, JsonObj

_LEASES = "leases.coordination.k8s.io"
_NODE_LEASE_NS = "kube-node-lease"


# What a kubelet of the version declares in `status.declaredFeatures` (NodeDeclaredFeatures, beta 1.36, GA
# 1.37), as the release's own kubelet reports it on a hollow node (1.38.0-beta.0 declares the same four: the
# features it adds are off by default). kube-apiserver's PodResizeValidator refuses (403) a resize the pod's
# node does not declare, a pod-level one for instance.
_DECLARED_1_36 = (
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "RestartAllContainersOnContainerExits",
)
DECLARED_FEATURES: dict[tuple[int, int], tuple[str, ...]] = {
    (1, 36): _DECLARED_1_36,
    (1, 37): _DECLARED_1_36,
    (1, 38): _DECLARED_1_36,
}


class Nodes(AgentCore):
    """Node objects, Lease heartbeats and node events."""

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
        if node.unschedulable and not any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints):
            taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
        if not ready and not any(t.get("key") == NOT_READY_TAINT for t in taints):
            taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        node.taints = taints
        self._shape_hint.clear()
        if (
            (not node.unschedulable and node.ready and not was_schedulable)
            or etype == "ADDED"
            or (previous is not None and previous.get("status", {}).get("allocatable") != alloc)
        ):
            self._room_freed(name)
