"""The VPA view's defaults and lookups: the rules upstream applies when fields are absent."""

from __future__ import annotations

import pytest

from vpa.model.resources import Resources
from vpa.model.vpa import (
    ContainerResourcePolicy,
    ContainerScalingMode,
    ControlledValues,
    Recommendation,
    RecommendedContainerResources,
    ResourcePolicy,
    StartupBoost,
    TargetRef,
    UpdateMode,
    UpdatePolicy,
    VpaView,
)

MODE_CASES = [
    ("unset", None, UpdateMode.RECREATE),
    ("off", UpdateMode.OFF, UpdateMode.OFF),
    ("initial", UpdateMode.INITIAL, UpdateMode.INITIAL),
    ("auto", UpdateMode.AUTO, UpdateMode.AUTO),
    ("in-place", UpdateMode.IN_PLACE, UpdateMode.IN_PLACE),
]


@pytest.mark.parametrize(("mode", "effective"), [c[1:] for c in MODE_CASES], ids=[c[0] for c in MODE_CASES])
def test_effective_mode(mode: UpdateMode | None, effective: UpdateMode) -> None:
    assert UpdatePolicy(update_mode=mode).effective_mode is effective
    assert VpaView("ns", "v", update_policy=UpdatePolicy(update_mode=mode)).effective_mode is effective


PARSE_CASES = [
    ("Off", UpdateMode.OFF),
    ("Initial", UpdateMode.INITIAL),
    ("Recreate", UpdateMode.RECREATE),
    ("InPlaceOrRecreate", UpdateMode.IN_PLACE_OR_RECREATE),
    ("InPlace", UpdateMode.IN_PLACE),
    ("Auto", UpdateMode.AUTO),
]


@pytest.mark.parametrize(("text", "mode"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_update_mode_parse(text: str, mode: UpdateMode) -> None:
    assert UpdateMode.parse(text) is mode


@pytest.mark.parametrize(
    "text",
    ["", "auto", "Evict", "InPlaceonly", "InPlaceOnly"],
    ids=["empty", "lowercase", "unknown", "case", "aep-4016-name"],
)
def test_update_mode_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="unknown update mode") as caught:
        UpdateMode.parse(text)
    assert "InPlaceOrRecreate" in str(caught.value)


@pytest.mark.parametrize(
    ("mode", "evicts", "in_place", "updates_running"),
    [
        (UpdateMode.OFF, False, False, False),
        (UpdateMode.INITIAL, False, False, False),
        (UpdateMode.RECREATE, True, False, True),
        (UpdateMode.AUTO, True, False, True),
        (UpdateMode.IN_PLACE_OR_RECREATE, True, True, True),
        (UpdateMode.IN_PLACE, False, True, True),
    ],
    ids=lambda v: str(v),
)
def test_mode_properties(mode: UpdateMode, evicts: bool, in_place: bool, updates_running: bool) -> None:
    assert mode.evicts is evicts
    assert mode.resizes_in_place is in_place
    assert mode.updates_running_pods is updates_running


APP = ContainerResourcePolicy("app", mode=ContainerScalingMode.OFF)
STAR = ContainerResourcePolicy("*", min_allowed=Resources(10, None))
STAR_2 = ContainerResourcePolicy("*", min_allowed=Resources(20, None))
APP_2 = ContainerResourcePolicy("app", max_allowed=Resources(5, None))
FOR_CONTAINER_CASES = [
    ("exact-wins-over-star-before", (STAR, APP), "app", APP),
    ("exact-wins-over-star-after", (APP, STAR), "app", APP),
    ("star-when-no-exact", (APP, STAR), "sidecar", STAR),
    ("none-without-star", (APP,), "sidecar", None),
    ("empty-policy", (), "app", None),
    ("first-exact-duplicate", (APP, APP_2), "app", APP),
    ("first-star-duplicate", (STAR, STAR_2), "x", STAR),
]


@pytest.mark.parametrize(
    ("policies", "name", "expected"),
    [c[1:] for c in FOR_CONTAINER_CASES],
    ids=[c[0] for c in FOR_CONTAINER_CASES],
)
def test_for_container_precedence(
    policies: tuple[ContainerResourcePolicy, ...], name: str, expected: ContainerResourcePolicy | None
) -> None:
    assert ResourcePolicy(policies).for_container(name) is expected
    assert VpaView("ns", "v", resource_policy=ResourcePolicy(policies)).container_policy(name) is expected


def test_container_policy_defaults() -> None:
    bare = ContainerResourcePolicy("app")
    assert bare.effective_controlled_resources == ("cpu", "memory")
    assert bare.effective_controlled_values is ControlledValues.REQUESTS_AND_LIMITS
    assert not bare.is_off
    assert bare.controls("memory")
    only_memory = ContainerResourcePolicy(
        "app",
        controlled_resources=("memory",),
        controlled_values=ControlledValues.REQUESTS_ONLY,
        mode=ContainerScalingMode.OFF,
    )
    assert only_memory.effective_controlled_resources == ("memory",)
    assert not only_memory.controls("cpu")
    assert only_memory.effective_controlled_values is ControlledValues.REQUESTS_ONLY
    assert only_memory.is_off
    assert ContainerResourcePolicy("app", controlled_resources=()).effective_controlled_resources == ()


HANDLED_CASES = [
    ("empty-default", (), "default", True),
    ("empty-other", (), "hamster", False),
    ("listed", ("hamster",), "hamster", True),
    ("listed-not-default", ("hamster",), "default", False),
    ("explicit-default", ("default",), "default", True),
]


@pytest.mark.parametrize(
    ("recommenders", "name", "expected"), [c[1:] for c in HANDLED_CASES], ids=[c[0] for c in HANDLED_CASES]
)
def test_handled_by(recommenders: tuple[str, ...], name: str, expected: bool) -> None:
    assert VpaView("ns", "v", recommenders=recommenders).handled_by(name) is expected


def test_view_helpers() -> None:
    rec = Recommendation(
        (
            RecommendedContainerResources("a", Resources(1, 2)),
            RecommendedContainerResources("b", Resources(3, 4)),
        )
    )
    assert rec.for_container("b") == RecommendedContainerResources("b", Resources(3, 4))
    assert rec.for_container("c") is None
    view = VpaView(
        "prod", "web", target_ref=TargetRef("apps/v1", "Deployment", "web"), creation_timestamp=10.0
    )
    assert view.key == "prod/web"
    assert view.target_ref is not None
    assert view.target_ref.group == "apps"
    assert TargetRef("v1", "ReplicationController", "rc").group == ""
    assert str(view.target_ref) == "apps/v1.Deployment/web"
    assert not view.has_startup_boost()
    boost_policy = ContainerResourcePolicy("app", startup_boost=StartupBoost("Factor", factor=2))
    boosted = VpaView(
        "prod", "web2", resource_policy=ResourcePolicy((boost_policy,)), creation_timestamp=10.0
    )
    assert boosted.has_startup_boost()
    older = VpaView("prod", "zzz", creation_timestamp=5.0)
    assert older.is_stronger_than(view)
    assert view.is_stronger_than(boosted)  # same age: the smaller name wins
    assert not boosted.is_stronger_than(view)
    assert StartupBoost("").effective_type == "Factor"
