"""Pod semantics of kube-apiserver, as pure functions over wire-form pod dicts.

Owns: QoS class computation (`GetPodQOS`), the effective pod requests the scheduler and kubelet use,
pod defaulting at CREATE (`SetDefaults_Pod` / `SetDefaults_PodSpec` / container defaults; no `resizePolicy`
defaulting, which current Kubernetes does not do), create validation of container resources, the update
rule "pod spec is immutable except image, activeDeadlineSeconds, tolerations additions, ...", the
`pods/resize` merge (`dropNonResizeUpdates`) and validation (`ValidatePodResize`) per Kubernetes version,
the LimitRanger admission plugin (defaults and min/max/ratio enforcement) and label-selector matching.

One module per concern, all re-exported here: `resources` (quantities, QoS, effective requests),
`defaulting`, `validation` (create and update), `resize`, `limitranges`, `labels` (selectors, readiness,
controller owners).

Must not: do I/O, keep state or read the clock; callers pass `now` and the version explicitly. Functions
that change a pod change the dict they are given, which must be the caller's own copy.
"""

from vpa.sim.cluster.pods.defaulting import default_pod
from vpa.sim.cluster.pods.labels import controller_of, is_ready, map_selector_matches, selector_matches
from vpa.sim.cluster.pods.limitranges import forbidden, limit_range_defaults, limit_range_violations
from vpa.sim.cluster.pods.resize import (
    resize_merge,
    resize_supported,
    resources_changed,
    restart_policy_for,
    validate_resize,
)
from vpa.sim.cluster.pods.resources import (
    BEST_EFFORT,
    BURSTABLE,
    COMPUTE,
    CPU,
    GUARANTEED,
    MEMORY,
    NOT_REQUIRED,
    RESTART_CONTAINER,
    Version,
    aggregate_quantity,
    all_containers,
    amount,
    container_amounts,
    containers_aggregate,
    effective_requests,
    is_sidecar,
    qos_class,
    quantity,
    resource_list,
    safe_quantity,
)
from vpa.sim.cluster.pods.validation import (
    FieldError,
    invalid,
    validate_container_resources,
    validate_pod_level_resources,
    validate_pod_spec,
    validate_pod_update,
    validate_resize_policy,
)

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "COMPUTE",
    "CPU",
    "GUARANTEED",
    "MEMORY",
    "NOT_REQUIRED",
    "RESTART_CONTAINER",
    "FieldError",
    "Version",
    "aggregate_quantity",
    "all_containers",
    "amount",
    "container_amounts",
    "containers_aggregate",
    "controller_of",
    "default_pod",
    "effective_requests",
    "forbidden",
    "invalid",
    "is_ready",
    "is_sidecar",
    "limit_range_defaults",
    "limit_range_violations",
    "map_selector_matches",
    "qos_class",
    "quantity",
    "resize_merge",
    "resize_supported",
    "resource_list",
    "resources_changed",
    "restart_policy_for",
    "safe_quantity",
    "selector_matches",
    "validate_container_resources",
    "validate_pod_level_resources",
    "validate_pod_spec",
    "validate_pod_update",
    "validate_resize",
    "validate_resize_policy",
]
