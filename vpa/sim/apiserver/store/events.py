"""What the store keeps and what watchers receive: entries, change events, history records, watchers.

Owns: `Entry` (an object and its cached JSON bytes), `Event` (one change, its watch-stream line built
lazily), `HistoryRecord` (a change kept as bytes for watches that resume), and `Watcher` (filters, a queue,
and the selector transitions that turn a MODIFIED into ADDED or DELETED for it).

Must not: change the store or decide when a watcher is cut off (that is `core`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import orjson

from vpa.sim.apiserver.selectors import Requirement, fields_match, labels_match
from vpa.sim.contracts import JsonObj


class Entry:
    """One stored object: the dict (read-only to everyone) and its cached JSON bytes."""

    __slots__ = ("obj", "raw")

    def __init__(self, obj: JsonObj, raw: bytes) -> None:
        self.obj = obj
        self.raw = raw


class Event:
    """One change as watchers see it; `line` is the watch-stream line, built lazily once.

    `obj`/`old` may be given as parsed dicts (live dispatch) or only as bytes (history replay, parsed on
    first use): the history keeps bytes only, so superseded versions cost their JSON size, not a dict tree.
    """

    __slots__ = ("_line", "_obj", "_old", "key", "namespace", "old_raw", "raw", "rv", "type")

    def __init__(
        self,
        rv: int,
        key: str,
        namespace: str,
        etype: str,
        obj: JsonObj | None,
        raw: bytes,
        old: JsonObj | None,
        old_raw: bytes | None = None,
    ) -> None:
        self.rv = rv
        self.key = key
        self.namespace = namespace
        self.type = etype
        self._obj = obj
        self.raw = raw
        self._old = old
        self.old_raw = old_raw
        self._line: bytes | None = None

    @property
    def obj(self) -> JsonObj:
        if self._obj is None:
            self._obj = orjson.loads(self.raw)
        return self._obj

    @property
    def old(self) -> JsonObj | None:
        if self._old is None and self.old_raw is not None:
            self._old = orjson.loads(self.old_raw)
        return self._old

    def retyped(self, etype: str) -> Event:
        return Event(self.rv, self.key, self.namespace, etype, self._obj, self.raw, self._old, self.old_raw)

    def line(self) -> bytes:
        if self._line is None:
            self._line = b'{"type":"' + self.type.encode() + b'","object":' + self.raw + b"}\n"
        return self._line


class HistoryRecord:
    """A change kept for watches that resume from an older resourceVersion (bytes only)."""

    __slots__ = ("key", "namespace", "old_raw", "raw", "rv", "type")

    def __init__(
        self, rv: int, key: str, namespace: str, etype: str, raw: bytes, old_raw: bytes | None
    ) -> None:
        self.rv = rv
        self.key = key
        self.namespace = namespace
        self.type = etype
        self.raw = raw
        self.old_raw = old_raw

    def event(self) -> Event:
        return Event(self.rv, self.key, self.namespace, self.type, None, self.raw, None, self.old_raw)


@dataclass(eq=False)
class Watcher:
    """An open watch: filters and a queue of `Event`s; `None` in the queue ends the stream."""

    key: str
    namespace: str | None
    labels: list[Requirement]
    fields: list[tuple[str, str, str]]
    http: bool = True
    queue: asyncio.Queue[Event | str | None] = field(default_factory=asyncio.Queue)

    def wants(self, ev: Event) -> str | None:
        """The event type this watcher should see for `ev` (selector transitions), or None."""
        if self.namespace and ev.namespace != self.namespace:
            return None
        if not self.labels and not self.fields:
            return ev.type
        new_ok = labels_match(self.labels, ev.obj) and fields_match(self.fields, ev.obj)
        if ev.type != "MODIFIED" or ev.old is None:
            return ev.type if new_ok else None
        old_ok = labels_match(self.labels, ev.old) and fields_match(self.fields, ev.old)
        if new_ok and old_ok:
            return "MODIFIED"
        if new_ok:
            return "ADDED"
        if old_ok:
            return "DELETED"
        return None
