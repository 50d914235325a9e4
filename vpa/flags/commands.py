"""From argv and an environment mapping to `RunSettings` / `ReplaySettings` / `ReportSettings`.

Owns: applying the flag table to a parsed command line, the environment fallbacks upstream and kubectl have
(`$KUBECONFIG`, `$HOME` for `~/.kube/config`, `$NAMESPACE` for the status leases and the webhook Service,
`$PROMETHEUS_USERNAME` and `$PROMETHEUS_PASSWORD`), the precedence of the per-component leader-election
flags over the shared ones, deprecation warnings, and turning every rejection into one `UsageError` line.

Must not: read `os.environ` or `sys.argv` (the caller passes them, so tests are hermetic), print, or exit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vpa.flags import parsing, table
from vpa.model import features, settings


class UsageError(Exception):
    """A command line that cannot run; `str()` is one line naming the flag and the value."""


class HelpRequested(Exception):
    """`-h` / `--help` was given."""


def _parse(
    argv: Sequence[str], flags: Sequence[table.FlagDef]
) -> tuple[dict[str, object], parsing.ParsedArgs]:
    specs = {flag.name: flag.spec for flag in flags}
    try:
        parsed = parsing.parse_go_flags(argv, specs)
    except parsing.FlagError as error:
        raise UsageError(str(error)) from None
    if parsed.help_requested:
        raise HelpRequested
    values = {flag.name: parsed.values.get(flag.name, flag.default_value()) for flag in flags}
    return values, parsed


def _targets(values: Mapping[str, object], flags: Sequence[table.FlagDef]) -> dict[str, object]:
    return {flag.target: values[flag.name] for flag in flags if flag.target is not None}


def _section(targets: Mapping[str, object], prefix: str) -> dict[str, Any]:
    """Fields directly under `prefix`: `"recommender."` gives `recommender_interval_s`, not nested ones."""
    return {
        path[len(prefix):]: value
        for path, value in targets.items()
        if path.startswith(prefix) and "." not in path[len(prefix):]
    }


def _feature_gates(values: Mapping[str, object]) -> features.FeatureGates:
    merged: dict[str, bool] = {}
    given = values["feature-gates"]
    for pairs in given if isinstance(given, list) else [given]:
        assert isinstance(pairs, dict)
        merged.update(pairs)
    return features.resolve_feature_gates(merged)


def _env_namespace(env: Mapping[str, str]) -> str:
    return env.get("NAMESPACE") or settings.DEFAULT_NAMESPACE


def default_kubeconfig(env: Mapping[str, str]) -> str:
    """`~/.kube/config` as kubectl finds it: under `$HOME` (empty without one)."""
    home = env.get("HOME", "")
    return f"{home.rstrip('/')}/.kube/config" if home else ""


def _apply_env(targets: dict[str, object], env: Mapping[str, str]) -> None:
    """Upstream's environment fallbacks for flags left empty."""
    fallbacks = {
        "common.kubeconfig_env": env.get("KUBECONFIG", ""),
        "common.default_kubeconfig": default_kubeconfig(env),
        "recommender.prometheus.username": env.get("PROMETHEUS_USERNAME", ""),
        "recommender.prometheus.password": env.get("PROMETHEUS_PASSWORD", ""),
        "updater.admission_controller_status_lease_namespace": _env_namespace(env),
        "admission.status_lease_namespace": _env_namespace(env),
    }
    for path, fallback in fallbacks.items():
        if path in targets and targets[path] == "":
            targets[path] = fallback


def _lease(
    values: Mapping[str, object], component: str, default_name: str
) -> settings.LeaderElectionSettings:
    """A component's lease: its own flag, else the shared `--leader-elect-*` flag, else its default."""
    name = values[f"{component}-leader-elect-resource-name"] or values["leader-elect-resource-name"]
    namespace = (
        values[f"{component}-leader-elect-resource-namespace"] or values["leader-elect-resource-namespace"]
    )
    return settings.LeaderElectionSettings(
        leader_elect=bool(values["leader-elect"]),
        lease_duration_s=float(str(values["leader-elect-lease-duration"])),
        renew_deadline_s=float(str(values["leader-elect-renew-deadline"])),
        retry_period_s=float(str(values["leader-elect-retry-period"])),
        resource_lock=str(values["leader-elect-resource-lock"]),
        resource_name=str(name or default_name),
        resource_namespace=str(namespace),
    )


def _recommender_overrides(
    values: Mapping[str, object], flags: Mapping[str, table.FlagDef]
) -> tuple[tuple[str, str, object], ...]:
    """`--recommender-overrides` items → `(name, settings field, value)`, each VALUE parsed by its flag's
    kind. Whether NAME is hosted is checked by the settings (they know `--recommender-name`)."""
    given = values.get("recommender-overrides") or []
    out: list[tuple[str, str, object]] = []
    for items in given if isinstance(given, list) else [given]:
        assert isinstance(items, tuple)
        for name, flag_name, text in items:
            flag = flags.get(flag_name)
            field = (flag.target or "").removeprefix("recommender.") if flag is not None else ""
            if flag is None or field not in settings.OVERRIDABLE_RECOMMENDER_FIELDS:
                raise UsageError(
                    f'invalid value "{name}:{flag_name}={text}" for flag --recommender-overrides: '
                    f"--{flag_name} cannot be set per recommender"
                )
            try:
                value = flag.kind.parse(text)
            except ValueError as error:
                reason = getattr(error, "reason", None) or str(error)
                raise UsageError(
                    f'invalid value "{name}:{flag_name}={text}" for flag --recommender-overrides: {reason}'
                ) from None
            out.append((name, field, value))
    return tuple(out)


def _recommender(
    targets: Mapping[str, object],
    lease: settings.LeaderElectionSettings,
    overrides: tuple[tuple[str, str, object], ...] = (),
) -> settings.RecommenderSettings:
    base = settings.RecommenderSettings(
        prometheus=settings.PrometheusSettings(**_section(targets, "recommender.prometheus.")),
        leader_election=lease,
        overrides=overrides,
        **_section(targets, "recommender."),
    )
    for name in base.recommender_names:
        base.for_name(name)  # an override that makes a recommender's settings invalid fails at startup
    return base


def _warnings(parsed: parsing.ParsedArgs) -> tuple[str, ...]:
    warnings = []
    if parsed.given("min-checkpoints"):
        warnings.append("--min-checkpoints is deprecated and has no effect; use --update-worker-count")
    if parsed.values.get("humanize-memory"):
        warnings.append("--humanize-memory is deprecated and will be removed; use --round-memory-bytes")
    return tuple(warnings)


def parse_run_args(argv: Sequence[str], env: Mapping[str, str]) -> settings.RunSettings:
    """`vpa run` flags → RunSettings. Raises UsageError (one line) or HelpRequested."""
    values, parsed = _parse(argv, table.RUN_FLAGS)
    if parsed.positionals:
        raise UsageError(f'unexpected argument "{parsed.positionals[0]}": vpa run takes only flags')
    targets = _targets(values, table.RUN_FLAGS)
    targets.setdefault("common.kubeconfig_env", "")
    targets.setdefault("common.default_kubeconfig", "")
    _apply_env(targets, env)
    try:
        return settings.RunSettings(
            components=values["components"],  # type: ignore[arg-type]
            common=settings.CommonSettings(
                klog=settings.KlogSettings(**_section(targets, "common.klog.")),
                **_section(targets, "common."),
            ),
            feature_gates=_feature_gates(values),
            address=str(values["address"]),
            clock=values["clock"],  # type: ignore[arg-type]
            recommender=_recommender(
                targets,
                _lease(values, "recommender", "vpa-recommender-lease"),
                _recommender_overrides(values, table.RUN_FLAGS_BY_NAME),
            ),
            updater=settings.UpdaterSettings(
                leader_election=_lease(values, "updater", "vpa-updater"),
                **_section(targets, "updater."),
            ),
            admission=settings.AdmissionSettings(
                webhook_service_namespace=_env_namespace(env),
                **_section(targets, "admission."),
            ),
            warnings=_warnings(parsed),
            recommendation_metrics=bool(values["recommendation-metrics"]),
            recommendation_metrics_max_series=int(str(values["recommendation-metrics-max-series"])),
        )
    except settings.SettingsError as error:
        raise UsageError(str(error)) from None


def _refuse_run_only_flags(argv: Sequence[str]) -> None:
    """A `vpa run` flag that means nothing offline (`--storage`, `--prometheus-address`, ...) is a usage
    error that says so, rather than the parser's generic "not defined"."""
    for arg in argv:
        if arg == "--" or not arg.startswith("-"):
            if arg == "--":
                return
            continue
        name = arg.lstrip("-").partition("=")[0]
        if name in table.RUN_FLAGS_BY_NAME and name not in table.REPLAY_FLAGS_BY_NAME:
            raise UsageError(
                f"--{name} is a vpa run flag with no effect offline: vpa replay reads only TRACE and takes "
                "the flags of the recommendation maths (see vpa replay --help)"
            )


def parse_replay_args(argv: Sequence[str], env: Mapping[str, str]) -> settings.ReplaySettings:
    """`vpa replay TRACE [--at T] [--every D] [--output FORMAT] [recommender flags]` → ReplaySettings."""
    _refuse_run_only_flags(argv)
    values, parsed = _parse(argv, table.REPLAY_FLAGS)
    if values["list-recommenders"]:
        return settings.ReplaySettings(trace_path="", list_recommenders=True)
    if len(parsed.positionals) != 1:
        if not parsed.positionals:
            raise UsageError("missing TRACE: vpa replay TRACE [flags]")
        raise UsageError(f'unexpected argument "{parsed.positionals[1]}": vpa replay takes one TRACE')
    targets = _targets(values, table.REPLAY_FLAGS)
    _apply_env(targets, env)
    loop = values["loop"]
    if loop == "open" and values["closed-loop"]:
        raise UsageError("--loop open contradicts --closed-loop")
    if loop and not values["evaluate"]:
        raise UsageError("--loop needs --evaluate")
    try:
        return settings.ReplaySettings(
            trace_path=parsed.positionals[0],
            at=values["at"],  # type: ignore[arg-type]
            every_s=values["every"],  # type: ignore[arg-type]
            output=values["output"],  # type: ignore[arg-type]
            algorithm=values["recommender"],  # type: ignore[arg-type]
            evaluate=values["evaluate"],  # type: ignore[arg-type]
            closed_loop=bool(values["closed-loop"]) or loop == "closed",
            recommender=_recommender(targets, settings.LeaderElectionSettings()),
            feature_gates=_feature_gates(values),
        )
    except settings.SettingsError as error:
        raise UsageError(str(error)) from None


def parse_report_args(argv: Sequence[str], env: Mapping[str, str]) -> settings.ReportSettings:
    """`vpa report [--kubeconfig PATH] [--namespace NS] [--output table|json|csv|html] [--output-file F]`."""
    values, parsed = _parse(argv, table.REPORT_FLAGS)
    if parsed.positionals:
        raise UsageError(f'unexpected argument "{parsed.positionals[0]}": vpa report takes only flags')
    try:
        return settings.ReportSettings(
            kubeconfig=str(values["kubeconfig"]),
            kubeconfig_env=env.get("KUBECONFIG", ""),
            default_kubeconfig=default_kubeconfig(env),
            context=str(values["context"]),
            namespace=str(values["namespace"]),
            output=values["output"],  # type: ignore[arg-type]
            output_file=str(values["output-file"]),
        )
    except settings.SettingsError as error:
        raise UsageError(str(error)) from None
