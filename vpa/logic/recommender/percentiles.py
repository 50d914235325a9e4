"""AEP-9970 per-container target percentiles (`containerPolicies[].recommendationPercentiles`, gate
`PerVPAConfig`).

Owns: `target_percentiles` — the effective target percentile of one container per resource, resolved as the
AEP says (the container's own policy entry if it sets that resource, else the `*` entry if it does, else
None = the recommender's `--target-*-percentile` flag; cpu and memory independently), as fractions in
(0, 1] — and `config_invalid`, the `ConfigInvalid` condition's message when a per-container target lies
outside the recommender's own lower/upper bound percentiles (None when every target is inside, bounds
included). Only the percentile at which the target is read changes: the histograms are the same ones the
flags read.

Must not: read feature gates (the caller ignores the field when `PerVPAConfig` is off), touch histograms,
or do I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from vpa.logic.recommender.estimation import EstimatorConfig
from vpa.model.resources import CPU, MEMORY
from vpa.model.vpa import DEFAULT_CONTAINER_POLICY_NAME, ContainerResourcePolicy, ResourcePolicy


class TargetPercentiles(NamedTuple):
    """Per-resource target percentiles as fractions; None = the recommender's flag."""

    cpu: float | None = None
    memory: float | None = None


NO_OVERRIDE = TargetPercentiles()


def _own(policy: ContainerResourcePolicy, resource: str) -> int | None:
    return policy.target_cpu_percentile if resource == CPU else policy.target_memory_percentile


def _resolve(policy: ResourcePolicy, container_name: str, resource: str) -> int | None:
    """The container's own entry (the first with its name) if it sets `resource`, else the first `*`
    entry's value."""
    named = next((e for e in policy.container_policies if e.container_name == container_name), None)
    if named is not None and _own(named, resource) is not None:
        return _own(named, resource)
    wildcard = next(
        (e for e in policy.container_policies if e.container_name == DEFAULT_CONTAINER_POLICY_NAME), None
    )
    return None if wildcard is None else _own(wildcard, resource)


def target_percentiles(policy: ResourcePolicy, container_name: str) -> TargetPercentiles:
    """The container's effective per-resource target percentiles (fractions), None where the flag applies."""
    cpu = _resolve(policy, container_name, CPU)
    memory = _resolve(policy, container_name, MEMORY)
    if cpu is None and memory is None:
        return NO_OVERRIDE
    return TargetPercentiles(None if cpu is None else cpu / 100.0, None if memory is None else memory / 100.0)


def _pct(fraction: float) -> str:
    return f"{fraction * 100:g}"


def config_invalid(policy: ResourcePolicy, config: EstimatorConfig) -> str | None:
    """The `ConfigInvalid` message for the first policy entry whose target lies outside the bounds, or None.

    Message as the AEP words it: `container "app": cpu target percentile 99 is outside the recommender's
    bound percentiles [50, 95]`.
    """
    bounds = {
        CPU: (config.lower_bound_cpu_percentile, config.upper_bound_cpu_percentile),
        MEMORY: (config.lower_bound_memory_percentile, config.upper_bound_memory_percentile),
    }
    for entry in policy.container_policies:
        for resource in (CPU, MEMORY):
            target = _own(entry, resource)
            if target is None:
                continue
            low, high = bounds[resource]
            # Compared in whole percent, as the field is written, so 0.95 from a flag equals 95 here.
            if not round(low * 100, 6) <= target <= round(high * 100, 6):
                return (
                    f'container "{entry.container_name}": {resource} target percentile {target} is outside '
                    f"the recommender's bound percentiles [{_pct(low)}, {_pct(high)}]"
                )
    return None
