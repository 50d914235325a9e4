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


def spec(**fields: Any) -> JSON:
    return {"targetRef": TARGET, **fields}


def policies(*entries: JSON) -> JSON:
    return {"containerPolicies": list(entries)}


def loot_box(**fields: Any) -> JSON:
    return {"containerName": "loot box", **fields}


def valid_limits(**fields: Any) -> JSON:
    return loot_box(mode="Auto", minAllowed={"cpu": "10"}, maxAllowed={"cpu": "100"}, **fields)


PER_VPA_GATE = "not supported when feature flag PerVPAConfig is disabled"
OFF_MODE = {"updateMode": "Off"}
FACTOR_2 = {"cpu": {"type": "Factor", "factor": 2}}

# (name, spec, create, gates, old object's spec or None, first error or None, warnings)
CASES: list[tuple[str, JSON, bool, FeatureGates, JSON | None, str | None, list[str]]] = [
    ("empty update", {}, False, OFF, {}, None, []),
    (
        "empty create",
        {},
        True,
        OFF,
        None,
        "spec.targetRef: Required value: If you're using v1beta1 version of the API, please migrate to v1",
        [],
    ),
    (
        "no update mode",
        spec(updatePolicy={}),
        False,
        OFF,
        {},
        "spec.updatePolicy.updateMode: Required value: updateMode is required if UpdatePolicy is used",
        [],
    ),
    (
        "bad update mode",
        spec(updatePolicy={"updateMode": "bad"}),
        False,
        OFF,
        {},
        'spec.updatePolicy.updateMode: Unsupported value: "bad": supported values: "InPlace", '
        '"InPlaceOrRecreate", "Initial", "Off", "Recreate"',
        [],
    ),
    (
        "InPlaceOrRecreate update mode set",
        spec(updatePolicy={"updateMode": "InPlaceOrRecreate"}),
        False,
        OFF,
        {},
        None,
        [],
    ),
    (
        "deprecated Auto update mode set",
        spec(updatePolicy={"updateMode": "Auto"}),
        False,
        OFF,
        {},
        None,
        [AUTO_DEPRECATION_WARNING],
    ),
    (
        "zero minReplicas",
        spec(updatePolicy={"minReplicas": 0, "updateMode": "Off"}),
        False,
        OFF,
        {},
        "spec.updatePolicy.minReplicas: Invalid value: 0: minReplicas has to be positive",
        [],
    ),
    (
        "no policy name",
        spec(resourcePolicy=policies({})),
        False,
        OFF,
        {},
        f"{P}.containerName: Required value",
        [],
    ),
    (
        "invalid scaling mode",
        spec(resourcePolicy=policies(loot_box(mode="bad"))),
        False,
        OFF,
        {},
        f'{P}.mode: Unsupported value: "bad": supported values: "Auto", "Off"',
        [],
    ),
    (
        "more than one recommender",
        spec(updatePolicy=OFF_MODE, recommenders=[{"name": "test1"}, {"name": "test2"}]),
        False,
        OFF,
        {},
        "spec.recommenders: Too many: 2: must have at most 1 item",
        [],
    ),
    (
        "bad limits",
        spec(resourcePolicy=policies(loot_box(minAllowed={"cpu": "100"}, maxAllowed={"cpu": "10"}))),
        False,
        OFF,
        {},
        f'{P}.maxAllowed[cpu]: Invalid value: "10": max resource for cpu is lower than min of "100"',
        [],
    ),
    (
        "bad minAllowed cpu value",
        spec(resourcePolicy=policies(loot_box(minAllowed={"cpu": "187500u"}, maxAllowed={"cpu": "275m"}))),
        False,
        OFF,
        {},
        f'{P}.minAllowed[cpu]: Invalid value: "187500u": must be a whole number of milli CPUs',
        [],
    ),
    (
        "bad minAllowed memory value",
        spec(
            resourcePolicy=policies(
                loot_box(
                    minAllowed={"cpu": "1m", "memory": "100m"}, maxAllowed={"cpu": "275m", "memory": "500M"}
                )
            )
        ),
        False,
        OFF,
        {},
        f'{P}.minAllowed[memory]: Invalid value: "100m": must be a whole number of bytes',
        [],
    ),
    (
        "bad maxAllowed cpu value",
        spec(resourcePolicy=policies(loot_box(minAllowed={}, maxAllowed={"cpu": "187500u"}))),
        False,
        OFF,
        {},
        f'{P}.maxAllowed[cpu]: Invalid value: "187500u": must be a whole number of milli CPUs',
        [],
    ),
    (
        "bad maxAllowed memory value",
        spec(
            resourcePolicy=policies(
                loot_box(minAllowed={"cpu": "1m"}, maxAllowed={"cpu": "275m", "memory": "500m"})
            )
        ),
        False,
        OFF,
        {},
        f'{P}.maxAllowed[memory]: Invalid value: "500m": must be a whole number of bytes',
        [],
    ),
    (
        "scaling off with controlled values requests and limits",
        spec(resourcePolicy=policies(loot_box(mode="Off", controlledValues="RequestsAndLimits"))),
        False,
        OFF,
        {},
        f"{P}.controlledValues: Forbidden: "
        "controlledValues shouldn't be specified if container scaling mode is off",
        [],
    ),
    (
        "all valid",
        spec(resourcePolicy=policies(valid_limits()), updatePolicy={"updateMode": "Off", "minReplicas": 1}),
        False,
        OFF,
        {},
        None,
        [],
    ),
    (
        "top-level startupBoost with feature gate disabled",
        spec(startupBoost={"cpu": {"factor": 2}}),
        True,
        OFF,
        None,
        f"spec.startupBoost: Forbidden: {BOOST_GATE}",
        [],
    ),
    (
        "container startupBoost with feature gate disabled",
        spec(resourcePolicy=policies(loot_box(startupBoost={"cpu": {"factor": 2}}))),
        True,
        OFF,
        None,
        f"{P}.startupBoost: Forbidden: {BOOST_GATE}",
        [],
    ),
    (
        "top-level startupBoost with bad factor",
        spec(startupBoost={"cpu": {"type": "Factor", "factor": 0}}),
        True,
        BOOST,
        None,
        "spec.startupBoost.cpu.factor: Invalid value: 0: must be >= 1 for type Factor",
        [],
    ),
    (
        "container startupBoost with bad factor",
        spec(resourcePolicy=policies(loot_box(startupBoost={"cpu": {"type": "Factor", "factor": 0}}))),
        True,
        BOOST,
        None,
        f"{P}.startupBoost.cpu.factor: Invalid value: 0: must be >= 1 for type Factor",
        [],
    ),
    (
        "top-level startupBoost with bad quantity",
        spec(startupBoost={"cpu": {"type": "Quantity", "quantity": "187500u"}}),
        True,
        BOOST,
        None,
        'spec.startupBoost.cpu.quantity: Invalid value: "187500u": must be a whole number of milli CPUs',
        [],
    ),
    (
        "container startupBoost with bad quantity",
        spec(
            resourcePolicy=policies(
                loot_box(startupBoost={"cpu": {"type": "Quantity", "quantity": "187500u"}})
            )
        ),
        True,
        BOOST,
        None,
        f'{P}.startupBoost.cpu.quantity: Invalid value: "187500u": must be a whole number of milli CPUs',
        [],
    ),
    (
        "top-level startupBoost with bad type",
        spec(startupBoost={"cpu": {"type": "bad"}}),
        True,
        BOOST,
        None,
        'spec.startupBoost.cpu.type: Unsupported value: "bad": supported values: "Factor", "Quantity"',
        [],
    ),
    (
        "container startupBoost with bad type",
        spec(resourcePolicy=policies(loot_box(startupBoost={"cpu": {"type": "bad"}}))),
        True,
        BOOST,
        None,
        f'{P}.startupBoost.cpu.type: Unsupported value: "bad": supported values: "Factor", "Quantity"',
        [],
    ),
    (
        "top-level startupBoost with empty type",
        spec(startupBoost={"cpu": {}}),
        True,
        BOOST,
        None,
        "spec.startupBoost.cpu.type: Required value: must be either Factor or Quantity",
        [],
    ),
    (
        "container startupBoost with empty type",
        spec(resourcePolicy=policies(loot_box(startupBoost={"cpu": {}}))),
        True,
        BOOST,
        None,
        f"{P}.startupBoost.cpu.type: Required value: must be either Factor or Quantity",
        [],
    ),
    ("top-level startupBoost with valid factor", spec(startupBoost=FACTOR_2), True, BOOST, None, None, []),
    (
        "container startupBoost with valid factor",
        spec(resourcePolicy=policies(loot_box(startupBoost=FACTOR_2))),
        True,
        BOOST,
        None,
        None,
        [],
    ),
    (
        "top-level startupBoost with valid quantity",
        spec(startupBoost={"cpu": {"type": "Quantity", "quantity": "100m"}}),
        True,
        BOOST,
        None,
        None,
        [],
    ),
    (
        "container startupBoost with valid quantity",
        spec(
            resourcePolicy=policies(loot_box(startupBoost={"cpu": {"type": "Quantity", "quantity": "100m"}}))
        ),
        True,
        BOOST,
        None,
        None,
        [],
    ),
    (
        "top-level and container startupBoost",
        spec(
            startupBoost=FACTOR_2,
            resourcePolicy=policies(loot_box(startupBoost={"cpu": {"type": "Quantity", "quantity": "100m"}})),
        ),
        True,
        BOOST,
        None,
        None,
        [],
    ),
    (
        "per-vpa config active and used",
        spec(updatePolicy=OFF_MODE, resourcePolicy=policies(valid_limits(oomBumpUpRatio="2"))),
        True,
        PER_VPA,
        None,
        None,
        [],
    ),
    (
        "per-vpa config active and used evictOOMThreshold",
        spec(
            updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 600},
            resourcePolicy=policies(valid_limits(oomBumpUpRatio="2")),
        ),
        True,
        PER_VPA,
        None,
        None,
        [],
    ),
    (
        "Invalid oomBumpUpRatio (negative value)",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(
                {"containerName": "*", "mode": "Auto", "oomBumpUpRatio": "-1", "oomMinBumpUp": "104857600"}
            ),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.oomBumpUpRatio: Invalid value: -1: must be greater than or equal to 1.0",
        [],
    ),
    (
        "Invalid oomBumpUpRatio (less than 1)",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(
                {"containerName": "*", "mode": "Auto", "oomBumpUpRatio": "0.5", "oomMinBumpUp": "104857600"}
            ),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.oomBumpUpRatio: Invalid value: 0.5: must be greater than or equal to 1.0",
        [],
    ),
    (
        "Invalid oomMinBumpUp (negative value)",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(
                {"containerName": "*", "mode": "Auto", "oomBumpUpRatio": "2", "oomMinBumpUp": "-1"}
            ),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.oomMinBumpUp: Invalid value: -1: must be greater than or equal to 0",
        [],
    ),
    (
        "per-vpa config disabled and used",
        spec(updatePolicy=OFF_MODE, resourcePolicy=policies(valid_limits(oomMinBumpUp="2"))),
        True,
        OFF,
        None,
        f"{P}.oomMinBumpUp: Forbidden: not supported when feature flag PerVPAConfig is disabled",
        [],
    ),
    (
        "per-vpa config active with MemoryAggregationIntervalSeconds",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(valid_limits(memoryAggregationIntervalSeconds=3600)),
        ),
        True,
        PER_VPA,
        None,
        None,
        [],
    ),
    (
        "per-vpa config disabled with MemoryAggregationIntervalSeconds",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(valid_limits(memoryAggregationIntervalSeconds=3600)),
        ),
        True,
        OFF,
        None,
        f"{P}.memoryAggregationIntervalSeconds: Forbidden: {PER_VPA_GATE}",
        [],
    ),
    (
        "per-vpa config active with MemoryAggregationIntervalCount",
        spec(updatePolicy=OFF_MODE, resourcePolicy=policies(valid_limits(memoryAggregationIntervalCount=10))),
        True,
        PER_VPA,
        None,
        None,
        [],
    ),
    (
        "per-vpa config disabled with MemoryAggregationIntervalCount",
        spec(updatePolicy=OFF_MODE, resourcePolicy=policies(valid_limits(memoryAggregationIntervalCount=10))),
        True,
        OFF,
        None,
        f"{P}.memoryAggregationIntervalCount: Forbidden: {PER_VPA_GATE}",
        [],
    ),
    (
        "invalid MemoryAggregationIntervalSeconds zero",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(loot_box(mode="Auto", memoryAggregationIntervalSeconds=0)),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.memoryAggregationIntervalSeconds: Invalid value: 0: must be greater than or equal to 1",
        [],
    ),
    (
        "invalid MemoryAggregationIntervalSeconds negative",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(loot_box(mode="Auto", memoryAggregationIntervalSeconds=-5)),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.memoryAggregationIntervalSeconds: Invalid value: -5: must be greater than or equal to 1",
        [],
    ),
    (
        "invalid MemoryAggregationIntervalCount zero",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(loot_box(mode="Auto", memoryAggregationIntervalCount=0)),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.memoryAggregationIntervalCount: Invalid value: 0: must be greater than or equal to 1",
        [],
    ),
    (
        "invalid MemoryAggregationIntervalCount negative",
        spec(
            updatePolicy=OFF_MODE,
            resourcePolicy=policies(loot_box(mode="Auto", memoryAggregationIntervalCount=-3)),
        ),
        True,
        PER_VPA,
        None,
        f"{P}.memoryAggregationIntervalCount: Invalid value: -3: must be greater than or equal to 1",
        [],
    ),
    (
        "creating VPA with InPlace update mode not allowed by disabled feature gate",
        spec(updatePolicy={"updateMode": "InPlace"}),
        True,
        OFF,
        None,
        "spec.updatePolicy.updateMode: Forbidden: in order to use UpdateMode InPlace, "
        "you must enable feature gate "
        "InPlace in the admission-controller args",
        [],
    ),
    (
        "InPlace update mode with minReplicas",
        spec(updatePolicy={"updateMode": "InPlace", "minReplicas": 1}),
        True,
        IN_PLACE,
        None,
        None,
        [],
    ),
    (
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
        True,
        IN_PLACE,
        None,
        None,
        [],
    ),
    (
        "unsupported controlledResources entry rejected on create",
        spec(resourcePolicy=policies(loot_box(controlledResources=["cpu", "broken"]))),
        True,
        OFF,
        None,
        f'{P}.controlledResources[1]: Unsupported value: "broken": supported values: "cpu", "memory"',
        [],
    ),
    (
        "unsupported controlledResources entry allowed when present in old VPA",
        spec(resourcePolicy=policies(loot_box(controlledResources=["cpu", "broken"]))),
        False,
        OFF,
        spec(resourcePolicy=policies(loot_box(controlledResources=["broken"]))),
        None,
        [
            f'{P}.controlledResources[1]: unsupported value "broken" is allowed only because it is present '
            "in the "
            'existing VPA object; supported values: "cpu", "memory"'
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
    obj = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": vpa_spec,
    }
    old = None if old_spec is None else {**obj, "spec": old_spec}
    result = validate_vpa(obj, gates, old=old, create=create)
    if error is None:
        assert result.allowed, result.message()
    else:
        assert result.errors, "expected a rejection"
        assert str(result.errors[0]) == error
    assert sorted(result.warnings) == sorted(warnings)


# --- TestAllowCPUBoost / TestAllowPerVPAConfig: a gated field is allowed when the gate is on, or on an
#     update when the old object already used the feature ------------------------------------------------

BOOSTED_TOP = spec(startupBoost=FACTOR_2)
BOOSTED_CONTAINER = spec(resourcePolicy=policies(loot_box(startupBoost=FACTOR_2)))
PLAIN = spec()
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
        BOOSTED_CONTAINER,
        True,
    ),
    (
        "boost: feature disabled and no startup boost configured returns false",
        BOOSTED_TOP,
        OFF,
        spec(resourcePolicy=policies(loot_box())),
        False,
    ),
    (
        "boost: feature disabled with empty container policies returns false",
        BOOSTED_TOP,
        OFF,
        spec(resourcePolicy=policies()),
        False,
    ),
    ("boost: feature disabled with ResourcePolicy nil returns false", BOOSTED_TOP, OFF, PLAIN, False),
    (
        "per-vpa: feature enabled returns true",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
        PER_VPA,
        None,
        True,
    ),
    (
        "per-vpa: feature disabled and oldObj nil returns false",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
        OFF,
        None,
        False,
    ),
    (
        "per-vpa: feature disabled but EvictAfterOOMSeconds set returns true",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
        OFF,
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 30}),
        True,
    ),
    (
        "per-vpa: feature disabled but OOMBumpUpRatio set returns true",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
        OFF,
        spec(resourcePolicy=policies(loot_box(oomBumpUpRatio="2"))),
        True,
    ),
    (
        "per-vpa: feature disabled but OOMMinBumpUp set returns true",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
        OFF,
        spec(resourcePolicy=policies(loot_box(oomMinBumpUp="100Mi"))),
        True,
    ),
    (
        "per-vpa: feature disabled and no per-vpa config returns false",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
        OFF,
        spec(resourcePolicy=policies(loot_box())),
        False,
    ),
    (
        "per-vpa: feature disabled with empty container policies returns false",
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
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
    obj = {"metadata": {"name": "v", "namespace": "default"}, "spec": vpa_spec}
    old = None if old_spec is None else {**obj, "spec": old_spec}
    assert validate_vpa(obj, gates, old=old).allowed is allowed
