"""Node-aware caps and conflict conditions against `vpa sim`: conditions, events and gauges as a user sees
them through the API (`--cap-to-largest-node`, several VPAs on one target, an HPA on the same resource)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import CollectorRegistry

from tests.integration.components.recommender_helpers import (
    VPAS,
    Harness,
    condition,
    create,
    deployment,
    harness,
    recommendation,
    settings,
    vpa,
)
from vpa.components.recommender import RecommenderGroup
from vpa.kube.eventing import EventRecorder
from vpa.kube.neighbourwatching import hpa_cache, node_cache
from vpa.model import quantity
from vpa.model.features import FeatureGates

STEADY = {"app": {"cpu": {"type": "constant", "value": "500m"},
                  "memory": {"type": "constant", "value": "200Mi"}}}
HPAS = "horizontalpodautoscalers.autoscaling"


@contextlib.asynccontextmanager
async def wired(h: Harness) -> AsyncIterator[EventRecorder]:
    """The harness's recommender rebuilt with Node and HPA caches and an event recorder, as production
    wires them (`RecommenderGroup.from_client`)."""
    nodes, hpas = node_cache(h.client, h.cluster.clock), hpa_cache(h.client, h.cluster.clock)
    recorder = EventRecorder(h.client, h.cluster.clock, component="vpa-recommender")
    tasks = [asyncio.create_task(run()) for run in (nodes.run, hpas.run, recorder.run)]
    h.node_cache, h.hpa_cache = nodes, hpas  # type: ignore[attr-defined]
    try:
        await asyncio.wait_for(asyncio.gather(nodes.wait_synced(), hpas.wait_synced()), timeout=10)
        h.registry = CollectorRegistry()
        h.recommender = RecommenderGroup.from_client(
            h.settings, common=h.common, gates=FeatureGates(), client=h.client, pods=h.pods, vpas=h.vpas,
            clock=h.cluster.clock, registry=h.registry, nodes=nodes, hpas=hpas, recorder=recorder,
        ).recommenders[0]
        yield recorder
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def active_vpa(name: str, target: str) -> dict[str, Any]:
    obj = vpa(name, target=target)
    obj["spec"]["updatePolicy"] = {"updateMode": "Recreate"}
    return obj


async def events_for(h: Harness, recorder: EventRecorder, name: str) -> list[dict[str, Any]]:
    await recorder.flush()
    return [e for e in h.cluster.store.list("events")
            if e.get("involvedObject", {}).get("name") == name
            and e.get("involvedObject", {}).get("kind") == "VerticalPodAutoscaler"]


async def caught_up(cache: Any, h: Harness, resource: str) -> None:
    """Wait until a cache holds what the store holds (its watch has delivered every change)."""
    for _ in range(2000):
        want = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                for o in h.cluster.store.list(resource)}
        if cache.resource_versions() == want:
            return
        await asyncio.sleep(0.002)
    raise AssertionError(f"the {resource} cache did not catch up")


async def shrink_node(h: Harness, cpu: str) -> None:
    (stored,) = h.cluster.store.list("nodes")
    node = copy.deepcopy(stored)  # the store hands out its own objects
    node["status"]["allocatable"]["cpu"] = cpu
    await h.cluster.store.update("nodes", node, subresource="status")
    await h.cluster.settle()
    await caught_up(h.node_cache, h, "nodes")  # type: ignore[attr-defined]


async def test_capped_to_the_largest_node_with_condition_event_and_gauge() -> None:
    async with harness(settings(cap_to_largest_node=True)) as h, wired(h) as recorder:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, active_vpa("web", "web"))
        await h.run_for(1800)
        uncapped = quantity.cpu_millicores(recommendation(h.vpa("web"))["target"]["cpu"])
        assert uncapped > 400
        assert condition(h.vpa("web"), "CappedToNode") is None
        await shrink_node(h, "400m")
        await h.loop()
        rec = recommendation(h.vpa("web"))
        assert quantity.cpu_millicores(rec["target"]["cpu"]) == 400
        assert quantity.cpu_millicores(rec["upperBound"]["cpu"]) <= 400
        assert quantity.cpu_millicores(rec["uncappedTarget"]["cpu"]) == uncapped
        capped = condition(h.vpa("web"), "CappedToNode")
        assert capped is not None
        assert capped["status"] == "True"
        assert capped["reason"] == "CappedToLargestNode"
        assert "cpu" in capped["message"]
        assert "→ 400m" in capped["message"]
        events = await events_for(h, recorder, "web")
        assert [e["reason"] for e in events] == ["CappedToLargestNode"]
        assert events[0]["type"] == "Warning"
        assert h.metric("vpa_recommender_vpas_capped_to_node") == 1
        # A node large enough again lifts the cap and the condition.
        await shrink_node(h, "16")
        await h.loop()
        assert condition(h.vpa("web"), "CappedToNode") is None
        assert quantity.cpu_millicores(recommendation(h.vpa("web"))["target"]["cpu"]) == uncapped
        assert h.metric("vpa_recommender_vpas_capped_to_node") == 0


async def test_without_the_flag_nothing_is_capped() -> None:
    async with harness() as h, wired(h):
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, active_vpa("web", "web"))
        await h.run_for(1800)
        await shrink_node(h, "100m")
        await h.loop()
        assert quantity.cpu_millicores(recommendation(h.vpa("web"))["target"]["cpu"]) > 100
        assert condition(h.vpa("web"), "CappedToNode") is None


async def test_the_younger_of_two_vpas_on_one_target_is_told_it_lost() -> None:
    async with harness() as h, wired(h) as recorder:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, active_vpa("web-old", "web"))
        await h.cluster.advance(10)
        await create(h, VPAS, active_vpa("web-new", "web"))
        await h.run_for(600)
        lost = condition(h.vpa("web-new"), "ConflictingVPA")
        assert lost is not None
        assert lost["status"] == "True"
        assert "VPA web-old also targets Deployment/web" in lost["message"]
        assert condition(h.vpa("web-old"), "ConflictingVPA") is None
        assert [e["reason"] for e in await events_for(h, recorder, "web-new")] == ["ConflictingVPA"]
        assert await events_for(h, recorder, "web-old") == []
        assert h.metric("vpa_recommender_vpa_conflicts") == 1
        # The winner goes away: the loser takes over and its condition is removed.
        await h.cluster.store.delete(VPAS, "default", "web-old")
        await h.cluster.settle()
        await h.run_for(300)
        assert condition(h.vpa("web-new"), "ConflictingVPA") is None
        assert h.metric("vpa_recommender_vpa_conflicts") == 0


async def test_an_hpa_on_cpu_of_the_same_target_is_reported() -> None:
    async with harness() as h, wired(h) as recorder:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, active_vpa("web", "web"))
        await create(h, HPAS, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web-hpa", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 4,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]},
        })
        await caught_up(h.hpa_cache, h, HPAS)  # type: ignore[attr-defined]
        await h.run_for(600)
        fight = condition(h.vpa("web"), "ConflictingHPA")
        assert fight is not None
        assert fight["status"] == "True"
        assert fight["message"].startswith("HPA web-hpa scales on cpu, which this VPA also sizes")
        assert [e["reason"] for e in await events_for(h, recorder, "web")] == ["ConflictingHPA"]
        assert h.metric("vpa_recommender_hpa_conflicts") == 1
