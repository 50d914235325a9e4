"""VPA object admission: one accept and one reject row per rule, gates, old-object exemptions, defaulting,
malformed values named by field, and a property test that validation never raises."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import make_vpa
from vpa.kube.converting import vpa_from_dict
from vpa.logic.admission.validation import AUTO_DEPRECATION_WARNING, validate_vpa
from vpa.model.features import FeatureGates

JSON = dict[str, Any]
OFF = FeatureGates()
ALL = FeatureGates.parse("InPlace=true,PerVPAConfig=true,CPUStartupBoost=true")


def vpa(**spec_changes: Any) -> JSON:
    obj = make_vpa()
    for key, value in spec_changes.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = value
    return obj


def policy(**fields: Any) -> JSON:
    return {"resourcePolicy": {"containerPolicies": [{"containerName": "app", **fields}]}}


def with_policy(**fields: Any) -> JSON:
    return vpa(**policy(**fields))


P = "spec.resourcePolicy.containerPolicies[0]"
BOOST_FORBIDDEN = (
    "Forbidden: in order to use startupBoost, you must enable feature gate CPUStartupBoost "
    "in the admission-controller args"
)

# (id, object, gates, expected error strings)
RULES: list[tuple[str, JSON, FeatureGates, list[str]]] = [
    ("valid-recreate", vpa(), OFF, []),
    (
        "update-mode-required",
        vpa(updatePolicy={"minReplicas": 2}),
        OFF,
        ["spec.updatePolicy.updateMode: Required value: updateMode is required if UpdatePolicy is used"],
    ),
    (
        "update-mode-unknown",
        vpa(updatePolicy={"updateMode": "Sometimes"}),
        OFF,
        [
            'spec.updatePolicy.updateMode: Unsupported value: "Sometimes": '
            'supported values: "InPlace", "InPlaceOrRecreate", '
            '"Initial", "Off", "Recreate"'
        ],
    ),
    ("in-place-or-recreate", vpa(updatePolicy={"updateMode": "InPlaceOrRecreate"}), OFF, []),
    ("in-place-with-gate", vpa(updatePolicy={"updateMode": "InPlace"}), ALL, []),
    (
        "in-place-without-gate",
        vpa(updatePolicy={"updateMode": "InPlace"}),
        OFF,
        [
            "spec.updatePolicy.updateMode: Forbidden: in order to use UpdateMode "
            "InPlace, you must enable feature gate "
            "InPlace in the admission-controller args"
        ],
    ),
    (
        # AEP-4016's name for the mode; upstream's CRD enum (and ours) never had it: not an alias.
        "in-place-only-is-unsupported",
        vpa(updatePolicy={"updateMode": "InPlaceOnly"}),
        ALL,
        [
            'spec.updatePolicy.updateMode: Unsupported value: "InPlaceOnly": supported values: '
            '"InPlace", "InPlaceOrRecreate", "Initial", "Off", "Recreate"'
        ],
    ),
    ("min-replicas-positive", vpa(updatePolicy={"updateMode": "Recreate", "minReplicas": 1}), OFF, []),
    (
        "min-replicas-zero",
        vpa(updatePolicy={"updateMode": "Recreate", "minReplicas": 0}),
        OFF,
        ["spec.updatePolicy.minReplicas: Invalid value: 0: minReplicas has to be positive"],
    ),
    (
        "evict-after-oom-with-gate",
        vpa(updatePolicy={"updateMode": "Recreate", "evictAfterOOMSeconds": 30}),
        ALL,
        [],
    ),
    (
        "evict-after-oom-without-gate",
        vpa(updatePolicy={"updateMode": "Recreate", "evictAfterOOMSeconds": 30}),
        OFF,
        [
            "spec.updatePolicy.evictAfterOOMSeconds: Forbidden: not supported when "
            "feature flag PerVPAConfig is disabled"
        ],
    ),
    (
        "evict-after-oom-zero",
        vpa(updatePolicy={"updateMode": "Recreate", "evictAfterOOMSeconds": 0}),
        ALL,
        ["spec.updatePolicy.evictAfterOOMSeconds: Invalid value: 0: must be greater than or equal to 1"],
    ),
    (
        "container-name-empty",
        vpa(resourcePolicy={"containerPolicies": [{"containerName": ""}]}),
        OFF,
        [f"{P}.containerName: Required value"],
    ),
    ("mode-off", with_policy(mode="Off"), OFF, []),
    (
        "mode-unknown",
        with_policy(mode="Sometimes"),
        OFF,
        [f'{P}.mode: Unsupported value: "Sometimes": supported values: "Auto", "Off"'],
    ),
    ("whole-millicores", with_policy(minAllowed={"cpu": "1500m", "memory": "1Gi"}), OFF, []),
    (
        "fractional-millicores",
        with_policy(minAllowed={"cpu": "0.0005"}),
        OFF,
        [f'{P}.minAllowed[cpu]: Invalid value: "500u": must be a whole number of milli CPUs'],
    ),
    (
        "fractional-bytes",
        with_policy(maxAllowed={"memory": "1.5"}),
        OFF,
        [f'{P}.maxAllowed[memory]: Invalid value: "1500m": must be a whole number of bytes'],
    ),
    ("max-equal-min", with_policy(minAllowed={"cpu": "1"}, maxAllowed={"cpu": "1000m"}), OFF, []),
    (
        "max-below-min",
        with_policy(minAllowed={"memory": "2Gi"}, maxAllowed={"memory": "1Gi"}),
        OFF,
        [f'{P}.maxAllowed[memory]: Invalid value: "1Gi": max resource for memory is lower than min of "2Gi"'],
    ),
    ("off-with-requests-only", with_policy(mode="Off", controlledValues="RequestsOnly"), OFF, []),
    (
        "off-with-requests-and-limits",
        with_policy(mode="Off", controlledValues="RequestsAndLimits"),
        OFF,
        [
            f"{P}.controlledValues: Forbidden: controlledValues shouldn't be "
            f"specified if container scaling mode is off"
        ],
    ),
    (
        "controlled-values-unknown",
        with_policy(controlledValues="LimitsOnly"),
        OFF,
        [
            f'{P}.controlledValues: Unsupported value: "LimitsOnly": supported '
            f'values: "RequestsAndLimits", "RequestsOnly"'
        ],
    ),
    ("controlled-resources-cpu-memory", with_policy(controlledResources=["cpu", "memory"]), OFF, []),
    (
        "controlled-resources-other",
        with_policy(controlledResources=["cpu", "ephemeral-storage"]),
        OFF,
        [
            f'{P}.controlledResources[1]: Unsupported value: "ephemeral-storage": '
            f'supported values: "cpu", "memory"'
        ],
    ),
    (
        "per-vpa-fields-with-gate",
        with_policy(
            oomBumpUpRatio="1.5",
            oomMinBumpUp="100Mi",
            memoryAggregationIntervalSeconds=3600,
            memoryAggregationIntervalCount=8,
        ),
        ALL,
        [],
    ),
    (
        "per-vpa-fields-without-gate",
        with_policy(
            oomBumpUpRatio="1.5",
            oomMinBumpUp="100Mi",
            memoryAggregationIntervalSeconds=3600,
            memoryAggregationIntervalCount=8,
        ),
        OFF,
        [
            f"{P}.oomBumpUpRatio: Forbidden: not supported when feature flag PerVPAConfig is disabled",
            f"{P}.oomMinBumpUp: Forbidden: not supported when feature flag PerVPAConfig is disabled",
            f"{P}.memoryAggregationIntervalSeconds: Forbidden: not supported when "
            f"feature flag PerVPAConfig is disabled",
            f"{P}.memoryAggregationIntervalCount: Forbidden: not supported when "
            f"feature flag PerVPAConfig is disabled",
        ],
    ),
    (
        "per-vpa-fields-out-of-range",
        with_policy(
            oomBumpUpRatio=0.5,
            oomMinBumpUp="-1",
            memoryAggregationIntervalSeconds=0,
            memoryAggregationIntervalCount=0,
        ),
        ALL,
        [
            f"{P}.oomBumpUpRatio: Invalid value: 0.5: must be greater than or equal to 1.0",
            f"{P}.oomMinBumpUp: Invalid value: -1: must be greater than or equal to 0",
            f"{P}.memoryAggregationIntervalSeconds: Invalid value: 0: must be greater than or equal to 1",
            f"{P}.memoryAggregationIntervalCount: Invalid value: 0: must be greater than or equal to 1",
        ],
    ),
    ("boost-factor", vpa(startupBoost={"cpu": {"type": "Factor", "factor": 2}}), ALL, []),
    (
        "boost-without-gate",
        vpa(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
        OFF,
        [f"spec.startupBoost: {BOOST_FORBIDDEN}"],
    ),
    (
        "container-boost-without-gate",
        with_policy(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
        OFF,
        [f"{P}.startupBoost: {BOOST_FORBIDDEN}"],
    ),
    (
        "boost-type-empty",
        vpa(startupBoost={"cpu": {"factor": 2}}),
        ALL,
        ["spec.startupBoost.cpu.type: Required value: must be either Factor or Quantity"],
    ),
    (
        "boost-factor-missing",
        vpa(startupBoost={"cpu": {"type": "Factor"}}),
        ALL,
        ["spec.startupBoost.cpu.factor: Required value: required when type is Factor"],
    ),
    (
        "boost-factor-zero",
        vpa(startupBoost={"cpu": {"type": "Factor", "factor": 0}}),
        ALL,
        ["spec.startupBoost.cpu.factor: Invalid value: 0: must be >= 1 for type Factor"],
    ),
    ("boost-quantity", vpa(startupBoost={"cpu": {"type": "Quantity", "quantity": "500m"}}), ALL, []),
    (
        "boost-quantity-missing",
        vpa(startupBoost={"cpu": {"type": "Quantity"}}),
        ALL,
        ["spec.startupBoost.cpu.quantity: Required value: required when type is Quantity"],
    ),
    (
        "boost-quantity-fractional",
        vpa(startupBoost={"cpu": {"type": "Quantity", "quantity": "0.0001"}}),
        ALL,
        ['spec.startupBoost.cpu.quantity: Invalid value: "100u": must be a whole number of milli CPUs'],
    ),
    (
        "boost-type-unknown",
        vpa(startupBoost={"cpu": {"type": "Double"}}),
        ALL,
        ['spec.startupBoost.cpu.type: Unsupported value: "Double": supported values: "Factor", "Quantity"'],
    ),
    ("one-recommender", vpa(recommenders=[{"name": "custom"}]), OFF, []),
    (
        "two-recommenders",
        vpa(recommenders=[{"name": "a"}, {"name": "b"}]),
        OFF,
        ["spec.recommenders: Too many: 2: must have at most 1 item"],
    ),
    (
        "target-ref-required-on-create",
        vpa(targetRef=None),
        OFF,
        ["spec.targetRef: Required value: If you're using v1beta1 version of the API, please migrate to v1"],
    ),
]


@pytest.mark.parametrize(("obj", "gates", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rules(obj: JSON, gates: FeatureGates, expected: list[str]) -> None:
    result = validate_vpa(obj, gates)
    assert [str(e) for e in result.errors] == expected
    assert result.allowed is (not expected)
    if result.allowed:
        vpa_from_dict(obj)  # anything accepted converts to a VpaView


MALFORMED: list[tuple[str, JSON, str]] = [
    ("spec-not-object", {"spec": "x"}, 'spec: Invalid value: "x": expected an object, got string'),
    (
        "target-kind-number",
        vpa(targetRef={"kind": 3, "name": "web"}),
        "spec.targetRef.kind: Invalid value: 3: expected a string, got number",
    ),
    (
        "mode-number",
        vpa(updatePolicy={"updateMode": 1}),
        "spec.updatePolicy.updateMode: Invalid value: 1: expected a string, got number",
    ),
    (
        "min-replicas-bool",
        vpa(updatePolicy={"updateMode": "Off", "minReplicas": True}),
        "spec.updatePolicy.minReplicas: Invalid value: true: expected an integer, got boolean",
    ),
    (
        "policies-not-list",
        vpa(resourcePolicy={"containerPolicies": {}}),
        "spec.resourcePolicy.containerPolicies: Invalid value: {}: expected an array, got object",
    ),
    (
        "bad-quantity",
        with_policy(minAllowed={"cpu": "lots"}),
        f'{P}.minAllowed[cpu]: Invalid value: "lots": quantity',
    ),
    (
        "quantity-list",
        with_policy(maxAllowed={"memory": [1]}),
        f"{P}.maxAllowed[memory]: Invalid value: [1]: expected a quantity",
    ),
    (
        "boost-cpu-string",
        vpa(startupBoost={"cpu": "fast"}),
        'spec.startupBoost.cpu: Invalid value: "fast": expected an object',
    ),
    ("recommender-name-missing", vpa(recommenders=[{}]), "spec.recommenders[0].name: Required value"),
]


@pytest.mark.parametrize(("obj", "prefix"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_values_are_named(obj: JSON, prefix: str) -> None:
    result = validate_vpa(obj, ALL)
    assert not result.allowed
    assert str(result.errors[0]).startswith(prefix)


def test_not_an_object() -> None:
    assert (
        str(validate_vpa([1], OFF).errors[0]) == "<object>: Invalid value: [1]: expected an object, got array"
    )


@pytest.mark.parametrize(
    ("mode", "warning"),
    [("Auto", AUTO_DEPRECATION_WARNING), ("Recreate", None)],
    ids=["auto", "recreate"],
)
def test_mode_warnings(mode: str, warning: str | None) -> None:
    result = validate_vpa(vpa(updatePolicy={"updateMode": mode}), ALL)
    assert result.allowed
    assert result.warnings == ((warning,) if warning else ())


def test_defaulting_patch() -> None:
    result = validate_vpa(vpa(updatePolicy=None), OFF)
    assert result.patch == ({"op": "add", "path": "/spec/updatePolicy", "value": {"updateMode": "Recreate"}},)
    assert validate_vpa(vpa(), OFF).patch == ()
    assert validate_vpa(vpa(updatePolicy={"minReplicas": 1}), OFF).patch == ()  # rejected: no patch


def test_target_ref_optional_on_update() -> None:
    obj = vpa(targetRef=None)
    assert validate_vpa(obj, OFF, old=copy.deepcopy(obj)).allowed


# --- UPDATE: features already used by the old object stay allowed with the gate off -------------------------

EXEMPTIONS: list[tuple[str, JSON, JSON]] = [
    ("in-place", vpa(updatePolicy={"updateMode": "InPlace"}), vpa(updatePolicy={"updateMode": "InPlace"})),
    (
        "evict-after-oom",
        vpa(updatePolicy={"updateMode": "Recreate", "evictAfterOOMSeconds": 60}),
        vpa(updatePolicy={"updateMode": "Recreate", "evictAfterOOMSeconds": 30}),
    ),
    ("oom-ratio", with_policy(oomBumpUpRatio="2"), with_policy(memoryAggregationIntervalCount=3)),
    (
        "pod-boost",
        vpa(startupBoost={"cpu": {"type": "Factor", "factor": 3}}),
        vpa(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
    ),
    (
        "container-boost",
        vpa(startupBoost={"cpu": {"type": "Factor", "factor": 3}}),
        with_policy(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
    ),
]


@pytest.mark.parametrize(("new", "old"), [e[1:] for e in EXEMPTIONS], ids=[e[0] for e in EXEMPTIONS])
def test_old_object_exemptions(new: JSON, old: JSON) -> None:
    assert validate_vpa(new, OFF, old=old).allowed
    assert not validate_vpa(new, OFF, old=vpa()).allowed  # an old object without the feature does not help
    assert not validate_vpa(new, OFF).allowed  # nor does CREATE


def test_controlled_resource_kept_from_old_object_is_a_warning() -> None:
    new = with_policy(controlledResources=["cpu", "ephemeral-storage"])
    result = validate_vpa(new, OFF, old=copy.deepcopy(new))
    assert result.allowed
    assert result.warnings == (
        f'{P}.controlledResources[1]: unsupported value "ephemeral-storage" is allowed only because it is '
        'present in the existing VPA object; supported values: "cpu", "memory"',
    )
    other_container = vpa(
        resourcePolicy={
            "containerPolicies": [{"containerName": "db", "controlledResources": ["ephemeral-storage"]}]
        }
    )
    # upstream: any old container policy having the resource is enough, whichever container it named
    assert validate_vpa(new, OFF, old=other_container).allowed


def test_several_errors_message() -> None:
    result = validate_vpa(
        vpa(
            updatePolicy={"updateMode": "Recreate", "minReplicas": -1},
            recommenders=[{"name": "a"}, {"name": "b"}],
        ),
        OFF,
    )
    assert result.message() == (
        "[spec.updatePolicy.minReplicas: Invalid value: -1: minReplicas has to be positive, "
        "spec.recommenders: Too many: 2: must have at most 1 item]"
    )


# --- property: never raises ----------------------------------------------------------------------

JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(
        ["1", "100m", "1.5Gi", "-1", "1e3", "0.0001", "Off", "InPlace", "Factor", "Quantity", "cpu"]
    ),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "targetRef",
        "updatePolicy",
        "resourcePolicy",
        "startupBoost",
        "recommenders",
        "containerPolicies",
        "updateMode",
        "minReplicas",
        "evictAfterOOMSeconds",
        "containerName",
        "mode",
        "minAllowed",
        "maxAllowed",
        "controlledValues",
        "controlledResources",
        "oomBumpUpRatio",
        "oomMinBumpUp",
        "memoryAggregationIntervalSeconds",
        "cpu",
        "type",
        "factor",
        "quantity",
        "name",
        "evictionRequirements",
        "resources",
        "memory",
    ]
)
VPA_ISH = st.recursive(
    JSONISH,
    lambda children: st.dictionaries(KEYS, children, max_size=5) | st.lists(children, max_size=2),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(spec=VPA_ISH, old_spec=VPA_ISH, gates=st.sampled_from([OFF, ALL]))
def test_validation_never_raises(spec: object, old_spec: object, gates: FeatureGates) -> None:
    result = validate_vpa({"spec": spec}, gates, old={"spec": old_spec})
    for error in result.errors:
        assert str(error)
    validate_vpa(spec, gates)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"maxAllowed": {"cpu": "-100m"}},
         f'{P}.maxAllowed[cpu]: Invalid value: "-100m": must be greater than or equal to 0'),
        ({"maxAllowed": {"memory": "-1Gi"}},
         f'{P}.maxAllowed[memory]: Invalid value: "-1Gi": must be greater than or equal to 0'),
        ({"minAllowed": {"cpu": "-1"}},
         f'{P}.minAllowed[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
        ({"maxAllowed": {"cpu": "0", "memory": "0"}}, None),  # zero is allowed
    ],
    ids=["negative-max-cpu", "negative-max-memory", "negative-min-cpu", "zero"],
)  # fmt: skip
def test_negative_quantities_are_rejected_naming_the_field(fields: JSON, expected: str | None) -> None:
    result = validate_vpa(with_policy(**fields), OFF)
    if expected is None:
        assert result.allowed
    else:
        assert not result.allowed
        assert expected in result.message()


@pytest.mark.parametrize(
    ("value", "text"),
    [(-1.0, "-1"), (0.5, "0.5"), (2.0, "2"), (-1, "-1"), (float("inf"), "inf")],
)
def test_bad_values_print_as_go_does(value: object, text: str) -> None:
    from vpa.logic.admission.validation import _go_value

    assert _go_value(value) == text


def test_auto_warning_and_supported_modes_read_as_upstream_writes_them() -> None:
    # Upstream prints the update-mode list sorted bytewise (Go's sort.Strings, `Auto` left out) both in the
    # "Unsupported value" error and, as a Go slice, in the `Auto` deprecation warning on `spec.updatePolicy`.
    assert AUTO_DEPRECATION_WARNING == (
        'spec.updatePolicy: "Auto" mode is deprecated and will be removed in a future API version. '
        "Use explicit update modes like: [InPlace InPlaceOrRecreate Initial Off Recreate]. See "
        "https://github.com/kubernetes/autoscaler/issues/8424 for more details."
    )


def _annotated(annotations: dict[str, str]) -> JSON:
    obj = vpa()
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {
                "vpa.dev/memory-limit-decrease": "app=Never,*=OnRestart",
                "vpa.dev/resize-guard": "true",
                "vpa.dev/resize-guard-window": "15m",
            },
            [],
        ),
        (
            {"vpa.dev/resize-guard-window": "0s"},
            [
                'metadata.annotations[vpa.dev/resize-guard-window]: Invalid value: "0s": '
                "must be a positive duration"
            ],
        ),
        (
            {"vpa.dev/memory-limit-decrease": "app=Sometimes"},
            [
                'metadata.annotations[vpa.dev/memory-limit-decrease]: Invalid value: "app=Sometimes": '
                "unknown value 'Sometimes' for container 'app' (expected one of Always, Never, OnRestart)"
            ],
        ),
        (
            {"vpa.dev/resize-guard": "yes"},
            ['metadata.annotations[vpa.dev/resize-guard]: Unsupported value: "yes": supported values: '
             '"false", "true"'],
        ),
    ],
)
def test_own_annotations_must_parse(annotations: dict[str, str], expected: list[str]) -> None:
    result = validate_vpa(_annotated(annotations), OFF)
    assert [str(e) for e in result.errors] == expected
