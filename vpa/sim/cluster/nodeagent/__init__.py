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


`NodeAgent` is one class put together from a base and mixins, one module each: `core` (state, the two sums
per node, forgetting a pod, retries when room frees), `nodes` (Node objects, Lease heartbeats, node
events), `scheduling` (pod events, first-fit scheduling, binding), `kubelet` (pod sync, admission, start,
completion, graceful deletion), `resize` (in-place resize), `restarts` (container restarts, OOM kills) and
`status` (the pod status document); `runs` holds the per-container, per-pod and per-node records, and
`common` the timestamp and resource helpers.

Must not: run controllers (ReplicaSets etc. live in `workloads`) or compute metrics (`metrics`).
"""

from vpa.sim.cluster.nodeagent.common import parse_time, rfc3339
from vpa.sim.cluster.nodeagent.kubelet import RUN_SECONDS_ANNOTATION, Kubelet
from vpa.sim.cluster.nodeagent.nodes import DECLARED_FEATURES, Nodes
from vpa.sim.cluster.nodeagent.resize import Resize
from vpa.sim.cluster.nodeagent.restarts import Restarts
from vpa.sim.cluster.nodeagent.runs import ContainerRun, NodeRun, PodRun
from vpa.sim.cluster.nodeagent.scheduling import Scheduling
from vpa.sim.cluster.nodeagent.status import Status


class NodeAgent(Nodes, Scheduling, Kubelet, Resize, Restarts, Status):
    """The scheduler and a kubelet per node over a `Runtime`, a `Store` and the virtual clock."""


__all__ = [
    "DECLARED_FEATURES",
    "RUN_SECONDS_ANNOTATION",
    "ContainerRun",
    "NodeAgent",
    "NodeRun",
    "PodRun",
    "parse_time",
    "rfc3339",
]
