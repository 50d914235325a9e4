"""The chart's files agree with the package: one CRD source, one version, generated docs and schema fresh,
and the values schema accepts exactly the binary's flags. No helm needed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import jsonschema
import pytest
import yaml

import vpa
from tests.chart.rendering import CHART, ROOT
from vpa.flags import table
from vpa.model import features

GENERATOR = ROOT / "hack" / "gen-chart-docs.py"


def _generator_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_chart_docs", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


def _schema() -> dict[str, Any]:
    return dict(json.loads((CHART / "values.schema.json").read_text()))


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def test_chart_crds_are_the_package_crds_byte_for_byte() -> None:
    assert (CHART / "crds" / "vpa-v1.yaml").read_bytes() == (
        ROOT / "vpa" / "crds" / "vpa-v1.yaml"
    ).read_bytes()
    assert [p.name for p in (CHART / "crds").iterdir()] == ["vpa-v1.yaml"]


def test_versions_agree() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == vpa.__version__
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"ARG VERSION={vpa.__version__}" in dockerfile
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{vpa.__version__}"' in pyproject


def test_generated_readme_and_schema_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


def test_every_values_key_has_a_comment() -> None:
    gen = _generator_module()
    text = (CHART / "values.yaml").read_text()
    entries = list(gen.walk(yaml.safe_load(text), gen.read_descriptions(text)))
    assert all(entry.description for entry in entries)
    with pytest.raises(gen.ValuesError, match="'newKey'"):
        list(gen.walk(yaml.safe_load(text + "\nnewKey: 1\n"), gen.read_descriptions(text + "\nnewKey: 1\n")))


def test_default_values_satisfy_the_schema() -> None:
    jsonschema.validate(_values(), _schema())


FLAG_MAPS = {
    "flags": ("flags",),
    "recommender.flags": ("recommender", "flags"),
    "updater.flags": ("updater", "flags"),
    "admissionController.flags": ("admissionController", "flags"),
}


def _flag_map_schema(path: tuple[str, ...]) -> dict[str, Any]:
    node = _schema()
    for key in path:
        node = node["properties"][key]
    return node


def test_every_flag_is_settable_in_exactly_one_place() -> None:
    gen = _generator_module()
    accepted: dict[str, list[str]] = {}
    for label, path in FLAG_MAPS.items():
        for name in _flag_map_schema(path)["properties"]:
            accepted.setdefault(name, []).append(label)
    for flag in table.RUN_FLAGS:
        places = accepted.get(flag.name, [])
        if flag.name in gen.MANAGED_FLAGS:
            assert places == [], f"--{flag.name} is set by the chart, yet accepted in {places}"
        else:
            assert len(places) == 1, f"--{flag.name} is accepted in {places}"
    assert set(gen.MANAGED_FLAGS) <= set(table.RUN_FLAGS_BY_NAME), "a managed flag no longer exists"


@pytest.mark.parametrize(
    ("values", "ok"),
    [
        ({"recommender": {"flags": {"recommender-interval": "30s"}}}, True),
        ({"recommender": {"flags": {"recommender-interval": None}}}, True),
        ({"updater": {"flags": {"recommender-interval": "30s"}}}, False),
        ({"updater": {"flags": {"min-replicas": "2"}}}, False),
        ({"flags": {"kube-api-qps": 20.5, "v": 4, "log-format": "json"}}, True),
        ({"flags": {"components": "recommender"}}, False),
        ({"admissionController": {"flags": {"webhook-labels": {"a": "b"}}}}, True),
        ({"featureGates": {gate.name: True for gate in features.GATES}}, True),
        ({"featureGates": {"InPlace": "yes"}}, False),
        ({"pod": {"resources": {"limits": {"ephemeral-storage": "1Gi"}}}}, True),
        ({"image": {"registry": "x"}}, False),
    ],
    ids=[
        "recommender-flag",
        "null-unsets",
        "flag-in-wrong-component",
        "wrong-type",
        "common-flags",
        "managed-flag",
        "labels-map",
        "all-gates",
        "gate-not-bool",
        "free-form-resources",
        "unknown-key",
    ],
)
def test_schema_accepts_real_flags_only(values: dict[str, Any], ok: bool) -> None:
    merged = _values()
    for key, value in values.items():
        merged[key] = {**merged[key], **value} if isinstance(merged.get(key), dict) else value
    if ok:
        jsonschema.validate(merged, _schema())
    else:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(merged, _schema())


def test_readme_documents_every_accepted_flag_and_gate() -> None:
    readme = (CHART / "README.md").read_text()
    for flag in table.RUN_FLAGS:
        assert f"`{flag.name}`" in readme or f"`--{flag.name}`" in readme, flag.name
    for gate in features.GATES:
        assert f"`{gate.name}`" in readme


def test_templates_have_no_unused_helpers() -> None:
    sources = "".join(p.read_text() for p in (CHART / "templates").iterdir())
    defined = re.findall(r'define "([^"]+)"', sources)
    for name in defined:
        assert sources.count(f'"{name}"') > 1, f"helper {name} is never used"
