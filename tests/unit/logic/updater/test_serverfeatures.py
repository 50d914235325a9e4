"""What the updater resizes in place on which API server (issue 42): the server's version → pod-level
resources and plain init containers allowed or not, the flag's override, the refusals that turn a feature
off, and what a pass then decides for a pod with pod-level resources or a plain init container.

Rows come from Kubernetes' feature tables (`InPlacePodLevelResourcesVerticalScaling`: alpha and off in 1.35,
beta and on from 1.36; `InPlacePodVerticalScalingInitContainers`: beta and on in 1.36, GA in 1.37) and from
kube-apiserver's `ValidatePodResize` texts.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.builders import make_container
from tests.unit.logic.updater.test_support import KEY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import Action, Reason, resize_patch
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.logic.updater.serverfeatures import (
    Refused,
    ResizeFeatures,
    features_for_version,
    parse_git_version,
    refused_feature,
    with_override,
    without,
)
from vpa.model.features import FeatureGates
from vpa.model.resources import Resources

MI = 2**20


@pytest.mark.parametrize(
    ("git_version", "expected"),
    [
        ("v1.37.2", (1, 37)),
        ("v1.38.0-beta.0", (1, 38)),
        ("v1.36.3-gke.1200", (1, 36)),
        ("v1.35.4+k3s1", (1, 35)),
        ("1.36.0", (1, 36)),
        ("v1.36", (1, 36)),
        ("  v1.37.0\n", (1, 37)),
        ("", None),
        ("v1", None),
        ("devel", None),
        ("v1.x.0", None),
    ],
)  # fmt: skip
def test_git_version_is_read_as_major_and_minor(git_version: str, expected: tuple[int, int] | None) -> None:
    assert parse_git_version(git_version) == expected


@pytest.mark.parametrize(
    ("version", "pod_level", "init_containers"),
    [
        ((1, 33), False, False),
        ((1, 34), False, False),
        ((1, 35), False, False),  # both alpha (pod-level) or absent (init containers), off by default
        ((1, 36), True, True),    # both beta and on by default
        ((1, 37), True, True),    # init containers GA
        ((1, 38), True, True),    # InPlacePodVerticalScaling removed: nothing here depends on it
        ((2, 0), True, True),
        (None, True, True),       # unknown: a supported release (1.36+) until a refusal says otherwise
    ],
)  # fmt: skip
def test_version_decides_what_is_resized_in_place(
    version: tuple[int, int] | None, pod_level: bool, init_containers: bool
) -> None:
    features = features_for_version(version)
    assert (features.pod_level, features.init_containers) == (pod_level, init_containers)
    assert features.version == version


@pytest.mark.parametrize(
    ("version", "override", "pod_level"),
    [
        ((1, 35), None, False),   # auto
        ((1, 36), None, True),
        ((1, 35), True, True),    # 1.35 with its alpha gate switched on
        ((1, 37), False, False),  # the operator knows better (a runtime that blocks pod-level resizes)
        ((1, 37), True, True),
    ],
)  # fmt: skip
def test_the_flag_overrides_the_version(
    version: tuple[int, int], override: bool | None, pod_level: bool
) -> None:
    features = with_override(features_for_version(version), override)
    assert features.pod_level is pod_level
    assert features.init_containers is (version >= (1, 36))  # the flag is about pod-level resources only


POD_LEVEL_TEXT = (
    'Pod "web-1" is invalid: : Forbidden: resize of pods with pod-level resources is forbidden when '
    "InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled"
)
INIT_TEXT = 'Pod "web-1" is invalid: spec: Forbidden: resources for non-sidecar init containers are immutable'
OLD_INIT_TEXT = (
    'Pod "web-1" is invalid: spec: Forbidden: '
    "only cpu and memory resources for sidecar containers are mutable"
)


@pytest.mark.parametrize(
    ("status", "message", "refused"),
    [
        (422, POD_LEVEL_TEXT, Refused.POD_LEVEL),
        (422, INIT_TEXT, Refused.INIT_CONTAINERS),
        (422, OLD_INIT_TEXT, Refused.INIT_CONTAINERS),
        (422, 'Pod "web-1" is invalid: spec: Invalid value: "Burstable": Pod QOS Class may not change as a '
              "result of resizing", None),
        (403, POD_LEVEL_TEXT, None),  # only kube-apiserver's validation answer counts
        (409, INIT_TEXT, None),
        (500, POD_LEVEL_TEXT, None),
        (0, "", None),
    ],
)  # fmt: skip
def test_a_refusal_names_the_feature_the_server_lacks(
    status: int, message: str, refused: Refused | None
) -> None:
    assert refused_feature(status, message) is refused


def test_a_refusal_turns_only_its_feature_off() -> None:
    features = features_for_version((1, 37))
    assert without(features, Refused.POD_LEVEL) == ResizeFeatures(False, True, (1, 37))
    assert without(features, Refused.INIT_CONTAINERS) == ResizeFeatures(True, False, (1, 37))
    twice = without(without(features, Refused.POD_LEVEL), Refused.POD_LEVEL)
    assert twice == ResizeFeatures(False, True, (1, 37))


# --- what a pass decides -------------------------------------------------------------------------------

GATES = FeatureGates.parse("PodLevelResources=true,InPlace=true")


def _pod_level_pod() -> object:
    view = pod(containers=[ctr("app", cpu="500m", mem="512Mi")])
    return dataclasses.replace(view, has_pod_level_resources=True, pod_requests=Resources(500, 512 * MI))


@pytest.mark.parametrize(
    ("version", "override", "mode", "action", "reason"),
    [
        ((1, 37), None, "InPlaceOrRecreate", Action.RESIZE, Reason.OUTSIDE_RANGE),
        ((1, 36), None, "InPlace", Action.RESIZE, Reason.OUTSIDE_RANGE),
        ((1, 35), None, "InPlaceOrRecreate", Action.EVICT, Reason.POD_LEVEL_RESIZE_UNSUPPORTED),
        ((1, 35), None, "InPlace", Action.SKIP, Reason.POD_LEVEL_RESIZE_UNSUPPORTED),
        ((1, 35), True, "InPlaceOrRecreate", Action.RESIZE, Reason.OUTSIDE_RANGE),
        ((1, 37), False, "InPlaceOrRecreate", Action.EVICT, Reason.POD_LEVEL_RESIZE_UNSUPPORTED),
    ],
)  # fmt: skip
def test_pod_level_resize_follows_the_servers_version(
    version: tuple[int, int], override: bool | None, mode: str, action: Action, reason: Reason
) -> None:
    target = _pod_level_pod()
    recs = [rec("app", cpu="900m", mem="800Mi", lower=("800m", "700Mi"))]
    features = with_override(features_for_version(version), override)
    inputs = PassInputs(now=NOW, gates=GATES, replicas={KEY: 3}, infeasible=InfeasibleAttempts(),
                        resize_features=features)
    plan = plan_vpa(vpa(mode, recs), [target, pod("web-2"), pod("web-3")], inputs)  # type: ignore[list-item]
    (decision,) = [d for d in plan.decisions if d.pod.name == "web-1"]
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    if action is Action.RESIZE:
        assert decision.pod_level is not None
        assert decision.pod_level.requests == Resources(900, 800 * MI)


def test_a_learned_pod_level_refusal_never_loops() -> None:
    # 1.37 detected, then a refusal (the gate switched off on that server): the InPlace pod is left alone
    # from the next pass on, InPlaceOrRecreate evicts; neither sends that resize again.
    features = without(features_for_version((1, 37)), Refused.POD_LEVEL)
    recs = [rec("app", cpu="900m", mem="800Mi", lower=("800m", "700Mi"))]
    for mode, action in (("InPlace", Action.SKIP), ("InPlaceOrRecreate", Action.EVICT)):
        inputs = PassInputs(now=NOW, gates=GATES, replicas={KEY: 3}, infeasible=InfeasibleAttempts(),
                            resize_features=features)
        plan = plan_vpa(vpa(mode, recs), [_pod_level_pod(), pod("web-2"), pod("web-3")], inputs)  # type: ignore[list-item]
        (decision,) = [d for d in plan.decisions if d.pod.name == "web-1"]
        assert (decision.action, decision.reason) == (action, Reason.POD_LEVEL_RESIZE_UNSUPPORTED)


# --- plain init containers -----------------------------------------------------------------------------

APP_OPS = [
    {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "900m"},
    {"op": "add", "path": "/spec/containers/0/resources/requests/memory", "value": "800Mi"},
]
INIT_OPS = [
    {"op": "add", "path": "/spec/initContainers/0/resources/requests/cpu", "value": "50m"},
    {"op": "add", "path": "/spec/initContainers/0/resources/requests/memory", "value": "64Mi"},
]


def _init(
    name: str = "migrate", restart: str | None = None, policy: dict[str, str] | None = None
) -> dict[str, object]:
    return make_container(name, cpu_request="2", memory_request="1Gi", cpu_limit=None, memory_limit=None,
                          probes=False, port=None, restart_policy=restart, resize_policy=policy)


@pytest.mark.parametrize(
    ("version", "mode", "init", "app_target", "action", "ops"),
    [
        # 1.36+: the init container the recommendation names rides along with the app's resize.
        ((1, 37), "InPlaceOrRecreate", _init(), "900m", Action.RESIZE, APP_OPS + INIT_OPS),
        ((1, 36), "InPlace", _init(), "900m", Action.RESIZE, APP_OPS + INIT_OPS),
        # Below 1.36 the server refuses any change to it: left out.
        ((1, 35), "InPlaceOrRecreate", _init(), "900m", Action.RESIZE, APP_OPS),
        # A RestartContainer policy on a plain init container: kube-apiserver refuses its resize.
        ((1, 37), "InPlace", _init(policy={"cpu": "RestartContainer"}), "900m", Action.RESIZE, APP_OPS),
        # The init container alone never triggers an update (nor, so, an eviction for it).
        ((1, 37), "InPlaceOrRecreate", _init(), "500m", Action.SKIP, None),
        ((1, 37), "InPlace", _init(), "500m", Action.SKIP, None),
        # Recreate never looks at it: the admission controller does not set init containers.
        ((1, 37), "Recreate", _init(), "900m", Action.EVICT, None),
    ],
    ids=["1.37-rides-along", "1.36-in-place", "1.35-left-out", "restart-policy-left-out",
         "alone-no-trigger", "alone-no-trigger-in-place", "recreate-ignores"],
)  # fmt: skip
def test_plain_init_containers_are_resized_where_the_server_allows(
    version: tuple[int, int], mode: str, init: dict[str, object], app_target: str, action: Action,
    ops: list[dict[str, str]] | None,
) -> None:
    target = pod(containers=[ctr("app", cpu="500m", mem="512Mi")], init_containers=[init])
    app_memory = "800Mi" if app_target != "500m" else "512Mi"
    lower = ("800m", "700Mi") if app_target != "500m" else ("400m", "400Mi")
    recs = [rec("app", cpu=app_target, mem=app_memory, lower=lower),
            rec("migrate", cpu="50m", mem="64Mi", upper=("100m", "128Mi"))]
    inputs = PassInputs(now=NOW, replicas={KEY: 3}, infeasible=InfeasibleAttempts(), gates=GATES,
                        resize_features=features_for_version(version))
    plan = plan_vpa(vpa(mode, recs), [target, pod("web-2"), pod("web-3")], inputs)
    (decision,) = [d for d in plan.decisions if d.pod.name == "web-1"]
    assert decision.action is action, decision.explain()
    if ops is not None:
        assert resize_patch(decision.pod, decision.changes, decision.pod_level) == ops


def test_native_sidecars_resize_on_every_version() -> None:
    # Sidecars (the NativeSidecar view) resize wherever in-place resize exists; no version gates them.
    sidecar = _init("proxy", restart="Always")
    plain = pod(containers=[ctr("app", cpu="500m", mem="512Mi")], init_containers=[sidecar])
    target = plain.with_native_sidecars()
    recs = [rec("app", cpu="900m", mem="800Mi", lower=("800m", "700Mi")),
            rec("proxy", cpu="50m", mem="64Mi", upper=("100m", "128Mi"))]
    for version in ((1, 33), (1, 35), (1, 37)):
        inputs = PassInputs(now=NOW, replicas={KEY: 3}, infeasible=InfeasibleAttempts(), gates=GATES,
                            resize_features=features_for_version(version))
        plan = plan_vpa(vpa("InPlace", recs), [target, pod("web-2"), pod("web-3")], inputs)
        (decision,) = [d for d in plan.decisions if d.pod.name == "web-1"]
        assert decision.action is Action.RESIZE, decision.explain()
        assert resize_patch(decision.pod, decision.changes) == APP_OPS + INIT_OPS
