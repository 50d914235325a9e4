"""The live recommender loop: cluster in, VPA status and checkpoints out (upstream's `RunOnce`).

Owns: `Recommender` — restoring history from checkpoints before the first loop (from Prometheus with
`--storage=prometheus`, see `recommender_history`); each loop:
LoadVPAs (the VPAs this recommender's name handles, targets resolved to selectors, ConfigUnsupported
when a target is missing or not the top-most controller), LoadPods (non-Pending pods from the shared pod
cache, only VPA-matched ones with `--memory-saver`), LoadMetrics (one `metrics.k8s.io` PodMetrics LIST,
then the OOMs the pod cache's updates and the `Evicted` events revealed), DeleteRemovedPods, UpdateVPAs
(recommendations, status conditions as upstream sets them, a merge patch on `/status` only when the status
changed, or with `--bounds-write-tolerance` when more than bounds within it changed, at most
`--update-worker-count` writes in flight), MaintainCheckpoints (oldest-written VPA first,
until `--checkpoints-timeout` after the loop started but at least one VPA per worker; orphaned checkpoints
collected every `--checkpoints-gc-interval`) and GarbageCollect (aggregates, hourly);
`RecommenderGroup` — the recommenders `--recommender-name=a,b` hosts in one process, run step by step by
`run_loop` on one shared metrics read, one set of collectors and one Lease; `run_forever()` on the
`--recommender-interval` ticker with health activity; the upstream `vpa_recommender_*` metrics;
and the pure helpers this needs (`next_conditions`, `ooms_from_pod_update`, `owner_name`).

CPU work (pod intake, samples, estimation, checkpoints, and every pass over all pods, VPAs, checkpoints or
aggregates: unchanged pods, deleted pods, checkpoint and aggregate collection) yields to the event loop
every `chunk_budget_s` (3 ms), and each step starts on a fresh slice, because the webhook shares the loop:
an admission needs a few loop iterations (TLS read, handler, write), each of which may wait one slice, so
the slice bounds the webhook's tail while a loop runs (`benchmarks.webhook_during_recommender`: p99 31 ms
with 10 ms slices, 12 ms with 3 ms).

Must not: import other components, hold raw API dicts (the kube adapters convert), let one VPA's or one
step's failure stop the loop, or write a status that did not change.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vpa.aio.pacing import Slices
from vpa.aio.shards import ShardedDict, ShardedSet
from vpa.components.health import HealthState, LoopHistogram, UnsuffixedCounter
from vpa.components.recommender_history import HistorySource, PrometheusClientMetrics, load_history
from vpa.components.triggering import Trigger
from vpa.kube.client import JsonObj, KubeClient
from vpa.kube.eventing import ObjectRef
from vpa.kube.evictionwatching import eviction_event_cache
from vpa.kube.historyreading import ClusterHistory, PrometheusHistoryReader, RequestObserver
from vpa.kube.metricsreading import MetricsRead, PodMetricsReader
from vpa.kube.neighbourwatching import hpa_cache, node_cache
from vpa.kube.statuswriting import CheckpointStore, VpaStatusWriter
from vpa.kube.targets import Resolution, TargetResolver
from vpa.logic.recommender.aggregation import OomRejected
from vpa.logic.recommender.checkpointing import (
    IN_PROGRESS_PEAKS_ANNOTATION,
    CheckpointError,
    InProgressPeak,
    checkpoint_name,
    checkpoint_status,
    format_in_progress_peaks,
    parse_in_progress_peaks,
)
from vpa.logic.recommender.cluster import (
    ContainerId,
    PodId,
    QualityContext,
    RecommendationChange,
    UnknownContainerError,
)
from vpa.logic.recommender.conflicts import VpaConflicts, hpa_conflicts
from vpa.logic.recommender.cost_aware import pod_recommender_for
from vpa.logic.recommender.evictions import ooms_from_eviction_event
from vpa.logic.recommender.nodecaps import cap_to_largest_node
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore, compute_recommendation
from vpa.logic.recommender.statuswrites import worth_writing
from vpa.model.clock import Clock
from vpa.model.event import EventView
from vpa.model.features import FeatureGates
from vpa.model.node import HpaView, NodeView
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY
from vpa.model.selector import Selector
from vpa.model.settings import CommonSettings, RecommenderSettings
from vpa.model.vpa import (
    CAPPED_TO_NODE_CONDITION,
    DEFAULT_RECOMMENDER_NAME,
    Condition,
    ConditionType,
    Recommendation,
    TargetRef,
    UpdateMode,
    VpaStatus,
    VpaView,
)

log = structlog.get_logger(__name__)

T = TypeVar("T")
COMPONENT: Final = "recommender"
STEPS: Final = ("LoadVPAs", "LoadPods", "LoadMetrics", "DeleteRemovedPods", "UpdateVPAs",
                "MaintainCheckpoints", "GarbageCollect", "total")
OOM_QUEUE_SIZE: Final = 5000  # upstream's OOM channel capacity
SEEN_EVENTS_SIZE: Final = 10000  # eviction events remembered for de-duplication
_NEXT_LOOP_MARGIN_S: Final = 5.0  # checkpoint writing ends this long before the next tick (at most)...
_NEXT_LOOP_MARGIN_FRACTION: Final = 0.1  # ...or this fraction of the interval, if smaller
_CHECKPOINT_SPREAD_MIN: Final = 1000  # up to this many VPAs' checkpoints are written every loop (upstream)...
_CHECKPOINT_SPREAD_LOOPS: Final = 10  # ...beyond it, each loop writes the oldest 1/this of them
_SORT_RUN: Final = 1000  # checkpoint candidates sorted in one call (about 1 ms), the runs merged lazily
NO_PODS_MATCHED_REASON: Final = "NoPodsMatched"
NO_PODS_MATCHED_MESSAGE: Final = "No pods match this VPA object"
# Conditions and event reasons of our own (upstream has none for these): each condition is True while the
# situation lasts and removed when it ends; its Warning event is sent when it appears or its message changes.
CAPPED_TO_NODE: Final = CAPPED_TO_NODE_CONDITION
CAPPED_TO_NODE_REASON: Final = "CappedToLargestNode"
CONFLICTING_VPA: Final = "ConflictingVPA"
CONFLICTING_VPA_REASON: Final = "ConflictingVPA"
CONFLICTING_HPA: Final = "ConflictingHPA"
CONFLICTING_HPA_REASON: Final = "ConflictingHPA"
VPA_API_VERSION: Final = "autoscaling.k8s.io/v1"
_EXECUTION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
                             300.0)
_RECOMMENDATION_LATENCY_BUCKETS: Final = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0,
                                          1200.0, 1800.0)
# Upstream's quality buckets: CPU 0.01 … 655.36 cores and memory 1 MB … 65.5 GB (17 exponential buckets,
# factor 2), and relative differences from -100 % to ×100.
_CPU_QUALITY_BUCKETS: Final = tuple(0.01 * 2.0**i for i in range(17))
_MEMORY_QUALITY_BUCKETS: Final = tuple(1e6 * 2.0**i for i in range(17))
_RELATIVE_QUALITY_BUCKETS: Final = (
    -1.0, -0.75, -0.5, -0.25, -0.1, -0.05, -0.025, -0.01, -0.005, -0.0025, -0.001,
    0.0, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
    100.0,
)
# `vpa_resources_get_resources_count{source}`: where a container's requests were read.
SOURCE_CONTAINER_STATUSES: Final = "Pod.Status.ContainerStatuses"
SOURCE_SPEC_CONTAINERS: Final = "Pod.Spec.Containers"


# --------------------------------------------------------------------------------------- I/O seams


class ObjectSource(Protocol[T]):
    """What the loop reads of a watch cache (`vpa.kube.watching.WatchCache` fits)."""

    def list(self) -> list[T]: ...

    def on_update(self, handler: Callable[[T, T], None]) -> None: ...


class Listing(Protocol[T]):
    """A cache read as a whole (the Node and HPA caches)."""

    def list(self) -> list[T]: ...


class EventSink(Protocol):
    """Where the recommender's own Warning events go (`vpa.kube.eventing.EventRecorder`)."""

    def warning(self, ref: ObjectRef, reason: str, message: str) -> bool: ...


class EventSource(Protocol):
    """What the loop reads of the `Evicted` events cache (`vpa.kube.evictionwatching` builds one)."""

    def on_add(self, handler: Callable[[EventView], None]) -> None: ...


class MetricsSource(Protocol):
    @property
    def client_name(self) -> str: ...

    async def read(self) -> MetricsRead:
        """A new read on every call: the loop empties its `pods` once every recommender applied them."""
        ...


class Resolver(Protocol):
    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution: ...

    def forget_unused(self) -> None: ...


class StatusSink(Protocol):
    async def write(self, namespace: str, name: str, status: VpaStatus) -> None: ...


class CheckpointSink(Protocol):
    async def list(self) -> list[JsonObj]: ...

    async def write(self, namespace: str, name: str, vpa_name: str, container_name: str,
                    status: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> None: ...

    async def delete(self, namespace: str, name: str) -> None: ...


# ------------------------------------------------------------------------------------ pure helpers


def _set_condition(conditions: dict[str, Condition], condition_type: str, status: bool, reason: str,
                   message: str, now: float) -> None:
    """Upstream `Conditions.Set`: the transition time is kept while the status value stays the same."""
    value = "True" if status else "False"
    old = conditions.get(condition_type)
    since = old.last_transition_time if old is not None and old.status == value else float(math.floor(now))
    conditions[condition_type] = Condition(condition_type, value, since, reason, message)


def next_conditions(previous: Iterable[Condition], *, unsupported: str | None, pods_matched: bool,
                    has_recommendation: bool, now: float) -> tuple[Condition, ...]:
    """The VPA conditions after a loop (spec §1.6, §3.3), sorted by type.

    ConfigDeprecated is always removed; ConfigUnsupported is set (with the message) or removed;
    NoPodsMatched is set when no pod matches and removed otherwise; RecommendationProvided is True with an
    empty reason when a recommendation exists, else False (with the NoPodsMatched reason when no pod
    matches). Conditions this code does not manage are kept as they are.
    """
    conditions = {c.type: c for c in previous}
    conditions.pop(ConditionType.CONFIG_DEPRECATED, None)
    if unsupported is None:
        conditions.pop(ConditionType.CONFIG_UNSUPPORTED, None)
    else:
        _set_condition(conditions, ConditionType.CONFIG_UNSUPPORTED, True, "", unsupported, now)
    reason = message = ""
    if pods_matched:
        conditions.pop(ConditionType.NO_PODS_MATCHED, None)
    else:
        reason, message = NO_PODS_MATCHED_REASON, NO_PODS_MATCHED_MESSAGE
        _set_condition(conditions, ConditionType.NO_PODS_MATCHED, True, reason, message, now)
    if has_recommendation:
        _set_condition(conditions, ConditionType.RECOMMENDATION_PROVIDED, True, "", "", now)
    else:
        _set_condition(conditions, ConditionType.RECOMMENDATION_PROVIDED, False, reason, message, now)
    return tuple(conditions[key] for key in sorted(conditions))


def with_own_conditions(conditions: Iterable[Condition], wanted: Mapping[str, tuple[str, str] | None],
                        now: float) -> tuple[tuple[Condition, ...], list[str]]:
    """Our own conditions (`CappedToNode`, `ConflictingVPA`, `ConflictingHPA`) set from `wanted` (type →
    (reason, message), or None to remove it), sorted by type, and the types whose event is due: those that
    were not True before or whose message changed."""
    current = {c.type: c for c in conditions}
    raised = []
    for condition_type, value in wanted.items():
        old = current.get(condition_type)
        if value is None:
            current.pop(condition_type, None)
            continue
        reason, message = value
        if old is None or not old.is_true or old.message != message:
            raised.append(condition_type)
        _set_condition(current, condition_type, True, reason, message, now)
    return tuple(current[key] for key in sorted(current)), raised


def owner_name(vpa: VpaView, hosted: Sequence[str]) -> str | None:
    """Which of the recommenders `hosted` in this process handles `vpa` (spec §3.4 per name): the first
    name in its `spec.recommenders` that is hosted, `default` for a VPA naming none; None if no hosted
    recommender is selected (that VPA is left alone)."""
    for name in vpa.recommenders or (DEFAULT_RECOMMENDER_NAME,):
        if name in hosted:
            return name
    return None


@dataclass(frozen=True, slots=True)
class OomKill:
    container_id: ContainerId
    timestamp: float
    memory_bytes: int


def ooms_from_pod_update(old: PodView, new: PodView) -> list[OomKill]:
    """OOM kills revealed by one pod update (upstream's OOM observer, spec §3.2).

    (a) the container's current state is Terminated/OOMKilled and it was not terminated before (or it
    restarted since): time = that state's finishedAt, memory = the new pod's request; (b) it restarted
    (restartCount grew) and its last termination was OOMKilled: time = that finishedAt, memory = the old
    pod's request. Callers de-duplicate by finishedAt, so one kill seen both ways counts once.
    """
    kills: list[OomKill] = []
    pod_id = PodId(new.namespace, new.name)
    for status in new.container_statuses:
        old_status = old.container_status(status.name)
        if old_status is None:
            continue
        restarted = status.restart_count > old_status.restart_count
        if (status.state == "terminated" and status.state_reason == "OOMKilled"
                and (old_status.state != "terminated" or restarted) and status.state_finished_at is not None):
            memory = new.current_requests(status.name).memory_bytes or 0
            kills.append(OomKill(ContainerId(pod_id, status.name), status.state_finished_at, memory))
        elif (restarted and status.last_terminated_reason == "OOMKilled"
              and status.last_terminated_at is not None):
            memory = old.current_requests(status.name).memory_bytes or 0
            kills.append(OomKill(ContainerId(pod_id, status.name), status.last_terminated_at, memory))
    return kills


# ------------------------------------------------------------------------------------------ metrics


class RecommenderMetrics:
    """Upstream's `vpa_recommender_*` metrics, plus counters of our own (skipped inputs, write errors, status
    writes skipped) and the gauges of our conditions."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.execution_latency = Histogram(
            "vpa_recommender_execution_latency_seconds",
            "Time spent in various parts of VPA Recommender main loop.", ["step"],
            buckets=_EXECUTION_BUCKETS, registry=registry)
        self.vpa_objects = Gauge(
            "vpa_recommender_vpa_objects_count", "Number of VPA objects present in the cluster.",
            ["update_mode", "has_recommendation", "api", "matches_pods", "unsupported_config"],
            registry=registry)
        self.recommendation_latency = Histogram(
            "vpa_recommender_recommendation_latency_seconds",
            "Time elapsed from creating a valid VPA configuration to the first recommendation.",
            buckets=_RECOMMENDATION_LATENCY_BUCKETS, registry=registry)
        self.aggregate_states = Gauge(
            "vpa_recommender_aggregate_container_states_count",
            "Number of aggregate container states being tracked by the recommender", registry=registry)
        # Upstream's counter name has no `_total`, which prometheus_client's Counter would append.
        self.metric_server_responses = UnsuffixedCounter(
            "vpa_recommender_metric_server_responses",
            "Count of responses to queries to metrics server", ["is_error", "client_name"],
            registry=registry)
        self.skipped = Counter(
            "vpa_recommender_skipped_inputs",
            "Inputs the recommender skipped (malformed checkpoints, unknown containers, rejected OOMs).",
            ["what"], registry=registry)
        self.write_errors = Counter(
            "vpa_recommender_write_errors", "Failed writes of VPA status or checkpoints.", ["what"],
            registry=registry)
        self.status_writes_skipped = Counter(
            "vpa_recommender_status_writes_skipped",
            "VPA status writes skipped because only bounds moved, within --bounds-write-tolerance.",
            registry=registry)
        self.get_resources = UnsuffixedCounter(
            "vpa_resources_get_resources_count", "Count of get resources calls by source", ["source"],
            registry=registry)
        self.quality = QualityMetrics(registry)
        self.capped_to_node = Gauge(
            "vpa_recommender_vpas_capped_to_node",
            "VPAs whose recommendation was capped to the largest schedulable node (--cap-to-largest-node).",
            registry=registry)
        self.vpa_conflicts = Gauge(
            "vpa_recommender_vpa_conflicts",
            "VPAs ignored because an older VPA targets the same pods (condition ConflictingVPA).",
            registry=registry)
        self.hpa_conflicts = Gauge(
            "vpa_recommender_hpa_conflicts",
            "VPAs whose target an HPA scales on a resource the VPA controls (condition ConflictingHPA).",
            registry=registry)


class QualityMetrics:
    """Upstream's `vpa_quality_*` metrics (spec §3.14, §6.2): every accepted usage sample of a container
    that needs a recommendation against the recommendation last made for it, and every recommendation
    against the previous one. Histograms are `LoopHistogram`s: a 50,000-container loop observes
    hundreds of thousands of values."""

    def __init__(self, registry: CollectorRegistry) -> None:
        mode, mode_missing = ["update_mode"], ["update_mode", "recommendation_missing"]
        self.relative_diffs = LoopHistogram(
            "vpa_quality_usage_recommendation_relative_diffs",
            "Diffs between recommendation and usage, normalized by recommendation value",
            ["update_mode", "resource", "is_oom"], _RELATIVE_QUALITY_BUCKETS, registry=registry)
        self.missing = UnsuffixedCounter(
            "vpa_quality_usage_sample_missing_recommendation_count",
            "Count of usage samples when a recommendation should be present but is missing",
            ["update_mode", "resource", "is_oom"], registry=registry)
        self.cpu_over = LoopHistogram(
            "vpa_quality_cpu_recommendation_over_usage_diffs_cores",
            "Absolute diffs between recommendation and usage for CPU when recommendation > usage",
            mode_missing, _CPU_QUALITY_BUCKETS, registry=registry)
        self.memory_over = LoopHistogram(
            "vpa_quality_mem_recommendation_over_usage_diffs_bytes",
            "Absolute diffs between recommendation and usage for memory when recommendation > usage",
            [*mode_missing, "is_oom"], _MEMORY_QUALITY_BUCKETS, registry=registry)
        self.cpu_lower_equal = LoopHistogram(
            "vpa_quality_cpu_recommendation_lower_equal_usage_diffs_cores",
            "Absolute diffs between recommendation and usage for CPU when recommendation <= usage",
            mode_missing, _CPU_QUALITY_BUCKETS, registry=registry)
        self.memory_lower_equal = LoopHistogram(
            "vpa_quality_mem_recommendation_lower_equal_usage_diffs_bytes",
            "Absolute diffs between recommendation and usage for memory when recommendation <= usage",
            [*mode_missing, "is_oom"], _MEMORY_QUALITY_BUCKETS, registry=registry)
        self.cpu_recommendations = LoopHistogram(
            "vpa_quality_cpu_recommendations_cores",
            "CPU recommendation values as observed on recorded usage sample",
            mode, _CPU_QUALITY_BUCKETS, registry=registry)
        self.memory_recommendations = LoopHistogram(
            "vpa_quality_mem_recommendations_bytes",
            "Memory recommendation values as observed on recorded usage sample",
            [*mode, "is_oom"], _MEMORY_QUALITY_BUCKETS, registry=registry)
        self.relative_changes = LoopHistogram(
            "vpa_quality_relative_recommendation_changes",
            "Changes between consecutive recommendation values, normalized by old value",
            ["update_mode", "resource", "vpa_size_log2"], _RELATIVE_QUALITY_BUCKETS, registry=registry)

    def observe_sample(self, context: QualityContext, resource: str, usage: int, is_oom: bool) -> None:
        """One accepted sample (`usage` in millicores or bytes), as upstream's `observeQualityMetrics`."""
        mode = _mode_label(context.update_mode)
        oom = "true" if is_oom else "false"
        cpu = resource == CPU
        usage_value = usage / 1000.0 if cpu else float(usage)
        last = context.last_recommendation
        amount = None if last is None else (last.cpu_millicores if cpu else last.memory_bytes)
        if not amount:  # no recommendation yet, or zero for this resource
            self.missing.labels(update_mode=mode, resource=resource, is_oom=oom).inc()
            self._observe_diff(usage_value, 0.0, "true", oom, cpu, mode)
            return
        recommended = amount / 1000.0 if cpu else float(amount)
        if cpu:
            self.cpu_recommendations.labels(mode).observe(recommended)
        else:
            self.memory_recommendations.labels(mode, oom).observe(recommended)
        self._observe_diff(usage_value, recommended, "false", oom, cpu, mode)
        self.relative_diffs.labels(mode, resource, oom).observe((usage_value - recommended) / recommended)

    def _observe_diff(self, usage: float, recommended: float, missing: str, oom: str, cpu: bool,
                      mode: str) -> None:
        diff = abs(usage - recommended)
        if cpu:
            histogram = self.cpu_over if recommended > usage else self.cpu_lower_equal
            histogram.labels(mode, missing).observe(diff)
        else:
            histogram = self.memory_over if recommended > usage else self.memory_lower_equal
            histogram.labels(mode, missing, oom).observe(diff)

    def observe_change(self, change: RecommendationChange) -> None:
        """A new uncapped target against the previous one (nothing on the first one; a previous zero is
        skipped), labelled with the VPA's size class."""
        if change.previous is None:
            return
        mode = _mode_label(change.update_mode)
        size = str(vpa_size_log2(change.pod_count))
        for resource, new, old in ((CPU, change.current.cpu_millicores, change.previous.cpu_millicores),
                                   (MEMORY, change.current.memory_bytes, change.previous.memory_bytes)):
            if new is not None and old:
                self.relative_changes.labels(mode, resource, size).observe(new / old - 1.0)


def _mode_label(mode: UpdateMode | None) -> str:
    return "" if mode is None else mode.value


def vpa_size_log2(pods: int) -> int:
    """Upstream's `vpa_size_log2` label: floor(log2(pods)), 0 for 0 or 1 pod, capped at 20 (as the
    updater's; components do not import each other)."""
    return min(20, max(0, pods.bit_length() - 1))


# ------------------------------------------------------------------------------------------ the loop


J = TypeVar("J")


async def _produce_and_write(produce: Callable[[Callable[[J], Awaitable[None]]], Awaitable[None]],
                             write: Callable[[J], Awaitable[None]], workers: int) -> None:
    """One producer (the CPU work, paced by itself) feeding `workers` concurrent writers through a short
    queue: CPU work stays in one task, so it yields to timers, and at most `workers` writes are in flight."""
    queue: asyncio.Queue[J] = asyncio.Queue(maxsize=max(1, workers))
    done = object()

    async def worker() -> None:
        while True:
            item = await queue.get()
            if item is done:
                return
            await write(item)

    tasks = [asyncio.create_task(worker()) for _ in range(max(1, workers))]
    try:
        await produce(queue.put)
        for _ in tasks:
            await queue.put(done)  # type: ignore[arg-type]
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def _release(items: list[Any], chunk: int = 1000) -> None:
    """Empty a big list (a read this loop owns) a chunk at a time, yielding to the event loop between."""
    while items:
        del items[-chunk:]
        await asyncio.sleep(0)


async def _paced(steps: Generator[None, None, T], pacer: Slices) -> T:
    """Run a pure-layer generator of small steps (e.g. `ClusterState.garbage_collect_steps`) to its end,
    yielding to the event loop whenever the pacer says so; returns the generator's result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        if pacer.due():
            await pacer.pause()


TARGET_CHANGE_LINES: Final = 20
"""`vpa_target_changed` lines per recommender loop at most; the loop summary counts the rest."""


def _targets(recommendation: Recommendation | None) -> dict[str, dict[str, str]]:
    """Container → target quantities, as logged when they change."""
    if recommendation is None:
        return {}
    return {c.container_name: c.target.to_resource_list() for c in recommendation.containers}


@dataclass(slots=True)
class _TrackedVpa:
    view: VpaView
    resolution: Resolution


@dataclass(slots=True)
class LoopReport:
    """What one `run_once` did (for tests, logs and the benchmark)."""

    vpas: int = 0
    pods: int = 0
    samples: int = 0
    samples_skipped: int = 0
    ooms: int = 0
    metrics_error: str | None = None
    status_writes: int = 0
    status_writes_skipped: int = 0
    """Statuses that changed only in bounds within `--bounds-write-tolerance`, so were not written."""
    status_write_errors: int = 0
    checkpoints_written: int = 0
    target_changes: int = 0
    """VPAs whose target changed this loop (bounds move every loop; a target change is news)."""
    checkpoint_errors: int = 0
    checkpoints_collected: int = 0
    aggregates_collected: int = 0
    step_seconds: dict[str, float] = field(default_factory=dict)
    vpa_object_counts: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    """(update mode, has recommendation, matches pods, unsupported config) → VPAs, for the gauge."""
    capped_to_node: int = 0
    vpa_conflicts: int = 0
    hpa_conflicts: int = 0


@dataclass(slots=True)
class RestoreReport:
    loaded: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


class Recommender:
    """One recommender: its cluster state, its inputs and outputs, its metrics. See the module docstring."""

    def __init__(
        self,
        settings: RecommenderSettings,
        *,
        pods: ObjectSource[PodView],
        vpas: ObjectSource[VpaView],
        clock: Clock,
        metrics_source: MetricsSource,
        resolver: Resolver,
        status_writer: StatusSink,
        checkpoints: CheckpointSink,
        registry: CollectorRegistry | None = None,
        health: HealthState | None = None,
        namespace: str = "",
        ignored_namespaces: Iterable[str] = (),
        per_vpa_config: bool = False,
        native_sidecars: bool = False,
        chunk_budget_s: float = 0.003,
        history: HistorySource | None = None,
        history_metrics: PrometheusClientMetrics | None = None,
        metrics: RecommenderMetrics | None = None,
        hosted_names: Sequence[str] = (),
        collects_checkpoints: bool = True,
        events: EventSource | None = None,
        nodes: Listing[NodeView] | None = None,
        hpas: Listing[HpaView] | None = None,
        recorder: EventSink | None = None,
    ) -> None:
        self.settings = settings
        # `nodes` is read only with --cap-to-largest-node; `recorder` gets our own Warning events.
        self._nodes = nodes if settings.cap_to_largest_node else None
        self._hpas = hpas
        self._recorder = recorder
        self._pods = pods
        self._vpas = vpas
        self._clock = clock
        self._metrics_source = metrics_source
        self._resolver = resolver
        self._status_writer = status_writer
        self._checkpoints = checkpoints
        # Recommenders hosted together share one set of collectors (a registry refuses duplicates).
        registry = registry if registry is not None else CollectorRegistry()
        self.metrics = metrics if metrics is not None else RecommenderMetrics(registry)
        self.history_metrics = (history_metrics if history_metrics is not None
                                else PrometheusClientMetrics(registry))
        self._history = history
        self._hosted = tuple(hosted_names) or (settings.recommender_name,)
        # Orphaned checkpoints are collected by one recommender of a group: collection looks at every VPA.
        self.collects_checkpoints = collects_checkpoints
        self._health = health
        self._namespace = namespace
        self._ignored = frozenset(ns for ns in ignored_namespaces if ns)
        self._config = RecommenderConfig.from_settings(settings, per_vpa_config=per_vpa_config)
        # Gate NativeSidecar (AEP-8905): init containers with `restartPolicy: Always` are tracked, sampled
        # and OOM-observed like containers; plain init containers never are.
        self._native_sidecars = native_sidecars
        self._chunk_budget_s = chunk_budget_s
        self._ooms: deque[OomKill] = deque(maxlen=OOM_QUEUE_SIZE)
        # The pod as the watch showed it at each queued OOM kill (`_track_for_oom`); emptied with the queue.
        self._oom_views: dict[PodId, PodView] = {}
        # With --recommend-on-oom the group sets a trigger; OOM-killed pods' labels say which VPAs to redo.
        self.oom_trigger: Trigger | None = None
        self._oom_pods: dict[PodId, Mapping[str, str]] = {}
        self._last_oom: dict[PodId, dict[str, float]] = {}
        self._seen_events: OrderedDict[str, None] = OrderedDict()
        self.reset()
        pods.on_update(self._on_pod_update)
        if events is not None:
            events.on_add(self._on_eviction_event)

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
        events: EventSource | None = None,
        nodes: Listing[NodeView] | None = None,
        hpas: Listing[HpaView] | None = None,
        recorder: EventSink | None = None,
    ) -> Recommender:
        """The production wiring: the kube adapters on the process's shared client. `events`, if given, is
        an `Evicted` events cache the caller runs; `nodes` and `hpas` are Node and HPA caches it runs."""
        namespace = common.vpa_object_namespace or None
        return cls(
            settings, pods=pods, vpas=vpas, clock=clock,
            metrics_source=PodMetricsReader(client, namespace),
            resolver=TargetResolver(client, clock, namespace=namespace),
            status_writer=VpaStatusWriter(client),
            checkpoints=CheckpointStore(client, namespace),
            registry=registry, health=health, namespace=common.vpa_object_namespace,
            ignored_namespaces=common.ignored_vpa_object_namespaces, per_vpa_config=gates.per_vpa_config,
            native_sidecars=gates.native_sidecar,
            history=(PrometheusHistoryReader(settings.prometheus, namespace=common.vpa_object_namespace)
                     if settings.storage == "prometheus" else None),
            events=events, nodes=nodes, hpas=hpas, recorder=recorder,
        )

    def reset(self) -> None:
        """Forget everything learnt (a new leader term starts from checkpoints, as a new process would)."""
        # The algorithm follows this recommender's name (`cost-aware`, `moving-window`, else upstream's):
        # vpa.logic.recommender.cost_aware.pod_recommender_for.
        self.core = RecommenderCore(self._config, pod_recommender_for(self.settings.recommender_name,
                                                                      self._config.estimation))
        self._tracked: dict[tuple[str, str], _TrackedVpa] = {}
        # Tables of every pod are sharded (`vpa.aio.shards`): a dict or set of 50,000 grows in one long step.
        self._applied_pods: ShardedDict[PodId, PodView] = ShardedDict()
        self._written: dict[tuple[str, str], tuple[str, VpaStatus]] = {}
        self._ooms.clear()
        self._oom_pods.clear()
        self._last_oom.clear()
        self._last_checkpoint_gc: float | None = None
        self.loops = 0
        self.last_report: LoopReport | None = None

    # ---------------------------------------------------------------------------------- selection

    def handles(self, vpa: VpaView) -> bool:
        """Spec §3.4: the recommender name, then the namespace filters. Among recommenders hosted in one
        process a VPA belongs to exactly one: the first hosted name it selects (admission allows one)."""
        if owner_name(vpa, self._hosted) != self.settings.recommender_name:
            return False
        if self._namespace and vpa.namespace != self._namespace:
            return False
        return vpa.namespace not in self._ignored

    @property
    def tracked(self) -> Mapping[tuple[str, str], _TrackedVpa]:
        return self._tracked

    # ------------------------------------------------------------------------------- OOM observer

    def _on_pod_update(self, old: PodView, new: PodView) -> None:
        cached = new
        if self._native_sidecars:
            old, new = old.with_native_sidecars(), new.with_native_sidecars()
        for kill in ooms_from_pod_update(old, new):
            seen = self._last_oom.setdefault(kill.container_id.pod, {})
            if seen.get(kill.container_id.container_name) == kill.timestamp:
                continue
            seen[kill.container_id.container_name] = kill.timestamp
            self._ooms.append(kill)
            self._oom_views[kill.container_id.pod] = cached  # to track it if no loop has loaded it yet
            if self.oom_trigger is not None:
                self._oom_pods[kill.container_id.pod] = new.labels
                self.oom_trigger.fire(f"{new.namespace}/{new.name}")

    def _on_eviction_event(self, event: EventView) -> None:
        """OOMs from a memory-pressure eviction (spec §3.2), once per event uid."""
        key = event.uid or f"{event.namespace}/{event.name}"
        if key in self._seen_events:
            return
        self._seen_events[key] = None
        if len(self._seen_events) > SEEN_EVENTS_SIZE:
            self._seen_events.popitem(last=False)
        for oom in ooms_from_eviction_event(event):
            self._ooms.append(OomKill(oom.container_id, oom.timestamp, oom.memory_bytes))

    # ------------------------------------------------------------------------------------ running

    async def run_forever(self) -> None:
        """Restore from checkpoints, then `run_once` at once and on every tick of `--recommender-interval`
        after that (upstream's ticker waits an interval first). Health activity is reported per loop."""
        await _tick_forever(self._clock, self.settings.recommender_interval_s, self._health,
                            self.reset, self.restore, self.run_once)

    async def restore(self) -> RestoreReport:
        """Load VPAs, then every checkpoint of a handled VPA into its initial state. A malformed
        checkpoint is skipped with a warning and counted; a failed LIST only costs the history.

        With `--storage=prometheus`, history comes from Prometheus instead and checkpoints are neither
        read nor written (upstream, spec §3.13): `loaded`/`skipped` then count samples."""
        if self.settings.storage == "prometheus":
            history = await load_history(self._history, self.core.cluster, self.history_metrics,
                                         self._clock.now(), chunk_budget_s=self._chunk_budget_s)
            return RestoreReport(history.samples, history.samples_skipped, history.errors)
        report = RestoreReport()
        await self._load_vpas(LoopReport(), self._clock.now())
        try:
            items = await self._checkpoints.list()
        except Exception as err:
            log.warning("recommender_checkpoint_list_failed", error=str(err))
            report.errors.append(str(err))
            return report
        now = self._clock.now()
        cluster = self.core.cluster
        for item in items:
            metadata = item.get("metadata") or {}
            spec = item.get("spec") or {}
            namespace = str(metadata.get("namespace") or "")
            name = str(metadata.get("name") or "")
            vpa_name, container = spec.get("vpaObjectName"), spec.get("containerName")
            if (namespace, vpa_name) not in self._tracked:
                continue  # another recommender's, an ignored namespace's, or an orphan (GC deletes it)
            try:
                if not isinstance(vpa_name, str) or not isinstance(container, str) or not container:
                    raise CheckpointError("spec.vpaObjectName and spec.containerName must be strings")
                cluster.load_checkpoint(namespace, vpa_name, container, item.get("status"), now,
                                        self._restored_peaks(namespace, name, metadata))
            except (CheckpointError, KeyError) as err:
                report.skipped += 1
                report.errors.append(f"{namespace}/{name}: {err}")
                self.metrics.skipped.labels(what="malformed_checkpoint").inc()
                log.warning("recommender_checkpoint_skipped", checkpoint=f"{namespace}/{name}",
                            error=str(err))
                continue
            report.loaded += 1
        log.info("recommender_restored_checkpoints", loaded=report.loaded, skipped=report.skipped)
        return report

    def _restored_peaks(self, namespace: str, name: str, metadata: Mapping[str, Any]) -> list[InProgressPeak]:
        """The in-progress memory peaks kept in a checkpoint's annotation (none in upstream's checkpoints);
        a malformed annotation costs only the peaks, not the checkpoint."""
        annotations = metadata.get("annotations")
        if not isinstance(annotations, Mapping):
            return []
        try:
            return parse_in_progress_peaks(annotations.get(IN_PROGRESS_PEAKS_ANNOTATION))
        except CheckpointError as err:
            self.metrics.skipped.labels(what="malformed_checkpoint_peaks").inc()
            log.warning("recommender_checkpoint_peaks_skipped", checkpoint=f"{namespace}/{name}",
                        error=str(err))
            return []

    async def run_once(self, next_loop_at: float | None = None) -> LoopReport:
        """One loop. Each step's failure is logged and the loop goes on; nothing here raises for API
        errors. `next_loop_at` (the clock's monotonic time of the next tick) bounds checkpoint writing."""
        return (await run_loop([self], next_loop_at))[0]

    def _steps(self, report: LoopReport, now: float, deadline: float,
               live_pods: ShardedSet[PodId]) -> dict[str, Callable[[], Awaitable[None]]]:
        """This recommender's part of each step but LoadMetrics (whose read `run_loop` shares)."""
        return {
            "LoadVPAs": lambda: self._load_vpas(report, now),
            "LoadPods": lambda: self._load_pods(report, now, live_pods),
            "DeleteRemovedPods": lambda: self._delete_removed_pods(live_pods),
            "UpdateVPAs": lambda: self._update_vpas(report, now),
            "MaintainCheckpoints": lambda: self._maintain_checkpoints(report, now, deadline),
            "GarbageCollect": lambda: self._garbage_collect(report, now),
        }

    # -------------------------------------------------------------------------------------- steps

    async def _load_vpas(self, report: LoopReport, now: float) -> None:
        pacer = Slices(self._chunk_budget_s)
        handled: list[VpaView] = []
        for vpa in self._vpas.list():
            if self.handles(vpa):
                handled.append(vpa)
            if pacer.due():
                await pacer.pause()
        resolutions: list[Resolution] = []
        batch = max(1, self.settings.update_worker_count) * 10
        for start in range(0, len(handled), batch):
            chunk = handled[start:start + batch]
            resolutions.extend(await asyncio.gather(
                *(self._resolver.resolve(vpa.namespace, vpa.target_ref) for vpa in chunk)))
        cluster = self.core.cluster
        pacer = Slices(self._chunk_budget_s)  # the resolutions awaited: a fresh slice
        keep: set[tuple[str, str]] = set()
        for vpa, resolution in zip(handled, resolutions, strict=True):
            key = (vpa.namespace, vpa.name)
            keep.add(key)
            selector = resolution.selector if resolution.ok and resolution.selector is not None \
                else Selector.nothing()
            cluster.add_or_update_vpa(vpa, selector)
            self._tracked[key] = _TrackedVpa(vpa, resolution)
            if pacer.due():
                await pacer.pause()
        gone: list[tuple[str, str]] = []
        for key in list(self._tracked):
            if key not in keep:
                gone.append(key)
            if pacer.due():
                await pacer.pause()
        for key in gone:
            del self._tracked[key]
            self._written.pop(key, None)
            cluster.delete_vpa(*key)
            if pacer.due():
                await pacer.pause()
        report.vpas = len(self._tracked)

    async def _selectors_by_namespace(self, pacer: Slices) -> dict[str, list[Selector]]:
        out: dict[str, list[Selector]] = {}
        for (namespace, _), tracked in list(self._tracked.items()):
            if tracked.resolution.ok and tracked.resolution.selector is not None:
                out.setdefault(namespace, []).append(tracked.resolution.selector)
            if pacer.due():
                await pacer.pause()
        return out

    async def _load_pods(self, report: LoopReport, now: float, live: ShardedSet[PodId]) -> None:
        applied = self._applied_pods
        pacer = Slices(self._chunk_budget_s)
        selectors = await self._selectors_by_namespace(pacer) if self.settings.memory_saver else None
        from_status = from_spec = 0
        for cached in self._pods.list():
            if pacer.due():  # before any `continue`: 10,000 unchanged pods are 20 ms of CPU
                await pacer.pause()
            if cached.phase in ("", "Pending"):
                continue
            # The pod itself unless the gate is on and it has sidecars; `applied` keeps the cached view.
            pod = cached.with_native_sidecars() if self._native_sidecars else cached
            if selectors is not None and not any(
                    s.matches(pod.labels) for s in selectors.get(pod.namespace, ())):
                continue
            pod_id = PodId(pod.namespace, pod.name)
            live.add(pod_id)
            # Upstream reads every tracked container's requests each loop and counts where they came from.
            for container in pod.containers:
                status = pod.container_status(container.name)
                if status is not None and status.actual_requests is not None:
                    from_status += 1
                else:
                    from_spec += 1
            if applied.get(pod_id) is cached:
                continue  # unchanged since the last loop: the watch cache hands out a new view on change
            self._track_pod(pod_id, cached, pod, now)
        report.pods = len(live)
        if from_status:
            self.metrics.get_resources.labels(source=SOURCE_CONTAINER_STATUSES).inc(from_status)
        if from_spec:
            self.metrics.get_resources.labels(source=SOURCE_SPEC_CONTAINERS).inc(from_spec)

    def _track_pod(self, pod_id: PodId, cached: PodView, pod: PodView, now: float) -> None:
        """Put a running pod (`pod`: `cached` as the NativeSidecar gate sees it) and its containers into the
        model, remembering the cached view it came from."""
        cluster = self.core.cluster
        cluster.add_or_update_pod(pod_id, pod.labels, pod.phase, now)
        for container in pod.containers:
            cluster.add_or_update_container(ContainerId(pod_id, container.name),
                                            pod.current_requests(container.name), now)
        self._applied_pods[pod_id] = cached

    def _track_for_oom(self, pod_id: PodId, now: float) -> bool:
        """Track an OOM-killed pod the loop has not loaded yet (it started and was killed since the last
        loop), as the watch showed it at the kill, so that its first OOM counts: a container killed at start
        would otherwise lose it, and wait a crash back-off (10 s, 20 s, ... up to 5 min) for the next one.
        Only a running pod, and with `--memory-saver` only one some tracked VPA selects, as `_load_pods`
        would."""
        cached = self._oom_views.get(pod_id)
        if cached is None or cached.phase in ("", "Pending") or self._applied_pods.get(pod_id) is cached:
            return False  # unknown, not running, or already in the model as it is
        if self.settings.memory_saver and not any(
                key[0] == pod_id.namespace and tracked.resolution.selector is not None
                and tracked.resolution.selector.matches(cached.labels)
                for key, tracked in self._tracked.items()):
            return False
        pod = cached.with_native_sidecars() if self._native_sidecars else cached
        self._track_pod(pod_id, cached, pod, now)
        return True

    async def _apply_metrics(self, report: LoopReport, read: MetricsRead) -> None:
        """Samples from one (shared) PodMetrics read for the containers this recommender tracks, then the
        OOMs observed since the last loop."""
        cluster = self.core.cluster
        quality = self.metrics.quality
        pacer = Slices(self._chunk_budget_s)
        for usage in read.pods:
            pod_id = PodId(usage.namespace, usage.name)
            for container in usage.containers:
                container_id = ContainerId(pod_id, container.name)
                try:
                    cpu, memory = container.cpu_millicores, container.memory_bytes
                    cpu_added = cpu is not None and cluster.add_cpu_sample(container_id, cpu, usage.timestamp)
                    memory_added = memory is not None and cluster.add_memory_sample(
                        container_id, memory, usage.timestamp)
                    if cpu_added or memory_added:
                        report.samples += cpu_added + memory_added
                        context = cluster.quality_context(container_id, usage.timestamp)
                        if context is not None:
                            if cpu_added and cpu is not None:
                                quality.observe_sample(context, CPU, cpu, False)
                            if memory_added and memory is not None:
                                quality.observe_sample(context, MEMORY, memory, False)
                except UnknownContainerError:
                    report.samples_skipped += 1  # not tracked: Pending, init container, memory saver
            if pacer.due():
                await pacer.pause()
        self._apply_ooms(report)

    def _apply_ooms(self, report: LoopReport) -> None:
        """The OOMs observed since they were last applied, into the memory histories."""
        cluster = self.core.cluster
        quality = self.metrics.quality
        self._oom_pods.clear()
        while self._ooms:
            kill = self._ooms.popleft()
            try:
                try:
                    bumped = cluster.record_oom(kill.container_id, kill.timestamp, kill.memory_bytes)
                except UnknownContainerError:
                    if not self._track_for_oom(kill.container_id.pod, self._clock.now()):
                        raise
                    bumped = cluster.record_oom(kill.container_id, kill.timestamp, kill.memory_bytes)
                report.ooms += 1
                context = cluster.quality_context(kill.container_id, kill.timestamp)
                if context is not None:
                    quality.observe_sample(context, MEMORY, bumped, True)
            except (UnknownContainerError, OomRejected) as err:
                self.metrics.skipped.labels(what="oom").inc()
                log.info("recommender_oom_skipped", container=str(kill.container_id), error=str(err))
        self._oom_views.clear()

    async def _delete_removed_pods(self, live: ShardedSet[PodId]) -> None:
        cluster = self.core.cluster
        pacer = Slices(self._chunk_budget_s)
        removed: list[PodId] = []
        for pod_id in list(cluster.pod_ids()):
            if pod_id not in live:
                removed.append(pod_id)
            if pacer.due():
                await pacer.pause()
        for pod_id in removed:
            cluster.delete_pod(pod_id)
            self._applied_pods.pop(pod_id, None)
            self._last_oom.pop(pod_id, None)
            if pacer.due():
                await pacer.pause()

    async def react_to_ooms(self) -> LoopReport:
        """The prompt OOM pass (`--recommend-on-oom`): apply the OOMs queued since the last loop and
        rewrite the status of the VPAs whose pods were OOM-killed, without waiting for the next loop. Does
        nothing before the first loop (the pods and VPAs are not known yet: the loop applies them)."""
        report = LoopReport()
        if self.loops == 0 or not self._ooms:
            return report
        pods = dict(self._oom_pods)
        self._apply_ooms(report)
        keys = set()
        for key, tracked in self._tracked.items():
            selector = tracked.resolution.selector
            if selector is None or tracked.resolution.unsupported is not None:
                continue
            if any(pod.namespace == key[0] and selector.matches(labels) for pod, labels in pods.items()):
                keys.add(key)
        if keys:
            await self._update_vpas(report, self._clock.now(), only=keys)
        log.info("recommender_oom_pass_done", recommender=self.settings.recommender_name, ooms=report.ooms,
                 vpas=len(keys), status_writes=report.status_writes)
        return report

    async def _update_vpas(self, report: LoopReport, now: float,
                           only: set[tuple[str, str]] | None = None) -> None:
        """Compute every VPA's status (or those in `only`; paced, in this task) and hand the changed ones
        to the writers."""
        cluster = self.core.cluster
        core = self.core
        counts: dict[tuple[str, str, str, str], int] = {}
        report.vpa_object_counts = counts  # partial counts survive a failure half-way
        quality = self.metrics.quality
        pacer = Slices(self._chunk_budget_s)
        nodes = self._nodes.list() if self._nodes is not None else None
        # HPAs by (namespace, kind, name) of their target: each VPA looks at its own target's only.
        hpas: dict[tuple[str, str, str], list[HpaView]] = {}
        for hpa in self._hpas.list() if self._hpas is not None else ():
            hpas.setdefault((hpa.namespace, hpa.target_kind, hpa.target_name), []).append(hpa)
        # Paced: at 10,000 VPAs the whole tally takes 7 ms on a quiet machine, the top of a 24.5 ms first-loop
        # stall in `/debug/stalls`.
        tally = VpaConflicts()
        for vpa in self._vpas.list():
            tally.add(vpa)
            if pacer.due():
                await pacer.pause()
        losers = tally.losers()

        async def produce(put: Callable[[tuple[tuple[str, str], VpaStatus]], Awaitable[None]]) -> None:
            # VPAs without a recommendation in the API first: when writes queue (a first loop, a throttling
            # server), a first recommendation matters more than a refreshed one.
            first: list[tuple[tuple[str, str], _TrackedVpa]] = []
            rest: list[tuple[tuple[str, str], _TrackedVpa]] = []
            for item in list(self._tracked.items()):
                recommended = item[1].view.status.recommendation
                (rest if recommended is not None and not recommended.is_empty() else first).append(item)
                if pacer.due():
                    await pacer.pause()
            for key, tracked in itertools.chain(first, rest):
                if only is not None and key not in only:
                    continue
                view = tracked.view
                try:
                    recommendation = compute_recommendation(view, cluster.merged_states(*key),
                                                            core.recommender, core.config)
                    pods_matched = cluster.matching_pod_count(*key) > 0
                    for change in cluster.update_last_recommendation(
                            *key, {c.container_name: c.uncapped_target for c in recommendation.containers}):
                        quality.observe_change(change)
                    ref = view.target_ref
                    near = hpas.get((view.namespace, ref.kind, ref.name), []) if ref is not None else []
                    recommendation, own = self._own_conditions(report, view, recommendation, nodes, near,
                                                               losers.get(key))
                except Exception:
                    log.exception("recommender_vpa_failed", vpa=view.key)
                    continue
                has_recommendation = not recommendation.is_empty()
                old = view.status
                provided = old.condition(ConditionType.RECOMMENDATION_PROVIDED)
                had = (provided is not None and provided.is_true and old.recommendation is not None
                       and not old.recommendation.is_empty())
                if has_recommendation and not had and view.creation_timestamp:
                    self.metrics.recommendation_latency.observe(max(0.0, now - view.creation_timestamp))
                conditions = next_conditions(old.conditions, unsupported=tracked.resolution.unsupported,
                                             pods_matched=pods_matched, has_recommendation=has_recommendation,
                                             now=now)
                conditions, raised = with_own_conditions(conditions, own, now)
                self._send_events(view, raised, conditions)
                status = VpaStatus(recommendation, conditions, view.generation)
                mode = view.update_policy.update_mode
                label = (mode.value if mode is not None else "", str(has_recommendation).lower(),
                         str(pods_matched).lower(), str(tracked.resolution.unsupported is not None).lower())
                counts[label] = counts.get(label, 0) + 1
                # Written only when it differs from the cached object's status (beyond bounds within
                # --bounds-write-tolerance), and not again while the cache has not caught up with our own
                # previous write. One comparison per VPA with the default tolerance of 0, as before it.
                tolerance = self.settings.bounds_write_tolerance
                if status == old:
                    pass
                elif tolerance > 0 and not worth_writing(old, status, tolerance):
                    report.status_writes_skipped += 1
                    self.metrics.status_writes_skipped.inc()
                elif self._written.get(key) != (view.resource_version, status):
                    self._written[key] = (view.resource_version, status)
                    targets = _targets(recommendation)
                    if targets != _targets(old.recommendation):
                        report.target_changes += 1
                        if report.target_changes <= TARGET_CHANGE_LINES:
                            log.info("vpa_target_changed", vpa=view.key,
                                     recommender=self.settings.recommender_name, target=targets)
                    await put((key, status))
                if pacer.due():
                    await pacer.pause()

        async def write(item: tuple[tuple[str, str], VpaStatus]) -> None:
            key, status = item
            try:
                await self._status_writer.write(key[0], key[1], status)
                report.status_writes += 1
            except Exception as err:
                self._written.pop(key, None)  # try again next loop
                report.status_write_errors += 1
                self.metrics.write_errors.labels(what="status").inc()
                log.warning("recommender_status_write_failed", vpa=f"{key[0]}/{key[1]}", error=str(err))

        await _produce_and_write(produce, write, self.settings.update_worker_count)
        report.vpa_object_counts = counts

    def _own_conditions(self, report: LoopReport, view: VpaView, recommendation: Recommendation,
                        nodes: list[NodeView] | None, hpas: Iterable[HpaView], winner: VpaView | None,
                        ) -> tuple[Recommendation, dict[str, tuple[str, str] | None]]:
        """The recommendation capped to the largest node (with --cap-to-largest-node) and our own
        conditions for `with_own_conditions`; counts them into the report for the gauges."""
        wanted: dict[str, tuple[str, str] | None] = {}
        if nodes is not None:
            recommendation, cap = cap_to_largest_node(recommendation, nodes)
            wanted[CAPPED_TO_NODE] = None if cap is None else (CAPPED_TO_NODE_REASON, cap.message())
            report.capped_to_node += cap is not None
        else:
            wanted[CAPPED_TO_NODE] = None
        if winner is not None:
            ref = view.target_ref
            target = f"{ref.kind}/{ref.name}" if ref is not None else "the target"
            wanted[CONFLICTING_VPA] = (CONFLICTING_VPA_REASON, (
                f"VPA {winner.name} also targets {target} and takes precedence for its pods (older, or "
                f"as old and first by name): where both apply, the admission controller and the updater "
                f"act on {winner.name}, not on this VPA; delete one of them"))
            report.vpa_conflicts += 1
        else:
            wanted[CONFLICTING_VPA] = None
        fights = hpa_conflicts(view, hpas, (c.container_name for c in recommendation.containers))
        if fights:
            wanted[CONFLICTING_HPA] = (CONFLICTING_HPA_REASON, (
                "; ".join(f.describe() for f in fights)
                + ", which this VPA also sizes: HPA utilization is measured against the requests the VPA "
                  "changes, so the two will fight; scale the HPA on another metric or switch the "
                  "resource off in the VPA's resource policy"))
            report.hpa_conflicts += 1
        else:
            wanted[CONFLICTING_HPA] = None
        return recommendation, wanted

    def _send_events(self, view: VpaView, raised: Iterable[str], conditions: Iterable[Condition]) -> None:
        if self._recorder is None:
            return
        by_type = {c.type: c for c in conditions}
        ref = ObjectRef(kind="VerticalPodAutoscaler", namespace=view.namespace, name=view.name, uid=view.uid,
                        api_version=VPA_API_VERSION)
        for condition_type in raised:
            condition = by_type[condition_type]
            self._recorder.warning(ref, condition.reason, condition.message)

    async def _maintain_checkpoints(self, report: LoopReport, now: float, deadline: float) -> None:
        """Oldest-written VPAs first, until the deadline but at least one VPA per worker (spec §3.11), and
        beyond 1,000 VPAs at most a tenth of them per loop.
        Checkpoint content is computed here, paced; the workers only write."""
        cluster = self.core.cluster
        workers = max(1, self.settings.update_worker_count)
        pacer = Slices(self._chunk_budget_s)
        candidates: list[tuple[float, tuple[str, str]]] = []
        for key, tracked in list(self._tracked.items()):
            if not self._fetching_history(tracked.view):
                candidates.append((cluster.checkpoint_written(*key) or -math.inf, key))
            if pacer.due():
                await pacer.pause()
        # Sorted in runs merged lazily: one `sort` of 10,000 (time, key) pairs is up to 10 ms in one C call.
        runs: list[list[tuple[float, tuple[str, str]]]] = []
        for start in range(0, len(candidates), _SORT_RUN):
            run = candidates[start:start + _SORT_RUN]
            run.sort()
            runs.append(run)
            if pacer.due():
                await pacer.pause()
        order = heapq.merge(*runs)
        Job = tuple[tuple[str, str], list[tuple[str, dict[str, object], dict[str, str]]]]
        # Spread over loops: beyond _CHECKPOINT_SPREAD_MIN VPAs, a loop writes the oldest tenth (each VPA's
        # checkpoints are then refreshed every 10 loops) instead of as many as the deadline allows.
        budget = max(workers, _CHECKPOINT_SPREAD_MIN, math.ceil(len(candidates) / _CHECKPOINT_SPREAD_LOOPS))

        async def produce(put: Callable[[Job], Awaitable[None]]) -> None:
            for produced, (_, key) in enumerate(order):
                if produced >= budget:
                    return
                if produced >= workers and self._clock.monotonic() >= deadline:
                    return
                try:
                    contents = cluster.checkpoint_contents(*key, now)
                    payload = [(container, checkpoint_status(state, now),
                                {IN_PROGRESS_PEAKS_ANNOTATION: format_in_progress_peaks(peaks)})
                               for container, (state, peaks) in sorted(contents.items())]
                except Exception:
                    log.exception("recommender_checkpoint_failed", vpa=f"{key[0]}/{key[1]}")
                    continue
                await put((key, payload))
                if pacer.due():
                    await pacer.pause()

        async def write(job: Job) -> None:
            key, payload = job
            try:
                for container, status, annotations in payload:
                    await self._checkpoints.write(key[0], checkpoint_name(key[1], container), key[1],
                                                  container, status, annotations)
                    report.checkpoints_written += 1
                cluster.mark_checkpoint_written(*key, now)
            except Exception as err:
                report.checkpoint_errors += 1
                self.metrics.write_errors.labels(what="checkpoint").inc()
                log.warning("recommender_checkpoint_write_failed", vpa=f"{key[0]}/{key[1]}", error=str(err))

        await _produce_and_write(produce, write, workers)
        if self._last_checkpoint_gc is None:
            self._last_checkpoint_gc = now  # upstream: the first collection comes one interval after start
        elif (self.collects_checkpoints
              and now - self._last_checkpoint_gc >= self.settings.checkpoints_gc_interval_s):
            self._last_checkpoint_gc = now
            report.checkpoints_collected = await self._collect_checkpoints()

    @staticmethod
    def _fetching_history(view: VpaView) -> bool:
        condition = view.status.condition(ConditionType.FETCHING_HISTORY)
        return condition is not None and condition.is_true

    async def _collect_checkpoints(self) -> int:
        """Delete checkpoints whose VPA no longer exists (any recommender's VPAs count as existing)."""
        pacer = Slices(self._chunk_budget_s)
        existing: set[tuple[str, str]] = set()
        for vpa in self._vpas.list():
            existing.add((vpa.namespace, vpa.name))
            if pacer.due():
                await pacer.pause()
        deleted = 0
        items = await self._checkpoints.list()
        pacer = Slices(self._chunk_budget_s)
        for item in items:
            if pacer.due():
                await pacer.pause()
            metadata = item.get("metadata") or {}
            namespace = str(metadata.get("namespace") or "")
            if namespace in self._ignored or (self._namespace and namespace != self._namespace):
                continue
            vpa_name = (item.get("spec") or {}).get("vpaObjectName")
            if (namespace, vpa_name) in existing:
                continue
            try:
                await self._checkpoints.delete(namespace, str(metadata.get("name") or ""))
                deleted += 1
            except Exception as err:
                self.metrics.write_errors.labels(what="checkpoint_gc").inc()
                log.warning("recommender_checkpoint_gc_failed",
                            checkpoint=f"{namespace}/{metadata.get('name')}", error=str(err))
        (log.info if deleted else log.debug)("recommender_checkpoints_collected", deleted=deleted)
        return deleted

    async def _garbage_collect(self, report: LoopReport, now: float) -> None:
        cluster = self.core.cluster
        pacer = Slices(self._chunk_budget_s)
        finished = cluster.pods_needing_controller_check()
        with_controller: list[PodId] = []
        if finished:
            selectors = await self._selectors_by_namespace(pacer)
            for pod_id in finished:
                pod = self._applied_pods.get(pod_id)  # keyed by PodId(namespace, name) of its view
                matching = selectors.get(pod_id.namespace, ())
                if pod is not None and any(s.matches(pod.labels) for s in matching):
                    with_controller.append(pod_id)
                if pacer.due():
                    await pacer.pause()
        collected = await _paced(cluster.maybe_garbage_collect_steps(now, with_controller), pacer)
        report.aggregates_collected = len(collected)
        self._resolver.forget_unused()  # time-based: harmless when a shared resolver hears it twice


# ---------------------------------------------------------------------------- loops over recommenders


async def _fetch_metrics(source: MetricsSource, metrics: RecommenderMetrics,
                         reports: Sequence[LoopReport]) -> MetricsRead:
    """The loop's one PodMetrics read, counted once however many recommenders use it."""
    name = source.client_name
    try:
        read = await source.read()
    except Exception as err:
        # Keep what we know; the next loop asks again.
        for report in reports:
            report.metrics_error = str(err)
        metrics.metric_server_responses.labels(is_error="true", client_name=name).inc()
        log.error("recommender_metrics_unavailable", error=str(err))
        return MetricsRead([])
    metrics.metric_server_responses.labels(is_error="false", client_name=name).inc()
    if read.malformed:
        metrics.skipped.labels(what="malformed_pod_metrics").inc(read.malformed)
    return read


async def run_loop(recommenders: Sequence[Recommender],
                   next_loop_at: float | None = None) -> list[LoopReport]:
    """One loop of every recommender hosted together, step by step (each step for all of them before the
    next), so that the shared inputs are read once: one PodMetrics LIST feeds every recommender, and each
    step is timed once in `vpa_recommender_execution_latency_seconds`. The first recommender's clock,
    metrics source and collectors serve the whole set (a group builds them shared).

    Checkpoint writing stops at `--checkpoints-timeout` after the loop's start (upstream) or, if sooner, a
    little before `next_loop_at`, so that checkpoint writes never push the next loop's metrics read and
    status writes back a tick: checkpoints not written this loop go first in the next (oldest first)."""
    first = recommenders[0]
    metrics = first.metrics
    reports = [LoopReport() for _ in recommenders]
    started = time.perf_counter()
    now = first._clock.now()
    deadline = first._clock.monotonic() + first.settings.checkpoints_timeout_s
    if next_loop_at is not None:
        interval = first.settings.recommender_interval_s
        margin = min(_NEXT_LOOP_MARGIN_S, _NEXT_LOOP_MARGIN_FRACTION * interval)
        deadline = min(deadline, next_loop_at - margin)
    parts = [rec._steps(report, now, deadline, ShardedSet())
             for rec, report in zip(recommenders, reports, strict=True)]
    read: list[MetricsRead] = []

    async def load_metrics(rec: Recommender, report: LoopReport) -> None:
        if not read:
            read.append(await _fetch_metrics(first._metrics_source, metrics, reports))
        await rec._apply_metrics(report, read[0])

    for step in STEPS[:-1]:
        if step == "MaintainCheckpoints" and first.settings.storage == "prometheus":
            continue  # upstream keeps no checkpoints with Prometheus history (spec §3.13)
        step_started = time.perf_counter()
        for rec, report, part in zip(recommenders, reports, parts, strict=True):
            # A step starts on a fresh slice: the previous one's last slice plus this one's first would
            # hold the loop up to twice the budget.
            await asyncio.sleep(0)
            try:
                if step == "LoadMetrics":
                    await load_metrics(rec, report)
                else:
                    await part[step]()
            except Exception:
                log.exception("recommender_step_failed", step=step, recommender=rec.settings.recommender_name)
        if step == "LoadMetrics" and read:
            # Freed a chunk at a time rather than with this frame at the end of the loop: a 10,000-pod
            # read is 60,000 objects, about 5 ms to free in one go.
            await _release(read.pop().pods)
        elapsed = time.perf_counter() - step_started
        for report in reports:
            report.step_seconds[step] = elapsed
        metrics.execution_latency.labels(step=step).observe(elapsed)
    total = time.perf_counter() - started
    metrics.execution_latency.labels(step="total").observe(total)
    counts: dict[tuple[str, str, str, str], int] = {}
    for report in reports:
        report.step_seconds["total"] = total
        for label, n in report.vpa_object_counts.items():
            counts[label] = counts.get(label, 0) + n
    metrics.vpa_objects.clear()
    for (mode_label, has_rec, matches, unsupported), n in counts.items():
        metrics.vpa_objects.labels(update_mode=mode_label, has_recommendation=has_rec, api="v1",
                                   matches_pods=matches, unsupported_config=unsupported).set(n)
    metrics.aggregate_states.set(sum(len(rec.core.cluster.aggregates) for rec in recommenders))
    metrics.capped_to_node.set(sum(report.capped_to_node for report in reports))
    metrics.vpa_conflicts.set(sum(report.vpa_conflicts for report in reports))
    metrics.hpa_conflicts.set(sum(report.hpa_conflicts for report in reports))
    for rec, report in zip(recommenders, reports, strict=True):
        rec.loops += 1
        rec.last_report = report
        # Each changed target has its own line (`vpa_target_changed`); the loop's summary is a debug line
        # unless it stands for target changes beyond those lines, so a steady cluster keeps a quiet log.
        emit = log.info if report.target_changes > TARGET_CHANGE_LINES else log.debug
        emit("recommender_loop_done", recommender=rec.settings.recommender_name, vpas=report.vpas,
             pods=report.pods, samples=report.samples, status_writes=report.status_writes,
             status_writes_skipped=report.status_writes_skipped, target_changes=report.target_changes,
             checkpoints=report.checkpoints_written,
             seconds=round(total, 3))
    return reports


async def _tick_forever(clock: Clock, interval: float, health: HealthState | None, reset: Callable[[], None],
                        restore: Callable[[], Awaitable[object]],
                        run_once: Callable[[float], Awaitable[object]]) -> None:
    """Reset, restore, then `run_once(next_tick)` at once and on every tick of `interval` after that (overrun
    ticks are dropped), with health activity. Upstream's ticker runs the first loop an interval after start;
    the caches are synced and the checkpoints restored before we get here, so waiting would only delay
    every VPA's first recommendation by an interval (docs/deviations.md)."""
    reset()
    if health is not None:
        health.add_activity(COMPONENT, 5 * interval)
    try:
        await restore()
        next_tick = clock.monotonic()
        while True:
            await clock.sleep(max(0.0, next_tick - clock.monotonic()))
            try:
                await run_once(next_tick + interval)
            except Exception:
                log.exception("recommender_loop_failed")
            else:
                if health is not None:
                    health.record_activity(COMPONENT)
            now = clock.monotonic()
            next_tick += interval
            if next_tick <= now:
                next_tick += math.ceil((now - next_tick) / interval) * interval
    finally:
        if health is not None:
            # Not leading any more: no activity expected until the next term starts.
            health.add_activity(COMPONENT, 5 * interval)


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
            rec.oom_trigger = self.oom_trigger

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
    ) -> RecommenderGroup:
        """One recommender per `settings.recommender_names`, on shared kube adapters and collectors."""
        namespace = common.vpa_object_namespace or None
        metrics = RecommenderMetrics(registry)
        metrics_source = PodMetricsReader(client, namespace)
        resolver = TargetResolver(client, clock, namespace=namespace)
        status_writer = VpaStatusWriter(client)
        events = eviction_event_cache(client, clock, namespace)
        background: list[Callable[[], Awaitable[None]]] = [events.run]
        nodes = node_cache(client, clock) if settings.cap_to_largest_node else None
        hpas = hpa_cache(client, clock, namespace) if settings.detect_hpa_conflicts else None
        for cache in (nodes, hpas):
            if cache is not None:
                background.append(cache.run)
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
            await _tick_forever(self._clock, interval, self._health, self.reset, self.restore, self.run_once)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
