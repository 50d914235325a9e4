"""Recommender inputs on the sim: OOMs from `Evicted` events, which pods `--memory-saver` tracks, and a
VPA's own OOM bump-up (`PerVPAConfig`) applied through the loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.integration.components.recommender_helpers import (
    MI,
    VPAS,
    Harness,
    create,
    deployment,
    harness,
    recommendation,
    settings,
    vpa,
)
from tests.integration.components.test_recommender import STEADY, STEP_S, written
from vpa.components.recommender import RecommenderGroup
from vpa.kube.converting import format_time
from vpa.kube.evictionwatching import eviction_event_cache
from vpa.kube.watching import WatchCache
from vpa.model.event import EventView
from vpa.model.features import FeatureGates


@asynccontextmanager
async def with_eviction_events(h: Harness, gates: FeatureGates | None = None,
                               ) -> AsyncIterator[WatchCache[EventView]]:
    """Replace the harness's recommender with one fed by a running `Evicted` events watch."""
    events = eviction_event_cache(h.client, h.cluster.clock)
    h.registry = CollectorRegistry()
    h.recommender = RecommenderGroup.from_client(
        h.settings, common=h.common, gates=gates or FeatureGates(), client=h.client, pods=h.pods,
        vpas=h.vpas, clock=h.cluster.clock, registry=h.registry, events=events).recommenders[0]
    task = asyncio.create_task(events.run())
    try:
        await asyncio.wait_for(events.wait_synced(), timeout=10)
        yield events
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def eviction(name: str, pod: str, containers: str, usages: str, starved: str, now: float) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": format_time(now),
                     "annotations": {"offending_containers": containers, "offending_containers_usage": usages,
                                     "starved_resource": starved}},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod, "apiVersion": "v1"},
        "reason": "Evicted", "type": "Warning", "message": "The node was low on resource: memory.",
        "source": {"component": "kubelet"}, "count": 1,
    }


async def settled_loop(h: Harness, events: WatchCache[EventView]) -> int:
    """One loop once the events watch holds what the store holds; returns the OOMs it recorded."""
    for _ in range(2000):
        want = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                for o in h.cluster.store.list("events") if o.get("reason") == "Evicted"}
        if events.resource_versions() == want:
            break
        await asyncio.sleep(0.002)
    else:
        raise AssertionError("the events watch did not catch up")
    await h.cluster.advance(STEP_S)
    return (await h.loop()).ooms


async def test_a_memory_eviction_event_raises_the_memory_target_once() -> None:
    async with harness() as h, with_eviction_events(h) as events:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, vpa("web"))
        await h.loop()
        await h.run_for(3600, STEP_S)
        before = written(h.vpa("web")).containers[0].target.memory_bytes
        assert before == 250 * MI  # 200Mi of usage is below the per-pod minimum
        pod = h.cluster.store.list("pods", "default")[0]["metadata"]["name"]
        now = h.cluster.clock.now()

        # CPU starvation and someone else's event are no OOMs; other reasons are not even watched.
        await create(h, "events", eviction("cpu", pod, "app", "3", "cpu", now))
        other = eviction("other", pod, "app", "900Mi", "memory", now) | {"reason": "Killing"}
        await create(h, "events", other)
        assert await settled_loop(h, events) == 0

        await create(h, "events", eviction("mem", pod, "app", "600Mi", "memory", now))
        assert await settled_loop(h, events) == 1
        after = written(h.vpa("web")).containers[0].target.memory_bytes
        assert after is not None
        # The OOM sample is max(600Mi + 100Mi, 600Mi × 1.2) = 720Mi, plus the 15 % margin.
        assert after >= 720 * MI > before
        # The OOM sample counts in the quality metrics as an OOM, against the 250Mi recommendation.
        assert h.metric("vpa_quality_mem_recommendations_bytes_count", update_mode="Off", is_oom="true") == 1
        assert h.metric("vpa_quality_mem_recommendation_lower_equal_usage_diffs_bytes_sum", update_mode="Off",
                        recommendation_missing="false", is_oom="true") == 720 * MI - 250 * MI

        # The same event updated (a new resourceVersion) is not a new OOM.
        stored = h.cluster.store.get("events", "default", "mem")
        assert stored is not None
        await h.cluster.store.update("events", stored | {"count": 2})
        assert await settled_loop(h, events) == 0


@pytest.mark.parametrize(("memory_saver", "tracked"), [(True, 1), (False, 2)], ids=["on", "off"])
async def test_memory_saver_tracks_only_pods_some_vpa_matches(memory_saver: bool, tracked: int) -> None:
    async with harness(settings(memory_saver=memory_saver)) as h:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, "deployments.apps", deployment("stray", STEADY))  # no VPA matches it
        await create(h, VPAS, vpa("web"))
        reports = [await h.loop(), *await h.run_for(900, STEP_S)]
        assert all(r.pods == tracked for r in reports)
        assert h.metric("vpa_recommender_aggregate_container_states_count") == tracked
        assert len(h.rec.core.cluster.aggregates) == tracked
        # The stray pod's samples are skipped with the memory saver, taken without it.
        assert reports[-1].samples == 2 * tracked
        assert reports[-1].samples_skipped == (2 - tracked)
        assert recommendation(h.vpa("web"))["target"]["cpu"] == "587m"


@pytest.mark.parametrize("gate", [True, False], ids=["PerVPAConfig-on", "PerVPAConfig-off"])
async def test_a_vpa_oom_bump_up_ratio_shapes_the_oom_sample(gate: bool) -> None:
    """Two workloads see the same 600Mi memory eviction; `bumpy`'s VPA asks for `oomBumpUpRatio: 2`."""
    gates = FeatureGates.parse(f"PerVPAConfig={'true' if gate else 'false'}")
    async with harness() as h, with_eviction_events(h, gates) as events:
        bumpy = vpa("bumpy")
        bumpy["spec"]["resourcePolicy"] = {"containerPolicies": [
            {"containerName": "app", "oomBumpUpRatio": "2", "oomMinBumpUp": "10Mi"}]}
        for name, obj in (("plain", vpa("plain")), ("bumpy", bumpy)):
            await create(h, "deployments.apps", deployment(name, STEADY))
            await create(h, VPAS, obj)
        await h.loop()
        await h.run_for(1800, STEP_S)
        now = h.cluster.clock.now()
        for pod in h.cluster.store.list("pods", "default"):
            name = pod["metadata"]["name"]
            await create(h, "events", eviction(f"{name}.evicted", name, "app", "600Mi", "memory", now))
        assert await settled_loop(h, events) == 2

        plain = written(h.vpa("plain")).containers[0].target.memory_bytes
        bumped = written(h.vpa("bumpy")).containers[0].target.memory_bytes
        assert plain is not None
        assert bumped is not None
        # Flags: max(600Mi + 100Mi, 600Mi × 1.2) = 720Mi, plus the margin and bucket rounding (< 1000Mi).
        assert 720 * MI <= plain < 1000 * MI
        if gate:
            # The VPA's own: max(600Mi + 10Mi, 600Mi × 2) = 1200Mi, plus the margin.
            assert bumped >= 1200 * MI
        else:
            assert bumped == plain  # the policy's fields are ignored without the gate
