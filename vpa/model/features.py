"""Feature gates: the upstream VPA's gates as data, and the resolved on/off value every component reads.

Owns: the gate table (name, default, stage, version introduced, components affected, effect), parsing
`--feature-gates=A=true,B=false` with Kubernetes component-base semantics (whitespace tolerated, unknown
gate → error naming it, non-boolean → error, `AllAlpha`/`AllBeta` switch every alpha/beta gate that is not
set explicitly, gates locked to their default refuse other values), and the frozen `FeatureGates` value.

Must not: keep global state. A `FeatureGates` value travels inside the settings to whoever needs it;
there is no `features.enabled()` global as upstream has. Pure stdlib.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final


class FeatureGateError(ValueError):
    """An invalid `--feature-gates` value; the message names the offending gate or pair."""


class Stage(enum.Enum):
    """Maturity of a gate, spelt as component-base prints it in `--feature-gates` help."""

    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = "GA"
    DEPRECATED = "DEPRECATED"


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One gate as data: what upstream's `pkg/features` declares about it."""

    name: str
    default: bool
    stage: Stage
    since: str
    """The VPA version the gate appeared in at its current stage."""
    components: tuple[str, ...]
    """Components whose behaviour the gate changes (`recommender`, `updater`, `admission-controller`)."""
    effect: str
    locked_to_default: bool = False
    meta: bool = False
    """True for `AllAlpha` / `AllBeta`, which set other gates rather than gate behaviour themselves."""


ALL_ALPHA: Final = "AllAlpha"
ALL_BETA: Final = "AllBeta"
CPU_STARTUP_BOOST: Final = "CPUStartupBoost"
IN_PLACE: Final = "InPlace"
NATIVE_SIDECAR: Final = "NativeSidecar"
PER_VPA_CONFIG: Final = "PerVPAConfig"
POD_LEVEL_RESOURCES: Final = "PodLevelResources"
VPA_INITIAL_DELAY: Final = "VPAInitialDelay"
IN_PLACE_CAPACITY_AWARE: Final = "InPlaceCapacityAware"
RESIZE_GUARD: Final = "ResizeGuard"
DAEMONSET_SCOPE: Final = "DaemonSetScope"

GATES: Final[tuple[GateSpec, ...]] = (
    GateSpec(
        name=ALL_ALPHA,
        default=False,
        stage=Stage.ALPHA,
        since="1.0",
        components=("admission-controller", "recommender", "updater"),
        effect="Sets every alpha gate that is not set explicitly in the same flag to this value.",
        meta=True,
    ),
    GateSpec(
        name=ALL_BETA,
        default=False,
        stage=Stage.BETA,
        since="1.0",
        components=("admission-controller", "recommender", "updater"),
        effect="Sets every beta gate that is not set explicitly in the same flag to this value.",
        meta=True,
    ),
    GateSpec(
        name=CPU_STARTUP_BOOST,
        default=False,
        stage=Stage.ALPHA,
        since="1.6",
        components=("admission-controller", "updater"),
        effect=(
            "CPU startup boost: the admission controller raises CPU of new pods as `startupBoost` asks, "
            "the updater removes the boost once the pod is ready. When off, the admission controller "
            "rejects VPAs that set `startupBoost` (unless the old object already had it)."
        ),
    ),
    GateSpec(
        name=IN_PLACE,
        default=False,
        stage=Stage.ALPHA,
        since="1.7",
        components=("admission-controller", "updater"),
        effect=(
            "Allows `updateMode: InPlace` (resize in place, never evict). When off, the admission "
            "controller rejects the mode and the updater skips such VPAs entirely."
        ),
    ),
    GateSpec(
        name=NATIVE_SIDECAR,
        default=False,
        stage=Stage.ALPHA,
        since="1.8",
        components=("admission-controller", "recommender", "updater"),
        effect=(
            "Native sidecars (AEP-8905): init containers with `restartPolicy: Always` are treated like "
            "regular containers: the recommender keeps their samples and OOMs and recommends for them, the "
            "admission controller sets their resources and lists them in `vpaObservedContainers`, the "
            "updater resizes them in place or evicts for them. Plain init containers stay excluded. When "
            "off, sidecars are left alone as upstream 1.7 does."
        ),
    ),
    GateSpec(
        name=PER_VPA_CONFIG,
        default=False,
        stage=Stage.ALPHA,
        since="1.5",
        components=("admission-controller", "recommender", "updater"),
        effect=(
            "Honours per-VPA `oomBumpUpRatio`, `oomMinBumpUp`, `memoryAggregationIntervalSeconds` and "
            "`memoryAggregationIntervalCount` (recommender) and `evictAfterOOMSeconds` (updater), and "
            "AEP-9970's `containerPolicies[].recommendationPercentiles: {cpu: {target: N}, memory: {target: "
            "N}}` (N from 1 to 100): that container's target is read at its own percentile of the same "
            "histogram; a target outside the recommender's bound percentiles sets the condition "
            "`ConfigInvalid` and the updater leaves the VPA's pods alone. When off, the admission controller "
            "rejects these fields (unless the old object already had them)."
        ),
    ),
    GateSpec(
        name=POD_LEVEL_RESOURCES,
        default=False,
        stage=Stage.ALPHA,
        since="1.8",
        components=("admission-controller", "updater"),
        effect=(
            "Pod-level resources (`spec.resources`, AEP-7571's gate name): the admission controller and "
            "the updater scale a pod's pod-level requests and limits with the container recommendations and "
            "keep the pod valid (pod-level requests at least the containers' aggregate, no regular "
            "container's limit above the pod-level limit); see docs/pod-level-resources.md. When off, such "
            "pods are admitted unchanged (with a `PodLevelResourcesUnchanged` event) and the updater skips "
            "them."
        ),
    ),
    GateSpec(
        name=VPA_INITIAL_DELAY,
        default=False,
        stage=Stage.ALPHA,
        since="1.9",
        components=("admission-controller", "recommender", "updater"),
        effect=(
            "AEP-9936 observation window: `spec.updatePolicy.initialDelaySeconds` (1 to 7776000) counted "
            "from the VPA's creationTimestamp. Until it elapses the updater neither evicts nor resizes the "
            "VPA's pods and the admission controller admits new pods unchanged (as `updateMode: Off`; a CPU "
            "startup boost still applies); recommendations are still published, and the VPA carries the "
            "condition `InitialDelayActive` (True / WindowActive, then False / WindowExpired). When off, the "
            "admission controller rejects the field (unless the old object already had it) and the "
            "components ignore it."
        ),
    ),
    GateSpec(
        name=IN_PLACE_CAPACITY_AWARE,
        default=False,
        stage=Stage.ALPHA,
        since="1.9",
        components=("updater",),
        effect=(
            "AEP-9726: before an in-place resize the updater checks the node's allocatable CPU and memory "
            "against the requests of the pods bound to it, and does not send a resize the kubelet would "
            "answer Infeasible or Deferred (nor one a 1.36+ API server would refuse with 403 NodeCapacity). "
            "It says so in an event `InPlaceResizeWouldNotFit` on the pod; `InPlace` pods wait, "
            "`InPlaceOrRecreate` pods fall back to eviction when the Recreate rules allow it."
        ),
    ),
    GateSpec(
        name=RESIZE_GUARD,
        default=False,
        stage=Stage.ALPHA,
        since="1.9",
        components=("updater",),
        effect=(
            "Ours, not an upstream proposal: a resize that hurts is undone. For VPAs annotated "
            "`vpa.dev/resize-guard: \"true\"`, the updater watches each pod it resized in place, and the pod "
            "that replaced one it evicted, for a guard "
            "window (`vpa.dev/resize-guard-window`, default 10m); a pod OOM-killed, restarting or no longer "
            "Ready in it is resized back where the change can have hurt (an OOM kill: that container's "
            "memory only; a restart or lost readiness: each resource the change lowered) to its values "
            "before the change (or the recommendation's upper bound if higher), every other value left as "
            "the pod has it, with a Warning event `ResizeReverted` whose message says revert, the VPA "
            "condition `ResizeReverted` and the metric `vpa_updater_resize_reverts_total{cause}`; that "
            "container's decreases (in place or by eviction) are then held back for 1 h "
            "(`--resize-guard-backoff`), doubling with each revert up to 24 h."
        ),
    ),
    GateSpec(
        name=DAEMONSET_SCOPE,
        default=False,
        stage=Stage.ALPHA,
        since="1.9",
        components=("admission-controller", "recommender", "updater"),
        effect=(
            "AEP-10031: a VPA targeting a DaemonSet with `spec.scope: <node label key>` gets one "
            "recommendation per value of that label in `status.groups[]` (`{scopeValue, "
            "containerRecommendations}`, targets only; `__absent__` for nodes without the label; "
            "`status.recommendation` is left empty); the admission controller (reading a new pod's node "
            "from its node affinity) and the updater apply each pod's group, and nothing where the group "
            "has no recommendation yet. When off, the admission controller rejects `spec.scope` (unless the "
            "old object already had it) and the components ignore it."
        ),
    ),
)

_BY_NAME: Final[dict[str, GateSpec]] = {gate.name: gate for gate in GATES}

_TRUE_WORDS: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE_WORDS: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool:
    """Go's `strconv.ParseBool`: 1 t T TRUE true True / 0 f F FALSE false False; anything else is an error."""
    if text in _TRUE_WORDS:
        return True
    if text in _FALSE_WORDS:
        return False
    raise ValueError(f"{text!r} is not a boolean (use true or false)")


def parse_feature_gate_pairs(text: str) -> dict[str, bool]:
    """Split `A=true, B=false` into `{"A": True, "B": False}` as component-base's `Set` does.

    Empty items (a trailing comma) are skipped; names and values are stripped of whitespace. Names are not
    checked here: `resolve_feature_gates` rejects unknown ones. A later pair for the same name wins.
    """
    pairs: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, separator, value = item.partition("=")
        name = name.strip()
        if not separator:
            raise FeatureGateError(f"missing bool value for {name}")
        value = value.strip()
        try:
            pairs[name] = parse_go_bool(value)
        except ValueError:
            raise FeatureGateError(
                f"invalid value of {name}={value}: not a boolean (use true or false)"
            ) from None
    return pairs


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Every known gate resolved to on or off, plus what was set explicitly (for logs and `--help`).

    Build with `FeatureGates.parse(...)`, `resolve_feature_gates(...)` or `FeatureGates()` (all defaults).
    """

    enabled_gates: frozenset[str] = frozenset(g.name for g in GATES if g.default and not g.meta)
    explicit: tuple[tuple[str, bool], ...] = ()
    """The `name=value` pairs given on the command line, sorted by name."""

    def __post_init__(self) -> None:
        unknown = sorted(name for name in self.enabled_gates if name not in _BY_NAME or _BY_NAME[name].meta)
        if unknown:
            raise FeatureGateError(f"unrecognized feature gate: {', '.join(unknown)}")

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """Resolve one `--feature-gates` value (`""` gives the defaults)."""
        return resolve_feature_gates(parse_feature_gate_pairs(text))

    def enabled(self, name: str) -> bool:
        """Whether gate `name` is on. An unknown name is a programming error (KeyError), not `False`."""
        gate = _BY_NAME.get(name)
        if gate is None or gate.meta:
            raise KeyError(f"unknown feature gate {name!r}")
        return name in self.enabled_gates

    @property
    def cpu_startup_boost(self) -> bool:
        return self.enabled(CPU_STARTUP_BOOST)

    @property
    def in_place(self) -> bool:
        return self.enabled(IN_PLACE)

    @property
    def per_vpa_config(self) -> bool:
        return self.enabled(PER_VPA_CONFIG)

    @property
    def native_sidecar(self) -> bool:
        return self.enabled(NATIVE_SIDECAR)

    @property
    def pod_level_resources(self) -> bool:
        return self.enabled(POD_LEVEL_RESOURCES)

    @property
    def vpa_initial_delay(self) -> bool:
        return self.enabled(VPA_INITIAL_DELAY)

    @property
    def in_place_capacity_aware(self) -> bool:
        return self.enabled(IN_PLACE_CAPACITY_AWARE)

    @property
    def resize_guard(self) -> bool:
        return self.enabled(RESIZE_GUARD)

    @property
    def daemonset_scope(self) -> bool:
        return self.enabled(DAEMONSET_SCOPE)

    def as_flag(self) -> str:
        """The explicit settings as a `--feature-gates` value, e.g. `InPlace=true,PerVPAConfig=true`."""
        return ",".join(f"{name}={'true' if value else 'false'}" for name, value in self.explicit)


def resolve_gate_values(pairs: Mapping[str, bool], gates: Iterable[GateSpec] = GATES) -> dict[str, bool]:
    """Resolve explicit `name → bool` pairs against a gate table, with component-base semantics.

    Explicit pairs win; `AllAlpha=v` / `AllBeta=v` then set every alpha / beta gate not named explicitly to
    `v` (gates locked to their default excepted); the rest keep their defaults. Returns every non-meta
    gate of the table. Raises FeatureGateError for an unknown gate or for a value other than the default
    on a gate locked to its default.
    """
    table = {gate.name: gate for gate in gates}
    for name in sorted(pairs):
        gate = table.get(name)
        if gate is None:
            known = ", ".join(sorted(table))
            raise FeatureGateError(f"unrecognized feature gate: {name} (known gates: {known})")
        if gate.locked_to_default and pairs[name] != gate.default:
            raise FeatureGateError(
                f"cannot set feature gate {name} to {str(pairs[name]).lower()}, "
                f"feature is locked to {str(gate.default).lower()}"
            )
    meta_values = {Stage.ALPHA: pairs.get(ALL_ALPHA), Stage.BETA: pairs.get(ALL_BETA)}
    values: dict[str, bool] = {}
    for gate in table.values():
        if gate.meta:
            continue
        if gate.name in pairs:
            values[gate.name] = pairs[gate.name]
        else:
            meta_value = meta_values.get(gate.stage)
            values[gate.name] = gate.default if meta_value is None or gate.locked_to_default else meta_value
    return values


def resolve_feature_gates(pairs: Mapping[str, bool]) -> FeatureGates:
    """Resolve explicit pairs (as `parse_feature_gate_pairs` returns them) into a `FeatureGates` value."""
    values = resolve_gate_values(pairs)
    return FeatureGates(
        enabled_gates=frozenset(name for name, on in values.items() if on),
        explicit=tuple(sorted(pairs.items())),
    )


def gate_spec(name: str) -> GateSpec:
    """The table entry for `name` (KeyError if unknown)."""
    return _BY_NAME[name]


def feature_gates_help() -> str:
    """The gate list of `--feature-gates` help, as component-base prints it."""
    lines = []
    for gate in sorted(GATES, key=lambda g: g.name):
        stage = "" if gate.stage is Stage.GA else f"{gate.stage.value} - "
        lines.append(f"{gate.name}=true|false ({stage}default={str(gate.default).lower()})")
    return "\n".join(lines)
