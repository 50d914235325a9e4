"""OOMs from `Evicted` events (spec §3.2): the annotation lists, the starved resource, and the edge cases
upstream's `parseEvictionEvent` has (unequal lists, unparsable usage, other reasons and kinds)."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.logic.recommender.evictions import ooms_from_eviction_event
from vpa.model.event import EventView

MI = 2**20


def event(reason: str = "Evicted", kind: str = "Pod", **annotations: str) -> EventView:
    return EventView("ns", "web-1.abc", "uid-1", "10", reason, kind, "ns", "web-1", 1000.0,
                     tuple(sorted(annotations.items())))


def cid(container: str) -> ContainerId:
    return ContainerId(PodId("ns", "web-1"), container)


CASES: dict[str, tuple[EventView, list[tuple[ContainerId, int]]]] = {
    "one-memory": (event(offending_containers="app", offending_containers_usage="300Mi",
                         starved_resource="memory"), [(cid("app"), 300 * MI)]),
    "two-containers-one-memory": (
        event(offending_containers="app,side", offending_containers_usage="300Mi,2",
              starved_resource="memory,cpu"), [(cid("app"), 300 * MI)]),
    "two-memory": (
        event(offending_containers="app,side", offending_containers_usage="300Mi,1G",
              starved_resource="memory,memory"), [(cid("app"), 300 * MI), (cid("side"), 10**9)]),
    "fraction-rounds-up": (event(offending_containers="app", offending_containers_usage="1.5",
                                 starved_resource="memory"), [(cid("app"), 2)]),
    "disk-pressure": (event(offending_containers="app", offending_containers_usage="1Gi",
                            starved_resource="ephemeral-storage"), []),
    "unequal-lists": (event(offending_containers="app,side", offending_containers_usage="300Mi",
                            starved_resource="memory,memory"), []),
    "missing-starved": (event(offending_containers="app", offending_containers_usage="300Mi"), []),
    "bad-usage-skipped": (
        event(offending_containers="app,side", offending_containers_usage="lots,100Mi",
              starved_resource="memory,memory"), [(cid("side"), 100 * MI)]),
    "no-annotations": (event(), []),
    "other-reason": (event(reason="Killing", offending_containers="app", offending_containers_usage="1Gi",
                           starved_resource="memory"), []),
    "not-a-pod": (event(kind="Node", offending_containers="app", offending_containers_usage="1Gi",
                        starved_resource="memory"), []),
    "no-trimming": (event(offending_containers="app, side", offending_containers_usage="1Mi, 2Mi",
                          starved_resource="memory, memory"), [(cid("app"), MI)]),
}


@pytest.mark.parametrize(("given", "want"), CASES.values(), ids=CASES.keys())
def test_ooms_from_eviction_event(given: EventView, want: list[tuple[ContainerId, int]]) -> None:
    got = ooms_from_eviction_event(given)
    assert [(o.container_id, o.memory_bytes) for o in got] == want
    assert all(o.timestamp == given.creation_timestamp for o in got)
