"""Faults of the API server itself: kube-apiserver crashed and restarted, and etcd compacted, while vpa works.

On the real control plane (`make e2e-cluster`) kube-apiserver is SIGKILLed by its PID and started again with
the same flags, port and certificates, and etcd is compacted at its current revision (`vpa sim
--fault-control`); on the simulator the same calls answer every resource request 503 and cut every watch
until the "restart", and compact the watch history. Each scenario then checks what a platform team relies on
after such an outage: every VPA keeps or gets its recommendation and the recommender's loops go on, the
webhook admits new pods with the recommendation, the caches equal the server again (an object created after
the fault is seen, one deleted is forgotten), every in-place resize is done exactly once, and no Lease is
held by two replicas.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from e2e.conftest import (
    REAL_LOOP_S,
    Cluster,
    VpaProcess,
    VpaRunFactory,
    annotations_of,
    events_for,
    live_pods,
    pods_when,
    recommendation,
    requests_of,
)
from e2e.test_leader_election import ELECTION_FLAGS, LEASE, LEASE_DURATION_S, RETRY_PERIOD_S, _holder
from vpa.model.quantity import Quantity

ORIGINAL = {"cpu": "100m", "memory": "50Mi"}
USAGE = {"cpu": {"type": "constant", "value": "500m"}, "memory": {"type": "constant", "value": "200Mi"}}
OUTAGE_LOOPS = 3  # the API server stays down this many vpa loops


# ------------------------------------------------------------------------------------------ helpers


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {"sim.vpa.dev/usage": json.dumps({name: USAGE})},
                },
                "spec": {
                    "containers": [
                        {
                            "name": name,
                            "image": "registry.k8s.io/ubuntu-slim:0.14",
                            "command": ["/bin/sh"],
                            "args": ["-c", "while true; do timeout 0.5s yes >/dev/null; sleep 0.5s; done"],
                            "resources": {"requests": dict(ORIGINAL)},
                        }
                    ]
                },
            },
        },
    }


def _vpa(name: str, target: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "updatePolicy": {"updateMode": mode},
        },
    }


def _apply(sim: Cluster, namespace: str, docs: Iterable[dict[str, Any]]) -> None:
    sim.apply("\n---\n".join(json.dumps(doc) for doc in docs), namespace)


def _recommended(sim: Cluster, namespace: str) -> dict[str, dict[str, str]]:
    """VPA name → first container target, for every VPA in the namespace that has a recommendation."""
    found = {}
    for vpa in sim.get_json("vpa", "-n", namespace)["items"]:
        containers = ((vpa.get("status") or {}).get("recommendation") or {}).get("containerRecommendations")
        if containers:
            found[vpa["metadata"]["name"]] = containers[0]["target"]
    return found


def _metric(process: VpaProcess, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when there is none)."""
    total = 0.0
    for family in text_string_to_metric_families(process.metrics()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def _loops(process: VpaProcess, component: str) -> float:
    return _metric(process, f"vpa_{component}_execution_latency_seconds_count", step="total")


def _same(requests: dict[str, str], target: dict[str, str]) -> bool:
    return all(Quantity.parse(requests.get(r, "0")) == Quantity.parse(v) for r, v in target.items())


def _restarts(pod: dict[str, Any]) -> int:
    return sum(
        int(s.get("restartCount", 0)) for s in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _actual(pod: dict[str, Any]) -> dict[str, str]:
    """What the kubelet reports the running container has (`status.containerStatuses[0].resources`)."""
    status = (pod.get("status") or {}).get("containerStatuses") or [{}]
    actual: dict[str, str] = (status[0].get("resources") or {}).get("requests") or {}
    return actual


def _resize_events(sim: Cluster, namespace: str) -> dict[str, int]:
    """Pod name → how many `InPlaceResizedByVPA` events it got (aggregated events counted by `count`)."""
    counts: dict[str, int] = {}
    for event in events_for(sim, namespace, "InPlaceResizedByVPA"):
        pod = event["involvedObject"]["name"]
        counts[pod] = counts.get(pod, 0) + int(event.get("count") or 1)
    return counts


class Targets:
    """Every target a VPA has published while the test polls (a pod may carry one a loop older)."""

    def __init__(self, sim: Cluster, namespace: str, vpa: str) -> None:
        self.sim, self.namespace, self.vpa = sim, namespace, vpa
        self.seen: list[dict[str, str]] = []

    def poll(self) -> dict[str, Any] | None:
        rec = recommendation(self.sim, self.namespace, self.vpa)
        if rec is not None and rec["target"] not in self.seen:
            self.seen.append(rec["target"])
        return rec

    def carried_by(self, requests: dict[str, str]) -> bool:
        return any(_same(requests, target) for target in self.seen)


def _outage(sim: Cluster) -> None:
    """kube-apiserver down for `OUTAGE_LOOPS` vpa loops, then up again (ready)."""
    sim.kill_apiserver()
    try:
        sim.let_time_pass(OUTAGE_LOOPS * 60)
    finally:
        sim.start_apiserver()


def _resized_in_place(
    sim: Cluster, namespace: str, app: str, targets: Targets, count: int
) -> list[dict[str, Any]]:
    """The workload's `count` pods once each was resized in place to a published target and actuated (the
    `vpaInPlaceUpdated` annotation is a second call after the resize: a crash in between may lose it)."""

    seen: list[Any] = []

    def done() -> list[dict[str, Any]] | None:
        targets.poll()
        pods = live_pods(sim, namespace, f"app={app}")
        seen[:] = [_summary(p) for p in pods]
        if len(pods) != count:
            return None
        for pod in pods:
            if not (targets.carried_by(requests_of(pod)) and _same(_actual(pod), requests_of(pod))):
                return None
        return pods

    try:
        return sim.wait_for(f"{count} pods of {app} resized in place", done, timeout_s=120)
    except AssertionError as err:
        raise AssertionError(
            f"{err}\ntargets published: {targets.seen}\npods: {json.dumps(seen, indent=1)}"
        ) from None


def _summary(pod: dict[str, Any]) -> dict[str, Any]:
    """What a failed wait shows of a pod: spec and actual requests, resize conditions, generation."""
    status = pod.get("status") or {}
    return {
        "name": pod["metadata"]["name"],
        "generation": pod["metadata"].get("generation"),
        "observedGeneration": status.get("observedGeneration"),
        "spec": requests_of(pod),
        "actual": _actual(pod),
        "allocated": ((status.get("containerStatuses") or [{}])[0].get("allocatedResources")),
        "conditions": [c for c in status.get("conditions") or [] if "Resize" in c.get("type", "")],
        "inPlaceUpdated": annotations_of(pod).get("vpaInPlaceUpdated"),
        "restarts": _restarts(pod),
    }


# ------------------------------------------------------------------------------------------ scenarios

N_VPAS = 20


def test_fault_apiserver_killed_mid_recommender_loop(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa = vpa_run()
    names = [f"w{i}" for i in range(N_VPAS)]
    _apply(sim, namespace, [d for n in names for d in (_deployment(n, 1), _vpa(f"{n}-vpa", n, "Initial"))])
    sim.wait_for(
        f"{N_VPAS} running pods",
        lambda: (
            len([p for p in live_pods(sim, namespace, "app") if p["status"].get("phase") == "Running"])
            == N_VPAS
        ),
        timeout_s=120,
    )
    # The first recommendation is written: the recommender is in the middle of writing the others (or between
    # two loops that write them). The API server goes away now.
    before = sim.wait_for("a first recommendation", lambda: _recommended(sim, namespace), timeout_s=90)
    loops_before = _loops(vpa, "recommender")
    restarts_before = _metric(vpa, "vpa_watch_cache_events_total", what="restarts")
    _outage(sim)
    loops_at_restart = _loops(vpa, "recommender")

    def all_recommended() -> dict[str, dict[str, str]] | None:
        found = _recommended(sim, namespace)
        return found if len(found) == N_VPAS else None

    recommended = sim.wait_for(f"all {N_VPAS} VPAs recommended", all_recommended, timeout_s=120)
    assert set(before) <= set(recommended), "a recommendation written before the outage was lost"
    sim.wait_for(
        "two more recommender loops after the restart",
        lambda: _loops(vpa, "recommender") >= loops_at_restart + 2,
        timeout_s=60,
    )
    assert _loops(vpa, "recommender") > loops_before
    # The outage was seen (watches broken and reopened), and survived: the process is still the same one.
    assert _metric(vpa, "vpa_watch_cache_events_total", what="restarts") > restarts_before
    assert vpa.alive()

    # The caches equal the server again: a VPA created now is recommended, one deleted now is forgotten.
    _apply(sim, namespace, [_deployment("late", 1), _vpa("late-vpa", "late", "Initial")])
    sim.kubectl("delete", "vpa", "w0-vpa", "-n", namespace)
    sim.wait_for(
        "the VPA created after the restart recommended", lambda: "late-vpa" in _recommended(sim, namespace)
    )
    sim.wait_for(
        f"the recommender tracking exactly the {N_VPAS} VPAs the server has",
        lambda: _metric(vpa, "vpa_recommender_vpa_objects_count") == N_VPAS,
        timeout_s=60,
    )

    # The webhook admits a new pod with the recommendation.
    targets = Targets(sim, namespace, "w1-vpa")
    targets.poll()
    old = live_pods(sim, namespace, "app=w1")[0]
    sim.kubectl("delete", "pod", "-n", namespace, old["metadata"]["name"], "--wait=false")

    def admitted() -> dict[str, Any] | None:
        targets.poll()
        pods = [
            p for p in live_pods(sim, namespace, "app=w1") if p["metadata"]["uid"] != old["metadata"]["uid"]
        ]
        return pods[0] if pods else None

    fresh = sim.wait_for("the replacement pod", admitted, timeout_s=60)
    assert targets.carried_by(requests_of(fresh)), (requests_of(fresh), targets.seen)
    assert annotations_of(fresh).get("vpaUpdates"), annotations_of(fresh)


REPLICAS = 6


def test_fault_apiserver_killed_during_in_place_resizes(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # One resize a second (the eviction rate limit paces in-place resizes too): the updater is still sending
    # them when the API server dies after the first.
    vpa = vpa_run(extra=["--eviction-rate-limit=1", "--eviction-rate-burst=1"])
    _apply(sim, namespace, [_deployment("hamster", REPLICAS)])
    pods = sim.wait_for(
        f"{REPLICAS} running pods", lambda: pods_when(sim, namespace, REPLICAS), timeout_s=120
    )
    uids = {p["metadata"]["uid"] for p in pods}
    _apply(sim, namespace, [_vpa("hamster-vpa", "hamster", "InPlaceOrRecreate")])
    targets = Targets(sim, namespace, "hamster-vpa")
    sim.wait_for("a recommendation", targets.poll, timeout_s=90)

    def first_resize() -> list[dict[str, Any]] | None:
        current = live_pods(sim, namespace)
        started = [p for p in current if requests_of(p) != ORIGINAL]
        return current if started else None

    # The first resize is on the server: the updater is sending the others, the kubelets actuating them.
    at_kill = sim.wait_for("the first resize", first_resize, timeout_s=120)
    _outage(sim)
    sent_before = sum(requests_of(p) != ORIGINAL for p in at_kill)
    print(f"resizes on the server when kube-apiserver was killed: {sent_before} of {REPLICAS}")

    done = _resized_in_place(sim, namespace, "hamster", targets, REPLICAS)
    assert {p["metadata"]["uid"] for p in done} == uids, "pods were recreated instead of resized"
    # Several loops later nothing was resized again.
    sim.let_time_pass(5 * 60)
    pods = live_pods(sim, namespace)
    assert {p["metadata"]["uid"] for p in pods} == uids
    events = _resize_events(sim, namespace)
    for pod in pods:
        name = pod["metadata"]["name"]
        assert _restarts(pod) == 0, name
        assert _same(_actual(pod), requests_of(pod)), (name, _actual(pod), requests_of(pod))
        # One spec change per pod (metadata.generation starts at 1 and counts them), one event at most
        # (an event is best effort: one sent as the server died may be lost, never doubled).
        generation = pod["metadata"].get("generation")
        if generation is not None:
            assert int(generation) == 2, (name, generation)
        assert events.get(name, 0) <= 1, (name, events)
    assert _metric(vpa, "vpa_updater_in_place_updated_pods_total") <= REPLICAS
    assert events_for(sim, namespace, "EvictedByVPA") == []


def test_fault_etcd_compacted_mid_loop_in_place_caches_relist(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa = vpa_run()
    _apply(sim, namespace, [_deployment("hamster", 2)])
    sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2), timeout_s=120)
    _apply(sim, namespace, [_vpa("hamster-vpa", "hamster", "InPlaceOrRecreate")])
    targets = Targets(sim, namespace, "hamster-vpa")
    sim.wait_for("a recommendation", targets.poll, timeout_s=90)
    kept, gone = _resized_in_place(sim, namespace, "hamster", targets, 2)
    generation = kept["metadata"].get("generation")
    gone_before = _metric(vpa, "vpa_watch_cache_events_total", what="gone")

    # History compacted under the running loops; then objects change, and the API server restarts, so every
    # watch resumes from a resourceVersion that is no longer there.
    sim.compact_etcd()
    _apply(sim, namespace, [_deployment("late", 1), _vpa("late-vpa", "late", "Initial")])
    sim.kubectl("delete", "pod", "-n", namespace, gone["metadata"]["name"], "--wait=false")
    sim.kill_apiserver()
    try:
        sim.compact_etcd()
        sim.let_time_pass(OUTAGE_LOOPS * 60)
    finally:
        sim.start_apiserver()
    gones = _metric(vpa, "vpa_watch_cache_events_total", what="gone") - gone_before
    print(f"410 Gone answers seen by vpa's watch caches: {gones:g}")

    # A VPA created after the compaction is recommended.
    sim.wait_for(
        "the VPA created after the compaction recommended",
        lambda: "late-vpa" in _recommended(sim, namespace),
        timeout_s=90,
    )

    # The deleted pod is forgotten: its replacement was admitted with the recommendation, and the updater
    # counts exactly the two live pods under its in-place VPA.
    def replaced() -> dict[str, Any] | None:
        targets.poll()
        pods = live_pods(sim, namespace, "app=hamster")
        fresh = [
            p for p in pods if p["metadata"]["uid"] not in (kept["metadata"]["uid"], gone["metadata"]["uid"])
        ]
        return fresh[0] if len(pods) == 2 and fresh else None

    fresh = sim.wait_for("the deleted pod's replacement", replaced, timeout_s=60)
    assert targets.carried_by(requests_of(fresh)), (requests_of(fresh), targets.seen)
    sim.wait_for(
        "the updater controlling exactly the two live pods",
        lambda: _metric(vpa, "vpa_updater_controlled_pods_total") == 2,
        timeout_s=60,
    )

    # No resize repeated: a few loops later the surviving pod had its one spec change, the replacement none.
    sim.let_time_pass(5 * 60)
    pods = {p["metadata"]["uid"]: p for p in live_pods(sim, namespace, "app=hamster")}
    assert set(pods) == {kept["metadata"]["uid"], fresh["metadata"]["uid"]}
    survivor, replacement = pods[kept["metadata"]["uid"]], pods[fresh["metadata"]["uid"]]
    assert survivor["metadata"].get("generation") == generation
    assert replacement["metadata"].get("generation") in (None, 1), replacement["metadata"]
    assert "vpaInPlaceUpdated" not in annotations_of(replacement)
    events = _resize_events(sim, namespace)
    assert events.get(survivor["metadata"]["name"], 0) <= 1, events
    assert replacement["metadata"]["name"] not in events, events
    assert all(_restarts(p) == 0 for p in pods.values())


def test_fault_apiserver_restart_leaves_one_lease_holder(sim: Cluster, vpa_run: VpaRunFactory) -> None:
    # The admission controller renews its status Lease, so the updaters' loops run rather than wait for it.
    vpa_run(["admission-controller"], clock="real")
    # Real time on the simulator too (leases are about real time), so loops of seconds there as well.
    extra = [*ELECTION_FLAGS, f"--updater-interval={REAL_LOOP_S}s"]
    replicas = [vpa_run(["updater"], leader_elect=True, clock="real", extra=extra) for _ in range(2)]
    sim.wait_for("a holder of Lease vpa-updater", lambda: _holder(sim))
    sim.wait_for("one replica leading", lambda: [r for r in replicas if r.leading(LEASE)] or None)

    def leaders() -> list[VpaProcess]:
        found = [r for r in replicas if r.leading(LEASE)]
        assert len(found) <= 1, "two updater replicas report holding Lease vpa-updater at once"
        return found

    # Down for longer than the lease: the leader cannot renew, steps down, and nobody leads until it is back.
    sim.kill_apiserver()
    try:
        deadline = time.monotonic() + LEASE_DURATION_S + 2
        while time.monotonic() < deadline:
            leaders()
            time.sleep(RETRY_PERIOD_S)
        assert leaders() == [], "a replica still acts as leader with no API server to renew its Lease"
    finally:
        sim.start_apiserver()

    leader = sim.wait_for(
        "one replica leading again", lambda: leaders() or None, timeout_s=LEASE_DURATION_S * 4
    )[0]
    follower = next(r for r in replicas if r is not leader)
    holder = _holder(sim)
    assert holder
    # For several renew periods: one leader, one holder, and only the leader's updater loops run.
    loops = {id(r): _loops(r, "updater") for r in replicas}
    deadline = time.monotonic() + 6 * RETRY_PERIOD_S + 3
    while time.monotonic() < deadline:
        assert leaders() == [leader]
        assert _holder(sim) == holder
        time.sleep(RETRY_PERIOD_S)
    sim.wait_for(
        "an updater loop on the leader", lambda: _loops(leader, "updater") > loops[id(leader)], timeout_s=30
    )
    assert _loops(follower, "updater") == loops[id(follower)], "the follower's updater ran a loop"
