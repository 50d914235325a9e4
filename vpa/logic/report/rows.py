"""What `vpa report` and the recommendation metrics compute from a VPA, its pods and its events.

Owns: `container_rows` — one `ContainerRow` per container of a VPA (the containers of its recommendation
and of its pods): the recommendation (target, lower and upper bound, uncapped target), the current requests
and limits (the value most of the VPA's pods run with; ties go to the larger), how many pods run it, and
the sums behind the difference "current requests minus target" over the pods that request the resource
(positive: requested more than recommended, the "savings"; negative: running below the recommendation);
`last_action` — the newest event that tells what the updater did to the VPA or one of its pods (in-place
resize, eviction, skipped resize) and why; `vpa_report` to put one VPA's part together; and
`namespace_totals`, the per-namespace sums; `pod_requests` and `action_marks`, what the per-workload chart
draws (each live pod's requests since it started, and every action on the time axis); and `PodIndex`,
which finds the pods a VPA's selector matches.

Amounts are exact integers (millicores, bytes), as everywhere in vpa; a difference is None when the
recommendation or every pod's request for that resource is missing.

Must not: do I/O, read the clock, format for output (that is `vpa.logic.report.output` and its siblings), or
decide which pods belong to a VPA beyond matching a selector the caller resolved (target resolution is I/O).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from vpa.model.event import EventView
from vpa.model.pod import PodView
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.selector import Selector
from vpa.model.vpa import Condition, RecommendedContainerResources, VpaView

# Event reasons the updater records (spec §4.11): on a pod, except `EvictedPod`, which is on the VPA.
ACTION_REASONS: Final = frozenset(
    {"EvictedByVPA", "EvictedPod", "InPlaceResizedByVPA", "InPlaceResizeSkipped"}
)
VPA_KIND: Final = "VerticalPodAutoscaler"
POD_KIND: Final = "Pod"


@dataclass(frozen=True, slots=True)
class ContainerRow:
    """One container of one VPA. `requests`/`limits` are what most pods run with; the `*_diff` fields
    are `sum over pods (request - target)`: positive means over-provisioned."""

    container: str
    pods: int
    requests: Resources
    limits: Resources
    target: Resources | None
    lower_bound: Resources | None
    upper_bound: Resources | None
    uncapped_target: Resources | None
    cpu_requested_millicores: int | None
    """The sum of the CPU requests of the pods that have one and a CPU target to compare with."""
    cpu_recommended_millicores: int | None
    """The CPU target times those pods."""
    memory_requested_bytes: int | None
    memory_recommended_bytes: int | None

    @property
    def cpu_diff_millicores(self) -> int | None:
        if self.cpu_requested_millicores is None or self.cpu_recommended_millicores is None:
            return None
        return self.cpu_requested_millicores - self.cpu_recommended_millicores

    @property
    def memory_diff_bytes(self) -> int | None:
        if self.memory_requested_bytes is None or self.memory_recommended_bytes is None:
            return None
        return self.memory_requested_bytes - self.memory_recommended_bytes


@dataclass(frozen=True, slots=True)
class Action:
    """The newest updater action seen for a VPA: event reason, message (the why), object, time."""

    reason: str
    message: str
    object_kind: str
    object_name: str
    timestamp: float


@dataclass(frozen=True, slots=True)
class PodRequests:
    """One live pod of a VPA for the per-workload chart: since when it runs and what each container
    requests now (the API holds no older requests; the actions say when they changed)."""

    name: str
    since: float
    requests: tuple[tuple[str, Resources], ...]


@dataclass(frozen=True, slots=True)
class ActionMark:
    """An updater action on the chart's time axis: when, which event reason, about which object."""

    timestamp: float
    reason: str
    object_name: str


@dataclass(frozen=True, slots=True)
class VpaReport:
    """One VPA's line of the report. `workload` is `Kind/name` of the targetRef ("" without one);
    `target_problem` says why its pods could not be found (the ConfigUnsupported wording), else ""."""

    namespace: str
    name: str
    workload: str
    mode: str
    containers: tuple[ContainerRow, ...]
    conditions: tuple[Condition, ...]
    last_action: Action | None
    target_problem: str = ""
    pods_seen: tuple[PodRequests, ...] = ()
    """The VPA's live pods, for the chart of requests against the recommendation over time."""
    actions: tuple[ActionMark, ...] = ()
    """Every action event about the VPA or its pods, oldest first."""


@dataclass(frozen=True, slots=True)
class NamespaceTotals:
    """Per-namespace sums over every container row: the savings column."""

    namespace: str
    vpas: int
    pods: int
    cpu_requests_millicores: int
    cpu_target_millicores: int
    cpu_diff_millicores: int
    memory_requests_bytes: int
    memory_target_bytes: int
    memory_diff_bytes: int


class PodIndex:
    """Pods by namespace and by label pair, so that the pods a selector matches cost the candidates its
    `index_terms` name, not every pod of the namespace (thousands of VPAs in a namespace of thousands of
    pods would otherwise make a refresh quadratic). Built once per report or refresh."""

    __slots__ = ("_by_namespace", "_by_pair")

    def __init__(self, pods: Iterable[PodView] = ()) -> None:
        self._by_namespace: dict[str, list[PodView]] = {}
        self._by_pair: dict[str, dict[tuple[str, str], list[PodView]]] = {}
        self.add(pods)

    def add(self, pods: Iterable[PodView]) -> None:
        """Index more pods (a caller that must not hold its thread long adds them in slices)."""
        for pod in pods:
            self._by_namespace.setdefault(pod.namespace, []).append(pod)
            pairs = self._by_pair.setdefault(pod.namespace, {})
            for pair in pod.labels.items():
                pairs.setdefault(pair, []).append(pod)

    def matching(self, namespace: str, selector: Selector) -> list[PodView]:
        """The pods of `namespace` whose labels `selector` matches, in the order they were given."""
        terms = selector.index_terms()
        if terms is None:
            candidates: Iterable[PodView] = self._by_namespace.get(namespace, ())
        else:
            pairs: Mapping[tuple[str, str], list[PodView]] = self._by_pair.get(namespace, {})
            # One value per key on a pod, so the candidate lists of one requirement's values are disjoint.
            candidates = [pod for term in terms for pod in pairs.get(term, ())]
            if len(terms) > 1:
                order = {id(pod): i for i, pod in enumerate(self._by_namespace.get(namespace, ()))}
                candidates = sorted(candidates, key=lambda pod: order[id(pod)])
        return [pod for pod in candidates if selector.matches(pod.labels)]


def _representative(values: Iterable[int]) -> int | None:
    """The value most pods share; a tie goes to the larger value (what the workload needs at most)."""
    counts = Counter(values)
    if not counts:
        return None
    return max(counts.items(), key=lambda item: (item[1], item[0]))[0]


def _current(pods: Sequence[PodView], container: str, *, limits: bool) -> Resources:
    picked = [p.current_limits(container) if limits else p.current_requests(container) for p in pods]
    return Resources(
        cpu_millicores=_representative(r.cpu_millicores for r in picked if r.cpu_millicores is not None),
        memory_bytes=_representative(r.memory_bytes for r in picked if r.memory_bytes is not None),
    )


def _sums(
    pods: Sequence[PodView], container: str, resource: str, target: int | None
) -> tuple[int | None, int | None]:
    """(sum of the pods' requests, target times those pods), over the pods that request `resource`;
    (None, None) without a target or without any such pod."""
    if target is None:
        return None, None
    requests = [p.current_requests(container).get(resource) for p in pods]
    known = [r for r in requests if r is not None]
    if not known:
        return None, None
    return sum(known), target * len(known)


def _pod_containers(pod: PodView) -> list[str]:
    return [c.name for c in pod.containers] + [c.name for c in pod.sidecars]


def container_rows(vpa: VpaView, pods: Sequence[PodView]) -> tuple[ContainerRow, ...]:
    """One row per container named by the VPA's recommendation or run by one of `pods` (the pods the
    VPA controls), in recommendation order, then in pod order. Terminating pods are left out."""
    live = [p for p in pods if not p.is_terminating]
    recommendation = vpa.recommendation
    names: list[str] = []
    if recommendation is not None:
        names.extend(c.container_name for c in recommendation.containers)
    for pod in live:
        names.extend(n for n in _pod_containers(pod) if n not in names)
    rows = []
    for name in names:
        rec: RecommendedContainerResources | None = (
            recommendation.for_container(name) if recommendation is not None else None
        )
        running = [p for p in live if name in _pod_containers(p)]
        target = rec.target if rec is not None else None
        cpu_requested, cpu_recommended = _sums(
            running, name, CPU, None if target is None else target.cpu_millicores)
        memory_requested, memory_recommended = _sums(
            running, name, MEMORY, None if target is None else target.memory_bytes)
        rows.append(ContainerRow(
            container=name,
            pods=len(running),
            requests=_current(running, name, limits=False),
            limits=_current(running, name, limits=True),
            target=target,
            lower_bound=rec.lower_bound if rec is not None else None,
            upper_bound=rec.upper_bound if rec is not None else None,
            uncapped_target=rec.uncapped_target if rec is not None else None,
            cpu_requested_millicores=cpu_requested,
            cpu_recommended_millicores=cpu_recommended,
            memory_requested_bytes=memory_requested,
            memory_recommended_bytes=memory_recommended,
        ))
    return tuple(rows)


def _event_time(event: EventView) -> float:
    return event.last_timestamp if event.last_timestamp is not None else event.creation_timestamp


def _about(vpa: VpaView, pod_names: set[str], event: EventView) -> bool:
    if event.reason not in ACTION_REASONS or event.involved_namespace != vpa.namespace:
        return False
    about_vpa = event.involved_kind == VPA_KIND and event.involved_name == vpa.name
    about_pod = event.involved_kind == POD_KIND and event.involved_name in pod_names
    return about_vpa or about_pod


def action_marks(
    vpa: VpaView, pods: Sequence[PodView], events: Iterable[EventView]
) -> tuple[ActionMark, ...]:
    """Every action event about `vpa` or one of `pods`, oldest first."""
    pod_names = {p.name for p in pods}
    marks = [ActionMark(_event_time(e), e.reason, e.involved_name)
             for e in events if _about(vpa, pod_names, e)]
    return tuple(sorted(marks, key=lambda mark: mark.timestamp))


def pod_requests(pods: Sequence[PodView]) -> tuple[PodRequests, ...]:
    """The live pods, oldest first, with each container's current requests."""
    live = sorted((p for p in pods if not p.is_terminating), key=lambda p: (p.creation_timestamp, p.name))
    return tuple(
        PodRequests(pod.name, pod.creation_timestamp,
                    tuple((name, pod.current_requests(name)) for name in _pod_containers(pod)))
        for pod in live
    )


def last_action(vpa: VpaView, pods: Sequence[PodView], events: Iterable[EventView]) -> Action | None:
    """The newest action event about `vpa` (kind VerticalPodAutoscaler, its name) or about one of `pods`
    (kind Pod, their names), among `ACTION_REASONS`; None when there is none. Ties go to the later one
    in `events`."""
    pod_names = {p.name for p in pods}
    best: EventView | None = None
    for event in events:
        if event.reason not in ACTION_REASONS or event.involved_namespace != vpa.namespace:
            continue
        about_vpa = event.involved_kind == VPA_KIND and event.involved_name == vpa.name
        about_pod = event.involved_kind == POD_KIND and event.involved_name in pod_names
        if not (about_vpa or about_pod):
            continue
        if best is None or _event_time(event) >= _event_time(best):
            best = event
    if best is None:
        return None
    return Action(best.reason, best.message, best.involved_kind, best.involved_name, _event_time(best))


def vpa_report(
    vpa: VpaView, pods: Sequence[PodView], events: Iterable[EventView], *, target_problem: str = ""
) -> VpaReport:
    events = tuple(events)
    ref = vpa.target_ref
    return VpaReport(
        namespace=vpa.namespace,
        name=vpa.name,
        workload=f"{ref.kind}/{ref.name}" if ref is not None else "",
        mode=vpa.effective_mode.value,
        containers=container_rows(vpa, pods),
        conditions=vpa.status.conditions,
        last_action=last_action(vpa, pods, events),
        target_problem=target_problem,
        pods_seen=pod_requests(pods),
        actions=action_marks(vpa, pods, events),
    )


def namespace_totals(reports: Iterable[VpaReport]) -> tuple[NamespaceTotals, ...]:
    """Sums per namespace, sorted by namespace, over the containers that have both a request and a target
    (`ContainerRow.cpu_requested_millicores` and friends); `pods` counts each VPA's largest container
    row."""
    sums: dict[str, list[int]] = {}
    for report in reports:
        acc = sums.setdefault(report.namespace, [0] * 8)
        acc[0] += 1
        acc[1] += max((row.pods for row in report.containers), default=0)
        for row in report.containers:
            acc[2] += row.cpu_requested_millicores or 0
            acc[3] += row.cpu_recommended_millicores or 0
            acc[4] += row.cpu_diff_millicores or 0
            acc[5] += row.memory_requested_bytes or 0
            acc[6] += row.memory_recommended_bytes or 0
            acc[7] += row.memory_diff_bytes or 0
    return tuple(NamespaceTotals(namespace, *values) for namespace, values in sorted(sums.items()))
