"""OOM kills as the recommender learns them from pod updates (upstream's OOM observer, spec §3.2).

Must not: do I/O or de-duplicate (the recommender keeps the last kill per container).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from vpa.logic.recommender.cluster import (
    ContainerId,
    PodId,
)
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
