"""Helpers for the chart tests: run helm, parse what it renders, and answer RBAC questions about it.

Owns: locating `.tools/helm/helm` (installed by hack/install-tools.sh) and skipping cleanly without it,
`render()` (helm template with a values dict → parsed objects), `validate()` (kubernetes-validate --strict
on rendered YAML), and `Permissions`, a small RBAC evaluator over the rendered Roles and bindings.

Must not: reach the network or a cluster.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "vpa"
HELM = ROOT / ".tools" / "helm" / "helm"
RELEASE = "vpa"
NAMESPACE = "vpa-system"
KUBERNETES_VERSION = "1.35.0"

needs_helm = pytest.mark.skipif(
    not HELM.exists(), reason="helm not installed: run hack/install-tools.sh (puts it at .tools/helm/helm)"
)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=60, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def template_text(values: Mapping[str, Any] | None, tmp_dir: Path, *, include_crds: bool = False) -> str:
    values_file = tmp_dir / "values.yaml"
    values_file.write_text(yaml.safe_dump(dict(values or {})))
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values_file)]
    if include_crds:
        args.append("--include-crds")
    return helm(*args).stdout


def template_error(values: Mapping[str, Any], tmp_dir: Path) -> str:
    """The error helm prints for values it must refuse (fails the test when helm accepts them)."""
    values_file = tmp_dir / "values.yaml"
    values_file.write_text(yaml.safe_dump(dict(values)))
    result = helm(
        "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values_file), check=False
    )
    assert result.returncode != 0, f"helm accepted {values!r}"
    return result.stderr


def parse(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@dataclass(frozen=True)
class Rendered:
    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = [obj for obj in self.of_kind(kind) if obj["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: found {len(found)}; have {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        return sorted(f"{obj['kind']}/{obj['metadata']['name']}" for obj in self.objects)

    def deployments(self) -> dict[str, dict[str, Any]]:
        return {obj["metadata"]["name"]: obj for obj in self.of_kind("Deployment")}


def render(values: Mapping[str, Any] | None, tmp_dir: Path) -> Rendered:
    return Rendered(parse(template_text(values, tmp_dir)))


def validate(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", KUBERNETES_VERSION, "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def container(deployment: Mapping[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def args_of(deployment: Mapping[str, Any]) -> list[str]:
    return list(container(deployment)["args"])


# ---------------------------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class Grant:
    namespace: str | None  # None: cluster-wide (ClusterRole through a ClusterRoleBinding)
    rule: Mapping[str, Any]

    def allows(self, verb: str, group: str, resource: str, namespace: str | None, name: str | None) -> bool:
        if self.namespace is not None and self.namespace != namespace:
            return False
        rule = self.rule
        if not _matches(rule.get("verbs", []), verb) or not _matches(rule.get("apiGroups", []), group):
            return False
        if not any(_resource_matches(pattern, resource) for pattern in rule.get("resources", [])):
            return False
        names = rule.get("resourceNames")
        return not names or (name is not None and name in names)


def _matches(patterns: Sequence[str], value: str) -> bool:
    return "*" in patterns or value in patterns


def _resource_matches(pattern: str, resource: str) -> bool:
    if pattern in ("*", resource):
        return True
    if pattern.startswith("*/"):
        return "/" in resource and resource.split("/", 1)[1] == pattern[2:]
    return False


class Permissions:
    """What one ServiceAccount may do, from the rendered (Cluster)Roles and (Cluster)RoleBindings."""

    def __init__(self, rendered: Rendered, service_account: str, namespace: str = NAMESPACE) -> None:
        roles = {
            ("ClusterRole", obj["metadata"]["name"], None): obj for obj in rendered.of_kind("ClusterRole")
        }
        roles.update(
            {
                ("Role", obj["metadata"]["name"], obj["metadata"]["namespace"]): obj
                for obj in rendered.of_kind("Role")
            }
        )
        self.grants: list[Grant] = []
        for binding in rendered.of_kind("ClusterRoleBinding") + rendered.of_kind("RoleBinding"):
            if not _binds(binding, service_account, namespace):
                continue
            binding_ns = binding["metadata"].get("namespace")
            ref = binding["roleRef"]
            role = roles.get((ref["kind"], ref["name"], binding_ns if ref["kind"] == "Role" else None))
            assert role is not None, f"{binding['metadata']['name']} refers to a missing {ref}"
            for rule in role.get("rules", []):
                self.grants.append(Grant(binding_ns, rule))

    def allows(
        self,
        verb: str,
        group: str,
        resource: str,
        *,
        namespace: str | None = "some-namespace",
        name: str | None = None,
    ) -> bool:
        return any(grant.allows(verb, group, resource, namespace, name) for grant in self.grants)


def _binds(binding: Mapping[str, Any], service_account: str, namespace: str) -> bool:
    return any(
        subject.get("kind") == "ServiceAccount"
        and subject.get("name") == service_account
        and subject.get("namespace") == namespace
        for subject in binding.get("subjects") or []
    )
