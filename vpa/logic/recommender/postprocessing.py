"""From raw estimates to the `status.recommendation` a VPA gets: formatting and upstream's post-processors.

Owns, in upstream's order:
1. formatting (`format_recommendation`): containers sorted by name; CPU rounded up to a multiple of
   `--round-cpu-millicores`, memory up to a multiple of `--round-memory-bytes`, memory optionally
   "humanized" (`--humanize-memory`, deprecated); `uncappedTarget` is this formatted target;
2. the integer-CPU post-processor (`apply_integer_cpu`, `--cpu-integer-post-processor-enabled`): containers
   opted in by the VPA annotation `vpa-post-processor.kubernetes.io/<container>_integerCPU=true` get CPU of
   target, bounds and uncappedTarget rounded up to whole cores;
3. capping (`apply_capping`): target and bounds clamped to the container policy's `minAllowed`, then to
   `maxAllowed` (resources missing there filled from `--container-recommendation-max-allowed-*`); zero
   limits are ignored; `uncappedTarget` untouched; no LimitRange capping in the recommender.

Must not: estimate, read the clock, or log. Amounts stay exact integers (`Resources`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from vpa.logic.recommender.estimation import RawRecommendation
from vpa.model import quantity
from vpa.model.resources import Resources
from vpa.model.vpa import Recommendation, RecommendedContainerResources, ResourcePolicy

INTEGER_CPU_ANNOTATION_PREFIX: Final = "vpa-post-processor.kubernetes.io/"
INTEGER_CPU_ANNOTATION_SUFFIX: Final = "_integerCPU"

NO_LIMITS: Final = Resources()
_KIB: Final = 1024
_MIB: Final = 1024 * _KIB
_GIB: Final = 1024 * _MIB
_TIB: Final = 1024 * _GIB


@dataclass(frozen=True, slots=True)
class PostProcessingConfig:
    """The recommender flags that shape formatting and post-processing."""

    round_cpu_millicores: int = 1
    round_memory_bytes: int = 1
    humanize_memory: bool = False
    integer_cpu_enabled: bool = False  # --cpu-integer-post-processor-enabled
    global_max_allowed: Resources = NO_LIMITS  # --container-recommendation-max-allowed-{cpu,memory}


def round_up_to_scale(value: int, scale: int) -> int:
    """Upstream `RoundUpToScale`: `int64(ceil(float(value)/float(scale))) × scale`; scale ≤ 0 leaves it."""
    if scale <= 0:
        return value
    return math.ceil(float(value) / float(scale)) * scale


def humanized_memory_bytes(value: int) -> int:
    """The byte count `--humanize-memory` ends up with: upstream prints `%.2f` with a binary suffix and
    parses it back (rounding up to whole bytes, as `Quantity.Value` does)."""
    if value >= _TIB:
        text = f"{float(value) / float(_TIB):.2f}Ti"
    elif value >= _GIB:
        text = f"{float(value) / float(_GIB):.2f}Gi"
    elif value >= _MIB:
        text = f"{float(value) / float(_MIB):.2f}Mi"
    elif value >= _KIB:
        text = f"{float(value) / float(_KIB):.2f}Ki"
    else:
        return value
    return quantity.memory_bytes(text)


def format_resources(resources: Resources, config: PostProcessingConfig) -> Resources:
    cpu, memory = resources.cpu_millicores, resources.memory_bytes
    if cpu is not None and config.round_cpu_millicores != 1 and cpu != 0:
        cpu = round_up_to_scale(cpu, config.round_cpu_millicores)
    if memory is not None:
        if config.round_memory_bytes != 1 and memory != 0:
            memory = round_up_to_scale(memory, config.round_memory_bytes)
        if config.humanize_memory and memory != 0:
            memory = humanized_memory_bytes(memory)
    return Resources(cpu_millicores=cpu, memory_bytes=memory)


def format_recommendation(raw: Mapping[str, RawRecommendation],
                          config: PostProcessingConfig) -> Recommendation:
    """Sorted by container name; `uncapped_target` equals the formatted target."""
    containers = []
    for name in sorted(raw):
        item = raw[name]
        target = format_resources(item.target, config)
        containers.append(RecommendedContainerResources(
            container_name=name,
            target=target,
            lower_bound=format_resources(item.lower_bound, config),
            upper_bound=format_resources(item.upper_bound, config),
            uncapped_target=target,
        ))
    return Recommendation(tuple(containers))


def integer_cpu_containers(annotations: Mapping[str, str]) -> frozenset[str]:
    """Containers opted in to whole-core CPU by `vpa-post-processor.kubernetes.io/<name>_integerCPU=true`."""
    names = set()
    for key, value in annotations.items():
        if value != "true":
            continue
        prefix, suffix = INTEGER_CPU_ANNOTATION_PREFIX, INTEGER_CPU_ANNOTATION_SUFFIX
        if not (key.startswith(prefix) and key.endswith(suffix)):
            continue
        name = key[len(INTEGER_CPU_ANNOTATION_PREFIX):len(key) - len(INTEGER_CPU_ANNOTATION_SUFFIX)]
        if name:
            names.add(name)
    return frozenset(names)


def _whole_cores(resources: Resources) -> Resources:
    cpu = resources.cpu_millicores
    if cpu is None:
        return resources
    return replace(resources, cpu_millicores=-(-cpu // 1000) * 1000)


def apply_integer_cpu(recommendation: Recommendation, annotations: Mapping[str, str]) -> Recommendation:
    """Round CPU up to whole cores (target, bounds and uncapped target) for opted-in containers."""
    opted_in = integer_cpu_containers(annotations)
    if not opted_in:
        return recommendation
    containers = []
    for item in recommendation.containers:
        if item.container_name in opted_in:
            item = replace(
                item,
                target=_whole_cores(item.target),
                lower_bound=_whole_cores(item.lower_bound),
                upper_bound=_whole_cores(item.upper_bound),
                uncapped_target=_whole_cores(item.uncapped_target),
            )
        containers.append(item)
    return Recommendation(tuple(containers))


def _cap(value: int | None, minimum: int | None, maximum: int | None) -> int | None:
    if value is None:
        return None
    if minimum is not None and minimum > 0 and value < minimum:
        value = minimum
    if maximum is not None and maximum > 0 and value > maximum:
        value = maximum
    return max(value, 0)  # a negative bound (rejected by validation, but stored objects may have it) or
    # amount never reaches the status


def cap_resources(resources: Resources, min_allowed: Resources, max_allowed: Resources) -> Resources:
    """Clamp to min then max (so max wins if they conflict); unset, zero or negative limits do not apply;
    the result is never negative."""
    return Resources(
        cpu_millicores=_cap(resources.cpu_millicores, min_allowed.cpu_millicores, max_allowed.cpu_millicores),
        memory_bytes=_cap(resources.memory_bytes, min_allowed.memory_bytes, max_allowed.memory_bytes),
    )


def effective_max_allowed(policy_max: Resources, global_max: Resources) -> Resources:
    """The policy's `maxAllowed`, with each resource it does not mention taken from the global flags."""
    return Resources(
        cpu_millicores=policy_max.cpu_millicores if policy_max.cpu_millicores is not None
        else global_max.cpu_millicores,
        memory_bytes=policy_max.memory_bytes if policy_max.memory_bytes is not None
        else global_max.memory_bytes,
    )


def apply_capping(recommendation: Recommendation, policy: ResourcePolicy,
                  global_max_allowed: Resources = NO_LIMITS) -> Recommendation:
    containers = []
    for item in recommendation.containers:
        container_policy = policy.for_container(item.container_name)
        min_allowed = container_policy.min_allowed if container_policy is not None else Resources()
        policy_max = container_policy.max_allowed if container_policy is not None else Resources()
        max_allowed = effective_max_allowed(policy_max, global_max_allowed)
        containers.append(replace(
            item,
            target=cap_resources(item.target, min_allowed, max_allowed),
            lower_bound=cap_resources(item.lower_bound, min_allowed, max_allowed),
            upper_bound=cap_resources(item.upper_bound, min_allowed, max_allowed),
        ))
    return Recommendation(tuple(containers))


def post_process(raw: Mapping[str, RawRecommendation], policy: ResourcePolicy, annotations: Mapping[str, str],
                 config: PostProcessingConfig) -> Recommendation:
    """Formatting, then integer CPU (if enabled), then capping — upstream's order."""
    recommendation = format_recommendation(raw, config)
    if config.integer_cpu_enabled:
        recommendation = apply_integer_cpu(recommendation, annotations)
    return apply_capping(recommendation, policy, config.global_max_allowed)
