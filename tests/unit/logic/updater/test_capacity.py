"""AEP-9726 capacity-aware in-place resizes: what the kubelet would answer, and what the plan does instead."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.logic.updater.test_support import KEY, NOW, ctr, pod, rec, vpa
from vpa.logic.updater.capacity import NodeRooms, pod_requests
from vpa.logic.updater.inplace import Action, PodDecision, Reason
from vpa.logic.updater.plan import PassInputs, VpaPlan, plan_vpa
from vpa.model.features import FeatureGates
from vpa.model.node import NodeView
from vpa.model.pod import PodView

ON = FeatureGates.parse("InPlace=true,InPlaceCapacityAware=true")
OFF = FeatureGates.parse("InPlace=true")
GI = 2**30
NODE = "node-a-1"  # where the builders put pods


def _on(name: str, node: str = NODE, cpu: str = "500m", mem: str = "512Mi") -> PodView:
    return dataclasses.replace(pod(name, [ctr("app", cpu=cpu, mem=mem)]), node_name=node)


def _plan(
    mode: str,
    target_cpu: str,
    *,
    gates: FeatureGates = ON,
    node_cpu: int = 4000,
    neighbours_cpu: str = "3000m",
    pods: list[PodView] | None = None,
    node: str = NODE,
) -> VpaPlan:
    """web-1 (500m) on a 4-core node next to a neighbour outside the VPA; web-2 and web-3 elsewhere."""
    v = vpa(mode, [rec(cpu=target_cpu, mem="512Mi", lower=("1m", "1Mi"))])
    ours = (
        pods if pods is not None else [_on("web-1"), _on("web-2", node="node-b"), _on("web-3", node="node-b")]
    )
    neighbour = dataclasses.replace(
        pod("other", [ctr("db", cpu=neighbours_cpu, mem="1Gi")], owner=None), node_name=node
    )
    nodes = [NodeView(NODE, node_cpu, 16 * GI), NodeView("node-b", 64_000, 64 * GI)]
    rooms = NodeRooms.build(nodes, [*ours, neighbour])
    inputs = PassInputs(now=NOW, gates=gates, replicas={KEY: 3}, node_rooms=rooms)
    return plan_vpa(v, ours, inputs)


def _decision(plan: VpaPlan, name: str = "web-1") -> PodDecision:
    (found,) = [d for d in plan.decisions if d.pod.name == name]
    return found


@pytest.mark.parametrize(
    ("target_cpu", "gates", "action", "reason", "detail"),
    [
        # +300m with 500m free: fits
        ("800m", ON, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, ""),
        # +1500m with 500m free: Deferred
        (
            "2",
            ON,
            Action.SKIP,
            Reason.WOULD_NOT_FIT,
            "the kubelet would answer Deferred: the resize needs cpu 1500m more, node node-a-1 has 500m free",
        ),
        # 5 cores on a 4-core node: Infeasible
        (
            "5",
            ON,
            Action.SKIP,
            Reason.WOULD_NOT_FIT,
            "the kubelet would answer Infeasible: the pod would request cpu 5000m, more than node node-a-1 "
            "allocates (4000m)",
        ),
        # gate off: the resize is sent and the kubelet answers
        ("2", OFF, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, ""),
        # a decrease always fits
        ("100m", ON, Action.RESIZE, Reason.SIGNIFICANT_CHANGE, ""),
    ],
)
def test_in_place_resize_that_would_not_fit_is_not_sent(
    target_cpu: str, gates: FeatureGates, action: Action, reason: Reason, detail: str
) -> None:
    decision = _decision(_plan("InPlace", target_cpu, gates=gates))
    assert (decision.action, decision.reason) == (action, reason), decision.explain()
    assert decision.detail == detail


def test_in_place_or_recreate_falls_back_to_eviction() -> None:
    decision = _decision(_plan("InPlaceOrRecreate", "2"))
    assert (decision.action, decision.reason) == (Action.EVICT, Reason.WOULD_NOT_FIT), decision.explain()
    assert "Deferred" in decision.detail


def test_two_resizes_cannot_take_the_same_free_room() -> None:
    # Both pods on the node want +300m; 500m is free: the first planned goes, the second would be Deferred.
    pods = [_on("web-1"), _on("web-2"), _on("web-3", node="node-b")]
    plan = _plan("InPlace", "800m", pods=pods, neighbours_cpu="2500m")
    on_node = sorted((_decision(plan, n) for n in ("web-1", "web-2")), key=lambda d: d.action.value)
    assert [d.action for d in on_node] == [Action.RESIZE, Action.SKIP]
    assert on_node[1].reason is Reason.WOULD_NOT_FIT
    assert "has 200m free" in on_node[1].detail


def test_unknown_node_is_not_blocked() -> None:
    pods = [_on("web-1", node="node-x"), _on("web-2", node="node-b"), _on("web-3", node="node-b")]
    decision = _decision(_plan("InPlace", "5", pods=pods))
    assert decision.action is Action.RESIZE


@pytest.mark.parametrize(
    ("phase", "expected"),
    [("Running", {"cpu": 500, "memory": 512 * 2**20}), ("Succeeded", {"cpu": 0, "memory": 0})],
)
def test_pod_requests(phase: str, expected: dict[str, int]) -> None:
    assert pod_requests(_on("web-1") if phase == "Running" else pod("done", phase=phase)) == expected
