"""From flags and environment to RunSettings / ReplaySettings.

Covers: components, feature gates (merged across repeats), the environment fallbacks upstream has
(`KUBECONFIG`, `NAMESPACE`, `PROMETHEUS_USERNAME` / `PROMETHEUS_PASSWORD`, flag wins), leader-election
precedence (per-component flag > shared flag > component default), flags of unselected components being
accepted, klog and admission value kinds, deprecation warnings, startup checks surfacing as UsageError,
and `vpa replay`'s arguments.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vpa.flags import commands
from vpa.flags.commands import UsageError
from vpa.model.settings import RunSettings


def run(*argv: str, env: dict[str, str] | None = None) -> RunSettings:
    return commands.parse_run_args(list(argv), env or {})


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--components=recommender"], {"recommender"}),
        (["--components", "updater,admission-controller"], {"updater", "admission-controller"}),
        (["--components= recommender , updater ,"], {"recommender", "updater"}),
        (["--components=updater,updater"], {"updater"}),
        ([], {"recommender", "updater", "admission-controller"}),
    ],
    ids=["one", "two", "spaces-trailing-comma", "duplicate", "default-all"],
)
def test_components(argv: list[str], expected: set[str]) -> None:
    assert run(*argv).components == frozenset(expected)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--components=recommender,scheduler"], 'unknown component "scheduler"'),
        (["--components=Recommender"], 'unknown component "Recommender"'),
        (["--components=admission"], 'unknown component "admission"'),
        (["--components="], "name at least one component"),
        (["--components=,"], "name at least one component"),
    ],
    ids=["unknown", "case", "short-name", "empty", "only-comma"],
)
def test_components_rejected(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match="for flag --components: " + message):
        run(*argv)


def test_feature_gates_merge_across_repeats() -> None:
    gates = run(
        "--feature-gates=InPlace=true,PerVPAConfig=true", "--feature-gates", "PerVPAConfig=false"
    ).feature_gates
    assert gates.in_place
    assert not gates.per_vpa_config
    assert gates.explicit == (("InPlace", True), ("PerVPAConfig", False))


def test_all_alpha_through_the_command_line() -> None:
    gates = run("--feature-gates=AllAlpha=true,CPUStartupBoost=false").feature_gates
    assert (gates.in_place, gates.per_vpa_config, gates.cpu_startup_boost) == (True, True, False)


EnvCase = tuple[list[str], dict[str, str], Callable[[RunSettings], object], object]
ENV_CASES: dict[str, EnvCase] = {
    "kubeconfig-env": ([], {"KUBECONFIG": "/k:/l"}, lambda r: r.common.kubeconfig_env, "/k:/l"),
    "kubeconfig-flag": (["--kubeconfig=/f"], {"KUBECONFIG": "/k"}, lambda r: r.common.kubeconfig, "/f"),
    "kubeconfig-home": ([], {"HOME": "/h"}, lambda r: r.common.default_kubeconfig, "/h/.kube/config"),
    "context": (["--context=prod"], {}, lambda r: r.common.context, "prod"),
    "kubeconfig-none": ([], {}, lambda r: r.common.kubeconfig, ""),
    "status-lease-ns-env": ([], {"NAMESPACE": "vpa"}, lambda r: r.admission.status_lease_namespace, "vpa"),
    "status-lease-ns-flag": (
        ["--status-lease-namespace=x"],
        {"NAMESPACE": "vpa"},
        lambda r: r.admission.status_lease_namespace,
        "x",
    ),
    "status-lease-ns-empty-flag-env": (
        ["--status-lease-namespace="],
        {"NAMESPACE": "vpa"},
        lambda r: r.admission.status_lease_namespace,
        "vpa",
    ),
    "updater-status-lease-ns-env": (
        [],
        {"NAMESPACE": "vpa"},
        lambda r: r.updater.admission_controller_status_lease_namespace,
        "vpa",
    ),
    "updater-status-lease-ns-default": (
        [],
        {"NAMESPACE": ""},
        lambda r: r.updater.admission_controller_status_lease_namespace,
        "kube-system",
    ),
    "webhook-service-ns-env": (
        [],
        {"NAMESPACE": "vpa"},
        lambda r: r.admission.webhook_service_namespace,
        "vpa",
    ),
    "webhook-service-ns-default": ([], {}, lambda r: r.admission.webhook_service_namespace, "kube-system"),
    # Upstream's leader-election namespace does not read $NAMESPACE.
    "leader-ns-ignores-env": (
        [],
        {"NAMESPACE": "vpa"},
        lambda r: r.recommender.leader_election.resource_namespace,
        "kube-system",
    ),
    "prom-user-env": (
        [],
        {"PROMETHEUS_USERNAME": "u", "PROMETHEUS_PASSWORD": "p"},
        lambda r: (r.recommender.prometheus.username, r.recommender.prometheus.password),
        ("u", "p"),
    ),
    "prom-user-flag-wins": (
        ["--username=fu", "--password=fp"],
        {"PROMETHEUS_USERNAME": "u", "PROMETHEUS_PASSWORD": "p"},
        lambda r: (r.recommender.prometheus.username, r.recommender.prometheus.password),
        ("fu", "fp"),
    ),
}


@pytest.mark.parametrize(("argv", "env", "getter", "expected"), ENV_CASES.values(), ids=ENV_CASES.keys())
def test_environment_fallbacks(
    argv: list[str], env: dict[str, str], getter: Callable[[RunSettings], object], expected: object
) -> None:
    assert getter(run(*argv, env=env)) == expected


def _leases(settings: RunSettings) -> tuple[str, str, str, str]:
    rec, upd = settings.recommender.leader_election, settings.updater.leader_election
    return (rec.resource_namespace, rec.resource_name, upd.resource_namespace, upd.resource_name)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ("kube-system", "vpa-recommender-lease", "kube-system", "vpa-updater")),
        (
            ["--components=updater", "--leader-elect", "--leader-elect-resource-name=vpa-updater-lease"],
            ("kube-system", "vpa-updater-lease", "kube-system", "vpa-updater-lease"),
        ),
        (
            [
                "--leader-elect",
                "--recommender-leader-elect-resource-name=r",
                "--updater-leader-elect-resource-name=u",
            ],
            ("kube-system", "r", "kube-system", "u"),
        ),
        (
            ["--leader-elect-resource-name=shared", "--updater-leader-elect-resource-name=u"],
            ("kube-system", "shared", "kube-system", "u"),
        ),
        (
            ["--leader-elect-resource-namespace=vpa", "--recommender-leader-elect-resource-namespace=rec"],
            ("rec", "vpa-recommender-lease", "vpa", "vpa-updater"),
        ),
    ],
    ids=["defaults", "shared-name-one-component", "per-component", "per-component-wins", "namespaces"],
)
def test_leader_election_precedence(argv: list[str], expected: tuple[str, str, str, str]) -> None:
    assert _leases(run(*argv)) == expected


def test_shared_leader_election_flags_set_both() -> None:
    settings = run(
        "--leader-elect=true", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s"
    )
    for lease in (settings.recommender.leader_election, settings.updater.leader_election):
        assert (lease.leader_elect, lease.lease_duration_s, lease.renew_deadline_s) == (True, 30.0, 20.0)


def test_flags_of_unselected_components_are_accepted() -> None:
    settings = run(
        "--components=recommender", "--port=9443", "--updater-interval=5m", "--min-tls-version=tls1_3"
    )
    assert settings.admission.port == 9443
    assert settings.updater.updater_interval_s == 300.0


@pytest.mark.parametrize(
    ("argv", "getter", "expected"),
    [
        (["--stderrthreshold=warning"], lambda r: r.common.klog.stderrthreshold, "WARNING"),
        (["--stderrthreshold=2"], lambda r: r.common.klog.stderrthreshold, "ERROR"),
        (["--alsologtostderrthreshold=ERROR"], lambda r: r.common.klog.alsologtostderrthreshold, "ERROR"),
        (
            ["--legacy-stderr-threshold-behavior=false"],
            lambda r: r.common.klog.legacy_stderr_threshold_behavior,
            False,
        ),
        (
            ["--concurrent-cpu-startup-boost-syncs=4"],
            lambda r: r.updater.concurrent_cpu_startup_boost_syncs,
            4,
        ),
        (["--resize-guard-backoff=90s"], lambda r: r.updater.resize_guard_backoff_s, 90.0),
        ([], lambda r: r.updater.resize_guard_backoff_s, 3600.0),
        (["--log-backtrace-at=main.go:10"], lambda r: r.common.klog.log_backtrace_at, "main.go:10"),
        (
            ["--vmodule=recommender*=5,updater=2,"],
            lambda r: r.common.klog.vmodule,
            "recommender*=5,updater=2,",
        ),
        (["-v", "6"], lambda r: r.common.v, 6),
        (["--log-format=json"], lambda r: r.common.log_format, "json"),
        (["--clock=sim"], lambda r: r.clock, "sim"),
        (["--address=:9000"], lambda r: r.address, ":9000"),
        (
            ["--ignored-vpa-object-namespaces=a, b,"],
            lambda r: r.common.ignored_vpa_object_namespaces,
            ("a", "b"),
        ),
        (
            ["--webhook-labels=team:vpa,tier:core"],
            lambda r: r.admission.webhook_labels,
            (("team", "vpa"), ("tier", "core")),
        ),
        (
            ["--tls-ciphers=TLS_AES_128_GCM_SHA256:TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
            lambda r: r.admission.tls_ciphers,
            ("TLS_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
        ),
        (["--max-allowed-cpu-boost=2"], lambda r: r.admission.max_allowed_cpu_boost_millicores, 2000),
        (
            ["--container-recommendation-max-allowed-memory=8Gi"],
            lambda r: r.recommender.container_recommendation_max_allowed_memory_bytes,
            8 * 1024**3,
        ),
        (["--kube-api-qps=0"], lambda r: r.common.kube_api_qps, 0.0),
        (["--eviction-rate-limit=0.5"], lambda r: r.updater.eviction_rate_limit, 0.5),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_values_reach_settings(
    argv: list[str], getter: Callable[[RunSettings], object], expected: object
) -> None:
    assert getter(run(*argv)) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--v=0x4"], 'invalid value "0x4" for flag --v: not a decimal integer'),
        (["-v", "3000000000"], 'invalid value "3000000000" for flag --v: value out of range'),
        (["--stderrthreshold=loud"], 'invalid value "loud" for flag --stderrthreshold: not a severity'),
        (["--stderrthreshold=4"], 'invalid value "4" for flag --stderrthreshold: not a severity'),
        (["--log-backtrace-at=main:10"], 'invalid value "main:10" for flag --log-backtrace-at: syntax error'),
        (["--log-backtrace-at=main.go:0"], "negative or zero value"),
        (["--vmodule=x"], 'invalid value "x" for flag --vmodule: syntax error'),
        (
            ["--log-format=xml"],
            'invalid value "xml" for flag --log-format: must be one of json, console, auto',
        ),
        (["--clock=wall"], 'invalid value "wall" for flag --clock: must be one of real, sim'),
        (["--min-tls-version=tls1_1"], 'invalid value "tls1_1" for flag --min-tls-version: must be one of'),
        (["--tls-ciphers=RC4"], "invalid value \"RC4\" for flag --tls-ciphers: unknown cipher suite 'RC4'"),
        (["--webhook-labels=novalue"], 'invalid value "novalue" for flag --webhook-labels: labels'),
        (
            ["--log-file-max-size=-1"],
            'invalid value "-1" for flag --log-file-max-size: not an unsigned integer',
        ),
        (["--vpa-object-namespace=a", "--ignored-vpa-object-namespaces=b"], "are mutually exclusive"),
        (["--admission-controller-status-lease-timeout=0s"], "must be greater than 0"),
        (["--status-lease-update-interval=-1s"], "--status-lease-update-interval must be greater than 0"),
        (["--concurrent-cpu-startup-boost-syncs=0"], "--concurrent-cpu-startup-boost-syncs must be greater"),
        (["--resize-guard-backoff=0s"], "--resize-guard-backoff must be greater than 0 and at most 24h"),
        (["--resize-guard-backoff=48h"], "--resize-guard-backoff must be greater than 0 and at most 24h"),
        (["--alsologtostderrthreshold=loud"], 'invalid value "loud" for flag --alsologtostderrthreshold'),
        (
            ["--prometheus-bearer-token=t", "--prometheus-bearer-token-file=/f", "--username=u"],
            "mutually exclusive",
        ),
        (["--leader-elect", "--leader-elect-resource-name=one"], "would share the leader-election Lease"),
        (["--leader-elect", "--leader-elect-lease-duration=5s"], "must be greater than --leader-elect-renew"),
        (["stray"], 'unexpected argument "stray"'),
        (["--leader-elect", "false"], 'unexpected argument "false"'),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        run(*argv)
    assert message in str(caught.value)


def test_prometheus_credentials_from_env_count_for_the_exclusivity_check() -> None:
    with pytest.raises(UsageError, match="mutually exclusive"):
        run(
            "--prometheus-bearer-token=t",
            "--prometheus-bearer-token-file=/f",
            env={"PROMETHEUS_USERNAME": "u"},
        )


@pytest.mark.parametrize(
    ("argv", "warnings"),
    [
        ([], ()),
        (
            ["--min-checkpoints=20"],
            ("--min-checkpoints is deprecated and has no effect; use --update-worker-count",),
        ),
        (
            ["--humanize-memory"],
            ("--humanize-memory is deprecated and will be removed; use --round-memory-bytes",),
        ),
    ],
    ids=["none", "min-checkpoints", "humanize-memory"],
)
def test_deprecation_warnings(argv: list[str], warnings: tuple[str, ...]) -> None:
    assert run(*argv).warnings == warnings


def test_help_is_a_signal() -> None:
    with pytest.raises(commands.HelpRequested):
        run("--recommender-interval=1m", "--help")


# --- vpa replay ---------------------------------------------------------------------------------------


def test_replay_arguments() -> None:
    settings = commands.parse_replay_args(
        [
            "trace.parquet",
            "--at",
            "1700000000",
            "--every=1h",
            "--output=table",
            "--target-cpu-percentile=0.95",
            "--feature-gates=PerVPAConfig=true",
        ],
        {},
    )
    assert settings.trace_path == "trace.parquet"
    assert settings.at == 1700000000.0
    assert settings.every_s == 3600.0
    assert settings.output == "table"
    assert settings.recommender.target_cpu_percentile == 0.95
    assert settings.feature_gates.per_vpa_config


def test_replay_defaults() -> None:
    settings = commands.parse_replay_args(["t.csv"], {})
    assert (settings.at, settings.every_s, settings.output) == (None, None, "json")
    assert settings.recommender.recommender_interval_s == 60.0


@pytest.mark.parametrize(("every", "seconds"), [("30m", 1800.0), ("1d", 86400.0), ("1w", 604800.0)], ids=str)
def test_replay_every_accepts_go_and_prometheus_forms(every: str, seconds: float) -> None:
    assert commands.parse_replay_args(["t.csv", f"--every={every}"], {}).every_s == seconds


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "missing TRACE"),
        (["a.csv", "b.csv"], 'unexpected argument "b.csv"'),
        (["t.csv", "--every=soon"], 'invalid value "soon" for flag --every: not a duration'),
        (["t.csv", "--every=0s"], "--every must be greater than 0"),
        (["t.csv", "--output=xml"],
         'invalid value "xml" for flag --output: must be one of json, yaml, csv, table'),
        (["t.csv", "--at=noon"], 'invalid value "noon" for flag --at: not Unix seconds or an ISO-8601 time'),
        (["t.csv", "--updater-interval=1m"], "--updater-interval is a vpa run flag with no effect offline"),
        (["t.csv", "--storage=prometheus"], "--storage is a vpa run flag with no effect offline"),
        (["t.csv", "-prometheus-address", "http://p:9090"], "--prometheus-address is a vpa run flag"),
        (["t.csv", "--no-such-flag=1"], "unknown flag: --no-such-flag"),
        (["t.csv", "--feature-gates=Nope=true"], "unrecognized feature gate: Nope"),
    ],
    ids=[
        "no-trace",
        "two-traces",
        "bad-every",
        "zero-every",
        "bad-output",
        "bad-at",
        "updater-flag",
        "storage-flag",
        "prometheus-flag",
        "unknown-flag",
        "bad-gate",
    ],
)
def test_replay_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        commands.parse_replay_args(argv, {})
    assert message in str(caught.value)


def test_replay_at_accepts_iso_8601() -> None:
    assert commands.parse_replay_args(["t.csv", "--at=2026-01-01T00:00:00Z"], {}).at == 1_767_225_600.0
    assert commands.parse_replay_args(["t.csv", "--at=2026-01-01T01:00:00"], {}).at == 1_767_229_200.0


def test_recommender_overrides_reach_each_named_recommender() -> None:
    base = run(
        "--recommender-name=default,performance",
        "--target-cpu-percentile=0.8",
        "--recommender-overrides=performance:target-cpu-percentile=0.95,performance:round-cpu-millicores=50",
        "--recommender-overrides", "performance:confidence-interval-cpu=2h,default:oom-bump-up-ratio=1.5",
    ).recommender
    assert base.recommender_names == ("default", "performance")
    default, performance = base.for_name("default"), base.for_name("performance")
    assert (default.recommender_name, default.target_cpu_percentile, default.oom_bump_up_ratio) == (
        "default", 0.8, 1.5)
    assert (performance.recommender_name, performance.target_cpu_percentile,
            performance.round_cpu_millicores, performance.confidence_interval_cpu_s,
            performance.oom_bump_up_ratio) == ("performance", 0.95, 50, 7200.0, 1.2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--recommender-name=default", "--recommender-overrides=fast:target-cpu-percentile=0.9"],
         "--recommender-overrides: 'fast' is not a recommender this process hosts"),
        (["--recommender-name=a,b", "--recommender-overrides=b:no-such-flag=1"],
         "for flag --recommender-overrides: --no-such-flag cannot be set per recommender"),
        (["--recommender-name=a,b", "--recommender-overrides=b:recommender-interval=1m"],
         "for flag --recommender-overrides: --recommender-interval cannot be set per recommender"),
        (["--recommender-name=a,b", "--recommender-overrides=b:memory-saver=true"],
         "--memory-saver cannot be set per recommender"),
        (["--recommender-name=a,b", "--recommender-overrides=b:target-cpu-percentile=high"],
         'invalid value "b:target-cpu-percentile=high" for flag --recommender-overrides'),
        (["--recommender-name=a,b", "--recommender-overrides=b:confidence-interval-cpu=2"],
         "for flag --recommender-overrides: .*unit"),
        (["--recommender-name=a,b", "--recommender-overrides=b=target-cpu-percentile"],
         "is not NAME:FLAG=VALUE"),
        (["--recommender-name=a,,b"], "--recommender-name must be one name or a comma-separated list"),
        (["--recommender-name=a,b,a"], "--recommender-name names 'a' more than once"),
    ],
    ids=["unknown-name", "unknown-flag", "process-wide-interval", "process-wide-memory-saver", "bad-value",
         "bad-duration", "bad-syntax", "empty-name", "duplicate-name"],
)
def test_recommender_overrides_rejected(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run(*argv)


def test_replay_refuses_recommender_overrides() -> None:
    with pytest.raises(UsageError, match="recommender-overrides"):
        commands.parse_replay_args(["t.csv", "--recommender-overrides=default:target-cpu-percentile=0.5"], {})
