"""Recommender scenarios: `Off` gets recommendations and leaves pods alone; checkpoints survive restarts."""

from __future__ import annotations

import signal

from e2e.conftest import (
    Cluster,
    VpaRunFactory,
    annotations_of,
    live_pods,
    pods_when,
    recommendation,
    requests_of,
)
from vpa.model.quantity import Quantity


def _close(a: str, b: str, tolerance: float = 0.01) -> bool:
    x, y = float(Quantity.parse(a).value), float(Quantity.parse(b).value)
    return abs(x - y) <= tolerance * max(abs(x), abs(y))


def test_off_mode_gets_recommendations(sim: Cluster, vpa_run: VpaRunFactory, namespace: str) -> None:
    vpa_run()  # all three components: an updater and a webhook that must both leave these pods alone
    sim.apply_file("vpa-off.yaml", namespace)
    sim.apply_file("hamster.yaml", namespace)
    pods = sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2))
    uids = {p["metadata"]["uid"] for p in pods}

    rec = sim.wait_for("a recommendation", lambda: recommendation(sim, namespace), timeout_s=90)
    assert rec["containerName"] == "hamster"
    target = rec["target"]
    # About half a CPU is used: the target (90th percentile plus the 15% margin) is well above the
    # 100m request; memory is at least the 250Mi per-pod minimum.
    assert Quantity.parse(target["cpu"]).millis >= 300
    assert Quantity.parse(target["memory"]).value >= 250 * 2**20
    assert Quantity.parse(rec["lowerBound"]["cpu"]) <= Quantity.parse(target["cpu"])
    assert Quantity.parse(rec["upperBound"]["cpu"]) >= Quantity.parse(target["cpu"])

    vpa = sim.get_json("vpa", "hamster-vpa", "-n", namespace)
    conditions = {c["type"]: c["status"] for c in vpa["status"]["conditions"]}
    assert conditions["RecommendationProvided"] == "True"

    # `kubectl get vpa` shows the printer columns with the recommendation.
    table = sim.kubectl("get", "vpa", "-n", namespace).stdout
    assert "hamster-vpa" in table
    assert target["cpu"] in table

    # Off mode: many updater loops later the same pods run with their own requests.
    sim.let_time_pass(20 * 60)
    pods = live_pods(sim, namespace)
    assert {p["metadata"]["uid"] for p in pods} == uids
    for pod in pods:
        assert requests_of(pod) == {"cpu": "100m", "memory": "50Mi"}
        assert "vpaInPlaceUpdated" not in annotations_of(pod)
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

    # ...and a pod created now is admitted unchanged too.
    sim.kubectl("delete", "pod", "-n", namespace, pods[0]["metadata"]["name"], "--wait=false")
    fresh = sim.wait_for(
        "a replacement pod",
        lambda: [p for p in live_pods(sim, namespace) if p["metadata"]["uid"] not in uids],
    )[0]
    assert requests_of(fresh) == {"cpu": "100m", "memory": "50Mi"}
    assert "vpaUpdates" not in annotations_of(fresh)

    # A checkpoint carries the history across restarts.
    checkpoints = sim.get_json("verticalpodautoscalercheckpoints", "-n", namespace)["items"]
    assert any(c["spec"]["vpaObjectName"] == "hamster-vpa" for c in checkpoints)


def test_checkpoints_survive_a_recommender_restart(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    sim.require_sim("restarts the recommender process")
    recommender = vpa_run(["recommender"])
    sim.apply_file("vpa-off.yaml", namespace)
    sim.apply_file("hamster.yaml", namespace)
    sim.wait_for("a recommendation", lambda: recommendation(sim, namespace), timeout_s=90)
    # An hour of history (its length and sample count set the bounds' confidence).
    sim.let_time_pass(3600)

    # Then no sample can reach any recommender any more: the workload is scaled to zero. A few loops
    # later the status and the checkpoints hold the same, final history.
    sim.kubectl("scale", "deployment", "hamster", "-n", namespace, "--replicas=0")
    sim.wait_for("no pods", lambda: not live_pods(sim, namespace) or None)
    sim.let_time_pass(5 * 60)

    def checkpointed() -> list[dict[str, object]]:
        items = sim.get_json("verticalpodautoscalercheckpoints", "-n", namespace)["items"]
        return [c for c in items if (c.get("status") or {}).get("totalSamplesCount", 0) > 50]

    sim.wait_for("a checkpoint with samples", checkpointed)
    recommender.kill(signal.SIGTERM)
    before = recommendation(sim, namespace)
    assert before is not None

    # With the status cleared, the restarted recommender can only get the recommendation back from the
    # checkpoints.
    sim.kubectl(
        "patch", "vpa", "hamster-vpa", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", '{"status": {"recommendation": null, "conditions": null}}',
    )  # fmt: skip
    assert recommendation(sim, namespace) is None

    recommender.start()
    recommender.wait_ready()
    after = sim.wait_for("the recommendation restored", lambda: recommendation(sim, namespace), timeout_s=60)
    for key in ("target", "lowerBound", "upperBound"):
        for resource in ("cpu", "memory"):
            assert _close(before[key][resource], after[key][resource]), (key, resource, before, after)
