"""The flag table of `vpa run` and `vpa replay`: every upstream flag, our few additions, and where each lands.

Owns: one `FlagDef` per flag (name, value kind, help group, help text, the settings field it sets, and
for our additions or deviations a note), in help order. Defaults are read from the settings dataclasses
(`vpa.model.settings`), so each default is written once; a flag whose upstream default differs from the
resolved setting (environment fallbacks, per-component lease names) states its upstream default here.

Size: over 600 lines because it is one row per flag (about 150, most of them upstream's) in help order; a
flat table reads best whole, and a new flag is one row where its help group is.

Must not: parse argv or build settings (that is `vpa.flags.commands`), or read the environment.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from vpa.flags import parsing
from vpa.flags.parsing import (
    BOOL,
    CPU_QUANTITY,
    DURATION,
    FLOAT,
    INT,
    MEMORY_QUANTITY,
    PROMETHEUS_DURATION,
    STRING,
    STRING_LIST,
    UINT,
    Kind,
    choice,
    custom,
)
from vpa.model import durations, features, settings


class Group(enum.Enum):
    """Help sections, in the order `--help` and docs/flags.md print them."""

    COMMON = "Common"
    LEADER_ELECTION = "Leader election"
    RECOMMENDER = "Recommender"
    UPDATER = "Updater"
    ADMISSION = "Admission controller"
    LOGGING = "Logging"
    REPLAY = "Replay"
    REPORT = "Report"


_UNSET: Final = object()


@dataclass(frozen=True, slots=True)
class FlagDef:
    """One flag: its syntax, its help, and the settings field it sets."""

    name: str
    kind: Kind
    group: Group
    help: str
    target: str | None
    """Dotted path of the field it sets in `RunSettings` (`recommender.prometheus.history_length_s`), or
    None when the builder handles it specially (feature gates, leader election, replay's own flags)."""
    default: object = _UNSET
    """The flag's default when it is not simply the target field's default."""
    default_text: str | None = None
    """How docs and help show the default, when the kind's formatting of `default` is not right."""
    addition: bool = False
    """Not an upstream flag: ours."""
    note: str = ""
    """Deviation from upstream or resolution rule, shown in docs/flags.md."""
    repeatable: bool = False
    setting_text: str | None = None
    """Where the value lands, for docs, when `target` is None."""

    @property
    def spec(self) -> parsing.FlagSpec:
        return parsing.FlagSpec(self.name, self.kind, repeatable=self.repeatable)

    def default_value(self) -> object:
        """The value a command line without this flag yields (before environment fallbacks)."""
        if self.default is not _UNSET:
            return self.default
        if self.target is None:
            raise LookupError(f"--{self.name} has neither a target nor a default")
        value: object = _DEFAULT_RUN
        for part in self.target.split("."):
            value = getattr(value, part)
        return value

    def default_display(self) -> str:
        if self.default_text is not None:
            return self.default_text
        return self.kind.format(self.default_value())


_DEFAULT_RUN: Final = settings.RunSettings()


def _components(text: str) -> frozenset[settings.Component]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError("name at least one component (" + ", ".join(settings.COMPONENTS) + ")")
    selected: set[settings.Component] = set()
    for name in names:
        for component in settings.COMPONENTS:
            if name == component:
                selected.add(component)
                break
        else:
            raise ValueError(f'unknown component "{name}" (valid: {", ".join(settings.COMPONENTS)})')
    return frozenset(selected)


def _format_components(value: object) -> str:
    assert isinstance(value, frozenset)
    return ",".join(component for component in settings.COMPONENTS if component in value)


def _feature_gates(text: str) -> dict[str, bool]:
    try:
        pairs = features.parse_feature_gate_pairs(text)
        features.resolve_gate_values(pairs)
    except features.FeatureGateError as error:
        raise ValueError(str(error)) from None
    return pairs


def _severity(text: str) -> settings.Severity:
    upper = text.upper()
    for severity in settings.SEVERITIES:
        if upper == severity:
            return severity
    try:
        number = parsing.parse_go_int(text)
    except ValueError:
        number = -1
    if 0 <= number < len(settings.SEVERITIES):
        return settings.SEVERITIES[number]
    raise ValueError("not a severity (INFO, WARNING, ERROR, FATAL or 0-3)")


def _trace_location(text: str) -> str:
    """klog's `--log-backtrace-at`: empty, or `file.go:N` with N > 0."""
    if text in ("", ":0"):
        return ""
    file_name, separator, line = text.partition(":")
    if not separator or ":" in line or "." not in file_name:
        raise ValueError("syntax error: expect file.go:234")
    try:
        number = int(line)
    except ValueError:
        raise ValueError("syntax error: expect file.go:234") from None
    if number <= 0:
        raise ValueError("negative or zero value for level")
    return text


def _vmodule(text: str) -> str:
    """klog's `--vmodule`: comma-separated `pattern=N`; empty items ignored."""
    for item in text.split(","):
        if not item:
            continue
        pattern, separator, level = item.partition("=")
        if not separator or not pattern or not level or "=" in level:
            raise ValueError("syntax error: expect comma-separated list of filename=N")
        try:
            parsing.parse_go_int(level, minimum=-(2**31), maximum=2**31 - 1)
        except ValueError:
            raise ValueError("syntax error: expect comma-separated list of filename=N") from None
    return text


def _webhook_labels(text: str) -> tuple[tuple[str, str], ...]:
    return settings.parse_webhook_labels(text)


def _format_labels(value: object) -> str:
    assert isinstance(value, tuple)
    return ",".join(f"{key}:{label}" for key, label in value)


def _tls_ciphers(text: str) -> tuple[str, ...]:
    names = settings.parse_tls_ciphers(text)
    for name in names:
        if name not in settings.GO_TLS_CIPHER_SUITES:
            raise ValueError(f"unknown cipher suite {name!r}")
    return names


def _level(text: str) -> int:
    """klog's `Level`: `strconv.ParseInt(text, 10, 32)`, decimal only."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError("not a decimal integer")
    value = int(text)
    if not -(2**31) <= value < 2**31:
        raise ValueError("value out of range")
    return value


def _every(text: str) -> float:
    """`--every`: a Go duration (`30m`, `1h30m`) or a Prometheus one (`1d`, `1w`)."""
    try:
        return durations.parse_go_duration_s(text)
    except durations.DurationError as go_error:
        try:
            return durations.parse_prometheus_duration_s(text)
        except durations.DurationError:
            raise ValueError(go_error.reason + "; Prometheus forms such as 1d are accepted too") from None


def _unix_seconds(text: str) -> float:
    """Unix seconds or an ISO-8601 time (`2026-01-08T00:00:00Z`; no zone means UTC)."""
    try:
        value = parsing.parse_go_float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise ValueError("not Unix seconds or an ISO-8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    if value != value:  # NaN
        raise ValueError("not a time")
    return value


def _recommender_overrides(text: str) -> tuple[tuple[str, str, str], ...]:
    """`NAME:FLAG=VALUE[,NAME:FLAG=VALUE…]` → `((NAME, FLAG, VALUE), …)`; the values are parsed later by
    FLAG's own kind (`vpa.flags.commands`), which also checks that NAME is hosted and FLAG may be set."""
    out: list[tuple[str, str, str]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, colon, rest = item.partition(":")
        flag, equals, value = rest.partition("=")
        name, flag = name.strip(), flag.strip().removeprefix("--")
        if not colon or not equals or not name or not flag:
            raise ValueError(f"{item!r} is not NAME:FLAG=VALUE (e.g. performance:target-cpu-percentile=0.95)")
        out.append((name, flag, value.strip()))
    return tuple(out)


def _format_overrides(value: object) -> str:
    assert isinstance(value, tuple)
    return ",".join(f"{name}:{flag}={text}" for name, flag, text in value)


COMPONENTS_KIND: Final = custom("strings", _components, _format_components)
FEATURE_GATES_KIND: Final = custom("mapStringBool", _feature_gates)
SEVERITY_KIND: Final = custom("severity", _severity)
TRACE_LOCATION_KIND: Final = custom("traceLocation", _trace_location)
VMODULE_KIND: Final = custom("moduleSpec", _vmodule)
LEVEL_KIND: Final = custom("Level", _level)
LABELS_KIND: Final = custom("string", _webhook_labels, _format_labels)
CIPHERS_KIND: Final = custom("string", _tls_ciphers, parsing.STRING_LIST.format)


def _auto_bool(text: str) -> bool | None:
    """`auto` (None) or a Go boolean."""
    if text == "auto":
        return None
    try:
        return parsing.parse_bool(text)
    except ValueError:
        raise ValueError("must be auto, true or false") from None


def _format_auto_bool(value: object) -> str:
    return "auto" if value is None else str(bool(value)).lower()


# Tri-state, but still a boolean on the command line: the bare flag means true, as before it was `auto`.
AUTO_BOOL: Final = parsing.Kind("auto-or-bool", _auto_bool, _format_auto_bool, is_bool=True)

RECOMMENDER_OVERRIDES_KIND: Final = custom("strings", _recommender_overrides, _format_overrides)

_C, _L, _R, _U, _A, _G = (
    Group.COMMON,
    Group.LEADER_ELECTION,
    Group.RECOMMENDER,
    Group.UPDATER,
    Group.ADMISSION,
    Group.LOGGING,
)

_ENV_NAMESPACE_NOTE: Final = "Empty: `$NAMESPACE`, else `kube-system`."

RUN_FLAGS: Final[tuple[FlagDef, ...]] = (
    # --- common -----------------------------------------------------------------------------------------
    FlagDef("components", COMPONENTS_KIND, _C, "Comma-separated components to run in this process: "
            "recommender, updater, admission-controller.", "components", addition=True,
            note="One process runs any subset; upstream ships one binary per component."),
    FlagDef("address", STRING, _C, "The address of the one metrics and health server of the process "
            "(/metrics, /healthz, /readyz, /health-check).", "address",
            note="Upstream has one per binary (recommender :8942, updater :8943, admission controller "
            ":8944); one process has one server, so the flag is accepted once and defaults to :8942."),
    FlagDef("feature-gates", FEATURE_GATES_KIND, _C, "Comma-separated Gate=true|false pairs. Gates:\n"
            + features.feature_gates_help(), None, default={}, default_text="", repeatable=True,
            note="Given more than once, the values merge (later pairs win). See docs/feature-gates.md.",
            setting_text="feature_gates"),
    FlagDef("clock", choice(*settings.CLOCK_SOURCES), _C, "Time source: real (the wall clock) or sim "
            "(follow the virtual clock the simulated cluster publishes at <apiserver>/sim/v1/clock).",
            "clock", addition=True, note="For `vpa sim` in another process; never needed in production."),
    FlagDef("kubeconfig", STRING, _C, "Path to a kubeconfig. Only required if out-of-cluster.",
            "common.kubeconfig", note="Empty: `$KUBECONFIG` if set (a list of files, merged as kubectl "
            "merges them), else `~/.kube/config` if it exists, else in-cluster configuration."),
    FlagDef("context", STRING, _C, "The kubeconfig context to use. Empty: its current-context.",
            "common.context", addition=True, note="As kubectl's --context."),
    FlagDef("kube-api-qps", FLOAT, _C, "QPS limit when making requests to the Kubernetes API server.",
            "common.kube_api_qps"),
    FlagDef("kube-api-burst", FLOAT, _C, "QPS burst limit when making requests to the Kubernetes API server.",
            "common.kube_api_burst"),
    FlagDef("kube-api-server-pacing", BOOL, _C, "When the API server's answers carry API Priority and "
            "Fairness headers (X-Kubernetes-PF-*), let the server pace requests: the --kube-api-qps bucket "
            "is lifted, at most --kube-api-burst requests are in flight (the window halves on a 429 and "
            "grows back by one per window of successes) and a 429's Retry-After holds every new request.",
            "common.kube_api_server_pacing", addition=True,
            note="false: the fixed --kube-api-qps/--kube-api-burst bucket throughout, as upstream."),
    FlagDef("profiling", BOOL, _C, "Serve profiling handlers on the metrics server: /debug/tasks (asyncio "
            "tasks) and /debug/stalls (the longest event-loop stalls and the code that ran in them).",
            "common.profiling"),
    FlagDef("event-loop-lag-interval", DURATION, _C, "How often the event-loop lag monitor samples "
            "(vpa_event_loop_lag_seconds). A stall between two samples is missed or seen shorter; 1ms times "
            "every stall to the millisecond, at the cost of waking the loop 1,000 times a second.",
            "common.event_loop_lag_interval_s", addition=True),
    FlagDef("vpa-object-namespace", STRING, _C, "Only watch VPA objects in this namespace (and only clean "
            "checkpoints there). Empty: all namespaces.", "common.vpa_object_namespace"),
    FlagDef("ignored-vpa-object-namespaces", STRING_LIST, _C, "Comma-separated namespaces whose VPA objects "
            "are ignored (and not garbage-collected). Exclusive with --vpa-object-namespace.",
            "common.ignored_vpa_object_namespaces"),
    FlagDef("recommendation-metrics", BOOL, _C, "Export each VPA's recommendation (target, lower and upper "
            "bound, uncapped target) and its pods' current requests and limits as per-container gauges on "
            "/metrics: vpa_recommendation_*, vpa_container_requests, vpa_container_limits.",
            "recommendation_metrics", addition=True,
            note="Replaces the VPA metrics kube-state-metrics dropped. Series of a VPA or container that "
            "is gone disappear; at most --recommendation-metrics-max-series series. See docs/metrics.md."),
    FlagDef("recommendation-metrics-max-series", INT, _C, "Upper bound on the series "
            "--recommendation-metrics exports; containers beyond it (in namespace, VPA, container "
            "order) are left out and counted in vpa_recommendation_metrics_dropped_series_total.",
            "recommendation_metrics_max_series", addition=True),
    # --- leader election --------------------------------------------------------------------------------
    FlagDef("leader-elect", BOOL, _L, "Gain leadership through a Lease before running the recommender's and "
            "the updater's loops. Enable it when running replicas for high availability.", None,
            default=False, note="Applies to both the recommender and the updater; each holds its own Lease.",
            setting_text="{recommender,updater}.leader_election.leader_elect"),
    FlagDef("leader-elect-lease-duration", DURATION, _L, "How long non-leaders wait after observing a "
            "renewal before they may take over an unrenewed lease.", None, default=15.0,
            setting_text="{recommender,updater}.leader_election.lease_duration_s"),
    FlagDef("leader-elect-renew-deadline", DURATION, _L, "How long the leader retries renewing before it "
            "stops leading. Must be less than the lease duration.", None, default=10.0,
            setting_text="{recommender,updater}.leader_election.renew_deadline_s"),
    FlagDef("leader-elect-retry-period", DURATION, _L, "Wait between attempts to acquire or renew "
            "leadership.", None, default=2.0,
            setting_text="{recommender,updater}.leader_election.retry_period_s"),
    FlagDef("leader-elect-resource-lock", STRING, _L, "Kind of lock object. Supported: 'leases'.", None,
            default="leases",
            setting_text="{recommender,updater}.leader_election.resource_lock"),
    FlagDef("leader-elect-resource-name", STRING, _L, "Name of the Lease. Sets the recommender's and the "
            "updater's lease name (see the per-component flags below).", None,
            default="", default_text='"vpa-recommender-lease" (recommender), "vpa-updater" (updater)',
            note="Upstream binds it per binary. Given here it sets both components' lease name, which "
            "only works when one of them runs in this process; with both, use the per-component flags.",
            setting_text="{recommender,updater}.leader_election.resource_name"),
    FlagDef("leader-elect-resource-namespace", STRING, _L, "Namespace of the Leases.", None,
            default="kube-system",
            setting_text="{recommender,updater}.leader_election.resource_namespace"),
    FlagDef("recommender-leader-elect-resource-name", STRING, _L, "Name of the recommender's Lease; "
            "overrides --leader-elect-resource-name.", None, default="",
            default_text='"vpa-recommender-lease"', addition=True,
            setting_text="recommender.leader_election.resource_name"),
    FlagDef("recommender-leader-elect-resource-namespace", STRING, _L, "Namespace of the recommender's "
            "Lease; overrides --leader-elect-resource-namespace.", None, default="",
            default_text='"kube-system"', addition=True,
            setting_text="recommender.leader_election.resource_namespace"),
    FlagDef("updater-leader-elect-resource-name", STRING, _L, "Name of the updater's Lease; overrides "
            "--leader-elect-resource-name.", None, default="", default_text='"vpa-updater"', addition=True,
            setting_text="updater.leader_election.resource_name"),
    FlagDef("updater-leader-elect-resource-namespace", STRING, _L, "Namespace of the updater's Lease; "
            "overrides --leader-elect-resource-namespace.", None, default="",
            default_text='"kube-system"', addition=True,
            setting_text="updater.leader_election.resource_namespace"),
    # --- recommender ------------------------------------------------------------------------------------
    FlagDef("recommender-name", STRING, _R, "Handle VPAs that name this recommender; 'default' also handles "
            "VPAs that name none. Don't run two recommenders with the same name. A comma-separated list "
            "hosts one recommender per name in this process.",
            "recommender.recommender_name",
            note="A comma-separated list is ours (upstream takes one name): each named recommender handles "
            "the VPAs that select it, sharing one loop, the caches, one metrics read and one Lease."),
    FlagDef("recommender-overrides", RECOMMENDER_OVERRIDES_KIND, _R, "Per-recommender settings when "
            "--recommender-name lists several: comma-separated NAME:FLAG=VALUE items, e.g. "
            "performance:target-cpu-percentile=0.95,performance:recommendation-margin-fraction=0.3. FLAG is "
            "one of the estimation flags of this group (percentiles, margin, minimums, confidence intervals, "
            "rounding, decay half-lives, memory aggregation, OOM bump-up, the integer-CPU post-processor, "
            "the max-allowed caps); VALUE has that flag's syntax.", None, default=(), default_text="",
            repeatable=True, addition=True, setting_text="recommender.overrides",
            note="Given more than once, the items add up (later ones win). An unknown NAME or a FLAG that "
            "cannot be set per recommender stops the process at startup."),
    FlagDef("recommender-interval", DURATION, _R, "How often metrics are fetched and recommendations "
            "computed.", "recommender.recommender_interval_s"),
    FlagDef("checkpoints-gc-interval", DURATION, _R, "How often orphaned checkpoints are garbage-collected.",
            "recommender.checkpoints_gc_interval_s"),
    FlagDef("checkpoints-timeout", DURATION, _R, "Deadline for writing checkpoints, from the start of the "
            "main loop.", "recommender.checkpoints_timeout_s"),
    FlagDef("storage", STRING, _R, "History source: 'prometheus' loads history from Prometheus at startup; "
            "anything else (including empty) uses checkpoints.", "recommender.storage"),
    FlagDef("memory-saver", BOOL, _R, "Only track pods that have an associated VPA.",
            "recommender.memory_saver"),
    FlagDef("update-worker-count", INT, _R, "Concurrent workers writing VPA statuses and checkpoints; also "
            "the minimum number of checkpoints written per loop. Raise --kube-api-qps/--kube-api-burst "
            "along with it.", "recommender.update_worker_count"),
    FlagDef("min-checkpoints", INT, _R, "DEPRECATED, no effect: use --update-worker-count.",
            "recommender.min_checkpoints"),
    FlagDef("recommendation-margin-fraction", FLOAT, _R, "Fraction of usage added as a safety margin to "
            "recommendations.", "recommender.recommendation_margin_fraction"),
    FlagDef("pod-recommendation-min-cpu-millicores", FLOAT, _R, "Minimum CPU recommendation for a pod, "
            "split across its containers.", "recommender.pod_recommendation_min_cpu_millicores"),
    FlagDef("pod-recommendation-min-memory-mb", FLOAT, _R, "Minimum memory recommendation for a pod in MiB "
            "(2^20 bytes, as upstream computes it), split across its containers.",
            "recommender.pod_recommendation_min_memory_mib"),
    FlagDef("target-cpu-percentile", FLOAT, _R, "CPU usage percentile of the target recommendation.",
            "recommender.target_cpu_percentile"),
    FlagDef("recommendation-lower-bound-cpu-percentile", FLOAT, _R, "CPU usage percentile of the lower "
            "bound.", "recommender.recommendation_lower_bound_cpu_percentile"),
    FlagDef("recommendation-upper-bound-cpu-percentile", FLOAT, _R, "CPU usage percentile of the upper "
            "bound.", "recommender.recommendation_upper_bound_cpu_percentile"),
    FlagDef("target-memory-percentile", FLOAT, _R, "Memory usage percentile of the target recommendation.",
            "recommender.target_memory_percentile"),
    FlagDef("recommendation-lower-bound-memory-percentile", FLOAT, _R, "Memory usage percentile of the "
            "lower bound.", "recommender.recommendation_lower_bound_memory_percentile"),
    FlagDef("recommendation-upper-bound-memory-percentile", FLOAT, _R, "Memory usage percentile of the "
            "upper bound.", "recommender.recommendation_upper_bound_memory_percentile"),
    FlagDef("confidence-interval-cpu", DURATION, _R, "History length that makes one unit of confidence for "
            "the CPU lower and upper bounds.", "recommender.confidence_interval_cpu_s"),
    FlagDef("confidence-interval-memory", DURATION, _R, "History length that makes one unit of confidence "
            "for the memory lower and upper bounds.", "recommender.confidence_interval_memory_s"),
    FlagDef("humanize-memory", BOOL, _R, "DEPRECATED: print memory recommendations in the largest fitting "
            "binary unit with up to 2 decimals. Use --round-memory-bytes.", "recommender.humanize_memory"),
    FlagDef("round-cpu-millicores", INT, _R, "Round CPU recommendations up to a multiple of this many "
            "millicores.", "recommender.round_cpu_millicores"),
    FlagDef("round-memory-bytes", INT, _R, "Round memory recommendations up to a multiple of this many "
            "bytes.", "recommender.round_memory_bytes"),
    FlagDef("cpu-histogram-decay-half-life", DURATION, _R, "Age at which a CPU usage sample has lost half "
            "of its weight.", "recommender.cpu_histogram_decay_half_life_s"),
    FlagDef("memory-histogram-decay-half-life", DURATION, _R, "Age at which a memory peak has lost half of "
            "its weight.", "recommender.memory_histogram_decay_half_life_s"),
    FlagDef("memory-aggregation-interval", DURATION, _R, "Length of the interval over which one memory "
            "peak is taken.", "recommender.memory_aggregation_interval_s"),
    FlagDef("memory-aggregation-interval-count", INT, _R, "Number of memory aggregation intervals in the "
            "memory window (window = interval × count).", "recommender.memory_aggregation_interval_count"),
    FlagDef("oom-bump-up-ratio", FLOAT, _R, "Memory multiplier applied after an OOM kill, unless the VPA "
            "overrides it.", "recommender.oom_bump_up_ratio"),
    FlagDef("oom-min-bump-up-bytes", FLOAT, _R, "Minimum memory increase after an OOM kill, unless the VPA "
            "overrides it (100 MiB).", "recommender.oom_min_bump_up_bytes"),
    FlagDef("cpu-integer-post-processor-enabled", BOOL, _R, "Enable the post-processor that rounds CPU up "
            "to whole cores for containers opted in by VPA annotation.",
            "recommender.cpu_integer_post_processor_enabled"),
    FlagDef("container-recommendation-max-allowed-cpu", CPU_QUANTITY, _R, "Maximum CPU recommended for a "
            "container; a VPA's own maxAllowed takes precedence.",
            "recommender.container_recommendation_max_allowed_cpu_millicores"),
    FlagDef("container-recommendation-max-allowed-memory", MEMORY_QUANTITY, _R, "Maximum memory recommended "
            "for a container; a VPA's own maxAllowed takes precedence.",
            "recommender.container_recommendation_max_allowed_memory_bytes"),
    FlagDef("cap-to-largest-node", BOOL, _R, "Cap every recommendation so the pod's summed targets fit the "
            "allocatable of the largest schedulable node (watches Nodes); the VPA gets the condition "
            "CappedToNode and a CappedToLargestNode event.", "recommender.cap_to_largest_node", addition=True,
            note="Ours. Applies after the max-allowed caps; needs list/watch on nodes."),
    FlagDef("detect-hpa-conflicts", BOOL, _R, "Watch autoscaling/v2 HPAs and give a VPA the condition "
            "ConflictingHPA (and an event) when an HPA scales its target on cpu or memory it controls.",
            "recommender.detect_hpa_conflicts", addition=True,
            note="Ours. Needs list/watch on horizontalpodautoscalers."),
    FlagDef("recommend-on-oom", BOOL, _R, "After an OOM kill, recompute and write the recommendations of the "
            "VPAs the pod belongs to at once (after --oom-reaction-delay) instead of at the next loop.",
            "recommender.recommend_on_oom", addition=True,
            note="Ours. Upstream applies OOMs at the next --recommender-interval."),
    FlagDef("oom-reaction-delay", DURATION, _R, "How long the prompt OOM pass waits for more OOM kills to "
            "join it.", "recommender.oom_reaction_delay_s", addition=True, note="Ours."),
    FlagDef("bounds-write-tolerance", FLOAT, _R, "Skip a VPA status write whose only changes are "
            "lowerBound or upperBound amounts that moved by at most this fraction of the amount in the "
            "status (0.01: 1%); targets, uncapped targets and conditions are always written as computed. "
            "0 writes every change.",
            "recommender.bounds_write_tolerance", addition=True,
            note="Ours. Upstream writes every change: one write per VPA per loop while its bounds widen or "
                 "narrow with its history."),
    FlagDef("use-external-metrics", BOOL, _R, "ALPHA. Read usage from an external metrics provider instead "
            "of metrics-server.", "recommender.use_external_metrics"),
    FlagDef("external-metrics-cpu-metric", STRING, _R, "ALPHA. External metric for CPU usage.",
            "recommender.external_metrics_cpu_metric"),
    FlagDef("external-metrics-memory-metric", STRING, _R, "ALPHA. External metric for memory usage.",
            "recommender.external_metrics_memory_metric"),
    FlagDef("prometheus-address", STRING, _R, "Where to reach Prometheus for history.",
            "recommender.prometheus.address"),
    FlagDef("prometheus-insecure", BOOL, _R, "Skip TLS verification for an https Prometheus address.",
            "recommender.prometheus.insecure"),
    FlagDef("prometheus-cadvisor-job-name", STRING, _R, "Prometheus job that scrapes cAdvisor metrics.",
            "recommender.prometheus.cadvisor_job_name"),
    FlagDef("history-length", PROMETHEUS_DURATION, _R, "How far back Prometheus is queried for history "
            "(Prometheus duration: 8d, 1w, 1h30m).", "recommender.prometheus.history_length_s",
            note="Validated at startup; upstream only parses it when --storage=prometheus."),
    FlagDef("history-resolution", PROMETHEUS_DURATION, _R, "Resolution of the history queries (Prometheus "
            "duration).", "recommender.prometheus.history_resolution_s",
            note="Validated at startup; upstream only parses it when --storage=prometheus."),
    FlagDef("history-cpu-metric", STRING, _R, "Prometheus CPU usage metric.",
            "recommender.prometheus.history_cpu_metric"),
    FlagDef("history-memory-metric", STRING, _R, "Prometheus memory usage metric.",
            "recommender.prometheus.history_memory_metric"),
    FlagDef("prometheus-query-timeout", DURATION, _R, "How long to wait before abandoning a Prometheus "
            "query.", "recommender.prometheus.query_timeout_s"),
    FlagDef("pod-label-prefix", STRING, _R, "Prefix of pod labels in the pod-labels metric.",
            "recommender.prometheus.pod_label_prefix"),
    FlagDef("metric-for-pod-labels", STRING, _R, "Metric carrying pod labels.",
            "recommender.prometheus.metric_for_pod_labels"),
    FlagDef("pod-namespace-label", STRING, _R, "Label holding the pod namespace.",
            "recommender.prometheus.pod_namespace_label"),
    FlagDef("pod-name-label", STRING, _R, "Label holding the pod name.",
            "recommender.prometheus.pod_name_label"),
    FlagDef("container-namespace-label", STRING, _R, "Label holding the container's namespace.",
            "recommender.prometheus.container_namespace_label"),
    FlagDef("container-pod-name-label", STRING, _R, "Label holding the container's pod name.",
            "recommender.prometheus.container_pod_name_label"),
    FlagDef("container-name-label", STRING, _R, "Label holding the container name.",
            "recommender.prometheus.container_name_label"),
    FlagDef("username", STRING, _R, "Prometheus basic-auth user.", "recommender.prometheus.username",
            note="Empty: `$PROMETHEUS_USERNAME`."),
    FlagDef("password", STRING, _R, "Prometheus basic-auth password.", "recommender.prometheus.password",
            note="Empty: `$PROMETHEUS_PASSWORD`."),
    FlagDef("prometheus-bearer-token", STRING, _R, "Bearer token for Prometheus.",
            "recommender.prometheus.bearer_token"),
    FlagDef("prometheus-bearer-token-file", STRING, _R, "File holding the bearer token for Prometheus "
            "(read at startup; wins over --prometheus-bearer-token).",
            "recommender.prometheus.bearer_token_file"),
    # --- updater ----------------------------------------------------------------------------------------
    FlagDef("updater-interval", DURATION, _U, "How often the updater runs.", "updater.updater_interval_s"),
    FlagDef("in-place-on-recommendation", BOOL, _U, "When the recommendation of an InPlaceOrRecreate or "
            "InPlace VPA changes, run a prompt pass that only resizes in place (every budget and rate limit "
            "applies; evictions wait for the next loop) instead of waiting for --updater-interval.",
            "updater.in_place_on_recommendation", addition=True,
            note="Ours. Upstream acts only every --updater-interval."),
    FlagDef("in-place-reaction-delay", DURATION, _U, "How long a prompt in-place pass waits for more "
            "recommendation changes to join it; also the least gap between two prompt passes.",
            "updater.in_place_reaction_delay_s", addition=True, note="Ours."),
    FlagDef("min-replicas", INT, _U, "Minimum number of live replicas for pods of a workload to be "
            "evicted; a VPA's minReplicas overrides it.", "updater.min_replicas"),
    FlagDef("eviction-tolerance", FLOAT, _U, "Fraction of a workload's replicas that may be evicted per "
            "loop, if more than one pod can be.", "updater.eviction_tolerance"),
    FlagDef("eviction-rate-limit", FLOAT, _U, "Pods that may be evicted (or resized in place) per second; "
            "0 or less disables the limiter.", "updater.eviction_rate_limit"),
    FlagDef("eviction-rate-burst", INT, _U, "Burst of pods that may be evicted.",
            "updater.eviction_rate_burst"),
    FlagDef("use-admission-controller-status", BOOL, _U, "Only act while the admission controller's status "
            "Lease is fresh.", "updater.use_admission_controller_status"),
    FlagDef("admission-controller-status-lease-name", STRING, _U, "Name of the admission controller's status "
            "Lease.", "updater.admission_controller_status_lease_name"),
    FlagDef("admission-controller-status-lease-namespace", STRING, _U, "Namespace of the admission "
            "controller's status Lease.", "updater.admission_controller_status_lease_namespace",
            default="", note=_ENV_NAMESPACE_NOTE),
    FlagDef("admission-controller-status-lease-timeout", DURATION, _U, "Age after which the admission "
            "controller's status counts as stale. Must be greater than 0.",
            "updater.admission_controller_status_lease_timeout_s"),
    FlagDef("concurrent-cpu-startup-boost-syncs", INT, _U, "Startup-boost removals (gate CPUStartupBoost) "
            "in flight at once. Must be greater than 0.", "updater.concurrent_cpu_startup_boost_syncs"),
    FlagDef("in-place-skip-disruption-budget", BOOL, _U, "In-place resizes that restart no container skip "
            "the replica-count and eviction-tolerance checks, so single-replica workloads and workloads "
            "below --min-replicas are resized. Set to false for upstream's behaviour.",
            "updater.in_place_skip_disruption_budget",
            note="DEVIATION: upstream's default is false (Helm's is true). Our default lets a "
            "disruption-free resize proceed below minReplicas; `=false` restores upstream. Evictions "
            "always respect the checks."),
    FlagDef("in-place-pod-level-resources", AUTO_BOOL, _U, "With feature gate PodLevelResources: whether the "
            "cluster resizes pod-level resources (spec.resources) in place, so that a pod's pod-level values "
            "are resized together with its containers. auto: read from the API server's version "
            "(Kubernetes 1.36 and later do; 1.35 only with its alpha InPlacePodLevelResourcesVerticalScaling "
            "gate, so set true there), and off for the rest of the process once the server refuses such a "
            "resize. Where off, a pod with pod-level resources that needs an update is evicted "
            "(InPlaceOrRecreate) or left alone (InPlace). true and false (and the bare flag) override the "
            "version.",
            "updater.in_place_pod_level_resources", addition=True),
    FlagDef("pod-update-threshold", FLOAT, _U, "Ignore updates whose priority (resource difference) is "
            "below this.", "updater.pod_update_threshold"),
    FlagDef("in-recommendation-bounds-eviction-lifetime-threshold", DURATION, _U, "Pods living at least this "
            "long may be updated even when their requests are within the recommended range.",
            "updater.in_recommendation_bounds_eviction_lifetime_threshold_s"),
    FlagDef("evict-after-oom-threshold", DURATION, _U, "Update a pod at once if it was OOM-killed within "
            "this time of starting, and that kill is within this time of now.",
            "updater.evict_after_oom_threshold_s"),
    FlagDef("resize-guard-backoff", DURATION, _U, "With feature gate ResizeGuard: how long decreases of a "
            "container are held after its first revert; each further revert doubles it, up to 24h. Must be "
            "greater than 0 and at most 24h.", "updater.resize_guard_backoff_s", addition=True),
    # --- admission controller ---------------------------------------------------------------------------
    FlagDef("client-ca-file", STRING, _A, "Path to the CA PEM file.", "admission.client_ca_file"),
    FlagDef("tls-cert-file", STRING, _A, "Path to the server certificate PEM file.",
            "admission.tls_cert_file"),
    FlagDef("tls-private-key", STRING, _A, "Path to the server key PEM file.", "admission.tls_private_key"),
    FlagDef("reload-cert", BOOL, _A, "Reload the certificate, key and CA when the files change.",
            "admission.reload_cert"),
    FlagDef("tls-ciphers", CIPHERS_KIND, _A, "Comma- or colon-separated Go cipher suite names to accept. "
            "Only used with --min-tls-version=tls1_2.", "admission.tls_ciphers"),
    FlagDef("min-tls-version", choice(*settings.TLS_VERSIONS), _A, "Minimum TLS version: tls1_2 or tls1_3.",
            "admission.min_tls_version"),
    FlagDef("port", INT, _A, "HTTPS port of the webhook.", "admission.port"),
    FlagDef("webhook-service", STRING, _A, "Service the webhook is registered under when not registering by "
            "URL (in namespace `$NAMESPACE`).", "admission.webhook_service"),
    FlagDef("register-by-url", BOOL, _A, "Register the webhook by URL (webhook-address:webhook-port) instead "
            "of by Service.", "admission.register_by_url"),
    FlagDef("webhook-address", STRING, _A, "Address registered with --register-by-url.",
            "admission.webhook_address"),
    FlagDef("webhook-port", STRING, _A, "Port registered with --register-by-url.", "admission.webhook_port"),
    FlagDef("webhook-timeout-seconds", INT, _A, "Seconds the API server waits for the webhook before "
            "failing.", "admission.webhook_timeout_seconds"),
    FlagDef("webhook-failure-policy-fail", BOOL, _A, "Register the webhook with failurePolicy Fail. Use "
            "with caution.", "admission.webhook_failure_policy_fail"),
    FlagDef("register-webhook", BOOL, _A, "Create or update the webhook configuration at startup.",
            "admission.register_webhook"),
    FlagDef("webhook-labels", LABELS_KIND, _A, "Labels of the webhook configuration, as "
            "key1:value1,key2:value2.", "admission.webhook_labels"),
    FlagDef("status-lease-name", STRING, _A, "Name of the status Lease this component renews.",
            "admission.status_lease_name"),
    FlagDef("status-lease-namespace", STRING, _A, "Namespace of the status Lease.",
            "admission.status_lease_namespace", default="", note=_ENV_NAMESPACE_NOTE),
    FlagDef("status-lease-update-interval", DURATION, _A, "How often the status Lease is renewed. Must be "
            "greater than 0.", "admission.status_lease_update_interval_s"),
    FlagDef("max-allowed-cpu-boost", CPU_QUANTITY, _A, "Maximum CPU a startup boost may give a container "
            "(gate CPUStartupBoost).", "admission.max_allowed_cpu_boost_millicores"),
    # --- logging ----------------------------------------------------------------------------------------
    FlagDef("v", LEVEL_KIND, _G, "Log verbosity.", "common.v"),
    FlagDef("log-format", choice(*settings.LOG_FORMATS), _G, "Log output: json, console, or auto (console "
            "on a terminal, JSON otherwise).", "common.log_format", addition=True),
    FlagDef("logtostderr", BOOL, _G, "Log to standard error instead of files.", "common.klog.logtostderr"),
    FlagDef("alsologtostderr", BOOL, _G, "Log to standard error as well as files (no effect when "
            "-logtostderr=true).", "common.klog.alsologtostderr"),
    FlagDef("stderrthreshold", SEVERITY_KIND, _G, "Log level threshold for writing to standard error.",
            "common.klog.stderrthreshold"),
    FlagDef("alsologtostderrthreshold", SEVERITY_KIND, _G, "Log level threshold for the copy "
            "-alsologtostderr=true writes to standard error (no effect when -logtostderr=true).",
            "common.klog.alsologtostderrthreshold"),
    FlagDef("legacy-stderr-threshold-behavior", BOOL, _G, "If true, -stderrthreshold is ignored when "
            "-logtostderr=true; if false, it filters standard error then too.",
            "common.klog.legacy_stderr_threshold_behavior"),
    FlagDef("log-file", STRING, _G, "If non-empty, use this log file (no effect when -logtostderr=true).",
            "common.klog.log_file"),
    FlagDef("log-file-max-size", UINT, _G, "Maximum size of a log file in megabytes; 0 is unlimited (no "
            "effect when -logtostderr=true).", "common.klog.log_file_max_size_mb"),
    FlagDef("log-dir", STRING, _G, "If non-empty, write log files in this directory (no effect when "
            "-logtostderr=true).", "common.klog.log_dir"),
    FlagDef("skip-headers", BOOL, _G, "Avoid header prefixes in log messages.", "common.klog.skip_headers"),
    FlagDef("one-output", BOOL, _G, "Only write logs to their native level (no effect when "
            "-logtostderr=true).", "common.klog.one_output"),
    FlagDef("add-dir-header", BOOL, _G, "Add the file directory to the header of log messages.",
            "common.klog.add_dir_header"),
    FlagDef("skip-log-headers", BOOL, _G, "Avoid headers when opening log files (no effect when "
            "-logtostderr=true).", "common.klog.skip_log_headers"),
    FlagDef("log-backtrace-at", TRACE_LOCATION_KIND, _G, "When logging hits line file:N, emit a stack "
            "trace.", "common.klog.log_backtrace_at", default_text=":0"),
    FlagDef("vmodule", VMODULE_KIND, _G, "Comma-separated list of pattern=N settings for file-filtered "
            "logging.", "common.klog.vmodule"),
)

REPLAY_OWN_FLAGS: Final[tuple[FlagDef, ...]] = (
    FlagDef("at", custom("float", _unix_seconds, lambda v: "" if v is None else parsing.STRING.format(v)),
            Group.REPLAY, "When recommendations are computed: Unix seconds or ISO-8601 "
            "(2026-01-08T00:00:00Z). Default: the last sample's time; before the first sample is an error.",
            None, default=None, default_text="", addition=True,
            setting_text="at"),
    FlagDef("every", custom("duration", _every, lambda v: "" if v is None else parsing.DURATION.format(v)),
            Group.REPLAY, "Also compute recommendations every DURATION (Go `30m` or Prometheus `1d` form) "
            "and output them as a series.", None, default=None, default_text="", addition=True,
            setting_text="every_s"),
    FlagDef("output", choice(*settings.REPLAY_OUTPUTS), Group.REPLAY, "Output format: json, yaml "
            "(quantities as in the VPA status), csv (plain cores and bytes, one row per time and container) "
            "or table; with --evaluate json, table or html (one self-contained page with plots).", None,
            default="json", addition=True,
            setting_text="output"),
    FlagDef("recommender", STRING, Group.REPLAY, "The built-in recommender algorithm to replay (see "
            "--list-recommenders). Empty: 'default' (upstream's); with --evaluate, every built-in one.", None,
            default="", default_text="", addition=True, setting_text="algorithm"),
    FlagDef("list-recommenders", BOOL, Group.REPLAY, "Print the built-in recommender names, one per line, "
            "and exit (no TRACE needed).", None, default=False, addition=True,
            setting_text="list_recommenders"),
    FlagDef("evaluate", BOOL, Group.REPLAY, "Replay over time, recomputing every --every (default 1h) from "
            "past samples only, and report slack, OOM and throttling proxies, updates and time to first "
            "recommendation per container and overall (docs/quality.md).", None, default=False,
            addition=True, setting_text="evaluate"),
    FlagDef("loop", choice("", "open", "closed"), Group.REPLAY, "With --evaluate: 'open' (the recommender "
            "sees only the trace) or 'closed' (each run of memory usage above the applied limit is fed back "
            "as an OOM kill, and the container restarts with the applied values). Empty: open.", None,
            default="", default_text="", addition=True, setting_text="closed_loop"),
    FlagDef("closed-loop", BOOL, Group.REPLAY, "With --evaluate: the same as --loop closed.", None,
            default=False, addition=True, setting_text="closed_loop"),
)

REPORT_FLAGS: Final[tuple[FlagDef, ...]] = (
    FlagDef("kubeconfig", STRING, Group.REPORT, "Path to a kubeconfig. Empty: $KUBECONFIG if set (a list of "
            "files, merged as kubectl merges them), else ~/.kube/config if it exists, else the in-cluster "
            "configuration.", None, default="", addition=True, setting_text="kubeconfig"),
    FlagDef("context", STRING, Group.REPORT, "The kubeconfig context to use. Empty: its current-context.",
            None, default="", addition=True, setting_text="context"),
    FlagDef("namespace", STRING, Group.REPORT, "Only report the VPAs of this namespace. Empty: all "
            "namespaces.", None, default="", addition=True, setting_text="namespace"),
    FlagDef("output", choice(*settings.REPORT_OUTPUTS), Group.REPORT, "Output format: table, json, csv, or "
            "html (a self-contained page with charts).", None, default="table", addition=True,
            setting_text="output"),
    FlagDef("output-file", STRING, Group.REPORT, "Write the report to this file instead of standard output.",
            None, default="", addition=True, setting_text="output_file"),
)

RUN_FLAGS_BY_NAME: Final[Mapping[str, FlagDef]] = {flag.name: flag for flag in RUN_FLAGS}

# `vpa replay` accepts its own flags and, of `vpa run`'s, only those that change the recommendation maths
# offline (estimation, aggregation, post-processing, --feature-gates for PerVPAConfig); flags about the
# cluster, storage, Prometheus, checkpoints or loops are refused, not silently ignored.
REPLAY_RECOMMENDER_FLAG_NAMES: Final = frozenset({
    "feature-gates", "recommendation-margin-fraction", "pod-recommendation-min-cpu-millicores",
    "pod-recommendation-min-memory-mb", "target-cpu-percentile", "recommendation-lower-bound-cpu-percentile",
    "recommendation-upper-bound-cpu-percentile", "target-memory-percentile",
    "recommendation-lower-bound-memory-percentile", "recommendation-upper-bound-memory-percentile",
    "confidence-interval-cpu", "confidence-interval-memory", "humanize-memory", "round-cpu-millicores",
    "round-memory-bytes", "cpu-histogram-decay-half-life", "memory-histogram-decay-half-life",
    "memory-aggregation-interval", "memory-aggregation-interval-count", "oom-bump-up-ratio",
    "oom-min-bump-up-bytes", "cpu-integer-post-processor-enabled", "container-recommendation-max-allowed-cpu",
    "container-recommendation-max-allowed-memory",
})
REPLAY_FLAGS: Final[tuple[FlagDef, ...]] = REPLAY_OWN_FLAGS + tuple(
    flag for flag in RUN_FLAGS if flag.name in REPLAY_RECOMMENDER_FLAG_NAMES
)
REPLAY_FLAGS_BY_NAME: Final[Mapping[str, FlagDef]] = {flag.name: flag for flag in REPLAY_FLAGS}


def _check_table() -> None:
    """Fail at import when the table is inconsistent: duplicate names or targets that do not exist."""
    seen: set[str] = set()
    for flag in RUN_FLAGS + REPLAY_OWN_FLAGS:
        if flag.name in seen:
            raise AssertionError(f"duplicate flag --{flag.name}")
        seen.add(flag.name)
        flag.default_value()


_check_table()
