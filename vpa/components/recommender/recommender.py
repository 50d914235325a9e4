"""One recommender: restoring history, then each loop's steps for the VPAs its name handles.

Owns: `Recommender` and its per-loop steps: LoadVPAs (handled VPAs, targets resolved to selectors,
ConfigUnsupported when a target is missing or not the top-most controller), LoadPods (non-Pending pods from
the shared pod cache, only VPA-matched ones with `--memory-saver`), applying one metrics read and the OOMs
the pod cache's updates and `Evicted` events revealed, DeleteRemovedPods, UpdateVPAs (recommendations,
conditions, a merge patch on `/status` only when the status changed, at most `--update-worker-count` writes
in flight), MaintainCheckpoints and GarbageCollect (aggregates, hourly); the prompt OOM pass
(`--recommend-on-oom`).

CPU work goes through `vpa.aio.pacing.paced`, which gives the event loop a turn every `chunk_budget_s`: the
webhook, the leases and `/metrics` share the loop.

Size: a little over 600 lines because the steps share the recommender's state (tracked VPAs, applied pods,
the OOM queue, written statuses); each step is a method of a few dozen lines.

Must not: import other components, hold raw API dicts, let one VPA's failure stop the loop, or write a
status that did not change.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import structlog
from prometheus_client import CollectorRegistry

from vpa.aio.pacing import drive, paced
from vpa.aio.workers import produce_and_write
from vpa.components.health import HealthState
from vpa.components.recommender.checkpoints import collect_orphans, load_checkpoints, write_checkpoints
from vpa.components.recommender.conditions import (
    CAPPED_TO_NODE,
    CAPPED_TO_NODE_REASON,
    CONFIG_INVALID,
    CONFIG_INVALID_REASON,
    CONFLICTING_HPA,
    CONFLICTING_HPA_REASON,
    CONFLICTING_VPA,
    CONFLICTING_VPA_REASON,
    VPA_API_VERSION,
    next_conditions,
    owner_name,
    with_initial_delay,
    with_own_conditions,
)
from vpa.components.recommender.history import HistorySource, PrometheusClientMetrics, load_history
from vpa.components.recommender.loop import run_loop, tick_forever
from vpa.components.recommender.metrics import (
    SOURCE_CONTAINER_STATUSES,
    SOURCE_SPEC_CONTAINERS,
    RecommenderMetrics,
)
from vpa.components.recommender.ooms import OomObserver
from vpa.components.recommender.ports import (
    CheckpointSink,
    EventSink,
    EventSource,
    Listing,
    MetricsSource,
    ObjectSource,
    Resolver,
    StatusSink,
)
from vpa.components.recommender.reports import TARGET_CHANGE_LINES, LoopReport, RestoreReport, TrackedVpa
from vpa.kube.eventing import ObjectRef
from vpa.kube.metricsreading import MetricsRead
from vpa.kube.targets import Resolution
from vpa.logic.recommender.aggregation import OomRejected
from vpa.logic.recommender.cluster import (
    ContainerId,
    PodId,
    UnknownContainerError,
)
from vpa.logic.recommender.conflicts import VpaConflicts, hpa_conflicts
from vpa.logic.recommender.cost_aware import pod_recommender_for
from vpa.logic.recommender.nodecaps import cap_to_largest_node
from vpa.logic.recommender.percentiles import config_invalid
from vpa.logic.recommender.recommending import (
    RecommenderConfig,
    RecommenderCore,
    compute_group_recommendations,
    compute_recommendation,
)
from vpa.logic.recommender.statuswrites import worth_writing
from vpa.logic.scope import is_scoped, scope_label, scope_value, with_scope_label
from vpa.model.clock import Clock
from vpa.model.node import HpaView, NodeView
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import (
    Condition,
    ConditionType,
    Recommendation,
    RecommendationGroup,
    VpaStatus,
    VpaView,
)

log = structlog.get_logger(__name__)
# ------------------------------------------------------------------------------------------ the loop




def _targets(recommendation: Recommendation | None) -> dict[str, dict[str, str]]:
    """Container → target quantities, as logged when they change."""
    if recommendation is None:
        return {}
    return {c.container_name: c.target.to_resource_list() for c in recommendation.containers}


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
        initial_delay: bool = False,
        daemonset_scope: bool = False,
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
        # Gate VPAInitialDelay (AEP-9936): the `InitialDelayActive` condition is written with the others.
        self._initial_delay = initial_delay
        # Gate DaemonSetScope (AEP-10031): pods of scoped VPAs aggregate per node group (a synthetic label
        # from their node's labels), and such VPAs get `status.groups` instead of a recommendation.
        self._scope = daemonset_scope
        self._scope_nodes = nodes if daemonset_scope else None
        self._scopes: dict[str, set[str]] = {}
        self._chunk_budget_s = chunk_budget_s
        self.ooms = OomObserver(native_sidecars)
        self.reset()
        pods.on_update(self.ooms.on_pod_update)
        if events is not None:
            events.on_add(self.ooms.on_eviction_event)

    def reset(self) -> None:
        """Forget everything learnt (a new leader term starts from checkpoints, as a new process would)."""
        # The algorithm follows this recommender's name (`cost-aware`, `moving-window`, else upstream's):
        # vpa.logic.recommender.cost_aware.pod_recommender_for.
        self.core = RecommenderCore(self._config, pod_recommender_for(self.settings.recommender_name,
                                                                      self._config.estimation))
        self._tracked: dict[tuple[str, str], TrackedVpa] = {}
        self._applied_pods: dict[PodId, PodView] = {}
        self._written: dict[tuple[str, str], tuple[str, VpaStatus]] = {}
        self.ooms.clear()
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
    def tracked(self) -> Mapping[tuple[str, str], TrackedVpa]:
        return self._tracked

    # ------------------------------------------------------------------------------------ running

    async def run_forever(self) -> None:
        """Restore from checkpoints, then `run_once` at once and on every tick of `--recommender-interval`
        after that (upstream's ticker waits an interval first). Health activity is reported per loop."""
        await tick_forever(self._clock, self.settings.recommender_interval_s, self._health,
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
        await self._load_vpas(LoopReport(), self._clock.now())
        try:
            items = await self._checkpoints.list()
        except Exception as err:
            log.warning("recommender_checkpoint_list_failed", error=str(err))
            return RestoreReport(errors=[str(err)])
        return load_checkpoints(items, self._tracked, self.core.cluster, self.metrics, self._clock.now())

    async def run_once(self, next_loop_at: float | None = None) -> LoopReport:
        """One loop. Each step's failure is logged and the loop goes on; nothing here raises for API
        errors. `next_loop_at` (the clock's monotonic time of the next tick) bounds checkpoint writing."""
        return (await run_loop([self], next_loop_at))[0]

    def _steps(self, report: LoopReport, now: float, deadline: float,
               live_pods: set[PodId]) -> dict[str, Callable[[], Awaitable[None]]]:
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
        handled: list[VpaView] = []
        async for vpa in paced(self._vpas.list(), self._chunk_budget_s):
            if self.handles(vpa):
                handled.append(vpa)
        resolutions: list[Resolution] = []
        batch = max(1, self.settings.update_worker_count) * 10
        for start in range(0, len(handled), batch):
            chunk = handled[start:start + batch]
            resolutions.extend(await asyncio.gather(
                *(self._resolver.resolve(vpa.namespace, vpa.target_ref) for vpa in chunk)))
        cluster = self.core.cluster
        keep: set[tuple[str, str]] = set()
        async for vpa, resolution in paced(zip(handled, resolutions, strict=True), self._chunk_budget_s):
            key = (vpa.namespace, vpa.name)
            keep.add(key)
            selector = resolution.selector if resolution.ok and resolution.selector is not None \
                else Selector.nothing()
            cluster.add_or_update_vpa(vpa, selector)
            self._tracked[key] = TrackedVpa(vpa, resolution)
        gone: list[tuple[str, str]] = []
        async for key in paced(list(self._tracked), self._chunk_budget_s):
            if key not in keep:
                gone.append(key)
        async for key in paced(gone, self._chunk_budget_s):
            del self._tracked[key]
            self._written.pop(key, None)
            cluster.delete_vpa(*key)
        report.vpas = len(self._tracked)

    async def _selectors_by_namespace(self) -> dict[str, list[Selector]]:
        out: dict[str, list[Selector]] = {}
        async for (namespace, _), tracked in paced(list(self._tracked.items()), self._chunk_budget_s):
            if tracked.resolution.ok and tracked.resolution.selector is not None:
                out.setdefault(namespace, []).append(tracked.resolution.selector)
        return out

    async def _load_pods(self, report: LoopReport, now: float, live: set[PodId]) -> None:
        applied = self._applied_pods
        self._scopes = {}
        if self._scope:
            for tracked in self._tracked.values():
                if is_scoped(tracked.view, True):
                    self._scopes.setdefault(tracked.view.namespace, set()).add(tracked.view.scope)
        selectors = await self._selectors_by_namespace() if self.settings.memory_saver else None
        from_status = from_spec = 0
        async for cached in paced(self._pods.list(), self._chunk_budget_s):
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
            if applied.get(pod_id) is cached and pod.namespace not in self._scopes:
                # Unchanged since the last loop: the watch cache hands out a new view on change. Pods next to
                # a scoped VPA are looked at again: their node group label may be new.
                continue
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
        labels: Mapping[str, str] = pod.labels
        scopes = self._scopes.get(pod.namespace)
        if scopes and pod.node_name:
            node = self._node_labels().get(pod.node_name)
            for scope in sorted(scopes):
                value = scope_value(scope, pod.node_name, node)
                if value is not None:
                    labels = with_scope_label(labels, scope, value)
        cluster.add_or_update_pod(pod_id, labels, pod.phase, now)
        for container in pod.containers:
            cluster.add_or_update_container(ContainerId(pod_id, container.name),
                                            pod.current_requests(container.name), now)
        self._applied_pods[pod_id] = cached

    def _node_labels(self) -> dict[str, Mapping[str, str]]:
        if self._scope_nodes is None:
            return {}
        return {node.name: node.labels for node in self._scope_nodes.list()}

    def _track_for_oom(self, pod_id: PodId, now: float) -> bool:
        """Track an OOM-killed pod the loop has not loaded yet (it started and was killed since the last
        loop), as the watch showed it at the kill, so that its first OOM counts: a container killed at start
        would otherwise lose it, and wait a crash back-off (10 s, 20 s, ... up to 5 min) for the next one.
        Only a running pod, and with `--memory-saver` only one some tracked VPA selects, as `_load_pods`
        would."""
        cached = self.ooms.views.get(pod_id)
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
        async for usage in paced(read.pods, self._chunk_budget_s):
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
        self._apply_ooms(report)

    def _apply_ooms(self, report: LoopReport) -> None:
        """The OOMs observed since they were last applied, into the memory histories."""
        cluster = self.core.cluster
        quality = self.metrics.quality
        self.ooms.pods.clear()
        while self.ooms.queue:
            kill = self.ooms.queue.popleft()
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
        self.ooms.views.clear()

    async def _delete_removed_pods(self, live: set[PodId]) -> None:
        cluster = self.core.cluster
        removed: list[PodId] = []
        async for pod_id in paced(list(cluster.pod_ids()), self._chunk_budget_s):
            if pod_id not in live:
                removed.append(pod_id)
        async for pod_id in paced(removed, self._chunk_budget_s):
            cluster.delete_pod(pod_id)
            self._applied_pods.pop(pod_id, None)
            self.ooms.forget(pod_id)

    async def react_to_ooms(self) -> LoopReport:
        """The prompt OOM pass (`--recommend-on-oom`): apply the OOMs queued since the last loop and
        rewrite the status of the VPAs whose pods were OOM-killed, without waiting for the next loop. Does
        nothing before the first loop (the pods and VPAs are not known yet: the loop applies them)."""
        report = LoopReport()
        if self.loops == 0 or not self.ooms.queue:
            return report
        pods = dict(self.ooms.pods)
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
        nodes = self._nodes.list() if self._nodes is not None else None
        # HPAs by (namespace, kind, name) of their target: each VPA looks at its own target's only.
        hpas: dict[tuple[str, str, str], list[HpaView]] = {}
        for hpa in self._hpas.list() if self._hpas is not None else ():
            hpas.setdefault((hpa.namespace, hpa.target_kind, hpa.target_name), []).append(hpa)
        tally = VpaConflicts()
        async for vpa in paced(self._vpas.list(), self._chunk_budget_s):
            tally.add(vpa)
        losers = tally.losers()

        async def produce(put: Callable[[tuple[tuple[str, str], VpaStatus]], Awaitable[None]]) -> None:
            # VPAs without a recommendation in the API first: when writes queue (a first loop, a throttling
            # server), a first recommendation matters more than a refreshed one.
            first: list[tuple[tuple[str, str], TrackedVpa]] = []
            rest: list[tuple[tuple[str, str], TrackedVpa]] = []
            async for item in paced(list(self._tracked.items()), self._chunk_budget_s):
                recommended = item[1].view.status.recommendation
                (rest if recommended is not None and not recommended.is_empty() else first).append(item)
            async for key, tracked in paced(itertools.chain(first, rest), self._chunk_budget_s):
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
                groups: tuple[RecommendationGroup, ...] = ()
                if self._scope and is_scoped(view, True):
                    # AEP-10031: one target-only recommendation per node group; none published for all.
                    by_value = cluster.merged_states_by_label(*key, scope_label(view.scope))
                    groups = compute_group_recommendations(view, by_value, core.recommender, core.config)
                    recommendation = Recommendation()
                has_recommendation = not recommendation.is_empty() or bool(groups)
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
                conditions = with_initial_delay(conditions, view, now, self._initial_delay)
                self._send_events(view, raised, conditions)
                published = None if groups else recommendation
                status = VpaStatus(published, conditions, view.generation, groups)
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

        await produce_and_write(produce, write, self.settings.update_worker_count)
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
        # AEP-9970: with PerVPAConfig, a target percentile outside this recommender's bounds; recommendations
        # are still published, the updater leaves the VPA's pods alone. Removed when the gate is off.
        invalid = (config_invalid(view.resource_policy, self._config.estimation)
                   if self._config.aggregation.per_vpa_config else None)
        wanted[CONFIG_INVALID] = None if invalid is None else (CONFIG_INVALID_REASON, invalid)
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
        """Write the oldest-written VPAs' checkpoints (`write_checkpoints`), then, one collection interval
        after the last, delete orphaned ones (upstream: the first collection comes an interval after
        start)."""
        workers = max(1, self.settings.update_worker_count)
        await write_checkpoints(self.core.cluster, self._tracked, self._checkpoints, report, self.metrics,
                                now=now, deadline=deadline, clock=self._clock, workers=workers,
                                slice_s=self._chunk_budget_s)
        if self._last_checkpoint_gc is None:
            self._last_checkpoint_gc = now
        elif (self.collects_checkpoints
              and now - self._last_checkpoint_gc >= self.settings.checkpoints_gc_interval_s):
            self._last_checkpoint_gc = now
            report.checkpoints_collected = await collect_orphans(
                self._vpas.list(), self._checkpoints, self.metrics, self._keeps_namespace,
                self._chunk_budget_s)

    def _keeps_namespace(self, namespace: str) -> bool:
        """Whether checkpoints of `namespace` are this process's to collect (the namespace filters)."""
        return namespace not in self._ignored and not (self._namespace and namespace != self._namespace)

    async def _garbage_collect(self, report: LoopReport, now: float) -> None:
        cluster = self.core.cluster
        finished = cluster.pods_needing_controller_check()
        with_controller: list[PodId] = []
        if finished:
            selectors = await self._selectors_by_namespace()
            async for pod_id in paced(finished, self._chunk_budget_s):
                pod = self._applied_pods.get(pod_id)  # keyed by PodId(namespace, name) of its view
                matching = selectors.get(pod_id.namespace, ())
                if pod is not None and any(s.matches(pod.labels) for s in matching):
                    with_controller.append(pod_id)
        collected = await drive(cluster.maybe_garbage_collect_steps(now, with_controller),
                                 self._chunk_budget_s)
        report.aggregates_collected = len(collected)
        self._resolver.forget_unused()  # time-based: harmless when a shared resolver hears it twice
