"""The live recommender loop against a behaving simulated cluster, on the virtual clock.

Workloads run with known usage profiles; the loop reads them through the real metrics API, pod and VPA
watch caches, and writes VPA status and checkpoints through the real API, one `run_once` per step.
"""

from __future__ import annotations

import math
from typing import Any

import structlog

from tests.integration.components.recommender_helpers import (
    CHECKPOINTS,
    MI,
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
from vpa.kube.converting import vpa_status_from_dict
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.logic.recommender.recommending import RecommenderConfig, RecommenderCore
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import Recommendation, VpaView

STEADY = {"app": {"cpu": {"type": "constant", "value": "500m"},
                  "memory": {"type": "constant", "value": "200Mi"}}}
CYCLIC = {"app": {"cpu": {"type": "daily", "base": "500m", "amplitude": "300m", "peak_hour": 14},
                  "memory": {"type": "constant", "value": "1Gi"}}}
STEP_S = 300.0


def cyclic_cpu_millicores(t: float) -> int:
    """The daily profile's formula (profiles.DailyCycle), truncated to whole millicores as the sim reports."""
    hours = (t % 86400) / 3600
    return int(max(0.0, 500 + 300 * math.cos(2 * math.pi * (hours - 14) / 24)))


def expected(trace: list[tuple[float, int, int]], flags: RecommenderSettings) -> Recommendation:
    """What the recommender's pure core says for one single-container pod fed `trace` directly (the core's
    numbers are pinned by hand-derived unit and replay tests)."""
    core = RecommenderCore(RecommenderConfig.from_settings(flags))
    start = trace[0][0]
    core.cluster.add_or_update_vpa(VpaView("default", "oracle"), Selector.everything())
    pod = PodId("default", "oracle-pod")
    core.cluster.add_or_update_pod(pod, {"app": "oracle"}, "Running", start)
    container = ContainerId(pod, "app")
    core.cluster.add_or_update_container(container, Resources(500, 256 * MI), start)
    for t, cpu, memory in trace:
        core.cluster.add_cpu_sample(container, cpu, t)
        core.cluster.add_memory_sample(container, memory, t)
    return core.recommend("default", "oracle")


def written(obj: dict[str, Any]) -> Recommendation:
    rec = vpa_status_from_dict(obj.get("status")).recommendation
    assert rec is not None
    return rec


async def start_workloads(h: Harness, *workloads: tuple[str, dict[str, Any]]) -> None:
    for name, usage in workloads:
        await create(h, "deployments.apps", deployment(name, usage))
        await create(h, VPAS, vpa(name))


async def test_known_profiles_converge_to_the_expected_targets_and_bounds() -> None:
    async with harness() as h:
        await start_workloads(h, ("steady", STEADY), ("cyclic", CYCLIC))
        start = h.cluster.clock.now()
        first = await h.loop()
        assert first.vpas == 2
        assert first.pods == 2
        reports = [first, *await h.run_for(8 * 3600, STEP_S)]
        assert all(r.metrics_error is None for r in reports)

        # Hand-derived: 0.5 cores falls in CPU bucket 25 = [0.4773, 0.5111) cores; P90 returns the next
        # bucket's start, 511 millicores, plus the 15 % margin: 511 + trunc(76.65) = 587m. 200Mi of memory
        # is below the 250Mi per-pod minimum, which wins.
        bucket_26_millicores = int(0.01 * (1.05**26 - 1) / 0.05 * 1000)
        assert bucket_26_millicores == 511
        steady = h.vpa("steady")
        target = written(steady).containers[0].target
        assert (target.cpu_millicores, target.memory_bytes) == (587, 250 * MI)

        # Bounds and the daily cycle: the same samples fed straight into the pure core.
        times = [start + i * STEP_S for i in range(len(reports))]
        flags = RecommenderSettings()
        assert written(steady) == expected([(t, 500, 200 * MI) for t in times], flags)
        cyclic = h.vpa("cyclic")
        want = expected([(t, cyclic_cpu_millicores(t), 1024 * MI) for t in times], flags)
        assert written(cyclic) == want
        assert want.containers[0].target.cpu_millicores != 587  # the cycle's samples shape a different target

        for obj in (steady, cyclic):
            provided = condition(obj, "RecommendationProvided")
            assert provided is not None
            assert provided["status"] == "True"
            assert condition(obj, "NoPodsMatched") is None
            assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        assert h.metric("vpa_recommender_aggregate_container_states_count") == 2
        assert h.metric("vpa_recommender_vpa_objects_count", update_mode="Off", has_recommendation="true",
                        api="v1", matches_pods="true", unsupported_config="false") == 2
        assert h.metric("vpa_recommender_execution_latency_seconds_count", step="total") == len(reports)
        assert h.metric("vpa_recommender_recommendation_latency_seconds_count") == 2
        # One checkpoint per VPA container, in the v3 format.
        names = sorted(c["metadata"]["name"] for c in h.cluster.store.list(CHECKPOINTS, "default"))
        assert names == ["cyclic-app", "steady-app"]


async def test_an_oom_kill_raises_the_memory_target_above_the_pre_oom_value() -> None:
    leak = {"app": {"cpu": {"type": "constant", "value": "200m"},
                    "memory": {"type": "leak", "start": "100Mi", "per_hour": "100Mi"}}}
    async with harness() as h:
        await create(h, "deployments.apps", deployment("leaky", leak, memory_limit="512Mi"))
        await create(h, VPAS, vpa("leaky"))
        await h.loop()
        reports = await h.run_for(4 * 3600, STEP_S)
        assert sum(r.ooms for r in reports) == 0
        before = vpa_status_from_dict(h.vpa("leaky")["status"]).recommendation
        assert before is not None
        before_memory = before.containers[0].target.memory_bytes
        assert before_memory is not None
        # The leak reaches the 512Mi limit 4.12 h after the container started: one OOM kill.
        reports = await h.run_for(1800, STEP_S)
        assert sum(r.ooms for r in reports) == 1
        after = written(h.vpa("leaky")).containers[0].target.memory_bytes
        assert after is not None
        assert after > before_memory
        # The OOM sample is max(used + 100Mi, used × 1.2) with `used` the ~500Mi peak: over 600Mi.
        assert after > 600 * MI


async def test_missing_and_non_top_most_targets_are_config_unsupported() -> None:
    async with harness() as h:
        await create(h, "deployments.apps", deployment("web", STEADY))
        replicaset = h.cluster.store.list("replicasets.apps", "default")[0]["metadata"]["name"]
        await create(h, VPAS, vpa("missing", target="nowhere"))
        await create(h, VPAS, vpa("child", kind="ReplicaSet", target=replicaset))
        await create(h, VPAS, vpa("web"))
        await h.loop()
        await h.run_for(600, STEP_S)

        missing = h.vpa("missing")
        unsupported = condition(missing, "ConfigUnsupported")
        assert unsupported is not None
        assert unsupported["status"] == "True"
        assert unsupported["message"] == (
            "Cannot read targetRef. Reason: Deployment default/nowhere does not exist")
        no_pods = condition(missing, "NoPodsMatched")
        assert no_pods is not None
        assert no_pods["status"] == "True"
        assert no_pods["message"] == "No pods match this VPA object"
        provided = condition(missing, "RecommendationProvided")
        assert provided is not None
        assert (provided["status"], provided["reason"]) == ("False", "NoPodsMatched")

        child = h.vpa("child")
        unsupported = condition(child, "ConfigUnsupported")
        assert unsupported is not None
        assert unsupported["message"] == (
            f"The target apps/v1.ReplicaSet/{replicaset} has a parent controller but it should point to a "
            "topmost well-known or scalable controller")
        assert "recommendation" not in child["status"] or not written(child).containers

        web = h.vpa("web")
        assert condition(web, "ConfigUnsupported") is None
        assert recommendation(web)["target"]["cpu"] == "587m"
        assert h.metric("vpa_recommender_vpa_objects_count", update_mode="Off", has_recommendation="false",
                        api="v1", matches_pods="false", unsupported_config="true") == 2

        # The missing target appears: the VPA recovers once the negative answer expires.
        await create(h, "deployments.apps", deployment("nowhere", STEADY))
        await h.run_for(600, STEP_S)
        assert condition(h.vpa("missing"), "ConfigUnsupported") is None
        assert condition(h.vpa("missing"), "NoPodsMatched") is None


async def test_a_vpa_naming_another_recommender_is_left_alone() -> None:
    async with harness() as h:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, vpa("theirs", target="web", recommenders=["other"]))
        await create(h, VPAS, vpa("ours", target="web", recommenders=["default"]))
        before = h.vpa("theirs")["metadata"]["resourceVersion"]
        await h.loop()
        await h.run_for(900, STEP_S)
        theirs = h.vpa("theirs")
        assert theirs["metadata"]["resourceVersion"] == before
        assert "status" not in theirs or not theirs["status"]
        assert recommendation(h.vpa("ours"))["target"]["cpu"] == "587m"
        names = [c["metadata"]["name"] for c in h.cluster.store.list(CHECKPOINTS, "default")]
        assert names == ["ours-app"]

    # A recommender called `other` takes it, and leaves VPAs without `recommenders` alone.
    async with harness(settings(recommender_name="other")) as h:
        await create(h, "deployments.apps", deployment("web", STEADY))
        await create(h, VPAS, vpa("theirs", target="web", recommenders=["other"]))
        await create(h, VPAS, vpa("implicit-default", target="web"))
        await h.loop()
        await h.run_for(600, STEP_S)
        assert recommendation(h.vpa("theirs"))["target"]["cpu"] == "587m"
        assert not h.vpa("implicit-default").get("status")


async def test_status_is_patched_only_when_it_changed() -> None:
    async with harness() as h:
        await start_workloads(h, ("steady", STEADY))
        with structlog.testing.capture_logs() as logs:
            first = await h.loop()
        assert first.status_writes == 1
        # The first target is news: one info line naming the VPA and the target.
        changed = [e for e in logs if e["event"] == "vpa_target_changed"]
        assert [(e["log_level"], e["vpa"]) for e in changed] == [("info", "default/steady")]
        assert set(changed[0]["target"]["app"]) == {"cpu", "memory"}
        await h.run_for(3600, STEP_S)
        obj = h.vpa("steady")
        since = condition(obj, "RecommendationProvided")
        assert since is not None
        rv = obj["metadata"]["resourceVersion"]

        # Same virtual time: the CPU sample is a duplicate (the memory one does not beat the window's peak),
        # so nothing changed and nothing is written.
        h.requests.clear()
        report = await h.loop()
        assert report.status_writes == 0
        assert h.vpa("steady")["metadata"]["resourceVersion"] == rv
        # The only PATCHes are the checkpoint writes.
        assert sum(1 for method, _ in h.requests if method == "PATCH") == report.checkpoints_written == 1

        # Time passes: the bounds' confidence grows, the status is written, the transition time is kept.
        await h.cluster.advance(STEP_S)
        with structlog.testing.capture_logs() as logs:
            report = await h.loop()
        assert report.status_writes == 1
        assert condition(h.vpa("steady"), "RecommendationProvided") == since
        # Only the bounds moved: no `vpa_target_changed` line, and the loop summary stays at debug.
        assert report.target_changes == 0
        lines = [(e["event"], e["log_level"]) for e in logs if "target" in e["event"] or "loop" in e["event"]]
        assert lines == [("recommender_loop_done", "debug")]


SKIPPED = "vpa_recommender_status_writes_skipped_total"


async def test_bounds_that_moved_within_the_tolerance_are_not_written() -> None:
    """`--bounds-write-tolerance`: after a day of history a step moves only the bounds, by less than 5%, so
    the status the VPA shows stays as written; the bounds it shows are within 5% of the computed ones."""
    async with harness(settings(bounds_write_tolerance=0.05)) as h:
        await start_workloads(h, ("steady", STEADY))
        await h.loop()
        await h.run_for(86400, 3600)
        rv = h.vpa("steady")["metadata"]["resourceVersion"]
        shown = written(h.vpa("steady"))
        skipped = h.metric(SKIPPED)
        await h.cluster.advance(STEP_S)
        report = await h.loop()
        assert (report.status_writes, report.status_writes_skipped, report.target_changes) == (0, 1, 0)
        assert h.metric(SKIPPED) == skipped + 1
        assert h.vpa("steady")["metadata"]["resourceVersion"] == rv
        now = targets_and_bounds(h.rec.core.recommend("default", "steady"))
        before = targets_and_bounds(shown)
        assert now != before  # the bounds did move
        assert now["app"][:2] == before["app"][:2]  # the target did not
        assert all(abs(a - b) <= 0.05 * b for a, b in zip(now["app"], before["app"], strict=True))


def targets_and_bounds(rec: Recommendation) -> dict[str, tuple[int, ...]]:
    out = {}
    for c in rec.containers:
        values = []
        for r in (c.target, c.lower_bound, c.upper_bound):
            assert r.cpu_millicores is not None
            assert r.memory_bytes is not None
            values += [r.cpu_millicores, r.memory_bytes]
        out[c.container_name] = tuple(values)
    return out


async def test_a_fresh_recommender_restores_recommendations_from_checkpoints() -> None:
    # One-hour memory intervals, so that a few virtual hours hold completed memory peaks (the current
    # interval's peak is deliberately left out of checkpoints, as upstream does).
    flags = settings(memory_aggregation_interval_s=3600.0)
    async with harness(flags) as h:
        await start_workloads(h, ("steady", STEADY), ("cyclic", CYCLIC))
        await h.loop()
        await h.run_for(6 * 3600, 600)
        before = {name: targets_and_bounds(written(h.vpa(name))) for name in ("steady", "cyclic")}

        old = h.rec
        fresh = h.new_recommender()
        assert fresh is not old
        restored = await fresh.restore()
        assert (restored.loaded, restored.skipped) == (2, 0)
        assert not fresh.core.cluster.aggregates  # no samples seen yet: only checkpointed history
        for name in ("steady", "cyclic"):
            after = targets_and_bounds(fresh.core.recommend("default", name))
            for container, values in before[name].items():
                for was, now in zip(values, after[container], strict=True):
                    assert abs(now - was) <= 0.01 * was, (name, container, before[name], after)


async def test_metrics_api_outage_is_counted_and_the_loop_recovers() -> None:
    async with harness() as h:
        await start_workloads(h, ("steady", STEADY))
        await h.loop()
        await h.run_for(1800, STEP_S)
        kept = written(h.vpa("steady"))
        fault = h.cluster.faults.inject(verb="list", resource="pods.metrics.k8s.io", code=503)
        down = await h.run_for(1800, STEP_S)
        assert all(r.metrics_error is not None and r.samples == 0 for r in down)
        assert fault.hits >= len(down)
        errors = h.metric("vpa_recommender_metric_server_responses", is_error="true",
                          client_name="default-metrics-client")
        assert errors == len(down)
        # The last recommendation stays (only its bounds' confidence may move), and nothing crashed.
        assert written(h.vpa("steady")).containers[0].target == kept.containers[0].target
        fault.remove()
        up = await h.run_for(STEP_S, STEP_S)
        assert up[0].metrics_error is None
        assert up[0].samples == 2
        assert h.metric("vpa_recommender_metric_server_responses", is_error="false",
                        client_name="default-metrics-client") == 1 + 6 + 1


async def test_malformed_checkpoints_are_skipped_with_a_warning() -> None:
    from structlog.testing import capture_logs

    async with harness() as h:
        await start_workloads(h, ("steady", STEADY))
        await h.loop()
        await h.run_for(1800, STEP_S)
        good = h.cluster.store.get(CHECKPOINTS, "default", "steady-app")
        assert good is not None
        bad_version = {
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": {"name": "steady-old", "namespace": "default"},
            "spec": {"vpaObjectName": "steady", "containerName": "old"},
            "status": {**good["status"], "version": "v2"},
        }
        bad_bucket = {
            **bad_version,
            "metadata": {"name": "steady-broken", "namespace": "default"},
            "spec": {"vpaObjectName": "steady", "containerName": "broken"},
            "status": {**good["status"], "cpuHistogram": {"bucketWeights": {"9999": 5}, "totalWeight": 1.0,
                                                          "referenceTimestamp": "2026-01-01T00:00:00Z"}},
        }
        await create(h, CHECKPOINTS, bad_version)
        await create(h, CHECKPOINTS, bad_bucket)
        fresh = h.new_recommender()
        with capture_logs() as logs:
            restored = await fresh.restore()
        assert (restored.loaded, restored.skipped) == (1, 2)
        warned = sorted(e["checkpoint"] for e in logs if e["event"] == "recommender_checkpoint_skipped")
        assert warned == ["default/steady-broken", "default/steady-old"]
        assert h.metric("vpa_recommender_skipped_inputs_total", what="malformed_checkpoint") == 2
        report = await h.loop()  # and the loop runs on
        assert report.vpas == 1
        assert recommendation(h.vpa("steady"))["target"]["cpu"] == "587m"


async def test_orphaned_checkpoints_are_collected_after_the_gc_interval() -> None:
    async with harness() as h:
        await start_workloads(h, ("steady", STEADY))
        await create(h, VPAS, vpa("other-recommenders", target="steady", recommenders=["other"]))
        orphan = {
            "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscalerCheckpoint",
            "metadata": {"name": "gone-app", "namespace": "default"},
            "spec": {"vpaObjectName": "gone", "containerName": "app"},
        }
        kept = {**orphan, "metadata": {"name": "other-recommenders-app", "namespace": "default"},
                "spec": {"vpaObjectName": "other-recommenders", "containerName": "app"}}
        await create(h, CHECKPOINTS, orphan)
        await create(h, CHECKPOINTS, kept)
        await h.loop()
        reports = await h.run_for(600, STEP_S)
        assert sum(r.checkpoints_collected for r in reports) == 1
        names = sorted(c["metadata"]["name"] for c in h.cluster.store.list(CHECKPOINTS, "default"))
        assert names == ["other-recommenders-app", "steady-app"]
