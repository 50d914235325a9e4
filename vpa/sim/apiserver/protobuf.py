"""Decoding the Kubernetes protobuf wire format for the request bodies kubectl's typed clients send.

kubectl 1.37 sends `application/vnd.kubernetes.protobuf` bodies from its typed clients (`kubectl create
deployment|configmap|secret|namespace|serviceaccount|job|cronjob|service|poddisruptionbudget|priorityclass|
role|clusterrole|rolebinding|clusterrolebinding|quota`, the evictions `kubectl drain` posts) and offers no
fallback to JSON. This module owns the `k8s\\x00` envelope (`runtime.Unknown`), the protobuf wire format,
and field tables (from Kubernetes' `generated.proto`) for those kinds, turning a body into the JSON dict
kube-apiserver would have decoded.

Go's protobuf encoding writes every non-pointer field, so zero values are dropped unless the field is a
pointer (`ptr`: an explicit 0/false/"" means something) or has no `omitempty` (`keep`). A field number
the tables do not know that carries a non-zero value makes the body undecodable (the caller answers 415),
so a gap in the tables is never silently lossy.

Must not: encode protobuf (responses are JSON; clients accept it) or know about storage.
"""

from __future__ import annotations

import base64
import time
from typing import Any

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    """A body this module cannot turn into JSON faithfully."""


# A field: (json name, type, message name for "msg"/"rep_msg", flags). Types: s (string), i (int), b (bool),
# by (bytes, base64 in JSON), msg, rep_s, rep_msg, map_ss, map_sb, map_sq (string → Quantity), time, ios.
Field = tuple[str, str, str, str]


def _f(name: str, kind: str, msg: str = "", flags: str = "") -> Field:
    return (name, kind, msg, flags)


S, INT, B = "s", "i", "b"
MESSAGES: dict[str, dict[int, Field]] = {
    "TypeMeta": {1: _f("apiVersion", S), 2: _f("kind", S)},
    "ObjectMeta": {
        1: _f("name", S),
        2: _f("generateName", S),
        3: _f("namespace", S),
        5: _f("uid", S),
        6: _f("resourceVersion", S),
        7: _f("generation", INT),
        8: _f("creationTimestamp", "time"),
        9: _f("deletionTimestamp", "time"),
        10: _f("deletionGracePeriodSeconds", INT, flags="ptr"),
        11: _f("labels", "map_ss"),
        12: _f("annotations", "map_ss"),
        13: _f("ownerReferences", "rep_msg", "OwnerReference"),
        14: _f("finalizers", "rep_s"),
    },
    "OwnerReference": {
        1: _f("kind", S),
        3: _f("name", S),
        4: _f("uid", S),
        5: _f("apiVersion", S),
        6: _f("controller", B, flags="ptr"),
        7: _f("blockOwnerDeletion", B, flags="ptr"),
    },
    "LabelSelector": {
        1: _f("matchLabels", "map_ss"),
        2: _f("matchExpressions", "rep_msg", "LabelSelectorRequirement"),
    },
    "LabelSelectorRequirement": {1: _f("key", S), 2: _f("operator", S), 3: _f("values", "rep_s")},
    "ObjectReference": {
        1: _f("kind", S),
        2: _f("namespace", S),
        3: _f("name", S),
        4: _f("uid", S),
        5: _f("apiVersion", S),
        6: _f("resourceVersion", S),
        7: _f("fieldPath", S),
    },
    "LocalObjectReference": {1: _f("name", S)},
    "ConfigMap": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("data", "map_ss"),
        3: _f("binaryData", "map_sb"),
        4: _f("immutable", B, flags="ptr"),
    },
    "Secret": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("data", "map_sb"),
        3: _f("type", S),
        4: _f("stringData", "map_ss"),
        5: _f("immutable", B, flags="ptr"),
    },
    "Namespace": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "NamespaceSpec"),
        3: _f("status", "msg", "NamespaceStatus"),
    },
    "NamespaceSpec": {1: _f("finalizers", "rep_s")},
    "NamespaceStatus": {1: _f("phase", S)},
    "ServiceAccount": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("secrets", "rep_msg", "ObjectReference"),
        3: _f("imagePullSecrets", "rep_msg", "LocalObjectReference"),
        4: _f("automountServiceAccountToken", B, flags="ptr"),
    },
    "Deployment": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "DeploymentSpec"),
        3: _f("status", "msg", "DeploymentStatus"),
    },
    "DeploymentSpec": {
        1: _f("replicas", INT, flags="ptr"),
        2: _f("selector", "msg", "LabelSelector"),
        3: _f("template", "msg", "PodTemplateSpec"),
        4: _f("strategy", "msg", "DeploymentStrategy"),
        5: _f("minReadySeconds", INT),
        6: _f("revisionHistoryLimit", INT, flags="ptr"),
        7: _f("paused", B),
        9: _f("progressDeadlineSeconds", INT, flags="ptr"),
    },
    "DeploymentStrategy": {1: _f("type", S), 2: _f("rollingUpdate", "msg", "RollingUpdateDeployment")},
    "RollingUpdateDeployment": {
        1: _f("maxUnavailable", "ios", flags="ptr"),
        2: _f("maxSurge", "ios", flags="ptr"),
    },
    "DeploymentStatus": {
        1: _f("observedGeneration", INT),
        2: _f("replicas", INT),
        3: _f("updatedReplicas", INT),
        4: _f("availableReplicas", INT),
        5: _f("unavailableReplicas", INT),
        7: _f("readyReplicas", INT),
    },
    "PodTemplateSpec": {1: _f("metadata", "msg", "ObjectMeta"), 2: _f("spec", "msg", "PodSpec")},
    "PodSpec": {
        2: _f("containers", "rep_msg", "Container"),
        3: _f("restartPolicy", S),
        4: _f("terminationGracePeriodSeconds", INT, flags="ptr"),
        5: _f("activeDeadlineSeconds", INT, flags="ptr"),
        6: _f("dnsPolicy", S),
        7: _f("nodeSelector", "map_ss"),
        8: _f("serviceAccountName", S),
        9: _f("serviceAccount", S),
        10: _f("nodeName", S),
        11: _f("hostNetwork", B),
        12: _f("hostPID", B),
        13: _f("hostIPC", B),
        15: _f("imagePullSecrets", "rep_msg", "LocalObjectReference"),
        16: _f("hostname", S),
        17: _f("subdomain", S),
        19: _f("schedulerName", S),
        20: _f("initContainers", "rep_msg", "Container"),
        21: _f("automountServiceAccountToken", B, flags="ptr"),
        24: _f("priorityClassName", S),
        25: _f("priority", INT, flags="ptr"),
        29: _f("runtimeClassName", S, flags="ptr"),
        30: _f("enableServiceLinks", B, flags="ptr"),
        31: _f("preemptionPolicy", S, flags="ptr"),
        35: _f("setHostnameAsFQDN", B, flags="ptr"),
        37: _f("hostUsers", B, flags="ptr"),
    },
    "Container": {
        1: _f("name", S, flags="keep"),
        2: _f("image", S),
        3: _f("command", "rep_s"),
        4: _f("args", "rep_s"),
        5: _f("workingDir", S),
        6: _f("ports", "rep_msg", "ContainerPort"),
        7: _f("env", "rep_msg", "EnvVar"),
        8: _f("resources", "msg", "ResourceRequirements"),
        13: _f("terminationMessagePath", S),
        14: _f("imagePullPolicy", S),
        16: _f("stdin", B),
        17: _f("stdinOnce", B),
        18: _f("tty", B),
        20: _f("terminationMessagePolicy", S),
        23: _f("resizePolicy", "rep_msg", "ContainerResizePolicy"),
        24: _f("restartPolicy", S, flags="ptr"),
    },
    "ContainerPort": {
        1: _f("name", S),
        2: _f("hostPort", INT),
        3: _f("containerPort", INT, flags="keep"),
        4: _f("protocol", S),
        5: _f("hostIP", S),
    },
    "EnvVar": {1: _f("name", S, flags="keep"), 2: _f("value", S)},
    "ResourceRequirements": {1: _f("limits", "map_sq"), 2: _f("requests", "map_sq")},
    "ContainerResizePolicy": {1: _f("resourceName", S), 2: _f("restartPolicy", S)},
    "Job": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "JobSpec"),
        3: _f("status", "msg", "JobStatus"),
    },
    "JobSpec": {
        1: _f("parallelism", INT, flags="ptr"),
        2: _f("completions", INT, flags="ptr"),
        3: _f("activeDeadlineSeconds", INT, flags="ptr"),
        4: _f("selector", "msg", "LabelSelector"),
        5: _f("manualSelector", B, flags="ptr"),
        6: _f("template", "msg", "PodTemplateSpec"),
        7: _f("backoffLimit", INT, flags="ptr"),
        8: _f("ttlSecondsAfterFinished", INT, flags="ptr"),
        9: _f("completionMode", S, flags="ptr"),
        10: _f("suspend", B, flags="ptr"),
    },
    "JobStatus": {
        4: _f("active", INT),
        5: _f("succeeded", INT),
        6: _f("failed", INT),
        7: _f("completedIndexes", S),
    },
    "CronJob": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "CronJobSpec"),
        3: _f("status", "msg", "CronJobStatus"),
    },
    "CronJobSpec": {
        1: _f("schedule", S),
        2: _f("startingDeadlineSeconds", INT, flags="ptr"),
        3: _f("concurrencyPolicy", S),
        4: _f("suspend", B, flags="ptr"),
        5: _f("jobTemplate", "msg", "JobTemplateSpec"),
        6: _f("successfulJobsHistoryLimit", INT, flags="ptr"),
        7: _f("failedJobsHistoryLimit", INT, flags="ptr"),
        8: _f("timeZone", S, flags="ptr"),
    },
    "CronJobStatus": {},
    "JobTemplateSpec": {1: _f("metadata", "msg", "ObjectMeta"), 2: _f("spec", "msg", "JobSpec")},
    "PodDisruptionBudget": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "PodDisruptionBudgetSpec"),
        3: _f("status", "msg", "PodDisruptionBudgetStatus"),
    },
    "PodDisruptionBudgetSpec": {
        1: _f("minAvailable", "ios", flags="ptr"),
        2: _f("selector", "msg", "LabelSelector"),
        3: _f("maxUnavailable", "ios", flags="ptr"),
        4: _f("unhealthyPodEvictionPolicy", S, flags="ptr"),
    },
    "PodDisruptionBudgetStatus": {},
    "PriorityClass": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("value", INT, flags="keep"),
        3: _f("globalDefault", B),
        4: _f("description", S),
        5: _f("preemptionPolicy", S, flags="ptr"),
    },
    "Service": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "ServiceSpec"),
        3: _f("status", "msg", "ServiceStatus"),
    },
    "ServiceSpec": {
        1: _f("ports", "rep_msg", "ServicePort"),
        2: _f("selector", "map_ss"),
        3: _f("clusterIP", S),
        4: _f("type", S),
        5: _f("externalIPs", "rep_s"),
        7: _f("sessionAffinity", S),
        10: _f("externalName", S),
    },
    "ServicePort": {
        1: _f("name", S),
        2: _f("protocol", S),
        3: _f("port", INT, flags="keep"),
        4: _f("targetPort", "ios"),
        5: _f("nodePort", INT),
        6: _f("appProtocol", S, flags="ptr"),
    },
    "ServiceStatus": {},
    "Role": {1: _f("metadata", "msg", "ObjectMeta"), 2: _f("rules", "rep_msg", "PolicyRule")},
    "ClusterRole": {1: _f("metadata", "msg", "ObjectMeta"), 2: _f("rules", "rep_msg", "PolicyRule")},
    "PolicyRule": {
        1: _f("verbs", "rep_s"),
        2: _f("apiGroups", "rep_s"),
        3: _f("resources", "rep_s"),
        4: _f("resourceNames", "rep_s"),
        5: _f("nonResourceURLs", "rep_s"),
    },
    "RoleBinding": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("subjects", "rep_msg", "Subject"),
        3: _f("roleRef", "msg", "RoleRef"),
    },
    "Subject": {1: _f("kind", S), 2: _f("apiGroup", S), 3: _f("name", S), 4: _f("namespace", S)},
    "RoleRef": {1: _f("apiGroup", S, flags="keep"), 2: _f("kind", S), 3: _f("name", S)},
    "ResourceQuota": {
        1: _f("metadata", "msg", "ObjectMeta"),
        2: _f("spec", "msg", "ResourceQuotaSpec"),
        3: _f("status", "msg", "ResourceQuotaStatus"),
    },
    "ResourceQuotaSpec": {1: _f("hard", "map_sq"), 2: _f("scopes", "rep_s")},
    "ResourceQuotaStatus": {},
    "Eviction": {1: _f("metadata", "msg", "ObjectMeta"), 2: _f("deleteOptions", "msg", "DeleteOptions")},
    "DeleteOptions": {
        1: _f("gracePeriodSeconds", INT, flags="ptr"),
        2: _f("preconditions", "msg", "Preconditions"),
        3: _f("orphanDependents", B, flags="ptr"),
        4: _f("propagationPolicy", S, flags="ptr"),
        5: _f("dryRun", "rep_s"),
    },
    "Preconditions": {1: _f("uid", S, flags="ptr"), 2: _f("resourceVersion", S, flags="ptr")},
}
# Top-level kinds by apiVersion and kind.
KINDS: dict[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "Namespace"): "Namespace",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Service"): "Service",
    ("apps/v1", "Deployment"): "Deployment",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "RoleBinding",
    ("v1", "ResourceQuota"): "ResourceQuota",
}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf):
            raise ProtobufError("truncated varint")
        c = buf[i]
        i += 1
        result |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return result, i
        if shift > 70:
            raise ProtobufError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) in order; only varint and length-delimited fields occur here."""
    out: list[tuple[int, int, int | bytes]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
            out.append((num, wt, v))
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ProtobufError("truncated field")
            out.append((num, wt, buf[i : i + n]))
            i += n
        else:
            raise ProtobufError(f"unsupported wire type {wt}")
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _str(v: int | bytes) -> str:
    if not isinstance(v, bytes):
        raise ProtobufError("expected a length-delimited string")
    return v.decode()


def _map_entry(v: int | bytes) -> tuple[str, int | bytes]:
    if not isinstance(v, bytes):
        raise ProtobufError("expected a map entry")
    key = ""
    val: int | bytes = b""
    for num, _, x in _fields(v):
        if num == 1:
            key = _str(x)
        elif num == 2:
            val = x
    return key, val


def _time(v: int | bytes) -> str | None:
    if not isinstance(v, bytes):
        raise ProtobufError("expected a Time message")
    seconds = 0
    for num, _, x in _fields(v):
        if num == 1 and isinstance(x, int):
            seconds = _signed(x)
    if seconds == 0 and not v:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _int_or_string(v: int | bytes) -> int | str:
    if not isinstance(v, bytes):
        raise ProtobufError("expected an IntOrString message")
    kind, ival, sval = 0, 0, ""
    for num, _, x in _fields(v):
        if num == 1 and isinstance(x, int):
            kind = x
        elif num == 2 and isinstance(x, int):
            ival = _signed(x)
        elif num == 3:
            sval = _str(x)
    return sval if kind == 1 else ival


def _is_zero(wt: int, v: int | bytes) -> bool:
    return v == 0 if wt == 0 else len(v) == 0  # type: ignore[arg-type]


def decode_message(name: str, buf: bytes) -> dict[str, Any]:
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for num, wt, v in _fields(buf):
        spec = table.get(num)
        if spec is None:
            if _is_zero(wt, v):
                continue  # an unset non-pointer field we do not model: nothing is lost
            raise ProtobufError(f"{name}: field {num} is not supported by the simulator's protobuf decoder")
        key, kind, sub, flags = spec
        keep = flags in ("ptr", "keep")
        if kind == S:
            s = _str(v)
            if s or keep:
                out[key] = s
        elif kind == INT:
            if not isinstance(v, int):
                raise ProtobufError(f"{name}.{key}: expected an integer")
            if v or keep:
                out[key] = _signed(v)
        elif kind == B:
            if v or keep:
                out[key] = bool(v)
        elif kind == "msg":
            if not isinstance(v, bytes):
                raise ProtobufError(f"{name}.{key}: expected a message")
            out[key] = decode_message(sub, v)
        elif kind == "rep_msg":
            if not isinstance(v, bytes):
                raise ProtobufError(f"{name}.{key}: expected a message")
            out.setdefault(key, []).append(decode_message(sub, v))
        elif kind == "rep_s":
            out.setdefault(key, []).append(_str(v))
        elif kind in ("map_ss", "map_sb", "map_sq"):
            k, val = _map_entry(v)
            m = out.setdefault(key, {})
            if kind == "map_ss":
                m[k] = _str(val) if val else ""
            elif kind == "map_sb":
                m[k] = base64.b64encode(val if isinstance(val, bytes) else b"").decode()
            else:
                quantity = {n: x for n, _, x in _fields(val if isinstance(val, bytes) else b"")}
                m[k] = _str(quantity.get(1, b""))
        elif kind == "time":
            t = _time(v)
            if t is not None:
                out[key] = t
        elif kind == "ios":
            out[key] = _int_or_string(v)
        else:  # pragma: no cover - the tables only use the kinds above
            raise ProtobufError(f"unknown field kind {kind}")
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A `k8s\\x00`-prefixed protobuf body as the JSON object it encodes (apiVersion and kind included)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    type_meta: dict[str, Any] = {}
    raw = b""
    for num, _, v in _fields(body[len(MAGIC) :]):
        if num == 1 and isinstance(v, bytes):
            type_meta = decode_message("TypeMeta", v)
        elif num == 2 and isinstance(v, bytes):
            raw = v
        elif num == 3 and v:
            raise ProtobufError("content encodings are not supported")
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise ProtobufError(f"protobuf bodies of {api_version} {kind} are not supported by the simulator")
    obj = {"apiVersion": api_version, "kind": kind}
    obj.update(decode_message(message, raw))
    return obj
