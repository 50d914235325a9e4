"""`--recommendation-metrics`: every VPA's recommendation and its pods' requests as Prometheus gauges.

Owns: `RecommendationMetrics` — a collector on the process registry and the loop that refreshes it every
`REFRESH_S` (real time: it serves scrapes) from the shared VPA and pod caches: each VPA's target resolved to
a selector with a `TargetResolver` of its own (cached, as the recommender's), the pods it matches
(`PodIndex`), and `vpa.logic.report.rows.container_rows` for the values, so the gauges and `vpa report` agree.
Series, per container and resource (`cpu` in cores, `memory` in bytes, label `unit` as kube-state-metrics
had it):

- `vpa_recommendation_target`, `vpa_recommendation_lower_bound`, `vpa_recommendation_upper_bound`,
  `vpa_recommendation_uncapped_target` (from `status.recommendation`),
- `vpa_container_requests`, `vpa_container_limits` (what most of the VPA's pods run with),

labelled `namespace`, `vpa`, `target_kind`, `target_name`, `container`, `resource`, `unit`. At most
`max_series` series are exported: containers are taken in namespace, VPA, container order and a container
whose series would pass the bound is left out whole; `vpa_recommendation_metrics_series{state}` tells how
many series were exported and dropped at the last refresh, `vpa_recommendation_metrics_dropped_series_total`
adds up the drops of every refresh. A VPA that is deleted (or replaced: another uid) loses its series at the
next scrape; a container that goes away, at the next refresh.

Must not: write anything, compute rows itself (the report logic does), or hold series of objects the
caches no longer have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from vpa.aio.pacing import paced
from vpa.components.context import ComponentContext
from vpa.kube.targets import Resolution, TargetResolver
from vpa.logic.report.rows import ContainerRow, PodIndex, container_rows
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.selector import Selector
from vpa.model.vpa import TargetRef, VpaView

log = structlog.get_logger(__name__)

REFRESH_S: Final = 15.0
CHUNK_BUDGET_S: Final = 0.003  # as the recommender's slices: a refresh shares the main event loop
INDEX_SLICE: Final = 2000  # pods indexed between yields to the event loop
LABELS: Final = ("namespace", "vpa", "target_kind", "target_name", "container", "resource", "unit")
# (metric name, help, which values of a row)
FAMILIES: Final[tuple[tuple[str, str, Callable[[ContainerRow], Resources | None]], ...]] = (
    ("vpa_recommendation_target", "The VPA's recommended requests (status.recommendation target).",
     lambda row: row.target),
    ("vpa_recommendation_lower_bound", "The VPA recommendation's lower bound.", lambda row: row.lower_bound),
    ("vpa_recommendation_upper_bound", "The VPA recommendation's upper bound.", lambda row: row.upper_bound),
    ("vpa_recommendation_uncapped_target", "The VPA's recommendation before its min/max policy.",
     lambda row: row.uncapped_target),
    ("vpa_container_requests", "Requests most of the VPA's pods run this container with.",
     lambda row: row.requests),
    ("vpa_container_limits", "Limits most of the VPA's pods run this container with.",
     lambda row: row.limits),
)
METRIC_NAMES: Final = tuple(name for name, _, _ in FAMILIES)


class VpaSource(Protocol):
    def list(self) -> list[VpaView]: ...

    def get(self, namespace: str | None, name: str) -> VpaView | None: ...


class PodSource(Protocol):
    def list(self) -> list[PodView]: ...


class SelectorResolver(Protocol):
    """What the exporter needs of `vpa.kube.targets.TargetResolver`."""

    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution: ...

    def forget_unused(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Sample:
    metric: str
    labels: tuple[str, ...]
    value: float


@dataclass(frozen=True, slots=True)
class _VpaSeries:
    namespace: str
    name: str
    uid: str
    samples: tuple[_Sample, ...]


def _samples(vpa: VpaView, row: ContainerRow) -> list[_Sample]:
    ref = vpa.target_ref
    base = (vpa.namespace, vpa.name, ref.kind if ref else "", ref.name if ref else "", row.container)
    out = []
    for metric, _, pick in FAMILIES:
        resources = pick(row)
        if resources is None:
            continue
        if resources.cpu_millicores is not None:
            out.append(_Sample(metric, (*base, CPU, "core"), resources.cpu_millicores / 1000.0))
        if resources.memory_bytes is not None:
            out.append(_Sample(metric, (*base, MEMORY, "byte"), float(resources.memory_bytes)))
    return out


def container_series(vpa: VpaView, rows: Iterable[ContainerRow]) -> tuple[list[_Sample], ...]:
    """A VPA's samples, one list per container, in container order."""
    return tuple(_samples(vpa, row) for row in sorted(rows, key=lambda r: r.container))


class SeriesBudget:
    """Keeps containers' samples while they fit under `max_series`, each container whole or dropped whole;
    fed in namespace, VPA, container order, it is the bound the module docstring describes."""

    __slots__ = ("dropped", "kept", "max_series", "total")

    def __init__(self, max_series: int) -> None:
        self.max_series = max_series
        self.kept: list[_VpaSeries] = []
        self.total = 0
        self.dropped = 0

    def add(self, vpa: VpaView, containers: Iterable[list[_Sample]]) -> None:
        samples: list[_Sample] = []
        for container in containers:
            if self.total + len(container) > self.max_series:
                self.dropped += len(container)
                continue
            self.total += len(container)
            samples.extend(container)
        if samples:
            self.kept.append(_VpaSeries(vpa.namespace, vpa.name, vpa.uid, tuple(samples)))


def _vpa_order(vpa: VpaView) -> tuple[str, str]:
    return vpa.namespace, vpa.name


def bound(
    vpas: Iterable[tuple[VpaView, tuple[list[_Sample], ...]]], max_series: int
) -> tuple[list[_VpaSeries], int]:
    """Per-VPA samples under `max_series` (containers in namespace, VPA, container order, each kept whole
    or dropped whole), and how many series were dropped."""
    budget = SeriesBudget(max_series)
    for vpa, containers in sorted(vpas, key=lambda item: _vpa_order(item[0])):
        budget.add(vpa, containers)
    return budget.kept, budget.dropped


def bounded_series(
    vpas: Iterable[tuple[VpaView, tuple[ContainerRow, ...]]], max_series: int
) -> tuple[list[_VpaSeries], int]:
    """`bound` over the rows' series."""
    return bound([(vpa, container_series(vpa, rows)) for vpa, rows in vpas], max_series)


class RecommendationMetrics(Collector):
    """The collector and its refresh; register with `registry.register(...)` (the constructor does)."""

    def __init__(
        self,
        vpas: VpaSource,
        pods: PodSource,
        resolver: SelectorResolver,
        registry: CollectorRegistry,
        *,
        max_series: int,
    ) -> None:
        self._vpas = vpas
        self._pods = pods
        self._resolver = resolver
        self.max_series = max_series
        self._series: list[_VpaSeries] = []
        self._state = Gauge(
            "vpa_recommendation_metrics_series",
            "Series of the vpa_recommendation_* and vpa_container_* gauges at the last refresh, exported or "
            "dropped (over --recommendation-metrics-max-series).",
            ["state"], registry=registry)
        self._dropped = Counter(
            "vpa_recommendation_metrics_dropped_series",
            "Series left out by --recommendation-metrics-max-series, summed over refreshes.",
            registry=registry)
        registry.register(self)

    async def refresh(self) -> None:
        """Recompute every VPA's rows from the caches now, yielding to the event loop every
        `CHUNK_BUDGET_S` (the leases, the watches and `/metrics` share the loop)."""
        index = PodIndex()
        pods = self._pods.list()
        for start in range(0, len(pods), INDEX_SLICE):
            index.add(pods[start:start + INDEX_SLICE])
            await asyncio.sleep(0)
        vpas = sorted(self._vpas.list(), key=_vpa_order)
        budget = SeriesBudget(self.max_series)
        async for vpa in paced(vpas, CHUNK_BUDGET_S):
            resolution = await self._resolver.resolve(vpa.namespace, vpa.target_ref)
            selector: Selector | None = resolution.selector
            pods = [] if selector is None else index.matching(vpa.namespace, selector)
            budget.add(vpa, container_series(vpa, container_rows(vpa, pods)))
        self._resolver.forget_unused()
        self._series, dropped = budget.kept, budget.dropped
        exported = sum(len(item.samples) for item in self._series)
        self._state.labels(state="exported").set(exported)
        self._state.labels(state="dropped").set(dropped)
        if dropped:
            self._dropped.inc(dropped)

    async def run_forever(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # one bad refresh must not end the exporter; the next one retries
                log.warning("recommendation_metrics_refresh_failed", error=f"{type(err).__name__}: {err}")
            await asyncio.sleep(REFRESH_S)  # real time: the refresh serves scrapes

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        families = {
            name: GaugeMetricFamily(name, help_text, labels=LABELS) for name, help_text, _ in FAMILIES
        }
        for item in self._series:
            current = self._vpas.get(item.namespace, item.name)
            if current is None or current.uid != item.uid:
                continue  # deleted (or deleted and re-created) since the refresh
            for sample in item.samples:
                families[sample.metric].add_metric(sample.labels, sample.value)
        yield from families.values()


def build(ctx: ComponentContext) -> Callable[[], Awaitable[None]]:
    """`ComponentSpec.build`: one exporter per process (not leader-elected: every replica serves it)."""
    namespace = ctx.settings.common.vpa_object_namespace or None
    resolver = TargetResolver(ctx.client, ctx.clock, namespace=namespace)
    exporter = RecommendationMetrics(
        ctx.vpas, ctx.pods, resolver, ctx.registry, max_series=ctx.settings.recommendation_metrics_max_series
    )
    return exporter.run_forever
