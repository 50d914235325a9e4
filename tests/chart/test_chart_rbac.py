"""Least privilege per component: each ServiceAccount can do what its component does, and no more.

A table test over the rendered RBAC (evaluated by `rendering.Permissions`), in split mode (one account per
component) and combined mode (one account with the union). Needs helm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.rendering import NAMESPACE, Permissions, Rendered, needs_helm, render

pytestmark = needs_helm

ANY_NS = "team-a"
# (verb, group, resource, namespace or None for cluster-scoped, resource name or None)
Need = tuple[str, str, str, str | None, str | None]

TARGETS: list[Need] = [
    *[
        (verb, "apps", kind, ANY_NS, None)
        for verb in ("get", "list", "watch")
        for kind in ("deployments", "replicasets", "statefulsets", "daemonsets")
    ],
    ("get", "", "replicationcontrollers", ANY_NS, None),
    ("list", "batch", "jobs", ANY_NS, None),
    ("watch", "batch", "cronjobs", ANY_NS, None),
    ("get", "argoproj.io", "rollouts/scale", ANY_NS, None),
]
EVENTS: list[Need] = [("create", "", "events", ANY_NS, None), ("patch", "", "events", ANY_NS, None)]

NEEDS: dict[str, list[Need]] = {
    "recommender": [
        ("get", "", "pods", ANY_NS, None),
        ("list", "", "pods", None, None),
        ("watch", "", "pods", None, None),
        ("list", "autoscaling.k8s.io", "verticalpodautoscalers", None, None),
        ("watch", "autoscaling.k8s.io", "verticalpodautoscalers", None, None),
        ("patch", "autoscaling.k8s.io", "verticalpodautoscalers/status", ANY_NS, None),
        *[
            (verb, "autoscaling.k8s.io", "verticalpodautoscalercheckpoints", ANY_NS, None)
            for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
        ],
        ("list", "metrics.k8s.io", "pods", None, None),
        ("list", "", "events", None, None),  # OOMs from Evicted events
        ("watch", "", "events", None, None),
        ("list", "autoscaling", "horizontalpodautoscalers", None, None),  # ConflictingHPA
        ("watch", "autoscaling", "horizontalpodautoscalers", None, None),
        *TARGETS,
        *EVENTS,
    ],
    "updater": [
        ("list", "", "pods", None, None),
        ("watch", "", "pods", None, None),
        ("patch", "", "pods", ANY_NS, None),
        ("create", "", "pods/eviction", ANY_NS, None),
        ("patch", "", "pods/resize", ANY_NS, None),
        ("list", "", "limitranges", None, None),
        ("watch", "autoscaling.k8s.io", "verticalpodautoscalers", None, None),
        ("get", "coordination.k8s.io", "leases", NAMESPACE, "vpa-admission-controller"),
        *TARGETS,
        *EVENTS,
    ],
    "admission-controller": [
        ("list", "", "pods", None, None),
        ("watch", "", "limitranges", None, None),
        ("watch", "autoscaling.k8s.io", "verticalpodautoscalers", None, None),
        ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, None),
        ("get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, "vpa-webhook-config"),
        (
            "update",
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            None,
            "vpa-webhook-config",
        ),
        ("create", "coordination.k8s.io", "leases", NAMESPACE, None),
        ("get", "coordination.k8s.io", "leases", NAMESPACE, "vpa-admission-controller"),
        ("update", "coordination.k8s.io", "leases", NAMESPACE, "vpa-admission-controller"),
        ("create", "", "secrets", NAMESPACE, None),
        ("get", "", "secrets", NAMESPACE, "vpa-webhook-certs"),
        ("update", "", "secrets", NAMESPACE, "vpa-webhook-certs"),
        *TARGETS,
        *EVENTS,
    ],
}

FORBIDDEN: dict[str, list[Need]] = {
    "recommender": [
        ("create", "", "pods/eviction", ANY_NS, None),
        ("patch", "", "pods/resize", ANY_NS, None),
        ("patch", "", "pods", ANY_NS, None),
        ("get", "", "secrets", NAMESPACE, "vpa-webhook-certs"),
        ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, None),
        ("update", "autoscaling.k8s.io", "verticalpodautoscalers", ANY_NS, None),
        # upstream 1.8.1 dropped these: checkpoint garbage collection needs no namespace list (nor does ours)
        ("list", "", "namespaces", None, None),
        ("get", "", "namespaces", None, ANY_NS),
    ],
    "updater": [
        ("patch", "autoscaling.k8s.io", "verticalpodautoscalers/status", ANY_NS, None),
        ("create", "autoscaling.k8s.io", "verticalpodautoscalercheckpoints", ANY_NS, None),
        ("get", "", "secrets", NAMESPACE, "vpa-webhook-certs"),
        ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, None),
        ("update", "coordination.k8s.io", "leases", NAMESPACE, "vpa-admission-controller"),
        ("delete", "", "pods", ANY_NS, None),
    ],
    "admission-controller": [
        ("create", "", "pods/eviction", ANY_NS, None),
        ("patch", "", "pods", ANY_NS, None),
        ("patch", "autoscaling.k8s.io", "verticalpodautoscalers/status", ANY_NS, None),
        ("get", "", "secrets", NAMESPACE, "some-other-secret"),
        ("list", "", "secrets", NAMESPACE, None),
        ("get", "", "secrets", ANY_NS, "vpa-webhook-certs"),
        ("update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, "someone-elses"),
        ("delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None, None),
    ],
}

EVERY_COMPONENT_FORBIDDEN: list[Need] = [
    ("get", "", "secrets", ANY_NS, None),
    ("list", "", "secrets", None, None),
    ("create", "", "pods", ANY_NS, None),
    ("update", "apps", "deployments", ANY_NS, None),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", None, None),
    ("update", "", "nodes", None, None),
]


def _rows(table: dict[str, list[Need]]) -> list[tuple[str, Need]]:
    return [(component, need) for component, needs in table.items() for need in needs]


def _id(row: tuple[str, Need]) -> str:
    component, (verb, group, resource, _namespace, name) = row
    return f"{component}:{verb}:{group or 'core'}/{resource}" + (f"[{name}]" if name else "")


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return render(
        {"mode": "split", "recommender": {"replicas": 2}, "updater": {"replicas": 2}},
        tmp_path_factory.mktemp("split"),
    )


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return render({"replicas": 2}, tmp_path_factory.mktemp("combined"))


@pytest.mark.parametrize("row", _rows(NEEDS), ids=_id)
def test_split_component_has_what_it_needs(row: tuple[str, Need], split: Rendered) -> None:
    component, (verb, group, resource, namespace, name) = row
    assert Permissions(split, f"vpa-{component}").allows(
        verb, group, resource, namespace=namespace, name=name
    )


@pytest.mark.parametrize("row", _rows(FORBIDDEN), ids=_id)
def test_split_component_lacks_what_others_need(row: tuple[str, Need], split: Rendered) -> None:
    component, (verb, group, resource, namespace, name) = row
    assert not Permissions(split, f"vpa-{component}").allows(
        verb, group, resource, namespace=namespace, name=name
    )


@pytest.mark.parametrize("row", _rows(NEEDS), ids=_id)
def test_combined_account_has_the_union(row: tuple[str, Need], combined: Rendered) -> None:
    _, (verb, group, resource, namespace, name) = row
    assert Permissions(combined, "vpa").allows(verb, group, resource, namespace=namespace, name=name)


@pytest.mark.parametrize("need", EVERY_COMPONENT_FORBIDDEN, ids=lambda n: f"{n[0]}:{n[1] or 'core'}/{n[2]}")
def test_no_account_gets_broad_writes_or_secrets(need: Need, split: Rendered, combined: Rendered) -> None:
    verb, group, resource, namespace, name = need
    for rendered, accounts in ((split, [f"vpa-{c}" for c in NEEDS]), (combined, ["vpa"])):
        for account in accounts:
            assert not Permissions(rendered, account).allows(
                verb, group, resource, namespace=namespace, name=name
            ), account


@pytest.mark.parametrize(
    ("component", "lease"), [("recommender", "vpa-recommender-lease"), ("updater", "vpa-updater")]
)
def test_leader_election_lease_only_when_electing(
    component: str, lease: str, split: Rendered, tmp_path: Path
) -> None:
    for verb in ("create", "get", "update"):
        assert Permissions(split, f"vpa-{component}").allows(
            verb, "coordination.k8s.io", "leases", namespace=NAMESPACE, name=lease
        )
    single = render({"mode": "split"}, tmp_path)
    assert not Permissions(single, f"vpa-{component}").allows(
        "update", "coordination.k8s.io", "leases", namespace=NAMESPACE, name=lease
    )


def test_external_metrics_only_when_the_flag_asks(tmp_path: Path) -> None:
    plain = Permissions(render({}, tmp_path), "vpa")
    assert not plain.allows("list", "external.metrics.k8s.io", "cpu_usage", namespace=ANY_NS)
    external = Permissions(
        render({"recommender": {"flags": {"use-external-metrics": True}}}, tmp_path), "vpa"
    )
    assert external.allows("list", "external.metrics.k8s.io", "cpu_usage", namespace=ANY_NS)


@pytest.mark.parametrize("flags", [{}, {"cap-to-largest-node": False}])
def test_nodes_only_with_cap_to_largest_node(flags: dict[str, object], tmp_path: Path) -> None:
    plain = Permissions(render({"recommender": {"flags": flags}}, tmp_path), "vpa")
    assert not plain.allows("list", "", "nodes")
    for mode in ("combined", "split"):
        account = "vpa" if mode == "combined" else "vpa-recommender"
        capped = Permissions(
            render({"mode": mode, "recommender": {"flags": {"cap-to-largest-node": True}}}, tmp_path), account
        )
        for verb in ("list", "watch"):
            assert capped.allows(verb, "", "nodes")
        assert not capped.allows("update", "", "nodes")
        assert not capped.allows("get", "", "nodes/proxy")


@pytest.mark.parametrize(("value", "allowed"), [(True, True), (False, False)])
def test_hpas_unless_detection_is_off(value: object, allowed: bool, tmp_path: Path) -> None:
    rendered = render({"recommender": {"flags": {"detect-hpa-conflicts": value}}}, tmp_path)
    assert Permissions(rendered, "vpa").allows("watch", "autoscaling", "horizontalpodautoscalers") is allowed
    assert not Permissions(rendered, "vpa").allows("update", "autoscaling", "horizontalpodautoscalers",
                                                   namespace=ANY_NS)


def test_extra_target_rules_reach_every_component(tmp_path: Path) -> None:
    extra = [{"apiGroups": ["argoproj.io"], "resources": ["rollouts"], "verbs": ["get", "list", "watch"]}]
    rendered = render({"mode": "split", "rbac": {"extraTargetRules": extra}}, tmp_path)
    for component in NEEDS:
        assert Permissions(rendered, f"vpa-{component}").allows(
            "get", "argoproj.io", "rollouts", namespace=ANY_NS
        )


def test_rbac_create_false_renders_no_rbac(tmp_path: Path) -> None:
    rendered = render({"rbac": {"create": False}}, tmp_path)
    kinds = {obj["kind"] for obj in rendered.objects}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
