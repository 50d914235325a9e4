"""The chart renders valid, locked-down Deployments in every mode, with args that `vpa run` accepts.

Needs helm (hack/install-tools.sh); every test skips with one reason without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chart.rendering import (
    CHART,
    NAMESPACE,
    Rendered,
    args_of,
    container,
    helm,
    needs_helm,
    render,
    template_error,
    template_text,
    validate,
)
from vpa.flags import commands

pytestmark = needs_helm

COMPONENTS = ("recommender", "updater", "admission-controller")

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "split": {"mode": "split"},
    "ha": {"replicas": 3},
    "split-ha": {
        "mode": "split",
        "recommender": {"replicas": 2},
        "updater": {"replicas": 2},
        "admissionController": {"replicas": 3},
    },
    "cert-manager": {"admissionController": {"certificates": {"mode": "cert-manager"}}},
    "cert-manager-issuer": {
        "admissionController": {
            "certificates": {
                "mode": "cert-manager",
                "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
            }
        }
    },
    "user-secret": {"mode": "split", "admissionController": {"certificates": {"mode": "secret"}}},
    "servicemonitor": {"metrics": {"serviceMonitor": {"enabled": True}}},
    "everything-set": {
        "flags": {"v": 2, "kube-api-qps": 100, "ignored-vpa-object-namespaces": ["kube-system"]},
        "featureGates": {"InPlace": True, "PerVPAConfig": True},
        "recommender": {
            "flags": {
                "recommender-interval": "30s",
                "oom-min-bump-up-bytes": 104857600,
                "storage": "prometheus",
                "prometheus-bearer-token-file": "/etc/prometheus/token",
                "use-external-metrics": True,
            }
        },
        "updater": {"flags": {"min-replicas": 1, "eviction-rate-limit": 5.5}},
        "admissionController": {
            "flags": {"webhook-labels": {"team": "platform"}, "min-tls-version": "tls1_3"}
        },
        "pod": {
            "priorityClassName": "system-cluster-critical",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "extraVolumes": [{"name": "prometheus-token", "secret": {"secretName": "prometheus-token"}}],
            "extraVolumeMounts": [
                {"name": "prometheus-token", "mountPath": "/etc/prometheus", "readOnly": True}
            ],
        },
    },
}


@pytest.mark.parametrize("values", [{}, {"mode": "split"}], ids=["default", "split"])
def test_helm_lint_strict(values: dict[str, Any], tmp_path: Path) -> None:
    args = ["lint", "--strict", str(CHART)]
    if values:
        args += ["--set", "mode=split"]
    result = helm(*args)
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("name", list(VARIANTS), ids=list(VARIANTS))
def test_rendered_manifests_validate_against_kubernetes_1_35(name: str, tmp_path: Path) -> None:
    text = template_text(VARIANTS[name], tmp_path, include_crds=True)
    result = validate(text)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERROR" not in result.stdout


def test_default_is_one_deployment_running_every_component(tmp_path: Path) -> None:
    rendered = render({}, tmp_path)
    deployments = rendered.deployments()
    assert list(deployments) == ["vpa"]
    args = args_of(deployments["vpa"])
    assert args[0] == "run"
    assert "--components=recommender,updater,admission-controller" in args
    assert not any(arg.startswith("--leader-elect") for arg in args), "one replica needs no election"
    assert [sa["metadata"]["name"] for sa in rendered.of_kind("ServiceAccount")] == ["vpa"]
    assert deployments["vpa"]["spec"]["template"]["spec"]["serviceAccountName"] == "vpa"
    assert not rendered.of_kind("PodDisruptionBudget"), "a PDB over one replica could only block drains"


def test_split_renders_three_deployments_each_with_its_component_and_account(tmp_path: Path) -> None:
    rendered = render({"mode": "split"}, tmp_path)
    deployments = rendered.deployments()
    assert sorted(deployments) == sorted(f"vpa-{component}" for component in COMPONENTS)
    accounts = {sa["metadata"]["name"] for sa in rendered.of_kind("ServiceAccount")}
    for component in COMPONENTS:
        deployment = deployments[f"vpa-{component}"]
        assert f"--components={component}" in args_of(deployment)
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == f"vpa-{component}"
        assert pod["serviceAccountName"] in accounts
        assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == component
    webhook_args = args_of(deployments["vpa-admission-controller"])
    assert "--port=8000" in webhook_args
    assert not any(arg.startswith("--port") for arg in args_of(deployments["vpa-recommender"]))


def test_split_mode_can_leave_a_component_out(tmp_path: Path) -> None:
    rendered = render({"mode": "split", "admissionController": {"enabled": False}}, tmp_path)
    assert sorted(rendered.deployments()) == ["vpa-recommender", "vpa-updater"]
    assert not [s for s in rendered.of_kind("Service") if s["metadata"]["name"] == "vpa-webhook"]
    # Without an admission controller its status Lease never renews: the updater must not wait on it.
    assert "--use-admission-controller-status=false" in args_of(rendered.deployments()["vpa-updater"])


@pytest.mark.parametrize(
    ("values", "deployment", "elect"),
    [
        ({}, "vpa", False),
        ({"replicas": 2}, "vpa", True),
        ({"replicas": 2, "leaderElection": {"enabled": False}}, "vpa", False),
        ({"leaderElection": {"enabled": True}}, "vpa", True),
        ({"mode": "split", "recommender": {"replicas": 2}}, "vpa-recommender", True),
        ({"mode": "split", "recommender": {"replicas": 2}}, "vpa-updater", False),
        ({"mode": "split", "admissionController": {"replicas": 3}}, "vpa-admission-controller", False),
    ],
    ids=[
        "one-replica",
        "two-replicas",
        "forced-off",
        "forced-on",
        "split-recommender-ha",
        "split-updater-single",
        "split-webhook-never-elects",
    ],
)
def test_leader_election_is_on_exactly_when_replicas_exceed_one(
    values: dict[str, Any], deployment: str, elect: bool, tmp_path: Path
) -> None:
    rendered = render(values, tmp_path)
    args = args_of(rendered.deployments()[deployment])
    assert ("--leader-elect=true" in args) is elect
    if elect:
        assert f"--leader-elect-resource-namespace={NAMESPACE}" in args
        roles = [role["metadata"]["name"] for role in rendered.of_kind("Role")]
        assert any(name.endswith("-leader-election") for name in roles)


def test_pdb_for_each_deployment_with_replicas(tmp_path: Path) -> None:
    rendered = render(VARIANTS["split-ha"], tmp_path)
    pdbs = {pdb["metadata"]["name"]: pdb for pdb in rendered.of_kind("PodDisruptionBudget")}
    assert sorted(pdbs) == sorted(f"vpa-{component}" for component in COMPONENTS)
    for name, pdb in pdbs.items():
        labels = rendered.deployments()[name]["spec"]["selector"]["matchLabels"]
        assert pdb["spec"]["selector"]["matchLabels"] == labels
        assert pdb["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize("name", ["default", "split", "user-secret"], ids=str)
def test_pods_are_locked_down(name: str, tmp_path: Path) -> None:
    for deployment in render(VARIANTS[name], tmp_path).deployments().values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        security = container(deployment)["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["runAsNonRoot"] is True
        mounts = {mount["mountPath"]: mount["name"] for mount in container(deployment)["volumeMounts"]}
        assert mounts["/tmp"] == "tmp", "a read-only root needs a writable /tmp"
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
        assert container(deployment)["resources"]["requests"]


def test_probes_hit_healthz_and_readyz_on_the_metrics_port(tmp_path: Path) -> None:
    for deployment in render({"mode": "split"}, tmp_path).deployments().values():
        spec = container(deployment)
        ports = {port["name"]: port["containerPort"] for port in spec["ports"]}
        assert ports["metrics"] == 8942
        assert "--address=:8942" in spec["args"]
        assert spec["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert spec["startupProbe"]["httpGet"]["path"] == "/healthz"
        env = {item["name"]: item for item in spec["env"]}
        assert env["NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_webhook_service_routes_443_to_the_webhook_port_of_the_admission_pods(tmp_path: Path) -> None:
    for values in ({}, {"mode": "split"}):
        rendered = render(values, tmp_path)
        service = rendered.one("Service", "vpa-webhook")
        assert service["spec"]["ports"] == [
            {"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"}
        ]
        selected = [
            d
            for d in rendered.deployments().values()
            if all(
                d["spec"]["template"]["metadata"]["labels"].get(k) == v
                for k, v in service["spec"]["selector"].items()
            )
        ]
        assert len(selected) == 1
        deployment = selected[0]
        assert "admission-controller" in next(a for a in args_of(deployment) if a.startswith("--components"))
        assert {"name": "webhook", "containerPort": 8000, "protocol": "TCP"} in container(deployment)["ports"]
        assert "--webhook-service=vpa-webhook" in args_of(deployment)


@pytest.mark.parametrize(
    ("mode", "secret", "keys"),
    [
        ("cert-manager", "vpa-webhook-tls", ["ca.crt", "tls.crt", "tls.key"]),
        ("secret", "vpa-tls-certs", ["caCert.pem", "serverCert.pem", "serverKey.pem"]),
    ],
)
def test_file_certificates_are_mounted_where_the_flags_point(
    mode: str, secret: str, keys: list[str], tmp_path: Path
) -> None:
    rendered = render({"admissionController": {"certificates": {"mode": mode}}}, tmp_path)
    deployment = rendered.deployments()["vpa"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls-certs"]["secret"]["secretName"] == secret
    assert [item["key"] for item in volumes["tls-certs"]["secret"]["items"]] == keys
    assert [item["path"] for item in volumes["tls-certs"]["secret"]["items"]] == [
        "caCert.pem",
        "serverCert.pem",
        "serverKey.pem",
    ]
    args = args_of(deployment)
    for flag in (
        "--client-ca-file=/etc/tls-certs/caCert.pem",
        "--tls-cert-file=/etc/tls-certs/serverCert.pem",
        "--tls-private-key=/etc/tls-certs/serverKey.pem",
        "--reload-cert=true",
    ):
        assert flag in args
    assert not [r for r in rendered.of_kind("Role") if r["metadata"]["name"].endswith("-certs")], (
        "no Secret write access without self-managed certificates"
    )
    if mode == "cert-manager":
        certificate = rendered.one("Certificate", "vpa-webhook")
        assert certificate["spec"]["secretName"] == "vpa-webhook-tls"
        assert "vpa-webhook.vpa-system.svc" in certificate["spec"]["dnsNames"]
        assert rendered.one("Issuer", "vpa-selfsigned")["spec"] == {"selfSigned": {}}


def test_self_managed_certificates_mount_nothing(tmp_path: Path) -> None:
    deployment = render({}, tmp_path).deployments()["vpa"]
    assert [v["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]] == ["tmp"]
    assert not any(a.startswith(("--tls-cert-file", "--client-ca-file")) for a in args_of(deployment))


def test_extra_volumes_are_mounted_beside_the_charts_own(tmp_path: Path) -> None:
    deployment = render(VARIANTS["everything-set"], tmp_path).deployments()["vpa"]
    pod = deployment["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "prometheus-token"]
    assert pod["volumes"][1]["secret"] == {"secretName": "prometheus-token"}
    mounts = {m["name"]: m for m in container(deployment)["volumeMounts"]}
    assert mounts["prometheus-token"] == {"name": "prometheus-token", "mountPath": "/etc/prometheus",
                                          "readOnly": True}
    assert "--prometheus-bearer-token-file=/etc/prometheus/token" in args_of(deployment)


def test_flags_and_gates_from_values_appear_in_args(tmp_path: Path) -> None:
    args = args_of(render(VARIANTS["everything-set"], tmp_path).deployments()["vpa"])
    for expected in (
        "--v=2",
        "--kube-api-qps=100",
        "--ignored-vpa-object-namespaces=kube-system",
        "--recommender-interval=30s",
        "--oom-min-bump-up-bytes=104857600",
        "--storage=prometheus",
        "--min-replicas=1",
        "--eviction-rate-limit=5.5",
        "--webhook-labels=team:platform",
        "--min-tls-version=tls1_3",
        "--feature-gates=InPlace=true,PerVPAConfig=true",
    ):
        assert expected in args


def test_split_mode_gives_each_process_only_its_components_flags(tmp_path: Path) -> None:
    values = dict(VARIANTS["everything-set"], mode="split")
    deployments = render(values, tmp_path).deployments()
    recommender, updater = args_of(deployments["vpa-recommender"]), args_of(deployments["vpa-updater"])
    assert "--recommender-interval=30s" in recommender
    assert "--recommender-interval=30s" not in updater
    assert "--min-replicas=1" in updater
    assert "--min-replicas=1" not in recommender
    assert "--v=2" in recommender
    assert "--v=2" in updater


@pytest.mark.parametrize("name", ["default", "split", "split-ha", "ha", "user-secret", "everything-set"])
def test_vpa_run_accepts_every_rendered_command_line(name: str, tmp_path: Path) -> None:
    """The chart and the binary agree: each container's args parse into settings, with the chart's intent."""
    rendered = render(VARIANTS[name], tmp_path)
    for deployment in rendered.deployments().values():
        args = args_of(deployment)
        assert args[0] == "run"
        settings = commands.parse_run_args(args[1:], {"NAMESPACE": NAMESPACE})
        components = next(a for a in args if a.startswith("--components=")).split("=", 1)[1].split(",")
        assert sorted(settings.components) == sorted(components)
        if "admission-controller" in components:
            assert settings.admission.port == 8000
            assert settings.admission.webhook_service == "vpa-webhook"
            assert settings.admission.webhook_service_namespace == NAMESPACE
        elect = "--leader-elect=true" in args
        for component in ("recommender", "updater"):
            if component in components:
                election = getattr(settings, component).leader_election
                assert election.leader_elect is elect
                if elect:
                    assert election.resource_namespace == NAMESPACE


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"recommender": {"flags": {"min-replicas": 2}}}, "min-replicas"),
        ({"flags": {"address": ":9000"}}, "address"),
        ({"flags": {"v": "loud"}}, "/flags/v"),
        ({"featureGates": {"InPlac": True}}, "InPlac"),
        ({"mode": "both"}, "mode"),
        ({"replicsa": 2}, "replicsa"),
        (
            {
                "admissionController": {
                    "certificates": {"mode": "self-managed"},
                    "flags": {"register-webhook": False},
                }
            },
            "register-webhook",
        ),
        ({"leaderElection": {"updaterLeaseName": "vpa-recommender-lease"}}, "must differ"),
    ],
    ids=[
        "flag-of-another-component",
        "chart-managed-flag",
        "wrong-type",
        "unknown-gate",
        "unknown-mode",
        "misspelt-key",
        "self-managed-without-registration",
        "same-lease-twice",
    ],
)
def test_helm_refuses_values_the_binary_would_refuse(
    values: dict[str, Any], message: str, tmp_path: Path
) -> None:
    assert message in template_error(values, tmp_path)


def test_servicemonitor_scrapes_the_metrics_service(tmp_path: Path) -> None:
    rendered: Rendered = render(VARIANTS["servicemonitor"], tmp_path)
    monitor = rendered.one("ServiceMonitor", "vpa")
    service = rendered.one("Service", "vpa-metrics")
    assert all(
        service["metadata"]["labels"].get(k) == v
        for k, v in monitor["spec"]["selector"]["matchLabels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"] == "metrics"
