"""Upstream VPA 1.8.1's unit tests of `pkg/admission-controller/resource/pod/patch`, restated as facts about
our pod-admission logic (`vpa.logic.admission.patches`).

Upstream's calculators take their recommendation from a fake provider; ours compute it from the VPA. Rows
that exercise only the patch writer feed `_container_patches` the container resources the fake would have
returned; rows about the startup boost feed `boost_container` the same way; the end-to-end rows run
`pod_patch`. Rows named DEVIATION are listed in docs/deviations.md ("Upstream 1.8.1 unit tests").

Not restated: `TestGetPatches_TwoReplacementResources` (a resource named `unobtanium`: we write only cpu
and memory, the only resources a recommendation holds) and "replacement … from container status" (a pod
being created has no status; we read the patch's shape from the spec).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import make_container, make_pod, make_vpa
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.admission.patches import (
    AdmissionOptions,
    ContainerShape,
    _container_patches,
    annotation_patch,
    boost_container,
    escape_pointer,
    pod_patch,
    pod_shape,
)
from vpa.logic.capping import ContainerResources
from vpa.logic.limitranges import NO_LIMITS
from vpa.model import annotations as ann
from vpa.model.features import FeatureGates
from vpa.model.pod import ContainerView
from vpa.model.resources import Resources
from vpa.model.vpa import VpaView

JSON = dict[str, Any]
C0 = "/spec/containers/0/resources"


# --- util_test.go --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "kind", "resource", "path"),
    [
        (0, "requests", "cpu", "/spec/containers/0/resources/requests/cpu"),
        (1, "limits", "memory", "/spec/containers/1/resources/limits/memory"),
        (2, "limits", "nvidia.com/gpu", "/spec/containers/2/resources/limits/nvidia.com~1gpu"),
        (
            0,
            "requests",
            "custom~domain.com/resource/name",
            "/spec/containers/0/resources/requests/custom~0domain.com~1resource~1name",
        ),
    ],
    ids=[
        "Standard resource cpu",
        "Standard resource memory",
        "Extended resource with slash",
        "Extended resource with tilde and slash",
    ],
)
def test_resource_requirement_path(index: int, kind: str, resource: str, path: str) -> None:
    # TestGetAddResourceRequirementValuePatch: the path our patch writer builds for a resource name
    assert f"/spec/containers/{index}/resources/{kind}/{escape_pointer(resource)}" == path


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("vpaObservedContainers", "/metadata/annotations/vpaObservedContainers"),
        ("example.com/annotation", "/metadata/annotations/example.com~1annotation"),
        ("custom~domain.com/annotation/name", "/metadata/annotations/custom~0domain.com~1annotation~1name"),
    ],
    ids=["Simple annotation", "Annotation with slash", "Annotation with tilde and slash"],
)
def test_annotation_patch_path(name: str, path: str) -> None:
    # TestGetAddAnnotationPatch (TestGetRemoveAnnotationPatch escapes the same way; we never remove one)
    assert annotation_patch(name, "value1") == {"op": "add", "path": path, "value": "value1"}


# --- observed_containers_test.go -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "value"),
    [(["test1", "test2"], "test1, test2"), ([], "")],
    ids=[
        "create vpa observed containers annotation",
        "create vpa observed containers annotation with no containers",
    ],
)
def test_observed_containers(names: list[str], value: str) -> None:
    containers = [make_container(n, probes=False) for n in names]
    raw = make_pod(containers=containers)
    raw.pop("status")
    ops = pod_patch(pod_from_dict(raw), pod_shape(raw), vpa_from_dict(make_vpa(recommendation=[])), NO_LIMITS)
    assert ops[-1] == {"op": "add", "path": "/metadata/annotations/vpaObservedContainers", "value": value}


# --- resource_updates_test.go: TestCalculatePatches_ResourceUpdates ------------------------------------


def _r(cpu: int | None = None) -> Resources:
    return Resources(cpu, None)


def _writer(shapes: list[ContainerShape], recommended: list[ContainerResources]) -> list[JSON]:
    ops: list[JSON] = []
    entries = []
    for index, (shape, resources) in enumerate(zip(shapes, recommended, strict=True)):
        entry = _container_patches(f"/spec/containers/{index}", f"container {index}", shape, resources, ops)
        if entry is not None:
            entries.append(entry)
    if entries:
        ops.append(annotation_patch(ann.VPA_UPDATES, ann.format_vpa_updates("name", entries)))
    return ops


def _updates(text: str) -> JSON:
    return annotation_patch(ann.VPA_UPDATES, "Pod resources updated by name: " + text)


EMPTY_SHAPE = ContainerShape()
REQUESTS_SHAPE = ContainerShape(has_requests=True)
LIMITS_SHAPE = ContainerShape(has_limits=True)
RESOURCE_UPDATES: list[tuple[str, list[ContainerShape], list[ContainerResources], list[JSON]]] = [
    (
        "new cpu recommendation",
        [EMPTY_SHAPE],
        [ContainerResources(requests=_r(1000))],
        [
            {"op": "add", "path": C0, "value": {}},
            {"op": "add", "path": f"{C0}/requests", "value": {}},
            {"op": "add", "path": f"{C0}/requests/cpu", "value": "1"},
            _updates("container 0: cpu request"),
        ],
    ),
    (
        "replacement cpu recommendation",
        [REQUESTS_SHAPE],
        [ContainerResources(requests=_r(1000))],
        [
            {"op": "add", "path": f"{C0}/requests/cpu", "value": "1"},
            _updates("container 0: cpu request"),
        ],
    ),
    (
        "two containers",
        [REQUESTS_SHAPE, EMPTY_SHAPE],
        [ContainerResources(requests=_r(1000)), ContainerResources(requests=_r(2000))],
        [
            {"op": "add", "path": f"{C0}/requests/cpu", "value": "1"},
            {"op": "add", "path": "/spec/containers/1/resources", "value": {}},
            {"op": "add", "path": "/spec/containers/1/resources/requests", "value": {}},
            {"op": "add", "path": "/spec/containers/1/resources/requests/cpu", "value": "2"},
            _updates("container 0: cpu request; container 1: cpu request"),
        ],
    ),
    (
        "new cpu limit",
        [EMPTY_SHAPE],
        [ContainerResources(limits=_r(1000))],
        [
            {"op": "add", "path": C0, "value": {}},
            {"op": "add", "path": f"{C0}/limits", "value": {}},
            {"op": "add", "path": f"{C0}/limits/cpu", "value": "1"},
            _updates("container 0: cpu limit"),
        ],
    ),
    (
        "replacement cpu limit",
        [LIMITS_SHAPE],
        [ContainerResources(limits=_r(1000))],
        [
            {"op": "add", "path": f"{C0}/limits/cpu", "value": "1"},
            _updates("container 0: cpu limit"),
        ],
    ),
    ("no recommendation present", [LIMITS_SHAPE], [ContainerResources()], []),
]


@pytest.mark.parametrize(
    ("shapes", "recommended", "expected"),
    [c[1:] for c in RESOURCE_UPDATES],
    ids=[c[0] for c in RESOURCE_UPDATES],
)
def test_resource_updates(
    shapes: list[ContainerShape], recommended: list[ContainerResources], expected: list[JSON]
) -> None:
    assert _writer(shapes, recommended) == expected


def test_resource_updates_end_to_end() -> None:
    # "new cpu recommendation" through the whole pod admission: a container with no resources at all and a
    # VPA recommending 1 CPU gets the same three resource patches and the same vpaUpdates text
    container = make_container(
        "c", cpu_request=None, memory_request=None, cpu_limit=None, memory_limit=None, probes=False
    )
    raw = make_pod(containers=[container])
    raw.pop("status")
    recommendation = [{"containerName": "c", "target": {"cpu": "1"}}]
    v = vpa_from_dict(make_vpa("name", recommendation=recommendation))
    ops = pod_patch(pod_from_dict(raw), pod_shape(raw), v, NO_LIMITS)
    assert [op for op in ops if op["path"].startswith(C0) or op["path"].endswith("vpaUpdates")] == [
        {"op": "add", "path": C0, "value": {}},
        {"op": "add", "path": f"{C0}/requests", "value": {}},
        {"op": "add", "path": f"{C0}/requests/cpu", "value": "1"},
        _updates("container 0: cpu request"),
    ]


# --- resource_updates_test.go: TestCalculatePatches_StartupBoost ---------------------------------------


def _container(req: str | None, lim: str | None) -> ContainerView:
    raw = make_pod(
        containers=[
            make_container(
                "container1",
                cpu_request=req,
                memory_request=None,
                cpu_limit=lim,
                memory_limit=None,
                probes=False,
            )
        ]
    )
    return pod_from_dict(raw).containers[0]


def _boost_vpa(
    boost: JSON | None = None,
    container_boost: JSON | None = None,
    *,
    mode: str | None = None,
    controlled_values: str | None = None,
) -> VpaView:
    policy: JSON = {"containerName": "container1"}
    if mode is not None:
        policy["mode"] = mode
    if controlled_values is not None:
        policy["controlledValues"] = controlled_values
    if container_boost is not None:
        policy["startupBoost"] = {"cpu": container_boost}
    raw = make_vpa(
        "name", container_policies=[policy], startup_boost={"cpu": boost} if boost is not None else None
    )
    return vpa_from_dict(raw)


def _factor(n: int, seconds: int = 10) -> JSON:
    return {"type": "Factor", "factor": n, "durationSeconds": seconds}


def _quantity(q: str, seconds: int = 10) -> JSON:
    return {"type": "Quantity", "quantity": q, "durationSeconds": seconds}


def _res(req: int | None, lim: int | None) -> ContainerResources:
    return ContainerResources(requests=_r(req), limits=_r(lim))


ORIGINAL_1M = '{"requests":{"cpu":"1m"},"limits":{"cpu":"1m"}}'
# (name, container (request, limit), VPA, recommended (request, limit) in millicores, max allowed boost,
#  expected (request, limit) or None for "no boost", expected annotation value)
BOOST: list[
    tuple[
        str,
        tuple[str | None, str | None],
        VpaView,
        tuple[int | None, int | None],
        int | None,
        tuple[int | None, int | None] | None,
        str | None,
    ]
] = [
    ("startup boost factor", ("1m", "1m"), _boost_vpa(_factor(2)), (100, 100), None, (200, 200), ORIGINAL_1M),
    (
        "startup boost factor with 0s duration",
        ("1m", "1m"),
        _boost_vpa(_factor(2, 0)),
        (100, 100),
        None,
        (200, 200),
        ORIGINAL_1M,
    ),
    (
        "startup boost quantity",
        ("1m", "1m"),
        _boost_vpa(_quantity("500m")),
        (100, 100),
        None,
        (600, 600),
        ORIGINAL_1M,
    ),
    (
        "quantity less than request",
        ("400m", "400m"),
        _boost_vpa(_quantity("200m")),
        (500, 500),
        None,
        (700, 700),
        '{"requests":{"cpu":"400m"},"limits":{"cpu":"400m"}}',
    ),
    ("startup boost capped", ("1m", "1m"), _boost_vpa(_factor(3, 1)), (20, 20), 40, (40, 40), ORIGINAL_1M),
    (
        "startup boost no recommendation",
        ("100m", "100m"),
        _boost_vpa(_factor(2)),
        (None, None),
        None,
        (200, 200),
        '{"requests":{"cpu":"100m"},"limits":{"cpu":"100m"}}',
    ),
    (
        "startup boost with ControlledValues=RequestsOnly",
        ("100m", "300m"),
        _boost_vpa(_factor(2), controlled_values="RequestsOnly"),
        (100, None),
        None,
        (200, None),
        '{"requests":{"cpu":"100m"},"limits":{"cpu":"300m"}}',
    ),
    (
        "startup boost with RequestsOnly - capped below limit to preserve pod Qos",
        ("100m", "150m"),
        _boost_vpa(_factor(2), controlled_values="RequestsOnly"),
        (100, None),
        None,
        (149, None),
        '{"requests":{"cpu":"100m"},"limits":{"cpu":"150m"}}',
    ),
    (
        "startup boost with ControlledValues=RequestsandLimits and limits set",
        ("100m", "300m"),
        _boost_vpa(_factor(2), controlled_values="RequestsAndLimits"),
        (150, None),
        None,
        (300, 900),
        '{"requests":{"cpu":"100m"},"limits":{"cpu":"300m"}}',
    ),
    (
        "startup boost with ControlledValues=RequestsandLimits and limits not set",
        ("100m", None),
        _boost_vpa(_factor(2), controlled_values="RequestsAndLimits"),
        (150, None),
        None,
        (300, None),
        '{"requests":{"cpu":"100m"},"limits":{}}',
    ),
    (
        "startup boost container policy takes precedence",
        ("1m", "1m"),
        _boost_vpa(_factor(2), container_boost=_factor(3)),
        (100, 100),
        None,
        (300, 300),
        ORIGINAL_1M,
    ),
    # DEVIATION: upstream fails the admission ("boost factor must be >= 1", "unsupported startup boost
    # type"); validation rejects such a VPA on create, and for an older one we apply the recommendation
    # without a boost
    ("invalid factor", ("1m", None), _boost_vpa(_factor(0)), (100, None), None, None, None),
    (
        "startup boost invalid type",
        ("1m", None),
        _boost_vpa({"type": "Invalid", "factor": 2, "durationSeconds": 10}),
        (100, None),
        None,
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("container", "v", "recommended", "max_allowed", "expected", "original"),
    [c[1:] for c in BOOST],
    ids=[c[0] for c in BOOST],
)
def test_startup_boost(
    container: tuple[str | None, str | None],
    v: VpaView,
    recommended: tuple[int | None, int | None],
    max_allowed: int | None,
    expected: tuple[int | None, int | None] | None,
    original: str | None,
) -> None:
    boosted = boost_container(_container(*container), v, _res(*recommended), max_allowed)
    if expected is None:
        assert boosted is None
        return
    assert boosted is not None
    resources, annotation = boosted
    assert (resources.requests.cpu_millicores, resources.limits.cpu_millicores) == expected
    assert annotation == original


def _boost_pod_patch(v: VpaView, gates: str) -> list[JSON]:
    container = make_container(
        "container1", cpu_request="100m", memory_request=None, cpu_limit=None, memory_limit=None, probes=False
    )
    raw = make_pod(containers=[container])
    raw.pop("status")
    options = AdmissionOptions(gates=FeatureGates.parse(gates))
    return pod_patch(pod_from_dict(raw), pod_shape(raw), v, NO_LIMITS, options)


def test_startup_boost_feature_gate_disabled() -> None:
    # "feature gate disabled": only the recommendation is written
    recommendation = [{"containerName": "container1", "target": {"cpu": "100m"}}]
    raw = make_vpa("name", startup_boost={"cpu": _factor(2)}, recommendation=recommendation)
    ops = _boost_pod_patch(vpa_from_dict(raw), "CPUStartupBoost=false")
    assert not any(op["path"].startswith("/metadata/annotations/vpaCpuStartupBoost") for op in ops)
    assert _updates("container 0: cpu request") in ops


def test_startup_boost_with_scaling_mode_off() -> None:
    # "startup boost with scaling mode off": nothing for that container
    recommendation = [{"containerName": "container1", "target": {"cpu": "1"}}]
    raw = make_vpa(
        "name",
        startup_boost={"cpu": _factor(2)},
        recommendation=recommendation,
        container_policies=[{"containerName": "container1", "mode": "Off"}],
    )
    ops = _boost_pod_patch(vpa_from_dict(raw), "CPUStartupBoost=true")
    assert [op for op in ops if op["path"].startswith(C0) or "vpaCpuStartupBoost" in op["path"]] == []
