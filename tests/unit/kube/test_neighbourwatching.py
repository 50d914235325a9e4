"""Node and HPA conversion: allocatable, schedulability, resource metrics, and errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from vpa.kube.converting import ConversionError
from vpa.kube.neighbourwatching import hpa_from_dict, node_from_dict
from vpa.model.node import HpaMetric, NodeView

READY = [{"type": "Ready", "status": "True"}]


def raw_node(status: dict[str, Any], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n1"}, "spec": spec or {}, "status": status}


NODE_CASES: list[tuple[str, dict[str, Any], NodeView]] = [
    ("ready", raw_node({"allocatable": {"cpu": "3920m", "memory": "15Gi"}, "conditions": READY}),
     NodeView("n1", 3920, 15 * 1024**3, True)),
    ("capacity when no allocatable", raw_node({"capacity": {"cpu": "4"}, "conditions": READY}),
     NodeView("n1", 4000, None, True)),
    ("cordoned", raw_node({"allocatable": {"cpu": "4"}, "conditions": READY}, {"unschedulable": True}),
     NodeView("n1", 4000, None, False)),
    ("not ready",
     raw_node({"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "False"}]}),
     NodeView("n1", 4000, None, False)),
    ("no conditions", raw_node({"allocatable": {"cpu": "4"}}), NodeView("n1", 4000, None, False)),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_node_from_dict(raw: dict[str, Any], expected: NodeView) -> None:
    assert node_from_dict(raw) == expected


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(ConversionError, match=r"status\.allocatable\.memory"):
        node_from_dict(raw_node({"allocatable": {"memory": "lots"}, "conditions": READY}))


def test_hpa_from_dict_keeps_resource_metrics() -> None:
    view = hpa_from_dict({
        "metadata": {"name": "h", "namespace": "prod"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu"}},
            {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app"}},
            {"type": "Pods", "pods": {"metric": {"name": "rps"}}},
        ]},
    })
    assert (view.namespace, view.target_kind, view.target_name) == ("prod", "Deployment", "web")
    assert view.resource_metrics == (HpaMetric("cpu"), HpaMetric("memory", "app"))


def test_hpa_bad_metrics_names_the_field() -> None:
    with pytest.raises(ConversionError, match=r"spec\.metrics"):
        hpa_from_dict({"metadata": {"name": "h"}, "spec": {"metrics": "cpu"}})
