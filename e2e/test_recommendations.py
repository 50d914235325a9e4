"""Scenario: a Deployment with a VPA in `Off` mode gets recommendations; its pods are left alone."""

from __future__ import annotations

import subprocess
from typing import Any

from e2e.conftest import Cluster
from vpa.model.quantity import Quantity

MANIFEST = """
apiVersion: v1
kind: Namespace
metadata: {name: e2e-off}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hamster, namespace: e2e-off}
spec:
  replicas: 2
  selector: {matchLabels: {app: hamster}}
  template:
    metadata:
      labels: {app: hamster}
      annotations:
        sim.vpa.dev/usage: '{"hamster": {"cpu": {"type": "constant", "value": "500m"},
                                          "memory": {"type": "constant", "value": "200Mi"}}}'
    spec:
      containers:
      - name: hamster
        image: registry.k8s.io/ubuntu-slim:0.14
        resources:
          requests: {cpu: 100m, memory: 50Mi}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: hamster-vpa, namespace: e2e-off}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: hamster}
  updatePolicy: {updateMode: "Off"}
"""


def _recommendation(cluster: Cluster) -> dict[str, Any] | None:
    vpa = cluster.get_json("vpa", "hamster-vpa", "-n", "e2e-off")
    containers = (vpa.get("status") or {}).get("recommendation", {}).get("containerRecommendations") or []
    return containers[0] if containers else None


def test_off_mode_gets_recommendations(sim: Cluster, vpa_run: subprocess.Popen[bytes]) -> None:
    sim.apply(MANIFEST)
    rec = sim.wait_for("a recommendation for hamster-vpa", lambda: _recommendation(sim), timeout_s=90)
    assert rec["containerName"] == "hamster"
    target = rec["target"]
    # Usage is a constant 500m: the target is the 90th percentile's bucket plus the 15% safety margin,
    # so well above the 100m request and above the usage itself.
    assert Quantity.parse(target["cpu"]).millis >= 500
    # Memory: 200Mi of usage, and the per-pod minimum of 250Mi.
    assert Quantity.parse(target["memory"]).value >= 250 * 2**20
    assert Quantity.parse(rec["lowerBound"]["cpu"]) <= Quantity.parse(target["cpu"])
    assert Quantity.parse(rec["upperBound"]["cpu"]) >= Quantity.parse(target["cpu"])

    vpa = sim.get_json("vpa", "hamster-vpa", "-n", "e2e-off")
    conditions = {c["type"]: c["status"] for c in vpa["status"]["conditions"]}
    assert conditions["RecommendationProvided"] == "True"

    # `kubectl get vpa` shows the printer columns with the recommendation.
    table = sim.kubectl("get", "vpa", "-n", "e2e-off").stdout
    assert "hamster-vpa" in table
    assert target["cpu"] in table

    # Off mode: the running pods keep their requests.
    pods = sim.get_json("pods", "-n", "e2e-off", "-l", "app=hamster")["items"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"

    # A checkpoint carries the history across restarts.
    checkpoints = sim.get_json("verticalpodautoscalercheckpoints", "-n", "e2e-off")["items"]
    assert any(c["spec"]["vpaObjectName"] == "hamster-vpa" for c in checkpoints)
