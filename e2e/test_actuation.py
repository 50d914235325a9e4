"""Actuation scenarios: how each update mode applies the recommendation (and what it never does).

Each test runs `vpa run` with all three components against the module's simulated cluster (or the installed
vpa on a real one) and the two-replica hamster workload, which asks for 100m CPU while using about 500m, so
its requests are below the recommendation's lower bound from the first recommendation on.
"""

from __future__ import annotations

from typing import Any

from e2e.conftest import (
    Cluster,
    VpaRunFactory,
    annotations_of,
    events_for,
    live_pods,
    pods_when,
    recommendation,
    requests_of,
)
from vpa.model.quantity import Quantity

ORIGINAL = {"cpu": "100m", "memory": "50Mi"}


def _same(requests: dict[str, str], target: dict[str, str]) -> bool:
    return all(Quantity.parse(requests.get(r, "0")) == Quantity.parse(v) for r, v in target.items())


class Targets:
    """Every target the VPA has published while a test polls (a pod may carry one a loop older)."""

    def __init__(self, sim: Cluster, namespace: str) -> None:
        self.sim, self.namespace = sim, namespace
        self.seen: list[dict[str, str]] = []

    def current(self) -> dict[str, Any] | None:
        rec = recommendation(self.sim, self.namespace)
        if rec is not None and rec["target"] not in self.seen:
            self.seen.append(rec["target"])
        return rec

    def carried_by(self, requests: dict[str, str]) -> bool:
        return any(_same(requests, target) for target in self.seen)


def _restarts(pod: dict[str, Any]) -> int:
    return sum(
        int(s.get("restartCount", 0)) for s in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _start(sim: Cluster, namespace: str, vpa_manifest: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Workload first (its pods start with their own requests), then the VPA; returns pods, recommendation."""
    sim.apply_file("hamster.yaml", namespace)
    pods = sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2))
    assert all(requests_of(p) == ORIGINAL for p in pods)
    sim.apply_file(vpa_manifest, namespace)
    rec = sim.wait_for("a recommendation", lambda: recommendation(sim, namespace), timeout_s=90)
    return pods, rec


def test_initial_applies_only_at_pod_creation(sim: Cluster, vpa_run: VpaRunFactory, namespace: str) -> None:
    vpa_run()
    pods, _ = _start(sim, namespace, "vpa-initial.yaml")
    uids = {p["metadata"]["uid"] for p in pods}

    # Thirty updater loops later: neither evicted nor resized.
    sim.let_time_pass(30 * 60)
    running = live_pods(sim, namespace)
    assert {p["metadata"]["uid"] for p in running} == uids
    for pod in running:
        assert requests_of(pod) == ORIGINAL
        assert "vpaInPlaceUpdated" not in annotations_of(pod)
        assert _restarts(pod) == 0
    assert events_for(sim, namespace, "EvictedByVPA") == []

    # A pod created now (its ReplicaSet replaces a deleted one) starts with the recommendation.
    victim, survivor = running
    targets = Targets(sim, namespace)
    targets.current()
    sim.kubectl("delete", "pod", "-n", namespace, victim["metadata"]["name"], "--wait=false")

    def replacement() -> list[dict[str, Any]]:
        targets.current()
        return [p for p in live_pods(sim, namespace) if p["metadata"]["uid"] not in uids]

    fresh = sim.wait_for("a replacement pod", replacement)[0]
    assert targets.carried_by(requests_of(fresh)), (requests_of(fresh), targets.seen)
    assert "Pod resources updated by hamster-vpa" in annotations_of(fresh).get("vpaUpdates", "")
    # The pod that kept running still has its own requests.
    still = [p for p in live_pods(sim, namespace) if p["metadata"]["uid"] == survivor["metadata"]["uid"]]
    assert len(still) == 1
    assert requests_of(still[0]) == ORIGINAL


def test_recreate_evicts_and_recreated_pods_carry_the_recommendation(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run()
    pods, _ = _start(sim, namespace, "vpa-recreate.yaml")
    uids = {p["metadata"]["uid"] for p in pods}

    targets = Targets(sim, namespace)

    def replaced() -> list[dict[str, Any]] | None:
        """Both original pods gone, two new ones running with the recommended target."""
        current = pods_when(sim, namespace, 2)
        rec = targets.current()
        if not current or rec is None or {p["metadata"]["uid"] for p in current} & uids:
            return None
        return current if all(targets.carried_by(requests_of(p)) for p in current) else None

    new_pods = sim.wait_for("both pods evicted and recreated with the recommendation", replaced, timeout_s=90)
    for pod in new_pods:
        assert "Pod resources updated by hamster-vpa" in annotations_of(pod).get("vpaUpdates", "")
        assert Quantity.parse(requests_of(pod)["cpu"]).millis > 100
    evictions = sim.wait_for("EvictedByVPA events", lambda: events_for(sim, namespace, "EvictedByVPA"))
    evicted = {e["involvedObject"]["name"] for e in evictions}
    assert {p["metadata"]["name"] for p in pods} <= evicted


def test_in_place_or_recreate_resizes_without_a_restart(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run()
    pods, _ = _start(sim, namespace, "vpa-inplaceorrecreate.yaml")
    uids = {p["metadata"]["uid"] for p in pods}

    targets = Targets(sim, namespace)

    def resized() -> list[dict[str, Any]] | None:
        current = live_pods(sim, namespace)
        rec = targets.current()
        if rec is None or len(current) != 2:
            return None
        done = [p for p in current if annotations_of(p).get("vpaInPlaceUpdated") == "true"]
        if len(done) != 2:
            return None
        for pod in done:
            # Asked for (spec) and actuated by the kubelet (the running container's status), both the
            # recommendation.
            status = (pod.get("status") or {}).get("containerStatuses") or [{}]
            actual = (status[0].get("resources") or {}).get("requests") or {}
            if not (targets.carried_by(requests_of(pod)) and _same(actual, requests_of(pod))):
                return None
        return done

    done = sim.wait_for("both pods resized in place", resized, timeout_s=90)
    assert {p["metadata"]["uid"] for p in done} == uids, "pods were recreated instead of resized"
    for pod in done:
        assert _restarts(pod) == 0
        assert Quantity.parse(requests_of(pod)["cpu"]).millis > 100
    assert events_for(sim, namespace, "EvictedByVPA") == []
    assert events_for(sim, namespace, "InPlaceResizedByVPA")


def test_in_place_never_evicts_even_when_infeasible(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"InPlace": True})
    pods, rec = _start(sim, namespace, "vpa-inplace-infeasible.yaml")
    uids = {p["metadata"]["uid"] for p in pods}
    # minAllowed lifts the target above what any node has.
    assert Quantity.parse(rec["target"]["cpu"]).millis == 100_000

    def infeasible() -> list[str] | None:
        """Both resizes were asked for and found infeasible: the kubelet's `PodResizePending/Infeasible`
        (before Kubernetes 1.36), or the API server's 403 `NodeCapacity` (1.36+, no condition), after which
        the updater skips each pod with an `InPlaceResizeSkipped` event."""
        current = live_pods(sim, namespace)
        marked = [
            p["metadata"]["name"] for p in current
            if any(
                c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]  # fmt: skip
        if len(marked) == 2:
            return marked
        skipped = {e["involvedObject"]["name"] for e in events_for(sim, namespace, "InPlaceResizeSkipped")}
        return sorted(skipped) if len(skipped) == 2 else None

    sim.let_time_pass(5 * 60)
    sim.wait_for("both resizes found infeasible (kubelet or API server)", infeasible, timeout_s=120)
    # Thirty more updater loops: the updater remembers the infeasible attempt and skips (an event says
    # so), and never falls back to eviction.
    sim.let_time_pass(30 * 60)
    skipped = sim.wait_for(
        "InPlaceResizeSkipped events", lambda: events_for(sim, namespace, "InPlaceResizeSkipped")
    )
    assert {e["involvedObject"]["name"] for e in skipped} <= {p["metadata"]["name"] for p in pods}
    current = live_pods(sim, namespace)
    assert {p["metadata"]["uid"] for p in current} == uids
    for pod in current:
        assert _restarts(pod) == 0
        status = (pod.get("status") or {}).get("containerStatuses") or [{}]
        # Still running with what it had: the infeasible resize was never actuated.
        assert _same((status[0].get("resources") or {}).get("requests") or {}, ORIGINAL)
    assert events_for(sim, namespace, "EvictedByVPA") == []
