"""The `vpa` command as a user meets it: exit statuses, the one-line errors, help, version and docs.

Covers: bad inputs exit 2 with exactly one stderr line naming the flag and value (through `main()` and once
through a real `python -m vpa.cli` subprocess); `run`, `replay` and `sim` hand their settings / argv to
the lazily imported entry points (replaced by fakes here); `--help` groups; `version`; the generated
docs/flags.md and docs/feature-gates.md match the committed files.
"""

from __future__ import annotations

import io
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from vpa import cli
from vpa.flags import docs, table
from vpa.model.settings import ReplaySettings, ReportSettings, RunSettings

REPO = Path(__file__).resolve().parents[3]


def call(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(argv, env or {}, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


BAD_INPUTS = {
    "unknown-component": (
        ["run", "--components=recommender,scheduler"],
        'vpa run: invalid value "recommender,scheduler" for flag --components: unknown component "scheduler" '
        "(valid: recommender, updater, admission-controller)",
    ),
    "unknown-gate": (
        ["run", "--feature-gates=InPlace=true,Turbo=true"],
        'vpa run: invalid value "InPlace=true,Turbo=true" for flag --feature-gates: '
        "unrecognized feature gate: Turbo "
        "(known gates: AllAlpha, AllBeta, CPUStartupBoost, DaemonSetScope, InPlace, InPlaceCapacityAware, "
        "NativeSidecar, "
        "PerVPAConfig, PodLevelResources, ResizeGuard, VPAInitialDelay)",
    ),
    "bad-gate-value": (
        ["run", "--feature-gates=InPlace=on"],
        'vpa run: invalid value "InPlace=on" for flag --feature-gates: invalid value of InPlace=on: '
        "not a boolean (use true or false)",
    ),
    "bad-bool": (
        ["run", "--leader-elect=yes"],
        'vpa run: invalid value "yes" for flag --leader-elect: not a boolean (use true or false, 1 or 0)',
    ),
    "bad-duration": (
        ["run", "--recommender-interval=abc"],
        'vpa run: invalid value "abc" for flag --recommender-interval: not a duration '
        "(use a number and a unit, units: ns, us, µs, ms, s, m, h)",
    ),
    "bad-prometheus-duration": (
        ["run", "--history-length=8days"],
        'vpa run: invalid value "8days" for flag --history-length: unknown unit "days" '
        "(units: y, w, d, h, m, s, ms)",
    ),
    "bad-quantity": (
        ["run", "--container-recommendation-max-allowed-cpu=four"],
        'vpa run: invalid value "four" for flag --container-recommendation-max-allowed-cpu: '
        "quantity 'four' is not a number with an optional unit suffix",
    ),
    "bad-int": (
        ["run", "--min-replicas=two"],
        'vpa run: invalid value "two" for flag --min-replicas: not an integer',
    ),
    "unknown-flag": (["run", "--turbo=1"], 'vpa run: unknown flag: --turbo (in "--turbo=1")'),
    "missing-value": (
        ["run", "--recommender-interval"],
        "vpa run: flag needs an argument: --recommender-interval",
    ),
    "exclusive": (
        ["run", "--vpa-object-namespace=a", "--ignored-vpa-object-namespaces=b"],
        "vpa run: --vpa-object-namespace and --ignored-vpa-object-namespaces are mutually exclusive "
        "and can't be set together",
    ),
    "replay-no-trace": (["replay"], "vpa replay: missing TRACE: vpa replay TRACE [flags]"),
    "override-unknown-recommender": (
        ["run", "--recommender-name=default,fast", "--recommender-overrides=slow:target-cpu-percentile=0.5"],
        "vpa run: --recommender-overrides: 'slow' is not a recommender this process hosts "
        "(--recommender-name=default,fast)",
    ),
    "report-bad-output": (
        ["report", "--output=pdf"],
        'vpa report: invalid value "pdf" for flag --output: must be one of table, json, csv, html',
    ),
    "report-positional": (
        ["report", "ns"], 'vpa report: unexpected argument "ns": vpa report takes only flags'
    ),
    "metrics-max-series": (
        ["run", "--recommendation-metrics-max-series=0"],
        "vpa run: --recommendation-metrics-max-series must be at least 1, not 0",
    ),
    "bounds-write-tolerance-of-one": (
        ["run", "--bounds-write-tolerance=1"],
        "vpa run: --bounds-write-tolerance must be at least 0 and below 1, not 1.0",
    ),
    "bounds-write-tolerance-negative": (
        ["run", "--bounds-write-tolerance=-0.01"],
        "vpa run: --bounds-write-tolerance must be at least 0 and below 1, not -0.01",
    ),
    "lag-interval-too-short": (
        ["run", "--event-loop-lag-interval=500us"],
        "vpa run: --event-loop-lag-interval must be between 1ms and 1m, not 0.0005s",
    ),
    "override-process-wide-flag": (
        ["run", "--recommender-name=default,fast", "--recommender-overrides=fast:storage=prometheus"],
        'vpa run: invalid value "fast:storage=prometheus" for flag --recommender-overrides: '
        "--storage cannot be set per recommender",
    ),
}


@pytest.mark.parametrize(("argv", "line"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_exits_2_with_one_line(argv: list[str], line: str) -> None:
    status, out, err = call(argv)
    assert (status, out, err) == (2, "", line + "\n")


def test_bad_input_through_a_real_process() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vpa.cli", "run", "--recommender-interval=abc"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith('vpa run: invalid value "abc" for flag --recommender-interval: not a duration')


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str, object], list[object]]:
    """Install a fake module whose `attribute` records its argument and returns `result`."""

    def install(module_name: str, attribute: str, result: object) -> list[object]:
        calls: list[object] = []

        def entry(argument: object) -> object:
            calls.append(argument)
            return result

        module = types.ModuleType(module_name)
        setattr(module, attribute, entry)
        monkeypatch.setitem(sys.modules, module_name, module)
        return calls

    return install


def test_run_hands_settings_to_the_app(fake_module: Callable[[str, str, object], list[object]]) -> None:
    calls = fake_module("vpa.app", "run", 3)
    status, _, err = call(["run", "--components=updater", "--clock=sim"], env={"NAMESPACE": "vpa"})
    assert (status, err) == (3, "")
    (settings,) = calls
    assert isinstance(settings, RunSettings)
    assert settings.components == frozenset({"updater"})
    assert settings.clock == "sim"
    assert settings.updater.admission_controller_status_lease_namespace == "vpa"


def test_replay_hands_settings_to_the_replay_tool(
    fake_module: Callable[[str, str, object], list[object]],
) -> None:
    calls = fake_module("vpa.replay.replaying", "run", 0)
    status, _, _ = call(["replay", "t.csv", "--every=1h"])
    assert status == 0
    (settings,) = calls
    assert isinstance(settings, ReplaySettings)
    assert (settings.trace_path, settings.every_s) == ("t.csv", 3600.0)


def test_report_hands_settings_to_the_report_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[ReportSettings] = []

    def entry(settings: ReportSettings, *, stdout: object, stderr: object) -> int:
        calls.append(settings)
        return 0

    module = types.ModuleType("vpa.app.report")
    module.run = entry  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vpa.app.report", module)
    assert call(["report", "--namespace=shop", "--output", "html"], env={"KUBECONFIG": "/k"})[0] == 0
    assert call(["report", "-kubeconfig=/other", "-context=c", "-output-file=r.csv", "-output=csv"])[0] == 0
    assert calls == [ReportSettings(kubeconfig_env="/k", namespace="shop", output="html"),
                     ReportSettings(kubeconfig="/other", context="c", output="csv", output_file="r.csv")]
    status, out, _ = call(["report", "--help"])
    assert status == 0
    assert "--output-file" in out
    assert "savings" in out


def test_sim_hands_its_arguments_over_untouched(
    fake_module: Callable[[str, str, object], list[object]],
) -> None:
    calls = fake_module("vpa.sim.main", "main", 0)
    assert call(["sim", "--nodes=3", "serve"])[0] == 0
    assert calls == [["--nodes=3", "serve"]]


def test_errors_do_not_load_the_app(fake_module: Callable[[str, str, object], list[object]]) -> None:
    calls = fake_module("vpa.app", "run", 0)
    assert call(["run", "--port=x"])[0] == 2
    assert calls == []


def test_run_help_groups_flags_by_component() -> None:
    status, out, err = call(["run", "--help"])
    assert (status, err) == (0, "")
    headings = [line for line in out.splitlines() if line.endswith(" flags:")]
    assert headings == [
        "Common flags:",
        "Leader election flags:",
        "Recommender flags:",
        "Updater flags:",
        "Admission controller flags:",
        "Logging flags:",
    ]
    recommender = out.index("Recommender flags:")
    updater = out.index("Updater flags:")
    assert recommender < out.index("  --recommender-interval duration") < updater
    flat = " ".join(out.split())  # help wraps long lines
    assert "--recommender-interval duration How often metrics are fetched" in flat
    assert "(default 1m0s)" in flat
    assert '(default ":8942")' in flat
    assert "(default 8d)" in flat
    assert "(default 1.048576e+08)" in flat
    assert '(default "up{job=\\"kubernetes-pods\\"}")' in flat  # Go %q quoting


def test_replay_help() -> None:
    status, out, _ = call(["replay", "-h"])
    assert status == 0
    assert out.startswith("Usage: vpa replay TRACE")
    assert "Replay flags:" in out
    assert "Recommender flags:" in out
    assert "Updater flags:" not in out


@pytest.mark.parametrize(
    ("argv", "status", "stream", "text"),
    [
        ([], 2, "err", "Usage: vpa <command>"),
        (["help"], 0, "out", "Usage: vpa <command>"),
        (["--help"], 0, "out", "Usage: vpa <command>"),
        (["frobnicate"], 2, "err", 'vpa: unknown command "frobnicate"'),
        (["version"], 0, "out", "vpa 0.1.0 (compatible with upstream Vertical Pod Autoscaler 1.7.1)\n"),
    ],
    ids=["no-args", "help", "dash-help", "unknown-command", "version"],
)
def test_top_level(argv: list[str], status: int, stream: str, text: str) -> None:
    got_status, out, err = call(argv)
    assert got_status == status
    assert text in (out if stream == "out" else err)


@pytest.mark.parametrize(
    ("path", "command", "render"),
    [
        ("docs/flags.md", "flags-doc", docs.render_flags_markdown),
        ("docs/feature-gates.md", "gates-doc", docs.render_feature_gates_markdown),
    ],
    ids=["flags", "feature-gates"],
)
def test_generated_docs_are_current(path: str, command: str, render: Callable[[], str]) -> None:
    status, out, _ = call([command])
    assert status == 0
    assert out == render()
    committed = (REPO / path).read_text(encoding="utf-8")
    assert committed == out, f"{path} is stale: run `python -m vpa.cli {command} > {path}`"


def test_flags_doc_lists_every_flag_and_the_deviations() -> None:
    text = docs.render_flags_markdown()
    for flag in table.RUN_FLAGS + table.REPLAY_OWN_FLAGS:
        assert f"| `--{flag.name}`" in text
    assert "`--in-place-skip-disruption-budget=false` restores" in text
    assert "`--address` (default `:8942`)" in text
    assert "--recommender-leader-elect-resource-name" in text
