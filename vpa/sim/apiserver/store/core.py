"""The store's state and the machinery every write goes through: `StoreCore`.

Owns: the objects by resource, namespace and name with their cached bytes, the sorted-key and owner
indexes, the resourceVersion counter, the per-resource history and its expiry floor, the watcher sets
and listeners; lookups and LIST filtering; `_commit` (new resourceVersion, kube-apiserver's field order,
history, fan-out to watchers, cutting off an HTTP watcher that falls too far behind); the checks and
preparation shared by create and update (namespace, name, metadata types, CRD schemas); and the
synchronous tail of create, which also makes the bootstrap namespaces.

Must not: implement create / update / patch (`writing`), deletion (`deleting`), CRD registration (`crds`)
or watch registration (`watching`); it declares what it calls of them, and `ObjectStore` in the package
puts them together.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import random
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from vpa.model.clock import VirtualClock
from vpa.sim.apiserver import schema
from vpa.sim.apiserver.hooks import Hooks
from vpa.sim.apiserver.registry import Registry, ResourceType, builtin_types
from vpa.sim.apiserver.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from vpa.sim.apiserver.store.common import FIELD_VALIDATION, Admission, add_warnings, invalid, rfc3339
from vpa.sim.apiserver.store.events import Entry, Event, HistoryRecord, Watcher
from vpa.sim.contracts import ApiError, JsonObj

_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_KINDS = {"namespaces", "services"}


class StoreCore:
    """State, lookups and the commit machinery shared by the mixins that make up `ObjectStore`."""

    def __init__(
        self,
        clock: VirtualClock,
        hooks: Hooks | None = None,
        *,
        history_size: int = 50_000,
        max_watch_backlog: int = 100_000,
        rng: random.Random | None = None,
    ) -> None:
        self.clock = clock
        self.hooks = hooks or Hooks()
        self.registry = Registry()
        for rt in builtin_types():
            self.registry.add(rt)
        self.admission: Admission | None = None
        self._rng = rng or random.Random()
        self._objects: dict[str, dict[str, dict[str, Entry]]] = {}
        self._sorted: dict[str, list[tuple[str, str]]] = {}
        self._owners: dict[str, set[tuple[str, str, str]]] = {}
        self.rv = 1
        # Like kube-apiserver's watch cache, history is kept per resource: a quiet resource's window is
        # not pushed out by another resource's churn. `compacted_rv` is the floor set by `compact()`.
        self.history_size = history_size
        self.compacted_rv = 0
        self._history: dict[str, deque[HistoryRecord]] = {}
        self._expired: dict[str, int] = {}
        self.watchers: dict[str, set[Watcher]] = {}
        # Events an HTTP watcher may have queued before it is considered too slow and disconnected.
        self.max_watch_backlog = max_watch_backlog
        # Called after every committed change (the HTTP layer, tests); must not raise.
        self.listeners: list[Callable[[Event], None]] = []
        self._pending: set[asyncio.Task[Any]] = set()
        self.crd_listeners: list[Callable[[ResourceType | None, str], Awaitable[None] | None]] = []
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self._create_sync(self.registry.get("namespaces"), {"metadata": {"name": ns}})  # type: ignore[arg-type]

    # ------------------------------------------------------------------ lookups

    def resource_type(self, resource: str) -> ResourceType:
        rt = self.registry.get(resource)
        if rt is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        return rt

    def _bucket(self, key: str) -> dict[str, dict[str, Entry]]:
        b = self._objects.get(key)
        if b is None:
            b = self._objects[key] = {}
        return b

    def entry(self, resource: str, namespace: str | None, name: str) -> Entry | None:
        return self._objects.get(resource, {}).get(namespace or "", {}).get(name)

    def get(self, resource: str, namespace: str | None, name: str) -> JsonObj | None:
        e = self.entry(resource, namespace, name)
        return e.obj if e is not None else None

    def count(self, resource: str) -> int:
        return sum(len(b) for b in self._objects.get(resource, {}).values())

    def sorted_keys(self, resource: str) -> list[tuple[str, str]]:
        keys = self._sorted.get(resource)
        if keys is None:
            keys = sorted((ns, name) for ns, b in self._objects.get(resource, {}).items() for name in b)
            self._sorted[resource] = keys
        return keys

    def iter_entries(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        start: tuple[str, str] | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        """Matching entries in (namespace, name) order, from `start` (exclusive), at most `limit`."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, resource)
        bucket = self._objects.get(resource, {})
        out: list[Entry] = []
        if namespace:
            inner = bucket.get(namespace, {})
            names = sorted(inner)
            if start is not None:
                names = (
                    names[bisect.bisect_right(names, start[1]) :]
                    if start[0] == namespace
                    else (names if start[0] < namespace else [])
                )
            for n in names:
                e = inner[n]
                if (not labels or labels_match(labels, e.obj)) and (
                    not fields or fields_match(fields, e.obj)
                ):
                    out.append(e)
                    if limit is not None and len(out) >= limit:
                        break
            return out
        keys = self.sorted_keys(resource)
        first = bisect.bisect_right(keys, start) if start is not None else 0
        for i in range(first, len(keys)):
            ns, n = keys[i]
            e = bucket[ns][n]
            if (not labels or labels_match(labels, e.obj)) and (not fields or fields_match(fields, e.obj)):
                out.append(e)
                if limit is not None and len(out) >= limit:
                    break
        return out

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[JsonObj]:
        self.resource_type(resource)
        return [
            e.obj
            for e in self.iter_entries(
                resource, namespace, label_selector=label_selector, field_selector=field_selector
            )
        ]

    def dependents(self, uid: str) -> builtins.list[tuple[str, str, str]]:
        return sorted(self._owners.get(uid, ()))

    # ------------------------------------------------------------------ commit machinery

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _index_owners(self, key: str, obj: JsonObj, add: bool) -> None:
        md = obj["metadata"]
        refs = md.get("ownerReferences")
        if not refs:
            return
        ident = (key, md.get("namespace", ""), md["name"])
        for ref in refs:
            uid = ref.get("uid")
            if not uid:
                continue
            if add:
                self._owners.setdefault(uid, set()).add(ident)
            else:
                s = self._owners.get(uid)
                if s is not None:
                    s.discard(ident)
                    if not s:
                        del self._owners[uid]

    def _commit(self, rt: ResourceType, etype: str, obj: JsonObj, old: JsonObj | None) -> Entry:
        """Assign a new RV, store (or remove on DELETED), record history and notify watchers."""
        key = rt.key
        rv = self._next_rv()
        if next(iter(obj)) != "kind":
            # kube-apiserver's field order: kind, apiVersion, metadata, then the rest.
            head = {
                "kind": obj.get("kind", rt.kind),
                "apiVersion": obj.get("apiVersion", rt.api_version()),
                "metadata": obj["metadata"],
            }
            head.update(obj)
            obj = head
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = orjson.dumps(obj)
        md = obj["metadata"]
        ns = md.get("namespace", "") if rt.namespaced else ""
        name = md["name"]
        bucket = self._bucket(key)
        entry = Entry(obj, raw)
        prev = bucket.get(ns, {}).get(name)
        old_raw = prev.raw if prev is not None and old is not None else None
        if old is not None:
            self._index_owners(key, old, False)
        if etype == "DELETED":
            inner = bucket.get(ns)
            if inner is not None:
                inner.pop(name, None)
                if not inner:
                    del bucket[ns]
            self._sorted.pop(key, None)
        else:
            inner = bucket.get(ns)
            if inner is None:
                inner = bucket[ns] = {}
            if name not in inner:
                self._sorted.pop(key, None)
            inner[name] = entry
            self._index_owners(key, obj, True)
        ev = Event(rv, key, ns, etype, obj, raw, old, old_raw)
        history = self._history.get(key)
        if history is None:
            history = self._history[key] = deque(maxlen=self.history_size)
        if len(history) == self.history_size:
            self._expired[key] = history[0].rv
        history.append(HistoryRecord(rv, key, ns, etype, raw, old_raw))
        for w in tuple(self.watchers.get(key, ())):
            t = w.wants(ev)
            if t is None:
                continue
            if w.http and w.queue.qsize() >= self.max_watch_backlog:
                # Like kube-apiserver's watch cache, a client that does not keep up is cut off (it
                # re-watches from its last resourceVersion) instead of buffering without bound.
                self.remove_watcher(w)
                w.queue.put_nowait(None)
                continue
            if t != ev.type:
                w.queue.put_nowait(ev.retyped(t))
            else:
                w.queue.put_nowait(ev)
        for listener in self.listeners:
            listener(ev)
        return entry

    def _check_namespace(self, rt: ResourceType, namespace: str, op: str) -> None:
        if not rt.namespaced:
            return
        if not namespace:
            raise ApiError(
                400, "BadRequest", "the server could not find the requested resource: a namespace is required"
            )
        ns = self.get("namespaces", None, namespace)
        if ns is None:
            raise ApiError(
                404, "NotFound", f'namespaces "{namespace}" not found', name=namespace, kind="namespaces"
            )
        if op == "CREATE" and ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being terminated",
                name=namespace,
                kind=rt.plural,
            )

    def _validate_name(self, rt: ResourceType, name: str) -> None:
        if rt.plural in _DNS_LABEL_KINDS:
            ok = len(name) <= 63 and _LABEL_RE.match(name) is not None
            rule = (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character"
            )
        else:
            ok = len(name) <= 253 and _SUBDOMAIN_RE.match(name) is not None
            rule = (
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
                "or '.', and must start and end with an alphanumeric character"
            )
        if rt.crd or rt.plural == "customresourcedefinitions":
            ok = ok or (len(name) <= 253 and _SUBDOMAIN_RE.match(name) is not None)
        if not ok:
            raise invalid(
                rt, name, [("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {rule}')]
            )

    def _prepare_common(self, rt: ResourceType, obj: JsonObj, version: str | None) -> None:
        obj["apiVersion"] = rt.api_version(version or rt.version)
        obj["kind"] = rt.kind
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = obj["metadata"] = {}
        md.pop("managedFields", None)
        for k in ("name", "generateName", "namespace", "resourceVersion", "uid"):
            if k in md and md[k] is not None and not isinstance(md[k], str):
                raise ApiError(
                    400,
                    "BadRequest",
                    f"json: cannot unmarshal {type(md[k]).__name__} into Go struct field "
                    f"ObjectMeta.metadata.{k} of type string",
                )
        for k in ("labels", "annotations"):
            v = md.get(k)
            if v is not None and not isinstance(v, dict):
                raise invalid(
                    rt,
                    md.get("name", ""),
                    [(f"metadata.{k}", "FieldValueInvalid", "Invalid value: must be a map of strings")],
                )
            if v is not None and any(not isinstance(x, str) for x in v.values()):
                raise ApiError(400, "BadRequest", f"metadata.{k}: values must be strings")

    def _schema_check(self, rt: ResourceType, obj: JsonObj, version: str | None) -> None:
        if not rt.crd:
            return
        sch = rt.schemas.get(version or rt.version) or rt.schemas.get(rt.version)
        if not sch:
            return
        pruned: builtins.list[str] = []
        errors = schema.validate_and_prune(sch, obj, pruned)
        if pruned:
            mode = FIELD_VALIDATION.get()
            if mode == "Strict":
                fields = ", ".join(f'unknown field "{p}"' for p in pruned)
                raise ApiError(
                    400,
                    "BadRequest",
                    f'{rt.kind} in version "{version or rt.version}" cannot be handled as a {rt.kind}: '
                    f"strict decoding error: {fields}",
                )
            if mode == "Warn":
                add_warnings([f'unknown field "{p}"' for p in pruned])
        if errors:
            raise invalid(rt, obj["metadata"].get("name", ""), errors)

    def _create_sync(self, rt: ResourceType, obj: JsonObj, *, dry_run: bool = False) -> JsonObj:
        """The non-awaiting tail of create: naming, identity, storage (used for bootstrap objects too)."""
        md = obj.setdefault("metadata", {})
        self._prepare_common(rt, obj, obj.get("apiVersion", "").rpartition("/")[2] or None)
        if rt.plural == "namespaces" and not rt.group:
            md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md["name"]
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        ns = md.get("namespace", "") if rt.namespaced else ""
        if not rt.namespaced:
            md.pop("namespace", None)
        name = md["name"]
        if self.entry(rt.key, ns, name) is not None:
            res = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise ApiError(
                409,
                "AlreadyExists",
                f'{res} "{name}" already exists',
                name=name,
                kind=rt.plural,
                group=rt.group or None,
            )
        md["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        md["creationTimestamp"] = rfc3339(self.clock.now())
        if rt.generation:
            md["generation"] = 1
        if dry_run:
            return obj
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._crd_accepted(obj)
        obj = self._commit(rt, "ADDED", obj, None).obj
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._register_crd(obj)
        return obj

    def remove_watcher(self, w: Watcher) -> None:
        s = self.watchers.get(w.key)
        if s is not None:
            s.discard(w)

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._pending.add(t)
        t.add_done_callback(self._pending.discard)

    async def settle(self) -> None:
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # ------------------------------------------------------------------ implemented by the mixins

    def _validate_crd(self, rt: ResourceType, crd: JsonObj) -> None:
        raise NotImplementedError

    def _crd_accepted(self, crd: JsonObj) -> None:
        raise NotImplementedError

    def _register_crd(self, crd: JsonObj) -> None:
        raise NotImplementedError

    async def _unregister_crd(self, crd: JsonObj) -> None:
        raise NotImplementedError

    async def _remove(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        raise NotImplementedError

    async def _maybe_finish_namespace(self, name: str) -> None:
        raise NotImplementedError
