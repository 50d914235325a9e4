"""Reading `metrics.k8s.io/v1beta1` PodMetrics: the recommender's real-time usage source.

Owns: `PodMetricsReader` (one LIST of PodMetrics, all namespaces or the `--vpa-object-namespace`, parsed
item by item from the body's chunks as they arrive into `PodUsage` records, yielding to the event loop
between slices), `ListStream` (the items of a list document that arrives in chunks, parsed one at a time;
`PagedList` parses its pages with it too) and `pod_usage_from_dict` (one PodMetrics item → usage in exact
integers: CPU as millicores rounded up, as upstream's live path reads `Quantity.MilliValue()`; memory
(working set) as bytes; the sample time is the PodMetrics `timestamp`, the end of its window).

Must not: keep samples between reads, feed any model, retry past what the client retries, or count
errors in metrics (the caller decides what a failed read means and counts it).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from vpa.aio.pacing import paced
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
        out = MetricsRead([])
        # Tens of thousands of items: parsed from the body's chunks as they arrive (`ListStream`, never the
        # whole body in one object, which would hold the event loop for all of it) and converted one at a
        # time, `paced`; each item is dropped once converted.
        stream = ListStream()

        async def items(chunks: AsyncIterator[bytes]) -> AsyncIterator[object]:
            async for chunk in chunks:
                for item in stream.feed(chunk):
                    yield item

        try:
            body = self._client.get_chunks(self._path, timeout_s=self._timeout_s)
            async with contextlib.aclosing(body) as chunks:
                async for item in paced(items(chunks), _SLICE_S):
                    self._convert(item, out)
            for item in stream.finish():
                self._convert(item, out)
        except ValueError as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise ApiError(0, "BadList", f"LIST {self._path} did not return a list: {err}") from None
        return out

    @staticmethod
    def _convert(item: object, out: MetricsRead) -> None:
        try:
            out.pods.append(pod_usage_from_dict(item if isinstance(item, dict) else {}))
        except ConversionError:
            out.malformed += 1


_DECODER: Final = json.JSONDecoder()
_SPACE: Final = re.compile(r"[ \t\n\r]*")


def _skip(text: str, index: int) -> int:
    """The index of the first non-whitespace character at or after `index`."""
    match = _SPACE.match(text, index)
    return match.end() if match is not None else index


_START, _KEY_OR_END, _KEY, _ITEMS_FIRST, _ITEM, _AFTER_ITEM, _AFTER_FIELD, _DONE = range(8)


_NUMBER_TAIL: Final = re.compile(r"[0-9.eE+-]*")


class _More(Exception):
    """The buffer ends inside the next token: wait for the next chunk."""


class ListStream:
    """The `items` of a Kubernetes list document (a JSON object) that arrives in chunks, parsed one at a time
    by the standard library's C scanner so that a caller can pause between them: `feed(chunk)` yields the
    items completed by that chunk, `finish()` the rest (raising ValueError if the document is malformed or
    truncated). Only the unparsed tail (at most about one item) is kept between chunks, so a body of tens of
    MB is never held, or decoded, in one piece. The document's other fields are parsed and stored in
    `others` as they are met (kube-apiserver sends `metadata` before `items`, so a pager can read the
    continue token before the first item); `items` absent or null yields nothing. Exhaust each generator
    before the next call."""

    def __init__(self, others: dict[str, object] | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._pos = 0
        self._state = _START
        self._key = ""
        self._final = False
        self.others: dict[str, object] = {} if others is None else others

    def feed(self, chunk: bytes) -> Iterator[object]:
        return self._run(self._decoder.decode(chunk), final=False)

    def finish(self) -> Iterator[object]:
        return self._run(self._decoder.decode(b"", final=True), final=True)

    def _decode(self, index: int) -> tuple[object, int]:
        """The value starting at `index`; `_More` when it may continue in the next chunk (a value that ends
        at the end of the buffer, or a number followed only by what could continue it, may be cut short)."""
        buf = self._buf
        try:
            value, end = _DECODER.raw_decode(buf, index)
        except ValueError:
            if self._final:
                raise
            raise _More() from None
        if not self._final and (
            end >= len(buf)
            or (isinstance(value, int | float) and not isinstance(value, bool)
                and _NUMBER_TAIL.fullmatch(buf, end) is not None)
        ):
            raise _More()  # "0." + "5" or "1" + "e3": the chunk may have cut a number short
        return value, end

    def _next(self) -> tuple[int, str]:
        index = _skip(self._buf, self._pos)
        if index >= len(self._buf):
            if self._final:
                if self._state == _DONE:
                    return index, ""
                raise ValueError("the list document ends early")
            raise _More()
        return index, self._buf[index]

    def _run(self, text: str, *, final: bool) -> Iterator[object]:
        self._buf = self._buf[self._pos:] + text if self._pos < len(self._buf) else text
        self._pos = 0
        self._final = final
        try:
            while True:
                index, char = self._next()
                state = self._state
                if state == _DONE:
                    if char:
                        raise ValueError(f"extra data after the document at {index}")
                    return
                if state == _START:
                    if char != "{":
                        raise ValueError("not a JSON object")
                    self._state, self._pos = _KEY_OR_END, index + 1
                elif state in (_KEY_OR_END, _KEY):
                    if char == "}" and state == _KEY_OR_END:
                        self._state, self._pos = _DONE, index + 1
                        continue
                    key, end = self._decode(index)
                    if not isinstance(key, str):
                        raise ValueError(f"expected a field name at {index}")
                    colon = _skip(self._buf, end)
                    if colon >= len(self._buf):
                        raise _More() if not final else ValueError("the list document ends early")
                    if self._buf[colon] != ":":
                        raise ValueError(f"expected ':' at {colon}")
                    start = _skip(self._buf, colon + 1)
                    if start >= len(self._buf):
                        raise _More() if not final else ValueError("the list document ends early")
                    if key == "items" and self._buf[start] == "[":
                        self._state, self._pos = _ITEMS_FIRST, start + 1
                        continue
                    value, end = self._decode(start)
                    if key == "items" and value is not None:
                        raise ValueError("items is not a list")
                    self.others[key] = value
                    self._state, self._pos = _AFTER_FIELD, end
                elif state == _ITEMS_FIRST and char == "]":
                    self._state, self._pos = _AFTER_FIELD, index + 1
                elif state in (_ITEMS_FIRST, _ITEM):
                    item, end = self._decode(index)
                    self._state, self._pos = _AFTER_ITEM, end
                    yield item
                elif state == _AFTER_ITEM:
                    if char == ",":
                        self._state, self._pos = _ITEM, index + 1
                    elif char == "]":
                        self._state, self._pos = _AFTER_FIELD, index + 1
                    else:
                        raise ValueError(f"expected ',' or ']' at {index}")
                else:  # _AFTER_FIELD
                    if char == ",":
                        self._state, self._pos = _KEY, index + 1
                    elif char == "}":
                        self._state, self._pos = _DONE, index + 1
                    else:
                        raise ValueError(f"expected ',' or '}}' at {index}")
        except _More:
            return
