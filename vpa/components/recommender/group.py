"""`RecommenderGroup`: the recommenders `--recommender-name=a,b` hosts in one process, with one set of
collectors, one metrics read per loop, shared checkpoint and history reads while restoring, and one Lease.

Must not: compute recommendations itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from vpa.components.health import HealthState
from vpa.components.recommender.history import HistorySource, PrometheusClientMetrics
from vpa.components.recommender.loop import run_loop, tick_forever
from vpa.components.recommender.metrics import RecommenderMetrics
from vpa.components.recommender.ports import CheckpointSink, EventSink, EventSource, Listing, ObjectSource
from vpa.components.recommender.recommender import Recommender
from vpa.components.recommender.reports import LoopReport, RestoreReport
from vpa.components.triggering import Trigger
from vpa.kube.client import JsonObj, KubeClient
from vpa.kube.evictionwatching import eviction_event_cache
from vpa.kube.historyreading import ClusterHistory, PrometheusHistoryReader, RequestObserver
from vpa.kube.metricsreading import PodMetricsReader
from vpa.kube.neighbourwatching import hpa_cache, node_cache
from vpa.kube.statuswriting import CheckpointStore, VpaStatusWriter
from vpa.kube.targets import TargetResolver
from vpa.model.clock import Clock
from vpa.model.features import FeatureGates
from vpa.model.node import HpaView, NodeView
from vpa.model.pod import PodView
from vpa.model.settings import CommonSettings, RecommenderSettings
from vpa.model.vpa import (
    VpaView,
)

log = structlog.get_logger(__name__)


class _SharedReads:
    """The checkpoint store and history source of a group, with their reads shared while the group restores:
    one checkpoint LIST and one Prometheus read serve every hosted recommender (each keeps what it handles).
    Writes, deletes and reads outside a restore go straight through."""

    def __init__(self, checkpoints: CheckpointSink, history: HistorySource | None) -> None:
        self._checkpoints = checkpoints
        self._history = history
        self._sharing = False
        self._items: list[JsonObj] | None = None
        self._read: ClusterHistory | None = None

    @contextlib.contextmanager
    def sharing(self) -> Iterator[None]:
        self._sharing = True
        try:
            yield
        finally:
            self._sharing, self._items, self._read = False, None, None

    async def list(self) -> list[JsonObj]:
        if not self._sharing:
            return await self._checkpoints.list()
        if self._items is None:
            self._items = await self._checkpoints.list()  # a failed LIST is not kept: the next one retries
        return self._items

    async def write(self, namespace: str, name: str, vpa_name: str, container_name: str,
                    status: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> None:
        await self._checkpoints.write(namespace, name, vpa_name, container_name, status, annotations)

    async def delete(self, namespace: str, name: str) -> None:
        await self._checkpoints.delete(namespace, name)

    async def read(self, now: float, on_request: RequestObserver | None = None) -> ClusterHistory:
        assert self._history is not None
        if not self._sharing:
            return await self._history.read(now, on_request)
        if self._read is None:
            self._read = await self._history.read(now, on_request)
        return self._read


class RecommenderGroup:
    """The recommenders `--recommender-name=a,b,…` hosts in one process (AEP-3919, our extension): one
    `Recommender` per name with its own settings (`--recommender-overrides`) and cluster state, each
    handling only the VPAs that select it; one loop (`run_loop`) on the shared caches, one PodMetrics read
    per loop, one set of collectors, one Lease (the runtime's, for the whole set). Checkpoints share the
    namespace: a VPA belongs to one recommender, and orphan collection (by the first one) looks at all
    VPAs."""

    def __init__(self, recommenders: Sequence[Recommender], *, clock: Clock,
                 health: HealthState | None = None,
                 background: Sequence[Callable[[], Awaitable[None]]] = (),
                 shared: _SharedReads | None = None) -> None:
        if not recommenders:
            raise ValueError("a recommender group needs at least one recommender")
        self.recommenders = tuple(recommenders)
        self._clock = clock
        self._health = health
        self._background = tuple(background)
        self._shared = shared
        self._passes = asyncio.Lock()  # the prompt OOM pass never overlaps a loop
        first = self.recommenders[0].settings
        self.oom_trigger = Trigger(clock, first.oom_reaction_delay_s) if first.recommend_on_oom else None
        for rec in self.recommenders:
            rec.ooms.trigger = self.oom_trigger

    @classmethod
    def from_client(
        cls,
        settings: RecommenderSettings,
        *,
        common: CommonSettings,
        gates: FeatureGates,
        client: KubeClient,
        pods: ObjectSource[PodView],
        vpas: ObjectSource[VpaView],
        clock: Clock,
        registry: CollectorRegistry,
        health: HealthState | None = None,
        recorder: EventSink | None = None,
        events: EventSource | None = None,
        nodes: Listing[NodeView] | None = None,
        hpas: Listing[HpaView] | None = None,
    ) -> RecommenderGroup:
        """One recommender per `settings.recommender_names`, on shared kube adapters and collectors: the
        production wiring (a process hosts one group, usually of one recommender).

        `events` (`Evicted` events), `nodes` and `hpas` are caches the caller runs; each one not given the
        group makes, when its settings read it, and runs while it leads."""
        namespace = common.vpa_object_namespace or None
        metrics = RecommenderMetrics(registry)
        metrics_source = PodMetricsReader(client, namespace)
        resolver = TargetResolver(client, clock, namespace=namespace)
        status_writer = VpaStatusWriter(client)
        background: list[Callable[[], Awaitable[None]]] = []
        if events is None:
            own_events = eviction_event_cache(client, clock, namespace)
            events = own_events
            background.append(own_events.run)
        if nodes is None and (settings.cap_to_largest_node or gates.daemonset_scope):
            own_nodes = node_cache(client, clock)
            nodes = own_nodes
            background.append(own_nodes.run)
        if hpas is None and settings.detect_hpa_conflicts:
            own_hpas = hpa_cache(client, clock, namespace)
            hpas = own_hpas
            background.append(own_hpas.run)
        reader = (PrometheusHistoryReader(settings.prometheus, namespace=common.vpa_object_namespace)
                  if settings.storage == "prometheus" else None)
        shared = _SharedReads(CheckpointStore(client, namespace), reader)
        history_metrics = PrometheusClientMetrics(registry)
        names = settings.recommender_names
        recommenders = [
            Recommender(
                settings.for_name(name), pods=pods, vpas=vpas, clock=clock, metrics_source=metrics_source,
                resolver=resolver, status_writer=status_writer, checkpoints=shared, metrics=metrics,
                namespace=common.vpa_object_namespace,
                ignored_namespaces=common.ignored_vpa_object_namespaces,
                per_vpa_config=gates.per_vpa_config, native_sidecars=gates.native_sidecar,
                initial_delay=gates.vpa_initial_delay, daemonset_scope=gates.daemonset_scope,
                hosted_names=names, collects_checkpoints=index == 0,
                events=events, history=shared if reader is not None else None,
                history_metrics=history_metrics, nodes=nodes, hpas=hpas, recorder=recorder,
            )
            for index, name in enumerate(names)
        ]
        return cls(recommenders, clock=clock, health=health, background=background, shared=shared)

    def by_name(self, name: str) -> Recommender:
        for rec in self.recommenders:
            if rec.settings.recommender_name == name:
                return rec
        raise KeyError(name)

    def reset(self) -> None:
        for rec in self.recommenders:
            rec.reset()

    async def restore(self) -> list[RestoreReport]:
        if self._shared is None:
            return [await rec.restore() for rec in self.recommenders]
        with self._shared.sharing():
            return [await rec.restore() for rec in self.recommenders]

    async def run_once(self, next_loop_at: float | None = None) -> list[LoopReport]:
        async with self._passes:
            return await run_loop(self.recommenders, next_loop_at)

    async def react_to_ooms(self) -> list[LoopReport]:
        """The prompt OOM pass of every recommender (see `Recommender.react_to_ooms`)."""
        async with self._passes:
            return [await rec.react_to_ooms() for rec in self.recommenders]

    async def _react_forever(self) -> None:
        """With `--recommend-on-oom`: a prompt OOM pass whenever the trigger fires."""
        trigger = self.oom_trigger
        if trigger is None:
            return
        trigger.clear()
        while True:
            if await trigger.wait(3600.0):
                try:
                    await self.react_to_ooms()
                except Exception:
                    log.exception("recommender_oom_pass_failed")

    async def run_forever(self) -> None:
        """The loop of every recommender on `--recommender-interval`, with the background inputs (the
        `Evicted` events watch) running for as long as this term lasts."""
        interval = self.recommenders[0].settings.recommender_interval_s
        tasks = [asyncio.ensure_future(run()) for run in (*self._background, self._react_forever)]
        try:
            await tick_forever(self._clock, interval, self._health, self.reset, self.restore, self.run_once)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
