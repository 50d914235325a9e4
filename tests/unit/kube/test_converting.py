"""Raw API JSON → views: every field the views keep, errors that name the field, sharing, and writers."""

from __future__ import annotations

import copy
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import (
    BASE_TIME,
    make_condition,
    make_container,
    make_container_status,
    make_deployment,
    make_pod,
    make_pods,
    make_recommendation,
    make_vpa,
    rfc3339,
)
from vpa.kube.converting import (
    ConversionError,
    Interner,
    format_time,
    parse_time,
    pod_from_dict,
    recommendation_to_dict,
    selector_from_scale,
    selector_from_workload,
    vpa_from_dict,
    vpa_status_from_dict,
    vpa_status_to_dict,
)
from vpa.model.pod import ContainerStatusView, ContainerView, OwnerRef, PodCondition
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.vpa import (
    Condition,
    ContainerResourcePolicy,
    ContainerScalingMode,
    ControlledValues,
    EvictionRequirement,
    Recommendation,
    RecommendedContainerResources,
    StartupBoost,
    TargetRef,
    UpdateMode,
    UpdatePolicy,
    VpaStatus,
)

MiB = 1024 * 1024

# --- pods -------------------------------------------------------------------------------------------------


def _resizing_pod() -> dict[str, Any]:
    """A pod mid-resize with an OOM in its past, a native sidecar and a plain init container."""
    app = make_container(
        "app",
        cpu_request="500m",
        memory_request="1Gi",
        cpu_limit="1",
        memory_limit="2Gi",
        resize_policy={"cpu": "NotRequired", "memory": "RestartContainer"},
    )
    shipper = make_container(
        "log-shipper", cpu_request="50m", memory_request="64Mi", memory_limit="128Mi", port=None
    )
    sidecar = make_container(
        "proxy",
        cpu_request="20m",
        memory_request="32Mi",
        memory_limit=None,
        restart_policy="Always",
        port=None,
    )
    migrate = make_container("migrate", cpu_request=None, memory_request=None, memory_limit=None, port=None)
    app_status = make_container_status(
        app,
        started_at=BASE_TIME + 60,
        restart_count=2,
        last_terminated={
            "exitCode": 137,
            "reason": "OOMKilled",
            "startedAt": rfc3339(BASE_TIME + 10),
            "finishedAt": rfc3339(BASE_TIME + 55),
            "containerID": "containerd://abc",
        },
        actual_resources={
            "requests": {"cpu": "400m", "memory": "1Gi"},
            "limits": {"cpu": "800m", "memory": "2Gi"},
        },
    )
    app_status["allocatedResources"] = {"cpu": "500m", "memory": "1Gi"}
    shipper_status = make_container_status(
        shipper,
        started_at=BASE_TIME + 5,
        ready=False,
        state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
    )
    shipper_status.pop("resources")
    shipper_status.pop("allocatedResources")
    pod = make_pod(
        "web-7d9f8b6c4-x2k9p",
        namespace="shop",
        containers=[app, shipper],
        init_containers=[sidecar, migrate],
        container_statuses=[app_status, shipper_status],
        annotations={
            "vpaObservedContainers": "app, log-shipper",
            "vpaUpdates": "Pod resources updated by web",
            "vpaCpuStartupBoost/app": '{"requests":{"cpu":"250m"},"limits":{}}',
            "vpaInPlaceUpdated": "true",
        },
        extra_conditions=[
            make_condition(
                "PodResizePending",
                "True",
                at=BASE_TIME + 100,
                reason="Deferred",
                message="Node didn't have enough capacity: cpu, requested: 1000, capacity: 800",
            ),
            make_condition("PodResizeInProgress", "False", at=BASE_TIME + 90),
        ],
        deletion_timestamp=BASE_TIME + 500,
        resize_status="Deferred",
        generation=3,
    )
    pod["status"]["observedGeneration"] = 2
    pod["metadata"]["ownerReferences"].insert(
        0, {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u", "controller": False}
    )
    return pod


def test_full_pod_view() -> None:
    view = pod_from_dict(_resizing_pod(), interner=Interner())
    assert (view.namespace, view.name, view.key) == (
        "shop",
        "web-7d9f8b6c4-x2k9p",
        "shop/web-7d9f8b6c4-x2k9p",
    )
    assert view.uid
    assert view.resource_version == "482913"
    assert dict(view.labels) == {"app": "web", "pod-template-hash": "7d9f8b6c4"}
    # Only the annotations vpa reads survive; vpaUpdates, prometheus.io/* and kubectl's are dropped.
    assert dict(view.annotations) == {
        "vpaObservedContainers": "app, log-shipper",
        "vpaCpuStartupBoost/app": '{"requests":{"cpu":"250m"},"limits":{}}',
        "vpaInPlaceUpdated": "true",
    }
    assert view.owner is not None
    assert (view.owner.kind, view.owner.name, view.owner.api_version, view.owner.controller) == (
        "ReplicaSet",
        "web-7d9f8b6c4",
        "apps/v1",
        True,
    )
    assert (view.node_name, view.phase, view.qos_class) == ("node-a-1", "Running", "Burstable")
    assert view.generate_name == "web-7d9f8b6c4-"
    assert (view.generation, view.observed_generation) == (3, 2)
    assert view.creation_timestamp == BASE_TIME
    assert view.start_time == BASE_TIME + 2
    assert view.deletion_timestamp == BASE_TIME + 500
    assert view.is_terminating
    assert view.resize_status == "Deferred"
    assert not view.has_pod_level_resources

    app, shipper = view.containers
    assert app == ContainerView(
        "app",
        Resources(500, 1024 * MiB),
        Resources(1000, 2048 * MiB),
        {"cpu": "NotRequired", "memory": "RestartContainer"},
        None,
        True,
    )
    assert app.restarts_on_resize("memory")
    assert not app.restarts_on_resize("cpu")
    assert shipper.requests == Resources(50, 64 * MiB)
    assert shipper.limits == Resources(None, 128 * MiB)
    sidecar, migrate = view.init_containers
    assert sidecar.is_sidecar
    assert not migrate.is_sidecar
    assert not migrate.has_resources
    assert view.sidecars == (sidecar,)

    app_status, shipper_status = view.container_statuses
    assert app_status == ContainerStatusView(
        name="app",
        ready=True,
        restart_count=2,
        state="running",
        started_at=BASE_TIME + 60,
        state_reason=None,
        state_finished_at=None,
        last_terminated_reason="OOMKilled",
        last_terminated_started_at=BASE_TIME + 10,
        last_terminated_at=BASE_TIME + 55,
        allocated=Resources(500, 1024 * MiB),
        actual_requests=Resources(400, 1024 * MiB),
        actual_limits=Resources(800, 2048 * MiB),
    )
    assert shipper_status.state == "waiting"
    assert shipper_status.state_reason == "CrashLoopBackOff"
    assert shipper_status.actual is None
    assert shipper_status.allocated is None
    assert [s.name for s in view.init_container_statuses] == ["proxy", "migrate"]

    assert view.ready == PodCondition("Ready", "True", "", "", BASE_TIME + 10)
    assert view.resize_pending == PodCondition(
        "PodResizePending",
        "True",
        "Deferred",
        "Node didn't have enough capacity: cpu, requested: 1000, capacity: 800",
        BASE_TIME + 100,
    )
    assert view.resize_in_progress is not None
    assert not view.resize_in_progress.is_true
    # Only the conditions vpa reads, in the pod's order.
    assert [c.type for c in view.conditions] == ["Ready", "PodResizePending", "PodResizeInProgress"]

    # Upstream's "current" resources: container status first, spec as fallback.
    assert view.current_requests("app") == Resources(400, 1024 * MiB)
    assert view.current_limits("app") == Resources(800, 2048 * MiB)
    assert view.current_requests("log-shipper") == Resources(50, 64 * MiB)
    assert view.current_requests("proxy") == Resources(20, 32 * MiB)
    assert view.current_requests("nope") == Resources()
    assert view.observed_containers() == ("app", "log-shipper")
    assert view.boosted_containers() == ("app",)


def test_terminated_state_and_missing_optional_parts() -> None:
    pod = make_pod(owner_kind=None, node_name=None)
    status = pod["status"]["containerStatuses"][0]
    status["state"] = {
        "terminated": {
            "exitCode": 137,
            "reason": "OOMKilled",
            "startedAt": rfc3339(BASE_TIME),
            "finishedAt": rfc3339(BASE_TIME + 30),
        }
    }
    del pod["status"]["startTime"]
    pod["spec"]["resources"] = {"requests": {"cpu": "1"}}
    view = pod_from_dict(pod, interner=Interner())
    assert view.owner is None
    assert view.node_name == ""
    assert view.start_time is None
    assert view.has_pod_level_resources
    app = view.container_statuses[0]
    assert (app.state, app.state_reason, app.started_at, app.state_finished_at) == (
        "terminated",
        "OOMKilled",
        BASE_TIME,
        BASE_TIME + 30,
    )


def test_pending_pod_without_status() -> None:
    pod = make_pod(node_name=None)
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    view = pod_from_dict(pod, interner=Interner())
    assert view.phase == "Pending"
    assert view.container_statuses == ()
    assert view.ready is None
    # No container status: the spec is current.
    assert view.current_requests("app") == Resources(250, 256 * MiB)


def test_replicas_share_identical_pieces() -> None:
    interner = Interner()
    first = pod_from_dict(make_pod("web-1"), interner=interner)
    second = pod_from_dict(make_pod("web-2", created_at=BASE_TIME + 60), interner=interner)
    other = pod_from_dict(make_pod("api-1", app="api", template_hash="55d8f"), interner=interner)
    assert first.labels is second.labels
    assert first.containers is second.containers
    assert first.owner is second.owner
    assert first.container_statuses[0].actual_requests is second.containers[0].requests
    assert first.labels is not other.labels
    assert first.owner is not other.owner
    assert first.containers[0] is other.containers[0]  # same spec in another Deployment: still shared
    assert first.uid != second.uid


def test_numeric_quantities_and_no_aliasing_through_the_cache() -> None:
    interner = Interner()
    pod = make_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": 1, "memory": 1.5e9}}
    view = pod_from_dict(pod, interner=interner)
    assert view.containers[0].requests == Resources(1000, 1_500_000_000)
    # The same values as booleans must still be rejected, whatever the interner has seen.
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": True}}
    with pytest.raises(ConversionError, match="got bool"):
        pod_from_dict(pod, interner=interner)


def test_interner_is_bounded() -> None:
    interner = Interner(max_entries=10)
    for index in range(30):
        interner.resources(index, None)
        assert len(interner) <= 10
    shared = interner.resources(1, 2)
    assert interner.resources(1, 2) is shared


def test_recurring_strings_are_shared_outside_the_interpreters_table() -> None:
    """A workload's names, uids and label values are shared through the interner's own table (not the
    interpreter's, which is never cleared), and counted toward its bound."""
    interner = Interner()
    words = [f"web-{n}-7d9f{n:04x}" for n in range(6400)]
    shared = [interner.text(word) for word in words]
    again = [interner.text("".join(["web-", word[4:]])) for word in words]  # equal, not the same object
    assert all(a is b for a, b in zip(shared, again, strict=True))
    assert len(interner) == len(words)
    pod = pod_from_dict(make_pod("web-1", app="cart", template_hash="5f6c9"), interner=interner)
    assert pod.owner is not None
    texts = set(interner._texts)
    assert {pod.generate_name, pod.owner.name, pod.owner.uid, pod.labels["app"]} <= texts
    bounded = Interner(max_entries=10)
    for word in words[:30]:
        bounded.text(word)
        assert len(bounded) <= 10


POD_ERRORS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "bad-request-quantity",
        lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="abc"),
        "spec.containers[0].resources.requests.cpu",
        "quantity 'abc'",
    ),
    (
        "bad-status-quantity",
        lambda p: p["status"]["containerStatuses"][1]["resources"]["limits"].update(memory="1Qi"),
        "status.containerStatuses[1].resources.limits.memory",
        "unknown suffix",
    ),
    (
        "labels-not-object",
        lambda p: p["metadata"].update(labels=["a"]),
        "metadata.labels",
        "expected an object",
    ),
    (
        "label-value-not-string",
        lambda p: p["metadata"]["labels"].update(app=3),
        "metadata.labels['app']",
        "expected a string, got int",
    ),
    (
        "bad-timestamp",
        lambda p: p["metadata"].update(creationTimestamp="yesterday"),
        "metadata.creationTimestamp",
        "not an RFC3339 timestamp",
    ),
    (
        "containers-not-list",
        lambda p: p["spec"].update(containers={"name": "x"}),
        "spec.containers",
        "expected a list",
    ),
    (
        "container-without-name",
        lambda p: p["spec"]["containers"][1].pop("name"),
        "spec.containers[1].name",
        "is required",
    ),
    (
        "restart-count-not-int",
        lambda p: p["status"]["containerStatuses"][0].update(restartCount="2"),
        "status.containerStatuses[0].restartCount",
        "expected an integer",
    ),
    (
        "controller-not-bool",
        lambda p: p["metadata"]["ownerReferences"][0].update(controller="yes"),
        "metadata.ownerReferences[0].controller",
        "expected a boolean",
    ),
    (
        "condition-time",
        lambda p: p["status"]["conditions"][2].update(lastTransitionTime=5),
        "status.conditions[2].lastTransitionTime",
        "expected an RFC3339 timestamp string, got int",
    ),
    (
        "cpu-bool",
        lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu=True),
        "spec.containers[0].resources.requests.cpu",
        "expected a quantity, got bool",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "message"), [c[1:] for c in POD_ERRORS], ids=[c[0] for c in POD_ERRORS]
)
def test_malformed_pod_names_the_field(
    mutate: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    pod = make_pod()
    mutate(pod)
    with pytest.raises(ConversionError) as caught:
        pod_from_dict(pod, interner=Interner())
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert message in str(caught.value)


def test_pod_view_memory_budget() -> None:
    """Retained memory per cached pod stays under 2 KiB for realistic replicas (25 per Deployment)."""
    raw = [orjson.dumps(pod) for pod in make_pods(500, namespaces=5, apps_per_namespace=4)]
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        interner = Interner()
        cache = {}
        for item in raw:
            view = pod_from_dict(orjson.loads(item), interner=interner)
            cache[view.key] = view
        del view
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert len(cache) == 500
    assert retained / len(cache) <= 2048, f"{retained / len(cache):.0f} bytes per pod"


# --- VPAs -------------------------------------------------------------------------------------------------


def _full_vpa() -> dict[str, Any]:
    vpa = make_vpa(
        "web",
        namespace="shop",
        update_mode="InPlaceOrRecreate",
        min_replicas=2,
        recommenders=["hamster"],
        startup_boost={"cpu": {"type": "Factor", "factor": 3, "durationSeconds": 20}},
        annotations={
            "vpa-post-processor.kubernetes.io/app_integerCPU": "true",
            "kubectl.kubernetes.io/last-applied-configuration": '{"big": "blob"}',
        },
        labels={"team": "shop"},
        container_policies=[
            {"containerName": "*", "mode": "Off"},
            {
                "containerName": "app",
                "mode": "Auto",
                "minAllowed": {"cpu": "100m", "memory": "128Mi"},
                "maxAllowed": {"cpu": 2, "memory": "4Gi"},
                "controlledResources": ["cpu", "memory"],
                "controlledValues": "RequestsOnly",
                "oomBumpUpRatio": "1.5",
                "oomMinBumpUp": "100Mi",
                "memoryAggregationIntervalSeconds": 3600,
                "memoryAggregationIntervalCount": 24,
                "startupBoost": {"cpu": {"type": "Quantity", "quantity": "500m", "durationSeconds": 30}},
            },
        ],
        recommendation=[
            make_recommendation(
                "app",
                target={"cpu": "250m", "memory": "262144k"},
                lower_bound={"cpu": "100m", "memory": "200Mi"},
                upper_bound={"cpu": "1", "memory": "1Gi"},
                uncapped_target={"cpu": "240m", "memory": "262144k"},
            ),
        ],
        conditions=[make_condition("RecommendationProvided", "True", at=BASE_TIME + 300)],
        observed_generation=4,
        generation=4,
    )
    vpa["spec"]["updatePolicy"]["evictionRequirements"] = [
        {"resources": ["cpu", "memory"], "changeRequirement": "TargetHigherThanRequests"}
    ]
    vpa["spec"]["updatePolicy"]["evictAfterOOMSeconds"] = 120
    return vpa


def test_full_vpa_view() -> None:
    view = vpa_from_dict(_full_vpa())
    assert (view.namespace, view.name, view.key, view.generation) == ("shop", "web", "shop/web", 4)
    assert view.uid
    assert view.resource_version == "77120"
    assert dict(view.labels) == {"team": "shop"}
    assert dict(view.annotations) == {"vpa-post-processor.kubernetes.io/app_integerCPU": "true"}
    assert view.target_ref == TargetRef("apps/v1", "Deployment", "web")
    assert view.update_policy == UpdatePolicy(
        update_mode=UpdateMode.IN_PLACE_OR_RECREATE,
        min_replicas=2,
        eviction_requirements=(EvictionRequirement(("cpu", "memory"), "TargetHigherThanRequests"),),
        evict_after_oom_s=120,
    )
    assert view.update_policy_set
    assert view.recommenders == ("hamster",)
    assert view.handled_by("hamster")
    assert not view.handled_by("default")
    assert view.startup_boost == StartupBoost("Factor", factor=3, quantity_millicores=None, duration_s=20)
    star, app = view.resource_policy.container_policies
    assert star == ContainerResourcePolicy("*", mode=ContainerScalingMode.OFF)
    assert app == ContainerResourcePolicy(
        container_name="app",
        mode=ContainerScalingMode.AUTO,
        min_allowed=Resources(100, 128 * MiB),
        max_allowed=Resources(2000, 4096 * MiB),
        controlled_resources=("cpu", "memory"),
        controlled_values=ControlledValues.REQUESTS_ONLY,
        oom_bump_up_ratio=1.5,
        oom_min_bump_up_bytes=100 * MiB,
        memory_aggregation_interval_s=3600,
        memory_aggregation_interval_count=24,
        startup_boost=StartupBoost("Quantity", factor=None, quantity_millicores=500, duration_s=30),
    )
    assert view.resource_policy.for_container("app") is app
    assert view.resource_policy.for_container("sidecar") is star
    assert view.status == VpaStatus(
        recommendation=Recommendation(
            (
                RecommendedContainerResources(
                    "app",
                    target=Resources(250, 262_144_000),
                    lower_bound=Resources(100, 200 * MiB),
                    upper_bound=Resources(1000, 1024 * MiB),
                    uncapped_target=Resources(240, 262_144_000),
                ),
            )
        ),
        conditions=(Condition("RecommendationProvided", "True", BASE_TIME + 300, "", ""),),
        observed_generation=4,
    )
    assert view.creation_timestamp == BASE_TIME
    assert view.fractional_quantity_fields == ()
    assert view.has_startup_boost()


MODE_CASES = [
    ("empty-string", {"updateMode": ""}, None, UpdateMode.RECREATE),
    ("no-mode", {"minReplicas": 1}, None, UpdateMode.RECREATE),
    ("auto", {"updateMode": "Auto"}, UpdateMode.AUTO, UpdateMode.AUTO),
    ("off", {"updateMode": "Off"}, UpdateMode.OFF, UpdateMode.OFF),
]


@pytest.mark.parametrize(
    ("policy", "mode", "effective"), [c[1:] for c in MODE_CASES], ids=[c[0] for c in MODE_CASES]
)
def test_update_modes(policy: dict[str, Any], mode: UpdateMode | None, effective: UpdateMode) -> None:
    vpa = make_vpa(update_mode=None)
    vpa["spec"]["updatePolicy"] = policy
    view = vpa_from_dict(vpa)
    assert view.update_policy.update_mode is mode
    assert view.effective_mode is effective
    assert view.update_policy_set


def test_minimal_vpa_defaults() -> None:
    view = vpa_from_dict(make_vpa(update_mode=None))
    assert not view.update_policy_set
    assert view.effective_mode is UpdateMode.RECREATE
    assert view.resource_policy.container_policies == ()
    assert view.status == VpaStatus()
    assert view.startup_boost is None
    assert view.handled_by("default")


def test_fractional_quantities_are_listed() -> None:
    vpa = make_vpa(
        container_policies=[
            {
                "containerName": "app",
                "minAllowed": {"cpu": "0.5m", "memory": "1.5"},
                "maxAllowed": {"cpu": "1.0001", "memory": "2Gi"},
                "startupBoost": {"cpu": {"type": "Quantity", "quantity": "100.5m"}},
            }
        ],
    )
    view = vpa_from_dict(vpa)
    assert view.fractional_quantity_fields == (
        "spec.resourcePolicy.containerPolicies[0].minAllowed.cpu",
        "spec.resourcePolicy.containerPolicies[0].minAllowed.memory",
        "spec.resourcePolicy.containerPolicies[0].maxAllowed.cpu",
        "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.quantity",
    )
    policy = view.resource_policy.container_policies[0]
    assert policy.min_allowed == Resources(1, 2)  # rounded up, as upstream's MilliValue/Value
    assert policy.max_allowed == Resources(1001, 2048 * MiB)


def test_missing_target_ref_allowed_on_request() -> None:
    vpa = make_vpa()
    del vpa["spec"]["targetRef"]
    assert vpa_from_dict(vpa, require_target_ref=False).target_ref is None


def _policy(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(vpa: dict[str, Any]) -> None:
        vpa["spec"]["resourcePolicy"] = {
            "containerPolicies": [{"containerName": "*"}, {"containerName": "app", **fields}]
        }

    return mutate


VPA_ERRORS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "bad-min-cpu",
        _policy(minAllowed={"cpu": "abc"}),
        "spec.resourcePolicy.containerPolicies[1].minAllowed.cpu",
        "quantity 'abc' is not a number",
    ),
    (
        "bad-max-memory",
        _policy(maxAllowed={"memory": "1GB"}),
        "spec.resourcePolicy.containerPolicies[1].maxAllowed.memory",
        "unknown suffix 'GB'",
    ),
    (
        "max-not-object",
        _policy(maxAllowed="1Gi"),
        "spec.resourcePolicy.containerPolicies[1].maxAllowed",
        "expected an object, got str",
    ),
    (
        "bad-container-mode",
        _policy(mode="Sometimes"),
        "spec.resourcePolicy.containerPolicies[1].mode",
        "unknown value 'Sometimes' (expected one of Auto, Off)",
    ),
    (
        "bad-controlled-values",
        _policy(controlledValues="LimitsOnly"),
        "spec.resourcePolicy.containerPolicies[1].controlledValues",
        "unknown value 'LimitsOnly'",
    ),
    (
        "bad-ratio",
        _policy(oomBumpUpRatio="lots"),
        "spec.resourcePolicy.containerPolicies[1].oomBumpUpRatio",
        "quantity 'lots'",
    ),
    (
        "bad-boost-quantity",
        _policy(startupBoost={"cpu": {"type": "Quantity", "quantity": "x"}}),
        "spec.resourcePolicy.containerPolicies[1].startupBoost.cpu.quantity",
        "quantity 'x'",
    ),
    (
        "interval-not-int",
        _policy(memoryAggregationIntervalSeconds="1h"),
        "spec.resourcePolicy.containerPolicies[1].memoryAggregationIntervalSeconds",
        "expected an integer",
    ),
    (
        "controlled-resources-not-list",
        _policy(controlledResources="cpu"),
        "spec.resourcePolicy.containerPolicies[1].controlledResources",
        "expected a list",
    ),
    (
        "bad-update-mode",
        lambda v: v["spec"]["updatePolicy"].update(updateMode="Sometimes"),
        "spec.updatePolicy.updateMode",
        "unknown update mode 'Sometimes'",
    ),
    (
        "update-mode-not-string",
        lambda v: v["spec"]["updatePolicy"].update(updateMode=1),
        "spec.updatePolicy.updateMode",
        "expected a string, got int",
    ),
    (
        "min-replicas-string",
        lambda v: v["spec"]["updatePolicy"].update(minReplicas="2"),
        "spec.updatePolicy.minReplicas",
        "expected an integer, got str",
    ),
    (
        "min-replicas-bool",
        lambda v: v["spec"]["updatePolicy"].update(minReplicas=True),
        "spec.updatePolicy.minReplicas",
        "expected an integer, got bool",
    ),
    ("missing-target-ref", lambda v: v["spec"].pop("targetRef"), "spec.targetRef", "is required"),
    ("target-ref-null", lambda v: v["spec"].update(targetRef=None), "spec.targetRef", "is required"),
    (
        "target-ref-without-kind",
        lambda v: v["spec"]["targetRef"].pop("kind"),
        "spec.targetRef.kind",
        "is required",
    ),
    (
        "target-ref-not-object",
        lambda v: v["spec"].update(targetRef="web"),
        "spec.targetRef",
        "expected an object",
    ),
    (
        "policies-not-list",
        lambda v: v["spec"].update(resourcePolicy={"containerPolicies": {"app": {}}}),
        "spec.resourcePolicy.containerPolicies",
        "expected a list",
    ),
    (
        "recommender-without-name",
        lambda v: v["spec"].update(recommenders=[{}]),
        "spec.recommenders[0].name",
        "is required",
    ),
    ("spec-not-object", lambda v: v.update(spec=[]), "spec", "expected an object, got list"),
    ("no-name", lambda v: v["metadata"].pop("name"), "metadata.name", "is required"),
    (
        "bad-recommendation",
        lambda v: v.update(
            status={
                "recommendation": {
                    "containerRecommendations": [{"containerName": "app", "target": {"cpu": "fast"}}]
                }
            }
        ),
        "status.recommendation.containerRecommendations[0].target.cpu",
        "quantity 'fast'",
    ),
    (
        "bad-condition-time",
        lambda v: v.update(
            status={
                "conditions": [
                    {
                        "type": "RecommendationProvided",
                        "status": "True",
                        "lastTransitionTime": "2026-13-01T00:00:00Z",
                    }
                ]
            }
        ),
        "status.conditions[0].lastTransitionTime",
        "not an RFC3339 timestamp",
    ),
    (
        "eviction-requirements-not-list",
        lambda v: v["spec"]["updatePolicy"].update(evictionRequirements="cpu"),
        "spec.updatePolicy.evictionRequirements",
        "expected a list",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "message"), [c[1:] for c in VPA_ERRORS], ids=[c[0] for c in VPA_ERRORS]
)
def test_malformed_vpa_names_the_field(
    mutate: Callable[[dict[str, Any]], None], field: str, message: str
) -> None:
    vpa = make_vpa()
    mutate(vpa)
    with pytest.raises(ConversionError) as caught:
        vpa_from_dict(vpa)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_non_object_inputs() -> None:
    with pytest.raises(ConversionError):
        vpa_from_dict([])  # type: ignore[arg-type]
    with pytest.raises(ConversionError):
        pod_from_dict("pod")  # type: ignore[arg-type]


def test_conversion_does_not_mutate_input() -> None:
    pod, vpa = _resizing_pod(), _full_vpa()
    pod_copy, vpa_copy = copy.deepcopy(pod), copy.deepcopy(vpa)
    pod_from_dict(pod, interner=Interner())
    vpa_from_dict(vpa)
    assert pod == pod_copy
    assert vpa == vpa_copy


# --- writers ----------------------------------------------------------------------------------------------


def test_status_round_trip_with_canonical_quantities() -> None:
    status = VpaStatus(
        recommendation=Recommendation(
            (
                RecommendedContainerResources(
                    "app",
                    target=Resources(25, 262_144_000),
                    lower_bound=Resources(10, 100_000_000),
                    upper_bound=Resources(1500, 2 * 1024 * MiB),
                    uncapped_target=Resources(25, 262_144_000),
                ),
                RecommendedContainerResources("sidecar", target=Resources(None, 50_000_000)),
            )
        ),
        conditions=(
            Condition("RecommendationProvided", "True", BASE_TIME + 7.9),
            Condition("NoPodsMatched", "False", None, "NoPodsMatched", "No pods match this VPA object"),
        ),
        observed_generation=7,
    )
    out = vpa_status_to_dict(status)
    assert out == {
        "recommendation": {
            "containerRecommendations": [
                {
                    "containerName": "app",
                    # Memory in binary form as upstream writes it; plain bytes when not a multiple of 1024.
                    "target": {"cpu": "25m", "memory": "250Mi"},
                    "lowerBound": {"cpu": "10m", "memory": "100000000"},
                    "upperBound": {"cpu": "1500m", "memory": "2Gi"},
                    "uncappedTarget": {"cpu": "25m", "memory": "250Mi"},
                },
                {"containerName": "sidecar", "target": {"memory": "50000000"}},
            ]
        },
        "conditions": [
            {
                "type": "RecommendationProvided",
                "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:07Z",
            },
            {
                "type": "NoPodsMatched",
                "status": "False",
                "reason": "NoPodsMatched",
                "message": "No pods match this VPA object",
            },
        ],
        "observedGeneration": 7,
    }
    back = vpa_status_from_dict(orjson.loads(orjson.dumps(out)))
    assert back.recommendation == status.recommendation
    assert back.conditions[0].last_transition_time == BASE_TIME + 7  # whole seconds, as metav1.Time
    assert back.conditions[1] == status.conditions[1]
    assert back.observed_generation == 7


def test_status_without_recommendation() -> None:
    assert vpa_status_to_dict(VpaStatus()) == {"recommendation": None, "conditions": []}
    assert vpa_status_to_dict(VpaStatus(), explicit_nulls=False) == {"conditions": []}
    assert recommendation_to_dict(Recommendation()) == {"containerRecommendations": []}


TIME_CASES = [
    ("zulu", "2026-01-01T00:00:00Z", BASE_TIME),
    ("fraction", "2026-01-01T00:00:01.250000Z", BASE_TIME + 1.25),
    ("micro-time", "2026-01-01T00:00:00.123456Z", BASE_TIME + 0.123456),
    ("offset", "2026-01-01T02:00:00+02:00", BASE_TIME),
    ("naive-is-utc", "2026-01-01T00:00:00", BASE_TIME),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in TIME_CASES], ids=[c[0] for c in TIME_CASES])
def test_parse_time(text: str, expected: float) -> None:
    assert parse_time(text) == pytest.approx(expected, abs=1e-6)


def test_format_time() -> None:
    assert format_time(BASE_TIME + 59.9) == "2026-01-01T00:00:59Z"


# --- selectors of targets ---------------------------------------------------------------------------------

WORKLOAD_CASES: list[tuple[str, dict[str, Any], Selector]] = [
    ("deployment", make_deployment("web"), Selector.parse("app=web")),
    (
        "statefulset-expressions",
        {
            "kind": "StatefulSet",
            "spec": {
                "selector": {
                    "matchLabels": {"app": "db"},
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}],
                }
            },
        },
        Selector.parse("app=db,tier notin (x)"),
    ),
    ("job-without-selector", {"kind": "Job", "spec": {}}, Selector.nothing()),
    ("empty-selector", {"kind": "DaemonSet", "spec": {"selector": {}}}, Selector.everything()),
    (
        "replication-controller",
        {"kind": "ReplicationController", "spec": {"selector": {"app": "rc"}}},
        Selector.parse("app=rc"),
    ),
    (
        "cronjob",
        {
            "kind": "CronJob",
            "spec": {
                "jobTemplate": {
                    "spec": {"template": {"metadata": {"labels": {"app": "batch", "tier": "jobs"}}}}
                }
            },
        },
        Selector.parse("app=batch,tier=jobs"),
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [c[1:] for c in WORKLOAD_CASES], ids=[c[0] for c in WORKLOAD_CASES]
)
def test_selector_from_workload(obj: dict[str, Any], expected: Selector) -> None:
    assert selector_from_workload(obj) == expected


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (
            {
                "kind": "Deployment",
                "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}},
            },
            "spec.selector",
        ),
        ({"kind": "ReplicationController", "spec": {"selector": {"app": 1}}}, "spec.selector['app']"),
        ({"kind": "Rollout", "spec": {}}, "kind"),
    ],
    ids=["bad-operator", "rc-non-string", "unknown-kind"],
)
def test_selector_from_workload_errors(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ConversionError) as caught:
        selector_from_workload(obj)
    assert caught.value.field == field


def test_selector_from_scale() -> None:
    scale = {"kind": "Scale", "status": {"replicas": 3, "selector": "app=web,tier in (a,b)"}}
    assert selector_from_scale(scale) == Selector.parse("tier in (b,a), app=web")
    for bad, message in (
        ({"status": {"selector": ""}}, "empty selector"),
        ({"status": {}}, "empty selector"),
        ({"status": {"selector": "app in"}}, "expected '('"),
    ):
        with pytest.raises(ConversionError) as caught:
            selector_from_scale(bad)
        assert caught.value.field == "status.selector"
        assert message in str(caught.value)


def test_owner_ref_is_the_controller() -> None:
    pod = make_pod()
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "1"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "2", "controller": True},
    ]
    assert pod_from_dict(pod, interner=Interner()).owner == OwnerRef(
        "apps/v1", "StatefulSet", "db", "2", True
    )


# --- robustness: any damage gives a view or a ConversionError, never another exception ----------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(_paths(value, (*prefix, index)))
    return out


def _damage(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    if not path:
        return value  # type: ignore[no-any-return]
    damaged = copy.deepcopy(obj)
    node: Any = damaged
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return damaged


_FULL_VPA = _full_vpa()
_VPA_PATHS = _paths(_FULL_VPA)
_FULL_POD = _resizing_pod()
_POD_PATHS = [p for p in _paths(_FULL_POD) if "managedFields" not in p]


def _failure_field(convert: Callable[[Any], object], obj: Any) -> str | None:
    """Convert; return None on success, the error's field on ConversionError (anything else propagates)."""
    try:
        convert(obj)
    except ConversionError as err:
        return err.field
    return None


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_VPA_PATHS), _json_values)
def test_damaged_vpa_never_crashes(path: tuple[Any, ...], value: Any) -> None:
    field = _failure_field(vpa_from_dict, _damage(_FULL_VPA, path, value))
    assert field is None or field != ""


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_POD_PATHS), _json_values)
def test_damaged_pod_never_crashes(path: tuple[Any, ...], value: Any) -> None:
    field = _failure_field(
        lambda obj: pod_from_dict(obj, interner=Interner()), _damage(_FULL_POD, path, value)
    )
    assert field is None or field != ""


def test_event_from_dict_keeps_the_eviction_annotations_only() -> None:
    from vpa.kube.converting import event_from_dict

    view = event_from_dict({
        "metadata": {"name": "web-1.17", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                     "creationTimestamp": "2026-01-01T00:00:10Z",
                     "annotations": {"offending_containers": "app", "offending_containers_usage": "1Gi",
                                     "starved_resource": "memory", "other": "x"}},
        "reason": "Evicted",
        "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "web-1"},
    })
    assert (view.uid, view.resource_version, view.reason, view.involved_kind, view.involved_name) == (
        "u1", "42", "Evicted", "Pod", "web-1")
    assert view.creation_timestamp == 1767225610.0
    assert view.annotations == (("offending_containers", "app"), ("offending_containers_usage", "1Gi"),
                                ("starved_resource", "memory"))
    assert view.annotation("other") is None


@pytest.mark.parametrize(("extra", "message", "event_type", "last"), [
    ({"message": "Pod was resized in place by VPA Updater.", "type": "Normal",
      "lastTimestamp": "2026-01-01T00:01:00Z"},
     "Pod was resized in place by VPA Updater.", "Normal", 1767225660.0),
    ({"eventTime": "2026-01-01T00:02:00.500000Z"}, "", "", 1767225720.5),
    # Fields only `vpa report` reads never cost the recommender an event: malformed ones read as absent.
    ({"message": 7, "type": None, "lastTimestamp": "yesterday"}, "", "", None),
])
def test_event_from_dict_message_type_and_last_time(
    extra: dict[str, object], message: str, event_type: str, last: float | None
) -> None:
    from vpa.kube.converting import event_from_dict

    view = event_from_dict({
        "metadata": {"name": "e", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:10Z"},
        "reason": "InPlaceResizedByVPA", "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"},
        **extra,
    })
    assert (view.message, view.event_type, view.last_timestamp) == (message, event_type, last)
