"""Beyond upstream, round 3 (issue 46), against the cluster: memory decreases that respect runtimes,
AEP-9936 `initialDelaySeconds`, AEP-9970 per-container target percentiles, AEP-9726 capacity-aware in-place
resizes, and the resize guard that undoes a resize, or an eviction's new values, that hurt.

Each scenario runs against `vpa sim` and, with `E2E_CONTROL_PLANE=kubernetes` (`make e2e-cluster`), against
a real kube-apiserver of the release built (v1.37.2 and v1.36.3 in CI). Usage comes from the
`sim.vpa.dev/usage` annotation, which the simulator's kubelets and the hollow kubelets' metrics honour. The
names say where CI runs them: those with `in_place` in the name run on hollow kubelets (the release's own
kubelet code resizes the pods); the rest run on the simulator's kubelets, since hollow kubelets never
OOM-kill and the guard's scenarios need OOM kills.

On the simulator a scenario's windows are hours of virtual time (the initial delay, a daily cycle, the
guard's one-hour backoff); on real time they shrink to loops of `REAL_LOOP_S` (a delay of twenty loops, CPU
spikes every 20 s, `--resize-guard-backoff` at twenty loops), checking the same things: nothing before the
window's end, the change after it.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from e2e.conftest import (
    REAL_LOOP_S,
    Cluster,
    VpaProcess,
    VpaRunFactory,
    annotations_of,
    events_for,
    live_pods,
)
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


def _stamp(text: str) -> float:
    """An RFC 3339 timestamp of the API (`2026-01-02T03:04:05Z`, fractions allowed) as Unix seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _until(sim: Cluster, instant: float) -> None:
    """Until the cluster's clock (virtual on the simulator, the wall clock elsewhere) reaches `instant`."""
    remaining = instant - sim.virtual_now()
    if remaining <= 0:
        return
    if sim.virtual_time:
        sim.let_time_pass(remaining)
    else:
        time.sleep(remaining)


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


def test_no_in_place_resize_is_sent_before_initial_delay_seconds(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # An hour of virtual time on the simulator; on real time twenty loops, long enough for a recommendation
    # to be published inside the window (the claim would be empty without one).
    delay_s = 3600 if sim.virtual_time else 20 * REAL_LOOP_S
    margin_s = 900 if sim.virtual_time else 2 * REAL_LOOP_S
    process = vpa_run(feature_gates={"InPlace": True, "VPAInitialDelay": True})
    containers = [_container("app", "100m", "100Mi")]
    sim.apply(_deployment("slow", containers, {"app": _constant("600m", "200Mi")}), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=slow", 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply(_vpa("slow", "InPlace", update_policy={"initialDelaySeconds": delay_s}), namespace)
    created = _stamp(sim.get_json("vpa", "slow", "-n", namespace)["metadata"]["creationTimestamp"])
    window_end = created + delay_s

    # Inside the window: a recommendation that wants more CPU is published and the condition says the
    # window is open, but the pods keep their values.
    def wants_more() -> dict[str, str] | None:
        target = _targets(sim, namespace, "slow").get("app")
        return target if target is not None and _millis(target["cpu"]) > 110 else None

    sim.wait_for("a recommendation above the pods' requests", wants_more, timeout_s=60)
    active = sim.wait_for(
        "InitialDelayActive=True", lambda: _true(sim, namespace, "slow", "InitialDelayActive"), timeout_s=30
    )
    assert active["reason"] == "WindowActive", active
    gauge = f'vpa_initial_delay_active{{name="slow",namespace="{namespace}"}}'
    sim.wait_for("the gauge at 1", lambda: f"{gauge} 1.0" in process.metrics(), timeout_s=30)
    assert sim.virtual_now() < window_end - margin_s, "the window ended before the recommendation came"
    _until(sim, window_end - margin_s)
    for pod in live_pods(sim, namespace, "app=slow"):
        assert pod["metadata"]["uid"] in uids, "a pod was replaced inside the window"
        assert _resources(pod, "app")["requests"]["cpu"] == "100m", _resources(pod, "app")
        assert annotations_of(pod).get("vpaInPlaceUpdated") is None
    assert not events_for(sim, namespace, "InPlaceResizedByVPA")
    # Still inside the window after those reads: what they saw was inside it.
    assert sim.virtual_now() < window_end, "the checks ran past the window's end: nothing checked inside it"

    # After the window the same pods are resized in place, not before its end, and the condition turns False.
    def resized() -> list[dict[str, Any]] | None:
        current = [p for p in live_pods(sim, namespace, "app=slow") if p["metadata"]["uid"] in uids]
        done = [p for p in current if _millis(_resources(p, "app")["requests"]["cpu"]) > 100]
        return done or None

    sim.wait_for("a resize after the window", resized, timeout_s=60)
    for event in events_for(sim, namespace, "InPlaceResizedByVPA"):
        sent = _stamp(event.get("lastTimestamp") or event.get("eventTime") or "")
        assert sent >= window_end, (event, window_end)

    def ended() -> dict[str, Any] | None:
        found = _condition(sim, namespace, "slow", "InitialDelayActive")
        return found if found is not None and found.get("status") == "False" else None

    expired = sim.wait_for("InitialDelayActive=False", ended, timeout_s=30)
    assert expired["reason"] == "WindowExpired", expired
    sim.wait_for("the gauge at 0", lambda: f"{gauge} 0.0" in process.metrics(), timeout_s=30)


# --- AEP-9970 per-container target percentiles (gate PerVPAConfig) ---------------------------------------


def test_per_container_percentiles_move_only_that_containers_target(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"PerVPAConfig": True})
    # CPU whose p50 and p90 differ: on the simulator a daily cycle over twelve virtual hours; on real time,
    # where a day does not pass, 1 core spikes for 8 s of every 20 s over a 200m base, spread from the start.
    cpu: dict[str, Any] = {"type": "daily", "base": "500m", "amplitude": "400m", "peak_hour": 12}
    if not sim.virtual_time:
        cpu = {"type": "spikes", "base": "200m", "height": "800m", "period_s": 20, "duration_s": 8}
    usage = {
        "app": {"cpu": cpu, "memory": {"type": "constant", "value": "200Mi"}},
        "side": {"cpu": cpu, "memory": {"type": "constant", "value": "200Mi"}},
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

    # Same usage: `side` reads the flag's p90, `app` its own p50 of the same histogram; memory is untouched.
    # On real time the histograms fill loop by loop: wait until both targets are there and apart.
    def apart() -> dict[str, dict[str, str]] | None:
        targets = both()
        if targets is None or _millis(targets["app"]["cpu"]) >= _millis(targets["side"]["cpu"]):
            return None
        return targets

    targets = sim.wait_for("app's p50 target below side's p90", apart, timeout_s=60)
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


def _updater_passes(process: VpaProcess) -> float:
    """How many updater loops have finished (the count of the loop's `total` latency)."""
    pattern = r'^vpa_updater_execution_latency_seconds_count\{step="total"\} (\S+)$'
    found = re.search(pattern, process.metrics(), re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _oom_killed(pod: dict[str, Any] | None, container: str) -> bool:
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != container:
            continue
        terminated = (status.get("lastState") or {}).get("terminated") or (status.get("state") or {}).get(
            "terminated"
        ) or {}
        if terminated.get("reason") == "OOMKilled":
            return True
    return False


def _held_until(condition: dict[str, Any]) -> float:
    found = re.search(r"decreases held until (\S+)$", condition["message"])
    assert found is not None, condition
    return _stamp(found.group(1))


def test_an_oom_after_a_decrease_is_reverted_and_the_next_decrease_waits_out_the_backoff(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # The first backoff: the default hour on the simulator; on real time `--resize-guard-backoff` at twenty
    # loops, so the whole backoff passes within the scenario.
    backoff_s = 3600 if sim.virtual_time else 20 * REAL_LOOP_S
    window = "1h" if sim.virtual_time else "2m"
    margin_s = 900 if sim.virtual_time else 2 * REAL_LOOP_S
    process = vpa_run(
        feature_gates={"InPlace": True, "ResizeGuard": True}, extra=[f"--resize-guard-backoff={backoff_s}s"]
    )
    # 100Mi of memory, then a 700Mi spike (30 virtual minutes on, for 20 minutes, once a day; on real time a
    # minute on, for 30 s): above the limit a first decrease leaves (the recommendation then knows only the
    # quiet 100Mi), below the 1Gi the pod started with; over before the backoff ends. maxAllowed (300Mi)
    # keeps the VPA from raising the limit above the spike itself, so only the guard can undo the decrease
    # (on real time the VPA would otherwise react to the spike within a loop, before the kill).
    spike_at = sim.virtual_now() + (1800 if sim.virtual_time else 60)
    memory = {"type": "spikes", "base": "100Mi", "height": "600Mi", "period_s": 86400,
              "duration_s": 1200 if sim.virtual_time else 30, "offset_s": spike_at}  # fmt: skip
    usage = {"app": {"cpu": {"type": "constant", "value": "100m"}, "memory": memory}}
    containers = [_container("app", "100m", "512Mi", "1Gi")]
    sim.apply(_deployment("guarded", containers, usage, replicas=1), namespace)
    (pod,) = sim.wait_for("a running pod", lambda: _running(sim, namespace, "app=guarded", 1))
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
    annotations = {"vpa.dev/resize-guard": "true", "vpa.dev/resize-guard-window": window}
    policies = [{"containerName": "app", "maxAllowed": {"memory": "300Mi"}}]
    sim.apply(_vpa("guarded", "InPlace", annotations=annotations, policies=policies), namespace)

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
    assert sim.virtual_now() < spike_at, "the decrease came after the spike began: nothing to revert"

    # The spike OOM-kills the container; within one updater pass (the one in flight when the kill is seen,
    # then one more) the resize is undone, said in a Warning event, a condition and a metric.
    sim.wait_for("an OOM kill", lambda: _oom_killed(same_pod(), "app"), timeout_s=60)
    seen = _updater_passes(process)
    sim.wait_for("two more updater passes", lambda: _updater_passes(process) >= seen + 2, timeout_s=30)
    reverted = events_for(sim, namespace, "ResizeReverted")
    assert reverted, "no revert within one updater pass of the OOM kill"
    event = reverted[0]
    assert event["type"] == "Warning", event
    assert "revert" in event["message"], event
    assert "was OOM-killed" in event["message"], event
    # An OOM kill puts back memory only: CPU stays where the decrease left it (not the upper bound).
    assert "cpu=" not in event["message"], event
    current = same_pod()
    assert current is not None, "the pod was recreated, not resized back"
    reverted_to = _bytes(_resources(current, "app")["requests"]["memory"])
    assert _bytes(_resources(current, "app")["limits"]["memory"]) >= 1024 * MI, _resources(current, "app")
    assert reverted_to >= 512 * MI, _resources(current, "app")
    condition = _true(sim, namespace, "guarded", "ResizeReverted")
    assert condition is not None
    assert condition["reason"] == "OOMKilled", condition
    assert name in condition["message"], condition
    assert re.search(r'vpa_updater_resize_reverts_total\{cause="OOMKilled"[^}]*\} 1\.0', process.metrics())

    # The recommendation (at most 300Mi) wants less than the reverted values, but that container's decreases
    # wait out the backoff: nothing lower is sent before it ends ...
    held_until = _held_until(condition)
    assert held_until - sim.virtual_now() <= backoff_s, (held_until, condition)

    def wants_less() -> dict[str, str] | None:
        target = _targets(sim, namespace, "guarded").get("app")
        return target if target is not None and _bytes(target["memory"]) < 0.85 * reverted_to else None

    sim.wait_for("a recommendation below the reverted values", wants_less, timeout_s=60)
    _until(sim, held_until - margin_s)
    current = same_pod()
    assert current is not None
    assert _bytes(_resources(current, "app")["requests"]["memory"]) == reverted_to, _resources(current, "app")
    assert sim.virtual_now() < held_until, "the checks ran past the backoff's end: nothing checked inside it"

    # ... and the decrease is sent to the same pod once it has.
    def decreased() -> dict[str, Any] | None:
        now = same_pod()
        return now if now and _bytes(_resources(now, "app")["requests"]["memory"]) < reverted_to else None

    sim.wait_for("the decrease after the backoff", decreased, timeout_s=60)
    assert sim.virtual_now() >= held_until


def test_an_oom_after_an_evictions_decrease_is_reverted_on_the_recreated_pod(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # Recreate: a pod whose requests are outside the recommended range is evicted at once, and the webhook
    # gives the new pod the recommendation. Within range nothing is evicted for twelve hours (the lifetime
    # threshold), so the new pod meets the spike with the values it was given.
    virtual = sim.virtual_time
    backoff_s = 3600 if virtual else 20 * REAL_LOOP_S
    margin_s = 900 if virtual else 2 * REAL_LOOP_S
    process = vpa_run(feature_gates={"ResizeGuard": True}, extra=[f"--resize-guard-backoff={backoff_s}s"])
    # 100Mi of memory, then a 700Mi spike (three virtual hours on, for 20 minutes; on real time 80 s on, for
    # 30 s): after the eviction lowered the limit below it, below the 1Gi the first pod had, over before the
    # backoff ends. maxAllowed (300Mi) puts the first pod's 512Mi above the range (so it is evicted at once)
    # and keeps the VPA from raising the limit above the spike itself.
    spike_at = sim.virtual_now() + (3 * 3600 if virtual else 80)
    memory = {"type": "spikes", "base": "100Mi", "height": "600Mi", "period_s": 86400,
              "duration_s": 1200 if virtual else 30, "offset_s": spike_at}  # fmt: skip
    usage = {"app": {"cpu": {"type": "constant", "value": "100m"}, "memory": memory}}
    containers = [_container("app", "100m", "512Mi", "1Gi")]
    sim.apply(_deployment("recreated", containers, usage, replicas=1), namespace)
    (first,) = sim.wait_for("a running pod", lambda: _running(sim, namespace, "app=recreated", 1))
    annotations = {"vpa.dev/resize-guard": "true", "vpa.dev/resize-guard-window": "3h" if virtual else "3m"}
    policies = [{"containerName": "app", "maxAllowed": {"memory": "300Mi"}}]
    sim.apply(
        _vpa("recreated", "Recreate", annotations=annotations, update_policy={"minReplicas": 1},
             policies=policies),
        namespace,
    )  # fmt: skip

    def replaced(old_uid: str) -> dict[str, Any] | None:
        pods = _running(sim, namespace, "app=recreated", 1) or []
        return next((p for p in pods if p["metadata"]["uid"] != old_uid), None)

    # The eviction's new pod is admitted with a limit below the coming spike.
    second = sim.wait_for("the pod recreated", lambda: replaced(first["metadata"]["uid"]), timeout_s=90)
    limit = _bytes(_resources(second, "app").get("limits", {}).get("memory"))
    assert limit < 700 * MI, _resources(second, "app")
    assert sim.virtual_now() < spike_at, "the new pod came after the spike began: nothing to revert"
    uid = second["metadata"]["uid"]

    def same_pod() -> dict[str, Any] | None:
        pods = live_pods(sim, namespace, "app=recreated")
        return next((p for p in pods if p["metadata"]["uid"] == uid), None)

    # The spike OOM-kills it; within one updater pass the new pod is resized back in place to the evicted
    # pod's values (or the upper bound), said in a Warning event, the condition and the metric.
    sim.wait_for("an OOM kill", lambda: _oom_killed(same_pod(), "app"), timeout_s=90)
    seen = _updater_passes(process)
    sim.wait_for("two more updater passes", lambda: _updater_passes(process) >= seen + 2, timeout_s=30)
    reverted = events_for(sim, namespace, "ResizeReverted")
    assert reverted, "no revert within one updater pass of the OOM kill"
    message = reverted[0]["message"]
    assert reverted[0]["type"] == "Warning", reverted[0]
    assert f"replaced evicted pod {first['metadata']['name']}" in message, message
    assert "was OOM-killed" in message, message
    current = same_pod()
    assert current is not None, "the pod was recreated again, not resized back"
    reverted_to = _bytes(_resources(current, "app")["requests"]["memory"])
    assert reverted_to >= 512 * MI, _resources(current, "app")
    assert _bytes(_resources(current, "app")["limits"]["memory"]) >= 1024 * MI, _resources(current, "app")
    condition = _true(sim, namespace, "recreated", "ResizeReverted")
    assert condition is not None, sim.get_json("vpa", "recreated", "-n", namespace).get("status")
    assert condition["reason"] == "OOMKilled", condition
    assert re.search(r'vpa_updater_resize_reverts_total\{cause="OOMKilled"[^}]*\} 1\.0', process.metrics())

    # The recommendation wants less than the reverted values, but evicting the pod would lower them: it waits
    # out the backoff, and goes after it.
    held_until = _held_until(condition)

    def wants_less() -> dict[str, str] | None:
        target = _targets(sim, namespace, "recreated").get("app")
        return target if target is not None and _bytes(target["memory"]) < 0.85 * reverted_to else None

    sim.wait_for("a recommendation below the reverted values", wants_less, timeout_s=60)
    _until(sim, held_until - margin_s)
    current = same_pod()
    assert current is not None, "evicted during the backoff"
    assert _bytes(_resources(current, "app")["requests"]["memory"]) == reverted_to, _resources(current, "app")
    assert sim.virtual_now() < held_until, "the checks ran past the backoff's end: nothing checked inside it"
    third = sim.wait_for("the eviction after the backoff", lambda: replaced(uid), timeout_s=90)
    assert sim.virtual_now() >= held_until
    assert _bytes(_resources(third, "app")["requests"]["memory"]) < reverted_to, _resources(third, "app")


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
