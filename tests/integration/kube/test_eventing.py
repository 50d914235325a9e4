"""The event recorder against the simulated API server: aggregation, naming, drops, spam filter, failures."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from vpa.components.webhook.loop_thread import LoopThread
from vpa.kube.client import KubeClient
from vpa.kube.eventing import EventRecorder, ObjectRef
from vpa.kube.leasing import parse_time
from vpa.model.clock import VirtualClock
from vpa.sim import SimCluster

from .helpers import ensure_namespace, eventually, new_client

POD = ObjectRef(kind="Pod", namespace="ns-a", name="web-1", uid="uid-1")
EVICTED = "Pod was evicted by VPA Updater to apply resource recommendation."


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=1, behaviour=False) as c:
        await ensure_namespace(c, "ns-a")
        yield c


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()  # frozen; tests advance it


@pytest.fixture
async def client(cluster: SimCluster, clock: VirtualClock) -> AsyncIterator[KubeClient]:
    c = await new_client(cluster, clock)
    async with c:
        yield c


@contextlib.asynccontextmanager
async def running(recorder: EventRecorder) -> AsyncIterator[EventRecorder]:
    task = asyncio.create_task(recorder.run())
    try:
        yield recorder
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def events(cluster: SimCluster, namespace: str = "ns-a") -> list[dict[str, Any]]:
    return sorted(cluster.store.list("events", namespace), key=lambda e: e["metadata"]["name"])


async def test_same_event_twice_is_one_event_with_count_two(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater", host="updater-0")
    async with running(recorder):
        assert recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
        first_time = clock.now()
        clock.advance(30)
        assert recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
    [event] = events(cluster)
    assert event["count"] == 2
    assert re.fullmatch(r"web-1\.[0-9a-f]+", event["metadata"]["name"])
    assert int(event["metadata"]["name"].split(".")[1], 16) == int(first_time * 1e9)
    assert event["involvedObject"] == {
        "kind": "Pod",
        "namespace": "ns-a",
        "name": "web-1",
        "uid": "uid-1",
        "apiVersion": "v1",
    }
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "EvictedByVPA", EVICTED)
    assert event["source"] == {"component": "vpa-updater", "host": "updater-0"}
    assert event["reportingComponent"] == "vpa-updater"
    assert event["reportingInstance"] == "updater-0"
    assert parse_time(event["firstTimestamp"]) == pytest.approx(first_time, abs=1)
    assert parse_time(event["lastTimestamp"]) == pytest.approx(first_time + 30, abs=1)
    assert (recorder.stats.created, recorder.stats.patched) == (1, 1)


async def test_different_messages_types_and_objects_are_separate(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater", host="h")
    vpa = ObjectRef(
        kind="VerticalPodAutoscaler", namespace="ns-a", name="web", api_version="autoscaling.k8s.io/v1"
    )
    async with running(recorder):
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        recorder.normal(POD, "InPlaceResizedByVPA", "resized")
        recorder.warning(POD, "InPlaceResizedByVPA", "resized")
        recorder.normal(vpa, "EvictedPod", "VPA Updater evicted Pod web-1 to apply resource recommendation.")
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
    got = events(cluster)
    assert len(got) == 4
    assert len({e["metadata"]["name"] for e in got}) == 4  # distinct names even on a frozen clock
    counts = sorted((e["involvedObject"]["name"], e["type"], e["reason"], e["count"]) for e in got)
    assert counts == [
        ("web", "Normal", "EvictedPod", 1),
        ("web-1", "Normal", "EvictedByVPA", 2),
        ("web-1", "Normal", "InPlaceResizedByVPA", 1),
        ("web-1", "Warning", "InPlaceResizedByVPA", 1),
    ]


async def test_outside_the_window_starts_a_new_event(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater", aggregation_window_s=600)
    async with running(recorder):
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
        clock.advance(601)
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
    assert [e["count"] for e in events(cluster)] == [1, 1]


async def test_deleted_event_is_recreated(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater")
    async with running(recorder):
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
        [first] = events(cluster)
        await cluster.store.delete("events", "ns-a", first["metadata"]["name"])
        clock.advance(1)
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
    [second] = events(cluster)
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["count"] == 1
    assert recorder.stats.created == 2


async def test_recording_never_blocks_and_counts_drops(client: KubeClient, clock: VirtualClock) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater", queue_size=2)
    # No writer running: the queue fills and further events are dropped at once.
    results = [recorder.normal(POD, "EvictedByVPA", f"message {i}") for i in range(5)]
    assert results == [True, True, False, False, False]
    assert recorder.stats.dropped == 3
    assert recorder.pending == 2
    assert recorder.discard_pending() == 2


async def test_spam_filter_throttles_a_hot_loop(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater", spam_burst=3, spam_qps=1 / 300)
    async with running(recorder):
        for _ in range(10):
            recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
        assert recorder.stats.throttled == 7
        clock.advance(300)  # one token back
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
    [event] = events(cluster)
    assert event["count"] == 4
    assert recorder.stats.throttled == 7


async def test_api_failures_are_counted_and_the_recorder_carries_on(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    recorder = EventRecorder(client, clock, component="vpa-updater")
    fault = cluster.faults.inject(verb="create", resource="events", code=403, count=1)
    async with running(recorder):
        recorder.normal(POD, "EvictedByVPA", EVICTED)
        await recorder.flush()
        assert recorder.stats.failed == 1
        recorder.normal(POD, "InPlaceResizedByVPA", "resized")
        await recorder.flush()
        await eventually(lambda: len(events(cluster)) == 1)
    assert fault.hits == 1
    assert recorder.stats.created == 1


async def test_an_event_recorded_from_another_threads_loop_is_written(
    cluster: SimCluster, client: KubeClient, clock: VirtualClock
) -> None:
    # The admission webhook serves from a loop on its own thread; its Events go through this loop's writer.
    recorder = EventRecorder(client, clock, component="vpa-admission-controller", host="h")
    thread = LoopThread("events-test")
    async with running(recorder):
        await asyncio.sleep(0)  # run() has started: the recorder knows its loop
        thread.start()
        try:
            queued = await thread.call(_record_there(recorder))
        finally:
            await thread.stop()
        assert queued
        await eventually(lambda: len(events(cluster)) == 1)
    assert events(cluster)[0]["reason"] == "FromTheWebhookThread"


async def _record_there(recorder: EventRecorder) -> bool:
    return recorder.warning(POD, "FromTheWebhookThread", "recorded on the webhook's own loop")
