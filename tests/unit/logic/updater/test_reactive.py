"""Which VPA changes call for a prompt in-place pass, and what such a pass may execute."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import make_pod, make_recommendation, make_vpa
from vpa.kube.converting import pod_from_dict, vpa_from_dict
from vpa.logic.updater.inplace import Action, PodDecision, Reason
from vpa.logic.updater.plan import VpaPlan
from vpa.logic.updater.reactive import prompts_in_place, resizes_only
from vpa.model.vpa import UpdateMode, VpaView


def v(mode: str = "InPlaceOrRecreate", cpu: str | None = "250m", conditions: Any = None) -> VpaView:
    recommendation = None if cpu is None else [make_recommendation(target={"cpu": cpu, "memory": "256Mi"})]
    return vpa_from_dict(make_vpa(update_mode=mode, recommendation=recommendation, conditions=conditions))


CASES: list[tuple[str, VpaView | None, VpaView, bool]] = [
    ("new recommendation", v(cpu="250m"), v(cpu="500m"), True),
    ("first recommendation", v(cpu=None), v(cpu="500m"), True),
    ("new VPA with a recommendation", None, v(cpu="500m"), True),
    ("InPlace mode", v("InPlace", "250m"), v("InPlace", "500m"), True),
    ("same recommendation, other conditions", v(cpu="250m"),
     v(cpu="250m", conditions=[{"type": "LowConfidence", "status": "True"}]), False),
    ("recommendation removed", v(cpu="250m"), v(cpu=None), False),
    ("Recreate evicts: waits for the tick", v("Recreate", "250m"), v("Recreate", "500m"), False),
    ("Initial never updates running pods", v("Initial", "250m"), v("Initial", "500m"), False),
    ("Off", v("Off", "250m"), v("Off", "500m"), False),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_prompts_in_place(old: VpaView | None, new: VpaView, expected: bool) -> None:
    assert prompts_in_place(old, new) is expected


def decision(name: str, action: Action) -> PodDecision:
    return PodDecision(pod_from_dict(make_pod(name)), action, Reason.OUTSIDE_RANGE)


@pytest.mark.parametrize(("actions", "kept"), [
    ([Action.RESIZE, Action.RESIZE_PARTIAL, Action.EVICT], [Action.RESIZE, Action.RESIZE_PARTIAL]),
    ([Action.EVICT, Action.EVICT], []),
    ([Action.RESIZE], [Action.RESIZE]),
    ([], []),
], ids=["mixed", "evictions only", "resizes only", "nothing"])
def test_resizes_only(actions: list[Action], kept: list[Action]) -> None:
    plan = VpaPlan(v(), UpdateMode.IN_PLACE_OR_RECREATE,
                   actions=tuple(decision(f"p{i}", a) for i, a in enumerate(actions)),
                   skipped=(decision("skipped", Action.SKIP),))
    result = resizes_only(plan)
    assert [d.action for d in result.actions] == kept
    assert result.skipped == plan.skipped
