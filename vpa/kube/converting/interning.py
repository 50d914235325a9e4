"""`Interner`: the content-keyed cache that makes identical pieces of different pods one object.

Owns: the shared label and annotation maps, owners, container specs and tuples of them, `Resources` and
parsed quantities, and strings (names, uids, label values) of the objects converted with one interner,
bounded as a whole (`clear` when full); `DEFAULT_INTERNER`, the one converters use when given none. This
is what keeps a cached pod under 2 KiB.

Must not: parse API JSON (the converters do) or hand out anything mutable: its pieces are shared by many
objects.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from vpa.model import quantity
from vpa.model.pod import ContainerView, OwnerRef
from vpa.model.resources import CPU, Resources

_EMPTY_MAP: Final[Mapping[str, str]] = MappingProxyType({})
_NO_RESOURCES: Final = Resources()


# --- sharing identical pieces -----------------------------------------------------------------------------


class Interner:
    """Content-keyed sharing of immutable view pieces across objects.

    Replicas of one workload have the same labels (but the pod name), owner, container specs and
    resources; one shared object each saves most of a pod view's memory. The tables are bounded: when
    they hold `max_entries` in total they are cleared (already-built views keep their objects; later ones
    share anew), so label churn from many rollouts cannot grow them without end.

    Not thread-safe; each event loop (or test) may use its own, or the module's `DEFAULT_INTERNER`.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._quantities: dict[tuple[str, str], int] = {}
        self._resources: dict[tuple[int | None, int | None], Resources] = {}
        self._raw_resources: dict[tuple[str | None, str | None], Resources] = {}
        self._maps: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
        self._owners: dict[tuple[str, str, str, str, bool], OwnerRef] = {}
        self._containers: dict[tuple[object, ...], ContainerView] = {}
        self._container_tuples: dict[tuple[object, ...], tuple[ContainerView, ...]] = {}
        # Not the interpreter's table of interned strings (`sys.intern`), which also holds every identifier of
        # the modules imported and is never cleared: a table of our own is bounded with the rest (`clear`).
        self._texts: dict[str, str] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def clear(self) -> None:
        tables: tuple[dict[Any, Any], ...] = (
            self._quantities,
            self._resources,
            self._raw_resources,
            self._maps,
            self._owners,
            self._containers,
            self._container_tuples,
            self._texts,
        )
        for table in tables:
            table.clear()
        self._size = 0

    def _added(self) -> None:
        self._size += 1
        if self._size > self.max_entries:
            self.clear()

    def text(self, value: str) -> str:
        """One shared copy of a string that recurs across objects of many workloads (an owner's name and
        uid, a label's value, a `generateName`): what `sys.intern` would share, in this interner's own
        table rather than in the interpreter's one table of interned strings."""
        table = self._texts
        shared = table.get(value)
        if shared is None:
            shared = table[value] = value
            self._added()
        return shared

    def quantity(self, resource: str, text: str) -> int:
        """Millicores for `cpu`, bytes for anything else; raises QuantityError."""
        key = (resource, text)
        value = self._quantities.get(key)
        if value is None:
            parsed = quantity.Quantity.parse(text)
            value = parsed.millis if resource == CPU else parsed.value
            self._quantities[key] = value
            self._added()
        return value

    def known_resources(self, raw: tuple[str | None, str | None]) -> Resources | None:
        """The Resources already converted from this raw (cpu, memory) pair of strings, if any."""
        return self._raw_resources.get(raw)

    def remember_resources(self, raw: tuple[str | None, str | None], resources: Resources) -> None:
        self._raw_resources[raw] = resources
        self._added()

    def resources(self, cpu_millicores: int | None, memory_bytes: int | None) -> Resources:
        if cpu_millicores is None and memory_bytes is None:
            return _NO_RESOURCES
        key = (cpu_millicores, memory_bytes)
        shared = self._resources.get(key)
        if shared is None:
            shared = self._resources[key] = Resources(cpu_millicores, memory_bytes)
            self._added()
        return shared

    def string_map(self, items: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
        """A shared read-only-by-contract dict for these (already interned) items, in this order."""
        if not items:
            return _EMPTY_MAP
        shared = self._maps.get(items)
        if shared is None:
            shared = self._maps[items] = dict(items)
            self._added()
        return shared

    def owner(self, api_version: str, kind: str, name: str, uid: str, controller: bool) -> OwnerRef:
        key = (api_version, kind, name, uid, controller)
        shared = self._owners.get(key)
        if shared is None:
            shared = self._owners[key] = OwnerRef(
                sys.intern(api_version), sys.intern(kind), self.text(name), self.text(uid), controller
            )
            self._added()
        return shared

    def find_container(self, key: tuple[object, ...]) -> ContainerView | None:
        return self._containers.get(key)

    def add_container(self, key: tuple[object, ...], view: ContainerView) -> ContainerView:
        self._containers[key] = view
        self._added()
        return view

    def containers(
        self, key: tuple[object, ...], views: tuple[ContainerView, ...]
    ) -> tuple[ContainerView, ...]:
        if not views:
            return ()
        shared = self._container_tuples.get(key)
        if shared is None:
            shared = self._container_tuples[key] = views
            self._added()
        return shared


DEFAULT_INTERNER: Final = Interner()
"""Shared by every conversion that is not given its own interner. Like `sys.intern`, a cache, not state
anything depends on: clearing it changes memory use, never results."""
