"""Beyond upstream 1.7, against the cluster: sidecars, pod-level resources, OOM at start, conflicts, reactive.

Each scenario runs against `vpa sim` and, with `E2E_CONTROL_PLANE=kubernetes`, against the
kube-apiserver of the release `make e2e-cluster` builds (v1.37.2 by default; its own validation and
defaulting judge every pod our webhook admits: a patch it refused would leave the ReplicaSet without its
replacement pod). Usage comes from the `sim.vpa.dev/usage` annotation, which the
simulator's kubelets honour on both backends.

Recommendations keep moving while a scenario polls, so each records every set of targets the VPA has
published (`Published`) and a pod must carry one of them.
"""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.conftest import Cluster, VpaRunFactory, annotations_of, events_for, live_pods
from vpa.model.quantity import Quantity

USAGE = "sim.vpa.dev/usage"
IMAGE = "registry.k8s.io/pause:3.10"


def _usage(**containers: tuple[str, str]) -> str:
    return json.dumps({
        name: {"cpu": {"type": "constant", "value": cpu}, "memory": {"type": "constant", "value": mem}}
        for name, (cpu, mem) in containers.items()
    })  # fmt: skip


def _deployment(name: str, spec: dict[str, Any], usage: str, replicas: int = 2) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}, "annotations": {USAGE: usage}}, "spec": spec},
        },
    })  # fmt: skip


def _vpa(name: str, mode: str) -> str:
    return json.dumps({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler", "metadata": {"name": name},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "updatePolicy": {"updateMode": mode}},
    })  # fmt: skip


def _container(name: str, requests: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": IMAGE, **extra}
    if requests is not None:
        out["resources"] = {"requests": requests}
    return out


class Published:
    """Every `{container: target}` the VPA has published while the test polls."""

    def __init__(self, sim: Cluster, namespace: str, vpa: str) -> None:
        self.sim, self.namespace, self.vpa = sim, namespace, vpa
        self.seen: list[dict[str, dict[str, str]]] = []

    def poll(self) -> dict[str, dict[str, str]]:
        status = self.sim.get_json("vpa", self.vpa, "-n", self.namespace).get("status") or {}
        recs = (status.get("recommendation") or {}).get("containerRecommendations") or []
        current = {r["containerName"]: r["target"] for r in recs}
        if current and current not in self.seen:
            self.seen.append(current)
        return current


def _millis(value: str | None) -> int:
    return Quantity.parse(value or "0").millis


def _bytes(value: str | None) -> int:
    return int(Quantity.parse(value or "0").value)


def _same(requests: dict[str, str], target: dict[str, str]) -> bool:
    return all(Quantity.parse(requests.get(r, "0")) == Quantity.parse(v) for r, v in target.items())


def _replacement(
    sim: Cluster, namespace: str, selector: str, known: set[str], published: Published
) -> dict[str, Any]:
    """Delete one running pod and return its replacement once Running, polling the VPA meanwhile."""
    victim = live_pods(sim, namespace, selector)[0]
    sim.kubectl("delete", "pod", "-n", namespace, victim["metadata"]["name"], "--wait=false")

    def fresh() -> dict[str, Any] | None:
        published.poll()
        pods = [p for p in live_pods(sim, namespace, selector) if p["metadata"]["uid"] not in known]
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return running[0] if running else None

    pod = sim.wait_for("the replacement pod running", fresh, timeout_s=60)
    published.poll()
    return pod


def _running(sim: Cluster, namespace: str, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = live_pods(sim, namespace, selector)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) == count == len(running) else None


# --- native sidecars (AEP-8905, gate NativeSidecar) -------------------------------------------------------


def test_a_native_sidecar_is_recommended_and_admitted_plain_init_containers_untouched(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"NativeSidecar": True})
    setup = _container("setup", {"cpu": "10m", "memory": "16Mi"})
    proxy = _container("proxy", {"cpu": "50m", "memory": "32Mi"}, restartPolicy="Always")
    app = _container("app", {"cpu": "100m", "memory": "50Mi"})
    spec = {"initContainers": [setup, proxy], "containers": [app]}
    sim.apply(_deployment("mesh", spec, _usage(app=("500m", "200Mi"), proxy=("300m", "120Mi"))), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=mesh", 2))
    sim.apply(_vpa("mesh", "Initial"), namespace)
    published = Published(sim, namespace, "mesh")

    # The sidecar gets a recommendation of its own (its usage is well above its request); the plain init
    # container, which has exited, none.
    def both() -> dict[str, dict[str, str]] | None:
        current = published.poll()
        return current if {"app", "proxy"} <= set(current) else None

    targets = sim.wait_for("recommendations for app and the sidecar", both, timeout_s=90)
    assert set(targets) == {"app", "proxy"}, targets
    assert _millis(targets["proxy"]["cpu"]) > 50, targets

    # A recreated pod: the webhook sets the sidecar's resources at /spec/initContainers/1 and leaves `setup`.
    pod = _replacement(sim, namespace, "app=mesh", {p["metadata"]["uid"] for p in pods}, published)
    inits = {c["name"]: c for c in pod["spec"]["initContainers"]}
    proxy_requests = inits["proxy"]["resources"]["requests"]
    assert any(_same(proxy_requests, seen["proxy"]) for seen in published.seen), (
        proxy_requests, published.seen)
    assert any(_same(pod["spec"]["containers"][0]["resources"]["requests"], seen["app"])
               for seen in published.seen), published.seen
    assert inits["setup"]["resources"] == {"requests": {"cpu": "10m", "memory": "16Mi"}}
    annotations = annotations_of(pod)
    assert annotations["vpaObservedContainers"] == "app, proxy"
    assert "initContainer 1: cpu request, memory request" in annotations["vpaUpdates"], annotations


def _marked_in_place(sim: Cluster, namespace: str, selector: str, uids: set[str]) -> list[dict[str, Any]]:
    """The pods `uids`, once each carries `vpaInPlaceUpdated: "true"`: the updater writes that annotation
    after the resize itself (two requests), so a poll may see the new resources a moment before it."""

    def marked() -> list[dict[str, Any]] | None:
        pods = [p for p in live_pods(sim, namespace, selector) if p["metadata"]["uid"] in uids]
        done = [p for p in pods if annotations_of(p).get("vpaInPlaceUpdated") == "true"]
        return done if len(done) == len(uids) else None

    return sim.wait_for("the resized pods annotated vpaInPlaceUpdated", marked, timeout_s=30)


def test_a_native_sidecar_is_resized_in_place(sim: Cluster, vpa_run: VpaRunFactory, namespace: str) -> None:
    vpa_run(feature_gates={"NativeSidecar": True})
    proxy = _container("proxy", {"cpu": "50m", "memory": "32Mi"}, restartPolicy="Always")
    spec = {"initContainers": [proxy], "containers": [_container("app", {"cpu": "100m", "memory": "50Mi"})]}
    sim.apply(_deployment("mesh", spec, _usage(app=("500m", "200Mi"), proxy=("300m", "120Mi"))), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=mesh", 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply(_vpa("mesh", "InPlaceOrRecreate"), namespace)
    published = Published(sim, namespace, "mesh")

    # The same pods (no eviction), the sidecar's requests now a published target, nothing restarted: the
    # resize went through kube-apiserver's pods/resize at /spec/initContainers/0.
    def resized() -> list[dict[str, Any]] | None:
        published.poll()
        current = _running(sim, namespace, "app=mesh", 2) or []
        done = [
            p for p in current
            if p["metadata"]["uid"] in uids
            and any(_same(p["spec"]["initContainers"][0]["resources"]["requests"], seen["proxy"])
                    for seen in published.seen if "proxy" in seen)
        ]  # fmt: skip
        return done or None

    (pod, *_) = sim.wait_for("a sidecar resized in place", resized, timeout_s=90)
    (pod,) = _marked_in_place(sim, namespace, "app=mesh", {pod["metadata"]["uid"]})
    sidecar_status = pod["status"]["initContainerStatuses"][0]
    assert sidecar_status["name"] == "proxy"
    assert sidecar_status.get("restartCount", 0) == 0, sidecar_status


# --- pod-level resources (KEP-2837; gate PodLevelResources, AEP-7571) -------------------------------------


# `app` sets its own requests; `helper` sets none and lives on the pod-level budget.
POOLED = {
    "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
    "containers": [_container("app", {"cpu": "100m", "memory": "50Mi"}), _container("helper")],
}
POOLED_USAGE = _usage(app=("500m", "200Mi"), helper=("200m", "100Mi"))


def _follows_a_recommendation(pod: dict[str, Any], published: Published, *, admitted: bool = True) -> None:
    """Pod level = the sum of the two targets of one published recommendation, the 1Gi limit keeping its 8:1
    ratio to the request; `app` carries its own target, `helper` still sets nothing. `admitted`: the values
    came from the admission controller (which says so in `vpaUpdates`), not from an in-place resize."""
    pod_level = pod["spec"]["resources"]
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    assert not containers["helper"].get("resources"), containers["helper"]

    def matches(seen: dict[str, dict[str, str]]) -> bool:
        app, helper = seen["app"], seen["helper"]
        return (
            _same(containers["app"]["resources"]["requests"], app)
            and _millis(pod_level["requests"]["cpu"]) == _millis(app["cpu"]) + _millis(helper["cpu"])
            and _bytes(pod_level["requests"]["memory"]) == _bytes(app["memory"]) + _bytes(helper["memory"])
        )

    assert any(matches(seen) for seen in published.seen if {"app", "helper"} <= set(seen)), (
        pod_level, containers["app"], published.seen)
    assert _bytes(pod_level["limits"]["memory"]) == 8 * _bytes(pod_level["requests"]["memory"]), pod_level
    if admitted:
        assert "pod: cpu request, memory request, memory limit" in annotations_of(pod)["vpaUpdates"]


def test_pod_level_resources_follow_the_recommendation_and_the_pod_stays_valid(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(feature_gates={"PodLevelResources": True})
    sim.apply(_deployment("pooled", POOLED, POOLED_USAGE), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=pooled", 2))
    sim.apply(_vpa("pooled", "Initial"), namespace)
    published = Published(sim, namespace, "pooled")
    sim.wait_for("recommendations for both containers",
                 lambda: {"app", "helper"} <= set(published.poll()), timeout_s=90)

    # Admitted by kube-apiserver (a pod-level request below the containers' would have been refused, and the
    # ReplicaSet would have no replacement).
    pod = _replacement(sim, namespace, "app=pooled", {p["metadata"]["uid"] for p in pods}, published)
    _follows_a_recommendation(pod, published)


def _server_minor(sim: Cluster) -> int:
    version = json.loads(sim.kubectl("version", "-o", "json").stdout)["serverVersion"]
    return int(str(version["minor"]).rstrip("+"))


def test_pod_level_resources_are_resized_in_place_where_the_server_allows(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # No --in-place-pod-level-resources: the updater reads the server's version. Kubernetes 1.36+ resizes
    # pod-level resources in place (InPlacePodLevelResourcesVerticalScaling, beta and on), so
    # InPlaceOrRecreate resizes the containers and the pod-level values together, without an eviction.
    # Kubernetes 1.35 refuses every resize of such a pod (the gate is alpha and off): there it evicts, and the
    # recreated pod is admitted with the new values.
    in_place = _server_minor(sim) >= 36
    vpa_run(feature_gates={"PodLevelResources": True})
    sim.apply(_deployment("pooled", POOLED, POOLED_USAGE), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=pooled", 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply(_vpa("pooled", "InPlaceOrRecreate"), namespace)
    published = Published(sim, namespace, "pooled")

    def resized() -> dict[str, Any] | None:
        published.poll()
        current = _running(sim, namespace, "app=pooled", 2) or []
        return next((p for p in current if "vpaInPlaceUpdated" in annotations_of(p)), None)

    def replaced() -> dict[str, Any] | None:
        published.poll()
        current = _running(sim, namespace, "app=pooled", 2) or []
        return next((p for p in current if p["metadata"]["uid"] not in uids), None)

    if in_place:
        pod = sim.wait_for("a pod resized in place", resized, timeout_s=120)
    else:
        pod = sim.wait_for("a pod evicted and recreated", replaced, timeout_s=120)
    published.poll()
    _follows_a_recommendation(pod, published, admitted=not in_place)
    if in_place:
        assert pod["metadata"]["uid"] in uids
        assert all(s.get("restartCount", 0) == 0 for s in pod["status"]["containerStatuses"]), pod["status"]
        assert events_for(sim, namespace, "InPlaceResizedByVPA")
        assert not events_for(sim, namespace, "EvictedByVPA")
    else:
        assert events_for(sim, namespace, "EvictedByVPA")
        assert not events_for(sim, namespace, "InPlaceResizedByVPA")
        assert all("vpaInPlaceUpdated" not in annotations_of(p)
                   for p in live_pods(sim, namespace, "app=pooled"))


# --- OOM right after start ----------------------------------------------------------------------------------


def test_a_container_oom_killed_before_any_sample_gets_a_memory_recommendation(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(["recommender"])
    # 300Mi from the first instant under a 256Mi limit: killed at every start, never running at a sample.
    app = _container("app", {"cpu": "100m", "memory": "256Mi"})
    app["resources"]["limits"] = {"memory": "256Mi"}
    sim.apply(_deployment("starved", {"containers": [app]}, _usage(app=("100m", "300Mi")), replicas=1),
              namespace)
    sim.apply(_vpa("starved", "Off"), namespace)
    published = Published(sim, namespace, "starved")
    targets = sim.wait_for("a recommendation for the crash-looping container",
                           lambda: published.poll().get("app"), timeout_s=90)
    # The OOM bump on the 256Mi request (nothing was ever sampled): max(256Mi + 100Mi, 256Mi × 1.2) = 356Mi,
    # then its histogram bucket and the 15% margin. No CPU: nothing is known about it.
    assert _bytes(targets["memory"]) >= 356 * 2**20, targets
    assert "cpu" not in targets, targets
    pod = live_pods(sim, namespace, "app=starved")[0]
    last = pod["status"]["containerStatuses"][0].get("lastState", {}).get("terminated", {})
    assert last.get("reason") == "OOMKilled", pod["status"]


# --- conflicts made visible ---------------------------------------------------------------------------------

HPA_ON_CPU = {
    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "contested"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "contested"},
        "minReplicas": 1, "maxReplicas": 3,
        "metrics": [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
    },
}  # fmt: skip


def _named_vpa(name: str, target: str, mode: str) -> str:
    vpa = json.loads(_vpa(target, mode))
    vpa["metadata"]["name"] = name
    return json.dumps(vpa)


def _true_condition(sim: Cluster, namespace: str, vpa: str, kind: str) -> dict[str, Any] | None:
    conditions = (sim.get_json("vpa", vpa, "-n", namespace).get("status") or {}).get("conditions") or []
    found: dict[str, Any] | None = next(
        (c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None
    )
    return found


def test_conflicts_a_second_vpa_and_an_hpa_on_the_same_target_are_reported(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    vpa_run(["recommender"])
    app = _container("app", {"cpu": "100m", "memory": "64Mi"})
    sim.apply(_deployment("contested", {"containers": [app]}, _usage(app=("50m", "40Mi")), replicas=1),
              namespace)
    sim.apply(_named_vpa("first", "contested", "Initial"), namespace)
    time.sleep(1.1)  # creationTimestamp has one-second resolution: "first" is the older, the winner
    sim.apply(_named_vpa("second", "contested", "Initial"), namespace)
    sim.apply(json.dumps(HPA_ON_CPU), namespace)

    losing = sim.wait_for("ConflictingVPA on the younger VPA",
                          lambda: _true_condition(sim, namespace, "second", "ConflictingVPA"), timeout_s=90)
    assert "first" in losing["message"], losing
    assert _true_condition(sim, namespace, "first", "ConflictingVPA") is None
    hpa = sim.wait_for("ConflictingHPA on the winning VPA",
                       lambda: _true_condition(sim, namespace, "first", "ConflictingHPA"), timeout_s=90)
    assert "contested" in hpa["message"], hpa
    assert "cpu" in hpa["message"], hpa
    assert events_for(sim, namespace, "ConflictingVPA")
    assert events_for(sim, namespace, "ConflictingHPA")


# --- reactive in-place updates ----------------------------------------------------------------------------


def test_reactive_a_new_recommendation_is_applied_in_place_without_waiting_for_the_updater_tick(
    sim: Cluster, vpa_run: VpaRunFactory, namespace: str
) -> None:
    # The updater's tick is a thousand hours away (on either clock): only the reactive path can resize.
    vpa_run(extra=["--updater-interval=1000h", "--in-place-on-recommendation=true"])
    app = _container("app", {"cpu": "100m", "memory": "50Mi"})
    sim.apply(_deployment("eager", {"containers": [app]}, _usage(app=("600m", "200Mi"))), namespace)
    pods = sim.wait_for("two running pods", lambda: _running(sim, namespace, "app=eager", 2))
    uids = {p["metadata"]["uid"] for p in pods}
    sim.apply(_vpa("eager", "InPlaceOrRecreate"), namespace)
    published = Published(sim, namespace, "eager")

    def resized() -> list[dict[str, Any]] | None:
        published.poll()
        current = _running(sim, namespace, "app=eager", 2) or []
        done = [
            p for p in current
            if p["metadata"]["uid"] in uids
            and any(_same(p["spec"]["containers"][0]["resources"]["requests"], seen["app"])
                    for seen in published.seen if "app" in seen)
        ]  # fmt: skip
        return done if len(done) == 2 else None

    pods = sim.wait_for("both pods resized in place, between updater ticks", resized, timeout_s=120)
    _marked_in_place(sim, namespace, "app=eager", {p["metadata"]["uid"] for p in pods})
    assert events_for(sim, namespace, "InPlaceResizedByVPA")
    assert not events_for(sim, namespace, "EvictedByVPA")
