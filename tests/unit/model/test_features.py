"""Feature gates: the gate table against the spec, `--feature-gates` parsing and component-base resolution.

Covers: names, stages, defaults and affected components of the upstream gates (spec §2.5), whitespace and
trailing commas, Go booleans, errors for unknown gates / missing or bad values, `AllAlpha` / `AllBeta`
(explicit pairs always win), locked gates, and the `FeatureGates` value's accessors.
"""

from __future__ import annotations

import pytest

from vpa.model import features
from vpa.model.features import FeatureGateError, FeatureGates, GateSpec, Stage


@pytest.mark.parametrize(
    ("name", "stage", "default", "since", "components"),
    [
        ("CPUStartupBoost", Stage.ALPHA, False, "1.6", {"admission-controller", "updater"}),
        ("InPlace", Stage.ALPHA, False, "1.7", {"admission-controller", "updater"}),
        ("PerVPAConfig", Stage.ALPHA, False, "1.5", {"admission-controller", "recommender", "updater"}),
        # Proposed upstream (AEP-8905 and AEP-7571 name these gates), implemented here ahead of upstream.
        ("NativeSidecar", Stage.ALPHA, False, "1.8", {"admission-controller", "recommender", "updater"}),
        ("PodLevelResources", Stage.ALPHA, False, "1.8", {"admission-controller", "updater"}),
        # Open upstream proposals (AEP-9936, AEP-9726), under the gate names they propose.
        ("VPAInitialDelay", Stage.ALPHA, False, "1.9", {"admission-controller", "recommender", "updater"}),
        ("InPlaceCapacityAware", Stage.ALPHA, False, "1.9", {"updater"}),
        # Ours (issue 46), named as a gate because the issue asks for one.
        ("ResizeGuard", Stage.ALPHA, False, "1.9", {"updater"}),
        ("DaemonSetScope", Stage.ALPHA, False, "1.9", {"admission-controller", "recommender", "updater"}),
        ("AllAlpha", Stage.ALPHA, False, "1.0", {"admission-controller", "recommender", "updater"}),
        ("AllBeta", Stage.BETA, False, "1.0", {"admission-controller", "recommender", "updater"}),
    ],
    # A set's id in sorted order: the same in every process, whatever its hash seed.
    ids=lambda value: "+".join(sorted(value)) if isinstance(value, set) else str(value),
)
def test_gate_table_matches_upstream(
    name: str, stage: Stage, default: bool, since: str, components: set[str]
) -> None:
    gate = features.gate_spec(name)
    assert (gate.stage, gate.default, gate.since, set(gate.components)) == (stage, default, since, components)


def test_gate_table_has_exactly_the_upstream_gates_and_the_proposed_ones() -> None:
    assert {gate.name for gate in features.GATES} == {
        "AllAlpha",
        "AllBeta",
        "CPUStartupBoost",
        "InPlace",
        "NativeSidecar",
        "PerVPAConfig",
        "PodLevelResources",
        "VPAInitialDelay",
        "InPlaceCapacityAware",
        "ResizeGuard",
        "DaemonSetScope",
    }


ALPHA_BUT_IN_PLACE = {
    "PerVPAConfig",
    "CPUStartupBoost",
    "NativeSidecar",
    "PodLevelResources",
    "VPAInitialDelay",
    "InPlaceCapacityAware",
    "ResizeGuard",
    "DaemonSetScope",
}


@pytest.mark.parametrize(
    ("text", "enabled"),
    [
        ("", set()),
        ("InPlace=true", {"InPlace"}),
        (
            "InPlace=true,PerVPAConfig=true,CPUStartupBoost=true",
            {"InPlace", "PerVPAConfig", "CPUStartupBoost"},
        ),
        (" InPlace = true , PerVPAConfig=1 ", {"InPlace", "PerVPAConfig"}),
        ("InPlace=true,", {"InPlace"}),
        ("InPlace=T,PerVPAConfig=TRUE,CPUStartupBoost=True", {"InPlace", "PerVPAConfig", "CPUStartupBoost"}),
        ("InPlace=true,InPlace=false", set()),  # later pair wins
        ("InPlace=false", set()),
        ("AllAlpha=true", {"InPlace", *ALPHA_BUT_IN_PLACE}),
        ("AllAlpha=true,InPlace=false", ALPHA_BUT_IN_PLACE),
        ("InPlace=false,AllAlpha=true", ALPHA_BUT_IN_PLACE),  # explicit wins in any order
        ("NativeSidecar=true,PodLevelResources=true", {"NativeSidecar", "PodLevelResources"}),
        ("AllAlpha=false,InPlace=true", {"InPlace"}),
        ("AllBeta=true", set()),  # every upstream gate is alpha
    ],
    ids=lambda value: repr(value) if isinstance(value, str) else "",
)
def test_parse_resolves(text: str, enabled: set[str]) -> None:
    gates = FeatureGates.parse(text)
    assert gates.enabled_gates == frozenset(enabled)
    for name in ("InPlace", "PerVPAConfig", "CPUStartupBoost"):
        assert gates.enabled(name) is (name in enabled)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Foo=true", "unrecognized feature gate: Foo"),
        ("InPlace=true,Bogus=false", "unrecognized feature gate: Bogus"),
        ("InPlaceOrRecreate=true", "unrecognized feature gate: InPlaceOrRecreate"),  # removed in 1.7
        ("inplace=true", "unrecognized feature gate: inplace"),  # names are case-sensitive
        ("InPlace", "missing bool value for InPlace"),
        ("InPlace=yes", "invalid value of InPlace=yes"),
        ("InPlace=", "invalid value of InPlace="),
    ],
    ids=lambda value: repr(value),
)
def test_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError) as caught:
        FeatureGates.parse(text)
    assert message in str(caught.value)


_TABLE = (
    GateSpec("AllAlpha", False, Stage.ALPHA, "1.0", (), "", meta=True),
    GateSpec("AllBeta", False, Stage.BETA, "1.0", (), "", meta=True),
    GateSpec("AlphaOne", False, Stage.ALPHA, "1.0", (), ""),
    GateSpec("BetaOn", True, Stage.BETA, "1.0", (), ""),
    GateSpec("BetaOff", False, Stage.BETA, "1.0", (), ""),
    GateSpec("LockedBeta", True, Stage.BETA, "1.0", (), "", locked_to_default=True),
    GateSpec("Ga", True, Stage.GA, "1.0", (), "", locked_to_default=True),
)


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ({}, {"AlphaOne": False, "BetaOn": True, "BetaOff": False, "LockedBeta": True, "Ga": True}),
        (
            {"AllBeta": True},
            {"AlphaOne": False, "BetaOn": True, "BetaOff": True, "LockedBeta": True, "Ga": True},
        ),
        (
            {"AllBeta": False},
            {"AlphaOne": False, "BetaOn": False, "BetaOff": False, "LockedBeta": True, "Ga": True},
        ),
        (
            {"AllBeta": False, "BetaOn": True},
            {"AlphaOne": False, "BetaOn": True, "BetaOff": False, "LockedBeta": True, "Ga": True},
        ),
        (
            {"AllAlpha": True, "AllBeta": False},
            {"AlphaOne": True, "BetaOn": False, "BetaOff": False, "LockedBeta": True, "Ga": True},
        ),
        ({"Ga": True}, {"AlphaOne": False, "BetaOn": True, "BetaOff": False, "LockedBeta": True, "Ga": True}),
    ],
    ids=[
        "defaults",
        "all-beta-on",
        "all-beta-off",
        "all-beta-off-explicit-wins",
        "alpha-on-beta-off",
        "locked-at-default-ok",
    ],
)
def test_meta_gates_follow_component_base(pairs: dict[str, bool], expected: dict[str, bool]) -> None:
    assert features.resolve_gate_values(pairs, _TABLE) == expected


def test_locked_gate_refuses_other_value() -> None:
    with pytest.raises(
        FeatureGateError, match="cannot set feature gate Ga to false, feature is locked to true"
    ):
        features.resolve_gate_values({"Ga": False}, _TABLE)


def test_feature_gates_value() -> None:
    gates = FeatureGates.parse("PerVPAConfig=true, InPlace=false")
    assert (gates.in_place, gates.per_vpa_config, gates.cpu_startup_boost) == (False, True, False)
    assert gates.as_flag() == "InPlace=false,PerVPAConfig=true"
    assert FeatureGates() == FeatureGates.parse("")
    with pytest.raises(KeyError):
        gates.enabled("AllAlpha")  # meta gates gate nothing
    with pytest.raises(KeyError):
        gates.enabled("Typo")
    with pytest.raises(FeatureGateError):
        FeatureGates(enabled_gates=frozenset({"Typo"}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", True),
        ("t", True),
        ("T", True),
        ("TRUE", True),
        ("true", True),
        ("True", True),
        ("0", False),
        ("f", False),
        ("F", False),
        ("FALSE", False),
        ("false", False),
        ("False", False),
    ],
    ids=lambda value: str(value),
)
def test_go_bool(text: str, expected: bool) -> None:
    assert features.parse_go_bool(text) is expected


@pytest.mark.parametrize("text", ["", "yes", "no", "tRUE", "on", "2", " true"], ids=repr)
def test_go_bool_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        features.parse_go_bool(text)


def test_help_lists_gates_like_component_base() -> None:
    assert features.feature_gates_help().splitlines() == [
        "AllAlpha=true|false (ALPHA - default=false)",
        "AllBeta=true|false (BETA - default=false)",
        "CPUStartupBoost=true|false (ALPHA - default=false)",
        "DaemonSetScope=true|false (ALPHA - default=false)",
        "InPlace=true|false (ALPHA - default=false)",
        "InPlaceCapacityAware=true|false (ALPHA - default=false)",
        "NativeSidecar=true|false (ALPHA - default=false)",
        "PerVPAConfig=true|false (ALPHA - default=false)",
        "PodLevelResources=true|false (ALPHA - default=false)",
        "ResizeGuard=true|false (ALPHA - default=false)",
        "VPAInitialDelay=true|false (ALPHA - default=false)",
    ]
