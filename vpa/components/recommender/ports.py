"""What the recommender reads and writes, as protocols: the watch caches, the metrics source, the target
resolver and the status, checkpoint and event sinks. The kube adapters (`vpa.kube`) fit them; tests pass
fakes.

Must not: hold behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from vpa.kube.client import JsonObj
from vpa.kube.eventing import ObjectRef
from vpa.kube.metricsreading import MetricsRead
from vpa.kube.targets import Resolution
from vpa.model.event import EventView
from vpa.model.vpa import (
    TargetRef,
    VpaStatus,
)

T = TypeVar("T")
# --------------------------------------------------------------------------------------- I/O seams


class ObjectSource(Protocol[T]):
    """What the loop reads of a watch cache (`vpa.kube.watching.WatchCache` fits)."""

    def list(self) -> list[T]: ...

    def on_update(self, handler: Callable[[T, T], None]) -> None: ...


class Listing(Protocol[T]):
    """A cache read as a whole (the Node and HPA caches)."""

    def list(self) -> list[T]: ...


class EventSink(Protocol):
    """Where the recommender's own Warning events go (`vpa.kube.eventing.EventRecorder`)."""

    def warning(self, ref: ObjectRef, reason: str, message: str) -> bool: ...


class EventSource(Protocol):
    """What the loop reads of the `Evicted` events cache (`vpa.kube.evictionwatching` builds one)."""

    def on_add(self, handler: Callable[[EventView], None]) -> None: ...


class MetricsSource(Protocol):
    @property
    def client_name(self) -> str: ...

    async def read(self) -> MetricsRead:
        """A new read on every call: the loop empties its `pods` once every recommender applied them."""
        ...


class Resolver(Protocol):
    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution: ...

    def forget_unused(self) -> None: ...


class StatusSink(Protocol):
    async def write(self, namespace: str, name: str, status: VpaStatus) -> None: ...


class CheckpointSink(Protocol):
    async def list(self) -> list[JsonObj]: ...

    async def write(self, namespace: str, name: str, vpa_name: str, container_name: str,
                    status: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> None: ...

    async def delete(self, namespace: str, name: str) -> None: ...
