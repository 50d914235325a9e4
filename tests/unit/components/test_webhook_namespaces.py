"""`NamespacesWithVpas.attach`: the snapshot of the VPA cache counted in slices while the cache's events
already count, so that what a review asks afterwards ("does this namespace hold a VPA?") is what the cache
holds, whatever happened while the snapshot was counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from vpa.aio.pacing import paced
from vpa.components.webhook import caches
from vpa.components.webhook.caches import NamespacesWithVpas


@dataclass(frozen=True)
class _Vpa:
    namespace: str
    name: str


class _Cache:
    def __init__(self, *vpas: _Vpa) -> None:
        self.vpas = list(vpas)
        self.added: list[Any] = []
        self.updated: list[Any] = []
        self.deleted: list[Any] = []

    def list(self) -> list[_Vpa]:
        return list(self.vpas)

    def on_add(self, handler: Any) -> None:
        self.added.append(handler)

    def on_update(self, handler: Any) -> None:
        self.updated.append(handler)

    def on_delete(self, handler: Any) -> None:
        self.deleted.append(handler)

    def add(self, vpa: _Vpa) -> None:
        self.vpas.append(vpa)
        for handler in self.added:
            handler(vpa)

    def update(self, vpa: _Vpa) -> None:
        for handler in self.updated:
            handler(vpa, vpa)

    def delete(self, vpa: _Vpa) -> None:
        self.vpas.remove(vpa)
        for handler in self.deleted:
            handler(vpa)


def _every_item(items: Iterable[_Vpa], slice_s: float = 0.0) -> AsyncIterator[_Vpa]:
    """A turn of the loop after each item: events land between any two VPAs counted."""
    return paced(items, 0.0)


A, B, C = _Vpa("ns-a", "a"), _Vpa("ns-b", "b"), _Vpa("ns-b", "c")
D = _Vpa("ns-d", "d")


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([], {"ns-a", "ns-b"}),
        ([("delete", B), ("delete", C)], {"ns-a"}),  # deleted before they were counted
        ([("delete", A)], {"ns-b"}),  # deleted once counted
        ([("update", C), ("update", A)], {"ns-a", "ns-b"}),
        ([("add", D)], {"ns-a", "ns-b", "ns-d"}),
        ([("delete", C)], {"ns-a", "ns-b"}),  # ns-b keeps b
        ([("add", D), ("delete", D)], {"ns-a", "ns-b"}),
    ],
    ids=["none", "deleted-before-counted", "deleted-after-counted", "updated", "added", "one-of-two-deleted",
         "added-and-deleted"],
)
async def test_events_while_the_snapshot_is_counted_leave_the_cache_s_namespaces(
    monkeypatch: pytest.MonkeyPatch, events: list[tuple[str, _Vpa]], expected: set[str]
) -> None:
    monkeypatch.setattr(caches, "paced", _every_item)
    cache = _Cache(A, B, C)
    namespaces = NamespacesWithVpas()
    attaching = asyncio.ensure_future(namespaces.attach(cache))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # counted A, paused
    assert not attaching.done()
    for verb, vpa in events:
        getattr(cache, verb)(vpa)
    await attaching
    assert {ns for ns in ("ns-a", "ns-b", "ns-d") if ns in namespaces} == expected
    for vpa in list(cache.vpas):  # afterwards the events alone keep it
        cache.delete(vpa)
    assert not any(ns in namespaces for ns in ("ns-a", "ns-b", "ns-d"))
