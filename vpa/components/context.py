"""What a component receives from the runtime: the process's shared, long-lived objects.

Owns: `ComponentContext`, the one argument every component's entry coroutine takes. It carries the
settings, the shared API client, the clock, the metrics registry, the health state, the event recorder and
the shared watch caches (pods and VPAs, with their indexes: pods by `namespace` and by `owner`
(`namespace/kind/name` of the controller), VPAs by `target` (`namespace/kind/name` of the targetRef)), and,
in a process running the updater or the admission controller, the watch caches of the well-known pod
controllers (`ControllerCaches`: both walk pods up to their top-most controller; None otherwise).

Must not: be built by components (the composition root builds it), or hold anything component-specific.
A component that needs a cache of its own (LimitRanges, checkpoints) builds and runs it in its own task.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from vpa.components.health import HealthState
from vpa.kube.client import KubeClient
from vpa.kube.controllers import ControllerCaches
from vpa.kube.eventing import EventRecorder
from vpa.kube.watching import WatchCache
from vpa.model.clock import Clock
from vpa.model.pod import PodView
from vpa.model.settings import RunSettings
from vpa.model.vpa import VpaView


@dataclass(frozen=True)
class ComponentContext:
    settings: RunSettings
    client: KubeClient
    clock: Clock
    registry: CollectorRegistry
    health: HealthState
    events: EventRecorder
    pods: WatchCache[PodView]
    vpas: WatchCache[VpaView]
    controllers: ControllerCaches | None = None
