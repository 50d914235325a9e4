"""Reading `metrics.k8s.io/v1beta1` PodMetrics: the recommender's real-time usage source.

Owns: `PodMetricsReader` (one LIST of PodMetrics, all namespaces or the `--vpa-object-namespace`, parsed
item by item into `PodUsage` records, yielding to the event loop between slices), `list_items` (the items
of a list document, parsed one at a time) and `pod_usage_from_dict` (one PodMetrics item → usage in exact
integers: CPU as millicores rounded up, as upstream's live path reads `Quantity.MilliValue()`; memory
(working set) as bytes; the sample time is the PodMetrics `timestamp`, the end of its window).

Must not: keep samples between reads, feed any model, retry past what the client retries, or count
errors in metrics (the caller decides what a failed read means and counts it).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.kube.client import ApiError, KubeClient, api_path
from vpa.kube.converting import ConversionError, parse_time
from vpa.model.quantity import Quantity, QuantityError

METRICS_GROUP: Final = "metrics.k8s.io"
METRICS_VERSION: Final = "v1beta1"
_SLICE_S: Final = 0.003  # longest stretch of item conversion between yields to the event loop


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    name: str
    cpu_millicores: int | None
    memory_bytes: int | None


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One PodMetrics item. `timestamp` is Unix seconds (the end of the measurement window)."""

    namespace: str
    name: str
    timestamp: float
    containers: tuple[ContainerUsage, ...]


def _amount(raw: object, field: str, *, cpu: bool) -> int | None:
    if raw is None:
        return None
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        raise ConversionError(field, f"expected a quantity, got {type(raw).__name__}")
    try:
        parsed = Quantity.parse(str(raw))
    except QuantityError as err:
        raise ConversionError(field, str(err)) from None
    return parsed.millis if cpu else parsed.value


def pod_usage_from_dict(obj: Mapping[str, Any]) -> PodUsage:
    """A PodMetrics item → PodUsage; raises ConversionError naming the field."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        raise ConversionError("metadata", "is required")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ConversionError("metadata.name", "is required")
    namespace = metadata.get("namespace") or ""
    if not isinstance(namespace, str):
        raise ConversionError("metadata.namespace", "expected a string")
    raw_time = obj.get("timestamp")
    if not isinstance(raw_time, str):
        raise ConversionError("timestamp", "expected an RFC3339 timestamp")
    try:
        timestamp = parse_time(raw_time)
    except ValueError:
        raise ConversionError("timestamp", f"{raw_time!r} is not an RFC3339 timestamp") from None
    containers: list[ContainerUsage] = []
    raw_containers = obj.get("containers") or []
    if not isinstance(raw_containers, list):
        raise ConversionError("containers", "expected a list")
    for index, raw in enumerate(raw_containers):
        where = f"containers[{index}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise ConversionError(f"{where}.name", "is required")
        usage = raw.get("usage") or {}
        if not isinstance(usage, Mapping):
            raise ConversionError(f"{where}.usage", "expected an object")
        containers.append(
            ContainerUsage(
                name=raw["name"],
                cpu_millicores=_amount(usage.get("cpu"), f"{where}.usage.cpu", cpu=True),
                memory_bytes=_amount(usage.get("memory"), f"{where}.usage.memory", cpu=False),
            )
        )
    return PodUsage(namespace, name, timestamp, tuple(containers))


@dataclass(slots=True)
class MetricsRead:
    """What one read returned: the usable items and how many were malformed (skipped)."""

    pods: list[PodUsage]
    malformed: int = 0


class PodMetricsReader:
    """LISTs PodMetrics; `read()` raises `ApiError` when the metrics API cannot answer."""

    client_name = "default-metrics-client"  # upstream's label value

    def __init__(self, client: KubeClient, namespace: str | None = None, *, timeout_s: float = 30.0) -> None:
        self._client = client
        self._path = api_path(METRICS_GROUP, METRICS_VERSION, "pods", namespace=namespace or None)
        self._timeout_s = timeout_s

    async def read(self) -> MetricsRead:
        _, raw = await self._client.request_raw("GET", self._path, timeout_s=self._timeout_s)
        out = MetricsRead([])
        # Tens of thousands of items: parsed and converted one at a time, in slices that yield to the event
        # loop (the webhook shares it). One parse of the whole list held the loop ~50 ms at 10,000 pods,
        # and freeing it at once ~20 ms more; each item here is dropped once converted.
        try:
            text = raw.decode()
            slice_started = time.perf_counter()
            for item in list_items(text):
                try:
                    out.pods.append(pod_usage_from_dict(item if isinstance(item, dict) else {}))
                except ConversionError:
                    out.malformed += 1
                if time.perf_counter() - slice_started >= _SLICE_S:
                    await asyncio.sleep(0)
                    slice_started = time.perf_counter()
        except (ValueError, IndexError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise ApiError(0, "BadList", f"LIST {self._path} did not return a list: {err}") from None
        return out


_DECODER: Final = json.JSONDecoder()
_SPACE: Final = re.compile(r"[ \t\n\r]*")


def _skip(text: str, index: int) -> int:
    """The index of the first non-whitespace character at or after `index`."""
    match = _SPACE.match(text, index)
    return match.end() if match is not None else index


def list_items(text: str, others: dict[str, object] | None = None) -> Iterator[object]:
    """The `items` of a Kubernetes list document (a JSON object), parsed one at a time by the standard
    library's C scanner so that a caller can pause between them; the object's other fields are parsed and
    dropped, or stored in `others` as they are met (kube-apiserver sends `metadata` before `items`, so a
    pager can read the continue token before the first item). `items` absent or null yields nothing.
    Raises ValueError (or IndexError at a truncated end) for anything that is not such a document."""
    skip = _skip
    decode = _DECODER.raw_decode
    index = skip(text, 0)
    if text[index] != "{":
        raise ValueError("not a JSON object")
    index = skip(text, index + 1)
    if text[index] == "}":
        return
    while True:
        key, index = decode(text, index)
        if not isinstance(key, str):
            raise ValueError(f"expected a field name at {index}")
        index = skip(text, index)
        if text[index] != ":":
            raise ValueError(f"expected ':' at {index}")
        index = skip(text, index + 1)
        if key == "items" and text[index] == "[":
            index = skip(text, index + 1)
            if text[index] == "]":
                index += 1
            else:
                while True:
                    item, index = decode(text, index)
                    yield item
                    index = skip(text, index)
                    if text[index] == ",":
                        index = skip(text, index + 1)
                        continue
                    if text[index] != "]":
                        raise ValueError(f"expected ',' or ']' at {index}")
                    index += 1
                    break
        else:
            value, index = decode(text, index)
            if key == "items" and value is not None:
                raise ValueError("items is not a list")
            if others is not None:
                others[key] = value
        index = skip(text, index)
        if text[index] == ",":
            index = skip(text, index + 1)
            continue
        if text[index] != "}":
            raise ValueError(f"expected ',' or '}}' at {index}")
        if skip(text, index + 1) != len(text):
            raise ValueError(f"extra data after the document at {index + 1}")
        return
