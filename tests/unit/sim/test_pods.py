"""Pod semantics as pure functions: QoS, defaulting, update and resize validation per version, LimitRanger."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vpa.sim.cluster import pods
from vpa.sim.contracts import ApiError


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": list(containers), **spec},
    }
    if init:
        out["spec"]["initContainers"] = init
    return out


def c(
    name: str = "app", req: dict[str, str] | None = None, lim: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if req is not None:
        resources["requests"] = req
    if lim is not None:
        resources["limits"] = lim
    return {"name": name, "image": "nginx:1.27", "resources": resources, **extra}


QOS_CASES = [
    ("no-resources", pod(c()), "BestEffort"),
    ("zero-requests-count-as-unset", pod(c(req={"cpu": "0"})), "BestEffort"),
    ("requests-only", pod(c(req={"cpu": "100m"})), "Burstable"),
    (
        "equal-both",
        pod(c(req={"cpu": "1", "memory": "1Gi"}, lim={"cpu": "1000m", "memory": "1024Mi"})),
        "Guaranteed",
    ),
    ("limits-only-cpu-and-memory", pod(c(lim={"cpu": "1", "memory": "1Gi"})), "Guaranteed"),
    ("limits-only-cpu", pod(c(lim={"cpu": "1"})), "Burstable"),
    (
        "requests-below-limits",
        pod(c(req={"cpu": "500m", "memory": "1Gi"}, lim={"cpu": "1", "memory": "1Gi"})),
        "Burstable",
    ),
    (
        "one-container-missing-limits",
        pod(
            c("a", req={"cpu": "1", "memory": "1Gi"}, lim={"cpu": "1", "memory": "1Gi"}),
            c("b", req={"cpu": "1"}),
        ),
        "Burstable",
    ),
    (
        "init-container-counts",
        pod(c(req={"cpu": "1", "memory": "1Gi"}, lim={"cpu": "1", "memory": "1Gi"}), init=[c("init")]),
        "Burstable",
    ),
    (
        "ephemeral-storage-ignored",
        pod(
            c(
                req={"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                lim={"cpu": "1", "memory": "1Gi"},
            )
        ),
        "Guaranteed",
    ),
]


@pytest.mark.parametrize(
    ("p", "expected"), [(p, e) for _, p, e in QOS_CASES], ids=[i for i, _, _ in QOS_CASES]
)
def test_qos_class(p: dict[str, Any], expected: str) -> None:
    defaulted = copy.deepcopy(p)
    pods.default_pod(defaulted, (1, 35))
    assert defaulted["status"]["qosClass"] == expected


def test_defaulting_copies_limits_into_requests_and_leaves_resize_policy_alone() -> None:
    p = pod(c(lim={"cpu": "1", "memory": "1Gi"}))
    pods.default_pod(p, (1, 35))
    container = p["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert "resizePolicy" not in container
    assert p["status"]["phase"] == "Pending"
    assert "nodeName" not in p["spec"]
    assert p["spec"]["restartPolicy"] == "Always"
    assert p["spec"]["terminationGracePeriodSeconds"] == 30
    assert container["imagePullPolicy"] == "IfNotPresent"


EFFECTIVE_CASES = [
    (
        "sum-of-containers",
        pod(c("a", req={"cpu": "100m", "memory": "1Mi"}), c("b", req={"cpu": "200m"})),
        (300, 2**20),
    ),
    ("init-larger-wins", pod(c(req={"cpu": "100m"}), init=[c("i", req={"cpu": "1"})]), (1000, 0)),
    (
        "sidecar-adds",
        pod(c(req={"cpu": "100m"}), init=[c("s", req={"cpu": "50m"}, restartPolicy="Always")]),
        (150, 0),
    ),
    ("overhead-adds", pod(c(req={"cpu": "100m"}), overhead={"cpu": "10m"}), (110, 0)),
    (
        "pod-level-request-stands-for-its-resource",
        pod(
            c("a", req={"cpu": "100m", "memory": "64Mi"}),
            c("b", req={"cpu": "100m"}),
            resources={"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
        ),
        (1000, 64 * 2**20),
    ),
    (
        "pod-level-request-plus-overhead",
        pod(c(req={"cpu": "100m"}), resources={"requests": {"memory": "1Gi"}}, overhead={"memory": "1Mi"}),
        (100, 2**30 + 2**20),
    ),
]


@pytest.mark.parametrize(
    ("p", "expected"), [(p, e) for _, p, e in EFFECTIVE_CASES], ids=[i for i, _, _ in EFFECTIVE_CASES]
)
def test_effective_requests(p: dict[str, Any], expected: tuple[int, int]) -> None:
    assert pods.effective_requests(p["spec"]) == expected


def test_effective_requests_without_pod_level_is_the_containers_aggregate() -> None:
    spec = pod(c("a", req={"cpu": "100m"}), c("b", req={"cpu": "200m"}), resources={"requests": {"cpu": "1"}})
    assert pods.effective_requests(spec["spec"], pod_level=False) == (300, 0)


def running(p: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(p)
    pods.default_pod(out, (1, 35))
    out["spec"]["nodeName"] = "node-1"
    out["status"]["phase"] = "Running"
    out["status"]["containerStatuses"] = [
        {"name": x["name"], "state": {"running": {}}, "resources": x["resources"]}
        for x in out["spec"]["containers"]
    ]
    return out


BURSTABLE = running(pod(c(req={"cpu": "500m", "memory": "256Mi"}, lim={"cpu": "1", "memory": "512Mi"})))


def resized(
    base: dict[str, Any],
    req: dict[str, str] | None = None,
    lim: dict[str, str] | None = None,
    policy: list[dict[str, str]] | None = None,
    **other: Any,
) -> dict[str, Any]:
    patched = copy.deepcopy(base)
    container = patched["spec"]["containers"][0]
    if req is not None:
        container["resources"]["requests"] = req
    if lim is not None:
        container["resources"]["limits"] = lim
    if policy is not None:
        container["resizePolicy"] = policy
    container.update(other)
    merged, unknown = pods.resize_merge(base, patched)
    assert unknown == []
    return merged


RESIZE_CASES: list[tuple[str, tuple[int, int], dict[str, Any], str | None]] = [
    ("cpu-up-ok", (1, 35), resized(BURSTABLE, req={"cpu": "800m", "memory": "256Mi"}), None),
    (
        "qos-change-rejected",
        (1, 35),
        resized(BURSTABLE, req={"cpu": "1", "memory": "512Mi"}),
        "Pod QOS Class may not change as a result of resizing",
    ),
    (
        "requests-above-limits",
        (1, 35),
        resized(BURSTABLE, req={"cpu": "2", "memory": "256Mi"}),
        "must be less than or equal to cpu limit of 1",
    ),
    ("remove-limit", (1, 35), resized(BURSTABLE, lim={"cpu": "1"}), "resource limits cannot be removed"),
    (
        "remove-request",
        (1, 35),
        resized(BURSTABLE, req={"cpu": "500m"}),
        "resource requests cannot be removed",
    ),
    (
        "non-compute-resource",
        (1, 35),
        resized(BURSTABLE, req={"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "1Gi"}),
        "only cpu and memory resources are mutable",
    ),
    (
        "mem-limit-decrease-1.33-not-required",
        (1, 33),
        resized(BURSTABLE, lim={"cpu": "1", "memory": "300Mi"}),
        "memory limits cannot be decreased unless resizePolicy is RestartContainer",
    ),
    (
        "mem-limit-decrease-1.33-restart",
        (1, 33),
        resized(
            BURSTABLE,
            lim={"cpu": "1", "memory": "300Mi"},
            policy=[{"resourceName": "memory", "restartPolicy": "RestartContainer"}],
        ),
        None,
    ),
    ("mem-limit-decrease-1.32", (1, 32), resized(BURSTABLE, lim={"cpu": "1", "memory": "300Mi"}), None),
    ("mem-limit-decrease-1.34", (1, 34), resized(BURSTABLE, lim={"cpu": "1", "memory": "300Mi"}), None),
    ("mem-limit-decrease-1.36", (1, 36), resized(BURSTABLE, lim={"cpu": "1", "memory": "300Mi"}), None),
    ("image-change-silently-dropped", (1, 35), resized(BURSTABLE, image="nginx:2"), None),
]


@pytest.mark.parametrize(
    ("version", "new", "error"),
    [(v, n, e) for _, v, n, e in RESIZE_CASES],
    ids=[i for i, _, _, _ in RESIZE_CASES],
)
def test_validate_resize(version: tuple[int, int], new: dict[str, Any], error: str | None) -> None:
    errs = pods.validate_resize(BURSTABLE, new, version)
    if error is None:
        assert errs == []
    else:
        assert any(error in e.text() for e in errs), [e.text() for e in errs]
        assert pods.invalid("Pod", "p", errs).code == 422


def test_resize_merge_keeps_everything_but_resources() -> None:
    merged = resized(BURSTABLE, req={"cpu": "700m", "memory": "256Mi"}, image="other:1")
    assert merged["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert merged["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "700m"


def test_resize_merge_reports_unknown_containers() -> None:
    patched = copy.deepcopy(BURSTABLE)
    patched["spec"]["containers"].append(c("ghost"))
    _, unknown = pods.resize_merge(BURSTABLE, patched)
    assert unknown == ["ghost"]


UPDATE_CASES = [
    ("image", lambda s: s["containers"][0].__setitem__("image", "nginx:2"), None),
    (
        "resources",
        lambda s: s["containers"][0]["resources"]["requests"].__setitem__("cpu", "1"),
        "pod updates may not change fields other than",
    ),
    (
        "tolerations-added",
        lambda s: s.setdefault("tolerations", []).append({"key": "x", "operator": "Exists"}),
        None,
    ),
    ("tolerations-removed", lambda s: s.__setitem__("tolerations", []), "pod updates may not change fields"),
    ("active-deadline-set", lambda s: s.__setitem__("activeDeadlineSeconds", 30), None),
    ("node-name", lambda s: s.__setitem__("nodeName", "node-2"), "pod updates may not change fields"),
]


@pytest.mark.parametrize(
    ("mutate", "error"), [(m, e) for _, m, e in UPDATE_CASES], ids=[i for i, _, _ in UPDATE_CASES]
)
def test_validate_pod_update(mutate: Any, error: str | None) -> None:
    new = copy.deepcopy(BURSTABLE)
    mutate(new["spec"])
    errs = pods.validate_pod_update(BURSTABLE, new)
    if error is None:
        assert errs == []
    else:
        assert any(error in e.text() for e in errs)


def test_create_validation_requests_above_limits() -> None:
    errs = pods.validate_pod_spec(pod(c(req={"cpu": "2"}, lim={"cpu": "1"}))["spec"])
    assert [e.text() for e in errs] == [
        'spec.containers[0].resources.requests: Invalid value: "2": '
        "must be less than or equal to cpu limit of 1"
    ]


LIMIT_RANGE = {
    "spec": {
        "limits": [
            {
                "type": "Container",
                "default": {"cpu": "500m", "memory": "512Mi"},
                "defaultRequest": {"cpu": "100m"},
                "max": {"cpu": "2", "memory": "1Gi"},
                "min": {"cpu": "50m"},
            }
        ]
    }
}

LR_CASES = [
    (
        "defaults-fill",
        pod(c()),
        None,
        {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
    ),
    (
        "over-max",
        pod(c(req={"cpu": "1"}, lim={"cpu": "3"})),
        "maximum cpu usage per Container is 2, but limit is 3",
        None,
    ),
    (
        "under-min",
        pod(c(req={"cpu": "10m"}, lim={"cpu": "1"})),
        "minimum cpu usage per Container is 50m, but request is 10m",
        None,
    ),
]


@pytest.mark.parametrize(
    ("p", "error", "resources"), [(p, e, r) for _, p, e, r in LR_CASES], ids=[i for i, _, _, _ in LR_CASES]
)
def test_limit_ranger(p: dict[str, Any], error: str | None, resources: dict[str, Any] | None) -> None:
    p = copy.deepcopy(p)
    pods.default_pod(p, (1, 35))
    pods.limit_range_defaults(p, [LIMIT_RANGE])
    violations = pods.limit_range_violations(p, [LIMIT_RANGE])
    if error is None:
        assert violations == []
        assert p["spec"]["containers"][0]["resources"] == resources
        assert "kubernetes.io/limit-ranger" in p["metadata"]["annotations"]
    else:
        assert error in violations
        err = pods.forbidden("pods", "p", violations)
        assert isinstance(err, ApiError)
        assert err.code == 403
        assert err.message.startswith('pods "p" is forbidden: ')


SELECTOR_CASES = [
    ("nil-selects-nothing", None, {"a": "b"}, False),
    ("empty-selects-all", {}, {"a": "b"}, True),
    ("match-labels", {"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
    ("match-labels-miss", {"matchLabels": {"a": "x"}}, {"a": "b"}, False),
    ("in", {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}, {"a": "c"}, True),
    ("not-in-absent", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {}, True),
    ("does-not-exist", {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "b"}, False),
]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [(s, lab, e) for _, s, lab, e in SELECTOR_CASES],
    ids=[i for i, _, _, _ in SELECTOR_CASES],
)
def test_selector_matches(selector: Any, labels: dict[str, str], expected: bool) -> None:
    assert pods.selector_matches(selector, labels) is expected


# --- pod-level resources (KEP-2837) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod_resources", "containers", "init", "defaulted"),
    [
        # a pod-level limit without a request, no container requesting it: the request takes the limit's value
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, [c()], None, {"cpu": "1", "memory": "1Gi"}),
        ({"requests": {"cpu": "200m"}, "limits": {"cpu": "1", "memory": "1Gi"}}, [c()], None,
         {"cpu": "200m", "memory": "1Gi"}),
        ({"requests": {"cpu": "200m"}}, [c()], None, {"cpu": "200m"}),  # no limits: nothing to default from
        # containers requesting it: their aggregate (what kube-apiserver 1.35 stores; checked against it):
        # memory 150Mi from `b`, cpu 100m from the sidecar; a container limit defaults its own request first
        ({"limits": {"cpu": "1", "memory": "200Mi"}}, [c("a"), c("b", req={"memory": "150Mi"})],
         [c("side", req={"cpu": "100m"}, restartPolicy="Always")], {"cpu": "100m", "memory": "150Mi"}),
        ({"limits": {"memory": "200Mi"}}, [c("b", lim={"memory": "120Mi"})], None, {"memory": "120Mi"}),
    ],
    ids=["limits-only", "partly", "requests-only", "aggregate-of-containers", "from-container-limit"],
)  # fmt: skip
def test_pod_level_requests_default_from_containers_or_limits(
    pod_resources: dict[str, Any], containers: list[dict[str, Any]], init: list[dict[str, Any]] | None,
    defaulted: dict[str, str],
) -> None:
    p = pod(*containers, init=init, resources=copy.deepcopy(pod_resources))
    pods.default_pod(p, (1, 35))
    assert p["spec"]["resources"]["requests"] == defaulted


@pytest.mark.parametrize(
    ("pod_resources", "containers", "error"),
    [
        ({"requests": {"cpu": "500m"}}, [c(req={"cpu": "300m"})], None),
        ({"requests": {"cpu": "200m"}}, [c(req={"cpu": "300m"})],
         'spec.resources.requests[cpu]: Invalid value: "200m": must be greater than or equal to aggregate '
         "container requests of 300m"),
        ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}, [c()],
         'spec.resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'),
        ({"limits": {"memory": "1Gi"}}, [c(lim={"memory": "2Gi"})],
         'spec.resources.containers[0][memory].limits: Invalid value: "2Gi": '
         "must be less than or equal to pod limits of 1Gi"),
    ],
    ids=["valid", "request-below-aggregate", "request-above-limit", "container-limit-above-pod-limit"],
)  # fmt: skip
def test_pod_level_validation(
    pod_resources: dict[str, Any], containers: list[dict[str, Any]], error: str | None
) -> None:
    errs = [e.text() for e in pods.validate_pod_spec(pod(*containers, resources=pod_resources)["spec"])]
    assert errs == ([] if error is None else [error])


@pytest.mark.parametrize(
    ("pod_level", "expected"), [(False, "500m"), (True, "700m")], ids=["1.35", "gate-on"]
)
def test_resize_merge_takes_pod_level_resources_only_with_the_gate(pod_level: bool, expected: str) -> None:
    old = pod(c(req={"cpu": "100m"}), resources={"requests": {"cpu": "500m"}})
    patched = copy.deepcopy(old)
    patched["spec"]["resources"]["requests"]["cpu"] = "700m"
    merged, _ = pods.resize_merge(old, patched, pod_level=pod_level)
    assert merged["spec"]["resources"]["requests"]["cpu"] == expected


def _with_init(policy: list[dict[str, str]] | None = None, cpu: str = "100m") -> dict[str, Any]:
    pod = copy.deepcopy(BURSTABLE)
    init: dict[str, Any] = {"name": "init", "image": "busybox:1",
                            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    if policy is not None:
        init["resizePolicy"] = policy
    pod["spec"]["initContainers"] = [init]
    return pod


@pytest.mark.parametrize(
    ("version", "policy", "error"),
    [
        ((1, 34), None, "only cpu and memory resources for sidecar containers are mutable"),
        ((1, 35), None, "only cpu and memory resources for sidecar containers are mutable"),
        ((1, 36), None, None),  # InPlacePodVerticalScalingInitContainers: beta and on
        ((1, 37), None, None),  # GA
        ((1, 37), [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}],
         "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"),
    ],
)  # fmt: skip
def test_plain_init_containers_are_resizable_from_1_36(
    version: tuple[int, int], policy: list[dict[str, str]] | None, error: str | None
) -> None:
    errs = pods.validate_resize(_with_init(policy), _with_init(policy, cpu="50m"), version)
    if error is None:
        assert errs == []
    else:
        assert any(error in e.text() for e in errs), [e.text() for e in errs]
