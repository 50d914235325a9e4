"""`--cap-to-largest-node`: which node caps a pod, how its containers shrink, what stays untouched."""

from __future__ import annotations

import pytest

from vpa.logic.recommender.nodecaps import cap_to_largest_node, largest_node
from vpa.model.node import NodeView
from vpa.model.resources import Resources
from vpa.model.vpa import Recommendation, RecommendedContainerResources

GI = 1024**3


def rec(*items: tuple[str, int, int]) -> Recommendation:
    return Recommendation(tuple(
        RecommendedContainerResources(name, Resources(cpu, mem), Resources(cpu // 2, mem // 2),
                                      Resources(cpu * 2, mem * 2), Resources(cpu, mem))
        for name, cpu, mem in items))


def node(name: str, cpu: int | None, mem: int | None, schedulable: bool = True) -> NodeView:
    return NodeView(name, cpu, mem, schedulable)


# (case, recommendation, nodes, expected targets {container: (cpu, mem)}, expected node or None)
CASES = [
    ("fits: untouched", rec(("app", 1000, 2 * GI)), [node("n1", 4000, 16 * GI)],
     {"app": (1000, 2 * GI)}, None),
    ("cpu over one node", rec(("app", 6000, 2 * GI)), [node("n1", 4000, 16 * GI)],
     {"app": (4000, 2 * GI)}, "n1"),
    ("memory over: largest memory node chosen", rec(("app", 1000, 40 * GI)),
     [node("small", 8000, 16 * GI), node("big", 4000, 32 * GI)], {"app": (1000, 32 * GI)}, "big"),
    ("pod sum, shared in proportion", rec(("a", 3000, GI), ("b", 3000, GI)), [node("n1", 4000, 16 * GI)],
     {"a": (2000, GI), "b": (2000, GI)}, "n1"),
    ("uneven split rounds down", rec(("a", 1000, GI), ("b", 2000, GI)), [node("n1", 1000, 16 * GI)],
     {"a": (333, GI), "b": (666, GI)}, "n1"),
    ("node that fits wins over a bigger one that does not", rec(("app", 6000, 20 * GI)),
     [node("cpu-heavy", 16000, 8 * GI), node("fits", 8000, 24 * GI)], {"app": (6000, 20 * GI)}, None),
    ("cordoned biggest node ignored", rec(("app", 6000, GI)),
     [node("huge", 64000, 256 * GI, schedulable=False), node("n1", 4000, 16 * GI)],
     {"app": (4000, GI)}, "n1"),
    ("no schedulable node: nothing capped", rec(("app", 6000, GI)), [node("n1", 4000, 16 * GI, False)],
     {"app": (6000, GI)}, None),
    ("no nodes: nothing capped", rec(("app", 6000, GI)), [], {"app": (6000, GI)}, None),
    ("unknown memory allocatable caps cpu only", rec(("app", 6000, 99 * GI)), [node("n1", 4000, None)],
     {"app": (4000, 99 * GI)}, "n1"),
]


@pytest.mark.parametrize(("recommendation", "nodes", "targets", "capped_by"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_cap_to_largest_node(recommendation: Recommendation, nodes: list[NodeView],
                             targets: dict[str, tuple[int, int]], capped_by: str | None) -> None:
    capped, cap = cap_to_largest_node(recommendation, nodes)
    got = {c.container_name: (c.target.cpu_millicores, c.target.memory_bytes) for c in capped.containers}
    assert got == targets
    assert (cap.node if cap is not None else None) == capped_by
    for before, after in zip(recommendation.containers, capped.containers, strict=True):
        assert after.uncapped_target == before.uncapped_target  # what the workload wants stays visible
        for res in ("cpu_millicores", "memory_bytes"):
            low, tgt, up = (getattr(after.lower_bound, res), getattr(after.target, res),
                            getattr(after.upper_bound, res))
            assert low <= tgt <= up


def test_upper_bounds_fit_too() -> None:
    capped, _ = cap_to_largest_node(rec(("a", 3000, GI), ("b", 1000, GI)), [node("n1", 2000, 16 * GI)])
    assert sum(c.upper_bound.cpu_millicores or 0 for c in capped.containers) <= 2000
    assert sum(c.target.cpu_millicores or 0 for c in capped.containers) <= 2000


def test_message_says_how_much() -> None:
    _, cap = cap_to_largest_node(rec(("app", 6000, 20 * GI)), [node("n1", 4000, 16 * GI)])
    assert cap is not None
    assert cap.message() == ("pod total capped to the allocatable of node n1, the largest schedulable node: "
                             "cpu 6 → 4, memory 20Gi → 16Gi")


def test_ties_break_on_name() -> None:
    chosen = largest_node([node("b", 4000, GI), node("a", 4000, GI)], {"cpu": 8000, "memory": 0})
    assert chosen is not None
    assert chosen.name == "a"
