"""PodMetrics items → exact usage: CPU millicores rounded up (upstream's `MilliValue`), memory bytes."""

from __future__ import annotations

from typing import Any

import pytest

from vpa.kube.converting import ConversionError
from vpa.kube.metricsreading import ContainerUsage, pod_usage_from_dict


def item(**containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "default"},
        "timestamp": "2026-01-01T00:05:00Z",
        "window": "30s",
        "containers": [{"name": name, "usage": usage} for name, usage in containers.items()],
    }


@pytest.mark.parametrize(
    ("usage", "want"),
    [
        ({"cpu": "500m", "memory": "204800Ki"}, ContainerUsage("app", 500, 200 * 2**20)),
        # metrics-server reports nanocores: 123456789n is 123.456789m, read as 124m like MilliValue().
        ({"cpu": "123456789n", "memory": "1Gi"}, ContainerUsage("app", 124, 2**30)),
        ({"cpu": "0", "memory": "0"}, ContainerUsage("app", 0, 0)),
        ({"memory": "1k"}, ContainerUsage("app", None, 1000)),
    ],
    ids=["millicores", "nanocores-round-up", "zero", "no-cpu"],
)
def test_usage_is_converted_exactly(usage: dict[str, str], want: ContainerUsage) -> None:
    got = pod_usage_from_dict(item(app=usage))
    assert (got.namespace, got.name, got.timestamp) == ("default", "web-1", 1_767_225_900.0)
    assert got.containers == (want,)


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"timestamp": "2026-01-01T00:00:00Z"}, "metadata"),
        ({**item(app={"cpu": "1"}), "timestamp": "yesterday"}, "timestamp"),
        (item(app={"cpu": "lots"}), "containers[0].usage.cpu"),
        (item(app={"memory": True}), "containers[0].usage.memory"),
    ],
    ids=["no-metadata", "bad-time", "bad-cpu", "bool-memory"],
)
def test_malformed_items_name_the_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ConversionError) as err:
        pod_usage_from_dict(obj)
    assert err.value.field == field
