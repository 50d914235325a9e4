"""Text rendered from the flag table and the gate table: `--help`, docs/flags.md, docs/feature-gates.md.

Owns: the layout of help screens (flags grouped by component, each with type and default) and of the two
generated Markdown documents. Tests compare the committed documents with these renderings.

Must not: parse or build settings, or write files (`vpa flags-doc` prints; `make flags-doc` redirects).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from vpa.flags import table
from vpa.flags.table import FlagDef, Group
from vpa.model import features, settings

_WIDTH = 100

RUN_USAGE = """\
Usage: vpa run [flags]

Run the selected VPA components (recommender, updater, admission controller) in one process.
Flags keep the upstream VPA's names, defaults and Go syntax: --flag=value, --flag value, -flag,
booleans as --flag or --flag=false, durations as 30s, 1m, 1h30m."""

REPLAY_USAGE = (
    "Usage: vpa replay TRACE [--at TIME] [--every DURATION] [--output json|yaml|csv|table] "
    "[recommender flags]\n"
    "       vpa replay TRACE --evaluate [--loop open|closed] [--every DURATION] [--recommender NAME]\n"
    "                        [--output json|table|html]\n"
    "       vpa replay --list-recommenders\n\n"
    "Run the recommender's logic over a CSV or Parquet usage trace, offline, and print its recommendations\n"
    "(and, when the trace has request columns, the current requests and target minus requests), or with\n"
    "--evaluate score them over time against the usage that followed.\n\n"
    + settings.REPLAY_TRACE_FORMAT.rstrip("\n")
)


REPORT_USAGE = """\
Usage: vpa report [--kubeconfig PATH] [--namespace NS] [--output table|json|csv|html] [--output-file FILE]

List every VerticalPodAutoscaler with its workload, mode, current requests and limits per container, the
recommendation, the difference (requests minus target, summed over pods and per namespace: the savings),
conditions, and the last in-place resize or eviction and why (from Events)."""


def _groups(flags: Sequence[FlagDef]) -> list[tuple[Group, list[FlagDef]]]:
    result = []
    for group in Group:
        members = [flag for flag in flags if flag.group is group]
        if members:
            result.append((group, members))
    return result


def _flag_help(flag: FlagDef) -> list[str]:
    type_name = "" if flag.kind.is_bool else f" {flag.kind.type_name}"
    lines = [f"  --{flag.name}{type_name}"]
    default = flag.default_display()
    if flag.kind.is_bool and default == "false":
        default = ""  # as pflag: a boolean's false default goes without saying
    paragraphs = flag.help.split("\n")
    if default:
        paragraphs[0] += f" (default {default})"
    for paragraph in paragraphs:
        lines.extend(textwrap.wrap(paragraph, _WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6))
    return lines


def render_help(usage: str, flags: Sequence[FlagDef]) -> str:
    """A help screen: the usage text, then each group's flags with type, help and default."""
    lines = [usage]
    for group, members in _groups(flags):
        lines.append("")
        lines.append(f"{group.value} flags:")
        for flag in members:
            lines.extend(_flag_help(flag))
    return "\n".join(lines) + "\n"


def render_run_help() -> str:
    return render_help(RUN_USAGE, table.RUN_FLAGS)


def render_replay_help() -> str:
    return render_help(REPLAY_USAGE, table.REPLAY_FLAGS)


def render_report_help() -> str:
    return render_help(REPORT_USAGE, table.REPORT_FLAGS)


# --- Markdown ------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _markdown_table(flags: Sequence[FlagDef]) -> list[str]:
    lines = ["| Flag | Type | Default | Setting | Description |", "|---|---|---|---|---|"]
    for flag in flags:
        marker = " (ours)" if flag.addition else ""
        setting = flag.setting_text or flag.target or ""
        description = flag.help + (f" *{flag.note}*" if flag.note else "")
        lines.append(
            f"| `--{flag.name}`{marker} | {flag.kind.type_name} | {_cell(_code(flag.default_display()))} "
            f"| {_cell(_code(setting))} | {_cell(description)} |"
        )
    return lines


_FLAGS_INTRO = f"""\
# Flags

<!-- Generated from vpa/flags/table.py by `make flags-doc` (`python -m vpa.cli flags-doc`). Do not edit. -->

`vpa run` accepts every flag of the upstream VPA {settings.UPSTREAM_VPA_VERSION} recommender, updater and
admission controller, with the same names, defaults and syntax, so existing manifests and Helm values work
unchanged.
Flags of components that are not selected with `--components` are accepted and ignored.

Syntax, as Go's `flag` and `pflag` accept it:

- `--flag=value`, `--flag value`, `-flag=value`, `-flag value`; `_` in a name reads as `-`;
  `--` ends the flags.
- Booleans: `--leader-elect` alone means true; `--leader-elect=false` (also `0`, `f`, `F`, `FALSE`, `False`;
  true is `1`, `t`, `T`, `TRUE`, `true`, `True`). A boolean never takes the next argument as its value.
- Durations: Go syntax (`300ms`, `10s`, `1m`, `1h30m`, `1.5h`); `--history-length` and `--history-resolution`
  take Prometheus syntax (`8d`, `1w`, `1h30m`).
- Quantities: Kubernetes syntax (`4`, `500m`, `2Gi`). Integers: Go syntax (`10`, `0x1f`, `1_000`).

An invalid value, an unknown flag or an unknown component or gate stops `vpa run` with exit status 2 and one
line naming the flag and the value, for example
`vpa run: invalid value "abc" for flag --recommender-interval: not a duration (...)`.
Combinations upstream refuses at startup (for example `--vpa-object-namespace` with
`--ignored-vpa-object-namespaces`) are refused the same way, and so is every fatal start-up problem past the
command line: a kubeconfig that is missing or does not load, no kubeconfig outside a cluster, an `--address`
or `--port` already in use, `--clock=sim` against a cluster that is not simulated, unusable TLS files
(`vpa run: --address 127.0.0.1:8942: cannot listen: address already in use`).

The Setting column names the field of `vpa.model.settings.RunSettings` the flag sets.

Logging: the process logs through one structured logger driven by `--v` and `--log-format`; the other
klog flags are accepted (and kept in `CommonSettings.klog`) so upstream manifests keep working.

## Environment

| Variable | Used for |
|---|---|
| `KUBECONFIG` | kubeconfig path when `--kubeconfig` is empty (then in-cluster configuration). |
| `NAMESPACE` | namespace of the webhook Service; namespace of the status leases when \
`--status-lease-namespace` / `--admission-controller-status-lease-namespace` are empty (else `kube-system`). |
| `PROMETHEUS_USERNAME`, `PROMETHEUS_PASSWORD` | Prometheus basic auth when `--username` / `--password` \
are empty. |

## One process, several components

- `--address` (default `:8942`): upstream has one metrics/health address per binary (`:8942`,
  `:8943`, `:8944`). `vpa run` serves `/metrics`, `/healthz`, `/readyz` and `/health-check` for all
  selected components on one server, so the flag is accepted once. When splitting into one Deployment
  per component, give each its own `--address` if they share a network namespace.
- Leader election: the recommender and the updater each hold their own Lease (`vpa-recommender-lease`,
  `vpa-updater`). The shared `--leader-elect*` flags set both. Upstream binds
  `--leader-elect-resource-name` per binary; here it sets both names, so when both components run in one
  process with election on, give them different names with `--recommender-leader-elect-resource-name` /
  `--updater-leader-elect-resource-name` (a shared name is refused at startup). The per-component flags
  win over the shared ones.
- `--in-place-skip-disruption-budget` defaults to **true** (upstream: false): an in-place resize that
  restarts no container may proceed for single-replica workloads or below `--min-replicas`. Evictions
  always respect the replica and tolerance checks. `--in-place-skip-disruption-budget=false` restores
  upstream's behaviour.
- `--clock=sim` follows the virtual clock of a simulated cluster (`vpa sim`) in another process, read from
  `GET <apiserver>/sim/v1/clock`; production always uses the default `real`.
"""


def render_flags_markdown() -> str:
    """docs/flags.md."""
    lines = [_FLAGS_INTRO, "## `vpa run`", ""]
    for group, members in _groups(table.RUN_FLAGS):
        lines += [f"### {group.value}", "", *_markdown_table(members), ""]
    lines += [
        "## `vpa replay`",
        "",
        "`vpa replay TRACE [flags]` takes its own flags below, `--feature-gates`, and those flags of the",
        "Recommender group above that change the recommendation maths offline: "
        + ", ".join(f"`--{name}`" for name in sorted(table.REPLAY_RECOMMENDER_FLAG_NAMES - {"feature-gates"}))
        + ". Any other `vpa run` flag (`--storage`, `--prometheus-address`, ...) is refused with exit "
        "status 2.",
        "",
        *_markdown_table(table.REPLAY_OWN_FLAGS),
        "",
        "The trace (`vpa replay --help` prints this too):",
        "",
        "```",
        *settings.REPLAY_TRACE_FORMAT.rstrip("\n").splitlines(),
        "```",
        "",
        "## `vpa report`",
        "",
        "`vpa report [flags]` reads a cluster and prints every VPA with its pods' requests, the",
        "recommendation and the savings (docs/report.md).",
        "",
        *_markdown_table(table.REPORT_FLAGS),
        "",
        "## Notes, deviations and additions",
        "",
    ]
    for flag in table.RUN_FLAGS + table.REPLAY_OWN_FLAGS:
        if flag.note or flag.addition:
            kind = "ours" if flag.addition else "upstream flag"
            lines.append(f"- `--{flag.name}` ({kind}): {flag.note or flag.help}")
    return "\n".join(lines).rstrip("\n") + "\n"


def _stage(stage: features.Stage) -> str:
    return "GA" if stage is features.Stage.GA else stage.value.capitalize()


def render_feature_gates_markdown() -> str:
    """docs/feature-gates.md."""
    lines = [
        "# Feature gates",
        "",
        "<!-- Generated from vpa/model/features.py by `python -m vpa.cli gates-doc`. Do not edit. -->",
        "",
        "Set with `--feature-gates=Name=true,Other=false` on `vpa run` (and `vpa replay`), exactly as",
        "upstream VPA's components take them. Whitespace around names and values is ignored; the value is a",
        "Go boolean",
        "(`true`, `false`, `1`, `0`, `t`, `f`, ...). An unknown gate or a value that is not a boolean stops",
        "startup with an error naming it. Given several times, the flag's pairs merge and later pairs win.",
        "",
        "`AllAlpha=true|false` and `AllBeta=true|false` set every alpha (beta) gate that is not named",
        "explicitly; an explicit pair always wins, whatever its position (`AllAlpha=true,InPlace=false`",
        "enables every alpha gate except `InPlace`). Gates locked to their default refuse other values.",
        "",
        "In one process all components see the same gates; the Components column says whose behaviour a",
        "gate changes (upstream requires setting it on each of those binaries).",
        "",
        "| Gate | Stage | Since | Default | Components | Effect |",
        "|---|---|---|---|---|---|",
    ]
    for gate in features.GATES:
        lines.append(
            f"| `{gate.name}` | {_stage(gate.stage)} | {gate.since} | {str(gate.default).lower()} "
            f"| {', '.join(gate.components)} | {_cell(gate.effect)} |"
        )
    lines += [
        "",
        "The `InPlaceOrRecreate` gate of earlier releases (alpha 1.4, beta 1.5, GA 1.6) was removed in 1.7:",
        "`updateMode: InPlaceOrRecreate` needs no gate, and naming the gate is an error, as upstream.",
        "",
        "`NativeSidecar` and `PodLevelResources` are not in upstream 1.7: they are the gates upstream's",
        "proposals name (AEP-8905 native sidecars, targeted at 1.8; AEP-7571 pod-level resources),",
        "implemented here ahead of upstream without any new VPA field (docs/components.md,",
        "docs/pod-level-resources.md).",
        "",
        "`VPAInitialDelay` (AEP-9936, `updatePolicy.initialDelaySeconds`) and `InPlaceCapacityAware`",
        "(AEP-9726) are the gates of upstream proposals still open after 1.8, implemented ahead of upstream",
        "with the API fields the proposals define, which our CRD serves; AEP-9970's",
        "`recommendationPercentiles` rides on the existing `PerVPAConfig`, as the proposal says.",
        "",
        "Behaviour of our own that goes beyond upstream is switched by flags of our own, not by gates (a",
        "gate name would clash with whatever upstream later names its own): `--cap-to-largest-node` (off),",
        "`--detect-hpa-conflicts`, `--recommend-on-oom` and `--in-place-on-recommendation` (on); see",
        "docs/flags.md. None of them adds a field to the VPA objects. The one exception is `ResizeGuard`,",
        "a gate because undoing resizes is a behaviour a cluster operator must opt into before any VPA",
        "can (each VPA then opts in with the annotation `vpa.dev/resize-guard: \"true\"`); it adds no field.",
    ]
    return "\n".join(lines) + "\n"
