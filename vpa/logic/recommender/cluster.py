"""The recommender's model of the cluster: pods, their containers, aggregates and the VPAs using them.

Owns: `ClusterState` — pods (labels, phase, containers with their sample bookkeeping), aggregates keyed
by (namespace, container name, pod label set), VPAs (their view, selector, the aggregates their selector
matches, checkpoint-restored initial state, matching pod count); sample and OOM intake; the per-VPA
merge of aggregates by container name (plus checkpointed state) that estimation reads; the state a
checkpoint stores (minus each live container's in-progress memory peak); and aggregate garbage
collection (empty and non-contributive, or expired after the memory window), whole or in small steps.

Size: over 600 lines because `ClusterState` is one class whose maps (pods, aggregates, VPAs and the
per-namespace VPA index) change together on every call; split, each part would reach into the others'.

Must not: call the API, resolve controllers (the caller says which pods still have a live controller),
read the clock (every mutating call takes `now` or a sample time), log, or emit metrics.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar

from vpa.logic.recommender.aggregation import (
    AggregateContainerState,
    AggregationConfig,
    ContainerState,
)
from vpa.logic.recommender.checkpointing import InProgressPeak, aggregate_from_checkpoint_status
from vpa.model.resources import Resources
from vpa.model.vpa import UpdateMode, VpaView

T = TypeVar("T")
INACTIVE_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})
AGGREGATE_GC_INTERVAL_S: Final = 3600.0  # upstream collects aggregates at most once an hour
GC_STEP: Final = 256  # aggregates (or label sets) garbage collection handles between two of its steps


class LabelMatcher(Protocol):
    """A label selector (`vpa.model.selector.Selector` fits)."""

    def matches(self, labels: Mapping[str, str]) -> bool: ...

    def index_terms(self) -> tuple[tuple[str, str], ...] | None:
        """Label pairs at least one of which every matching label set holds; None when there are none."""
        ...


@dataclass(frozen=True, slots=True)
class PodId:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class ContainerId:
    pod: PodId
    container_name: str


LabelSet = frozenset[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class AggregateStateKey:
    """All containers with this name, in this namespace, in pods with exactly these labels, share one
    aggregate."""

    namespace: str
    container_name: str
    labels: LabelSet

    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True, slots=True)
class QualityContext:
    """What upstream's quality metrics need about a sample's container: the update mode of the VPA using
    its aggregate, and the uncapped target last recommended for it (None: none yet)."""

    update_mode: UpdateMode | None
    last_recommendation: Resources | None


@dataclass(frozen=True, slots=True)
class RecommendationChange:
    """One aggregate's previous and new uncapped target (upstream `ObserveRecommendationChange`)."""

    update_mode: UpdateMode | None
    previous: Resources | None
    current: Resources
    pod_count: int


class UnknownContainerError(KeyError):
    """A sample or OOM for a pod or container the cluster state does not track."""


@dataclass(slots=True)
class _Pod:
    pod_id: PodId
    labels: LabelSet
    label_map: Mapping[str, str]
    phase: str
    containers: dict[str, ContainerState] = field(default_factory=dict)


@dataclass(slots=True)
class _Vpa:
    view: VpaView
    selector: LabelMatcher
    order: int  # when it was added: VPAs matching one label set are visited in this order
    terms: tuple[tuple[str, str], ...] | None
    aggregates: dict[AggregateStateKey, AggregateContainerState] = field(default_factory=dict)
    initial_states: dict[str, AggregateContainerState] = field(default_factory=dict)
    # Restored in-progress memory peaks (in `initial_states`) no live container has taken over yet, by
    # (container name, pod name).
    pending_peaks: dict[tuple[str, str], InProgressPeak] = field(default_factory=dict)
    pod_count: int = 0
    checkpoint_written: float | None = None


class _NamespaceVpas:
    """The VPAs of one namespace, indexed by the label pairs their selectors pin (`index_terms`), so that
    finding the VPAs whose selector matches a label set costs the candidates, not every VPA there (a
    namespace with thousands of VPAs would otherwise make pod intake quadratic)."""

    __slots__ = ("by_name", "by_term", "unindexed")

    def __init__(self) -> None:
        self.by_name: dict[str, _Vpa] = {}
        self.by_term: dict[tuple[str, str], dict[str, _Vpa]] = {}
        self.unindexed: dict[str, _Vpa] = {}

    def add(self, vpa: _Vpa) -> None:
        name = vpa.view.name
        self.by_name[name] = vpa
        if vpa.terms is None:
            self.unindexed[name] = vpa
        for term in vpa.terms or ():
            self.by_term.setdefault(term, {})[name] = vpa

    def remove(self, vpa: _Vpa) -> None:
        name = vpa.view.name
        self.by_name.pop(name, None)
        self.unindexed.pop(name, None)
        for term in vpa.terms or ():
            bucket = self.by_term.get(term)
            if bucket is not None:
                bucket.pop(name, None)
                if not bucket:
                    del self.by_term[term]

    def matching(self, labels: Mapping[str, str]) -> list[_Vpa]:
        """The VPAs whose selector matches `labels`, in the order they were added."""
        found = [vpa for vpa in self.unindexed.values() if vpa.selector.matches(labels)]
        by_term = self.by_term
        if by_term:
            # A pod holds one value per key, so a VPA indexed under several values of one key is seen once.
            for pair in labels.items():
                bucket = by_term.get(pair)
                if bucket is not None:
                    found.extend(vpa for vpa in bucket.values() if vpa.selector.matches(labels))
        if len(found) > 1:
            found.sort(key=_vpa_order)
        return found


def _vpa_order(vpa: _Vpa) -> int:
    return vpa.order


class ClusterState:
    """Pods, aggregates and VPAs, linked the way upstream's recommender links them."""

    def __init__(self, config: AggregationConfig) -> None:
        self.config = config
        self._pods: dict[PodId, _Pod] = {}
        self._pods_by_namespace: dict[str, dict[PodId, _Pod]] = {}
        self._pods_by_labels: dict[tuple[str, LabelSet], dict[PodId, _Pod]] = {}
        # One aggregate per container name and label set.
        self._aggregates: dict[AggregateStateKey, AggregateContainerState] = {}
        self._aggregates_by_namespace: dict[str, dict[AggregateStateKey, AggregateContainerState]] = {}
        self._vpas: dict[tuple[str, str], _Vpa] = {}
        self._vpas_by_namespace: dict[str, _NamespaceVpas] = {}
        self._vpas_added = 0
        self._label_sets: dict[LabelSet, LabelSet] = {}
        self._last_gc: float | None = None
        # (namespace, pod name, container name) → the VPA holding a restored in-progress peak for it.
        self._pending_peaks: dict[tuple[str, str, str], _Vpa] = {}

    # --- read-only views -------------------------------------------------------------------------------

    @property
    def aggregates(self) -> dict[AggregateStateKey, AggregateContainerState]:
        return self._aggregates

    def pod_ids(self) -> Iterator[PodId]:
        return iter(self._pods)

    def vpa_keys(self) -> Iterator[tuple[str, str]]:
        return iter(self._vpas)

    def vpa_view(self, namespace: str, name: str) -> VpaView:
        return self._vpa(namespace, name).view

    def matching_pod_count(self, namespace: str, name: str) -> int:
        """Tracked pods whose labels the VPA's selector matches (upstream `PodCount`)."""
        return self._vpa(namespace, name).pod_count

    def container_state(self, container_id: ContainerId) -> ContainerState:
        return self._container(container_id)

    # --- pods ------------------------------------------------------------------------------------------

    def add_or_update_pod(self, pod_id: PodId, labels: Mapping[str, str], phase: str, now: float) -> None:
        """Track a pod; when its labels change, its containers move to the aggregates of the new labels."""
        label_set = self._intern(labels)
        pod = self._pods.get(pod_id)
        if pod is None:
            pod = _Pod(pod_id, label_set, dict(labels), phase)
            self._pods[pod_id] = pod
            self._pods_by_namespace.setdefault(pod_id.namespace, {})[pod_id] = pod
            self._pods_by_labels.setdefault((pod_id.namespace, label_set), {})[pod_id] = pod
            self._count_pod(pod, +1)
        elif pod.labels != label_set:
            self._count_pod(pod, -1)
            self._unlink_labels(pod)
            pod.labels = label_set
            pod.label_map = dict(labels)
            self._pods_by_labels.setdefault((pod_id.namespace, label_set), {})[pod_id] = pod
            for container_name in pod.containers:
                self._find_or_create_aggregate(self._key(pod, container_name), now)
            self._count_pod(pod, +1)
        pod.phase = phase

    def add_or_update_container(self, container_id: ContainerId, request: Resources, now: float) -> None:
        pod = self._pods.get(container_id.pod)
        if pod is None:
            raise UnknownContainerError(
                f"pod {container_id.pod.namespace}/{container_id.pod.name} is not tracked")
        container = pod.containers.get(container_id.container_name)
        if container is None:
            self._find_or_create_aggregate(self._key(pod, container_id.container_name), now)
            container = ContainerState(_AggregateLookup(self, pod, container_id.container_name),
                                       track_recent=self.config.tracks_recent_usage)
            pod.containers[container_id.container_name] = container
            if self._pending_peaks:
                self._adopt_peak(pod, container_id.container_name, container, now)
        container.request_cpu_millicores = request.cpu_millicores
        container.request_memory_bytes = request.memory_bytes

    def delete_pod(self, pod_id: PodId) -> None:
        """Forget a pod; its aggregates stay until garbage collection."""
        pod = self._pods.pop(pod_id, None)
        if pod is None:
            return
        self._count_pod(pod, -1)
        self._unlink_labels(pod)
        namespace_pods = self._pods_by_namespace.get(pod_id.namespace)
        if namespace_pods is not None:
            namespace_pods.pop(pod_id, None)
            if not namespace_pods:
                del self._pods_by_namespace[pod_id.namespace]

    # --- samples ---------------------------------------------------------------------------------------

    def add_cpu_sample(self, container_id: ContainerId, usage_millicores: int, timestamp: float) -> bool:
        """False when the sample is discarded (negative, duplicate or out of order)."""
        return self._container(container_id).add_cpu_sample(usage_millicores, timestamp)

    def add_memory_sample(self, container_id: ContainerId, usage_bytes: int, timestamp: float) -> bool:
        """False when the sample is discarded (negative or older than the last memory sample)."""
        return self._container(container_id).add_memory_sample(usage_bytes, timestamp)

    def record_oom(self, container_id: ContainerId, timestamp: float, requested_memory_bytes: int) -> int:
        """Record an OOM kill; returns the bumped memory added as a peak. Raises OomRejected (too old)."""
        return self._container(container_id).record_oom(timestamp, requested_memory_bytes)

    # --- VPAs ------------------------------------------------------------------------------------------

    def add_or_update_vpa(self, view: VpaView, selector: LabelMatcher) -> None:
        """Track a VPA. A changed selector starts it afresh (links and checkpointed state are rebuilt, as
        upstream deletes and re-creates the VPA); a changed resource policy is pushed to its aggregates."""
        key = (view.namespace, view.name)
        vpa = self._vpas.get(key)
        if vpa is not None and vpa.selector != selector:
            self.delete_vpa(view.namespace, view.name)
            vpa = None
        if vpa is None:
            self._vpas_added += 1
            vpa = _Vpa(view, selector, self._vpas_added, selector.index_terms())
            self._vpas[key] = vpa
            self._vpas_by_namespace.setdefault(view.namespace, _NamespaceVpas()).add(vpa)
            for aggregate_key, aggregate in self._aggregates_by_namespace.get(view.namespace, {}).items():
                self._use_if_matching(vpa, aggregate_key, aggregate)
            vpa.pod_count = sum(1 for pod in self._pods_by_namespace.get(view.namespace, {}).values()
                                if selector.matches(pod.label_map))
            return
        policy_changed = vpa.view.resource_policy != view.resource_policy
        if vpa.view.update_policy.update_mode != view.update_policy.update_mode:
            for aggregate in vpa.aggregates.values():
                aggregate.update_mode = view.update_policy.update_mode
        vpa.view = view
        if policy_changed:
            for aggregate_key, aggregate in vpa.aggregates.items():
                aggregate.update_from_policy(view.resource_policy.for_container(aggregate_key.container_name),
                                             self.config)

    def delete_vpa(self, namespace: str, name: str) -> None:
        vpa = self._vpas.pop((namespace, name), None)
        if vpa is None:
            return
        for aggregate in vpa.aggregates.values():
            aggregate.mark_not_autoscaled()
        for container_name, pod_name in vpa.pending_peaks:
            self._pending_peaks.pop((namespace, pod_name, container_name), None)
        namespace_vpas = self._vpas_by_namespace.get(namespace)
        if namespace_vpas is not None:
            namespace_vpas.remove(vpa)
            if not namespace_vpas.by_name:
                del self._vpas_by_namespace[namespace]

    def set_initial_state(self, namespace: str, name: str, container_name: str,
                          state: AggregateContainerState) -> None:
        """Attach checkpoint-restored history for one container of a VPA (kept for the VPA's lifetime)."""
        self._vpa(namespace, name).initial_states[container_name] = state

    def load_checkpoint(self, namespace: str, vpa_name: str, container_name: str, status: object,
                        now: float, peaks: Collection[InProgressPeak] = ()) -> None:
        """Restore a VerticalPodAutoscalerCheckpoint `status` and the in-progress memory peaks kept beside
        it (beyond upstream). Raises CheckpointError (malformed) or KeyError (no such VPA); the caller
        logs and skips.

        Each peak goes back into the restored memory histogram at its window's end, as it was before the
        checkpoint left it out; when the pod's container shows up again it takes the peak over (moved to
        its aggregate) and continues that window, so a restart mid-window loses nothing."""
        vpa = self._vpa(namespace, vpa_name)
        state = aggregate_from_checkpoint_status(status, self.config, now)
        for key in [k for k in vpa.pending_peaks if k[0] == container_name]:
            del vpa.pending_peaks[key]
            self._pending_peaks.pop((namespace, key[1], container_name), None)
        for peak in peaks:
            if peak.max_bytes <= 0:
                continue
            state.add_memory_peak(peak.max_bytes, peak.window_end)
            if peak.window_end > now:
                vpa.pending_peaks[(container_name, peak.pod)] = peak
                self._pending_peaks[(namespace, peak.pod, container_name)] = vpa
        self.set_initial_state(namespace, vpa_name, container_name, state)

    def _adopt_peak(self, pod: _Pod, container_name: str, container: ContainerState, now: float) -> None:
        vpa = self._pending_peaks.pop((pod.pod_id.namespace, pod.pod_id.name, container_name), None)
        if vpa is None:
            return
        peak = vpa.pending_peaks.pop((container_name, pod.pod_id.name), None)
        initial = vpa.initial_states.get(container_name)
        if peak is None or initial is None:
            return
        initial.subtract_memory_peak(peak.max_bytes, peak.window_end)
        container.aggregate(now).add_memory_peak(peak.max_bytes, peak.window_end)
        container.window_end = peak.window_end
        container.memory_peak = peak.peak_bytes
        container.oom_peak = peak.oom_peak_bytes

    def mark_checkpoint_written(self, namespace: str, name: str, now: float) -> None:
        self._vpa(namespace, name).checkpoint_written = now

    def checkpoint_written(self, namespace: str, name: str) -> float | None:
        return self._vpa(namespace, name).checkpoint_written

    # --- quality metrics (spec §3.14) -------------------------------------------------------------------

    def quality_context(self, container_id: ContainerId, now: float) -> QualityContext | None:
        """The quality-metrics view of a container's aggregate; None when it needs no recommendation
        (no VPA uses it, or its mode is Off), as upstream skips those samples."""
        aggregate = self._container(container_id).aggregate(now)
        if not aggregate.needs_recommendation():
            return None
        return QualityContext(aggregate.update_mode, aggregate.last_recommendation)

    def update_last_recommendation(self, namespace: str, name: str,
                                   uncapped_targets: Mapping[str, Resources]) -> list[RecommendationChange]:
        """Remember each container's new uncapped target on every aggregate of the VPA with that container
        name (upstream `Vpa.UpdateRecommendation`); returns the changes, one per aggregate."""
        vpa = self._vpa(namespace, name)
        mode = vpa.view.update_policy.update_mode
        changes: list[RecommendationChange] = []
        for key, aggregate in vpa.aggregates.items():
            current = uncapped_targets.get(key.container_name)
            if current is None:
                continue
            changes.append(RecommendationChange(mode, aggregate.last_recommendation, current, vpa.pod_count))
            aggregate.last_recommendation = current
        return changes

    # --- what estimation and checkpoints read ----------------------------------------------------------

    def merged_states(self, namespace: str, name: str) -> dict[str, AggregateContainerState]:
        """The VPA's aggregates merged by container name, then merged with its checkpointed state.

        Fresh objects: estimation and checkpoint writing may change them freely. (Merging may re-base the
        live aggregates' histogram references in place, which leaves their percentiles unchanged.)
        """
        vpa = self._vpa(namespace, name)
        merged: dict[str, AggregateContainerState] = {}
        for key, aggregate in vpa.aggregates.items():
            target = merged.get(key.container_name)
            if target is None:
                target = AggregateContainerState(self.config, aggregate.creation_time)
                merged[key.container_name] = target
            target.merge(aggregate)
        for container_name, initial in vpa.initial_states.items():
            target = merged.get(container_name)
            if target is None:
                target = merged[container_name] = AggregateContainerState(self.config, initial.creation_time)
            target.merge(initial)
        return merged

    def merged_states_by_label(
        self, namespace: str, name: str, label: str
    ) -> dict[str, dict[str, AggregateContainerState]]:
        """The VPA's live aggregates merged by container name within each value of pod label `label`:
        AEP-10031's per-group states. Aggregates without the label at all (pods seen before the VPA was
        scoped) belong to no group; checkpointed state is not split by group (the AEP's alpha limitation):
        neither takes part."""
        vpa = self._vpa(namespace, name)
        groups: dict[str, dict[str, AggregateContainerState]] = {}
        for key, aggregate in vpa.aggregates.items():
            value = dict(key.labels).get(label)
            if value is None:
                continue
            merged = groups.setdefault(value, {})
            target = merged.get(key.container_name)
            if target is None:
                target = AggregateContainerState(self.config, aggregate.creation_time)
                merged[key.container_name] = target
            target.merge(aggregate)
        return groups

    def checkpoint_states(self, namespace: str, name: str, now: float) -> dict[str, AggregateContainerState]:
        """What to checkpoint for each container name of the VPA: the merged state minus the current
        (unfinished) memory peak of every live container feeding it, so that a restore followed by new
        samples does not count that interval twice."""
        contents = self.checkpoint_contents(namespace, name, now)
        return {container: state for container, (state, _) in contents.items()}

    def checkpoint_contents(self, namespace: str, name: str, now: float,
                            ) -> dict[str, tuple[AggregateContainerState, list[InProgressPeak]]]:
        """`checkpoint_states`, each with the in-progress peaks it leaves out: those of live containers and
        restored ones not taken over yet (whose window has not ended)."""
        vpa = self._vpa(namespace, name)
        merged = self.merged_states(namespace, name)
        contents: dict[str, tuple[AggregateContainerState, list[InProgressPeak]]] = {
            container: (state, []) for container, state in merged.items()}
        for key in vpa.aggregates:
            entry = contents.get(key.container_name)
            if entry is None:
                continue
            state, peaks = entry
            for pod in self._pods_by_labels.get((key.namespace, key.labels), {}).values():
                container = pod.containers.get(key.container_name)
                if container is None:
                    continue
                window_end = container.window_end
                if window_end is not None and now < window_end and container.max_memory_peak > 0:
                    state.subtract_memory_peak(container.max_memory_peak, window_end)
                    peaks.append(InProgressPeak(pod.pod_id.name, window_end, container.memory_peak,
                                                container.oom_peak))
        for (container_name, pod_name), peak in list(vpa.pending_peaks.items()):
            entry = contents.get(container_name)
            if peak.window_end <= now or entry is None:
                del vpa.pending_peaks[(container_name, pod_name)]  # its window is over: a complete peak now
                self._pending_peaks.pop((namespace, pod_name, container_name), None)
                continue
            entry[0].subtract_memory_peak(peak.max_bytes, peak.window_end)
            entry[1].append(peak)
        return contents

    # --- garbage collection ----------------------------------------------------------------------------

    def garbage_collect(self, now: float, pods_with_live_controller: Collection[PodId] = frozenset(),
                        ) -> list[AggregateStateKey]:
        """Drop aggregates that are empty and fed by no contributive pod, or expired (no CPU sample for a
        memory window, or empty and older than one). A pod is contributive while it is not
        Succeeded/Failed, or while its controller still exists. Returns the deleted keys."""
        return _run_to_end(self.garbage_collect_steps(now, pods_with_live_controller))

    def garbage_collect_steps(self, now: float, pods_with_live_controller: Collection[PodId] = frozenset(),
                              ) -> Generator[None, None, list[AggregateStateKey]]:
        """`garbage_collect` in small steps: a generator that yields after every `GC_STEP` aggregates (or
        label sets) it has looked at or deleted, and returns the deleted keys when exhausted, so that a
        caller sharing its thread (the recommender on the event loop) can pause between steps: a collection
        visits every aggregate. The caller must not change this state until the
        generator is exhausted (the recommender's loop runs its steps one after another)."""
        controlled = pods_with_live_controller
        aggregates = self._aggregates
        doomed: list[AggregateStateKey] = []
        for index, key in enumerate(list(aggregates)):
            aggregate = aggregates.get(key)
            if aggregate is not None and (aggregate.is_expired(now) or (
                    aggregate.is_empty() and not self._fed_by_contributive_pod(key, controlled))):
                doomed.append(key)
            if index % GC_STEP == GC_STEP - 1:
                yield
        for index, key in enumerate(doomed):
            if aggregates.pop(key, None) is not None:
                namespace_aggregates = self._aggregates_by_namespace[key.namespace]
                del namespace_aggregates[key]
                if not namespace_aggregates:
                    del self._aggregates_by_namespace[key.namespace]
            namespace_vpas = self._vpas_by_namespace.get(key.namespace)
            if namespace_vpas is not None:
                for vpa in namespace_vpas.matching(key.label_map()):
                    vpa.aggregates.pop(key, None)
            if index % GC_STEP == GC_STEP - 1:
                yield
        # Forget interned label sets no pod or aggregate uses any more (label churn from rollouts).
        live: dict[LabelSet, LabelSet] = {}
        for index, (_, labels) in enumerate(list(self._pods_by_labels)):
            live.setdefault(labels, labels)
            if index % GC_STEP == GC_STEP - 1:
                yield
        for index, key in enumerate(list(aggregates)):
            live.setdefault(key.labels, key.labels)
            if index % GC_STEP == GC_STEP - 1:
                yield
        self._label_sets = live
        return doomed

    def maybe_garbage_collect(self, now: float, pods_with_live_controller: Collection[PodId] = frozenset(),
                              interval_s: float = AGGREGATE_GC_INTERVAL_S) -> list[AggregateStateKey]:
        """`garbage_collect` at most once per `interval_s`. The first call only starts the clock (upstream
        starts it when the recommender is created, so the first collection comes an hour later)."""
        return _run_to_end(self.maybe_garbage_collect_steps(now, pods_with_live_controller, interval_s))

    def maybe_garbage_collect_steps(self, now: float,
                                    pods_with_live_controller: Collection[PodId] = frozenset(),
                                    interval_s: float = AGGREGATE_GC_INTERVAL_S,
                                    ) -> Generator[None, None, list[AggregateStateKey]]:
        """`maybe_garbage_collect` in the small steps of `garbage_collect_steps` (the clock is checked and
        started at the first step)."""
        if self._last_gc is None:
            self._last_gc = now
            return []
        if now - self._last_gc < interval_s:
            return []
        self._last_gc = now
        return (yield from self.garbage_collect_steps(now, pods_with_live_controller))

    def pods_needing_controller_check(self) -> list[PodId]:
        """Finished (Succeeded/Failed) pods: only for these does garbage collection need to know whether
        their controller still exists (active pods are contributive anyway)."""
        return [pod.pod_id for pod in self._pods.values() if pod.phase in INACTIVE_POD_PHASES]

    # --- internals -------------------------------------------------------------------------------------

    def _vpa(self, namespace: str, name: str) -> _Vpa:
        vpa = self._vpas.get((namespace, name))
        if vpa is None:
            raise KeyError(f"VPA {namespace}/{name} is not tracked")
        return vpa

    def _container(self, container_id: ContainerId) -> ContainerState:
        pod = self._pods.get(container_id.pod)
        if pod is None:
            raise UnknownContainerError(
                f"pod {container_id.pod.namespace}/{container_id.pod.name} is not tracked")
        container = pod.containers.get(container_id.container_name)
        if container is None:
            raise UnknownContainerError(
                f"container {container_id.container_name} of pod {container_id.pod.namespace}/"
                f"{container_id.pod.name} is not tracked")
        return container

    def _intern(self, labels: Mapping[str, str]) -> LabelSet:
        label_set = frozenset(labels.items())
        return self._label_sets.setdefault(label_set, label_set)

    @staticmethod
    def _key(pod: _Pod, container_name: str) -> AggregateStateKey:
        return AggregateStateKey(pod.pod_id.namespace, container_name, pod.labels)

    def _find_or_create_aggregate(self, key: AggregateStateKey, now: float) -> AggregateContainerState:
        aggregate = self._aggregates.get(key)
        if aggregate is None:
            aggregate = AggregateContainerState(self.config, now)
            self._aggregates[key] = aggregate
            self._aggregates_by_namespace.setdefault(key.namespace, {})[key] = aggregate
            namespace_vpas = self._vpas_by_namespace.get(key.namespace)
            if namespace_vpas is not None:
                for vpa in namespace_vpas.matching(key.label_map()):
                    self._use_if_matching(vpa, key, aggregate)
        return aggregate

    def _use_if_matching(self, vpa: _Vpa, key: AggregateStateKey, aggregate: AggregateContainerState) -> None:
        if key in vpa.aggregates or key.namespace != vpa.view.namespace:
            return
        if not vpa.selector.matches(key.label_map()):
            return
        vpa.aggregates[key] = aggregate
        aggregate.under_vpa = True
        aggregate.update_mode = vpa.view.update_policy.update_mode
        aggregate.update_from_policy(vpa.view.resource_policy.for_container(key.container_name), self.config)

    def _count_pod(self, pod: _Pod, delta: int) -> None:
        namespace_vpas = self._vpas_by_namespace.get(pod.pod_id.namespace)
        if namespace_vpas is not None:
            for vpa in namespace_vpas.matching(pod.label_map):
                vpa.pod_count += delta

    def _fed_by_contributive_pod(self, key: AggregateStateKey, pods_with_live_controller: Collection[PodId],
                                 ) -> bool:
        """A pod with the aggregate's labels has a container of its name and is not finished (or its
        controller still exists)."""
        for pod in self._pods_by_labels.get((key.namespace, key.labels), {}).values():
            if key.container_name in pod.containers and (
                    pod.phase not in INACTIVE_POD_PHASES or pod.pod_id in pods_with_live_controller):
                return True
        return False

    def _unlink_labels(self, pod: _Pod) -> None:
        index_key = (pod.pod_id.namespace, pod.labels)
        same_labels = self._pods_by_labels.get(index_key)
        if same_labels is not None:
            same_labels.pop(pod.pod_id, None)
            if not same_labels:
                del self._pods_by_labels[index_key]


def _run_to_end(steps: Generator[None, None, T]) -> T:
    """Exhaust a generator of steps and return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


class _AggregateLookup:
    """A container's route to its aggregate: found by the pod's current labels, re-created if collected.

    A re-created aggregate is stamped with the sample's time (upstream uses the wall clock at that moment,
    which in a live loop is the same to within the metrics resolution)."""

    __slots__ = ("_cluster", "_container_name", "_pod")

    def __init__(self, cluster: ClusterState, pod: _Pod, container_name: str) -> None:
        self._cluster = cluster
        self._pod = pod
        self._container_name = container_name

    def __call__(self, now: float) -> AggregateContainerState:
        cluster = self._cluster
        key = AggregateStateKey(self._pod.pod_id.namespace, self._container_name, self._pod.labels)
        aggregate = cluster._aggregates.get(key)
        if aggregate is None:
            aggregate = cluster._find_or_create_aggregate(key, now)
        return aggregate
