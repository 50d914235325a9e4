"""What metrics.k8s.io serves for pods on hollow nodes (`HollowNodes.list_pods` / `list_nodes`), read from
the pods' status and usage profiles, without starting a hollow node: GET and 404, namespace and label
selection, order, and node sums over our own nodes' running pods only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from vpa.sim.cluster.profiles import ANNOTATION
from vpa.sim.cluster.usage import UsageRegistry
from vpa.sim.contracts import ApiError, JsonObj
from vpa.sim.kubernetes.hollow import HollowNodes
from vpa.sim.kubernetes.remotestore import RemoteStore


class _Store:
    """The two reads `HollowNodes` makes of its `RemoteStore`."""

    def __init__(self, objects: list[tuple[str, JsonObj]]) -> None:
        self.objects = objects

    def get(self, resource: str, namespace: str | None, name: str) -> JsonObj | None:
        for kind, obj in self.objects:
            md = obj["metadata"]
            if kind == resource and md["name"] == name and md.get("namespace") == namespace:
                return obj
        return None

    def list(self, resource: str) -> list[JsonObj]:
        return [obj for kind, obj in self.objects if kind == resource]


def _pod(
    ns: str, name: str, node: str, app: str, usage: dict[str, tuple[str, str]], phase: str = "Running"
) -> JsonObj:
    profiles = {c: {"cpu": cpu, "memory": mem} for c, (cpu, mem) in usage.items()}
    return {
        "metadata": {"namespace": ns, "name": name, "uid": f"{ns}-{name}", "labels": {"app": app},
                     "annotations": {ANNOTATION: json.dumps(profiles)}},
        "spec": {"nodeName": node, "containers": [{"name": c, "image": "pause"} for c in usage]},
        "status": {
            "phase": phase,
            "startTime": "2026-01-01T00:00:00Z",
            "containerStatuses": [
                {"name": c, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}} for c in usage
            ],
        },
    }  # fmt: skip


def _node(name: str, role: str) -> JsonObj:
    return {"metadata": {"name": name, "labels": {"role": role}}}


@pytest.fixture
def hollow(tmp_path: Path) -> HollowNodes:
    store = _Store([
        ("nodes", _node("n1", "x")),
        ("nodes", _node("n2", "y")),
        ("pods", _pod("b", "web2", "n2", "web", {"c1": ("100m", "20Mi")})),
        ("pods", _pod("a", "web", "n1", "web", {"c1": ("200m", "100Mi"), "c2": ("50m", "10Mi")})),
        ("pods", _pod("a", "db", "n1", "db", {"c1": ("300m", "30Mi")})),
        ("pods", _pod("a", "starting", "n1", "web", {"c1": ("1", "1Gi")}, phase="Pending")),
        ("pods", _pod("a", "elsewhere", "n9", "web", {"c1": ("1", "1Gi")})),
    ])  # fmt: skip
    return HollowNodes(
        store=cast(RemoteStore, store),
        binary=tmp_path / "hollow-node",
        kubeconfigs={"n1": tmp_path / "n1", "n2": tmp_path / "n2"},
        workdir=tmp_path,
        cpu_millicores=4000,
        memory_bytes=8 * 2**30,
        usage=UsageRegistry(),
    )


def _names(items: list[JsonObj]) -> list[tuple[Any, Any]]:
    return [(i["metadata"].get("namespace"), i["metadata"]["name"]) for i in items]


def test_pod_list_is_running_pods_on_our_nodes_in_namespace_then_name_order(hollow: HollowNodes) -> None:
    assert _names(hollow.list_pods(None, None)) == [("a", "db"), ("a", "web"), ("b", "web2")]
    assert _names(hollow.list_pods("b", None)) == [("b", "web2")]
    assert _names(hollow.list_pods(None, None, "app=web")) == [("a", "web"), ("b", "web2")]
    assert _names(hollow.list_pods("a", None, "app!=web")) == [("a", "db")]


def test_pod_get_reports_each_container_and_404_without_metrics(hollow: HollowNodes) -> None:
    [doc] = hollow.list_pods("a", "web")
    assert doc["kind"] == "PodMetrics"
    assert doc["metadata"]["labels"] == {"app": "web"}
    assert doc["window"] == "30s"
    assert doc["containers"] == [
        {"name": "c1", "usage": {"cpu": "200m", "memory": f"{100 * 1024}Ki"}},
        {"name": "c2", "usage": {"cpu": "50m", "memory": f"{10 * 1024}Ki"}},
    ]
    for name in ("starting", "missing"):
        with pytest.raises(ApiError) as err:
            hollow.list_pods("a", name)
        assert err.value.code == 404
        assert err.value.message == f'podmetrics.metrics.k8s.io "a/{name}" not found'


def test_node_metrics_sum_the_running_pods_on_each_node(hollow: HollowNodes) -> None:
    docs = {d["metadata"]["name"]: d for d in hollow.list_nodes(None, None)}
    assert list(docs) == ["n1", "n2"]
    assert docs["n1"]["kind"] == "NodeMetrics"
    assert docs["n1"]["metadata"]["labels"] == {"role": "x"}
    assert docs["n1"]["usage"] == {"cpu": "550m", "memory": f"{140 * 1024}Ki"}
    assert docs["n2"]["usage"] == {"cpu": "100m", "memory": f"{20 * 1024}Ki"}
    assert _names(hollow.list_nodes(None, None, "role=y")) == [(None, "n2")]
    [one] = hollow.list_nodes(None, "n1")
    assert (one["metadata"]["labels"], one["usage"]) == ({"role": "x"}, docs["n1"]["usage"])
    with pytest.raises(ApiError) as err:
        hollow.list_nodes(None, "n9")
    assert err.value.code == 404
    assert err.value.message == 'nodemetrics.metrics.k8s.io "n9" not found'
