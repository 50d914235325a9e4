"""The catalogue of resource types the simulated API server serves: built-in kinds and registered CRDs.

Owns: one `ResourceType` per served resource (group, versions, plural, kind, scope, short names, verbs,
status/scale subresources, printer columns, CRD schemas) and lookups by store key (`pods`,
`deployments.apps`), by URL (`group`, `version`, `plural`) and by kind.

Must not: hold objects or do I/O. The store owns objects; the HTTP layer owns routing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonObj = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ScaleSpec:
    """Where a resource keeps what its `scale` subresource reads and writes (JSON paths, dotted)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.selector"
    # Built-ins keep a structured `spec.selector`; the scale answer turns it into the string form.
    selector_from_spec: bool = False


@dataclass(slots=True)
class ResourceType:
    group: str
    version: str  # the preferred (storage) version
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    has_status: bool = False
    # Whether a write to the main resource leaves status alone (status subresource semantics).
    status_subresource: bool = False
    scale: ScaleSpec | None = None
    generation: bool = False
    strategic_merge: bool = True
    # Every served version (CRDs may serve several); the first is the preferred one.
    versions: tuple[str, ...] = ()
    # CRD specifics: per-version openAPIV3Schema and additionalPrinterColumns.
    crd: bool = False
    schemas: dict[str, JsonObj] = field(default_factory=dict)
    printer_columns: dict[str, list[JsonObj]] = field(default_factory=dict)
    # Built-in kinds accept any RV-less update; CRs must carry a resourceVersion on PUT.
    unconditional_update: bool = True
    # Status fields reset on create (kube-apiserver's PrepareForCreate drops client-sent status).
    reset_status_on_create: bool = False

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()
        if not self.versions:
            self.versions = (self.version,)

    @property
    def key(self) -> str:
        """The store key: `plural` for the core group, `plural.group` otherwise."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str | None = None) -> str:
        v = version or self.version
        return f"{self.group}/{v}" if self.group else v

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    *,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    status: bool = False,
    scale: ScaleSpec | None = None,
    generation: bool = False,
    reset_status: bool = False,
    verbs: tuple[str, ...] = ALL_VERBS,
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        categories=categories,
        has_status=status,
        status_subresource=status,
        scale=scale,
        generation=generation,
        reset_status_on_create=reset_status,
        verbs=verbs,
    )


_BUILTIN_SCALE = ScaleSpec(selector_from_spec=True)


def builtin_types() -> list[ResourceType]:
    """Every kind a fresh simulated cluster serves, with kube-apiserver's names and short names."""
    return [
        _builtin(
            "",
            "v1",
            "pods",
            "Pod",
            short=("po",),
            categories=("all",),
            status=True,
            generation=True,
            reset_status=True,
        ),
        _builtin("", "v1", "nodes", "Node", False, short=("no",), status=True),
        _builtin("", "v1", "namespaces", "Namespace", False, short=("ns",), status=True),
        _builtin("", "v1", "events", "Event", short=("ev",)),
        _builtin("", "v1", "limitranges", "LimitRange", short=("limits",)),
        _builtin("", "v1", "services", "Service", short=("svc",), categories=("all",), status=True),
        _builtin("", "v1", "secrets", "Secret"),
        _builtin("", "v1", "configmaps", "ConfigMap", short=("cm",)),
        _builtin("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",)),
        _builtin(
            "",
            "v1",
            "replicationcontrollers",
            "ReplicationController",
            short=("rc",),
            categories=("all",),
            status=True,
            scale=_BUILTIN_SCALE,
            generation=True,
            reset_status=True,
        ),
        _builtin("", "v1", "endpoints", "Endpoints", short=("ep",)),
        _builtin("", "v1", "resourcequotas", "ResourceQuota", short=("quota",), status=True),
        _builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), status=True),
        _builtin("events.k8s.io", "v1", "events", "Event", short=("ev",)),
        _builtin("coordination.k8s.io", "v1", "leases", "Lease"),
        _builtin(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            short=("deploy",),
            categories=("all",),
            status=True,
            scale=_BUILTIN_SCALE,
            generation=True,
            reset_status=True,
        ),
        _builtin(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            short=("rs",),
            categories=("all",),
            status=True,
            scale=_BUILTIN_SCALE,
            generation=True,
            reset_status=True,
        ),
        _builtin(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            short=("sts",),
            categories=("all",),
            status=True,
            scale=_BUILTIN_SCALE,
            generation=True,
            reset_status=True,
        ),
        _builtin(
            "apps",
            "v1",
            "daemonsets",
            "DaemonSet",
            short=("ds",),
            categories=("all",),
            status=True,
            generation=True,
            reset_status=True,
        ),
        _builtin("apps", "v1", "controllerrevisions", "ControllerRevision"),
        _builtin(
            "batch", "v1", "jobs", "Job", categories=("all",), status=True, generation=True, reset_status=True
        ),
        _builtin(
            "batch",
            "v1",
            "cronjobs",
            "CronJob",
            short=("cj",),
            categories=("all",),
            status=True,
            generation=True,
            reset_status=True,
        ),
        _builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            short=("pdb",),
            status=True,
            generation=True,
            reset_status=True,
        ),
        _builtin(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            short=("hpa",),
            categories=("all",),
            status=True,
            generation=True,
        ),
        _builtin(
            "admissionregistration.k8s.io",
            "v1",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            False,
            categories=("api-extensions",),
            generation=True,
        ),
        _builtin(
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            False,
            categories=("api-extensions",),
            generation=True,
        ),
        _builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            short=("crd", "crds"),
            categories=("api-extensions",),
            status=True,
            generation=True,
        ),
        _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role"),
        _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
        _builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        _builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        _builtin("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    ]


def crd_resource_type(crd: JsonObj) -> ResourceType:
    """The served resource a CustomResourceDefinition declares (served versions only; storage preferred)."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec.get("versions", []) if v.get("served", False)]
    storage = next((v["name"] for v in served if v.get("storage")), served[0]["name"] if served else "v1")
    ordered = [storage] + [v["name"] for v in served if v["name"] != storage]
    status_sub = any("status" in (v.get("subresources") or {}) for v in served)
    scale_raw = next(
        (
            (v.get("subresources") or {}).get("scale")
            for v in served
            if (v.get("subresources") or {}).get("scale") is not None
        ),
        None,
    )
    scale = None
    if scale_raw is not None:
        scale = ScaleSpec(
            spec_replicas_path=scale_raw.get("specReplicasPath", ".spec.replicas"),
            status_replicas_path=scale_raw.get("statusReplicasPath", ".status.replicas"),
            label_selector_path=scale_raw.get("labelSelectorPath"),
        )
    schemas = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in served}
    columns = {v["name"]: list(v.get("additionalPrinterColumns") or []) for v in served}
    return ResourceType(
        group=spec["group"],
        version=storage,
        plural=names["plural"],
        kind=names["kind"],
        singular=names.get("singular") or names["kind"].lower(),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        has_status=status_sub,
        status_subresource=status_sub,
        scale=scale,
        generation=True,
        strategic_merge=False,
        versions=tuple(ordered),
        crd=True,
        schemas=schemas,
        printer_columns=columns,
        unconditional_update=False,
    )


class Registry:
    """Lookups over the served resource types; CRDs come and go at runtime."""

    def __init__(self) -> None:
        self._by_key: dict[str, ResourceType] = {}
        self._by_url: dict[tuple[str, str, str], ResourceType] = {}

    def add(self, rt: ResourceType) -> None:
        old = self._by_key.get(rt.key)
        if old is not None:
            self.remove(old.key)
        self._by_key[rt.key] = rt
        for v in rt.versions:
            self._by_url[(rt.group, v, rt.plural)] = rt

    def remove(self, key: str) -> None:
        rt = self._by_key.pop(key, None)
        if rt is None:
            return
        for v in rt.versions:
            self._by_url.pop((rt.group, v, rt.plural), None)

    def get(self, key: str) -> ResourceType | None:
        return self._by_key.get(key)

    def by_url(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_url.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        return list(self._by_key.values())

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._by_key.values():
            if rt.kind == kind and rt.group == group and version in rt.versions:
                return rt
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Group → served versions, preferred first (core group under "")."""
        out: dict[str, list[str]] = {}
        for rt in self._by_key.values():
            versions = out.setdefault(rt.group, [])
            for v in rt.versions:
                if v not in versions:
                    versions.append(v)
        return out
