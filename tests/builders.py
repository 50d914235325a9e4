"""Builders of realistic raw API JSON (pods, VPAs, Deployments) for everyone's tests and benchmarks.

A pod from `make_pod` looks like what a Kubernetes 1.35 API server returns for a Deployment's pod
(about 8 KiB as JSON): managedFields, env, probes, volumes, tolerations, the five standard conditions, and
container statuses with `allocatedResources`, `resources` and `user`. Everything is deterministic: uids
are derived from names, times from fixed bases, so tests can compare exact values.

Every builder returns a fresh plain dict (JSON types only) that callers may mutate.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]

BASE_TIME = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def rfc3339(timestamp: float) -> str:
    """Unix seconds → `2026-01-01T00:00:00Z` (whole seconds, as metav1.Time serialises)."""
    return datetime.fromtimestamp(int(timestamp), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid_for(*parts: str) -> str:
    """A stable UUID for an object, derived from its identifying parts."""
    return str(uuid.UUID(bytes=hashlib.sha256("/".join(parts).encode()).digest()[:16], version=4))


def _resources(
    cpu_request: str | None, memory_request: str | None, cpu_limit: str | None, memory_limit: str | None
) -> JSON:
    requests = {k: v for k, v in (("cpu", cpu_request), ("memory", memory_request)) if v is not None}
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    out: JSON = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def make_container(
    name: str = "app",
    *,
    image: str = "registry.example.com/team/web:1.27.3",
    cpu_request: str | None = "250m",
    memory_request: str | None = "256Mi",
    cpu_limit: str | None = None,
    memory_limit: str | None = "512Mi",
    resize_policy: dict[str, str] | None = None,
    restart_policy: str | None = None,
    port: int | None = 8080,
    probes: bool = True,
) -> JSON:
    """A `spec.containers[]` entry with the fields a real workload carries."""
    container: JSON = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {
                "name": "GOMAXPROCS",
                "valueFrom": {
                    "resourceFieldRef": {"containerName": name, "divisor": "0", "resource": "limits.cpu"}
                },
            },
        ],
        "resources": _resources(cpu_request, memory_request, cpu_limit, memory_limit),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"mountPath": "/etc/config", "name": "config", "readOnly": True},
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
            },
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
        },
    }
    if port is not None:
        container["ports"] = [{"containerPort": port, "name": "http", "protocol": "TCP"}]
    if probes and port is not None:
        container["livenessProbe"] = {
            "failureThreshold": 3,
            "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        }
        container["readinessProbe"] = {
            "failureThreshold": 3,
            "httpGet": {"path": "/readyz", "port": "http", "scheme": "HTTP"},
            "periodSeconds": 5,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        }
    if resize_policy is not None:
        container["resizePolicy"] = [
            {"resourceName": k, "restartPolicy": v} for k, v in resize_policy.items()
        ]
    if restart_policy is not None:
        container["restartPolicy"] = restart_policy
    return container


def make_container_status(
    container: JSON,
    *,
    started_at: float,
    restart_count: int = 0,
    ready: bool = True,
    last_terminated: JSON | None = None,
    state: JSON | None = None,
    actual_resources: JSON | None = None,
) -> JSON:
    """A `status.containerStatuses[]` entry as the kubelet reports it for `container`."""
    resources = container.get("resources", {})
    reported = copy.deepcopy(actual_resources if actual_resources is not None else resources)
    name = container["name"]
    status: JSON = {
        "allocatedResources": dict(reported.get("requests", {})),
        "containerID": f"containerd://{hashlib.sha256(('c' + name + str(started_at)).encode()).hexdigest()}",
        "image": container["image"],
        "imageID": f"{container['image'].split(':')[0]}@sha256:"
        f"{hashlib.sha256(container['image'].encode()).hexdigest()}",
        "lastState": {"terminated": last_terminated} if last_terminated else {},
        "name": name,
        "ready": ready,
        "resources": reported,
        "restartCount": restart_count,
        "started": True,
        "state": state if state is not None else {"running": {"startedAt": rfc3339(started_at)}},
        "user": {"linux": {"gid": 65532, "supplementalGroups": [65532], "uid": 65532}},
        "volumeMounts": [
            {"mountPath": "/etc/config", "name": "config", "readOnly": True, "recursiveReadOnly": "Disabled"},
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "recursiveReadOnly": "Disabled",
            },
        ],
    }
    return status


def _qos_class(containers: list[JSON]) -> str:
    requests_all, limits_all, any_set = True, True, False
    for container in containers:
        resources = container.get("resources", {})
        requests, limits = resources.get("requests", {}), resources.get("limits", {})
        any_set = any_set or bool(requests) or bool(limits)
        for resource in ("cpu", "memory"):
            limit = limits.get(resource)
            if limit is None:
                limits_all = False
            if requests.get(resource, limit) != limit:
                requests_all = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if requests_all and limits_all else "Burstable"


def _managed_fields(created: str, containers: list[JSON]) -> list[JSON]:
    spec_containers = {
        f'k:{{"name":"{c["name"]}"}}': {
            ".": {},
            "f:env": {'k:{"name":"LOG_LEVEL"}': {".": {}, "f:name": {}, "f:value": {}}},
            "f:image": {},
            "f:imagePullPolicy": {},
            "f:livenessProbe": {".": {}, "f:httpGet": {}},
            "f:name": {},
            "f:ports": {".": {}},
            "f:readinessProbe": {".": {}},
            "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
            "f:securityContext": {},
            "f:terminationMessagePath": {},
            "f:terminationMessagePolicy": {},
            "f:volumeMounts": {},
        }
        for c in containers
    }
    return [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": created,
            "fieldsV1": {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {".": {}},
                },
                "f:spec": {
                    "f:containers": spec_containers,
                    "f:dnsPolicy": {},
                    "f:enableServiceLinks": {},
                    "f:restartPolicy": {},
                    "f:schedulerName": {},
                    "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {},
                    "f:volumes": {},
                },
            },
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": created,
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {'k:{"type":"ContainersReady"}': {}, 'k:{"type":"Ready"}': {}},
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:hostIPs": {},
                    "f:phase": {},
                    "f:podIP": {},
                    "f:podIPs": {},
                    "f:startTime": {},
                }
            },
        },
    ]


def make_pod(
    name: str = "web-7d9f8b6c4-x2k9p",
    *,
    namespace: str = "default",
    app: str = "web",
    template_hash: str = "7d9f8b6c4",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner_kind: str | None = "ReplicaSet",
    owner_name: str | None = None,
    containers: list[JSON] | None = None,
    init_containers: list[JSON] | None = None,
    node_name: str | None = "node-a-1",
    phase: str = "Running",
    created_at: float = BASE_TIME,
    started_at: float | None = None,
    resource_version: str = "482913",
    generation: int = 1,
    ready: bool = True,
    extra_conditions: list[JSON] | None = None,
    container_statuses: list[JSON] | None = None,
    deletion_timestamp: float | None = None,
    resize_status: str | None = None,
) -> JSON:
    """A pod of a Deployment's ReplicaSet, as `GET /api/v1/namespaces/<ns>/pods/<name>` returns it.

    `containers` default to an app container and a small sidecar. `container_statuses` default to running,
    ready statuses mirroring the spec resources. `extra_conditions` are appended to the standard five
    (use them for `PodResizePending` / `PodResizeInProgress`).
    """
    created = rfc3339(created_at)
    start = started_at if started_at is not None else created_at + 2
    if containers is None:
        containers = [
            make_container("app"),
            make_container(
                "log-shipper",
                image="registry.example.com/infra/fluent-bit:3.2.1",
                cpu_request="50m",
                memory_request="64Mi",
                cpu_limit=None,
                memory_limit="128Mi",
                port=2020,
                probes=False,
            ),
        ]
    pod_labels = {"app": app, "pod-template-hash": template_hash} if labels is None else dict(labels)
    pod_annotations = {
        "kubectl.kubernetes.io/restartedAt": "2025-12-30T09:12:44Z",
        "prometheus.io/port": "8080",
        "prometheus.io/scrape": "true",
    }
    if annotations:
        pod_annotations.update(annotations)
    metadata: JSON = {
        "annotations": pod_annotations,
        "creationTimestamp": created,
        "generateName": f"{app}-{template_hash}-",
        "generation": generation,
        "labels": pod_labels,
        "managedFields": _managed_fields(created, containers),
        "name": name,
        "namespace": namespace,
        "resourceVersion": resource_version,
        "uid": uid_for("pod", namespace, name),
    }
    if owner_kind is not None:
        owner = owner_name if owner_name is not None else f"{app}-{template_hash}"
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": owner_kind,
                "name": owner,
                "uid": uid_for(owner_kind, namespace, owner),
            }
        ]
    if deletion_timestamp is not None:
        metadata["deletionTimestamp"] = rfc3339(deletion_timestamp)
        metadata["deletionGracePeriodSeconds"] = 30
    spec: JSON = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {"fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
        ],
        "volumes": [
            {"configMap": {"defaultMode": 420, "name": f"{app}-config"}, "name": "config"},
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                "name": "kube-root-ca.crt",
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        "path": "namespace",
                                    }
                                ]
                            }
                        },
                    ],
                },
            },
        ],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node_name is not None:
        spec["nodeName"] = node_name
    ready_text = "True" if ready else "False"
    conditions = [
        {
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(start + 1),
            "observedGeneration": generation,
            "status": "True",
            "type": "PodReadyToStartContainers",
        },
        {
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(start),
            "observedGeneration": generation,
            "status": "True",
            "type": "Initialized",
        },
        {
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(start + 8),
            "observedGeneration": generation,
            "status": ready_text,
            "type": "Ready",
        },
        {
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(start + 8),
            "observedGeneration": generation,
            "status": ready_text,
            "type": "ContainersReady",
        },
        {
            "lastProbeTime": None,
            "lastTransitionTime": created,
            "observedGeneration": generation,
            "status": "True",
            "type": "PodScheduled",
        },
    ]
    conditions.extend(extra_conditions or [])
    if container_statuses is None:
        container_statuses = [make_container_status(c, started_at=start + 1, ready=ready) for c in containers]
    status: JSON = {
        "conditions": conditions,
        "containerStatuses": container_statuses,
        "hostIP": "10.0.1.17",
        "hostIPs": [{"ip": "10.0.1.17"}],
        "observedGeneration": generation,
        "phase": phase,
        "podIP": "10.244.3.41",
        "podIPs": [{"ip": "10.244.3.41"}],
        "qosClass": _qos_class(containers + (init_containers or [])),
        "startTime": rfc3339(start),
    }
    if init_containers:
        status["initContainerStatuses"] = [
            make_container_status(c, started_at=start) for c in init_containers
        ]
    if resize_status is not None:
        status["resize"] = resize_status
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes' generated name suffixes


def _pod_suffix(index: int) -> str:
    """A 5-character name suffix, unique for the first 27**5 indexes, scrambled so neighbours differ."""
    scrambled = (index * 7_368_787) % 27**5  # a multiplier coprime with 27**5: a bijection
    chars = []
    for _ in range(5):
        scrambled, digit = divmod(scrambled, 27)
        chars.append(_SUFFIX_ALPHABET[digit])
    return "".join(chars)


def make_replica_pod(index: int, *, namespaces: int = 50, apps_per_namespace: int = 10) -> JSON:
    """The `index`-th pod of a cluster spread over `namespaces` namespaces with `apps_per_namespace`
    Deployments each. Deterministic, so any window of a big cluster can be built on its own."""
    namespace = f"team-{index % namespaces:03d}"
    app = f"svc-{(index // namespaces) % apps_per_namespace:02d}"
    template_hash = hashlib.sha256(f"{namespace}/{app}".encode()).hexdigest()[:9]
    suffix = _pod_suffix(index)
    return make_pod(
        f"{app}-{template_hash}-{suffix}",
        namespace=namespace,
        app=app,
        template_hash=template_hash,
        node_name=f"node-{index % 200:03d}",
        created_at=BASE_TIME + index,
        resource_version=str(100_000 + index),
    )


def make_pods(count: int, *, namespaces: int = 50, apps_per_namespace: int = 10) -> list[JSON]:
    """`count` pods spread over namespaces and Deployments, with realistic replica sharing."""
    return [
        make_replica_pod(index, namespaces=namespaces, apps_per_namespace=apps_per_namespace)
        for index in range(count)
    ]


def make_vpa(
    name: str = "web-vpa",
    *,
    namespace: str = "default",
    target_kind: str = "Deployment",
    target_name: str = "web",
    target_api_version: str = "apps/v1",
    update_mode: str | None = "Recreate",
    min_replicas: int | None = None,
    container_policies: list[JSON] | None = None,
    recommenders: list[str] | None = None,
    startup_boost: JSON | None = None,
    recommendation: list[JSON] | None = None,
    conditions: list[JSON] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    created_at: float = BASE_TIME,
    generation: int = 1,
    resource_version: str = "77120",
    observed_generation: int | None = None,
) -> JSON:
    """A `VerticalPodAutoscaler` (autoscaling.k8s.io/v1) as the API server returns it.

    `recommendation` is a list of `containerRecommendations` entries (see `make_recommendation`);
    None leaves `status` without a recommendation.
    """
    spec: JSON = {"targetRef": {"apiVersion": target_api_version, "kind": target_kind, "name": target_name}}
    if update_mode is not None or min_replicas is not None:
        policy: JSON = {}
        if update_mode is not None:
            policy["updateMode"] = update_mode
        if min_replicas is not None:
            policy["minReplicas"] = min_replicas
        spec["updatePolicy"] = policy
    if container_policies is not None:
        spec["resourcePolicy"] = {"containerPolicies": container_policies}
    if recommenders is not None:
        spec["recommenders"] = [{"name": n} for n in recommenders]
    if startup_boost is not None:
        spec["startupBoost"] = startup_boost
    status: JSON = {}
    if recommendation is not None:
        status["recommendation"] = {"containerRecommendations": recommendation}
    if conditions is not None:
        status["conditions"] = conditions
    if observed_generation is not None:
        status["observedGeneration"] = observed_generation
    metadata: JSON = {
        "creationTimestamp": rfc3339(created_at),
        "generation": generation,
        "name": name,
        "namespace": namespace,
        "resourceVersion": resource_version,
        "uid": uid_for("vpa", namespace, name),
        "managedFields": [
            {
                "apiVersion": "autoscaling.k8s.io/v1",
                "fieldsType": "FieldsV1",
                "manager": "kubectl",
                "operation": "Update",
                "time": rfc3339(created_at),
                "fieldsV1": {"f:spec": {".": {}, "f:targetRef": {}, "f:updatePolicy": {}}},
            }
        ],
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    if labels:
        metadata["labels"] = dict(labels)
    obj: JSON = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": metadata,
        "spec": spec,
    }
    if status:
        obj["status"] = status
    return obj


def make_recommendation(
    container_name: str = "app",
    *,
    target: dict[str, str] | None = None,
    lower_bound: dict[str, str] | None = None,
    upper_bound: dict[str, str] | None = None,
    uncapped_target: dict[str, str] | None = None,
) -> JSON:
    """One `status.recommendation.containerRecommendations[]` entry in the recommender's output form."""
    target = target if target is not None else {"cpu": "250m", "memory": "262144k"}
    return {
        "containerName": container_name,
        "target": target,
        "lowerBound": lower_bound if lower_bound is not None else target,
        "upperBound": upper_bound if upper_bound is not None else target,
        "uncappedTarget": uncapped_target if uncapped_target is not None else target,
    }


def make_condition(
    condition_type: str, status: str = "True", *, at: float = BASE_TIME, reason: str = "", message: str = ""
) -> JSON:
    condition: JSON = {"type": condition_type, "status": status, "lastTransitionTime": rfc3339(at)}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def make_deployment(
    name: str = "web",
    *,
    namespace: str = "default",
    replicas: int = 3,
    labels: dict[str, str] | None = None,
    containers: list[JSON] | None = None,
    created_at: float = BASE_TIME,
) -> JSON:
    """An `apps/v1` Deployment whose selector is `matchLabels: {app: <name>}` (or `labels`)."""
    match_labels = labels if labels is not None else {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid_for("Deployment", namespace, name),
            "creationTimestamp": rfc3339(created_at),
            "generation": 1,
            "resourceVersion": "51002",
            "labels": dict(match_labels),
        },
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": dict(match_labels)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {
                "metadata": {"labels": dict(match_labels)},
                "spec": {"containers": containers if containers is not None else [make_container()]},
            },
        },
        "status": {
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "updatedReplicas": replicas,
            "observedGeneration": 1,
        },
    }
