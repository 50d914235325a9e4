"""Several named recommenders in one process (`--recommender-name=default,performance`) on the sim.

Two recommenders with different settings share the caches, one metrics read per loop and one set of
collectors; each VPA is processed only by the recommender it selects, a VPA selecting a name nobody hosts
is left alone, and orphan collection keeps every recommender's checkpoints.
"""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry

from tests.integration.components.recommender_helpers import (
    CHECKPOINTS,
    VPAS,
    Harness,
    create,
    deployment,
    harness,
    recommendation,
    vpa,
)
from tests.integration.components.test_recommender import CYCLIC, STEADY, STEP_S
from vpa.components.recommender import LoopReport, RecommenderGroup
from vpa.model.features import FeatureGates
from vpa.model.settings import RecommenderSettings


def group_of(h: Harness, settings: RecommenderSettings) -> RecommenderGroup:
    """A group as a new process builds it, its collectors in a fresh `h.registry`."""
    h.registry = CollectorRegistry()
    return RecommenderGroup.from_client(
        settings, common=h.common, gates=FeatureGates(), client=h.client, pods=h.pods, vpas=h.vpas,
        clock=h.cluster.clock, registry=h.registry)


async def run_group(h: Harness, group: RecommenderGroup, seconds: float) -> list[list[LoopReport]]:
    reports = []
    for _ in range(round(seconds / STEP_S)):
        await h.cluster.advance(STEP_S)
        await h.caught_up()
        reports.append(await group.run_once())
        await h.caught_up()
    return reports


async def test_two_named_recommenders_in_one_loop() -> None:
    flags = dataclasses.replace(
        RecommenderSettings(), recommender_name="default,performance", checkpoints_gc_interval_s=600.0,
        overrides=(("performance", "recommendation_margin_fraction", 0.3),
                   ("performance", "target_cpu_percentile", 0.95)))
    async with harness() as h:
        for name in ("web", "fast", "lost"):
            await create(h, "deployments.apps", deployment(name, STEADY))
        await create(h, VPAS, vpa("web"))  # names no recommender: `default`'s
        await create(h, VPAS, vpa("fast", recommenders=["performance"]))
        await create(h, VPAS, vpa("lost", recommenders=["nobody"]))
        lost_version = h.vpa("lost")["metadata"]["resourceVersion"]
        await create(h, CHECKPOINTS, {
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": {"name": "gone-app", "namespace": "default"},
            "spec": {"vpaObjectName": "gone", "containerName": "app"}})

        group = group_of(h, flags)
        default, performance = group.by_name("default"), group.by_name("performance")
        assert (default.settings.recommendation_margin_fraction,
                performance.settings.recommendation_margin_fraction) == (0.15, 0.3)
        await group.restore()
        loops = await run_group(h, group, 3600)

        assert sorted(default.tracked) == [("default", "web")]
        assert sorted(performance.tracked) == [("default", "fast")]
        assert all(len(reports) == 2 for reports in loops)
        assert [r.vpas for r in loops[-1]] == [1, 1]
        # Same usage, different settings: 511m (P90 and P95 fall in the same bucket) plus 15 % or 30 %.
        assert recommendation(h.vpa("web"))["target"]["cpu"] == "587m"
        assert recommendation(h.vpa("fast"))["target"]["cpu"] == "664m"
        # Nobody hosts `nobody`: untouched.
        lost = h.vpa("lost")
        assert lost["metadata"]["resourceVersion"] == lost_version
        assert not lost.get("status")

        # One metrics read per loop for both, one timing per step, gauges over both.
        assert h.metric("vpa_recommender_metric_server_responses", is_error="false",
                        client_name="default-metrics-client") == len(loops)
        assert h.metric("vpa_recommender_execution_latency_seconds_count", step="LoadMetrics") == len(loops)
        assert h.metric("vpa_recommender_vpa_objects_count", update_mode="Off", has_recommendation="true",
                        api="v1", matches_pods="true", unsupported_config="false") == 2

        # Orphan collection ran (the gone VPA's checkpoint is deleted) and kept both recommenders' own.
        names = sorted(c["metadata"]["name"] for c in h.cluster.store.list(CHECKPOINTS, "default"))
        assert names == ["fast-app", "web-app"]

        # A new term restores each recommender from its own checkpoints only, from one shared LIST.
        again = group_of(h, flags)
        store = again._shared._checkpoints  # type: ignore[union-attr]
        listed = store.list
        lists = []

        async def counting_list() -> list[dict[str, object]]:
            lists.append(1)
            return await listed()

        store.list = counting_list  # type: ignore[method-assign]
        restored = await again.restore()
        assert [r.loaded for r in restored] == [1, 1]
        assert len(lists) == 1


async def test_cost_aware_recommender_selected_by_spec_recommenders() -> None:
    """`spec.recommenders: [cost-aware]` gets the cost-aware algorithm (no 15% margin on a steady 1 GiB:
    the edge of the bucket above it, 1077095457 bytes, vs upstream's 1077095457 + 15%), the same status
    shape and checkpoints; a new term restores it from those checkpoints alone."""
    flags = dataclasses.replace(RecommenderSettings(), recommender_name="default,cost-aware")
    async with harness() as h:
        for name in ("web", "lean"):
            await create(h, "deployments.apps", deployment(name, CYCLIC))
        await create(h, VPAS, vpa("web"))
        await create(h, VPAS, vpa("lean", recommenders=["cost-aware"]))
        group = group_of(h, flags)
        await group.restore()
        # Past one memory aggregation interval (24 h): checkpoints carry completed daily peaks only.
        await run_group(h, group, 25 * 3600)
        web, lean = recommendation(h.vpa("web")), recommendation(h.vpa("lean"))
        assert web["target"]["memory"] == "1238659775"
        assert lean["target"]["memory"] == "1077095457"
        assert web["target"]["cpu"] == lean["target"]["cpu"]  # CPU is upstream's estimate in both
        assert set(lean) == set(web)  # target, bounds, uncapped target: the same status fields
        names = sorted(c["metadata"]["name"] for c in h.cluster.store.list(CHECKPOINTS, "default"))
        assert names == ["lean-app", "web-app"]

        again = group_of(h, flags)
        restored = await again.restore()
        assert [r.loaded for r in restored] == [1, 1]
        # Before any new sample: the restored history alone gives the same memory target.
        cost_aware = again.by_name("cost-aware")
        states = cost_aware.core.cluster.merged_states("default", "lean")
        assert list(states) == ["app"]
        assert cost_aware.core.recommender.recommend(states)["app"].target.memory_bytes == 1077095457


async def test_moving_window_recommender_selected_by_spec_recommenders() -> None:
    """`spec.recommenders: [moving-window]` gets the moving-window algorithm: on a constant 1 GiB, after
    an hour of samples, the level model (1 GiB × 1.1 on the next 10% step, 1212435419 bytes) instead of
    upstream's 1 GiB bucket + 15% (1238659775), memory bounds equal to the target, CPU and status shape
    as upstream's, the same checkpoints. A new term restores the checkpoints and, while recent usage
    (kept in memory only) refills, gives upstream's recommendation; two hours of new samples later (an
    hour, and a jump measurable before the current hour), its own again."""
    flags = dataclasses.replace(RecommenderSettings(), recommender_name="default,moving-window")
    async with harness() as h:
        for name in ("web", "lean"):
            await create(h, "deployments.apps", deployment(name, CYCLIC))
        await create(h, VPAS, vpa("web"))
        await create(h, VPAS, vpa("lean", recommenders=["moving-window"]))
        group = group_of(h, flags)
        await group.restore()
        await run_group(h, group, 2 * 3600)
        web, lean = recommendation(h.vpa("web")), recommendation(h.vpa("lean"))
        assert web["target"]["memory"] == "1238659775"
        assert lean["target"]["memory"] == "1212435419"
        assert lean["lowerBound"]["memory"] == lean["upperBound"]["memory"] == lean["target"]["memory"]
        assert web["target"]["cpu"] == lean["target"]["cpu"]
        assert set(lean) == set(web)
        names = sorted(c["metadata"]["name"] for c in h.cluster.store.list(CHECKPOINTS, "default"))
        assert names == ["lean-app", "web-app"]

        again = group_of(h, flags)
        restored = await again.restore()
        assert [r.loaded for r in restored] == [1, 1]
        moving = again.by_name("moving-window")
        states = moving.core.cluster.merged_states("default", "lean")
        upstream = again.by_name("default").core.recommender.recommend(states)["app"]
        assert moving.core.recommender.recommend(states)["app"] == upstream
        await run_group(h, again, 2 * 3600 + 2 * STEP_S)
        assert recommendation(h.vpa("lean"))["target"]["memory"] == "1212435419"
