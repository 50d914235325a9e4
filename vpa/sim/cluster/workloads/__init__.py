"""Workload controllers of kube-controller-manager, simplified but faithful where the VPA looks.

Owns: Deployment → ReplicaSet (`<deployment>-<pod-template-hash>`, label `pod-template-hash`, controller owner
references with blockOwnerDeletion; a template change creates a new ReplicaSet scaled to the full replica
count and scales the old ones to zero), ReplicaSet and ReplicationController (replica count kept; missing pods
created from the template with generateName `<owner>-` through `store.create(admit=True)`, so mutating
webhooks see every CREATE; surplus pods deleted, least useful first), StatefulSet (ordinal pods `<sts>-<i>`,
recreated under the same name once the old pod is gone; OrderedReady creates one pod at a time), DaemonSet
(one pod per schedulable node, pinned with required node affinity on `metadata.name`), Job (pods run, then
succeed; parallelism and completions; status and Complete condition), CronJob (Jobs at the schedule's
virtual times; only the most recent missed time is started; Allow/Forbid/Replace; history limits), and the
disruption controller (PodDisruptionBudget status), and the service-account controller's `default`
ServiceAccount in every namespace. Status of every workload (replicas, ready, available,
updated, observedGeneration). Cascading deletion is the API server's garbage collector.


One module per kind group, each a mixin of `ControllerBase` (`base`): `replicas` (ReplicaSet,
ReplicationController, Deployment), `statefulsets`, `daemonsets`, `batch` (Job, CronJob), `budgets`
(PodDisruptionBudget); `controllers` puts them together as `Controllers` and routes watch events to them.

Must not: schedule or run pods (the node agent does), or call the network.
"""

from vpa.sim.cluster.workloads.base import fnv32a, owner_ref, safe_encode, template_hash
from vpa.sim.cluster.workloads.controllers import Controllers

__all__ = ["Controllers", "fnv32a", "owner_ref", "safe_encode", "template_hash"]
