"""OOMs read from the kubelet's memory-pressure `Evicted` events (spec §3.2, upstream `parseEvictionEvent`).

Owns: `ooms_from_eviction_event` — an `Evicted` Event about a Pod whose annotations `offending_containers`,
`offending_containers_usage` and `starved_resource` (comma-separated lists of equal length) name the
containers the kubelet blamed; each container whose starved resource is `memory` becomes one OOM at the
event's creation time with its reported usage as the memory. Lists of unequal length yield nothing; an
unparsable usage skips that container (upstream logs and continues).

Must not: do I/O, log, or de-duplicate (the caller sees each event once by its uid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.model.event import EventView
from vpa.model.quantity import QuantityError, memory_bytes

EVICTED_REASON: Final = "Evicted"
OFFENDING_CONTAINERS: Final = "offending_containers"
OFFENDING_CONTAINERS_USAGE: Final = "offending_containers_usage"
STARVED_RESOURCE: Final = "starved_resource"


@dataclass(frozen=True, slots=True)
class EvictionOom:
    container_id: ContainerId
    timestamp: float
    memory_bytes: int


def _split(event: EventView, key: str) -> list[str]:
    # As Go's strings.Split: no trimming, and an empty value is one empty item.
    value = event.annotation(key)
    return [] if value is None else value.split(",")


def ooms_from_eviction_event(event: EventView) -> list[EvictionOom]:
    """The memory OOMs one eviction event reports (see the module docstring)."""
    if event.reason != EVICTED_REASON or event.involved_kind != "Pod":
        return []
    containers = _split(event, OFFENDING_CONTAINERS)
    usages = _split(event, OFFENDING_CONTAINERS_USAGE)
    starved = _split(event, STARVED_RESOURCE)
    if not len(containers) == len(usages) == len(starved):
        return []
    pod = PodId(event.involved_namespace, event.involved_name)
    out: list[EvictionOom] = []
    for container, usage, resource in zip(containers, usages, starved, strict=True):
        if resource != "memory":
            continue
        try:
            amount = memory_bytes(usage)  # rounded up to whole bytes, as Quantity.Value()
        except QuantityError:
            continue
        out.append(EvictionOom(ContainerId(pod, container), event.creation_timestamp, amount))
    return out
