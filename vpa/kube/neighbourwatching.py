"""Watch caches of the objects a VPA lives next to: Nodes (for `--cap-to-largest-node`) and autoscaling/v2
HorizontalPodAutoscalers (for VPA/HPA conflict conditions).

Owns: `node_from_dict` and `hpa_from_dict` (raw object → `NodeView` / `HpaView`, raising `ConversionError`
naming the field) and the two cache builders `node_cache` and `hpa_cache` (each a `WatchCache`: LIST +
WATCH, re-LIST on 410, backoff, as every cache). A malformed object is skipped with a warning.

Must not: decide anything (capping and conflicts are pure logic), or write to the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from vpa.kube.client import KubeClient, api_path
from vpa.kube.converting import ConversionError
from vpa.kube.watching import WatchCache
from vpa.model import quantity
from vpa.model.clock import Clock
from vpa.model.node import HpaMetric, HpaView, NodeView

log = structlog.get_logger(__name__)


def _map(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConversionError(where, f"expected an object, got {type(value).__name__}")
    return value


def _name(metadata: Mapping[str, Any]) -> str:
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ConversionError("metadata.name", "missing")
    return name


def _amount(resources: Mapping[str, Any], resource: str, where: str) -> int | None:
    raw = resources.get(resource)
    if raw is None:
        return None
    try:
        text = str(raw)
        return quantity.cpu_millicores(text) if resource == "cpu" else quantity.memory_bytes(text)
    except quantity.QuantityError as err:
        raise ConversionError(f"{where}.{resource}", str(err)) from err


def node_from_dict(obj: Mapping[str, Any]) -> NodeView:
    """A core/v1 Node → `NodeView`: allocatable (capacity when allocatable is absent), schedulable when
    not cordoned and `Ready=True`."""
    metadata = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    where = "status.allocatable"
    resources = status.get("allocatable")
    if not resources:
        where, resources = "status.capacity", status.get("capacity")
    resources = _map(resources, where)
    ready = False
    conditions = status.get("conditions") or []
    if not isinstance(conditions, list):
        raise ConversionError("status.conditions", "expected a list")
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    return NodeView(
        name=_name(metadata),
        cpu_millicores=_amount(resources, "cpu", where),
        memory_bytes=_amount(resources, "memory", where),
        schedulable=ready and not spec.get("unschedulable"),
        labels={str(k): str(v) for k, v in _map(metadata.get("labels"), "metadata.labels").items()},
    )


def hpa_from_dict(obj: Mapping[str, Any]) -> HpaView:
    """An autoscaling/v2 HPA → `HpaView` with its `Resource` and `ContainerResource` metrics."""
    metadata = _map(obj.get("metadata"), "metadata")
    spec = _map(obj.get("spec"), "spec")
    target = _map(spec.get("scaleTargetRef"), "spec.scaleTargetRef")
    metrics = spec.get("metrics") or []
    if not isinstance(metrics, list):
        raise ConversionError("spec.metrics", "expected a list")
    found: list[HpaMetric] = []
    for index, metric in enumerate(metrics):
        metric = _map(metric, f"spec.metrics[{index}]")
        kind = metric.get("type")
        if kind == "Resource":
            source = _map(metric.get("resource"), f"spec.metrics[{index}].resource")
            name = source.get("name")
            if isinstance(name, str) and name:
                found.append(HpaMetric(name))
        elif kind == "ContainerResource":
            source = _map(metric.get("containerResource"), f"spec.metrics[{index}].containerResource")
            name, container = source.get("name"), source.get("container")
            if isinstance(name, str) and name and isinstance(container, str) and container:
                found.append(HpaMetric(name, container))
    return HpaView(
        namespace=str(metadata.get("namespace") or ""),
        name=_name(metadata),
        target_kind=str(target.get("kind") or ""),
        target_name=str(target.get("name") or ""),
        resource_metrics=tuple(found),
    )


def node_cache(client: KubeClient, clock: Clock) -> WatchCache[NodeView]:
    """A cache of every Node; run it with `cache.run()`."""

    def to_node(obj: dict[str, Any]) -> NodeView | None:
        try:
            return node_from_dict(obj)
        except ConversionError as err:
            log.warning("skipping a node that does not convert", error=str(err))
            return None

    return WatchCache(client, clock, api_path("", "v1", "nodes"), to_node, name="nodes")


def hpa_cache(client: KubeClient, clock: Clock, namespace: str | None = None) -> WatchCache[HpaView]:
    """A cache of autoscaling/v2 HPAs in `namespace` (all when None); run it with `cache.run()`."""

    def to_hpa(obj: dict[str, Any]) -> HpaView | None:
        try:
            return hpa_from_dict(obj)
        except ConversionError as err:
            log.warning("skipping an HPA that does not convert", error=str(err))
            return None

    path = api_path("autoscaling", "v2", "horizontalpodautoscalers", namespace=namespace)
    return WatchCache(client, clock, path, to_hpa, name="hpas")
