"""Settings of every component, with the upstream VPA's defaults, as frozen dataclasses.

Owns: one dataclass per concern (`CommonSettings`, `KlogSettings`, `LeaderElectionSettings`,
`PrometheusSettings`, `RecommenderSettings`, `UpdaterSettings`, `AdmissionSettings`) nested in
`RunSettings` (what `vpa run` runs) or `ReplaySettings` (what `vpa replay` runs). Every field has one
default, documented under it, and its unit in its name (`interval_s`, `..._bytes`, `..._millicores`).
Startup checks that upstream makes fatal live in `__post_init__`: an invalid combination cannot be built.

Size: over 600 lines because it is a flat list of fields, most mirroring one upstream flag with its default
and a line saying what it means; with every default in one file, `vpa.flags.table` and the docs read them from
one place, and a new flag is one field here and one row there.

Must not: read argv, the environment or files (the CLI resolves `$NAMESPACE`, `$KUBECONFIG` and the
Prometheus credentials before building these), or hold mutable state. Pure stdlib.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Literal, get_args

from vpa.model.features import FeatureGates
from vpa.model.vpa import BUILTIN_RECOMMENDERS

Component = Literal["recommender", "updater", "admission-controller"]
COMPONENTS: Final[tuple[Component, ...]] = get_args(Component)
LogFormat = Literal["json", "console", "auto"]
LOG_FORMATS: Final[tuple[LogFormat, ...]] = get_args(LogFormat)
ClockSource = Literal["real", "sim"]
CLOCK_SOURCES: Final[tuple[ClockSource, ...]] = get_args(ClockSource)
ReplayOutput = Literal["json", "yaml", "csv", "table", "html"]
REPLAY_OUTPUTS: Final[tuple[ReplayOutput, ...]] = get_args(ReplayOutput)
ReportOutput = Literal["table", "json", "csv", "html"]
REPORT_OUTPUTS: Final[tuple[ReportOutput, ...]] = get_args(ReportOutput)
TlsVersion = Literal["tls1_2", "tls1_3"]
TLS_VERSIONS: Final[tuple[TlsVersion, ...]] = get_args(TlsVersion)
Severity = Literal["INFO", "WARNING", "ERROR", "FATAL"]
SEVERITIES: Final[tuple[Severity, ...]] = get_args(Severity)

DEFAULT_NAMESPACE: Final = "kube-system"
UPSTREAM_VPA_VERSION: Final = "1.7.1"
"""The upstream VPA release whose objects, flags and metrics this implementation is compatible with."""

# Go's cipher suite names, as component-base's `TLSCipherSuites` accepts them for `--tls-ciphers`.
GO_TLS_CIPHER_SUITES: Final = frozenset(
    {
        # TLS 1.0 - 1.2
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        # TLS 1.3
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    }
)

# client-go's leader elector jitters the retry period by this factor and requires the renew deadline above it.
LEADER_ELECTION_JITTER_FACTOR: Final = 1.2


class SettingsError(ValueError):
    """A combination of settings the upstream binaries refuse at startup; the message names the flags."""


class StartupError(Exception):
    """A fatal start-up failure past the command line (a file that does not load, an address that cannot be
    bound, a cluster that does not answer as configured). `str()` is one line naming the flag or the file;
    `vpa run` prints it and exits with status 2 instead of a traceback."""


# --- shared ---------------------------------------------------------------------------------------------


def parse_host_port(address: str) -> tuple[str, int]:
    """`:8942` → ("0.0.0.0", 8942); `127.0.0.1:0` → ("127.0.0.1", 0); `[::1]:80` → ("::1", 80).

    Raises ValueError naming the address when it is not HOST:PORT or :PORT with a port in 0..65535.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep:
        raise ValueError(f"address {address!r} must be HOST:PORT or :PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {address!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {address!r}: port {port} is out of range")
    host = host.strip("[]") or "0.0.0.0"
    return host, port


@dataclass(frozen=True, slots=True)
class KlogSettings:
    """The standard klog flags upstream binaries accept. Carried so manifests keep working; the
    structured logger decides which it honours (`CommonSettings.v` and `log_format` drive it)."""

    logtostderr: bool = True
    """Log to standard error instead of files."""
    alsologtostderr: bool = False
    """Log to standard error as well as files (no effect with `logtostderr`)."""
    stderrthreshold: Severity = "INFO"
    """Lowest severity written to standard error when logging to files."""
    alsologtostderrthreshold: Severity = "INFO"
    """Lowest severity copied to standard error with `alsologtostderr` (no effect with `logtostderr`)."""
    legacy_stderr_threshold_behavior: bool = True
    """klog's `legacy_stderr_threshold_behavior`: when true, `stderrthreshold` is ignored with
    `logtostderr`; when false it filters standard error there too."""
    log_file: str = ""
    """If set, log to this file (no effect with `logtostderr`)."""
    log_file_max_size_mb: int = 1800
    """Maximum size of a log file in megabytes; 0 is unlimited (no effect with `logtostderr`)."""
    log_dir: str = ""
    """If set, write log files in this directory (no effect with `logtostderr`)."""
    skip_headers: bool = False
    """Omit header prefixes in log messages."""
    one_output: bool = False
    """Write each message only at its own severity level (no effect with `logtostderr`)."""
    add_dir_header: bool = False
    """Add the file directory to the header of log messages."""
    skip_log_headers: bool = False
    """Omit headers when opening log files (no effect with `logtostderr`)."""
    log_backtrace_at: str = ""
    """`file.go:N`: emit a stack trace when logging hits that line; empty is off (klog prints `:0`)."""
    vmodule: str = ""
    """Comma-separated `pattern=N` list for file-filtered verbosity."""


@dataclass(frozen=True, slots=True)
class CommonSettings:
    """Flags all three upstream binaries share (`common/flags.go`, klog)."""

    kubeconfig: str = ""
    """Path to a kubeconfig (`--kubeconfig`); empty: `kubeconfig_env`, else `default_kubeconfig` if it exists,
    else in-cluster, as kubectl."""
    kubeconfig_env: str = ""
    """`$KUBECONFIG`: a list of kubeconfig files (path-separator joined), merged as kubectl merges them."""
    default_kubeconfig: str = ""
    """`~/.kube/config` of the user's home (resolved by the CLI); used if it exists and nothing is given."""
    context: str = ""
    """The kubeconfig context to use (`--context`); empty is its current-context."""
    kube_api_qps: float = 50.0
    """Client-side request rate limit towards the API server (requests per second)."""
    kube_api_burst: float = 100.0
    """Client-side burst on top of `kube_api_qps` (a float upstream; truncated to an int by client-go)."""
    kube_api_server_pacing: bool = True
    """Once the API server shows it does API Priority and Fairness, pace requests by its answers (at most
    `kube_api_burst` in flight, halved on 429, Retry-After honoured by every request) instead of the QPS
    bucket. Ours; upstream always applies the bucket."""
    profiling: bool = False
    """Serve profiling handlers on the metrics server (`/debug/tasks`, `/debug/stalls`)."""
    event_loop_lag_interval_s: float = 0.1
    """How often the event-loop lag monitor samples (`vpa_event_loop_lag_seconds`). A stall shorter than
    this between two samples is missed or seen shorter; 1 ms times every stall to the millisecond, at the
    cost of waking the loop 1,000 times a second. Not an upstream flag."""
    vpa_object_namespace: str = ""
    """Only watch VPA objects (and clean checkpoints) in this namespace; empty is all namespaces."""
    ignored_vpa_object_namespaces: tuple[str, ...] = ()
    """Namespaces whose VPA objects are ignored; exclusive with `vpa_object_namespace`."""
    v: int = 4
    """Log verbosity (klog `--v`); upstream forces a default of 4."""
    log_format: LogFormat = "auto"
    """`json`, `console`, or `auto` (console on a terminal, JSON otherwise). Not an upstream flag."""
    klog: KlogSettings = field(default_factory=KlogSettings)
    """The other klog flags, accepted for compatibility."""

    def __post_init__(self) -> None:
        # A QPS of 0 turns the client-side limiter off (`ClientOptions`); a negative rate or burst is nothing.
        if not self.kube_api_qps >= 0:
            raise SettingsError(
                f"invalid value {self.kube_api_qps:g} for flag --kube-api-qps: must not be negative "
                "(0 disables client-side limiting)")
        if not self.kube_api_burst >= 0:
            raise SettingsError(
                f"invalid value {self.kube_api_burst:g} for flag --kube-api-burst: must not be negative")
        if not 0.001 <= self.event_loop_lag_interval_s <= 60:
            raise SettingsError(
                "--event-loop-lag-interval must be between 1ms and 1m, not "
                f"{self.event_loop_lag_interval_s:g}s"
            )
        if self.vpa_object_namespace and self.ignored_vpa_object_namespaces:
            raise SettingsError(
                "--vpa-object-namespace and --ignored-vpa-object-namespaces are mutually exclusive "
                "and can't be set together"
            )
        if self.log_format not in LOG_FORMATS:
            raise SettingsError(
                f"--log-format must be one of {', '.join(LOG_FORMATS)}, not {self.log_format!r}"
            )


@dataclass(frozen=True, slots=True)
class LeaderElectionSettings:
    """component-base leader election, one per elected component (the recommender and the updater)."""

    leader_elect: bool = False
    """Campaign for a Lease before running the main loop; losing it ends the process."""
    lease_duration_s: float = 15.0
    """How long non-leaders wait after the last renewal before taking over."""
    renew_deadline_s: float = 10.0
    """How long the leader keeps retrying to renew before it gives up leading."""
    retry_period_s: float = 2.0
    """Wait between attempts to acquire or renew."""
    resource_lock: str = "leases"
    """Kind of lock object; only `leases` is supported (as in current client-go)."""
    resource_name: str = "vpa-recommender-lease"
    """Name of the Lease; the recommender's default here, the updater's is `vpa-updater`."""
    resource_namespace: str = DEFAULT_NAMESPACE
    """Namespace of the Lease."""

    def __post_init__(self) -> None:
        if not self.leader_elect:
            return
        if self.resource_lock != "leases":
            raise SettingsError(
                f"--leader-elect-resource-lock={self.resource_lock!r} is not supported (only 'leases')"
            )
        if not self.resource_name:
            raise SettingsError("--leader-elect-resource-name must not be empty with --leader-elect")
        if not self.resource_namespace:
            raise SettingsError("--leader-elect-resource-namespace must not be empty with --leader-elect")
        if self.lease_duration_s <= self.renew_deadline_s:
            raise SettingsError(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline "
                f"({self.lease_duration_s:g}s <= {self.renew_deadline_s:g}s)"
            )
        if self.retry_period_s <= 0:
            raise SettingsError("--leader-elect-retry-period must be greater than zero")
        if self.renew_deadline_s <= LEADER_ELECTION_JITTER_FACTOR * self.retry_period_s:
            raise SettingsError(
                "--leader-elect-renew-deadline must be greater than "
                f"{LEADER_ELECTION_JITTER_FACTOR:g} × --leader-elect-retry-period "
                f"({self.renew_deadline_s:g}s <= {LEADER_ELECTION_JITTER_FACTOR * self.retry_period_s:g}s)"
            )


def _recommender_lease() -> LeaderElectionSettings:
    return LeaderElectionSettings(resource_name="vpa-recommender-lease")


def _updater_lease() -> LeaderElectionSettings:
    return LeaderElectionSettings(resource_name="vpa-updater")


# --- recommender ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrometheusSettings:
    """The recommender's Prometheus history provider (used with `--storage=prometheus`)."""

    address: str = "http://prometheus.monitoring.svc"
    """Base URL of the Prometheus server."""
    insecure: bool = False
    """Skip TLS certificate verification for an https address."""
    cadvisor_job_name: str = "kubernetes-cadvisor"
    """`job` label of the cAdvisor series."""
    history_length_s: float = 8 * 86400.0
    """How far back history is read (flag in Prometheus syntax, default `8d`)."""
    history_resolution_s: float = 3600.0
    """Query step and `rate()` window (flag in Prometheus syntax, default `1h`)."""
    history_cpu_metric: str = "container_cpu_usage_seconds_total"
    """CPU usage counter."""
    history_memory_metric: str = "container_memory_working_set_bytes"
    """Memory usage gauge."""
    query_timeout_s: float = 300.0
    """Timeout of each Prometheus query."""
    pod_label_prefix: str = "pod_label_"
    """Prefix of pod-label labels on the pod-labels metric."""
    metric_for_pod_labels: str = 'up{job="kubernetes-pods"}'
    """Series carrying pod labels."""
    pod_namespace_label: str = "kubernetes_namespace"
    """Namespace label on the pod-labels metric."""
    pod_name_label: str = "kubernetes_pod_name"
    """Pod-name label on the pod-labels metric."""
    container_namespace_label: str = "namespace"
    """Namespace label on cAdvisor series."""
    container_pod_name_label: str = "pod_name"
    """Pod-name label on cAdvisor series."""
    container_name_label: str = "name"
    """Container-name label on cAdvisor series (also used with external metrics)."""
    username: str = ""
    """Basic-auth user; the CLI falls back to `$PROMETHEUS_USERNAME` when the flag is empty."""
    password: str = ""
    """Basic-auth password; the CLI falls back to `$PROMETHEUS_PASSWORD` when the flag is empty."""
    bearer_token: str = ""
    """Bearer token; wins over basic auth."""
    bearer_token_file: str = ""
    """File holding the bearer token, read and trimmed at startup; overrides `bearer_token`."""

    def __post_init__(self) -> None:
        if self.bearer_token and self.bearer_token_file and self.username:
            raise SettingsError(
                "--prometheus-bearer-token, --prometheus-bearer-token-file and --username "
                "are mutually exclusive and can't all be set"
            )


@dataclass(frozen=True, slots=True)
class RecommenderSettings:
    """Every flag of upstream's recommender (`pkg/recommender/config/config.go`)."""

    recommender_name: str = "default"
    """Handle VPAs that name this recommender (`default` also takes VPAs that name none). Ours: a
    comma-separated list hosts one recommender per name in this process (`recommender_names`)."""
    recommender_interval_s: float = 60.0
    """Main loop period."""
    checkpoints_gc_interval_s: float = 600.0
    """Period of the garbage collection of orphaned checkpoints."""
    checkpoints_timeout_s: float = 60.0
    """Deadline of each loop's checkpoint-writing step, from the start of the loop."""
    storage: str = ""
    """`prometheus` bootstraps history from Prometheus; anything else (upstream's default is empty)
    means checkpoints."""
    memory_saver: bool = False
    """Only track pods that some VPA matches."""
    update_worker_count: int = 10
    """Concurrent status and checkpoint writers; also the minimum checkpoints written per loop."""
    min_checkpoints: int = 10
    """Deprecated and without effect upstream; a warning is logged when it is changed."""
    recommendation_margin_fraction: float = 0.15
    """Safety margin added to every estimate."""
    pod_recommendation_min_cpu_millicores: float = 25.0
    """Per-pod CPU floor, split across containers."""
    pod_recommendation_min_memory_mib: float = 250.0
    """Per-pod memory floor, split across containers. The flag says `-mb` but upstream multiplies by 2**20."""
    target_cpu_percentile: float = 0.9
    """CPU usage percentile of the target."""
    recommendation_lower_bound_cpu_percentile: float = 0.5
    """CPU usage percentile of the lower bound."""
    recommendation_upper_bound_cpu_percentile: float = 0.95
    """CPU usage percentile of the upper bound."""
    target_memory_percentile: float = 0.9
    """Memory peak percentile of the target."""
    recommendation_lower_bound_memory_percentile: float = 0.5
    """Memory peak percentile of the lower bound."""
    recommendation_upper_bound_memory_percentile: float = 0.95
    """Memory peak percentile of the upper bound."""
    confidence_interval_cpu_s: float = 86400.0
    """History length that counts as one unit of confidence for the CPU bounds."""
    confidence_interval_memory_s: float = 86400.0
    """History length that counts as one unit of confidence for the memory bounds."""
    humanize_memory: bool = False
    """Deprecated: render memory as `x.xxMi/Gi/…` (use `round_memory_bytes`)."""
    round_cpu_millicores: int = 1
    """Round CPU recommendations up to a multiple of this."""
    round_memory_bytes: int = 1
    """Round memory recommendations up to a multiple of this."""
    cpu_histogram_decay_half_life_s: float = 86400.0
    """Age at which a CPU sample has half its weight."""
    memory_histogram_decay_half_life_s: float = 86400.0
    """Age at which a memory peak has half its weight."""
    memory_aggregation_interval_s: float = 86400.0
    """Length of one memory-peak interval."""
    memory_aggregation_interval_count: int = 8
    """Number of intervals in the memory window (window = interval × count)."""
    oom_bump_up_ratio: float = 1.2
    """Memory multiplier applied after an OOM kill."""
    oom_min_bump_up_bytes: float = 104857600.0
    """Minimum memory increase after an OOM kill (100 MiB)."""
    cpu_integer_post_processor_enabled: bool = False
    """Enable the integer-CPU post-processor (opted into per container by VPA annotation)."""
    container_recommendation_max_allowed_cpu_millicores: int | None = None
    """Global cap on a container's CPU recommendation; a VPA's own `maxAllowed` wins. None: no cap."""
    container_recommendation_max_allowed_memory_bytes: int | None = None
    """Global cap on a container's memory recommendation; a VPA's own `maxAllowed` wins. None: no cap."""
    cap_to_largest_node: bool = False
    """Ours: cap every recommendation so the pod fits the largest schedulable node's allocatable."""
    detect_hpa_conflicts: bool = True
    """Ours: watch autoscaling/v2 HPAs and flag VPAs whose target an HPA scales on a controlled resource."""
    recommend_on_oom: bool = True
    """Ours: an OOM kill triggers a prompt pass that rewrites the affected VPAs' recommendations."""
    oom_reaction_delay_s: float = 1.0
    """Ours: how long that pass waits for more OOMs to join it."""
    bounds_write_tolerance: float = 0.0
    """Ours: a status write whose only changes are lower/upper bounds within this fraction of the amounts in
    the VPA's status is skipped (`vpa.logic.recommender.statuswrites`); 0 writes every change, as upstream."""
    use_external_metrics: bool = False
    """Read usage from `external.metrics.k8s.io` instead of `metrics.k8s.io`."""
    external_metrics_cpu_metric: str = ""
    """External metric name for CPU usage."""
    external_metrics_memory_metric: str = ""
    """External metric name for memory usage."""
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    """History provider settings."""
    leader_election: LeaderElectionSettings = field(default_factory=_recommender_lease)
    """The recommender's own Lease (`vpa-recommender-lease`), one for all the names hosted."""
    overrides: tuple[tuple[str, str, object], ...] = ()
    """Per-name settings `(recommender name, field, value)`, applied in order over these settings by
    `for_name` (flag `--recommender-overrides`). Only `OVERRIDABLE_RECOMMENDER_FIELDS` may be overridden."""

    def __post_init__(self) -> None:
        for field_name in _PERCENTILE_FIELDS:
            value = getattr(self, field_name)
            if not 0.0 <= value <= 1.0:
                flag = field_name.replace("_", "-")
                raise SettingsError(
                    f"invalid value {value:g} for flag --{flag}: a percentile is between 0 and 1")
        names = self.recommender_names
        if not names or any(not name for name in names):
            raise SettingsError(
                f"--recommender-name must be one name or a comma-separated list of names, not "
                f"{self.recommender_name!r}"
            )
        if self.oom_reaction_delay_s < 0:
            raise SettingsError("--oom-reaction-delay must not be negative")
        if not 0.0 <= self.bounds_write_tolerance < 1.0:
            raise SettingsError(
                f"--bounds-write-tolerance must be at least 0 and below 1, not {self.bounds_write_tolerance}")
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise SettingsError(f"--recommender-name names {duplicates[0]!r} more than once")
        for name, field_name, _ in self.overrides:
            if name not in names:
                raise SettingsError(
                    f"--recommender-overrides: {name!r} is not a recommender this process hosts "
                    f"(--recommender-name={self.recommender_name})"
                )
            if field_name not in OVERRIDABLE_RECOMMENDER_FIELDS:
                raise SettingsError(f"--recommender-overrides: {field_name!r} cannot be set per recommender")

    @property
    def recommender_names(self) -> tuple[str, ...]:
        """The names hosted by this process, in flag order (`default,performance` → two recommenders)."""
        return tuple(name.strip() for name in self.recommender_name.split(","))

    def for_name(self, name: str) -> RecommenderSettings:
        """The settings of the recommender called `name`: these, with its overrides applied. Raises
        SettingsError when an override makes them invalid."""
        if name not in self.recommender_names:
            raise SettingsError(f"{name!r} is not one of --recommender-name={self.recommender_name}")
        changes: dict[str, object] = {
            field_name: value for owner, field_name, value in self.overrides if owner == name
        }
        return replace(self, recommender_name=name, overrides=(), **changes)  # type: ignore[arg-type]

    @property
    def pod_recommendation_min_memory_bytes(self) -> int:
        """The per-pod memory floor in bytes, as upstream computes it (MiB × 2**20, truncated)."""
        return int(self.pod_recommendation_min_memory_mib * 1024 * 1024)


_PERCENTILE_FIELDS: Final = (
    "target_cpu_percentile",
    "recommendation_lower_bound_cpu_percentile",
    "recommendation_upper_bound_cpu_percentile",
    "target_memory_percentile",
    "recommendation_lower_bound_memory_percentile",
    "recommendation_upper_bound_memory_percentile",
)


# Settings a recommender hosted next to others may set for itself: what shapes its estimates. What the
# shared loop, caches and writers use (interval, storage, memory saver, workers, metrics source, lease,
# Prometheus) stays process-wide.
OVERRIDABLE_RECOMMENDER_FIELDS: Final = frozenset(
    {
        "recommendation_margin_fraction",
        "pod_recommendation_min_cpu_millicores",
        "pod_recommendation_min_memory_mib",
        "target_cpu_percentile",
        "recommendation_lower_bound_cpu_percentile",
        "recommendation_upper_bound_cpu_percentile",
        "target_memory_percentile",
        "recommendation_lower_bound_memory_percentile",
        "recommendation_upper_bound_memory_percentile",
        "confidence_interval_cpu_s",
        "confidence_interval_memory_s",
        "humanize_memory",
        "round_cpu_millicores",
        "round_memory_bytes",
        "cpu_histogram_decay_half_life_s",
        "memory_histogram_decay_half_life_s",
        "memory_aggregation_interval_s",
        "memory_aggregation_interval_count",
        "oom_bump_up_ratio",
        "oom_min_bump_up_bytes",
        "cpu_integer_post_processor_enabled",
        "container_recommendation_max_allowed_cpu_millicores",
        "container_recommendation_max_allowed_memory_bytes",
    }
)


# --- updater --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpdaterSettings:
    """Every flag of upstream's updater (`pkg/updater/config/config.go`)."""

    updater_interval_s: float = 60.0
    """Loop period; also each loop's timeout."""
    min_replicas: int = 2
    """Minimum live replicas in a group before its pods are evicted (a VPA's `minReplicas` overrides)."""
    eviction_tolerance: float = 0.5
    """Fraction of a group's configured replicas that may be disrupted per loop."""
    eviction_rate_limit: float = -1.0
    """Evictions (and in-place resizes) per second; ≤ 0 disables the limiter."""
    eviction_rate_burst: int = 1
    """Burst of the eviction rate limiter."""
    use_admission_controller_status: bool = True
    """Skip loops unless the admission controller's status Lease is fresh."""
    admission_controller_status_lease_name: str = "vpa-admission-controller"
    """Name of the admission controller's status Lease."""
    admission_controller_status_lease_namespace: str = DEFAULT_NAMESPACE
    """Its namespace: the flag, else `$NAMESPACE`, else `kube-system` (resolved by the CLI)."""
    admission_controller_status_lease_timeout_s: float = 60.0
    """Age after which the status Lease counts as stale; must be > 0."""
    in_place_skip_disruption_budget: bool = True
    """In-place resizes that restart no container skip the replica and tolerance checks, so single-replica
    workloads and groups below `min_replicas` are resized. DEVIATION: upstream's default is false;
    `--in-place-skip-disruption-budget=false` restores upstream's behaviour."""
    in_place_pod_level_resources: bool | None = None
    """Ours (gate `PodLevelResources`): does the cluster resize pod-level `spec.resources` in place? None
    (`auto`, the default): the updater reads the API server's version (1.36+ does; 1.35 only with its alpha
    `InPlacePodLevelResourcesVerticalScaling` gate) and stops trying after the server refuses one. True or
    false overrides the version. Where it is off, a pod with pod-level resources that needs an update is
    evicted (`InPlaceOrRecreate`) or skipped (`InPlace`): such a server refuses every resize of such a pod,
    of its containers too."""
    pod_update_threshold: float = 0.1
    """Minimum resource difference for updating a long-lived pod within the recommended range."""
    in_recommendation_bounds_eviction_lifetime_threshold_s: float = 12 * 3600.0
    """Minimum pod age for updates when requests are within the recommended range."""
    evict_after_oom_threshold_s: float = 600.0
    """A pod OOM-killed within this time of starting, and within this time of now, is updated at once."""
    concurrent_cpu_startup_boost_syncs: int = 1
    """Startup-boost removals (gate `CPUStartupBoost`) in flight at once; must be > 0."""
    in_place_on_recommendation: bool = True
    """Ours: a changed recommendation of an in-place VPA triggers a prompt pass (resizes only) instead of
    waiting for the next tick."""
    in_place_reaction_delay_s: float = 1.0
    """Ours: how long a prompt pass waits for more changes to join it (also the least gap between two)."""
    resize_guard_backoff_s: float = 3600.0
    """Ours (gate `ResizeGuard`): how long a container's decreases are held after its first revert; each
    further revert doubles it, up to 24 h. Must be greater than 0 and at most 24 h."""
    leader_election: LeaderElectionSettings = field(default_factory=_updater_lease)
    """The updater's own Lease (`vpa-updater`)."""

    def __post_init__(self) -> None:
        if self.admission_controller_status_lease_timeout_s <= 0:
            raise SettingsError("--admission-controller-status-lease-timeout must be greater than 0")
        if self.concurrent_cpu_startup_boost_syncs <= 0:
            raise SettingsError("--concurrent-cpu-startup-boost-syncs must be greater than 0")
        if self.in_place_reaction_delay_s < 0:
            raise SettingsError("--in-place-reaction-delay must not be negative")
        if not 0 < self.resize_guard_backoff_s <= 24 * 3600.0:
            raise SettingsError("--resize-guard-backoff must be greater than 0 and at most 24h")


# --- admission controller -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdmissionSettings:
    """Every flag of upstream's admission controller (`pkg/admission-controller/config/config.go`)."""

    client_ca_file: str = "/etc/tls-certs/caCert.pem"
    """CA bundle put into the webhook configuration."""
    tls_cert_file: str = "/etc/tls-certs/serverCert.pem"
    """Server certificate (PEM)."""
    tls_private_key: str = "/etc/tls-certs/serverKey.pem"
    """Server private key (PEM)."""
    reload_cert: bool = False
    """Reload the certificate, key and CA (patching the webhook's caBundle) when the files change."""
    tls_ciphers: tuple[str, ...] = ()
    """Go cipher suite names accepted with TLS 1.2; empty means the library defaults."""
    min_tls_version: TlsVersion = "tls1_2"
    """Minimum TLS version: `tls1_2` or `tls1_3`."""
    port: int = 8000
    """HTTPS port of the webhook."""
    webhook_service: str = "vpa-webhook"
    """Service the webhook registers under (when not registering by URL)."""
    webhook_service_namespace: str = DEFAULT_NAMESPACE
    """Namespace of that Service: `$NAMESPACE` (resolved by the CLI), else `kube-system`."""
    register_by_url: bool = False
    """Register `https://<webhook_address>:<webhook_port>` instead of a Service reference."""
    webhook_address: str = ""
    """Host registered with `register_by_url`."""
    webhook_port: str = ""
    """Port registered with `register_by_url` (a string upstream)."""
    webhook_timeout_seconds: int = 30
    """`timeoutSeconds` of the registered webhook."""
    webhook_failure_policy_fail: bool = False
    """Register with `failurePolicy: Fail` instead of `Ignore`."""
    register_webhook: bool = True
    """Create or update the MutatingWebhookConfiguration at startup."""
    webhook_labels: tuple[tuple[str, str], ...] = ()
    """Labels of the webhook configuration object (flag form `key1:value1,key2:value2`)."""
    status_lease_name: str = "vpa-admission-controller"
    """Name of the status Lease this component renews."""
    status_lease_namespace: str = DEFAULT_NAMESPACE
    """Its namespace: the flag, else `$NAMESPACE`, else `kube-system` (resolved by the CLI)."""
    status_lease_update_interval_s: float = 10.0
    """Renewal period (and per-renewal timeout) of the status Lease; must be > 0."""
    max_allowed_cpu_boost_millicores: int | None = None
    """Cap on the boosted CPU request (gate `CPUStartupBoost`). None: no cap."""

    def __post_init__(self) -> None:
        if self.min_tls_version not in TLS_VERSIONS:
            raise SettingsError(
                f"--min-tls-version must be tls1_2 or tls1_3, not {self.min_tls_version!r}"
            )
        unknown = [name for name in self.tls_ciphers if name not in GO_TLS_CIPHER_SUITES]
        if unknown:
            raise SettingsError(f"--tls-ciphers: unknown cipher suite {unknown[0]!r}")
        if self.status_lease_update_interval_s <= 0:
            raise SettingsError("--status-lease-update-interval must be greater than 0")


def parse_webhook_labels(text: str) -> tuple[tuple[str, str], ...]:
    """`key1:value1,key2:value2` → `(("key1", "value1"), ("key2", "value2"))`, as upstream reads
    `--webhook-labels` (surrounding double quotes dropped, keys and values trimmed)."""
    if text == "":
        return ()
    text = text.strip('"')
    labels: dict[str, str] = {}
    for item in text.split(","):
        key, separator, value = item.partition(":")
        key = key.strip()
        if not separator or not key:
            raise ValueError(f"labels {text!r} are invalid, the format should be 'key1:value1,key2:value2'")
        labels[key] = value.strip()
    return tuple(labels.items())


def parse_tls_ciphers(text: str) -> tuple[str, ...]:
    """Split `--tls-ciphers` on commas or colons, dropping empty items."""
    return tuple(name.strip() for name in text.replace(":", ",").split(",") if name.strip())


# --- what the subcommands run ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Everything `vpa run` needs: which components to start and each one's settings."""

    components: frozenset[Component] = frozenset(COMPONENTS)
    """Components this process runs (`--components`, default all three)."""
    common: CommonSettings = field(default_factory=CommonSettings)
    """Flags every component shares."""
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    """Resolved `--feature-gates`."""
    address: str = ":8942"
    """The one metrics and health server of the process (`/metrics`, `/healthz`, `/readyz`, `/health-check`).
    Upstream has one per binary (:8942, :8943, :8944)."""
    clock: ClockSource = "real"
    """`real`: the wall clock. `sim`: follow the simulated cluster's virtual clock, read from
    `GET <apiserver>/sim/v1/clock` of the cluster the kubeconfig points at. Not an upstream flag."""
    recommender: RecommenderSettings = field(default_factory=RecommenderSettings)
    """Used when `recommender` is selected."""
    updater: UpdaterSettings = field(default_factory=UpdaterSettings)
    """Used when `updater` is selected."""
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)
    """Used when `admission-controller` is selected."""
    warnings: tuple[str, ...] = ()
    """Deprecation notices found while parsing, for the application to log once it has a logger."""
    recommendation_metrics: bool = False
    """Export every VPA's recommendation and its pods' current requests and limits as per-container gauges
    (`vpa_recommendation_*`, `vpa_container_*`). Not an upstream flag."""
    recommendation_metrics_max_series: int = 10000
    """At most this many series of those gauges; whole containers beyond it are dropped and counted."""

    def __post_init__(self) -> None:
        if self.recommendation_metrics_max_series < 1:
            raise SettingsError(
                "--recommendation-metrics-max-series must be at least 1, not "
                f"{self.recommendation_metrics_max_series}"
            )
        if not self.components:
            raise SettingsError("--components must name at least one of " + ", ".join(COMPONENTS))
        unknown = sorted(set(self.components) - set(COMPONENTS))
        if unknown:
            raise SettingsError(f"--components: unknown component {unknown[0]!r}")
        if self.clock not in CLOCK_SOURCES:
            raise SettingsError(f"--clock must be one of {', '.join(CLOCK_SOURCES)}, not {self.clock!r}")
        try:
            parse_host_port(self.address)
        except ValueError as error:
            raise SettingsError(f"invalid value {self.address!r} for flag --address: {error}") from None
        if not 0 <= self.admission.port <= 65535:
            raise SettingsError(f"invalid value {self.admission.port} for flag --port: not in 0..65535")
        recommender_lease = self.recommender.leader_election
        updater_lease = self.updater.leader_election
        if (
            {"recommender", "updater"} <= self.components
            and recommender_lease.leader_elect
            and updater_lease.leader_elect
            and (recommender_lease.resource_namespace, recommender_lease.resource_name)
            == (updater_lease.resource_namespace, updater_lease.resource_name)
        ):
            raise SettingsError(
                "the recommender and the updater would share the leader-election Lease "
                f"{updater_lease.resource_namespace}/{updater_lease.resource_name}; "
                "give them different names with --recommender-leader-elect-resource-name and "
                "--updater-leader-elect-resource-name"
            )

    def runs(self, component: Component) -> bool:
        """Whether `component` is selected."""
        return component in self.components


REPLAY_TRACE_FORMAT: Final = """\
A trace is a CSV file (or Parquet, by its .parquet/.pq extension) with a header row and these columns:
  timestamp       Unix seconds (1767225600) or ISO-8601 (2026-01-01T00:00:00Z; no zone means UTC)
  container       the key of one container: any text (e.g. ns/pod/container); each key is replayed as
                  its own container under its own VPA
  cpu_cores       CPU usage in cores (0.25) or as a quantity (250m)
  memory_bytes    memory working set in bytes (104857600) or as a quantity (100Mi)
  oom             optional: true on a row recording an OOM kill (memory_bytes is then the request)
  cpu_request     optional: the container's CPU request (0.25 or 250m), shown beside the recommendation
  memory_request  optional: its memory request (bytes or a quantity such as 128Mi)
At least one of cpu_cores and memory_bytes is needed; an empty cell is no sample. Values must not be
negative. Rows may come in any order (they are replayed by time, file order on ties).
"""
"""What `vpa replay` reads (`vpa.replay.traces.read_trace` implements it; `vpa replay --help` prints
it)."""


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """Everything `vpa replay` needs: the trace, when to evaluate, and the recommender's settings."""

    trace_path: str
    """CSV or Parquet usage trace (DESIGN §8)."""
    at: float | None = None
    """Unix seconds at which recommendations are computed; None means the last sample's time."""
    every_s: float | None = None
    """If set, also emit a series of recommendations every this many seconds."""
    output: ReplayOutput = "json"
    """`json`, `yaml`, `csv`, `table`, or (with `evaluate`) `html`."""
    algorithm: str = ""
    """`--recommender`: the built-in algorithm to replay; empty means `default` (every built-in one
    when evaluating)."""
    list_recommenders: bool = False
    """`--list-recommenders`: print the built-in recommender names and exit."""
    evaluate: bool = False
    """`--evaluate`: score the recommendations over time instead of printing them."""
    closed_loop: bool = False
    """`--loop closed` (or `--closed-loop`): when evaluating, feed each run of memory usage above the
    applied limit back as an OOM kill."""
    recommender: RecommenderSettings = field(default_factory=RecommenderSettings)
    """The recommender flags given to `vpa replay`."""
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    """Resolved `--feature-gates` (`PerVPAConfig` matters to the recommender)."""

    def __post_init__(self) -> None:
        if self.list_recommenders:
            return
        if not self.trace_path:
            raise SettingsError("vpa replay needs a TRACE file")
        if self.algorithm and self.algorithm not in BUILTIN_RECOMMENDERS:
            raise SettingsError(f"--recommender: unknown recommender {self.algorithm!r} "
                                f"(built-in: {', '.join(BUILTIN_RECOMMENDERS)})")
        if self.output == "html" and not self.evaluate:
            raise SettingsError("--output html needs --evaluate")
        if self.evaluate and self.output in ("yaml", "csv"):
            raise SettingsError(f"--output {self.output} does not apply to --evaluate (json, table or html)")
        if self.closed_loop and not self.evaluate:
            raise SettingsError("--closed-loop needs --evaluate")
        if self.evaluate and self.at is not None:
            raise SettingsError("--at does not apply to --evaluate (it scores the whole trace)")
        if self.every_s is not None and self.every_s <= 0:
            raise SettingsError("--every must be greater than 0")
        if self.output not in REPLAY_OUTPUTS:
            raise SettingsError(f"--output must be one of {', '.join(REPLAY_OUTPUTS)}, not {self.output!r}")


@dataclass(frozen=True, slots=True)
class ReportSettings:
    """Everything `vpa report` needs: where the cluster is, which namespace, which output, and where."""

    kubeconfig: str = ""
    """Path to a kubeconfig (`--kubeconfig`); empty: `kubeconfig_env`, `default_kubeconfig`, in-cluster."""
    kubeconfig_env: str = ""
    """`$KUBECONFIG` (a list of files, merged as kubectl merges them)."""
    default_kubeconfig: str = ""
    """`~/.kube/config` of the user's home, used when it exists and nothing else is set."""
    context: str = ""
    """The kubeconfig context (`--context`); empty is its current-context."""
    namespace: str = ""
    """Only VPAs in this namespace; empty is all namespaces."""
    output: ReportOutput = "table"
    """`table`, `json`, `csv` or `html`."""
    output_file: str = ""
    """Write the report to this file; empty is standard output."""

    def __post_init__(self) -> None:
        if self.output not in REPORT_OUTPUTS:
            raise SettingsError(f"--output must be one of {', '.join(REPORT_OUTPUTS)}, not {self.output!r}")
