"""Beyond upstream, round 3 (issue 46), against the cluster: memory decreases that respect runtimes,
AEP-9936 `initialDelaySeconds`, AEP-9970 per-container target percentiles, AEP-9726 capacity-aware in-place
resizes, and the resize guard that undoes a resize that hurt.

Each scenario runs against `vpa sim` and, with `E2E_CONTROL_PLANE=kubernetes`, against kube-apiserver 1.35
with the simulator's kubelets. Usage comes from the `sim.vpa.dev/usage` annotation, which those kubelets
honour on both backends; the scenarios that need hours of virtual time (`initialDelaySeconds`, a daily
cycle for percentiles, the guard's spike and backoff) skip where time is real and say why.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from e2e.conftest import Cluster, VpaRunFactory, annotations_of, events_for, live_pods
from vpa.model.quantity import Quantity

USAGE = "sim.vpa.dev/usage"
IMAGE = "registry.k8s.io/pause:3.10"
MI = 2**20


def _constant(cpu: str, memory: str) -> dict[str, Any]:
    return {"cpu": {"type": "constant", "value": cpu}, "memory": {"type": "constant", "value": memory}}


def _deployment(name: str, containers: list[dict[str, Any]], usage: dict[str, Any], replicas: int = 2) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}, "annotations": {USAGE: json.dumps(usage)}},
                         "spec": {"containers": containers}},
        },
    })  # fmt: skip


def _container(name: str, cpu: str, memory: str, memory_limit: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if memory_limit is not None:
        resources["limits"] = {"memory": memory_limit}
    return {"name": name, "image": IMAGE, "resources": resources}


def _vpa(
    name: str,
    mode: str,
    *,
    annotations: dict[str, str] | None = None,
    update_policy: dict[str, Any] | None = None,
    policies: list[dict[str, Any]] | None = None,
) -> str:
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "updatePolicy": {"updateMode": mode, **(update_policy or {})},
    }
    if policies is not None:
        spec["resourcePolicy"] = {"containerPolicies": policies}
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return json.dumps({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler", "metadata": metadata,
        "spec": spec,
    })  # fmt: skip


def _running(sim: Cluster, namespace: str, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = live_pods(sim, namespace, selector)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) == count == len(running) else None


def _resources(pod: dict[str, Any], container: str) -> dict[str, Any]:
    found = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    resources: dict[str, Any] = found.get("resources") or {}
    return resources


def _bytes(value: str | None) -> int:
    return int(Quantity.parse(value or "0").value)


def _millis(value: str | None) -> int:
    return Quantity.parse(value or "0").millis


def _targets(sim: Cluster, namespace: str, vpa: str) -> dict[str, dict[str, str]]:
    status = sim.get_json("vpa", vpa, "-n", namespace).get("status") or {}
    recs = (status.get("recommendation") or {}).get("containerRecommendations") or []
    return {r["containerName"]: r["target"] for r in recs}


def _condition(sim: Cluster, namespace: str, vpa: str, kind: str) -> dict[str, Any] | None:
    conditions = (sim.get_json("vpa", vpa, "-n", namespace).get("status") or {}).get("conditions") or []
    found: dict[str, Any] | None = next((c for c in conditions if c.get("type") == kind), None)
    return found


def _needs_virtual_time(sim: Cluster, why: str) -> None:
    """Skip where time is real (the real control plane, an existing cluster): the scenario needs hours."""
    if not (sim.is_sim and sim.virtual_time):
        pytest.skip(f"needs the simulator's virtual time: {why}")


def _true(sim: Cluster, namespace: str, vpa: str, kind: str) -> dict[str, Any] | None:
    found = _condition(sim, namespace, vpa, kind)
    return found if found is not None and found.get("status") == "True" else None


# --- memory decreases that respect runtimes (vpa.dev/memory-limit-decrease) -------------------------------


def test_a_never_containers_memory_limit_is_never_lowered_in_place(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"InPlace": True})
    containers = [_container("app", "100m", "512Mi", "1Gi"), _container("sidecar", "100m", "512Mi", "1Gi")]
    usage = {"app": _constant("100m", "60Mi"), "sidecar": _constant("100m", "60Mi")}
    sim.apply(_deployment("jvm", containers, usage), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=jvm", 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply(
        _vpa("jvm", "InPlace", annotations={"vpa.dev/memory-limit-decrease": "app=Never,sidecar=Always"}),
        namespace,
    )

    # Both containers' memory requests come down in place (same pods); only the sidecar's limit does.
    def lowered() -> list[dict[str, Any]] | None:
        current = [p for p in live_pods(sim, namespace, "app=jvm") if p["metadata"]["uid"] in uids]
        done = [
            p for p in current
            if _bytes(_resources(p, "app")["requests"]["memory"]) < 512 * MI
            and _bytes(_resources(p, "sidecar")["limits"]["memory"]) < 1024 * MI
        ]  # fmt: skip
        return done or None

    for pod in sim.wait_for("memory lowered in place", lowered, timeout_s=90):
        assert _resources(pod, "app")["limits"]["memory"] == "1Gi", _resources(pod, "app")
    sim.let_time_pass(3600)
    for pod in live_pods(sim, namespace, "app=jvm"):
        if pod["metadata"]["uid"] in uids:
            assert _resources(pod, "app")["limits"]["memory"] == "1Gi", _resources(pod, "app")


def test_a_bad_memory_limit_decrease_value_is_rejected_naming_the_annotation(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run()
    result = sim.kubectl(
        "apply", "-n", namespace, "-f", "-",
        stdin=_vpa("bad", "Recreate", annotations={"vpa.dev/memory-limit-decrease": "app=Sometimes"}),
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "metadata.annotations[vpa.dev/memory-limit-decrease]" in result.stderr, result.stderr
    assert "unknown value 'Sometimes' for container 'app'" in result.stderr, result.stderr


# --- AEP-9936 initialDelaySeconds (gate VPAInitialDelay) --------------------------------------------------


def test_no_resize_is_sent_before_initial_delay_seconds(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    _needs_virtual_time(sim, "an hour-long window and its end")
    process = vpa_run(feature_gates={"InPlace": True, "VPAInitialDelay": True})
    containers = [_container("app", "100m", "100Mi")]
    sim.apply(_deployment("slow", containers, {"app": _constant("600m", "200Mi")}), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=slow", 2))
    sim.apply(_vpa("slow", "InPlace", update_policy={"initialDelaySeconds": 3600}), namespace)

    # Recommendations are published and the condition says the window is open; the pods keep their values.
    sim.wait_for("a recommendation", lambda: _targets(sim, namespace, "slow") or None, timeout_s=60)
    active = sim.wait_for(
        "InitialDelayActive=True", lambda: _true(sim, namespace, "slow", "InitialDelayActive"), timeout_s=30
    )
    assert active["reason"] == "WindowActive", active
    gauge = f'vpa_initial_delay_active{{name="slow",namespace="{namespace}"}}'
    sim.wait_for("the gauge at 1", lambda: f"{gauge} 1.0" in process.metrics(), timeout_s=30)
    sim.let_time_pass(1800)
    for pod in live_pods(sim, namespace, "app=slow"):
        assert _resources(pod, "app")["requests"]["cpu"] == "100m", _resources(pod, "app")
        assert annotations_of(pod).get("vpaInPlaceUpdated") is None
    # After the hour the same pods are resized in place, and the condition turns False.
    uids = {p["metadata"]["uid"] for p in pods}

    def resized() -> list[dict[str, Any]] | None:
        current = [p for p in live_pods(sim, namespace, "app=slow") if p["metadata"]["uid"] in uids]
        done = [p for p in current if _millis(_resources(p, "app")["requests"]["cpu"]) > 100]
        return done or None

    sim.wait_for("a resize after the window", resized, timeout_s=60)
    expired = _condition(sim, namespace, "slow", "InitialDelayActive")
    assert expired is not None
    assert (expired["status"], expired["reason"]) == ("False", "WindowExpired"), expired
    sim.wait_for("the gauge at 0", lambda: f"{gauge} 0.0" in process.metrics(), timeout_s=30)


# --- AEP-9970 per-container target percentiles (gate PerVPAConfig) ---------------------------------------


def test_per_container_percentiles_move_only_that_containers_target(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    _needs_virtual_time(sim, "hours of a daily usage cycle")
    vpa_run(feature_gates={"PerVPAConfig": True})
    daily = {"type": "daily", "base": "500m", "amplitude": "400m", "peak_hour": 12}
    usage = {
        "app": {"cpu": daily, "memory": {"type": "constant", "value": "200Mi"}},
        "side": {"cpu": daily, "memory": {"type": "constant", "value": "200Mi"}},
    }
    containers = [_container("app", "100m", "100Mi"), _container("side", "100m", "100Mi")]
    sim.apply(_deployment("pct", containers, usage), namespace)
    sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=pct", 2))
    policies = [{"containerName": "app", "recommendationPercentiles": {"cpu": {"target": 50}}}]
    sim.apply(_vpa("pct", "Off", policies=policies), namespace)
    sim.let_time_pass(12 * 3600)

    def both() -> dict[str, dict[str, str]] | None:
        targets = _targets(sim, namespace, "pct")
        return targets if {"app", "side"} <= set(targets) else None

    targets = sim.wait_for("targets for both containers", both, timeout_s=60)
    # Same usage: `side` reads the flag's p90, `app` its own p50 of the same histogram; memory is untouched.
    assert _millis(targets["app"]["cpu"]) < _millis(targets["side"]["cpu"]), targets
    assert targets["app"]["memory"] == targets["side"]["memory"], targets
    assert _condition(sim, namespace, "pct", "ConfigInvalid") is None


def test_a_target_outside_the_bounds_sets_config_invalid(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"PerVPAConfig": True})
    usage = {"app": _constant("300m", "200Mi")}
    sim.apply(_deployment("bad-pct", [_container("app", "100m", "100Mi")], usage), namespace)
    sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=bad-pct", 2))
    policies = [{"containerName": "app", "recommendationPercentiles": {"cpu": {"target": 99}}}]
    sim.apply(_vpa("bad-pct", "Recreate", policies=policies), namespace)
    invalid = sim.wait_for("ConfigInvalid=True", lambda: _true(sim, namespace, "bad-pct", "ConfigInvalid"),
                           timeout_s=60)
    assert invalid["message"] == (
        "container \"app\": cpu target percentile 99 is outside the recommender's bound percentiles [50, 95]"
    ), invalid


# --- AEP-9726 capacity-aware in-place (gate InPlaceCapacityAware) ------------------------------------------


def test_a_resize_that_would_not_fit_is_not_sent_and_the_event_says_so(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"InPlace": True, "InPlaceCapacityAware": True})
    # Six cores of usage on four-core nodes: the recommendation cannot fit any node.
    usage = {"app": _constant("6", "100Mi")}
    sim.apply(_deployment("big", [_container("app", "500m", "100Mi")], usage), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=big", 2))
    sim.apply(_vpa("big", "InPlace"), namespace)

    def refused() -> list[dict[str, Any]] | None:
        return events_for(sim, namespace, "InPlaceResizeWouldNotFit") or None

    events = sim.wait_for("an InPlaceResizeWouldNotFit event", refused, timeout_s=90)
    message = events[0]["message"]
    assert "the kubelet would answer Infeasible" in message, message
    assert re.search(r"more than node \S+ allocates \(4000m\)", message), message
    # Nothing was sent: no pod carries a resize condition or a changed request.
    for pod in live_pods(sim, namespace, "app=big"):
        assert pod["metadata"]["uid"] in {p["metadata"]["uid"] for p in pods}
        assert _resources(pod, "app")["requests"]["cpu"] == "500m"
        kinds = {c.get("type") for c in (pod.get("status") or {}).get("conditions") or []}
        assert "PodResizePending" not in kinds, kinds
    assert not events_for(sim, namespace, "InPlaceResizedByVPA")


# --- the resize guard (gate ResizeGuard, vpa.dev/resize-guard) --------------------------------------------


def test_an_oom_after_a_decrease_is_reverted_and_the_next_decrease_waits_out_the_backoff(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    _needs_virtual_time(sim, "a usage spike placed at an instant, and an hour's backoff")
    process = vpa_run(feature_gates={"InPlace": True, "ResizeGuard": True})
    # 100Mi of memory, then from 30 virtual minutes on a 700Mi spike for 20 minutes (once a day): above the
    # limit a first decrease leaves (the recommendation then knows only the quiet 100Mi), below the 1Gi the
    # pod started with.
    spike_at = sim.virtual_now() + 1800
    memory = {"type": "spikes", "base": "100Mi", "height": "600Mi", "period_s": 86400, "duration_s": 1200,
              "offset_s": spike_at}  # fmt: skip
    usage = {"app": {"cpu": {"type": "constant", "value": "100m"}, "memory": memory}}
    containers = [_container("app", "100m", "512Mi", "1Gi")]
    sim.apply(_deployment("guarded", containers, usage, replicas=1), namespace)
    (pod,) = sim.wait_for("a running pod", lambda: _running(sim, namespace, "app=guarded", 1))
    uid = pod["metadata"]["uid"]
    annotations = {"vpa.dev/resize-guard": "true", "vpa.dev/resize-guard-window": "1h"}
    sim.apply(_vpa("guarded", "InPlace", annotations=annotations), namespace)

    def same_pod() -> dict[str, Any] | None:
        pods = live_pods(sim, namespace, "app=guarded")
        return next((p for p in pods if p["metadata"]["uid"] == uid), None)

    def lowered() -> dict[str, Any] | None:
        current = same_pod()
        if current is None:
            return None
        limit = _bytes(_resources(current, "app").get("limits", {}).get("memory"))
        return current if limit < 700 * MI else None

    sim.wait_for("the memory limit lowered in place below the coming spike", lowered, timeout_s=60)

    # The spike OOM-kills the container; within one updater pass the resize is undone, said in a Warning
    # event, a condition and a metric.
    reverted = sim.wait_for("a ResizeReverted event", lambda: events_for(sim, namespace, "ResizeReverted"),
                            timeout_s=120)
    event = reverted[0]
    assert event["type"] == "Warning", event
    assert "revert" in event["message"], event
    assert "was OOM-killed" in event["message"], event
    current = same_pod()
    assert current is not None, "the pod was recreated, not resized back"
    assert _bytes(_resources(current, "app")["limits"]["memory"]) >= 1024 * MI, _resources(current, "app")
    condition = _true(sim, namespace, "guarded", "ResizeReverted")
    assert condition is not None
    assert condition["reason"] == "OOMKilled", condition
    assert current["metadata"]["name"] in condition["message"], condition
    assert re.search(r'vpa_updater_resize_reverts_total\{cause="OOMKilled"[^}]*\} 1\.0', process.metrics())

    # The recommendation now wants less than the reverted values, but decreases of that container wait out
    # the first backoff (one hour): nothing lower is sent before it ends.
    held = _bytes(_resources(current, "app")["requests"]["memory"])
    sim.let_time_pass(50 * 60)
    current = same_pod()
    assert current is not None
    assert _bytes(_resources(current, "app")["requests"]["memory"]) >= held, _resources(current, "app")


# --- AEP-10031 DaemonSet scope (gate DaemonSetScope) -------------------------------------------------------


def _daemonset(name: str, containers: list[dict[str, Any]], usage: dict[str, Any]) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}, "annotations": {USAGE: json.dumps(usage)}},
                         "spec": {"containers": containers}},
        },
    })  # fmt: skip


def test_two_node_groups_get_two_recommendations_and_each_pod_its_groups(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    sim.require_sim("a usage annotation changed on one running pod, and labels on the simulator's nodes")
    vpa_run(feature_gates={"InPlace": True, "DaemonSetScope": True})
    nodes = sorted(n["metadata"]["name"] for n in sim.get_json("nodes")["items"])
    big, small = nodes[0], nodes[1]
    sim.kubectl("label", "node", big, "e2e.vpa.dev/tier=big", "--overwrite")
    try:
        usage = {"agent": _constant("100m", "100Mi")}
        sim.apply(_daemonset("agent", [_container("agent", "100m", "100Mi")], usage), namespace)
        pods = sim.wait_for("a pod per node", lambda: _running(sim, namespace, "app=agent", len(nodes)))
        on_big = next(p for p in pods if p["spec"]["nodeName"] == big)
        # The agent on the big node works harder (the simulator reads a changed annotation at once).
        sim.kubectl("annotate", "pod", "-n", namespace, on_big["metadata"]["name"], "--overwrite",
                    f"{USAGE}={json.dumps({'agent': _constant('800m', '400Mi')})}")
        vpa = json.loads(_vpa("agent", "InPlace"))
        vpa["spec"]["targetRef"]["kind"] = "DaemonSet"
        vpa["spec"]["scope"] = "e2e.vpa.dev/tier"
        sim.apply(json.dumps(vpa), namespace)

        def groups() -> dict[str, dict[str, str]] | None:
            status = sim.get_json("vpa", "agent", "-n", namespace).get("status") or {}
            found = {g["scopeValue"]: g["containerRecommendations"][0]["target"]
                     for g in status.get("groups") or [] if g.get("containerRecommendations")}
            return found if {"big", "__absent__"} <= set(found) else None

        targets = sim.wait_for("a recommendation per node group", groups, timeout_s=90)
        assert _millis(targets["big"]["cpu"]) > _millis(targets["__absent__"]["cpu"]), targets
        status = sim.get_json("vpa", "agent", "-n", namespace).get("status") or {}
        assert status.get("recommendation") is None, status

        # Each pod is resized in place to its own group's target.
        def resized() -> list[dict[str, Any]] | None:
            current = groups() or {}
            done = []
            for pod in live_pods(sim, namespace, "app=agent"):
                group = "big" if pod["spec"]["nodeName"] == big else "__absent__"
                want = current.get(group)
                requests = _resources(pod, "agent")["requests"]
                if want is not None and _millis(requests["cpu"]) == _millis(want["cpu"]):
                    done.append(pod)
            return done if len(done) == len(nodes) else None

        final = sim.wait_for("each pod at its group's target", resized, timeout_s=90)
        cpu = {p["spec"]["nodeName"]: _millis(_resources(p, "agent")["requests"]["cpu"]) for p in final}
        assert cpu[big] > cpu[small], cpu

        # A new pod on the big node (not bound yet at admission: its node comes from the DaemonSet's node
        # affinity) is admitted with the big group's values.
        old = next(p for p in final if p["spec"]["nodeName"] == big)
        sim.kubectl("delete", "pod", "-n", namespace, old["metadata"]["name"], "--wait=false")

        def replacement() -> dict[str, Any] | None:
            for pod in live_pods(sim, namespace, "app=agent"):
                if pod["metadata"]["uid"] != old["metadata"]["uid"] and pod["spec"].get("nodeName") == big:
                    return pod
            return None

        new = sim.wait_for("the big node's new pod", replacement, timeout_s=60)
        admitted = _millis(_resources(new, "agent")["requests"]["cpu"])
        assert admitted == _millis((groups() or {})["big"]["cpu"]), (admitted, groups())
        assert "vpaUpdates" in annotations_of(new), annotations_of(new)
    finally:
        sim.kubectl("label", "node", big, "e2e.vpa.dev/tier-", check=False)
