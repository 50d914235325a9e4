"""The pod states the updater tells once with an event on the pod: which decisions are one, and what of the
verdict tells one state from another (the kubelet's answer and the resource, not the amounts)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.unit.logic.updater.test_capacity import OFF, _plan
from tests.unit.logic.updater.test_support import pod, vpa
from vpa.logic.updater.inplace import Action, PodDecision, Reason
from vpa.logic.updater.plan import VpaPlan
from vpa.logic.updater.podstates import pod_states
from vpa.model.vpa import UpdateMode

WEB_1 = pod("web-1")


def _by_hand(mode: UpdateMode, *decisions: PodDecision, skip_reason: Reason | None = None) -> VpaPlan:
    acts = tuple(d for d in decisions if d.acts)
    return VpaPlan(vpa(mode.value), mode, skip_reason, acts, tuple(d for d in decisions if not d.acts))


def _skip(reason: Reason, state: str = "") -> PodDecision:
    return PodDecision(WEB_1, Action.SKIP, reason, state=state)


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        # gate InPlaceCapacityAware, web-1 on a node with 500m free (`test_capacity._plan`)
        (lambda: _plan("InPlace", "2"), {("web-1", Reason.WOULD_NOT_FIT, "Deferred cpu")}),
        (lambda: _plan("InPlace", "3"), {("web-1", Reason.WOULD_NOT_FIT, "Deferred cpu")}),  # other amounts
        (lambda: _plan("InPlace", "5"), {("web-1", Reason.WOULD_NOT_FIT, "Infeasible cpu")}),
        # InPlaceOrRecreate: evicted instead, and told why
        (lambda: _plan("InPlaceOrRecreate", "2"), {("web-1", Reason.WOULD_NOT_FIT, "Deferred cpu")}),
        (lambda: _plan("InPlace", "800m"), set()),  # fits: resized
        (lambda: _plan("InPlace", "2", gates=OFF), set()),  # not checked: sent
        (lambda: _by_hand(UpdateMode.IN_PLACE, _skip(Reason.INFEASIBLE_CACHED)),
         {("web-1", Reason.INFEASIBLE_CACHED, "")}),
        (lambda: _by_hand(UpdateMode.IN_PLACE, _skip(Reason.POD_LEVEL_RESIZE_UNSUPPORTED)),
         {("web-1", Reason.POD_LEVEL_RESIZE_UNSUPPORTED, "")}),
        # InPlaceOrRecreate evicts such a pod (or waits for the Recreate rules): nothing to tell it
        (lambda: _by_hand(UpdateMode.IN_PLACE_OR_RECREATE, _skip(Reason.POD_LEVEL_RESIZE_UNSUPPORTED)),
         set()),
        (lambda: _by_hand(UpdateMode.IN_PLACE, _skip(Reason.RESIZE_IN_FLIGHT),
                          _skip(Reason.INFEASIBLE_RECORDED)), set()),
        (lambda: _by_hand(UpdateMode.IN_PLACE, skip_reason=Reason.IN_PLACE_GATE_OFF), set()),
    ],
    ids=["deferred", "deferred-other-amounts", "infeasible", "deferred-evicted", "fits", "gate-off",
         "infeasible-cached", "pod-level-in-place", "pod-level-in-place-or-recreate", "other-reasons",
         "vpa-skipped"],
)
def test_pod_states(plan: Callable[[], VpaPlan], expected: set[tuple[str, Reason, str]]) -> None:
    states = pod_states(plan())
    assert {(decision.pod.name, state.reason, state.state) for state, decision in states.items()} == expected
    assert all(state.uid == decision.pod.uid for state, decision in states.items())
