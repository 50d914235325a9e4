"""Every VerticalPodAutoscaler users are shown is accepted by our CRD and by upstream's.

Collects custom resources of the `autoscaling.k8s.io` group from docs/examples, any YAML under docs/ and
e2e/, and ```yaml blocks in README.md and docs/**/*.md, then validates each against the openAPIV3Schema of
the served version in vpa/crds/vpa-v1.yaml and in upstream's generated CRD (its schema, without descriptions,
in tests/data/). Other kinds in those files (the example Deployment) go through kubernetes-validate.

The CRD schema is read the way the API server reads it with strict field validation (kubectl's default):
objects with `properties` reject unknown fields unless `x-kubernetes-preserve-unknown-fields` is set, and
`x-kubernetes-int-or-string` accepts an integer or a string, `nullable` accepts null. CEL rules
(`x-kubernetes-validations`) are not evaluated here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OUR_CRDS = ROOT / "vpa" / "crds" / "vpa-v1.yaml"
UPSTREAM_CRDS = ROOT / "tests" / "data" / "upstream-vpa-v1-crd-schema.yaml"
GROUP = "autoscaling.k8s.io"
_YAML_BLOCK = re.compile(r"```ya?ml\n(.*?)```", re.DOTALL)


def _sources() -> Iterator[tuple[str, str]]:
    """(label, YAML text) of every place examples live."""
    for pattern in ("docs/**/*.yaml", "docs/**/*.yml", "e2e/**/*.yaml", "e2e/**/*.yml"):
        for path in sorted(ROOT.glob(pattern)):
            yield str(path.relative_to(ROOT)), path.read_text()
    for path in [ROOT / "README.md", *sorted(ROOT.glob("docs/**/*.md"))]:
        if path.exists():
            for index, block in enumerate(_YAML_BLOCK.findall(path.read_text())):
                yield f"{path.relative_to(ROOT)}#yaml{index + 1}", block


def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for label, text in _sources():
        try:
            docs = [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
        except yaml.YAMLError:
            continue  # a Helm values fragment or a shell snippet: not a manifest
        for index, doc in enumerate(docs):
            if "apiVersion" in doc and "kind" in doc:
                name = (doc.get("metadata") or {}).get("name", "?")
                found.append((f"{label}[{index}]:{doc['kind']}/{name}", doc))
    return found


DOCUMENTS = _documents()
CUSTOM = [(label, doc) for label, doc in DOCUMENTS if str(doc["apiVersion"]).startswith(GROUP + "/")]
BUILTIN = [(label, doc) for label, doc in DOCUMENTS if not str(doc["apiVersion"]).startswith(GROUP + "/")]


def to_json_schema(node: Any) -> Any:
    """A CRD structural schema as JSON Schema, closed the way strict field validation closes it."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: to_json_schema(value)
        for key, value in node.items()
        if not key.startswith("x-kubernetes-") and not (key == "nullable" and isinstance(value, bool))
    }
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and "additionalProperties" not in node and not preserve:
        out["additionalProperties"] = False
    return out


def load_schemas(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → JSON Schema of each served version in a CRD file."""
    schemas = {}
    for crd in yaml.safe_load_all(path.read_text()):
        if not crd:
            continue
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            schema = to_json_schema(version["schema"]["openAPIV3Schema"])
            # ObjectMeta is not part of the CRD schema; the API server needs a name (or generateName).
            schema["properties"]["metadata"] = {
                "type": "object",
                "anyOf": [{"required": ["name"]}, {"required": ["generateName"]}],
                "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
            }
            schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
            schemas[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = schema
    return schemas


def _errors(schemas: Mapping[tuple[str, str], dict[str, Any]], doc: Mapping[str, Any]) -> list[str]:
    schema = schemas.get((doc["apiVersion"], doc["kind"]))
    if schema is None:
        return [f"no served version {doc['apiVersion']} of kind {doc['kind']}"]
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(doc)
    ]


def test_examples_exist_for_every_update_mode_and_policy() -> None:
    modes = {
        (doc.get("spec", {}).get("updatePolicy") or {}).get("updateMode")
        for label, doc in CUSTOM
        if label.startswith("docs/examples/")
    }
    assert {"Off", "Initial", "Recreate", "InPlaceOrRecreate", "InPlace"} <= modes
    specs = [doc["spec"] for label, doc in CUSTOM if label.startswith("docs/examples/")]
    assert any("resourcePolicy" in spec for spec in specs)
    assert any("recommenders" in spec for spec in specs)


@pytest.mark.parametrize(("label", "doc"), CUSTOM, ids=[label for label, _ in CUSTOM])
def test_custom_resource_validates_against_our_crd(label: str, doc: dict[str, Any]) -> None:
    assert _errors(load_schemas(OUR_CRDS), doc) == []


@pytest.mark.parametrize(("label", "doc"), CUSTOM, ids=[label for label, _ in CUSTOM])
def test_custom_resource_validates_against_upstream_crd(label: str, doc: dict[str, Any]) -> None:
    assert _errors(load_schemas(UPSTREAM_CRDS), doc) == []


@pytest.mark.parametrize(("label", "doc"), BUILTIN, ids=[label for label, _ in BUILTIN])
def test_builtin_kinds_in_examples_validate_against_kubernetes(label: str, doc: dict[str, Any]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", "1.35.0", "-"],
        input=yaml.safe_dump(doc),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0 and "No module named kubernetes_validate" in result.stderr:
        pytest.skip("kubernetes-validate is not installed")
    assert result.returncode == 0, result.stdout + result.stderr


BAD: list[tuple[str, dict[str, Any]]] = [
    (
        "unknown-spec-field",
        {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
            "updatePolicy": {"updateMode": "Auto"},
            "resourcePolicyy": {},
        },
    ),
    (
        "bad-update-mode",
        {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
            "updatePolicy": {"updateMode": "Sometimes"},
        },
    ),
    ("no-target", {"updatePolicy": {"updateMode": "Off"}}),
    (
        "bad-controlled-values",
        {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
            "resourcePolicy": {
                "containerPolicies": [{"containerName": "a", "controlledValues": "LimitsOnly"}]
            },
        },
    ),
    (
        "quantity-not-a-list",
        {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
            "resourcePolicy": {"containerPolicies": [{"containerName": "a", "minAllowed": {"cpu": ["1"]}}]},
        },
    ),
]


@pytest.mark.parametrize(("name", "spec"), BAD, ids=[name for name, _ in BAD])
def test_the_schema_check_rejects_broken_objects(name: str, spec: dict[str, Any]) -> None:
    """The validation above can fail: typical mistakes are caught by both CRDs."""
    doc = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "x"},
        "spec": spec,
    }
    assert _errors(load_schemas(OUR_CRDS), doc)
    assert _errors(load_schemas(UPSTREAM_CRDS), doc)


def test_int_or_string_quantities_accept_both_forms() -> None:
    doc = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "x"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
            "resourcePolicy": {
                "containerPolicies": [{"containerName": "a", "minAllowed": {"cpu": 1, "memory": "64Mi"}}]
            },
        },
    }
    assert _errors(load_schemas(OUR_CRDS), doc) == []


def test_checkpoint_validates_against_both_crds() -> None:
    checkpoint = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "VerticalPodAutoscalerCheckpoint",
        "metadata": {"name": "hamster-hamster", "namespace": "default"},
        "spec": {"vpaObjectName": "hamster", "containerName": "hamster"},
        "status": {
            "version": "v3",
            "totalSamplesCount": 12,
            "firstSampleStart": None,
            "lastSampleStart": None,
            "cpuHistogram": {"referenceTimestamp": None, "bucketWeights": {"3": 10000}, "totalWeight": 3.5},
            "memoryHistogram": {"referenceTimestamp": None, "bucketWeights": {}, "totalWeight": 0},
        },
    }
    for path in (OUR_CRDS, UPSTREAM_CRDS):
        if path.exists():
            assert _errors(load_schemas(path), checkpoint) == [], path
