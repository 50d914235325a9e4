#!/usr/bin/env python3
"""Generate charts/vpa/values.schema.json and charts/vpa/README.md from values.yaml and the flag table.

Owns: reading the `# --` comment above every key of values.yaml (a key without one is an error, unless it
sits inside a free-form object such as `pod.resources`), the values schema (types from the defaults,
closed objects so a misspelt key fails `helm install`, and the flag maps typed from `vpa.flags.table` so
only real flags of the right component are accepted), and the chart README (values table, flag tables,
the flags the chart sets itself).

The chart cannot drift from the binary: a flag added to `vpa/flags/table.py` changes the generated schema
and README, and tests/chart/test_chart_docs.py fails until this script is run again.

Usage: hack/gen-chart-docs.py            # write both files
       hack/gen-chart-docs.py --check    # exit 1 and name the stale file(s) instead of writing

Must not: render templates or call helm (tests/chart does that).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vpa.flags import parsing, table  # noqa: E402
from vpa.model import features  # noqa: E402

CHART = ROOT / "charts" / "vpa"
VALUES = CHART / "values.yaml"
SCHEMA = CHART / "values.schema.json"
README = CHART / "README.md"
README_TEMPLATE = CHART / "README.md.tmpl"

# Flags the chart sets from structured values; they are not accepted in the `flags` maps.
MANAGED_FLAGS: Mapping[str, str] = {
    "components": "`mode` and `<component>.enabled`",
    "address": "`metrics.port`",
    "feature-gates": "`featureGates`",
    "leader-elect": "`leaderElection.enabled` (and the replica count)",
    "leader-elect-lease-duration": "`leaderElection.leaseDuration`",
    "leader-elect-renew-deadline": "`leaderElection.renewDeadline`",
    "leader-elect-retry-period": "`leaderElection.retryPeriod`",
    "leader-elect-resource-lock": "always `leases`",
    "leader-elect-resource-name": "`leaderElection.recommenderLeaseName` / `updaterLeaseName`",
    "leader-elect-resource-namespace": "`leaderElection.namespace`",
    "recommender-leader-elect-resource-name": "`leaderElection.recommenderLeaseName`",
    "recommender-leader-elect-resource-namespace": "`leaderElection.namespace`",
    "updater-leader-elect-resource-name": "`leaderElection.updaterLeaseName`",
    "updater-leader-elect-resource-namespace": "`leaderElection.namespace`",
    "port": "`admissionController.port`",
    "webhook-service": "`admissionController.service.name`",
    "client-ca-file": "`admissionController.certificates` (mounted at /etc/tls-certs)",
    "tls-cert-file": "`admissionController.certificates` (mounted at /etc/tls-certs)",
    "tls-private-key": "`admissionController.certificates` (mounted at /etc/tls-certs)",
    "reload-cert": "`admissionController.certificates` (on for cert-manager and Secret certificates)",
}

# Values maps of flags, and the flag-table groups each accepts.
FLAG_MAPS: Mapping[str, tuple[table.Group, ...]] = {
    "flags": (table.Group.COMMON, table.Group.LOGGING),
    "recommender.flags": (table.Group.RECOMMENDER,),
    "updater.flags": (table.Group.UPDATER,),
    "admissionController.flags": (table.Group.ADMISSION,),
}

# Objects with defaults that are Kubernetes types, not chart groupings: any keys allowed.
FREE_FORM: frozenset[str] = frozenset(
    {"pod.resources", "pod.securityContext", "pod.containerSecurityContext",
     "metrics.grafanaDashboard.labels"}
)

# Schema refinements the defaults cannot express.
OVERRIDES: Mapping[str, dict[str, Any]] = {
    "mode": {"enum": ["combined", "split"]},
    "admissionController.certificates.mode": {"enum": ["self-managed", "cert-manager", "secret"]},
    "leaderElection.enabled": {"type": ["boolean", "null"]},
    "image.pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    "replicas": {"minimum": 0},
    "recommender.replicas": {"minimum": 0},
    "updater.replicas": {"minimum": 0},
    "admissionController.replicas": {"minimum": 0},
    "metrics.port": {"minimum": 1, "maximum": 65535},
    "admissionController.port": {"minimum": 1, "maximum": 65535},
    "admissionController.service.port": {"minimum": 1, "maximum": 65535},
    "extraArgs": {"items": {"type": "string"}},
    "recommender.extraArgs": {"items": {"type": "string"}},
    "updater.extraArgs": {"items": {"type": "string"}},
    "admissionController.extraArgs": {"items": {"type": "string"}},
}


class ValuesError(Exception):
    """values.yaml breaks a rule this script enforces (a key without a `# --` comment)."""


# ------------------------------------------------------------------------------------- values comments

_KEY_RE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][\w.-]*):(?:\s|$)")
_DOC_RE = re.compile(r"^ *# -- (?P<text>.*)$")
_MORE_RE = re.compile(r"^ *#(?: (?P<text>.*))?$")


def read_descriptions(text: str) -> dict[str, str]:
    """`dotted.path` → description, from the `# --` comment block right above each key."""
    descriptions: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for line in text.splitlines():
        doc = _DOC_RE.match(line)
        if doc:
            pending = [doc["text"].strip()]
            continue
        more = _MORE_RE.match(line)
        if more and pending is not None:
            pending.append((more["text"] or "").strip())
            continue
        key = _KEY_RE.match(line)
        if key:
            indent = len(key["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, key["key"]))
            if pending is not None:
                descriptions[".".join(name for _, name in stack)] = " ".join(pending).strip()
        pending = None
    return descriptions


@dataclass(frozen=True)
class Entry:
    path: str
    value: Any
    description: str
    group: bool  # a closed object whose keys are documented one by one


def _free_form(path: str, value: Any) -> bool:
    return isinstance(value, dict) and (
        not value or path in FREE_FORM or path in FLAG_MAPS or path == "featureGates"
    )


def walk(values: Mapping[str, Any], descriptions: Mapping[str, str], prefix: str = "") -> Iterator[Entry]:
    for key, value in values.items():
        path = f"{prefix}{key}"
        if path not in descriptions:
            raise ValuesError(f"values.yaml: key {path!r} has no `# --` comment above it")
        group = isinstance(value, dict) and not _free_form(path, value)
        yield Entry(path, value, descriptions[path], group)
        if group:
            yield from walk(value, descriptions, path + ".")


# --------------------------------------------------------------------------------------------- schema


def _json_type(value: Any) -> str | list[str]:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return ["string", "number", "boolean", "array", "object", "null"]


def _flag_type(flag: table.FlagDef) -> dict[str, Any]:
    kind = flag.kind
    if kind is table.LABELS_KIND:
        return {"type": ["string", "object", "null"], "additionalProperties": {"type": "string"}}
    if kind is table.AUTO_BOOL:  # `auto`, or a boolean as the flag was before it had `auto`
        return {"type": ["string", "boolean", "null"], "enum": ["auto", "true", "false", True, False, None]}
    if kind is table.CIPHERS_KIND or kind is parsing.STRING_LIST:
        return {"type": ["string", "array", "null"], "items": {"type": "string"}}
    by_name: dict[str, list[str]] = {
        "bool": ["boolean"],
        "int": ["integer"],
        "uint": ["integer"],
        "Level": ["integer"],
        "float": ["number"],
        "quantity": ["string", "number"],
        "severity": ["string", "integer"],
    }
    return {"type": [*by_name.get(kind.type_name, ["string"]), "null"]}


def _flag_description(flag: table.FlagDef) -> str:
    default = flag.default_display()
    text = " ".join(flag.help.split())
    return f"{text} Default: {default}." if default else text


def flags_for(path: str) -> list[table.FlagDef]:
    groups = FLAG_MAPS[path]
    return [flag for flag in table.RUN_FLAGS if flag.group in groups and flag.name not in MANAGED_FLAGS]


def _schema_of(entry: Entry) -> dict[str, Any]:
    schema: dict[str, Any] = {"description": entry.description}
    if entry.path in FLAG_MAPS:
        schema["type"] = "object"
        schema["additionalProperties"] = False
        schema["properties"] = {
            flag.name: {**_flag_type(flag), "description": _flag_description(flag)}
            for flag in flags_for(entry.path)
        }
    elif entry.path == "featureGates":
        schema["type"] = "object"
        schema["additionalProperties"] = False
        schema["properties"] = {
            gate.name: {
                "type": "boolean",
                "description": f"{gate.stage.value}, default {gate.default}. "
                + " ".join(gate.effect.split()),
            }
            for gate in features.GATES
        }
    elif entry.group:
        schema["type"] = "object"
        schema["additionalProperties"] = False
        schema["properties"] = {}
    else:
        schema["type"] = _json_type(entry.value)
    schema.update(OVERRIDES.get(entry.path, {}))
    return schema


def build_schema(entries: Sequence[Entry]) -> dict[str, Any]:
    root: dict[str, Any] = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Values of the vpa chart (generated by hack/gen-chart-docs.py; do not edit)",
        "type": "object",
        "additionalProperties": False,
        "properties": {},
    }
    nodes: dict[str, dict[str, Any]] = {"": root}
    for entry in entries:
        parent = entry.path.rpartition(".")[0]
        node = _schema_of(entry)
        nodes[parent]["properties"][entry.path.rpartition(".")[2]] = node
        nodes[entry.path] = node
    return root


# --------------------------------------------------------------------------------------------- README


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(value: Any) -> str:
    if isinstance(value, dict | list) and value:
        return "see values.yaml" if len(json.dumps(value)) > 60 else f"`{json.dumps(value)}`"
    return f"`{json.dumps(value)}`"


def values_table(entries: Sequence[Entry]) -> str:
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for entry in entries:
        kind = "object" if entry.group else _json_type(entry.value)
        if entry.path == "leaderElection.enabled":
            kind = "bool or null"
        default = "" if entry.group else _default(entry.value)
        rows.append(
            f"| `{entry.path}` | {kind if isinstance(kind, str) else 'any'} | {default} | "
            f"{_cell(entry.description)} |"
        )
    return "\n".join(rows)


def flags_tables() -> str:
    parts = []
    for path in FLAG_MAPS:
        parts.append(f"### `{path}`\n")
        parts.append("| Flag | Type | Default | Description |")
        parts.append("|---|---|---|---|")
        for flag in flags_for(path):
            default = flag.default_display()
            parts.append(
                f"| `{flag.name}` | {flag.kind.type_name} | {_cell(default) if default else ''} | "
                f"{_cell(' '.join(flag.help.split()))} |"
            )
        parts.append("")
    return "\n".join(parts).rstrip()


def managed_table() -> str:
    rows = ["| Flag | Set from |", "|---|---|"]
    rows += [f"| `--{name}` | {source} |" for name, source in MANAGED_FLAGS.items()]
    return "\n".join(rows)


def gates_table() -> str:
    rows = ["| Gate | Stage | Default | Effect |", "|---|---|---|---|"]
    for gate in features.GATES:
        rows.append(
            f"| `{gate.name}` | {gate.stage.value} | {str(gate.default).lower()} | "
            f"{_cell(' '.join(gate.effect.split()))} |"
        )
    return "\n".join(rows)


def render_readme(entries: Sequence[Entry]) -> str:
    template = README_TEMPLATE.read_text()
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    replacements = {
        "{{ VERSION }}": str(chart["version"]),
        "{{ APP_VERSION }}": str(chart["appVersion"]),
        "{{ VALUES_TABLE }}": values_table(entries),
        "{{ FLAGS_TABLES }}": flags_tables(),
        "{{ MANAGED_FLAGS }}": managed_table(),
        "{{ FEATURE_GATES }}": gates_table(),
    }
    for marker, text in replacements.items():
        if marker not in template:
            raise ValuesError(f"{README_TEMPLATE.name}: marker {marker} is missing")
        template = template.replace(marker, text)
    return template


# ------------------------------------------------------------------------------------------------ main


def generate() -> dict[Path, str]:
    text = VALUES.read_text()
    entries = list(walk(yaml.safe_load(text), read_descriptions(text)))
    schema = json.dumps(build_schema(entries), indent=2) + "\n"
    return {SCHEMA: schema, README: render_readme(entries)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    args = parser.parse_args(argv)
    try:
        outputs = generate()
    except ValuesError as error:
        print(f"gen-chart-docs: {error}", file=sys.stderr)
        return 1
    stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run hack/gen-chart-docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(outputs[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
