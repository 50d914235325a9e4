"""What the updater would put on a replayed pod: the request in force at each moment of an evaluation.

Owns: `AppliedRequests` — per trace key (one single-container pod under its own VPA), the requests the
updater has applied, the pod's start and the container's last start and last OOM kill, and the decision
at each recomputation, taken by the updater's own pure rules (`vpa.logic.updater.priority`: the
considered container, `compute_priority`, `is_quick_oom` and `evaluate`, upstream's Recreate acceptance):
a request outside `[lowerBound, upperBound]` for either resource, a pod older than
`--in-recommendation-bounds-eviction-lifetime-threshold` (12 h) whose resources would change by at least
`--pod-update-threshold` (10%), or a container OOM-killed less than `--evict-after-oom-threshold` (10 min)
after it started, by a kill less than that old at the decision, with any change (the fast path). An
applied update sets both resources to the target and recreates the pod (its age starts again); the first
recommendation is applied as admission would set it on a new pod. An OOM kill restarts the container with
the applied values (the pod keeps its age). The decisions come at recomputations only (the
recommendation changes only then), so with hourly recomputation the fast path acts only on a kill in the
10 minutes before one.

Must not: score, replay, read files or the clock; the updater's rules are not restated here.
"""

from __future__ import annotations

from dataclasses import dataclass

from vpa.logic.updater.priority import (
    OOM_KILLED,
    compute_priority,
    considered_containers,
    evaluate,
    is_quick_oom,
    recommendations_by_name,
)
from vpa.model.pod import ContainerStatusView, ContainerView, PodView
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings
from vpa.model.vpa import Recommendation, RecommendedContainerResources, VpaView

REPLAY_NAMESPACE = "replay"


@dataclass(slots=True)
class _Pod:
    requests: Resources
    pod_started: float
    container_started: float
    oom_started: float | None = None
    """When the container that was last OOM-killed had started (None: no OOM kill since the pod started)."""
    oom_at: float | None = None


class AppliedRequests:
    """The updater's decisions over a replay; `recommend` at each recomputation, `oom` at each kill."""

    def __init__(self, settings: UpdaterSettings | None = None) -> None:
        self.settings = settings if settings is not None else UpdaterSettings()
        self._pods: dict[str, _Pod] = {}

    def requests(self, key: str) -> Resources | None:
        """The requests in force for `key` (None before its first recommendation)."""
        pod = self._pods.get(key)
        return None if pod is None else pod.requests

    def oom(self, key: str, at: float) -> None:
        """The container of `key` was OOM-killed at `at` and restarts at once with the applied values."""
        pod = self._pods.get(key)
        if pod is None:
            return
        pod.oom_started, pod.oom_at = pod.container_started, at
        pod.container_started = at

    def recommend(self, key: str, now: float, item: RecommendedContainerResources) -> Resources | None:
        """The updater's verdict on `item` at `now`: the newly applied requests, or None (nothing applied)."""
        target = item.target
        if target.cpu_millicores is None and target.memory_bytes is None:
            return None
        pod = self._pods.get(key)
        if pod is None:
            self._pods[key] = _Pod(target, now, now)
            return target
        view = self._view(key, pod)
        vpa = VpaView(namespace=REPLAY_NAMESPACE, name=key)
        targets = considered_containers(view, vpa, recommendations_by_name(Recommendation((item,))), None)
        priority = compute_priority(targets)
        quick_oom = is_quick_oom(view, vpa, self.settings.evict_after_oom_threshold_s, None, now)
        if not evaluate(priority, quick_oom, view, now, self.settings).recreate.accepts:
            return None
        applied = Resources(target.cpu_millicores if target.cpu_millicores is not None
                            else pod.requests.cpu_millicores,
                            target.memory_bytes if target.memory_bytes is not None
                            else pod.requests.memory_bytes)
        if applied == pod.requests:
            return None
        self._pods[key] = _Pod(applied, now, now)
        return applied

    @staticmethod
    def _view(key: str, pod: _Pod) -> PodView:
        status = ContainerStatusView(
            name=key, ready=True, started_at=pod.container_started,
            last_terminated_reason=OOM_KILLED if pod.oom_at is not None else None,
            last_terminated_at=pod.oom_at, last_terminated_started_at=pod.oom_started,
            actual_requests=pod.requests, actual_limits=pod.requests, state="running")
        return PodView(namespace=REPLAY_NAMESPACE, name=key, phase="Running",
                       containers=(ContainerView(key, pod.requests, pod.requests, has_resources=True),),
                       container_statuses=(status,), start_time=pod.pod_started)
