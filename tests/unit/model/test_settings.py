"""Settings: the startup checks upstream makes fatal, and the small parsers settings rely on.

Covers: each invalid combination raises SettingsError naming the flags (namespace exclusivity, lease
timeouts, TLS version and ciphers, Prometheus credentials, leader-election timings and lock, components,
shared leases), that valid neighbours of each are accepted, `--webhook-labels` and `--tls-ciphers` parsing,
and the per-component lease defaults.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vpa.model import settings as s
from vpa.model.settings import SettingsError


def _lease(**overrides: object) -> s.LeaderElectionSettings:
    return s.LeaderElectionSettings(leader_elect=True, **overrides)  # type: ignore[arg-type]


def _both_elected(recommender_name: str, updater_name: str, **run: object) -> s.RunSettings:
    return s.RunSettings(
        recommender=s.RecommenderSettings(leader_election=_lease(resource_name=recommender_name)),
        updater=s.UpdaterSettings(leader_election=_lease(resource_name=updater_name)),
        **run,  # type: ignore[arg-type]
    )


INVALID: list[tuple[str, Callable[[], object], str]] = [
    (
        "namespace-and-ignored",
        lambda: s.CommonSettings(vpa_object_namespace="a", ignored_vpa_object_namespaces=("b",)),
        "--vpa-object-namespace and --ignored-vpa-object-namespaces are mutually exclusive",
    ),
    (
        "log-format",
        lambda: s.CommonSettings(log_format="xml"),  # type: ignore[arg-type]
        "--log-format must be one of json, console, auto",
    ),
    (
        "status-lease-timeout-zero",
        lambda: s.UpdaterSettings(admission_controller_status_lease_timeout_s=0),
        "--admission-controller-status-lease-timeout must be greater than 0",
    ),
    (
        "status-lease-timeout-negative",
        lambda: s.UpdaterSettings(admission_controller_status_lease_timeout_s=-1),
        "--admission-controller-status-lease-timeout must be greater than 0",
    ),
    (
        "startup-boost-syncs-zero",
        lambda: s.UpdaterSettings(concurrent_cpu_startup_boost_syncs=0),
        "--concurrent-cpu-startup-boost-syncs must be greater than 0",
    ),
    (
        "resize-guard-backoff-zero",
        lambda: s.UpdaterSettings(resize_guard_backoff_s=0),
        "--resize-guard-backoff must be greater than 0 and at most 24h",
    ),
    (
        "resize-guard-backoff-above-a-day",
        lambda: s.UpdaterSettings(resize_guard_backoff_s=25 * 3600.0),
        "--resize-guard-backoff must be greater than 0 and at most 24h",
    ),
    (
        "status-lease-interval-zero",
        lambda: s.AdmissionSettings(status_lease_update_interval_s=0),
        "--status-lease-update-interval must be greater than 0",
    ),
    (
        "min-tls-version",
        lambda: s.AdmissionSettings(min_tls_version="tls1_1"),  # type: ignore[arg-type]
        "--min-tls-version must be tls1_2 or tls1_3",
    ),
    (
        "tls-cipher",
        lambda: s.AdmissionSettings(tls_ciphers=("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128")),
        "--tls-ciphers: unknown cipher suite 'AES128'",
    ),
    (
        "prometheus-token-file-username",
        lambda: s.PrometheusSettings(bearer_token="t", bearer_token_file="/f", username="u"),
        "--prometheus-bearer-token, --prometheus-bearer-token-file and --username are mutually exclusive",
    ),
    (
        "lease-duration-not-above-renew",
        lambda: _lease(lease_duration_s=10, renew_deadline_s=10),
        "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline",
    ),
    (
        "renew-not-above-jittered-retry",
        lambda: _lease(renew_deadline_s=2.4, retry_period_s=2),
        "--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period",
    ),
    ("retry-zero", lambda: _lease(retry_period_s=0), "--leader-elect-retry-period must be greater than zero"),
    ("resource-lock", lambda: _lease(resource_lock="endpoints"), "--leader-elect-resource-lock='endpoints'"),
    ("empty-lease-name", lambda: _lease(resource_name=""), "--leader-elect-resource-name must not be empty"),
    (
        "empty-lease-namespace",
        lambda: _lease(resource_namespace=""),
        "--leader-elect-resource-namespace must not be empty",
    ),
    ("no-components", lambda: s.RunSettings(components=frozenset()), "--components must name at least one"),
    (
        "unknown-component",
        lambda: s.RunSettings(components=frozenset({"scheduler"})),  # type: ignore[arg-type]
        "--components: unknown component 'scheduler'",
    ),
    (
        "clock",
        lambda: s.RunSettings(clock="wall"),  # type: ignore[arg-type]
        "--clock must be one of real, sim",
    ),
    (
        "shared-lease",
        lambda: _both_elected("vpa", "vpa"),
        "the recommender and the updater would share the leader-election Lease kube-system/vpa",
    ),
    ("replay-no-trace", lambda: s.ReplaySettings(trace_path=""), "vpa replay needs a TRACE file"),
    (
        "replay-every-zero",
        lambda: s.ReplaySettings(trace_path="t.csv", every_s=0),
        "--every must be greater than 0",
    ),
    (
        "replay-output",
        lambda: s.ReplaySettings(trace_path="t.csv", output="xml"),  # type: ignore[arg-type]
        "--output must be one of json, yaml, csv, table, html",
    ),
]


@pytest.mark.parametrize(
    ("build", "message"), [(b, m) for _, b, m in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_invalid_settings_are_refused(build: Callable[[], object], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build()
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


VALID: list[tuple[str, Callable[[], object]]] = [
    ("defaults", s.RunSettings),
    ("namespace-only", lambda: s.CommonSettings(vpa_object_namespace="a")),
    ("ignored-only", lambda: s.CommonSettings(ignored_vpa_object_namespaces=("a", "b"))),
    ("tls1_3", lambda: s.AdmissionSettings(min_tls_version="tls1_3")),
    ("known-ciphers", lambda: s.AdmissionSettings(tls_ciphers=("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",))),
    ("token-and-file", lambda: s.PrometheusSettings(bearer_token="t", bearer_token_file="/f")),
    ("token-and-username", lambda: s.PrometheusSettings(bearer_token="t", username="u")),
    # Timings are only checked when election is on, as client-go only checks them then.
    ("bad-timings-when-off", lambda: s.LeaderElectionSettings(lease_duration_s=1, renew_deadline_s=5)),
    ("renew-just-above-jitter", lambda: _lease(renew_deadline_s=2.5, retry_period_s=2)),
    ("distinct-leases", lambda: _both_elected("vpa-recommender-lease", "vpa-updater")),
    (
        "same-name-other-namespace",
        lambda: s.RunSettings(
            recommender=s.RecommenderSettings(
                leader_election=_lease(resource_name="x", resource_namespace="a")
            ),
            updater=s.UpdaterSettings(leader_election=_lease(resource_name="x", resource_namespace="b")),
        ),
    ),
    ("shared-lease-one-component", lambda: _both_elected("vpa", "vpa", components=frozenset({"updater"}))),
    (
        "shared-lease-election-off",
        lambda: s.RunSettings(
            recommender=s.RecommenderSettings(leader_election=s.LeaderElectionSettings(resource_name="x")),
            updater=s.UpdaterSettings(leader_election=s.LeaderElectionSettings(resource_name="x")),
        ),
    ),
    ("replay", lambda: s.ReplaySettings(trace_path="t.parquet", at=1.0, every_s=3600.0, output="table")),
]


@pytest.mark.parametrize("build", [b for _, b in VALID], ids=[i for i, _ in VALID])
def test_valid_settings_are_accepted(build: Callable[[], object]) -> None:
    build()


def test_each_elected_component_has_its_own_lease_by_default() -> None:
    run = s.RunSettings()
    assert run.recommender.leader_election.resource_name == "vpa-recommender-lease"
    assert run.updater.leader_election.resource_name == "vpa-updater"
    assert run.recommender.leader_election.resource_namespace == "kube-system"
    assert run.runs("recommender")
    assert run.runs("admission-controller")


def test_min_memory_is_mebibytes() -> None:
    assert s.RecommenderSettings().pod_recommendation_min_memory_bytes == 250 * 1024 * 1024
    assert (
        s.RecommenderSettings(pod_recommendation_min_memory_mib=0.5).pod_recommendation_min_memory_bytes
        == 524288
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("a:b", (("a", "b"),)),
        ("a:b,c:d", (("a", "b"), ("c", "d"))),
        (" a : b , c:d:e ", (("a", "b"), ("c", "d:e"))),
        ('"team:vpa"', (("team", "vpa"),)),
        ("a:", (("a", ""),)),
    ],
    ids=["empty", "one", "two", "spaces-and-colon-in-value", "quoted", "empty-value"],
)
def test_webhook_labels(text: str, expected: tuple[tuple[str, str], ...]) -> None:
    assert s.parse_webhook_labels(text) == expected


@pytest.mark.parametrize(
    "text", ["a", "a:b,c", ":b", "a:b,"], ids=["no-colon", "second-bad", "no-key", "trailing"]
)
def test_webhook_labels_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="key1:value1,key2:value2"):
        s.parse_webhook_labels(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("A,B", ("A", "B")),
        ("A:B", ("A", "B")),
        (" A , B:C ,", ("A", "B", "C")),
    ],
    ids=["empty", "comma", "colon", "mixed"],
)
def test_tls_ciphers(text: str, expected: tuple[str, ...]) -> None:
    assert s.parse_tls_ciphers(text) == expected
