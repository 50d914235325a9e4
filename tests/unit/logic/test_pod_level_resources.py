"""Pod-level resources (`spec.resources`, gate `PodLevelResources`): the admission patch, the consistency
rules and the updater's decision, each row derived by hand from the rules in docs/pod-level-resources.md.

Every admitted pod is checked with the simulated API server's own pod validation (the rules kube-apiserver
applies to pod-level resources), so a row can only pass with a pod the API would accept.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.unit.logic.admission.test_patches import admission_pod, apply_patch, container, rec, vpa_json
from tests.unit.logic.updater.test_support import KEY, NOW, ctr, pod, vpa
from tests.unit.logic.updater.test_support import rec as updater_rec
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.admission.patches import AdmissionOptions, PodLevelInvalid, pod_patch, pod_shape
from vpa.logic.limitranges import NO_LIMITS
from vpa.logic.podlevel import aggregate_requests, consistency_problem, plan_pod_level
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import Action, Reason, resize_patch
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.logic.updater.serverfeatures import ResizeFeatures
from vpa.model.features import FeatureGates
from vpa.model.resources import Resources
from vpa.sim.cluster.pods import default_pod, validate_pod_spec

JSON = dict[str, Any]
MI = 2**20
ON = AdmissionOptions(gates=FeatureGates.parse("PodLevelResources=true"))
OFF = AdmissionOptions()


def _pod(pod_resources: JSON, *containers: JSON, inits: list[JSON] | None = None) -> JSON:
    raw = admission_pod(*containers)
    raw["spec"]["resources"] = pod_resources
    if inits:
        raw["spec"]["initContainers"] = inits
    default_pod(raw, (1, 35))  # the API defaults before admission webhooks run
    return raw


def _admit(raw: JSON, body: JSON, options: AdmissionOptions = ON) -> tuple[list[JSON], JSON]:
    ops = pod_patch(pod_from_dict(raw), pod_shape(raw), vpa_from_dict(body), NO_LIMITS, options)
    patched = apply_patch(raw, ops)
    errors = validate_pod_spec(patched["spec"])
    assert not errors, errors
    return ops, patched


def _requests(obj: JSON) -> Resources:
    return Resources.from_resource_list((obj.get("resources") or {}).get("requests"))


def _limits(obj: JSON) -> Resources:
    return Resources.from_resource_list((obj.get("resources") or {}).get("limits"))


@pytest.mark.parametrize(
    ("pod_resources", "containers", "recs", "policies", "pod_requests", "pod_limits", "app", "updates"),
    [
        (  # only pod-level values: the containers stay without their own, the pod gets the sum
            {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            [container("app"), container("side")],
            [rec("app", cpu="300m", memory="200Mi"), rec("side", cpu="100m", memory="100Mi")],
            None,
            Resources(400, 300 * MI), Resources(None, 600 * MI),  # 1Gi × 300Mi / 512Mi
            Resources(), "pod: cpu request, memory request, memory limit",
        ),
        (  # both: the app's own values follow its recommendation, the side's usage counts at the pod level
            {"requests": {"cpu": "500m", "memory": "512Mi"}},
            [container("app", cpu_request="200m", memory_request="128Mi"), container("side")],
            [rec("app", cpu="300m", memory="200Mi"), rec("side", cpu="100m", memory="100Mi")],
            None,
            Resources(400, 300 * MI), Resources(),
            Resources(300, 200 * MI),
            "container 0: cpu request, memory request; pod: cpu request, memory request",
        ),
        (  # a container sets cpu only: its memory stays unset
            {"requests": {"cpu": "1", "memory": "1Gi"}},
            [container("app", cpu_request="200m")],
            [rec("app", cpu="300m", memory="200Mi")],
            None,
            Resources(300, 200 * MI), Resources(),
            Resources(300, None), "container 0: cpu request; pod: cpu request, memory request",
        ),
        (  # a container limit above the scaled pod limit raises it (pod limits at least each container's)
            {"requests": {"memory": "512Mi"}, "limits": {"memory": "512Mi"}},
            [container("app", memory_request="100Mi", memory_limit="400Mi")],
            [rec("app", cpu="100m", memory="200Mi")],
            None,
            Resources(None, 200 * MI), Resources(None, 800 * MI),
            Resources(None, 200 * MI),
            # upstream's note for the cpu limit it does not set (the container's cpu is not its own here)
            "container 0: cpu: limit NOT set since originalLimit is nil or 0, memory request, memory limit; "
            "pod: memory request, memory limit",
        ),
        (  # a plain init container needing 1 CPU: the pod-level request stays at least the aggregate
            {"requests": {"cpu": "2"}},
            [container("app")],
            [rec("app", cpu="300m", memory="200Mi")],
            None,
            Resources(1000, None), Resources(),
            Resources(), "pod: cpu request",
        ),
        (  # RequestsOnly: the pod-level limit stays and caps the request
            {"requests": {"memory": "200Mi"}, "limits": {"memory": "256Mi"}},
            [container("app")],
            [rec("app", cpu="100m", memory="300Mi")],
            [{"containerName": "*", "controlledValues": "RequestsOnly"}],
            Resources(None, 256 * MI), Resources(None, 256 * MI),
            Resources(), "pod: memory request",
        ),
    ],
    ids=["pod-level-only", "pod-and-container", "container-sets-cpu-only", "container-limit-raises-pod-limit",
         "init-container-aggregate", "requests-only"],
)  # fmt: skip
def test_admission_scales_pod_level_values(
    pod_resources: JSON, containers: list[JSON], recs: list[JSON], policies: list[JSON] | None,
    pod_requests: Resources, pod_limits: Resources, app: Resources, updates: str,
) -> None:
    needs_setup = pod_resources.get("requests", {}).get("cpu") == "2"
    inits = [container("setup", cpu_request="1")] if needs_setup else None
    raw = _pod(pod_resources, *containers, inits=inits)
    ops, patched = _admit(raw, vpa_json(*recs, policies=policies))
    assert _requests(patched["spec"]) == pod_requests
    assert _limits(patched["spec"]) == pod_limits
    assert _requests(patched["spec"]["containers"][0]) == app
    annotations = {op["path"].rsplit("/", 1)[1]: op["value"] for op in ops if "annotations/" in op["path"]}
    assert annotations["vpaUpdates"] == f"Pod resources updated by web-vpa: {updates}"


def test_a_pod_no_values_keep_valid_is_refused() -> None:
    # RequestsOnly keeps the 256Mi pod-level limit, but the app's own request goes to 300Mi: the containers
    # would need more than the pod may have.
    raw = _pod({"requests": {"memory": "200Mi"}, "limits": {"memory": "256Mi"}},
               container("app", memory_request="128Mi"))
    body = vpa_json(rec("app", cpu="100m", memory="300Mi"),
                    policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}])
    with pytest.raises(PodLevelInvalid, match="memory requests add up to 300Mi, above the pod-level request"):
        pod_patch(pod_from_dict(raw), pod_shape(raw), vpa_from_dict(body), NO_LIMITS, ON)


def test_gate_off_leaves_pod_level_values_alone() -> None:
    raw = _pod({"requests": {"cpu": "1", "memory": "1Gi"}}, container("app", cpu_request="200m"))
    body = vpa_from_dict(vpa_json(rec("app", cpu="300m", memory="200Mi")))
    ops = pod_patch(pod_from_dict(raw), pod_shape(raw), body, NO_LIMITS, OFF)
    assert not [op for op in ops if op["path"].startswith("/spec/resources")]


@pytest.mark.parametrize(
    ("pod_requests", "pod_limits", "app_requests", "app_limits", "problem"),
    [
        (Resources(500, None), Resources(), Resources(500, None), Resources(), ""),
        (Resources(400, None), Resources(), Resources(500, None), Resources(),
         "the containers' cpu requests add up to 500m, above the pod-level request of 400m"),
        (Resources(None, 512 * MI), Resources(None, 256 * MI), Resources(), Resources(),
         "the pod-level memory request 512Mi would be above the pod-level limit of 256Mi"),
        (Resources(), Resources(None, 256 * MI), Resources(), Resources(None, 300 * MI),
         "container app's memory limit 300Mi would be above the pod-level limit of 256Mi"),
    ],
    ids=["valid", "requests-above-pod-request", "pod-request-above-pod-limit", "container-limit-above-pod"],
)
def test_consistency_rules(pod_requests: Resources, pod_limits: Resources, app_requests: Resources,
                           app_limits: Resources, problem: str) -> None:
    view = pod_from_dict(admission_pod(container("app")))
    assert consistency_problem(view, pod_requests, pod_limits, {"app": app_requests},
                               {"app": app_limits}) == problem


def test_aggregate_counts_sidecars_with_containers_and_init_containers_apart() -> None:
    raw = _pod({"requests": {"cpu": "5"}}, container("app", cpu_request="300m"), inits=[
        container("proxy", cpu_request="200m") | {"restartPolicy": "Always"},
        container("setup", cpu_request="400m"),
    ])
    # running: 300m + 200m = 500m; the init container needs its 400m plus the 200m sidecar before it: 600m.
    assert aggregate_requests(pod_from_dict(raw), {}).cpu_millicores == 600


def test_only_regular_containers_limits_are_held_to_the_pod_level_limit() -> None:
    # kube-apiserver 1.35 accepts a sidecar's or an init container's limit above the pod-level limit (it
    # compares spec.containers' limits only; checked against the real API server): no problem, and the
    # planned pod-level limit is not raised to them.
    raw = _pod({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}, container("app", cpu_request="300m"),
               inits=[container("proxy", cpu_request="200m", cpu_limit="1500m") | {"restartPolicy": "Always"},
                      container("setup", cpu_request="100m", cpu_limit="2")])
    view = pod_from_dict(raw)
    assert consistency_problem(view, view.pod_requests, view.pod_limits, {}, {}) == ""
    plan = plan_pod_level(view, {}, {}, {"app": Resources(400, None)}, requests_only=False)
    # app 400m + proxy 200m; the 1-core limit keeps its 1:1 ratio to the request.
    assert (plan.requests, plan.limits, plan.problem) == (Resources(600, None), Resources(600, None), "")
    assert not validate_pod_spec(raw["spec"])


# --- the updater ----------------------------------------------------------------------------------------

GATES = FeatureGates.parse("InPlace=true,PodLevelResources=true")


def _pod_level_pod(pod_requests: Resources, pod_limits: Resources) -> Any:
    view = pod(containers=[ctr("app", cpu="200m", mem="128Mi"), ctr("side", cpu=None, mem=None)])
    return dataclasses.replace(view, has_pod_level_resources=True, pod_requests=pod_requests,
                               pod_limits=pod_limits)


@pytest.mark.parametrize(
    ("mode", "gates", "pod_level_resize", "action", "reason", "pod_requests"),
    [
        ("InPlaceOrRecreate", GATES, True, Action.RESIZE, Reason.OUTSIDE_RANGE, Resources(900, 600 * MI)),
        ("InPlaceOrRecreate", GATES, False, Action.EVICT, Reason.POD_LEVEL_RESIZE_UNSUPPORTED, None),
        ("InPlace", GATES, False, Action.SKIP, Reason.POD_LEVEL_RESIZE_UNSUPPORTED, None),
        ("InPlaceOrRecreate", FeatureGates.parse("InPlace=true"), True, Action.SKIP,
         Reason.POD_LEVEL_RESOURCES, None),
    ],
    ids=["resized-with-pod-level", "cluster-cannot-resize-pod-level-evicts", "in-place-only-skips",
         "gate-off-skips"],
)  # fmt: skip
def test_updater_resizes_pod_level_values_with_the_containers(
    mode: str, gates: FeatureGates, pod_level_resize: bool, action: Action, reason: Reason,
    pod_requests: Resources | None,
) -> None:
    target = _pod_level_pod(pod_requests=Resources(500, 512 * MI), pod_limits=Resources(None, MI * 1024))
    recs = [updater_rec("app", cpu="600m", mem="400Mi", lower=("550m", "300Mi")),
            updater_rec("side", cpu="300m", mem="200Mi")]
    inputs = PassInputs(now=NOW, resize_features=ResizeFeatures(pod_level=pod_level_resize),
                        gates=gates, replicas={KEY: 3}, attempts={}, infeasible=InfeasibleAttempts())
    plan = plan_vpa(vpa(mode, recs), [target, pod("web-2"), pod("web-3")], inputs)
    (decision,) = [d for d in plan.decisions if d.pod.name == target.name]
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    if pod_requests is None:
        assert decision.pod_level is None
        return
    assert decision.pod_level is not None
    # app 600m + side 300m = 900m; 400Mi + 200Mi = 600Mi; the 1Gi limit keeps its ratio to 512Mi: 1200Mi.
    assert decision.pod_level.requests == pod_requests
    assert decision.pod_level.limits == Resources(None, 1200 * MI)
    ops = resize_patch(decision.pod, decision.changes, decision.pod_level)
    assert ops == [
        {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "600m"},
        {"op": "add", "path": "/spec/containers/0/resources/requests/memory", "value": "400Mi"},
        {"op": "add", "path": "/spec/resources/requests/cpu", "value": "900m"},
        {"op": "add", "path": "/spec/resources/requests/memory", "value": "600Mi"},
        {"op": "add", "path": "/spec/resources/limits/memory", "value": "1200Mi"},
    ]


@pytest.mark.parametrize(
    ("pod_level_resize", "action", "reason"),
    [
        (True, Action.RESIZE, Reason.OUTSIDE_RANGE),
        (False, Action.EVICT, Reason.POD_LEVEL_RESIZE_UNSUPPORTED),
    ],
    ids=["cluster-resizes", "cluster-forbids-any-resize-of-the-pod"],
)  # fmt: skip
def test_container_only_resize_of_a_pod_level_pod_needs_the_cluster_to_resize_such_pods(
    pod_level_resize: bool, action: Action, reason: Reason,
) -> None:
    # The pod-level values already match the sum (900m, 600Mi) and keep their limit: only app changes. Still,
    # kube-apiserver 1.35 without InPlacePodLevelResourcesVerticalScaling refuses every resize of a pod that
    # sets pod-level resources ("resize of pods with pod-level resources is forbidden ..."), its
    # containers' too: where the server does not resize such pods the fallback is eviction.
    target = _pod_level_pod(pod_requests=Resources(900, 600 * MI), pod_limits=Resources(None, 1200 * MI))
    recs = [updater_rec("app", cpu="600m", mem="400Mi", lower=("550m", "300Mi")),
            updater_rec("side", cpu="300m", mem="200Mi")]
    inputs = PassInputs(now=NOW, resize_features=ResizeFeatures(pod_level=pod_level_resize),
                        gates=GATES, replicas={KEY: 3}, attempts={}, infeasible=InfeasibleAttempts())
    plan = plan_vpa(vpa("InPlaceOrRecreate", recs), [target, pod("web-2"), pod("web-3")], inputs)
    (decision,) = [d for d in plan.decisions if d.pod.name == target.name]
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    assert decision.pod_level is None  # nothing to change at the pod level either way


def test_updater_resizes_a_pod_with_pod_level_values_only() -> None:
    # No container sets anything: the pod-level stanza alone is weighed and resized.
    view = pod(containers=[ctr("app", cpu=None, mem=None)])
    target = dataclasses.replace(view, has_pod_level_resources=True, pod_requests=Resources(100, 128 * MI))
    recs = [updater_rec("app", cpu="600m", mem="400Mi", lower=("550m", "300Mi"))]
    inputs = PassInputs(now=NOW, resize_features=ResizeFeatures(pod_level=True), gates=GATES,
                        replicas={KEY: 1}, attempts={}, infeasible=InfeasibleAttempts())
    plan = plan_vpa(vpa("InPlaceOrRecreate", recs), [target], inputs)
    (decision,) = plan.decisions
    assert (decision.action, decision.reason) == (Action.RESIZE, Reason.OUTSIDE_RANGE), decision.explain()
    assert decision.changes == ()
    assert resize_patch(decision.pod, decision.changes, decision.pod_level) == [
        {"op": "add", "path": "/spec/resources/requests/cpu", "value": "600m"},
        {"op": "add", "path": "/spec/resources/requests/memory", "value": "400Mi"},
    ]
