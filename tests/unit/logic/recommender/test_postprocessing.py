"""Formatting, integer CPU and capping, each rule against a hand-written expectation."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.estimation import RawRecommendation
from vpa.logic.recommender.postprocessing import (
    PostProcessingConfig,
    apply_capping,
    apply_integer_cpu,
    cap_resources,
    effective_max_allowed,
    format_recommendation,
    humanized_memory_bytes,
    post_process,
    round_up_to_scale,
)
from vpa.model.resources import Resources
from vpa.model.vpa import (
    ContainerResourcePolicy,
    Recommendation,
    RecommendedContainerResources,
    ResourcePolicy,
)

NONE = Resources()


@pytest.mark.parametrize(
    ("value", "minimum", "maximum", "expected"),
    [
        (100, 200, None, 200),  # below minAllowed → minAllowed
        (300, None, 250, 250),  # above maxAllowed → maxAllowed
        (150, 100, 200, 150),  # inside: unchanged
        (50, 300, 200, 200),  # min above max: min first, then max wins
        (50, 0, None, 50),  # a zero minAllowed is ignored
        (500, None, 0, 500),  # a zero maxAllowed is ignored
        (None, 100, 200, None),  # a resource not recommended stays absent
    ],
    ids=["min", "max", "inside", "min-above-max", "zero-min", "zero-max", "absent"],
)
def test_cap_rules(value: int | None, minimum: int | None, maximum: int | None, expected: int | None) -> None:
    capped = cap_resources(Resources(value, value), Resources(minimum, minimum), Resources(maximum, maximum))
    assert capped == Resources(expected, expected)


@pytest.mark.parametrize(
    ("policy_max", "global_max", "expected"),
    [
        (NONE, Resources(1000, 10**9), Resources(1000, 10**9)),  # no policy max: global flags
        (Resources(500, None), Resources(1000, 10**9), Resources(500, 10**9)),  # global fills the missing one
        (Resources(0, None), Resources(1000, None), Resources(0, None)),  # policy 0 is "set": global not used
    ],
    ids=["global-only", "fill-missing", "policy-zero"],
)
def test_global_max_fills_missing_resources(policy_max: Resources, global_max: Resources,
                                            expected: Resources) -> None:
    assert effective_max_allowed(policy_max, global_max) == expected


def _recommendation(cpu: int, memory: int, name: str = "app") -> Recommendation:
    resources = Resources(cpu, memory)
    return Recommendation((RecommendedContainerResources(name, resources, resources, resources, resources),))


def test_capping_uses_the_container_policy_and_leaves_uncapped_target() -> None:
    policy = ResourcePolicy((ContainerResourcePolicy("app", min_allowed=Resources(1000, None),
                                                     max_allowed=Resources(None, 100 * 2**20)),))
    capped = apply_capping(_recommendation(500, 2**30), policy, Resources(None, 10**12))
    item = capped.containers[0]
    assert item.target == item.lower_bound == item.upper_bound == Resources(1000, 100 * 2**20)
    assert item.uncapped_target == Resources(500, 2**30)


def test_capping_applies_the_wildcard_policy_and_global_max_without_policy() -> None:
    wildcard = ResourcePolicy((ContainerResourcePolicy("*", max_allowed=Resources(200, None)),))
    assert apply_capping(_recommendation(500, 10), wildcard).containers[0].target == Resources(200, 10)
    assert apply_capping(_recommendation(500, 10), ResourcePolicy(),
                         Resources(300, None)).containers[0].target == Resources(300, 10)


@pytest.mark.parametrize(
    ("value", "scale", "expected"),
    [(587, 1, 587), (587, 10, 590), (590, 10, 590), (262_144_001, 1 << 20, 263_192_576), (5, 0, 5)],
    ids=["one", "up", "exact", "mebibyte", "bad-scale"],
)
def test_round_up_to_scale(value: int, scale: int, expected: int) -> None:
    assert round_up_to_scale(value, scale) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (262_144_000, 262_144_000),  # "250.00Mi"
        (1_428_076_625, 1_428_076_626),  # 1.33 GiB → "1.33Gi" → ceil(1.33 × 2^30)
        (1000, 1000),  # below 1 KiB: unchanged
        (1536, 1536),  # "1.50Ki"
    ],
    ids=["250Mi", "1.33Gi", "bytes", "1.5Ki"],
)
def test_humanized_memory(value: int, expected: int) -> None:
    assert humanized_memory_bytes(value) == expected


def test_formatting_rounds_sorts_and_copies_target_to_uncapped() -> None:
    raw = {
        "b": RawRecommendation(Resources(587, 248_153_480), Resources(0, 0), Resources(660, None)),
        "a": RawRecommendation(Resources(1, 1), Resources(1, 1), Resources(1, 1)),
    }
    config = PostProcessingConfig(round_cpu_millicores=100, round_memory_bytes=1 << 20)
    recommendation = format_recommendation(raw, config)
    assert [item.container_name for item in recommendation.containers] == ["a", "b"]
    b = recommendation.containers[1]
    assert b.target == Resources(600, 237 * (1 << 20))  # 248153480 / 2^20 = 236.66 → 237 MiB
    assert b.lower_bound == Resources(0, 0)  # zero is never rounded
    assert b.upper_bound == Resources(700, None)
    assert b.uncapped_target == b.target


def test_integer_cpu_needs_the_annotation() -> None:
    recommendation = _recommendation(1200, 10)
    annotations = {"vpa-post-processor.kubernetes.io/app_integerCPU": "true"}
    rounded = apply_integer_cpu(recommendation, annotations).containers[0]
    assert rounded.target == rounded.lower_bound == rounded.upper_bound == rounded.uncapped_target
    assert rounded.target == Resources(2000, 10)
    other = {"vpa-post-processor.kubernetes.io/other_integerCPU": "true",
             "vpa-post-processor.kubernetes.io/app_integerCPU ": "true",
             "vpa-post-processor.kubernetes.io/app_integerCPU_": "false"}
    assert apply_integer_cpu(recommendation, other) == recommendation


def test_post_process_order_integer_cpu_before_capping() -> None:
    raw = {"app": RawRecommendation(Resources(1200, 10), Resources(1200, 10), Resources(1200, 10))}
    policy = ResourcePolicy((ContainerResourcePolicy("app", max_allowed=Resources(1500, None)),))
    annotations = {"vpa-post-processor.kubernetes.io/app_integerCPU": "true"}
    enabled = PostProcessingConfig(integer_cpu_enabled=True)
    item = post_process(raw, policy, annotations, enabled).containers[0]
    assert item.target.cpu_millicores == 1500  # 1200 → 2000 (whole cores) → capped to 1500
    assert item.uncapped_target.cpu_millicores == 2000
    disabled = post_process(raw, policy, annotations, PostProcessingConfig()).containers[0]
    assert disabled.target.cpu_millicores == 1200


@pytest.mark.parametrize(
    ("resources", "min_allowed", "max_allowed", "expected"),
    [
        # negative maxAllowed (accepted by older admission, or written around it): ignored, never published
        (Resources(250, 2**28), Resources(), Resources(-100, -(2**30)), Resources(250, 2**28)),
        # negative minAllowed: ignored
        (Resources(250, 2**28), Resources(-1000, -1), Resources(), Resources(250, 2**28)),
        # a negative amount never reaches the status
        (Resources(-5, -1), Resources(), Resources(), Resources(0, 0)),
    ],
    ids=["negative-max", "negative-min", "negative-amount"],
)
def test_never_negative(
    resources: Resources, min_allowed: Resources, max_allowed: Resources, expected: Resources
) -> None:
    from vpa.logic.recommender.postprocessing import cap_resources

    assert cap_resources(resources, min_allowed, max_allowed) == expected
