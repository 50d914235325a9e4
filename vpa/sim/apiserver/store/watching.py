"""Watches and continue tokens: the `Watching` mixin of `ObjectStore` and in-process `Subscription`s.

Owns: registering a watcher with its initial ADDED events or the history after a resourceVersion (410
when it has expired, 504 when it is in the future), dropping and bookmarking HTTP watches, compaction and
the per-resource floor, `subscribe` for in-process watchers, and encoding and checking LIST continue
tokens.

Must not: deliver changes (that is `_commit` in `core`) or speak HTTP.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import orjson

from vpa.sim.apiserver.selectors import parse_field_selector, parse_label_selector
from vpa.sim.apiserver.store.core import StoreCore
from vpa.sim.apiserver.store.events import Event, Watcher
from vpa.sim.contracts import ApiError, WatchEvent


class Subscription:
    """An in-process watch (`ObjectStore.subscribe`): an async iterator of `WatchEvent`s."""

    def __init__(self, store: StoreCore, watcher: Watcher) -> None:
        self._store = store
        self._watcher = watcher
        self._closed = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._closed:
            ev = await self._watcher.queue.get()
            if ev is None:
                await self.aclose()
                break
            if isinstance(ev, str):
                continue
            return WatchEvent(ev.type, ev.obj)  # type: ignore[arg-type]
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._closed = True
        self._store.remove_watcher(self._watcher)

    def __del__(self) -> None:
        if not self._closed:
            self._store.remove_watcher(self._watcher)


class Watching(StoreCore):
    """Watch registration, compaction and continue tokens."""

    def add_watcher(
        self,
        resource: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        since_rv: int | None = None,
        initial: bool = False,
        http: bool = True,
    ) -> Watcher:
        """Register a watcher; fills its queue with initial ADDED events or history after `since_rv`.

        Raises ApiError 410 when `since_rv` is older than the compacted history.
        """
        w = Watcher(
            resource,
            namespace or None,
            parse_label_selector(label_selector),
            parse_field_selector(field_selector, resource),
            http=http,
        )
        if since_rv is not None and not initial:
            floor = self.compacted_for(resource)
            if since_rv < floor:
                raise ApiError(410, "Expired", f"too old resource version: {since_rv} ({floor})")
            if since_rv > self.rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {since_rv}, current: {self.rv}",
                    causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    retry_after_s=1,
                )
            for rec in self._history.get(resource, ()):
                if rec.rv <= since_rv or rec.key != resource:
                    continue
                ev = rec.event()
                t = w.wants(ev)
                if t is None:
                    continue
                w.queue.put_nowait(ev if t == ev.type else ev.retyped(t))
        elif initial:
            for e in self.iter_entries(
                resource, namespace, label_selector=label_selector, field_selector=field_selector
            ):
                md = e.obj["metadata"]
                w.queue.put_nowait(
                    Event(
                        int(md["resourceVersion"]),
                        resource,
                        md.get("namespace", ""),
                        "ADDED",
                        e.obj,
                        e.raw,
                        None,
                    )
                )
        self.watchers.setdefault(resource, set()).add(w)
        return w

    def drop_watches(self) -> int:
        n = 0
        for s in self.watchers.values():
            for w in list(s):
                if w.http:
                    w.queue.put_nowait(None)
                    s.discard(w)
                    n += 1
        return n

    def bookmark_all(self) -> None:
        for s in self.watchers.values():
            for w in s:
                if w.http:
                    w.queue.put_nowait("BOOKMARK")

    def compact(self) -> None:
        """Forget all history: every resourceVersion older than the current one is now expired."""
        self._history.clear()
        self._expired.clear()
        self.compacted_rv = self.rv

    def compacted_for(self, resource: str) -> int:
        """The oldest resourceVersion a watch or continue token on `resource` may still start from."""
        return max(self.compacted_rv, self._expired.get(resource, 0))

    def subscribe(self, resource: str) -> AsyncIterator[WatchEvent]:
        """Registers now (not on first iteration), so no change made after this call is missed."""
        self.resource_type(resource)
        return Subscription(self, self.add_watcher(resource, None, http=False))

    # ------------------------------------------------------------------ continue tokens

    def encode_continue(self, rv: int, last: tuple[str, str]) -> str:
        start = f"{last[0]}/{last[1]}" if last[0] else last[1]
        payload = {"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00", "ns": last[0], "name": last[1]}
        return base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=")

    def decode_continue(self, token: str, resource: str = "") -> tuple[int, tuple[str, str]]:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            data = orjson.loads(raw)
            rv = int(data["rv"])
            last = (str(data["ns"]), str(data["name"]))
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
            raise ApiError(400, "BadRequest", f"invalid continue token: {exc}") from exc
        # Valid until compaction, as kube-apiserver's (etcd keeps the revision); a resource's watch history
        # running out bounds watches only.
        if rv < self.compacted_rv:
            raise ApiError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can "
                "start a new list without the continue parameter, or use the continue token in this "
                "response to retrieve the remainder of the results. Continuing with the provided token "
                "results in an inconsistent list - objects that were created, modified, or deleted between "
                "the time the first chunk was returned and now may show up in the list.",
            )
        return rv, last
