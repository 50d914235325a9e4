"""The VerticalPodAutoscaler as vpa's code uses it: frozen, slotted views of spec, status and metadata.

Owns: the enums of the v1 API (`UpdateMode`, `ContainerScalingMode`, `ControlledValues`), the spec pieces
(`TargetRef`, `UpdatePolicy`, `ResourcePolicy`, `ContainerResourcePolicy`, `StartupBoost`), the status
pieces (`Recommendation`, `Condition`, `VpaStatus`), `VpaView`, and the defaults upstream applies when a
field is absent (`UpdatePolicy.effective_mode`, `ContainerResourcePolicy.effective_controlled_*`,
`ResourcePolicy.for_container`, `VpaView.handled_by`). Every CPU/memory amount is a `Resources`.

Must not: parse raw API JSON (that is `vpa.kube.converting`), validate objects for admission (that is
logic), read feature gates, or import anything outside the standard library and `vpa.model`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from vpa.model.resources import CPU, MEMORY, Resources

DEFAULT_CONTAINER_POLICY_NAME: Final = "*"  # upstream DefaultContainerResourcePolicy
VPA_API_VERSION: Final = "autoscaling.k8s.io/v1"
"""apiVersion of VerticalPodAutoscaler objects (Events name it in `involvedObject`)."""
DEFAULT_RECOMMENDER_NAME: Final = "default"
COST_AWARE_RECOMMENDER_NAME: Final = "cost-aware"
MOVING_WINDOW_RECOMMENDER_NAME: Final = "moving-window"
OOM_AVERSE_RECOMMENDER_NAME: Final = "oom-averse"
RAISE_ON_OVERRUN_RECOMMENDER_NAME: Final = "raise-on-overrun"
# The built-in recommender algorithms, `default` (upstream's) first; see `vpa.logic.recommender.cost_aware`.
BUILTIN_RECOMMENDERS: Final[tuple[str, ...]] = (DEFAULT_RECOMMENDER_NAME, COST_AWARE_RECOMMENDER_NAME,
                                                MOVING_WINDOW_RECOMMENDER_NAME, OOM_AVERSE_RECOMMENDER_NAME,
                                                RAISE_ON_OVERRUN_RECOMMENDER_NAME)
DEFAULT_CONTROLLED_RESOURCES: Final[tuple[str, ...]] = (CPU, MEMORY)
NO_RESOURCES: Final = Resources()


class UpdateMode(enum.StrEnum):
    """`spec.updatePolicy.updateMode`. `Auto` is deprecated and behaves like `Recreate`."""

    OFF = "Off"
    INITIAL = "Initial"
    RECREATE = "Recreate"
    IN_PLACE_OR_RECREATE = "InPlaceOrRecreate"
    IN_PLACE = "InPlace"
    AUTO = "Auto"

    @classmethod
    def parse(cls, text: str) -> UpdateMode:
        """The enum member for `text`.

        Raises ValueError listing the accepted values.
        """
        try:
            return cls(text)
        except ValueError:
            accepted = ", ".join(member.value for member in cls)
            raise ValueError(f"unknown update mode {text!r} (expected one of {accepted})") from None

    @property
    def evicts(self) -> bool:
        """True for the modes in which the updater may evict running pods."""
        return self in (UpdateMode.RECREATE, UpdateMode.AUTO, UpdateMode.IN_PLACE_OR_RECREATE)

    @property
    def resizes_in_place(self) -> bool:
        return self in (UpdateMode.IN_PLACE_OR_RECREATE, UpdateMode.IN_PLACE)

    @property
    def updates_running_pods(self) -> bool:
        """True for the modes the updater acts on (everything but `Off` and `Initial`)."""
        return self not in (UpdateMode.OFF, UpdateMode.INITIAL)


class ContainerScalingMode(enum.StrEnum):
    """`containerPolicies[].mode`; absent means `Auto`."""

    AUTO = "Auto"
    OFF = "Off"


class ControlledValues(enum.StrEnum):
    """`containerPolicies[].controlledValues`; absent means `RequestsAndLimits`."""

    REQUESTS_AND_LIMITS = "RequestsAndLimits"
    REQUESTS_ONLY = "RequestsOnly"


class StartupBoostType(enum.StrEnum):
    """The values of `startupBoost.cpu.type` the CRD allows (the view keeps the raw string)."""

    FACTOR = "Factor"
    QUANTITY = "Quantity"


class EvictionChangeRequirement(enum.StrEnum):
    """`evictionRequirements[].changeRequirement` values the CRD allows (the view keeps the raw string)."""

    TARGET_HIGHER_THAN_REQUESTS = "TargetHigherThanRequests"
    TARGET_LOWER_THAN_REQUESTS = "TargetLowerThanRequests"


class ConditionType(enum.StrEnum):
    """VPA condition types declared by upstream (`types.go`)."""

    RECOMMENDATION_PROVIDED = "RecommendationProvided"
    LOW_CONFIDENCE = "LowConfidence"
    NO_PODS_MATCHED = "NoPodsMatched"
    FETCHING_HISTORY = "FetchingHistory"
    CONFIG_DEPRECATED = "ConfigDeprecated"
    CONFIG_UNSUPPORTED = "ConfigUnsupported"


INITIAL_DELAY_ACTIVE_CONDITION: Final = "InitialDelayActive"
"""AEP-9936: True while `initialDelaySeconds` has not elapsed since creation (reason `WindowActive`), False
after (`WindowExpired`)."""
CONFIG_INVALID_CONDITION: Final = "ConfigInvalid"
"""AEP-9970: True while a per-container target percentile lies outside the recommender's bound
percentiles; recommendations are still published, the updater leaves the VPA's pods alone."""
RESIZE_REVERTED_CONDITION: Final = "ResizeReverted"
"""Ours (gate `ResizeGuard`): the last resize that hurt a pod and was undone: pod, cause, values."""

CAPPED_TO_NODE_CONDITION: Final = "CappedToNode"
"""Ours (`--cap-to-largest-node`): True while the published recommendation is capped to fit the largest
schedulable node. Admission and the updater then never lift values above the published ones."""


# --- spec ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetRef:
    """`spec.targetRef` (a CrossVersionObjectReference). `api_version` may be "" (upstream ignores it for
    well-known kinds)."""

    api_version: str
    kind: str
    name: str

    @property
    def group(self) -> str:
        """The API group of `api_version` ("" for the core group): `apps/v1` → `apps`."""
        group, slash, _ = self.api_version.rpartition("/")
        return group if slash else ""

    def __str__(self) -> str:
        # The form upstream uses in ConfigUnsupported messages: `<apiVersion>.<Kind>/<name>`.
        return f"{self.api_version}.{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class EvictionRequirement:
    """One `spec.updatePolicy.evictionRequirements[]` entry: any listed resource may satisfy it."""

    resources: tuple[str, ...]
    change_requirement: str


@dataclass(frozen=True, slots=True)
class UpdatePolicy:
    """`spec.updatePolicy`. `update_mode` None means the field was absent or empty."""

    update_mode: UpdateMode | None = None
    min_replicas: int | None = None
    eviction_requirements: tuple[EvictionRequirement, ...] = ()
    evict_after_oom_s: int | None = None
    initial_delay_s: int | None = None
    """AEP-9936 `initialDelaySeconds` (gate `VPAInitialDelay`): no actuation until creation + this."""

    @property
    def effective_mode(self) -> UpdateMode:
        """The mode upstream acts on (`GetUpdateMode`): unset → `Recreate`."""
        return self.update_mode if self.update_mode is not None else UpdateMode.RECREATE


@dataclass(frozen=True, slots=True)
class StartupBoost:
    """`startupBoost.cpu` (pod level or per container). `type` is the raw string ("" when absent; upstream
    code treats "" as `Factor`), so admission validation can report unknown types."""

    type: str
    factor: int | None = None
    quantity_millicores: int | None = None
    duration_s: int = 0

    @property
    def effective_type(self) -> str:
        return self.type or StartupBoostType.FACTOR.value


@dataclass(frozen=True, slots=True)
class ContainerResourcePolicy:
    """One `spec.resourcePolicy.containerPolicies[]` entry. None means "absent": the defaults apply."""

    container_name: str
    mode: ContainerScalingMode | None = None
    min_allowed: Resources = NO_RESOURCES
    max_allowed: Resources = NO_RESOURCES
    controlled_resources: tuple[str, ...] | None = None
    controlled_values: ControlledValues | None = None
    oom_bump_up_ratio: float | None = None
    oom_min_bump_up_bytes: int | None = None
    memory_aggregation_interval_s: int | None = None
    memory_aggregation_interval_count: int | None = None
    startup_boost: StartupBoost | None = None
    target_cpu_percentile: int | None = None
    """AEP-9970 `recommendationPercentiles.cpu.target` (1..100; gate `PerVPAConfig`)."""
    target_memory_percentile: int | None = None
    """AEP-9970 `recommendationPercentiles.memory.target` (1..100; gate `PerVPAConfig`)."""

    @property
    def effective_controlled_resources(self) -> tuple[str, ...]:
        """`controlledResources`, defaulting to cpu and memory when absent (an explicit [] stays empty)."""
        if self.controlled_resources is None:
            return DEFAULT_CONTROLLED_RESOURCES
        return self.controlled_resources

    @property
    def effective_controlled_values(self) -> ControlledValues:
        if self.controlled_values is None:
            return ControlledValues.REQUESTS_AND_LIMITS
        return self.controlled_values

    @property
    def is_off(self) -> bool:
        """True when the policy switches the container off (no recommendation, no updates)."""
        return self.mode is ContainerScalingMode.OFF

    def controls(self, resource: str) -> bool:
        return resource in self.effective_controlled_resources


@dataclass(frozen=True, slots=True)
class ResourcePolicy:
    """`spec.resourcePolicy`; empty when absent."""

    container_policies: tuple[ContainerResourcePolicy, ...] = ()

    def for_container(self, container_name: str) -> ContainerResourcePolicy | None:
        """The policy for a container: the exact name wins, else the `*` entry, else None (upstream
        `GetContainerResourcePolicy`; with duplicate names the first entry wins)."""
        wildcard: ContainerResourcePolicy | None = None
        for policy in self.container_policies:
            if policy.container_name == container_name:
                return policy
            if wildcard is None and policy.container_name == DEFAULT_CONTAINER_POLICY_NAME:
                wildcard = policy
        return wildcard


# --- status -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecommendedContainerResources:
    """`status.recommendation.containerRecommendations[]`."""

    container_name: str
    target: Resources
    lower_bound: Resources = NO_RESOURCES
    upper_bound: Resources = NO_RESOURCES
    uncapped_target: Resources = NO_RESOURCES


@dataclass(frozen=True, slots=True)
class Recommendation:
    """`status.recommendation`. Containers are kept in the order written (upstream sorts them by name)."""

    containers: tuple[RecommendedContainerResources, ...] = ()

    def for_container(self, container_name: str) -> RecommendedContainerResources | None:
        for container in self.containers:
            if container.container_name == container_name:
                return container
        return None

    def is_empty(self) -> bool:
        return not self.containers


@dataclass(frozen=True, slots=True)
class Condition:
    """`status.conditions[]`. `status` is `True`, `False` or `Unknown`; times are Unix seconds."""

    type: str
    status: str
    last_transition_time: float | None = None
    reason: str = ""
    message: str = ""

    @property
    def is_true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True, slots=True)
class RecommendationGroup:
    """AEP-10031 `status.groups[]`: the recommendation for the pods on nodes whose scope label has
    `scope_value` (`__absent__` for nodes without the label). Targets only, as the AEP compacts them."""

    scope_value: str
    containers: tuple[RecommendedContainerResources, ...] = ()


@dataclass(frozen=True, slots=True)
class VpaStatus:
    recommendation: Recommendation | None = None
    conditions: tuple[Condition, ...] = ()
    observed_generation: int | None = None
    groups: tuple[RecommendationGroup, ...] = ()
    """AEP-10031 (gate `DaemonSetScope`): one recommendation per node-label value of a scoped DaemonSet."""

    def condition(self, condition_type: str) -> Condition | None:
        for condition in self.conditions:
            if condition.type == condition_type:
                return condition
        return None


# --- the object ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VpaView:
    """A VerticalPodAutoscaler as read from the API.

    `labels` and `annotations` are read-only by contract (they may be shared between views).
    `update_policy_set` tells whether `spec.updatePolicy` was present at all (admission defaults it when not).
    `fractional_quantity_fields` lists the spec fields whose quantity was not a whole number of millicores
    (CPU) or bytes (memory): the view holds them rounded up, as upstream does, and admission rejects them.
    """

    namespace: str
    name: str
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    target_ref: TargetRef | None = None
    update_policy: UpdatePolicy = UpdatePolicy()
    resource_policy: ResourcePolicy = ResourcePolicy()
    recommenders: tuple[str, ...] = ()
    startup_boost: StartupBoost | None = None
    status: VpaStatus = VpaStatus()
    creation_timestamp: float = 0.0
    deletion_timestamp: float | None = None
    update_policy_set: bool = False
    fractional_quantity_fields: tuple[str, ...] = ()
    scope: str = ""
    """AEP-10031 `spec.scope` (gate `DaemonSetScope`): a node label key; "" = unscoped."""

    @property
    def key(self) -> str:
        """`namespace/name`, the cache key."""
        return f"{self.namespace}/{self.name}"

    @property
    def effective_mode(self) -> UpdateMode:
        return self.update_policy.effective_mode

    @property
    def recommendation(self) -> Recommendation | None:
        return self.status.recommendation

    def handled_by(self, recommender_name: str) -> bool:
        """True if the recommender called `recommender_name` should process this VPA (spec §3.4): an empty
        `recommenders` list belongs to `default` only."""
        if not self.recommenders:
            return recommender_name == DEFAULT_RECOMMENDER_NAME
        return recommender_name in self.recommenders

    def has_startup_boost(self) -> bool:
        """True when a CPU startup boost is configured at pod level or for any container."""
        return self.startup_boost is not None or any(
            policy.startup_boost is not None for policy in self.resource_policy.container_policies
        )

    def container_policy(self, container_name: str) -> ContainerResourcePolicy | None:
        return self.resource_policy.for_container(container_name)

    def is_stronger_than(self, other: VpaView) -> bool:
        """Upstream's tie-break between VPAs matching one pod: the older wins, then the smaller name."""
        return (self.creation_timestamp, self.name) < (other.creation_timestamp, other.name)
