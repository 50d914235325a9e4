"""`controller_from_dict`: the configured replica count each controller kind gives the disruption budget."""

from __future__ import annotations

from typing import Any

import pytest

from vpa.kube.controllers import controller_from_dict


def _obj(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {**spec, "selector": {"matchLabels": {"app": "web"}}},
        "status": status,
    }


@pytest.mark.parametrize(
    ("kind", "spec", "status", "expected"),
    [
        # upstream 1.8.1: a DaemonSet's budget counts the nodes it should run on, not the pods now Ready
        ("DaemonSet", {}, {"desiredNumberScheduled": 5, "numberReady": 2}, 5),
        ("DaemonSet", {}, {"numberReady": 2}, None),
        ("DaemonSet", {}, {"desiredNumberScheduled": 0, "numberReady": 0}, 0),
        ("ReplicaSet", {"replicas": 3}, {"readyReplicas": 1}, 3),
        ("StatefulSet", {}, {"replicas": 2}, None),
        ("Job", {"parallelism": 4}, {}, None),
    ],
    ids=["ds-desired", "ds-no-desired", "ds-zero", "rs-spec", "sts-absent", "job"],
)
def test_configured_replicas(
    kind: str, spec: dict[str, Any], status: dict[str, Any], expected: int | None
) -> None:
    view = controller_from_dict(kind, _obj(spec, status))
    assert view is not None
    assert view.replicas == expected
