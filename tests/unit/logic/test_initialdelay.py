"""AEP-9936 `initialDelaySeconds`: the window, its condition, updater and admission gates, validation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.builders import BASE_TIME, make_pod, make_vpa
from tests.unit.logic.updater.test_support import KEY, NOW, pod, rec, vpa
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.admission.patches import AdmissionOptions, pod_patch, pod_shape
from vpa.logic.admission.validation import validate_vpa
from vpa.logic.initialdelay import (
    WINDOW_ACTIVE,
    WINDOW_EXPIRED,
    in_initial_delay,
    initial_delay_condition,
    initial_delay_expiry,
)
from vpa.logic.limitranges import namespace_limits
from vpa.logic.updater.inplace import Action, Reason
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.model.features import FeatureGates
from vpa.model.vpa import UpdatePolicy, VpaView

ON = FeatureGates.parse("VPAInitialDelay=true")
OFF = FeatureGates()
CREATED = 1_000_000.0


def _view(delay: int | None, created: float = CREATED) -> VpaView:
    return VpaView(
        "default", "web", creation_timestamp=created, update_policy=UpdatePolicy(initial_delay_s=delay)
    )


@pytest.mark.parametrize(
    ("delay", "now", "active", "condition"),
    [
        (None, CREATED, False, None),
        (0, CREATED, False, None),  # below 1 counts as unset
        (3600, CREATED, True, (True, WINDOW_ACTIVE)),
        (3600, CREATED + 3599.5, True, (True, WINDOW_ACTIVE)),
        (3600, CREATED + 3600, False, (False, WINDOW_EXPIRED)),  # now >= expiry opens the gate
        (3600, CREATED + 86_400, False, (False, WINDOW_EXPIRED)),
    ],
)
def test_window(delay: int | None, now: float, active: bool, condition: tuple[bool, str] | None) -> None:
    view = _view(delay)
    assert in_initial_delay(view, now) is active
    found = initial_delay_condition(view, now)
    assert (None if found is None else (found.active, found.reason)) == condition


def test_condition_messages_name_the_expiry() -> None:
    view = _view(3600, created=0.0)
    active = initial_delay_condition(view, 10.0)
    assert active is not None
    assert active.message == (
        "recommendations are not applied to pods until 1970-01-01T01:00:00Z "
        "(initialDelaySeconds 3600 after creation)"
    )
    expired = initial_delay_condition(view, 7200.0)
    assert expired is not None
    assert expired.message == "initialDelaySeconds 3600 elapsed at 1970-01-01T01:00:00Z"


def test_changing_the_field_moves_the_end_from_creation() -> None:
    # Shortened: the gate opens; extended while still in the future: closed again. Creation is the anchor.
    assert initial_delay_expiry(_view(60)) == CREATED + 60
    assert not in_initial_delay(_view(60), CREATED + 120)
    assert in_initial_delay(_view(3600), CREATED + 120)


def _plan(delay: int | None, created: float, gates: FeatureGates) -> tuple[Reason | None, list[Action]]:
    v = dataclasses.replace(
        vpa("Recreate", [rec(cpu="2", lower=("1500m", "1Mi"))]),
        creation_timestamp=created,
    )
    v = dataclasses.replace(v, update_policy=dataclasses.replace(v.update_policy, initial_delay_s=delay))
    pods = [pod("web-1"), pod("web-2"), pod("web-3")]
    plan = plan_vpa(v, pods, PassInputs(now=NOW, gates=gates, replicas={KEY: 3}))
    return plan.skip_reason, [d.action for d in plan.actions]


@pytest.mark.parametrize(
    ("delay", "created", "gates", "skip_reason", "evicts"),
    [
        (3600, NOW - 60, ON, Reason.INITIAL_DELAY_ACTIVE, False),  # inside the window: nothing
        (3600, NOW - 3600, ON, None, True),  # elapsed exactly now
        (3600, NOW - 60, OFF, None, True),  # gate off: the field is ignored
        (None, NOW - 60, ON, None, True),
    ],
)
def test_updater_does_not_act_inside_the_window(
    delay: int | None, created: float, gates: FeatureGates, skip_reason: Reason | None, evicts: bool
) -> None:
    reason, actions = _plan(delay, created, gates)
    assert reason is skip_reason
    assert (Action.EVICT in actions) is evicts


def _admission_vpa(delay: int | None) -> dict[str, Any]:
    raw = make_vpa(recommendation=[rec(cpu="1")], created_at=BASE_TIME)
    if delay is not None:
        raw["spec"]["updatePolicy"]["initialDelaySeconds"] = delay
    return raw


def _admission_pod() -> dict[str, Any]:
    raw = make_pod("web-1")
    raw["metadata"].pop("annotations", None)
    return raw


@pytest.mark.parametrize(
    ("now", "gates", "patched"),
    [
        (BASE_TIME + 60, ON, False),  # inside: admitted unchanged, as Off
        (BASE_TIME + 3600, ON, True),
        (BASE_TIME + 60, OFF, True),
        (None, ON, True),  # a caller that passes no time does not gate
    ],
)
def test_admission_treats_the_window_as_off(now: float | None, gates: FeatureGates, patched: bool) -> None:
    raw_pod = _admission_pod()
    view = vpa_from_dict(_admission_vpa(3600))
    ops = pod_patch(
        pod_from_dict(raw_pod),
        pod_shape(raw_pod),
        view,
        namespace_limits([]),
        AdmissionOptions(gates),
        now=now,
    )
    assert any(op["path"].endswith("/requests/cpu") for op in ops) is patched, ops


@pytest.mark.parametrize(
    ("value", "gates", "old_has_it", "errors"),
    [
        (3600, ON, False, []),
        (7_776_000, ON, False, []),
        (
            0,
            ON,
            False,
            [
                "spec.updatePolicy.initialDelaySeconds: Invalid value: 0: must be between 1 and 7776000 "
                "seconds"
            ],
        ),
        (
            7_776_001,
            ON,
            False,
            [
                "spec.updatePolicy.initialDelaySeconds: Invalid value: 7776001: must be between "
                "1 and 7776000 seconds"
            ],
        ),
        (
            "1h",
            ON,
            False,
            ['spec.updatePolicy.initialDelaySeconds: Invalid value: "1h": expected an integer, got string'],
        ),
        (
            3600,
            OFF,
            False,
            [
                "spec.updatePolicy.initialDelaySeconds: Forbidden: not supported when feature flag "
                "VPAInitialDelay is disabled"
            ],
        ),
        (3600, OFF, True, []),  # grandfathered: the old object had it
    ],
)
def test_validation(value: object, gates: FeatureGates, old_has_it: bool, errors: list[str]) -> None:
    raw = _admission_vpa(None)
    raw["spec"]["updatePolicy"]["initialDelaySeconds"] = value
    old = _admission_vpa(60) if old_has_it else None
    result = validate_vpa(raw, gates, old=old)
    assert [str(e) for e in result.errors] == errors
