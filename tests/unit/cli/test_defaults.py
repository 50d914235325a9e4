"""Every upstream flag of spec §2 exists, defaults to upstream's value, and parses upstream's default text.

The expected values below are transcribed from the spec's tables (§2.1-2.6), not from `vpa.flags.table`:
a default changed in the table or the settings breaks this test. For each flag it checks the value an
empty command line yields and the value `--flag=<spec default text>` yields. A completeness check makes
sure no upstream flag of the table escapes this list.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vpa.flags import commands, table
from vpa.model.settings import RunSettings

Getter = Callable[[RunSettings], object]

# (flag, spec default text or None when the spec says "unset", getter, expected value)
SPEC_DEFAULTS: list[tuple[str, str | None, Getter, object]] = [
    # §2.1 common
    ("kubeconfig", "", lambda r: r.common.kubeconfig, ""),
    ("kube-api-qps", "50", lambda r: r.common.kube_api_qps, 50.0),
    ("kube-api-burst", "100", lambda r: r.common.kube_api_burst, 100.0),
    ("profiling", "false", lambda r: r.common.profiling, False),
    ("vpa-object-namespace", "", lambda r: r.common.vpa_object_namespace, ""),
    ("ignored-vpa-object-namespaces", "", lambda r: r.common.ignored_vpa_object_namespaces, ()),
    ("feature-gates", "", lambda r: sorted(r.feature_gates.enabled_gates), []),
    ("v", "4", lambda r: r.common.v, 4),
    ("stderrthreshold", "info", lambda r: r.common.klog.stderrthreshold, "INFO"),
    ("logtostderr", "true", lambda r: r.common.klog.logtostderr, True),
    ("log-file-max-size", "1800", lambda r: r.common.klog.log_file_max_size_mb, 1800),
    ("alsologtostderr", "false", lambda r: r.common.klog.alsologtostderr, False),
    ("alsologtostderrthreshold", "info", lambda r: r.common.klog.alsologtostderrthreshold, "INFO"),
    (
        "legacy-stderr-threshold-behavior",
        "true",
        lambda r: r.common.klog.legacy_stderr_threshold_behavior,
        True,
    ),
    ("log-file", "", lambda r: r.common.klog.log_file, ""),
    ("log-dir", "", lambda r: r.common.klog.log_dir, ""),
    ("skip-headers", "false", lambda r: r.common.klog.skip_headers, False),
    ("one-output", "false", lambda r: r.common.klog.one_output, False),
    ("add-dir-header", "false", lambda r: r.common.klog.add_dir_header, False),
    ("skip-log-headers", "false", lambda r: r.common.klog.skip_log_headers, False),
    ("log-backtrace-at", ":0", lambda r: r.common.klog.log_backtrace_at, ""),
    ("vmodule", "", lambda r: r.common.klog.vmodule, ""),
    # §2.2 recommender
    ("recommender-name", "default", lambda r: r.recommender.recommender_name, "default"),
    ("recommender-interval", "1m", lambda r: r.recommender.recommender_interval_s, 60.0),
    ("checkpoints-gc-interval", "10m", lambda r: r.recommender.checkpoints_gc_interval_s, 600.0),
    ("checkpoints-timeout", "1m", lambda r: r.recommender.checkpoints_timeout_s, 60.0),
    ("address", ":8942", lambda r: r.address, ":8942"),
    ("storage", "", lambda r: r.recommender.storage, ""),
    ("memory-saver", "false", lambda r: r.recommender.memory_saver, False),
    ("update-worker-count", "10", lambda r: r.recommender.update_worker_count, 10),
    ("min-checkpoints", "10", lambda r: r.recommender.min_checkpoints, 10),
    ("recommendation-margin-fraction", "0.15", lambda r: r.recommender.recommendation_margin_fraction, 0.15),
    (
        "pod-recommendation-min-cpu-millicores",
        "25",
        lambda r: r.recommender.pod_recommendation_min_cpu_millicores,
        25.0,
    ),
    (
        "pod-recommendation-min-memory-mb",
        "250",
        lambda r: r.recommender.pod_recommendation_min_memory_mib,
        250.0,
    ),
    ("target-cpu-percentile", "0.9", lambda r: r.recommender.target_cpu_percentile, 0.9),
    (
        "recommendation-lower-bound-cpu-percentile",
        "0.5",
        lambda r: r.recommender.recommendation_lower_bound_cpu_percentile,
        0.5,
    ),
    (
        "recommendation-upper-bound-cpu-percentile",
        "0.95",
        lambda r: r.recommender.recommendation_upper_bound_cpu_percentile,
        0.95,
    ),
    ("target-memory-percentile", "0.9", lambda r: r.recommender.target_memory_percentile, 0.9),
    (
        "recommendation-lower-bound-memory-percentile",
        "0.5",
        lambda r: r.recommender.recommendation_lower_bound_memory_percentile,
        0.5,
    ),
    (
        "recommendation-upper-bound-memory-percentile",
        "0.95",
        lambda r: r.recommender.recommendation_upper_bound_memory_percentile,
        0.95,
    ),
    ("confidence-interval-cpu", "24h", lambda r: r.recommender.confidence_interval_cpu_s, 86400.0),
    ("confidence-interval-memory", "24h", lambda r: r.recommender.confidence_interval_memory_s, 86400.0),
    ("humanize-memory", "false", lambda r: r.recommender.humanize_memory, False),
    ("round-cpu-millicores", "1", lambda r: r.recommender.round_cpu_millicores, 1),
    ("round-memory-bytes", "1", lambda r: r.recommender.round_memory_bytes, 1),
    (
        "cpu-histogram-decay-half-life",
        "24h",
        lambda r: r.recommender.cpu_histogram_decay_half_life_s,
        86400.0,
    ),
    (
        "memory-histogram-decay-half-life",
        "24h",
        lambda r: r.recommender.memory_histogram_decay_half_life_s,
        86400.0,
    ),
    ("memory-aggregation-interval", "24h", lambda r: r.recommender.memory_aggregation_interval_s, 86400.0),
    ("memory-aggregation-interval-count", "8", lambda r: r.recommender.memory_aggregation_interval_count, 8),
    ("oom-bump-up-ratio", "1.2", lambda r: r.recommender.oom_bump_up_ratio, 1.2),
    ("oom-min-bump-up-bytes", "104857600", lambda r: r.recommender.oom_min_bump_up_bytes, 104857600.0),
    (
        "cpu-integer-post-processor-enabled",
        "false",
        lambda r: r.recommender.cpu_integer_post_processor_enabled,
        False,
    ),
    (
        "container-recommendation-max-allowed-cpu",
        None,
        lambda r: r.recommender.container_recommendation_max_allowed_cpu_millicores,
        None,
    ),
    (
        "container-recommendation-max-allowed-memory",
        None,
        lambda r: r.recommender.container_recommendation_max_allowed_memory_bytes,
        None,
    ),
    ("use-external-metrics", "false", lambda r: r.recommender.use_external_metrics, False),
    ("external-metrics-cpu-metric", "", lambda r: r.recommender.external_metrics_cpu_metric, ""),
    ("external-metrics-memory-metric", "", lambda r: r.recommender.external_metrics_memory_metric, ""),
    (
        "prometheus-address",
        "http://prometheus.monitoring.svc",
        lambda r: r.recommender.prometheus.address,
        "http://prometheus.monitoring.svc",
    ),
    ("prometheus-insecure", "false", lambda r: r.recommender.prometheus.insecure, False),
    (
        "prometheus-cadvisor-job-name",
        "kubernetes-cadvisor",
        lambda r: r.recommender.prometheus.cadvisor_job_name,
        "kubernetes-cadvisor",
    ),
    ("history-length", "8d", lambda r: r.recommender.prometheus.history_length_s, 8 * 86400.0),
    ("history-resolution", "1h", lambda r: r.recommender.prometheus.history_resolution_s, 3600.0),
    (
        "history-cpu-metric",
        "container_cpu_usage_seconds_total",
        lambda r: r.recommender.prometheus.history_cpu_metric,
        "container_cpu_usage_seconds_total",
    ),
    (
        "history-memory-metric",
        "container_memory_working_set_bytes",
        lambda r: r.recommender.prometheus.history_memory_metric,
        "container_memory_working_set_bytes",
    ),
    ("prometheus-query-timeout", "5m", lambda r: r.recommender.prometheus.query_timeout_s, 300.0),
    ("pod-label-prefix", "pod_label_", lambda r: r.recommender.prometheus.pod_label_prefix, "pod_label_"),
    (
        "metric-for-pod-labels",
        'up{job="kubernetes-pods"}',
        lambda r: r.recommender.prometheus.metric_for_pod_labels,
        'up{job="kubernetes-pods"}',
    ),
    (
        "pod-namespace-label",
        "kubernetes_namespace",
        lambda r: r.recommender.prometheus.pod_namespace_label,
        "kubernetes_namespace",
    ),
    (
        "pod-name-label",
        "kubernetes_pod_name",
        lambda r: r.recommender.prometheus.pod_name_label,
        "kubernetes_pod_name",
    ),
    (
        "container-namespace-label",
        "namespace",
        lambda r: r.recommender.prometheus.container_namespace_label,
        "namespace",
    ),
    (
        "container-pod-name-label",
        "pod_name",
        lambda r: r.recommender.prometheus.container_pod_name_label,
        "pod_name",
    ),
    ("container-name-label", "name", lambda r: r.recommender.prometheus.container_name_label, "name"),
    ("username", "", lambda r: r.recommender.prometheus.username, ""),
    ("password", "", lambda r: r.recommender.prometheus.password, ""),
    ("prometheus-bearer-token", "", lambda r: r.recommender.prometheus.bearer_token, ""),
    ("prometheus-bearer-token-file", "", lambda r: r.recommender.prometheus.bearer_token_file, ""),
    # §2.3 updater
    ("updater-interval", "1m", lambda r: r.updater.updater_interval_s, 60.0),
    ("min-replicas", "2", lambda r: r.updater.min_replicas, 2),
    ("eviction-tolerance", "0.5", lambda r: r.updater.eviction_tolerance, 0.5),
    ("eviction-rate-limit", "-1", lambda r: r.updater.eviction_rate_limit, -1.0),
    ("eviction-rate-burst", "1", lambda r: r.updater.eviction_rate_burst, 1),
    ("use-admission-controller-status", "true", lambda r: r.updater.use_admission_controller_status, True),
    (
        "admission-controller-status-lease-name",
        "vpa-admission-controller",
        lambda r: r.updater.admission_controller_status_lease_name,
        "vpa-admission-controller",
    ),
    (
        "admission-controller-status-lease-namespace",
        "",
        lambda r: r.updater.admission_controller_status_lease_namespace,
        "kube-system",
    ),
    (
        "admission-controller-status-lease-timeout",
        "1m",
        lambda r: r.updater.admission_controller_status_lease_timeout_s,
        60.0,
    ),
    (
        "concurrent-cpu-startup-boost-syncs",
        "1",
        lambda r: r.updater.concurrent_cpu_startup_boost_syncs,
        1,
    ),
    ("pod-update-threshold", "0.1", lambda r: r.updater.pod_update_threshold, 0.1),
    (
        "in-recommendation-bounds-eviction-lifetime-threshold",
        "12h",
        lambda r: r.updater.in_recommendation_bounds_eviction_lifetime_threshold_s,
        43200.0,
    ),
    ("evict-after-oom-threshold", "10m", lambda r: r.updater.evict_after_oom_threshold_s, 600.0),
    # §2.4 admission controller
    (
        "client-ca-file",
        "/etc/tls-certs/caCert.pem",
        lambda r: r.admission.client_ca_file,
        "/etc/tls-certs/caCert.pem",
    ),
    (
        "tls-cert-file",
        "/etc/tls-certs/serverCert.pem",
        lambda r: r.admission.tls_cert_file,
        "/etc/tls-certs/serverCert.pem",
    ),
    (
        "tls-private-key",
        "/etc/tls-certs/serverKey.pem",
        lambda r: r.admission.tls_private_key,
        "/etc/tls-certs/serverKey.pem",
    ),
    ("reload-cert", "false", lambda r: r.admission.reload_cert, False),
    ("tls-ciphers", "", lambda r: r.admission.tls_ciphers, ()),
    ("min-tls-version", "tls1_2", lambda r: r.admission.min_tls_version, "tls1_2"),
    ("port", "8000", lambda r: r.admission.port, 8000),
    ("webhook-service", "vpa-webhook", lambda r: r.admission.webhook_service, "vpa-webhook"),
    ("register-by-url", "false", lambda r: r.admission.register_by_url, False),
    ("webhook-address", "", lambda r: r.admission.webhook_address, ""),
    ("webhook-port", "", lambda r: r.admission.webhook_port, ""),
    ("webhook-timeout-seconds", "30", lambda r: r.admission.webhook_timeout_seconds, 30),
    ("webhook-failure-policy-fail", "false", lambda r: r.admission.webhook_failure_policy_fail, False),
    ("register-webhook", "true", lambda r: r.admission.register_webhook, True),
    ("webhook-labels", "", lambda r: r.admission.webhook_labels, ()),
    (
        "status-lease-name",
        "vpa-admission-controller",
        lambda r: r.admission.status_lease_name,
        "vpa-admission-controller",
    ),
    ("status-lease-namespace", "", lambda r: r.admission.status_lease_namespace, "kube-system"),
    ("status-lease-update-interval", "10s", lambda r: r.admission.status_lease_update_interval_s, 10.0),
    ("max-allowed-cpu-boost", None, lambda r: r.admission.max_allowed_cpu_boost_millicores, None),
    # §2.6 leader election, for both elected components
    (
        "leader-elect",
        "false",
        lambda r: (r.recommender.leader_election.leader_elect, r.updater.leader_election.leader_elect),
        (False, False),
    ),
    (
        "leader-elect-lease-duration",
        "15s",
        lambda r: (
            r.recommender.leader_election.lease_duration_s,
            r.updater.leader_election.lease_duration_s,
        ),
        (15.0, 15.0),
    ),
    (
        "leader-elect-renew-deadline",
        "10s",
        lambda r: (
            r.recommender.leader_election.renew_deadline_s,
            r.updater.leader_election.renew_deadline_s,
        ),
        (10.0, 10.0),
    ),
    (
        "leader-elect-retry-period",
        "2s",
        lambda r: (r.recommender.leader_election.retry_period_s, r.updater.leader_election.retry_period_s),
        (2.0, 2.0),
    ),
    (
        "leader-elect-resource-lock",
        "leases",
        lambda r: (r.recommender.leader_election.resource_lock, r.updater.leader_election.resource_lock),
        ("leases", "leases"),
    ),
    (
        "leader-elect-resource-name",
        None,  # per binary: no single text gives both
        lambda r: (r.recommender.leader_election.resource_name, r.updater.leader_election.resource_name),
        ("vpa-recommender-lease", "vpa-updater"),
    ),
    (
        "leader-elect-resource-namespace",
        "kube-system",
        lambda r: (
            r.recommender.leader_election.resource_namespace,
            r.updater.leader_election.resource_namespace,
        ),
        ("kube-system", "kube-system"),
    ),
]

# Upstream flags whose default we change on purpose (docs/flags.md says so): flag → (upstream, ours).
DEVIATIONS: dict[str, tuple[object, object]] = {"in-place-skip-disruption-budget": (False, True)}


@pytest.mark.parametrize(
    ("flag", "getter", "expected"),
    [(flag, getter, expected) for flag, _, getter, expected in SPEC_DEFAULTS],
    ids=[row[0] for row in SPEC_DEFAULTS],
)
def test_default_without_flag(flag: str, getter: Getter, expected: object) -> None:
    assert flag in table.RUN_FLAGS_BY_NAME
    assert getter(commands.parse_run_args([], env={})) == expected


@pytest.mark.parametrize(
    ("flag", "text", "getter", "expected"),
    [row for row in SPEC_DEFAULTS if row[1] is not None],
    ids=[row[0] for row in SPEC_DEFAULTS if row[1] is not None],
)
def test_spec_default_text_parses_to_the_default(
    flag: str, text: str, getter: Getter, expected: object
) -> None:
    assert getter(commands.parse_run_args([f"--{flag}={text}"], env={})) == expected


def test_every_upstream_flag_is_covered() -> None:
    covered = {row[0] for row in SPEC_DEFAULTS} | set(DEVIATIONS)
    upstream = {flag.name for flag in table.RUN_FLAGS if not flag.addition}
    assert upstream == covered


def test_deliberate_default_deviation() -> None:
    upstream, ours = DEVIATIONS["in-place-skip-disruption-budget"]
    assert commands.parse_run_args([], env={}).updater.in_place_skip_disruption_budget is ours
    restored = commands.parse_run_args(["--in-place-skip-disruption-budget=false"], env={})
    assert restored.updater.in_place_skip_disruption_budget is upstream


def test_our_additions_default() -> None:
    run = commands.parse_run_args([], env={})
    assert run.components == frozenset({"recommender", "updater", "admission-controller"})
    assert run.clock == "real"
    assert run.common.log_format == "auto"
    assert run.warnings == ()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], None),  # auto: the updater reads the API server's version
        (["--in-place-pod-level-resources=auto"], None),
        (["--in-place-pod-level-resources"], True),  # the bare flag, as when it was a boolean
        (["--in-place-pod-level-resources=true"], True),
        (["--in-place-pod-level-resources=false"], False),
        (["--in-place-pod-level-resources=0"], False),
    ],
)
def test_pod_level_resize_flag_is_auto_or_a_boolean(argv: list[str], expected: bool | None) -> None:
    assert commands.parse_run_args(argv, env={}).updater.in_place_pod_level_resources is expected


def test_pod_level_resize_flag_refuses_other_words() -> None:
    with pytest.raises(commands.UsageError, match="pod-level-resources: must be auto, true or false"):
        commands.parse_run_args(["--in-place-pod-level-resources=maybe"], env={})
