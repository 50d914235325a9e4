"""OOM kills as the recommender learns them (upstream's OOM observer, spec §3.2): from pod updates (a
container terminated OOMKilled) and from the kubelet's memory-pressure `Evicted` events.

Owns: `ooms_from_pod_update` (pure) and `OomObserver`, the queue of kills seen since the recommender last
applied them, de-duplicated per container by their time and per event by its uid, with the pod as the watch
showed it at each kill and, with `--recommend-on-oom`, the trigger of a prompt pass.

Must not: apply kills to histories (the recommender does, in its loop).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from vpa.components.triggering import Trigger
from vpa.logic.recommender.cluster import (
    ContainerId,
    PodId,
)
from vpa.logic.recommender.evictions import ooms_from_eviction_event
from vpa.model.event import EventView
from vpa.model.pod import PodView

OOM_QUEUE_SIZE: Final = 5000  # upstream's OOM channel capacity
SEEN_EVENTS_SIZE: Final = 10000  # eviction events remembered for de-duplication
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


class OomObserver:
    """The OOM kills seen since the recommender last applied them (a bounded queue, as upstream's channel)."""

    def __init__(self, native_sidecars: bool) -> None:
        # Gate NativeSidecar: sidecars' kills count like containers'.
        self._native_sidecars = native_sidecars
        self.queue: deque[OomKill] = deque(maxlen=OOM_QUEUE_SIZE)
        self.views: dict[PodId, PodView] = {}
        """The pod as the watch showed it at each queued kill (to track a pod no loop has loaded yet)."""
        self.trigger: Trigger | None = None
        """With `--recommend-on-oom` the group sets a trigger; it fires with each OOM-killed pod."""
        self.pods: dict[PodId, Mapping[str, str]] = {}
        """The labels of the pods killed since the last prompt pass: which VPAs to redo."""
        self._last: dict[PodId, dict[str, float]] = {}
        self._seen_events: OrderedDict[str, None] = OrderedDict()

    def clear(self) -> None:
        self.queue.clear()
        self.pods.clear()
        self._last.clear()

    def forget(self, pod_id: PodId) -> None:
        """A pod left the model: its last kill times go too."""
        self._last.pop(pod_id, None)

    def on_pod_update(self, old: PodView, new: PodView) -> None:
        cached = new
        if self._native_sidecars:
            old, new = old.with_native_sidecars(), new.with_native_sidecars()
        for kill in ooms_from_pod_update(old, new):
            seen = self._last.setdefault(kill.container_id.pod, {})
            if seen.get(kill.container_id.container_name) == kill.timestamp:
                continue
            seen[kill.container_id.container_name] = kill.timestamp
            self.queue.append(kill)
            self.views[kill.container_id.pod] = cached
            if self.trigger is not None:
                self.pods[kill.container_id.pod] = new.labels
                self.trigger.fire(f"{new.namespace}/{new.name}")

    def on_eviction_event(self, event: EventView) -> None:
        """OOMs from a memory-pressure eviction (spec §3.2), once per event uid."""
        key = event.uid or f"{event.namespace}/{event.name}"
        if key in self._seen_events:
            return
        self._seen_events[key] = None
        if len(self._seen_events) > SEEN_EVENTS_SIZE:
            self._seen_events.popitem(last=False)
        for oom in ooms_from_eviction_event(event):
            self.queue.append(OomKill(oom.container_id, oom.timestamp, oom.memory_bytes))
