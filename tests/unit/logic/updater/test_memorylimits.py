"""`vpa.dev/memory-limit-decrease`: the parser and which memory-limit decreases a resize keeps."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.logic.updater.test_support import KEY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.infeasible import InfeasibleAttempts
from vpa.logic.updater.inplace import Action, PodDecision, Reason
from vpa.logic.updater.plan import PassInputs, plan_vpa
from vpa.model import annotations as ann
from vpa.model.annotations import MemoryLimitDecrease as M
from vpa.model.features import FeatureGates
from vpa.model.pod import PodView
from vpa.model.resources import Resources
from vpa.model.settings import UpdaterSettings

MI = 2**20
GATES = FeatureGates.parse("InPlace=true")


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("", {}),
        ("app=Never", {"app": M.NEVER}),
        (
            " app = Never , sidecar=Always,*=OnRestart,",
            {"app": M.NEVER, "sidecar": M.ALWAYS, "*": M.ON_RESTART},
        ),
    ],
)
def test_parse_accepts(value: str, parsed: dict[str, M]) -> None:
    assert ann.parse_memory_limit_decrease(value) == parsed


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("app", "entry 'app' is not container=Value"),
        ("app=never", "unknown value 'never' for container 'app' (expected one of Always, Never, OnRestart)"),
        ("App=Never", "'App' is not a container name"),
        ("app=Never,app=Always", "container 'app' is named twice"),
    ],
)
def test_parse_rejects_naming_the_annotation_and_entry(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^vpa\.dev/memory-limit-decrease: ") as err:
        ann.parse_memory_limit_decrease(value)
    assert message in str(err.value)


def test_container_entry_beats_wildcard_and_default_is_always() -> None:
    policies = {"app": M.ALWAYS, "*": M.NEVER}
    assert ann.memory_limit_decrease_for(policies, "app") is M.ALWAYS
    assert ann.memory_limit_decrease_for(policies, "other") is M.NEVER
    assert ann.memory_limit_decrease_for({}, "other") is M.ALWAYS


def _decide(
    annotation: str | None,
    containers: list[dict[str, object]],
    recs: list[dict[str, object]],
    name: str = "web-1",
) -> PodDecision:
    v = vpa("InPlaceOrRecreate", recs)
    if annotation is not None:
        v = dataclasses.replace(v, annotations={ann.MEMORY_LIMIT_DECREASE: annotation})
    target: PodView = pod(name, containers)
    others = [pod(f"web-other-{i}") for i in range(2)]
    inputs = PassInputs(
        now=NOW, settings=UpdaterSettings(), gates=GATES, replicas={KEY: 3}, infeasible=InfeasibleAttempts()
    )
    plan = plan_vpa(v, [target, *others], inputs)
    (decision,) = [d for d in plan.decisions if d.pod.name == name]
    return decision


def _memory(decision: PodDecision, container: str = "app") -> tuple[int | None, int | None]:
    for change in decision.changes:
        if change.name == container:
            return change.requests.memory_bytes, change.limits.memory_bytes
    return None, None


BURSTABLE = ctr("app", mem="512Mi", mem_limit="1Gi")
GUARANTEED = ctr("app", cpu="500m", cpu_limit="500m", mem="512Mi", mem_limit="512Mi")
BURSTABLE_RESTARTS = ctr("app", mem="512Mi", mem_limit="1Gi", restart=("memory",))
DOWN = [rec("app", mem="256Mi")]
UP = [rec("app", mem="1Gi")]


@pytest.mark.parametrize(
    ("annotation", "container", "recs", "action", "reason", "memory", "held"),
    [
        # default (no annotation), and Always: request and proportional limit both go down
        (None, BURSTABLE, DOWN, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, (256 * MI, 512 * MI), False),
        (
            "app=Always",
            BURSTABLE,
            DOWN,
            Action.RESIZE,
            Reason.SIGNIFICANT_CHANGE,
            (256 * MI, 512 * MI),
            False,
        ),
        # Never: the request goes down, the limit stays
        ("app=Never", BURSTABLE, DOWN, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, (256 * MI, None), True),
        ("*=Never", BURSTABLE, DOWN, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, (256 * MI, None), True),
        # Never still raises in place
        ("app=Never", BURSTABLE, UP, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, (1024 * MI, 2048 * MI), False),
        # a Guaranteed container keeps request == limit: nothing is left to change
        ("app=Never", GUARANTEED, DOWN, Action.SKIP, Reason.DECREASE_HELD, (None, None), True),
        # OnRestart: only a resize that restarts the container lowers the limit
        ("app=OnRestart", BURSTABLE, DOWN, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, (256 * MI, None), True),
        (
            "app=OnRestart",
            BURSTABLE_RESTARTS,
            DOWN,
            Action.RESIZE,
            Reason.SIGNIFICANT_CHANGE,
            (256 * MI, 512 * MI),
            False,
        ),
        # another container's entry does not hold this one
        (
            "sidecar=Never",
            BURSTABLE,
            DOWN,
            Action.RESIZE,
            Reason.SIGNIFICANT_CHANGE,
            (256 * MI, 512 * MI),
            False,
        ),
        # a value that does not parse holds every decrease and says why
        ("app=Sometimes", BURSTABLE, DOWN, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, (256 * MI, None), True),
    ],
)
def test_memory_limit_decrease_policy(
    annotation: str | None,
    container: dict[str, object],
    recs: list[dict[str, object]],
    action: Action,
    reason: Reason,
    memory: tuple[int | None, int | None],
    held: bool,
) -> None:
    decision = _decide(annotation, [container], recs)
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    assert _memory(decision) == memory
    assert ("memory limit" in decision.detail and "kept" in decision.detail) is held, decision.detail
    if annotation == "app=Sometimes":
        assert "unknown value 'Sometimes'" in decision.detail


def test_held_limit_leaves_other_changes_alone() -> None:
    decision = _decide("*=Never", [GUARANTEED], [rec("app", cpu="800m", mem="256Mi")])
    assert decision.action is Action.RESIZE, decision.explain()
    # cpu rises with its limit (the pod stays Guaranteed); memory is untouched, and the detail says so.
    (change,) = decision.changes
    assert change.requests == Resources(800, None)
    assert change.limits == Resources(800, None)
    assert "app: memory limit 536870912 kept (Never)" in decision.detail
