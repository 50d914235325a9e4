"""The recommender's pure core: cluster state in, one VPA's `status.recommendation` out.

Owns: `RecommenderConfig` (aggregation, estimation and post-processing settings, mapped from the
recommender flags and feature gates), `containers_to_recommend` (drop `mode: Off` containers and those
without samples, memory only for those with an OOM but no CPU sample; apply the VPA's container policy,
with gate `PerVPAConfig` its AEP-9970 target percentiles too),
`compute_recommendation` (estimate, format, integer CPU, capping — upstream's `UpdateVPAs` body minus the
status write), and `RecommenderCore`, which bundles a `ClusterState` with a `PodRecommender` for the live
loop and for `vpa replay`.

Must not: call the API, read the clock, log, or emit metrics; the loop does those with what this returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from vpa.logic.recommender.aggregation import (
    AggregateContainerState,
    AggregationConfig,
    ContainerAggregationSettings,
)
from vpa.logic.recommender.cluster import ClusterState
from vpa.logic.recommender.estimation import EstimatorConfig, PercentilePodRecommender, PodRecommender
from vpa.logic.recommender.moving_window import MovingWindowPodRecommender
from vpa.logic.recommender.percentiles import NO_OVERRIDE, target_percentiles
from vpa.logic.recommender.postprocessing import PostProcessingConfig, post_process
from vpa.logic.recommender.raise_on_overrun import RaiseOnOverrunPodRecommender
from vpa.model.resources import MEMORY, Resources
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import (
    ContainerScalingMode,
    Recommendation,
    RecommendationGroup,
    RecommendedContainerResources,
    ResourcePolicy,
    VpaView,
)


@dataclass(frozen=True, slots=True)
class RecommenderConfig:
    """Everything the pure recommender needs to know about flags and gates (upstream defaults)."""

    aggregation: AggregationConfig = field(default_factory=AggregationConfig)
    estimation: EstimatorConfig = field(default_factory=EstimatorConfig)
    post_processing: PostProcessingConfig = field(default_factory=PostProcessingConfig)

    @classmethod
    def from_settings(cls, flags: RecommenderSettings, per_vpa_config: bool = False) -> RecommenderConfig:
        """Map the recommender settings (and the PerVPAConfig gate) onto the logic's own config objects."""
        return cls(
            aggregation=AggregationConfig(
                cpu_histogram_decay_half_life_s=flags.cpu_histogram_decay_half_life_s,
                memory_histogram_decay_half_life_s=flags.memory_histogram_decay_half_life_s,
                defaults=ContainerAggregationSettings(
                    memory_aggregation_interval_s=flags.memory_aggregation_interval_s,
                    memory_aggregation_interval_count=flags.memory_aggregation_interval_count,
                    oom_bump_up_ratio=flags.oom_bump_up_ratio,
                    oom_min_bump_up_bytes=flags.oom_min_bump_up_bytes,
                ),
                per_vpa_config=per_vpa_config,
            ),
            estimation=EstimatorConfig(
                target_cpu_percentile=flags.target_cpu_percentile,
                lower_bound_cpu_percentile=flags.recommendation_lower_bound_cpu_percentile,
                upper_bound_cpu_percentile=flags.recommendation_upper_bound_cpu_percentile,
                target_memory_percentile=flags.target_memory_percentile,
                lower_bound_memory_percentile=flags.recommendation_lower_bound_memory_percentile,
                upper_bound_memory_percentile=flags.recommendation_upper_bound_memory_percentile,
                margin_fraction=flags.recommendation_margin_fraction,
                confidence_interval_cpu_s=flags.confidence_interval_cpu_s,
                confidence_interval_memory_s=flags.confidence_interval_memory_s,
                pod_min_cpu_millicores=flags.pod_recommendation_min_cpu_millicores,
                pod_min_memory_mb=flags.pod_recommendation_min_memory_mib,
            ),
            post_processing=PostProcessingConfig(
                round_cpu_millicores=flags.round_cpu_millicores,
                round_memory_bytes=flags.round_memory_bytes,
                humanize_memory=flags.humanize_memory,
                integer_cpu_enabled=flags.cpu_integer_post_processor_enabled,
                global_max_allowed=Resources(
                    cpu_millicores=flags.container_recommendation_max_allowed_cpu_millicores,
                    memory_bytes=flags.container_recommendation_max_allowed_memory_bytes,
                ),
            ),
        )


def containers_to_recommend(states: Mapping[str, AggregateContainerState], policy: ResourcePolicy,
                            config: AggregationConfig) -> dict[str, AggregateContainerState]:
    """Keep containers that are not `mode: Off` and have at least one CPU sample, each taking the VPA's
    container policy (controlled resources). The per-pod minimum is split across exactly these.

    Deviation (OOM right after start): a container without any CPU sample whose memory history is not
    empty (an OOM kill recorded before the metrics API ever reported it) is kept too, with memory as its
    only controlled resource: it gets a memory recommendation from the OOM bump, and no CPU value, since
    nothing is known about its CPU. Upstream drops it, and the pod crash-loops at its old memory limit."""
    kept: dict[str, AggregateContainerState] = {}
    for name, state in states.items():
        container_policy = policy.for_container(name)
        if container_policy is not None and container_policy.mode is ContainerScalingMode.OFF:
            continue
        memory_only = state.total_samples_count <= 0
        if memory_only and state.memory.is_empty():
            continue
        state.update_from_policy(container_policy, config)
        if config.per_vpa_config:
            own = target_percentiles(policy, name)
            if own != NO_OVERRIDE:
                state.settings = replace(
                    state.settings, target_cpu_percentile=own.cpu, target_memory_percentile=own.memory
                )
        if memory_only:
            state.controlled_resources = tuple(r for r in state.controlled_resources if r == MEMORY)
            if not state.controlled_resources:
                continue
        kept[name] = state
    return kept


def compute_recommendation(vpa: VpaView, states: Mapping[str, AggregateContainerState],
                           recommender: PodRecommender, config: RecommenderConfig) -> Recommendation:
    """One VPA's recommendation from its merged per-container states (see `ClusterState.merged_states`)."""
    kept = containers_to_recommend(states, vpa.resource_policy, config.aggregation)
    raw = recommender.recommend(kept)
    return post_process(raw, vpa.resource_policy, vpa.annotations, config.post_processing)


def compute_group_recommendations(
    vpa: VpaView,
    states_by_value: Mapping[str, Mapping[str, AggregateContainerState]],
    recommender: PodRecommender,
    config: RecommenderConfig,
) -> tuple[RecommendationGroup, ...]:
    """AEP-10031: one recommendation per scope value (sorted by value), each computed exactly as the
    VPA's would be from that group's states, then compacted to targets only, as the AEP stores groups."""
    groups: list[RecommendationGroup] = []
    for value in sorted(states_by_value):
        recommendation = compute_recommendation(vpa, states_by_value[value], recommender, config)
        if recommendation.is_empty():
            continue
        targets = tuple(
            RecommendedContainerResources(c.container_name, c.target) for c in recommendation.containers
        )
        groups.append(RecommendationGroup(value, targets))
    return tuple(groups)


class RecommenderCore:
    """Cluster state plus the estimator: what the live loop and `vpa replay` drive."""

    def __init__(self, config: RecommenderConfig | None = None,
                 recommender: PodRecommender | None = None) -> None:
        self.config = config if config is not None else RecommenderConfig()
        if isinstance(recommender, (MovingWindowPodRecommender, RaiseOnOverrunPodRecommender)):
            # Their aggregates also keep recent usage (not checkpointed; vpa.logic.recommender.recent_usage).
            self.config = replace(self.config, aggregation=recommender.aggregation(self.config.aggregation))
        self.cluster = ClusterState(self.config.aggregation)
        self.recommender: PodRecommender = (
            recommender if recommender is not None else PercentilePodRecommender(self.config.estimation))

    def recommend(self, namespace: str, name: str) -> Recommendation:
        """The recommendation for a tracked VPA (empty when no container has samples)."""
        view = self.cluster.vpa_view(namespace, name)
        return compute_recommendation(view, self.cluster.merged_states(namespace, name), self.recommender,
                                      self.config)
