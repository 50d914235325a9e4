"""AEP-10031 DaemonSet scope: which VPAs are scoped, a node's group, a DaemonSet pod's node at admission,
the per-group recommendations, the group a pod gets, and the webhook's checks."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.builders import make_vpa
from vpa.kube.converting import vpa_from_dict, vpa_status_from_dict, vpa_status_to_dict
from vpa.logic.admission.validation import validate_vpa
from vpa.logic.recommender.cluster import ContainerId, PodId
from vpa.logic.recommender.recommending import RecommenderCore, compute_group_recommendations
from vpa.logic.scope import (
    ABSENT,
    is_scoped,
    node_of_daemonset_pod,
    scope_label,
    scope_value,
    scoped_view,
    with_scope_label,
)
from vpa.model.features import FeatureGates
from vpa.model.resources import Resources
from vpa.model.selector import Selector
from vpa.model.vpa import RecommendationGroup, RecommendedContainerResources, TargetRef, VpaStatus, VpaView

GPU = "nvidia.com/gpu.present"
MIDNIGHT = 1_767_225_600.0
MIB = 2**20


def _view(kind: str = "DaemonSet", scope: str = GPU) -> VpaView:
    return VpaView("falco", "falco", target_ref=TargetRef("apps/v1", kind, "falco"), scope=scope)


@pytest.mark.parametrize(
    ("view", "enabled", "scoped"),
    [(_view(), True, True), (_view(), False, False), (_view(scope=""), True, False),
     (_view(kind="Deployment"), True, False)],
)  # fmt: skip
def test_is_scoped(view: VpaView, enabled: bool, scoped: bool) -> None:
    assert is_scoped(view, enabled) is scoped


@pytest.mark.parametrize(
    ("scope", "node", "labels", "value"),
    [
        (GPU, "n1", {GPU: "true"}, "true"),
        (GPU, "n1", {"other": "x"}, ABSENT),
        (GPU, "n1", None, None),  # unknown node
        ("kubernetes.io/hostname", "n1", None, "n1"),
    ],
)
def test_scope_value(scope: str, node: str, labels: dict[str, str] | None, value: str | None) -> None:
    assert scope_value(scope, node, labels) == value


def test_scope_label_is_not_a_valid_label_key_and_depends_on_the_key() -> None:
    assert scope_label(GPU).startswith("__vpa_scope_")
    assert scope_label(GPU) != scope_label("node.kubernetes.io/instance-type")
    assert with_scope_label({"app": "falco"}, GPU, "true") == {"app": "falco", scope_label(GPU): "true"}


def _affinity(node: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(
    ("spec", "node"),
    [
        ({"affinity": _affinity("gpu-1")}, "gpu-1"),  # the DaemonSet controller's affinity, not bound yet
        ({"nodeName": "cpu-2", "affinity": _affinity("gpu-1")}, "cpu-2"),
        ({}, ""),
        ({"affinity": {"nodeAffinity": {}}}, ""),
    ],
)
def test_node_of_daemonset_pod(spec: dict[str, Any], node: str) -> None:
    assert node_of_daemonset_pod({"spec": spec}) == node


def test_groups_split_the_same_containers_by_node_label() -> None:
    core = RecommenderCore()
    view = _view()
    core.cluster.add_or_update_vpa(view, Selector.from_match_labels({"app": "falco"}))
    label = scope_label(GPU)
    for name, value, cpu in (("on-gpu", "true", 900), ("on-cpu", ABSENT, 100)):
        pod = PodId("falco", name)
        core.cluster.add_or_update_pod(
            pod, with_scope_label({"app": "falco"}, GPU, value), "Running", MIDNIGHT
        )
        core.cluster.add_or_update_container(ContainerId(pod, "falco"), Resources(100, MIB), MIDNIGHT)
        for minute in range(8 * 1440):
            core.cluster.add_cpu_sample(ContainerId(pod, "falco"), cpu, MIDNIGHT + minute * 60)
            core.cluster.add_memory_sample(ContainerId(pod, "falco"), 100 * MIB, MIDNIGHT + minute * 60)
    states = core.cluster.merged_states_by_label("falco", "falco", label)
    groups = compute_group_recommendations(view, states, core.recommender, core.config)
    assert [g.scope_value for g in groups] == [ABSENT, "true"]
    (absent,), (gpu,) = (g.containers for g in groups)
    assert (absent.target.cpu_millicores or 0) < (gpu.target.cpu_millicores or 0)
    assert absent.upper_bound.is_empty()  # targets only, as the AEP compacts groups


def test_status_groups_round_trip_and_a_pod_gets_its_groups_recommendation() -> None:
    groups = (
        RecommendationGroup("true", (RecommendedContainerResources("falco", Resources(500, 512 * MIB)),)),
        RecommendationGroup(ABSENT, (RecommendedContainerResources("falco", Resources(100, 128 * MIB)),)),
    )
    raw = make_vpa("falco", target_kind="DaemonSet", target_name="falco")
    raw["spec"]["scope"] = GPU
    view = vpa_from_dict(raw)
    status = vpa_status_from_dict(vpa_status_to_dict(VpaStatus(groups=groups)))
    assert status.groups == groups
    view = dataclasses.replace(view, status=status)
    on_gpu = scoped_view(view, "true").recommendation
    assert on_gpu is not None
    assert on_gpu.containers[0].target == Resources(500, 512 * MIB)
    assert scoped_view(view, "never-seen").recommendation is None  # nothing invented from other groups
    assert scoped_view(view, None).recommendation is None


@pytest.mark.parametrize(
    ("kind", "gates", "old_scope", "errors"),
    [
        ("DaemonSet", "DaemonSetScope=true", None, []),
        ("Deployment", "DaemonSetScope=true", None,
         ["spec.scope: Forbidden: only a DaemonSet target can be scoped, not Deployment"]),
        ("DaemonSet", "", None,
         ["spec.scope: Forbidden: not supported when feature flag DaemonSetScope is disabled"]),
        ("DaemonSet", "", GPU, []),  # grandfathered
    ],
)  # fmt: skip
def test_validation(kind: str, gates: str, old_scope: str | None, errors: list[str]) -> None:
    raw = make_vpa("falco", target_kind=kind, target_name="falco")
    raw["spec"]["scope"] = GPU
    old = None
    if old_scope is not None:
        old = make_vpa("falco", target_kind=kind, target_name="falco")
        old["spec"]["scope"] = old_scope
    result = validate_vpa(raw, FeatureGates.parse(gates), old=old)
    assert [str(e) for e in result.errors] == errors


def test_aggregates_from_before_the_scope_belong_to_no_group() -> None:
    core = RecommenderCore()
    core.cluster.add_or_update_vpa(_view(), Selector.from_match_labels({"app": "falco"}))
    pod = PodId("falco", "early")
    core.cluster.add_or_update_pod(pod, {"app": "falco"}, "Running", MIDNIGHT)  # tracked before scoping
    core.cluster.add_or_update_container(ContainerId(pod, "falco"), Resources(100, MIB), MIDNIGHT)
    core.cluster.add_cpu_sample(ContainerId(pod, "falco"), 900, MIDNIGHT)
    assert core.cluster.merged_states_by_label("falco", "falco", scope_label(GPU)) == {}
    core.cluster.add_or_update_pod(pod, with_scope_label({"app": "falco"}, GPU, ABSENT), "Running", MIDNIGHT)
    core.cluster.add_cpu_sample(ContainerId(pod, "falco"), 100, MIDNIGHT + 60)
    groups = core.cluster.merged_states_by_label("falco", "falco", scope_label(GPU))
    assert set(groups) == {ABSENT}
    assert groups[ABSENT]["falco"].total_samples_count == 1  # the sample from before the label is not in it
