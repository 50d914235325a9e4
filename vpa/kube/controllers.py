"""Watch caches of the well-known pod controllers and of LimitRanges, for the updater (spec §4.2, §4.3, §5.4).

Owns: `ControllerView` (a trimmed controller: its controlling owner, the replica count the updater uses as
"configured", its pod selector), `controller_from_dict` (the conversion of raw Deployments, ReplicaSets,
StatefulSets, DaemonSets, ReplicationControllers, Jobs and CronJobs), and `ControllerCaches`, one
`WatchCache` per kind plus LimitRanges, with the three lookups the updater needs:
- `top_most(namespace, kind, name)`: follow `controller: true` owner references up through cached
  controllers (ReplicaSet → Deployment, Job → CronJob); an owner of a kind that is not cached (a custom
  scalable resource such as an Argo Rollout) ends the walk and is the answer; a `Node` owner (static
  pods) means "not managed";
- `configured_replicas(namespace, kind, name)`: `spec.replicas` of ReplicaSets, ReplicationControllers and
  StatefulSets (absent ⇒ None, as upstream's error), `status.desiredNumberScheduled` of DaemonSets
  (upstream 1.8.1), None otherwise;
- `selector(namespace, kind, name)`: the pod selector of a well-known controller (None when unknown);
- `limit_ranges(namespace)`: the namespace's LimitRanges in name order.

Why caches rather than per-loop reads: the updater needs these for every pod group on every loop; a
watch keeps them current at the cost of a few small trimmed objects per controller (upstream's updater
runs informers for the same kinds).

Must not: hand raw API dicts out, decide anything, or write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog

from vpa.aio.cancelling import cancel_and_wait
from vpa.kube import converting
from vpa.kube.client import KubeClient, api_path
from vpa.kube.watching import WatchCache
from vpa.model.clock import Clock
from vpa.model.limitrange import LimitRangeError, LimitRangeView, limitrange_from_dict
from vpa.model.selector import Selector

log = structlog.get_logger(__name__)

# kind → (group, version, plural)
KINDS: Final[Mapping[str, tuple[str, str, str]]] = {
    "Deployment": ("apps", "v1", "deployments"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "ReplicationController": ("", "v1", "replicationcontrollers"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
}
_SPEC_REPLICAS: Final = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet"})
NODE: Final = "Node"
_MAX_DEPTH: Final = 8


@dataclass(frozen=True, slots=True)
class ControllerView:
    kind: str
    namespace: str
    name: str
    owner_kind: str | None = None
    owner_name: str | None = None
    replicas: int | None = None
    selector: Selector | None = None


def _controller_owner(metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    for ref in metadata.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            kind, name = ref.get("kind"), ref.get("name")
            if isinstance(kind, str) and isinstance(name, str):
                return kind, name
    return None, None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def controller_from_dict(kind: str, obj: Mapping[str, Any]) -> ControllerView | None:
    """Trim a raw controller of `kind` (list items carry no `kind`); None for an object without a name."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
        return None
    raw_spec, raw_status = obj.get("spec"), obj.get("status")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    status: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    replicas: int | None = None
    if kind in _SPEC_REPLICAS:
        replicas = _int_or_none(spec.get("replicas"))
    elif kind == "DaemonSet":
        replicas = _int_or_none(status.get("desiredNumberScheduled"))
    selector: Selector | None
    try:
        selector = converting.selector_from_workload({**obj, "kind": kind})
    except converting.ConversionError as err:
        log.warning("controller_selector_unreadable", kind=kind, name=metadata["name"], error=str(err))
        selector = None
    owner_kind, owner_name = _controller_owner(metadata)
    return ControllerView(
        kind=kind,
        namespace=str(metadata.get("namespace") or ""),
        name=metadata["name"],
        owner_kind=owner_kind,
        owner_name=owner_name,
        replicas=replicas,
        selector=selector,
    )


def _limit_range(obj: dict[str, Any]) -> LimitRangeView | None:
    try:
        return limitrange_from_dict(obj)
    except LimitRangeError as err:
        log.warning("skipping_malformed_limitrange", error=str(err))
        return None


class ControllerCaches:
    """One watch cache per well-known controller kind, and one for LimitRanges."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        namespace: str | None = None,
        observer: Callable[[str, str, int], None] | None = None,
    ) -> None:
        self.controllers: dict[str, WatchCache[ControllerView]] = {}
        for kind, (group, version, plural) in KINDS.items():

            def convert(obj: dict[str, Any], kind: str = kind) -> ControllerView | None:
                return controller_from_dict(kind, obj)

            self.controllers[kind] = WatchCache(
                client,
                clock,
                api_path(group, version, plural, namespace=namespace),
                convert,
                name=plural,
                observer=observer,
            )
        self.limitranges: WatchCache[LimitRangeView] = WatchCache(
            client,
            clock,
            api_path("", "v1", "limitranges", namespace=namespace),
            _limit_range,
            name="limitranges",
            observer=observer,
        )
        self.limitranges.add_index("namespace", lambda lr: [lr.namespace])

    @property
    def caches(self) -> list[WatchCache[Any]]:
        return [*self.controllers.values(), self.limitranges]

    def has_synced(self) -> bool:
        return all(cache.has_synced for cache in self.caches)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(cache.wait_synced() for cache in self.caches))

    async def run(self) -> None:
        """Run every cache until cancelled."""
        tasks = [asyncio.ensure_future(cache.run()) for cache in self.caches]
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)

    # ------------------------------------------------------------------------------------- lookups

    def get(self, namespace: str, kind: str, name: str) -> ControllerView | None:
        cache = self.controllers.get(kind)
        return None if cache is None else cache.get(namespace, name)

    def top_most(self, namespace: str, kind: str, name: str) -> tuple[str, str] | None:
        """The top-most controller (kind, name) above the direct controller `kind/name`; None for `Node`."""
        if kind == NODE:
            return None
        for _ in range(_MAX_DEPTH):
            view = self.get(namespace, kind, name)
            if view is None or view.owner_kind is None or view.owner_name is None:
                return kind, name
            if view.owner_kind == NODE:
                return None
            kind, name = view.owner_kind, view.owner_name
        return kind, name

    def configured_replicas(self, namespace: str, kind: str, name: str) -> int | None:
        view = self.get(namespace, kind, name)
        return None if view is None else view.replicas

    def selector(self, namespace: str, kind: str, name: str) -> Selector | None:
        view = self.get(namespace, kind, name)
        return None if view is None else view.selector

    def limit_ranges(self, namespace: str) -> list[LimitRangeView]:
        return sorted(self.limitranges.by_index("namespace", namespace), key=lambda lr: lr.name)
