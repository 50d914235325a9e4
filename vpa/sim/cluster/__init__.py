"""The simulated cluster's behaviour: controllers, node agent, pod semantics and metrics, behind one object.

Owns: `ClusterBehaviour`, which the API server constructs with its store, hook registry and virtual clock:
`register()` plugs pod defaulting/validation, the `pods/resize`, `pods/eviction` and `pods/binding`
subresources and `metrics.k8s.io` into the API server; `start()` creates the Node objects and starts the
watches, work queue and timers; `settle()` returns when nothing is pending; `set_usage()` gives a container a
usage profile. `ClusterOptions` and `UsageProfile` are re-exported for callers.

Must not: import the API server package or the autoscaler: it programs against `vpa.sim.contracts` only.
"""

from __future__ import annotations

from pathlib import Path

from vpa.model.clock import VirtualClock
from vpa.sim.cluster.metrics import Metrics
from vpa.sim.cluster.nodeagent import NodeAgent
from vpa.sim.cluster.options import ClusterOptions
from vpa.sim.cluster.podapi import PodApi
from vpa.sim.cluster.profiles import ANNOTATION as USAGE_ANNOTATION
from vpa.sim.cluster.profiles import UsageProfile, parse_profile
from vpa.sim.cluster.runtime import Runtime
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.cluster.workloads import Controllers
from vpa.sim.contracts import HookRegistry, Store

__all__ = ["USAGE_ANNOTATION", "ClusterBehaviour", "ClusterOptions", "UsageProfile", "parse_profile"]


class ClusterBehaviour:
    def __init__(
        self, *, store: Store, hooks: HookRegistry, clock: VirtualClock, options: ClusterOptions
    ) -> None:
        self.store = store
        self.hooks = hooks
        self.clock = clock
        self.options = options
        self.runtime = Runtime(store, clock)
        self.usage = UsageRegistry(
            options.default_usage_fraction, Path(options.trace_dir) if options.trace_dir else None
        )
        self.agent = NodeAgent(self.runtime, store, clock, options, self.usage)
        self.controllers = Controllers(self.runtime, store, clock, options)
        self.pod_api = PodApi(self.runtime, store, clock, options, self._node_allocatable)
        self.metrics = Metrics(self.agent, self.usage, clock, options)
        self._registered = False

    def _node_allocatable(self, name: str) -> tuple[int, int] | None:
        node = self.agent.nodes.get(name)
        return (node.cpu, node.memory) if node is not None else None

    def register(self) -> None:
        if self._registered:
            return
        self._registered = True
        self.pod_api.register(self.hooks)
        self.metrics.register(self.hooks)
        self.agent.register()
        self.controllers.register()

    async def start(self) -> None:
        self.register()
        await self.agent.create_nodes()
        await self.runtime.start()

    async def settle(self) -> None:
        await self.runtime.settle()

    async def stop(self) -> None:
        await self.runtime.stop()

    def set_usage(self, namespace: str, pod: str, container: str, profile: UsageProfile) -> None:
        self.usage.set_usage(namespace, pod, container, profile)
        self.agent.usage_changed(namespace, pod)
