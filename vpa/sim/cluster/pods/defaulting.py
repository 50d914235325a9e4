"""Pod defaulting at CREATE: `default_pod`.

Owns: `SetDefaults_Pod` / `SetDefaults_PodSpec` and the container defaults (limits copied to missing
requests, pod-level requests from the containers' aggregate), the DefaultTolerationSeconds tolerations,
the Pending phase, the QoS class, and `metadata.generation` from Kubernetes 1.33. No `resizePolicy`
defaulting, which current Kubernetes does not do.

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from __future__ import annotations

from typing import Any

from vpa.sim.cluster.pods.resources import (
    COMPUTE,
    Version,
    aggregate_quantity,
    containers_aggregate,
    qos_class,
)
from vpa.sim.contracts import JsonObj

# --- defaulting ---------------------------------------------------------------------------------------------


def _default_container(container: dict[str, Any]) -> None:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = {}
        container["resources"] = resources
    limits = resources.get("limits")
    if isinstance(limits, dict) and limits:
        requests = resources.get("requests")
        if not isinstance(requests, dict):
            requests = {}
            resources["requests"] = requests
        for name, value in limits.items():
            requests.setdefault(name, value)
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image") or "")
    if "imagePullPolicy" not in container:
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        latest = image.endswith(":latest") or not tagged
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"


def _default_pod_requests(spec: dict[str, Any]) -> None:
    """`defaultPodRequests` (kube-apiserver 1.34+, PodLevelResources beta), after the containers' own
    defaults: a cpu or memory pod-level limit without a pod-level request gives the request the containers'
    aggregate request when they request that resource at all (regular containers and sidecars add up, an
    init container counts with the sidecars before it), else the limit's value."""
    resources = spec.get("resources")
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return
    requests = resources.get("requests")
    merged = dict(requests) if isinstance(requests, dict) else {}
    aggregate = containers_aggregate(spec)
    for name, value in limits.items():
        if name in COMPUTE and name not in merged:
            need = aggregate[name]
            merged[name] = aggregate_quantity(spec, name, need).canonical() if need else value
    if merged:
        resources["requests"] = merged


def default_pod(pod: JsonObj, version: Version) -> None:
    """Defaults the apiserver applies to a new pod (in place); `resizePolicy` stays as the client sent it."""
    spec = pod.setdefault("spec", {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if isinstance(container, dict):
            _default_container(container)
    _default_pod_requests(spec)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("serviceAccountName", "default")
    tolerations = list(spec.get("tolerations") or [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        # DefaultTolerationSeconds admission plugin.
        if not any(t.get("key") == key for t in tolerations):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    spec["tolerations"] = tolerations
    status = pod.setdefault("status", {})
    status["phase"] = "Pending"
    status["qosClass"] = qos_class(pod)
    meta = pod.setdefault("metadata", {})
    if version >= (1, 33):
        meta["generation"] = 1
