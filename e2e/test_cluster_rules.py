"""Scenarios where the cluster itself has a say: disruption budgets, the scheduler, and API validation.

On the real control plane (`make e2e-cluster`) these are judged by kube-controller-manager's disruption
controller, kube-scheduler and kube-apiserver's own validation; against `vpa sim` by the simulator's
versions of them, which must agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import (
    MANIFESTS,
    REPO,
    Cluster,
    VpaRunFactory,
    events_for,
    live_pods,
    pods_when,
    recommendation,
)
from vpa.model.quantity import Quantity

EXAMPLES = sorted((REPO / "docs" / "examples").glob("*.yaml"))

PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: hamster
spec:
  {budget}
  selector:
    matchLabels:
      app: hamster
"""

# Recreate with a recommendation no node can hold: minAllowed lifts the CPU target to 100 cores.
RECREATE_TOO_BIG = """
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: hamster-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: hamster
  updatePolicy:
    updateMode: Recreate
  resourcePolicy:
    containerPolicies:
    - containerName: hamster
      minAllowed:
        cpu: "100"
"""


def _pdb_status(cluster: Cluster, namespace: str) -> dict[str, Any] | None:
    pdb = cluster.get_json("pdb", "hamster", "-n", namespace)
    status: dict[str, Any] = pdb.get("status") or {}
    return status if status.get("observedGeneration") == pdb["metadata"]["generation"] else None


def test_eviction_honours_a_pod_disruption_budget(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    sim.apply_file("hamster.yaml", namespace)
    pods = sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2))
    uids = {p["metadata"]["uid"] for p in pods}
    # No disruption allowed: the disruption controller computes disruptionsAllowed 0.
    sim.apply(PDB.format(budget="maxUnavailable: 0"), namespace)
    status = sim.wait_for("the budget computed", lambda: _pdb_status(sim, namespace))
    assert status["disruptionsAllowed"] == 0, status

    vpa_run()
    sim.apply_file("vpa-recreate.yaml", namespace)
    sim.wait_for("a recommendation", lambda: recommendation(sim, namespace), timeout_s=90)
    # Many updater loops later: the pods are below the recommendation, but the budget allows no eviction.
    sim.let_time_pass(20 * 60)
    assert {p["metadata"]["uid"] for p in live_pods(sim, namespace)} == uids
    assert events_for(sim, namespace, "EvictedByVPA") == []

    # One disruption at a time: now the updater replaces both pods.
    sim.apply(PDB.format(budget="maxUnavailable: 1"), namespace)
    sim.wait_for(
        "both pods evicted and recreated",
        lambda: (
            (cur := pods_when(sim, namespace, 2)) is not None
            and not ({p["metadata"]["uid"] for p in cur} & uids)
        ),
        timeout_s=120,
    )
    assert len(sim.wait_for("EvictedByVPA events", lambda: events_for(sim, namespace, "EvictedByVPA"))) >= 2


def test_a_recommendation_larger_than_any_node_leaves_the_recreated_pod_pending(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # Both backends run the suite's two nodes of 4 CPUs (`vpa sim --nodes 2`, kubelet stand-ins on the real
    # control plane), so "larger than any node" and "the largest node's size" mean the same on both.
    vpa_run()
    sim.apply_file("hamster.yaml", namespace)
    sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2))
    sim.apply(RECREATE_TOO_BIG, namespace)

    def unschedulable() -> list[dict[str, Any]]:
        out = []
        for pod in live_pods(sim, namespace):
            conds = (pod.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                for c in conds
            ):
                out.append(pod)
        return out

    pending = sim.wait_for("a recreated pod the scheduler cannot place", unschedulable, timeout_s=120)
    pod = pending[0]
    assert pod["status"]["phase"] == "Pending"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100"
    message = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient cpu" in message, message


def test_capped_to_the_largest_node_the_recreated_pods_run(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(extra=["--cap-to-largest-node=true"])
    # The workload uses ten cores: its recommendation (about 11.5 cores) fits no node.
    hungry = (MANIFESTS / "hamster.yaml").read_text().replace('"value": "500m"', '"value": "10"')
    sim.apply(hungry, namespace)
    pods = sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply_file("vpa-recreate.yaml", namespace)

    def capped() -> dict[str, Any] | None:
        conds = (sim.get_json("vpa", "hamster-vpa", "-n", namespace).get("status") or {}).get(
            "conditions"
        ) or []
        return next((c for c in conds if c["type"] == "CappedToNode" and c["status"] == "True"), None)

    condition = sim.wait_for("the CappedToNode condition", capped, timeout_s=120)
    assert "cpu" in condition["message"], condition
    rec = recommendation(sim, namespace)
    assert rec is not None
    assert rec["target"]["cpu"] == "4", rec
    assert Quantity.parse(rec["uncappedTarget"]["cpu"]).millis > 4000, rec

    def replaced_and_running() -> list[dict[str, Any]] | None:
        current = pods_when(sim, namespace, 2)
        if not current or {p["metadata"]["uid"] for p in current} & uids:
            return None
        return current

    fresh = sim.wait_for(
        "both pods recreated with the capped target, running", replaced_and_running, timeout_s=180
    )
    for pod in fresh:
        assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "4"
    assert events_for(sim, namespace, "CappedToLargestNode")


def test_capped_to_the_largest_node_a_min_allowed_no_node_holds_does_not_strand_pods(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    """minAllowed of 100 cores: the recommender caps it to a node, and neither the webhook nor the updater
    lifts it back (the webhook used to apply minAllowed again and leave every recreated pod Pending)."""
    vpa_run(extra=["--cap-to-largest-node=true"])
    sim.apply_file("hamster.yaml", namespace)
    pods = sim.wait_for("two running pods", lambda: pods_when(sim, namespace, 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply(RECREATE_TOO_BIG, namespace)

    def replaced_and_running() -> list[dict[str, Any]] | None:
        current = pods_when(sim, namespace, 2)
        if not current or {p["metadata"]["uid"] for p in current} & uids:
            return None
        return current

    fresh = sim.wait_for("both pods recreated at node size, running", replaced_and_running, timeout_s=180)
    for pod in fresh:
        assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "4"
    # Settled: no further evictions for not reaching minAllowed.
    evicted = len(events_for(sim, namespace, "EvictedByVPA"))
    sim.let_time_pass(10 * 60)
    assert {p["metadata"]["uid"] for p in live_pods(sim, namespace)} == {p["metadata"]["uid"] for p in fresh}
    assert len(events_for(sim, namespace, "EvictedByVPA")) == evicted


def test_the_vpa_crds_and_every_documented_example_are_accepted(sim: Cluster, namespace: str) -> None:
    # The CRDs the cluster was started with are the project's own; applying them again changes nothing.
    crds = REPO / "vpa" / "crds" / "vpa-v1.yaml"
    result = sim.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    assert "verticalpodautoscalers.autoscaling.k8s.io" in result.stdout, result.stdout
    established = sim.get_json("crd", "verticalpodautoscalers.autoscaling.k8s.io")["status"]["conditions"]
    assert any(c["type"] == "Established" and c["status"] == "True" for c in established)
    assert EXAMPLES, "docs/examples holds no manifests"
    for path in EXAMPLES:
        result = sim.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(path), check=False)
        assert result.returncode == 0, f"{Path(path).name}: {result.stderr}"


@pytest.mark.parametrize("manifest", [p.name for p in EXAMPLES])
def test_examples_apply_for_real(sim: Cluster, namespace: str, manifest: str) -> None:
    """Created, not only dry-run: defaulting and the stored object agree with what the example says."""
    path = REPO / "docs" / "examples" / manifest
    sim.kubectl("apply", "-n", namespace, "-f", str(path))
    names = sim.kubectl("get", "-n", namespace, "-f", str(path), "-o", "name").stdout.split()
    assert names, manifest


# Containers that fit any node, a pod-level request that fits none: the scheduler fits the pod-level value.
POD_LEVEL_TOO_BIG = """
apiVersion: v1
kind: Pod
metadata:
  name: pod-level-too-big
spec:
  resources:
    requests:
      cpu: "100"
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      requests:
        cpu: 100m
"""


def test_the_scheduler_fits_a_pods_pod_level_request(sim: Cluster, namespace: str) -> None:
    sim.apply(POD_LEVEL_TOO_BIG, namespace)

    def scheduled_condition() -> dict[str, Any] | None:
        pod = sim.get_json("pod", "pod-level-too-big", "-n", namespace)
        conds = (pod.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c.get("type") == "PodScheduled"), None)

    cond = sim.wait_for("the scheduler's verdict", scheduled_condition, timeout_s=60)
    assert cond["status"] == "False", cond
    assert cond["reason"] == "Unschedulable", cond
    assert "Insufficient cpu" in cond["message"], cond
