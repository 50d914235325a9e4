"""The series bound of `--recommendation-metrics`: whole containers, in namespace/VPA/container order."""

from __future__ import annotations

import pytest

from vpa.components.recommendation_metrics import METRIC_NAMES, bounded_series
from vpa.logic.report.rows import ContainerRow
from vpa.model.resources import Resources
from vpa.model.vpa import TargetRef, VpaView


def row(container: str, *, target: bool = True, memory: bool = True) -> ContainerRow:
    amounts = Resources(100, 2**20 if memory else None)
    rec = amounts if target else None
    return ContainerRow(container, 1, amounts, amounts, rec, rec, rec, rec, None, None, None, None)


def vpa(namespace: str, name: str) -> VpaView:
    return VpaView(namespace, name, uid=name, target_ref=TargetRef("apps/v1", "Deployment", name))


CASES = [
    ("everything fits", [(vpa("a", "x"), (row("c1"), row("c2")))], 100, [("x", 24)], 0),
    ("no recommendation yet: only requests and limits", [(vpa("a", "x"), (row("c", target=False),))], 100,
     [("x", 4)], 0),
    ("a container without memory has half the series", [(vpa("a", "x"), (row("c", memory=False),))], 100,
     [("x", 6)], 0),
    ("the bound cuts whole containers, in order; a later smaller one may still fit",
     [(vpa("b", "late"), (row("c"),)), (vpa("a", "x"), (row("c2"), row("c1"))),
      (vpa("a", "y"), (row("c", target=False),))],
     28, [("x", 24), ("y", 4)], 12),
    ("a bound below one container drops everything", [(vpa("a", "x"), (row("c"),))], 5, [], 12),
]


@pytest.mark.parametrize(("case", "vpas", "max_series", "kept", "dropped"), CASES, ids=[c[0] for c in CASES])
def test_bounded_series(case: str, vpas: list[tuple[VpaView, tuple[ContainerRow, ...]]], max_series: int,
                        kept: list[tuple[str, int]], dropped: int) -> None:
    series, dropped_count = bounded_series(vpas, max_series)
    assert [(item.name, len(item.samples)) for item in series] == kept
    assert dropped_count == dropped
    assert sum(len(item.samples) for item in series) <= max_series


def test_samples_are_in_cores_and_bytes_with_unit_labels() -> None:
    [item], _ = bounded_series([(vpa("a", "x"), (row("c"),))], 100)
    by_key = {(s.metric, s.labels[5]): (s.labels[6], s.value) for s in item.samples}
    assert by_key[("vpa_recommendation_target", "cpu")] == ("core", 0.1)
    assert by_key[("vpa_container_limits", "memory")] == ("byte", 2.0**20)
    assert {metric for metric, _ in by_key} == set(METRIC_NAMES)
