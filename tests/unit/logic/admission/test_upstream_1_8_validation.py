"""Upstream VPA 1.8.1's unit tests of `pkg/admission-controller/resource/vpa` validation, restated as facts
about `vpa.logic.admission.validation.validate_vpa`.

Each row is one `TestValidateVPA` case: the VPA spec, upstream's validation options (a create or an
update; which gated features are allowed; the resources the old object already controlled) and the first
error text or the warnings upstream expects. Upstream's options come from the feature gates or from the old
object (`TestAllowCPUBoost`, `TestAllowPerVPAConfig`); here the gates are passed and, for "allowed by the
old object", the old object is. `TestVeryInvalidateVPA` (malformed input must not crash) is covered by the
property test in test_validation.py. The matcher tests of the same package are restated in
test_upstream_1_8_matcher.py. No row disagrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from vpa.logic.admission.validation import AUTO_DEPRECATION_WARNING, validate_vpa
from vpa.model.features import FeatureGates

JSON = dict[str, Any]
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "my-app"}
P = "spec.resourcePolicy.containerPolicies[0]"
OFF = FeatureGates()
BOOST = FeatureGates.parse("CPUStartupBoost=true")
PER_VPA = FeatureGates.parse("PerVPAConfig=true")
IN_PLACE = FeatureGates.parse("InPlace=true")
BOOST_GATE = (
    "in order to use startupBoost, you must enable feature gate CPUStartupBoost "
    "in the admission-controller args"
)
PER_VPA_GATE = "not supported when feature flag PerVPAConfig is disabled"
MILLI_CPUS = "must be a whole number of milli CPUs"
BYTES = "must be a whole number of bytes"
OFF_MODE = {"updateMode": "Off"}
FACTOR_2 = {"cpu": {"type": "Factor", "factor": 2}}


def spec(**fields: Any) -> JSON:
    return {"targetRef": TARGET, **fields}


def policies(*entries: JSON) -> JSON:
    return {"containerPolicies": list(entries)}


def loot_box(**fields: Any) -> JSON:
    return {"containerName": "loot box", **fields}


def valid_limits(**fields: Any) -> JSON:
    return loot_box(mode="Auto", minAllowed={"cpu": "10"}, maxAllowed={"cpu": "100"}, **fields)


def in_policy(**fields: Any) -> JSON:
    """A spec whose one container policy (for "loot box") has `fields`."""
    return spec(resourcePolicy=policies(loot_box(**fields)))


def off_with(policy: JSON) -> JSON:
    """A spec in updateMode Off with `policy` as its one container policy."""
    return spec(updatePolicy=OFF_MODE, resourcePolicy=policies(policy))


def oom_bumps(ratio: str, min_bump: str) -> JSON:
    """A spec in updateMode Off whose policy for every container sets the OOM bump-up ratio and minimum."""
    return off_with({"containerName": "*", "mode": "Auto", "oomBumpUpRatio": ratio, "oomMinBumpUp": min_bump})


def vpa(vpa_spec: JSON) -> JSON:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": vpa_spec,
    }


# (name, spec, create, gates, old object's spec or None, first error or None, warnings)
Case = tuple[str, JSON, bool, FeatureGates, JSON | None, str | None, list[str]]


def on_update(
    name: str,
    vpa_spec: JSON,
    error: str | None = None,
    *,
    old: JSON | None = None,
    warnings: Sequence[str] = (),
) -> Case:
    """A case upstream runs as an update with every gate off; its old object is `old`, else empty."""
    return (name, vpa_spec, False, OFF, {} if old is None else old, error, list(warnings))


def on_create(name: str, vpa_spec: JSON, error: str | None = None, gates: FeatureGates = OFF) -> Case:
    """A case upstream runs as a create (no old object) with `gates`."""
    return (name, vpa_spec, True, gates, None, error, [])


# Upstream has each of these startupBoost cases at the top level and in a container policy: (what, boost,
# gates, the error after the field's path or None).
BOOSTS: list[tuple[str, JSON, FeatureGates, str | None]] = [
    ("feature gate disabled", {"cpu": {"factor": 2}}, OFF, f": Forbidden: {BOOST_GATE}"),
    (
        "bad factor",
        {"cpu": {"type": "Factor", "factor": 0}},
        BOOST,
        ".cpu.factor: Invalid value: 0: must be >= 1 for type Factor",
    ),
    (
        "bad quantity",
        {"cpu": {"type": "Quantity", "quantity": "187500u"}},
        BOOST,
        f'.cpu.quantity: Invalid value: "187500u": {MILLI_CPUS}',
    ),
    (
        "bad type",
        {"cpu": {"type": "bad"}},
        BOOST,
        '.cpu.type: Unsupported value: "bad": supported values: "Factor", "Quantity"',
    ),
    ("empty type", {"cpu": {}}, BOOST, ".cpu.type: Required value: must be either Factor or Quantity"),
    ("valid factor", FACTOR_2, BOOST, None),
    ("valid quantity", {"cpu": {"type": "Quantity", "quantity": "100m"}}, BOOST, None),
]

CASES: list[Case] = [
    on_update("empty update", {}),
    on_create(
        "empty create",
        {},
        "spec.targetRef: Required value: If you're using v1beta1 version of the API, please migrate to v1",
    ),
    on_update(
        "no update mode",
        spec(updatePolicy={}),
        "spec.updatePolicy.updateMode: Required value: updateMode is required if UpdatePolicy is used",
    ),
    on_update(
        "bad update mode",
        spec(updatePolicy={"updateMode": "bad"}),
        'spec.updatePolicy.updateMode: Unsupported value: "bad": supported values: "InPlace", '
        '"InPlaceOrRecreate", "Initial", "Off", "Recreate"',
    ),
    on_update("InPlaceOrRecreate update mode set", spec(updatePolicy={"updateMode": "InPlaceOrRecreate"})),
    on_update(
        "deprecated Auto update mode set",
        spec(updatePolicy={"updateMode": "Auto"}),
        warnings=[AUTO_DEPRECATION_WARNING],
    ),
    on_update(
        "zero minReplicas",
        spec(updatePolicy={"minReplicas": 0, "updateMode": "Off"}),
        "spec.updatePolicy.minReplicas: Invalid value: 0: minReplicas has to be positive",
    ),
    on_update("no policy name", spec(resourcePolicy=policies({})), f"{P}.containerName: Required value"),
    on_update(
        "invalid scaling mode",
        in_policy(mode="bad"),
        f'{P}.mode: Unsupported value: "bad": supported values: "Auto", "Off"',
    ),
    on_update(
        "more than one recommender",
        spec(updatePolicy=OFF_MODE, recommenders=[{"name": "test1"}, {"name": "test2"}]),
        "spec.recommenders: Too many: 2: must have at most 1 item",
    ),
    on_update(
        "bad limits",
        in_policy(minAllowed={"cpu": "100"}, maxAllowed={"cpu": "10"}),
        f'{P}.maxAllowed[cpu]: Invalid value: "10": max resource for cpu is lower than min of "100"',
    ),
    on_update(
        "bad minAllowed cpu value",
        in_policy(minAllowed={"cpu": "187500u"}, maxAllowed={"cpu": "275m"}),
        f'{P}.minAllowed[cpu]: Invalid value: "187500u": {MILLI_CPUS}',
    ),
    on_update(
        "bad minAllowed memory value",
        in_policy(minAllowed={"cpu": "1m", "memory": "100m"}, maxAllowed={"cpu": "275m", "memory": "500M"}),
        f'{P}.minAllowed[memory]: Invalid value: "100m": {BYTES}',
    ),
    on_update(
        "bad maxAllowed cpu value",
        in_policy(minAllowed={}, maxAllowed={"cpu": "187500u"}),
        f'{P}.maxAllowed[cpu]: Invalid value: "187500u": {MILLI_CPUS}',
    ),
    on_update(
        "bad maxAllowed memory value",
        in_policy(minAllowed={"cpu": "1m"}, maxAllowed={"cpu": "275m", "memory": "500m"}),
        f'{P}.maxAllowed[memory]: Invalid value: "500m": {BYTES}',
    ),
    on_update(
        "scaling off with controlled values requests and limits",
        in_policy(mode="Off", controlledValues="RequestsAndLimits"),
        f"{P}.controlledValues: Forbidden: "
        "controlledValues shouldn't be specified if container scaling mode is off",
    ),
    on_update(
        "all valid",
        spec(resourcePolicy=policies(valid_limits()), updatePolicy={"updateMode": "Off", "minReplicas": 1}),
    ),
    *(
        case
        for what, boost, gates, error in BOOSTS
        for case in (
            on_create(
                f"top-level startupBoost with {what}",
                spec(startupBoost=boost),
                error and f"spec.startupBoost{error}",
                gates,
            ),
            on_create(
                f"container startupBoost with {what}",
                in_policy(startupBoost=boost),
                error and f"{P}.startupBoost{error}",
                gates,
            ),
        )
    ),
    on_create(
        "top-level and container startupBoost",
        spec(
            startupBoost=FACTOR_2,
            resourcePolicy=policies(loot_box(startupBoost={"cpu": {"type": "Quantity", "quantity": "100m"}})),
        ),
        None,
        BOOST,
    ),
    on_create("per-vpa config active and used", off_with(valid_limits(oomBumpUpRatio="2")), None, PER_VPA),
    on_create(
        "per-vpa config active and used evictOOMThreshold",
        spec(
            updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 600},
            resourcePolicy=policies(valid_limits(oomBumpUpRatio="2")),
        ),
        None,
        PER_VPA,
    ),
    on_create(
        "Invalid oomBumpUpRatio (negative value)",
        oom_bumps("-1", "104857600"),
        f"{P}.oomBumpUpRatio: Invalid value: -1: must be greater than or equal to 1.0",
        PER_VPA,
    ),
    on_create(
        "Invalid oomBumpUpRatio (less than 1)",
        oom_bumps("0.5", "104857600"),
        f"{P}.oomBumpUpRatio: Invalid value: 0.5: must be greater than or equal to 1.0",
        PER_VPA,
    ),
    on_create(
        "Invalid oomMinBumpUp (negative value)",
        oom_bumps("2", "-1"),
        f"{P}.oomMinBumpUp: Invalid value: -1: must be greater than or equal to 0",
        PER_VPA,
    ),
    on_create(
        "per-vpa config disabled and used",
        off_with(valid_limits(oomMinBumpUp="2")),
        f"{P}.oomMinBumpUp: Forbidden: {PER_VPA_GATE}",
    ),
    *(
        case
        for unit, value in (("Seconds", 3600), ("Count", 10))
        for case in (
            on_create(
                f"per-vpa config active with MemoryAggregationInterval{unit}",
                off_with(valid_limits(**{f"memoryAggregationInterval{unit}": value})),
                None,
                PER_VPA,
            ),
            on_create(
                f"per-vpa config disabled with MemoryAggregationInterval{unit}",
                off_with(valid_limits(**{f"memoryAggregationInterval{unit}": value})),
                f"{P}.memoryAggregationInterval{unit}: Forbidden: {PER_VPA_GATE}",
            ),
        )
    ),
    *(
        on_create(
            f"invalid MemoryAggregationInterval{unit} {label}",
            off_with(loot_box(mode="Auto", **{f"memoryAggregationInterval{unit}": value})),
            f"{P}.memoryAggregationInterval{unit}: Invalid value: {value}: "
            "must be greater than or equal to 1",
            PER_VPA,
        )
        for unit, negative in (("Seconds", -5), ("Count", -3))
        for label, value in (("zero", 0), ("negative", negative))
    ),
    on_create(
        "creating VPA with InPlace update mode not allowed by disabled feature gate",
        spec(updatePolicy={"updateMode": "InPlace"}),
        "spec.updatePolicy.updateMode: Forbidden: in order to use UpdateMode InPlace, "
        "you must enable feature gate InPlace in the admission-controller args",
    ),
    on_create(
        "InPlace update mode with minReplicas",
        spec(updatePolicy={"updateMode": "InPlace", "minReplicas": 1}),
        None,
        IN_PLACE,
    ),
    on_create(
        "InPlace update mode with complete resource policy",
        spec(
            updatePolicy={"updateMode": "InPlace", "minReplicas": 1},
            resourcePolicy=policies(
                {
                    "containerName": "test-container",
                    "mode": "Auto",
                    "minAllowed": {"cpu": "10m", "memory": "100Mi"},
                    "maxAllowed": {"cpu": "1000m", "memory": "1Gi"},
                }
            ),
        ),
        None,
        IN_PLACE,
    ),
    on_create(
        "unsupported controlledResources entry rejected on create",
        in_policy(controlledResources=["cpu", "broken"]),
        f'{P}.controlledResources[1]: Unsupported value: "broken": supported values: "cpu", "memory"',
    ),
    on_update(
        "unsupported controlledResources entry allowed when present in old VPA",
        in_policy(controlledResources=["cpu", "broken"]),
        old=in_policy(controlledResources=["broken"]),
        warnings=[
            f'{P}.controlledResources[1]: unsupported value "broken" is allowed only because it is present '
            'in the existing VPA object; supported values: "cpu", "memory"'
        ],
    ),
]


@pytest.mark.parametrize(
    ("vpa_spec", "create", "gates", "old_spec", "error", "warnings"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_validate_vpa(
    vpa_spec: JSON,
    create: bool,
    gates: FeatureGates,
    old_spec: JSON | None,
    error: str | None,
    warnings: list[str],
) -> None:
    old = None if old_spec is None else vpa(old_spec)
    result = validate_vpa(vpa(vpa_spec), gates, old=old, create=create)
    if error is None:
        assert result.allowed, result.message()
    else:
        assert result.errors, "expected a rejection"
        assert str(result.errors[0]) == error
    assert sorted(result.warnings) == sorted(warnings)


# --- TestAllowCPUBoost / TestAllowPerVPAConfig: a gated field is allowed when the gate is on, or on an
#     update when the old object already used the feature ------------------------------------------------

BOOSTED_TOP = spec(startupBoost=FACTOR_2)
EVICT_60 = spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60})
ALLOW: list[tuple[str, JSON, FeatureGates, JSON | None, bool]] = [
    ("boost: feature enabled returns true", BOOSTED_TOP, BOOST, None, True),
    ("boost: feature disabled and oldObj nil returns false", BOOSTED_TOP, OFF, None, False),
    (
        "boost: feature disabled but top-level StartupBoost.CPU set returns true",
        BOOSTED_TOP,
        OFF,
        BOOSTED_TOP,
        True,
    ),
    (
        "boost: feature disabled but container StartupBoost set returns true",
        BOOSTED_TOP,
        OFF,
        in_policy(startupBoost=FACTOR_2),
        True,
    ),
    (
        "boost: feature disabled and no startup boost configured returns false",
        BOOSTED_TOP,
        OFF,
        in_policy(),
        False,
    ),
    (
        "boost: feature disabled with empty container policies returns false",
        BOOSTED_TOP,
        OFF,
        spec(resourcePolicy=policies()),
        False,
    ),
    ("boost: feature disabled with ResourcePolicy nil returns false", BOOSTED_TOP, OFF, spec(), False),
    ("per-vpa: feature enabled returns true", EVICT_60, PER_VPA, None, True),
    ("per-vpa: feature disabled and oldObj nil returns false", EVICT_60, OFF, None, False),
    (
        "per-vpa: feature disabled but EvictAfterOOMSeconds set returns true",
        EVICT_60,
        OFF,
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 30}),
        True,
    ),
    (
        "per-vpa: feature disabled but OOMBumpUpRatio set returns true",
        EVICT_60,
        OFF,
        in_policy(oomBumpUpRatio="2"),
        True,
    ),
    (
        "per-vpa: feature disabled but OOMMinBumpUp set returns true",
        EVICT_60,
        OFF,
        in_policy(oomMinBumpUp="100Mi"),
        True,
    ),
    ("per-vpa: feature disabled and no per-vpa config returns false", EVICT_60, OFF, in_policy(), False),
    (
        "per-vpa: feature disabled with empty container policies returns false",
        EVICT_60,
        OFF,
        spec(resourcePolicy=policies()),
        False,
    ),
]


@pytest.mark.parametrize(
    ("vpa_spec", "gates", "old_spec", "allowed"), [c[1:] for c in ALLOW], ids=[c[0] for c in ALLOW]
)
def test_allow_gated_feature(
    vpa_spec: JSON, gates: FeatureGates, old_spec: JSON | None, allowed: bool
) -> None:
    old = None if old_spec is None else vpa(old_spec)
    assert validate_vpa(vpa(vpa_spec), gates, old=old).allowed is allowed
