"""Pod view lookups and the annotation value formats vpa reads and writes."""

from __future__ import annotations

import pytest

from vpa.model import annotations as ann
from vpa.model.pod import ContainerStatusView, ContainerView, PodCondition, PodView
from vpa.model.resources import Resources

SPEC_APP = ContainerView("app", requests=Resources(100, 200), limits=Resources(200, 400))
SPEC_INIT = ContainerView("init", requests=Resources(5, 6), restart_policy="Always")


CURRENT_CASES = [
    (
        "status-wins",
        ContainerStatusView("app", actual_requests=Resources(150, 300), actual_limits=Resources(300, 600)),
        Resources(150, 300),
        Resources(300, 600),
    ),
    (
        "spec-when-status-has-no-resources",
        ContainerStatusView("app"),
        Resources(100, 200),
        Resources(200, 400),
    ),
    (
        "status-requests-only",
        ContainerStatusView("app", actual_requests=Resources(150, None)),
        Resources(150, None),
        Resources(200, 400),
    ),
    ("spec-when-no-status", None, Resources(100, 200), Resources(200, 400)),
]


@pytest.mark.parametrize(
    ("status", "requests", "limits"), [c[1:] for c in CURRENT_CASES], ids=[c[0] for c in CURRENT_CASES]
)
def test_current_resources(
    status: ContainerStatusView | None, requests: Resources, limits: Resources
) -> None:
    pod = PodView("ns", "p", containers=(SPEC_APP,), container_statuses=(status,) if status else ())
    assert pod.current_requests("app") == requests
    assert pod.current_limits("app") == limits


def test_init_container_lookups() -> None:
    pod = PodView(
        "ns",
        "p",
        containers=(SPEC_APP,),
        init_containers=(SPEC_INIT,),
        init_container_statuses=(ContainerStatusView("init", actual_requests=Resources(7, 8)),),
    )
    assert pod.current_requests("init") == Resources(7, 8)
    assert pod.current_limits("init") == Resources()
    assert pod.sidecars == (SPEC_INIT,)
    assert pod.container("init") is None
    assert pod.container("app") is SPEC_APP
    assert pod.container_status("app") is None


OBSERVED_CASES = [
    ("absent", {}, None),
    ("two", {ann.VPA_OBSERVED_CONTAINERS: "app, sidecar"}, ("app", "sidecar")),
    ("empty-means-none-observed", {ann.VPA_OBSERVED_CONTAINERS: ""}, ()),
    ("unparseable-means-all", {ann.VPA_OBSERVED_CONTAINERS: "app,sidecar"}, None),
    ("uppercase-is-invalid", {ann.VPA_OBSERVED_CONTAINERS: "App"}, None),
]


@pytest.mark.parametrize(
    ("annotations", "expected"), [c[1:] for c in OBSERVED_CASES], ids=[c[0] for c in OBSERVED_CASES]
)
def test_observed_containers(annotations: dict[str, str], expected: tuple[str, ...] | None) -> None:
    assert PodView("ns", "p", annotations=annotations).observed_containers() == expected


@pytest.mark.parametrize(
    ("value", "names"),
    [("", ()), ("app", ("app",)), ("app, sidecar-2, x", ("app", "sidecar-2", "x"))],
    ids=["empty", "one", "three"],
)
def test_observed_containers_round_trip(value: str, names: tuple[str, ...]) -> None:
    assert ann.parse_observed_containers(value) == names
    assert ann.format_observed_containers(names) == value


@pytest.mark.parametrize(
    "value",
    ["app,sidecar", "app,  sidecar", "-app", "a" * 64, "app, ", "under_score"],
    ids=["no-space", "two-spaces", "leading-dash", "too-long", "trailing-separator", "underscore"],
)
def test_observed_containers_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="not a valid container name"):
        ann.parse_observed_containers(value)


def test_read_pod_annotations_filter() -> None:
    kept = [
        ann.VPA_OBSERVED_CONTAINERS,
        ann.VPA_IN_PLACE_UPDATED,
        "vpaCpuStartupBoost/app",
        ann.LEGACY_STARTUP_CPU_BOOST,
    ]
    dropped = [
        ann.VPA_UPDATES,
        "kubectl.kubernetes.io/restartedAt",
        "prometheus.io/scrape",
        "vpaCpuStartupBoost",
    ]
    assert all(ann.is_read_pod_annotation(key) for key in kept)
    assert not any(ann.is_read_pod_annotation(key) for key in dropped)


def test_boost_annotation_round_trip() -> None:
    value = ann.format_original_resources(Resources(250, 268_435_456), Resources(500, None))
    assert value == '{"requests":{"cpu":"250m","memory":"256Mi"},"limits":{"cpu":"500m"}}'
    assert ann.parse_original_resources(value) == (Resources(250, 268_435_456), Resources(500, None))
    # What upstream writes (Go's json.Marshal of the original quantities) parses too.
    upstream = '{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"100Mi"}}'
    assert ann.parse_original_resources(upstream) == (
        Resources(100, 104_857_600),
        Resources(200, 104_857_600),
    )
    assert ann.cpu_startup_boost_key("app") == "vpaCpuStartupBoost/app"
    pod = PodView(
        "ns", "p", annotations={"vpaCpuStartupBoost/b": "{}", "vpaCpuStartupBoost/a": "{}", "x": "y"}
    )
    assert pod.boosted_containers() == ("a", "b")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "not JSON"),
        ("[]", "must be a JSON object"),
        ('{"requests": []}', "requests must be an object"),
        ('{"limits": {"cpu": "lots"}}', "limits.cpu"),
    ],
    ids=["not-json", "list", "requests-list", "bad-quantity"],
)
def test_boost_annotation_errors(value: str, message: str) -> None:
    with pytest.raises(ValueError, match="boost annotation") as caught:
        ann.parse_original_resources(value)
    assert message in str(caught.value)


def test_integer_cpu_annotations() -> None:
    annotations = {
        ann.integer_cpu_key("app"): "true",
        ann.integer_cpu_key("side-car"): "True",  # upstream compares with "true" exactly
        ann.integer_cpu_key("db"): "true",
        "vpa-post-processor.kubernetes.io/_integerCPU": "true",  # no container name
        "other": "true",
    }
    assert ann.integer_cpu_key("app") == "vpa-post-processor.kubernetes.io/app_integerCPU"
    assert ann.integer_cpu_containers(annotations) == frozenset({"app", "db"})


def test_vpa_updates_value() -> None:
    value = ann.format_vpa_updates("web", ["container 0: cpu request, memory request", "container 1: "])
    assert value == "Pod resources updated by web: container 0: cpu request, memory request; container 1: "


def test_condition_lookups_keep_order() -> None:
    in_progress = PodCondition("PodResizeInProgress", "True")
    pending = PodCondition("PodResizePending", "False", "Deferred")
    ready = PodCondition("Ready", "True", last_transition_time=5.0)
    pod = PodView("ns", "p", conditions=(in_progress, ready, pending))
    assert pod.resize_in_progress is in_progress
    assert pod.resize_pending is pending
    assert pod.ready is ready
    assert pod.condition("PodScheduled") is None
    assert pod.conditions[0] is in_progress
    assert PodView("ns", "p").ready is None
