"""VerticalPodAutoscalers both ways: `vpa_from_dict` (a full `VpaView`) and status to JSON for the writer.

Owns: the spec (target reference, update policy, resource policy with its container policies and startup
boost, recommenders), the annotations kept, the status read back (`vpa_status_from_dict`: recommendations
and conditions), and `vpa_status_to_dict` / `recommendation_to_dict` / `condition_to_dict` for the status
writer.

Must not: validate a VPA beyond its types (admission does) or do I/O, log or decide anything; a
malformed object raises ConversionError.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from vpa.kube.converting.interning import _NO_RESOURCES, DEFAULT_INTERNER
from vpa.kube.converting.readers import (
    ConversionError,
    _enum,
    _int,
    _list,
    _map,
    _quantity_text,
    _required_str,
    _resources,
    _str,
    _string_map,
    _time,
    _type_name,
    format_time,
)
from vpa.model import quantity
from vpa.model.resources import CPU, MEMORY, Resources
from vpa.model.vpa import (
    Condition,
    ContainerResourcePolicy,
    ContainerScalingMode,
    ControlledValues,
    EvictionRequirement,
    Recommendation,
    RecommendationGroup,
    RecommendedContainerResources,
    ResourcePolicy,
    StartupBoost,
    TargetRef,
    UpdateMode,
    UpdatePolicy,
    VpaStatus,
    VpaView,
)

LAST_APPLIED_CONFIGURATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
_MILLI_NANOS: Final = 10**6
_UNIT_NANOS: Final = 10**9


# --- VPAs -------------------------------------------------------------------------------------------------


def vpa_from_dict(obj: Mapping[str, Any], *, require_target_ref: bool = True) -> VpaView:
    """A VerticalPodAutoscaler object → VpaView.

    Raises ConversionError naming the field for wrong types, unknown enum values and bad quantities.
    `spec.targetRef` is required (the CRD requires it); pass `require_target_ref=False` to accept its
    absence (`target_ref=None`), e.g. when validating an admission request that reports it itself.
    Quantities that are not whole millicores (CPU) or bytes (memory) are rounded up as upstream does and
    listed in `fractional_quantity_fields` for admission validation.
    """
    if not isinstance(obj, Mapping):
        raise ConversionError("<vpa>", f"expected an object, got {_type_name(obj)}")
    metadata = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    fractional: list[str] = []

    raw_target = spec.get("targetRef")
    target_ref: TargetRef | None = None
    if raw_target is None:
        if require_target_ref:
            raise ConversionError("spec.targetRef", "is required")
    else:
        target = _map(raw_target, "spec.targetRef")
        target_ref = TargetRef(
            api_version=sys.intern(_str(target.get("apiVersion"), "spec.targetRef.apiVersion")),
            kind=sys.intern(_required_str(target.get("kind"), "spec.targetRef.kind")),
            name=_required_str(target.get("name"), "spec.targetRef.name"),
        )

    raw_update_policy = spec.get("updatePolicy")
    update_policy = _update_policy(_map(raw_update_policy, "spec.updatePolicy"))

    raw_resource_policy = _map(spec.get("resourcePolicy"), "spec.resourcePolicy")
    policies = tuple(
        _container_policy(
            _map(raw, f"spec.resourcePolicy.containerPolicies[{i}]"),
            f"spec.resourcePolicy.containerPolicies[{i}]",
            fractional,
        )
        for i, raw in enumerate(
            _list(raw_resource_policy.get("containerPolicies"), "spec.resourcePolicy.containerPolicies")
        )
    )

    recommenders = tuple(
        _required_str(_map(raw, f"spec.recommenders[{i}]").get("name"), f"spec.recommenders[{i}].name")
        for i, raw in enumerate(_list(spec.get("recommenders"), "spec.recommenders"))
    )

    return VpaView(
        namespace=sys.intern(_str(metadata.get("namespace"), "metadata.namespace")),
        name=_required_str(metadata.get("name"), "metadata.name"),
        uid=_str(metadata.get("uid"), "metadata.uid"),
        generation=_int(metadata.get("generation"), "metadata.generation") or 0,
        resource_version=_str(metadata.get("resourceVersion"), "metadata.resourceVersion"),
        labels=_string_map(metadata.get("labels"), "metadata.labels", None),
        annotations=_string_map(
            metadata.get("annotations"), "metadata.annotations", None, keep=_keep_vpa_annotation
        ),
        target_ref=target_ref,
        update_policy=update_policy,
        resource_policy=ResourcePolicy(policies),
        recommenders=recommenders,
        startup_boost=_startup_boost(spec.get("startupBoost"), "spec.startupBoost", fractional),
        status=vpa_status_from_dict(obj.get("status")),
        creation_timestamp=_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
        deletion_timestamp=_time(metadata.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        update_policy_set=raw_update_policy is not None,
        fractional_quantity_fields=tuple(fractional),
        scope=_str(spec.get("scope"), "spec.scope"),
    )


def _keep_vpa_annotation(key: str) -> bool:
    # kubectl's copy of the whole object can be kilobytes; nothing reads it.
    return key != LAST_APPLIED_CONFIGURATION


def _update_policy(raw: Mapping[str, Any]) -> UpdatePolicy:
    mode_text = _str(raw.get("updateMode"), "spec.updatePolicy.updateMode")
    mode: UpdateMode | None = None
    if mode_text:
        try:
            mode = UpdateMode.parse(mode_text)
        except ValueError as err:
            raise ConversionError("spec.updatePolicy.updateMode", str(err)) from None
    requirements: list[EvictionRequirement] = []
    field = "spec.updatePolicy.evictionRequirements"
    for index, raw_requirement in enumerate(_list(raw.get("evictionRequirements"), field)):
        where = f"{field}[{index}]"
        raw_requirement = _map(raw_requirement, where)
        resources = tuple(
            sys.intern(_str(resource, f"{where}.resources[{i}]"))
            for i, resource in enumerate(_list(raw_requirement.get("resources"), f"{where}.resources"))
        )
        requirements.append(
            EvictionRequirement(
                resources=resources,
                change_requirement=_str(
                    raw_requirement.get("changeRequirement"), f"{where}.changeRequirement"
                ),
            )
        )
    return UpdatePolicy(
        update_mode=mode,
        min_replicas=_int(raw.get("minReplicas"), "spec.updatePolicy.minReplicas"),
        eviction_requirements=tuple(requirements),
        evict_after_oom_s=_int(raw.get("evictAfterOOMSeconds"), "spec.updatePolicy.evictAfterOOMSeconds"),
        initial_delay_s=_int(raw.get("initialDelaySeconds"), "spec.updatePolicy.initialDelaySeconds"),
    )


def _exact_resources(value: object, field: str, fractional: list[str]) -> Resources:
    """Like `_resources`, but notes quantities that are not whole millicores / bytes."""
    if value is None:
        return _NO_RESOURCES
    resource_list = _map(value, field)
    amounts: dict[str, int | None] = {CPU: None, MEMORY: None}
    for resource, unit_nanos in ((CPU, _MILLI_NANOS), (MEMORY, _UNIT_NANOS)):
        raw = resource_list.get(resource)
        if raw is None:
            continue
        where = f"{field}.{resource}"
        try:
            parsed = quantity.Quantity.parse(_quantity_text(raw, where))
        except quantity.QuantityError as err:
            raise ConversionError(where, str(err)) from None
        if parsed.nanos % unit_nanos:
            fractional.append(where)
        amounts[resource] = parsed.millis if resource == CPU else parsed.value
    return Resources(amounts[CPU], amounts[MEMORY])


def _container_policy(raw: Mapping[str, Any], where: str, fractional: list[str]) -> ContainerResourcePolicy:
    controlled_raw = raw.get("controlledResources")
    controlled: tuple[str, ...] | None = None
    if controlled_raw is not None:
        controlled = tuple(
            sys.intern(_str(resource, f"{where}.controlledResources[{i}]"))
            for i, resource in enumerate(_list(controlled_raw, f"{where}.controlledResources"))
        )
    ratio: float | None = None
    raw_ratio = raw.get("oomBumpUpRatio")
    if raw_ratio is not None:
        try:
            ratio = float(
                quantity.Quantity.parse(_quantity_text(raw_ratio, f"{where}.oomBumpUpRatio")).as_fraction()
            )
        except quantity.QuantityError as err:
            raise ConversionError(f"{where}.oomBumpUpRatio", str(err)) from None
    min_bump: int | None = None
    raw_min_bump = raw.get("oomMinBumpUp")
    if raw_min_bump is not None:
        try:
            min_bump = quantity.Quantity.parse(_quantity_text(raw_min_bump, f"{where}.oomMinBumpUp")).value
        except quantity.QuantityError as err:
            raise ConversionError(f"{where}.oomMinBumpUp", str(err)) from None
    return ContainerResourcePolicy(
        container_name=sys.intern(_str(raw.get("containerName"), f"{where}.containerName")),
        mode=_enum(raw.get("mode"), f"{where}.mode", ContainerScalingMode),
        min_allowed=_exact_resources(raw.get("minAllowed"), f"{where}.minAllowed", fractional),
        max_allowed=_exact_resources(raw.get("maxAllowed"), f"{where}.maxAllowed", fractional),
        controlled_resources=controlled,
        controlled_values=_enum(raw.get("controlledValues"), f"{where}.controlledValues", ControlledValues),
        oom_bump_up_ratio=ratio,
        oom_min_bump_up_bytes=min_bump,
        memory_aggregation_interval_s=_int(
            raw.get("memoryAggregationIntervalSeconds"), f"{where}.memoryAggregationIntervalSeconds"
        ),
        memory_aggregation_interval_count=_int(
            raw.get("memoryAggregationIntervalCount"), f"{where}.memoryAggregationIntervalCount"
        ),
        startup_boost=_startup_boost(raw.get("startupBoost"), f"{where}.startupBoost", fractional),
        target_cpu_percentile=_target_percentile(raw, where, CPU),
        target_memory_percentile=_target_percentile(raw, where, MEMORY),
    )


def _target_percentile(raw: Mapping[str, Any], where: str, resource: str) -> int | None:
    """AEP-9970 `recommendationPercentiles.<resource>.target`, or None when absent."""
    field = f"{where}.recommendationPercentiles"
    percentiles = _map(raw.get("recommendationPercentiles"), field)
    per_resource = _map(percentiles.get(resource), f"{field}.{resource}")
    return _int(per_resource.get("target"), f"{field}.{resource}.target")


def _startup_boost(value: object, field: str, fractional: list[str]) -> StartupBoost | None:
    if value is None:
        return None
    raw_cpu = _map(value, field).get("cpu")
    if raw_cpu is None:
        return None
    where = f"{field}.cpu"
    cpu = _map(raw_cpu, where)
    quantity_millicores: int | None = None
    raw_quantity = cpu.get("quantity")
    if raw_quantity is not None:
        try:
            parsed = quantity.Quantity.parse(_quantity_text(raw_quantity, f"{where}.quantity"))
        except quantity.QuantityError as err:
            raise ConversionError(f"{where}.quantity", str(err)) from None
        if parsed.nanos % _MILLI_NANOS:
            fractional.append(f"{where}.quantity")
        quantity_millicores = parsed.millis
    return StartupBoost(
        type=sys.intern(_str(cpu.get("type"), f"{where}.type")),
        factor=_int(cpu.get("factor"), f"{where}.factor"),
        quantity_millicores=quantity_millicores,
        duration_s=_int(cpu.get("durationSeconds"), f"{where}.durationSeconds") or 0,
    )


def vpa_status_from_dict(value: object, field: str = "status") -> VpaStatus:
    """`status` of a VPA → VpaStatus (empty when absent)."""
    if value is None:
        return VpaStatus()
    raw = _map(value, field)
    recommendation: Recommendation | None = None
    raw_recommendation = raw.get("recommendation")
    if raw_recommendation is not None:
        rec_field = f"{field}.recommendation.containerRecommendations"
        recommendation = Recommendation(
            _container_recommendations(
                _map(raw_recommendation, f"{field}.recommendation").get("containerRecommendations"), rec_field
            )
        )
    groups: list[RecommendationGroup] = []
    for index, entry in enumerate(_list(raw.get("groups"), f"{field}.groups")):
        where = f"{field}.groups[{index}]"
        entry = _map(entry, where)
        groups.append(
            RecommendationGroup(
                scope_value=_str(entry.get("scopeValue"), f"{where}.scopeValue"),
                containers=_container_recommendations(
                    entry.get("containerRecommendations"), f"{where}.containerRecommendations"
                ),
            )
        )
    conditions: list[Condition] = []
    for index, entry in enumerate(_list(raw.get("conditions"), f"{field}.conditions")):
        where = f"{field}.conditions[{index}]"
        entry = _map(entry, where)
        conditions.append(
            Condition(
                type=sys.intern(_required_str(entry.get("type"), f"{where}.type")),
                status=sys.intern(_str(entry.get("status"), f"{where}.status")),
                last_transition_time=_time(entry.get("lastTransitionTime"), f"{where}.lastTransitionTime"),
                reason=_str(entry.get("reason"), f"{where}.reason"),
                message=_str(entry.get("message"), f"{where}.message"),
            )
        )
    return VpaStatus(
        recommendation=recommendation,
        conditions=tuple(conditions),
        observed_generation=_int(raw.get("observedGeneration"), f"{field}.observedGeneration"),
        groups=tuple(groups),
    )


def _container_recommendations(value: object, field: str) -> tuple[RecommendedContainerResources, ...]:
    it = DEFAULT_INTERNER
    containers: list[RecommendedContainerResources] = []
    for index, entry in enumerate(_list(value, field)):
        where = f"{field}[{index}]"
        entry = _map(entry, where)
        containers.append(
            RecommendedContainerResources(
                container_name=sys.intern(_str(entry.get("containerName"), f"{where}.containerName")),
                target=_resources(entry.get("target"), f"{where}.target", it),
                lower_bound=_resources(entry.get("lowerBound"), f"{where}.lowerBound", it),
                upper_bound=_resources(entry.get("upperBound"), f"{where}.upperBound", it),
                uncapped_target=_resources(entry.get("uncappedTarget"), f"{where}.uncappedTarget", it),
            )
        )
    return tuple(containers)


# --- writers ----------------------------------------------------------------------------------------------


def recommendation_to_dict(recommendation: Recommendation) -> dict[str, Any]:
    """`status.recommendation` JSON with canonical quantities (`25m`, `262144k`), empty bounds omitted."""
    entries: list[dict[str, Any]] = []
    for container in recommendation.containers:
        entry: dict[str, Any] = {
            "containerName": container.container_name,
            "target": container.target.to_resource_list(),
        }
        for key, resources in (
            ("lowerBound", container.lower_bound),
            ("upperBound", container.upper_bound),
            ("uncappedTarget", container.uncapped_target),
        ):
            if not resources.is_empty():
                entry[key] = resources.to_resource_list()
        entries.append(entry)
    return {"containerRecommendations": entries}


def condition_to_dict(condition: Condition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": condition.type, "status": condition.status}
    if condition.last_transition_time is not None:
        out["lastTransitionTime"] = format_time(condition.last_transition_time)
    if condition.reason:
        out["reason"] = condition.reason
    if condition.message:
        out["message"] = condition.message
    return out


def vpa_status_to_dict(status: VpaStatus, *, explicit_nulls: bool = True) -> dict[str, Any]:
    """The `status` JSON for a merge patch on `/status`.

    With `explicit_nulls` (default) an absent recommendation is written as `null`, so a merge patch
    removes a stale one; `conditions` is always written whole (merge patches replace lists).
    """
    out: dict[str, Any] = {}
    if status.recommendation is not None:
        out["recommendation"] = recommendation_to_dict(status.recommendation)
    elif explicit_nulls:
        out["recommendation"] = None
    out["conditions"] = [condition_to_dict(condition) for condition in status.conditions]
    if status.observed_generation is not None:
        out["observedGeneration"] = status.observed_generation
    if status.groups:
        out["groups"] = [
            {"scopeValue": group.scope_value, **recommendation_to_dict(Recommendation(group.containers))}
            for group in status.groups
        ]
    return out
