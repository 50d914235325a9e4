"""The simulated cluster's object store: every object, the resourceVersion counter, history and watchers.

Owns: create / update / patch / delete with kube-apiserver semantics (uid, generateName, generation,
timestamps from the virtual clock, optimistic concurrency, status-subresource rules, graceful pod deletion,
finalizers, ownerReference garbage collection with Background / Orphan / Foreground propagation, namespace
termination, dry runs, CRD registration and schema checks), the cached serialized bytes of each object
(LIST concatenates them), the bounded event history (bytes only) that makes old resourceVersions expire
(410), and fan-out of changes to HTTP watchers (cut off when they fall too far behind) and in-process
subscribers. Implements `vpa.sim.contracts.Store`; admission webhooks run on `create(admit=True)` and on
every update/patch/delete unless `admit=False`.

Must not: speak HTTP or know about specific kinds beyond what the generic API machinery knows (pods'
graceful deletion, namespaces, CRD registration). Kind semantics come through `Hooks`.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import builtins
import contextlib
import copy
import random
import re
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from vpa.model.clock import VirtualClock
from vpa.sim.apiserver import patching, schema
from vpa.sim.apiserver.hooks import Hooks
from vpa.sim.apiserver.registry import Registry, ResourceType, builtin_types, crd_resource_type
from vpa.sim.apiserver.selectors import (
    Requirement,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from vpa.sim.contracts import ApiError, JsonObj, Operation, WatchEvent

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's generateName alphabet
_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_KINDS = {"namespaces", "services"}
DEFAULT_USER: JsonObj = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
CONTROLLER_USER: JsonObj = {
    "username": "system:kube-controller-manager",
    "groups": ["system:authenticated"],
}


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def deep_copy(obj: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(obj))
    except TypeError:
        return copy.deepcopy(obj)


def not_found(rt: ResourceType, name: str) -> ApiError:
    res = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(
        404, "NotFound", f'{res} "{name}" not found', name=name, kind=rt.plural, group=rt.group or None
    )


def conflict(rt: ResourceType, name: str) -> ApiError:
    res = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {res} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        name=name,
        kind=rt.plural,
        group=rt.group or None,
    )


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; causes are (field, reason, message-detail) triples as kube formats them."""
    kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    details = [f"{f}: {m}" for f, _, m in causes]
    joined = details[0] if len(details) == 1 else "[" + ", ".join(details) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {joined}',
        causes=[{"reason": r, "message": m, "field": f} for f, r, m in causes],
        kind=rt.kind,
        name=name,
        group=rt.group or None,
    )


class Admission(Protocol):
    """What the store needs of admission webhooks (implemented in `admission.py`)."""

    async def mutate(
        self,
        rt: ResourceType,
        op: Operation,
        obj: JsonObj,
        old: JsonObj | None,
        subresource: str | None,
        *,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> tuple[JsonObj, list[str]]: ...

    async def validate(
        self,
        rt: ResourceType,
        op: Operation,
        obj: JsonObj | None,
        old: JsonObj | None,
        subresource: str | None,
        *,
        namespace: str | None,
        name: str,
        dry_run: bool,
        user: JsonObj,
        options: JsonObj | None,
    ) -> list[str]: ...

    def active(self) -> bool: ...


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


class Subscription:
    """An in-process watch (`ObjectStore.subscribe`): an async iterator of `WatchEvent`s."""

    def __init__(self, store: ObjectStore, watcher: Watcher) -> None:
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


class ObjectStore:
    """Implements `vpa.sim.contracts.Store` and the generic API machinery behind the HTTP handlers."""

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
                _add_warnings([f'unknown field "{p}"' for p in pruned])
        if errors:
            raise invalid(rt, obj["metadata"].get("name", ""), errors)

    # ------------------------------------------------------------------ create

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

    async def create(
        self,
        resource: str,
        obj: JsonObj,
        *,
        admit: bool = True,
        dry_run: bool = False,
        user: JsonObj | None = None,
        version: str | None = None,
        namespace: str | None = None,
        options: JsonObj | None = None,
    ) -> JsonObj:
        rt = self.resource_type(resource)
        if "create" not in rt.verbs:
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        obj = deep_copy(obj)
        self._prepare_common(rt, obj, version)
        md = obj["metadata"]
        if namespace is not None and rt.namespaced:
            body_ns = md.get("namespace")
            if body_ns and body_ns != namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            md["namespace"] = namespace
        ns = md.get("namespace") or ("default" if rt.namespaced and namespace is None else "")
        if rt.namespaced:
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        for k in (
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ):
            md.pop(k, None)
        if not md.get("name") and not md.get("generateName"):
            raise invalid(
                rt,
                "",
                [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")],
            )
        self._check_namespace(rt, ns, "CREATE")
        if rt.reset_status_on_create:
            obj.pop("status", None)
            if rt.key == "pods":
                obj["status"] = {"phase": "Pending"}
        if rt.crd and rt.status_subresource:
            obj.pop("status", None)
        name_for_msgs = md.get("name") or md.get("generateName", "")
        self.hooks.run_defaulters(rt.key, "CREATE", None, obj, None)
        self._schema_check(rt, obj, version)
        user = user or REQUEST_USER.get()
        warnings: builtins.list[str] = []
        if admit and self.admission is not None and self.admission.active():
            obj, warnings = await self.admission.mutate(
                rt,
                "CREATE",
                obj,
                None,
                None,
                namespace=ns or None,
                name=md.get("name", ""),
                dry_run=dry_run,
                user=user,
                options=options,
            )
            md = obj.setdefault("metadata", {})
            if rt.namespaced:
                md["namespace"] = ns
            self.hooks.run_defaulters(rt.key, "CREATE", None, obj, None)
            self._schema_check(rt, obj, version)
        if not md.get("name"):
            md["name"] = self._generate_name(rt, ns, md.get("generateName", ""))
        self._validate_name(rt, md["name"])
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._validate_crd(rt, obj)
        self.hooks.run_validators(rt.key, "CREATE", None, obj, None)
        if admit and self.admission is not None and self.admission.active():
            warnings += await self.admission.validate(
                rt,
                "CREATE",
                obj,
                None,
                None,
                namespace=ns or None,
                name=md["name"],
                dry_run=dry_run,
                user=user,
                options=options,
            )
            self._check_namespace(rt, ns, "CREATE")
        del name_for_msgs
        _add_warnings(warnings)
        return self._create_sync(rt, obj, dry_run=dry_run)

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        prefix = prefix[: 63 - 5] if len(prefix) > 58 else prefix
        for _ in range(16):
            name = prefix + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
            if self.entry(rt.key, ns, name) is None:
                return name
        raise ApiError(409, "AlreadyExists", f"could not generate a unique name for prefix {prefix!r}")

    # ------------------------------------------------------------------ update

    async def update(
        self,
        resource: str,
        obj: JsonObj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        user: JsonObj | None = None,
        admit: bool = True,
        version: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        options: JsonObj | None = None,
    ) -> JsonObj:
        rt = self.resource_type(resource)
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a JSON object")
        md_in = obj.get("metadata") or {}
        name = name if name is not None else md_in.get("name", "")
        if md_in.get("name") and md_in["name"] != name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({md_in['name']}) does not match the name on the URL ({name})",
            )
        ns = (namespace if namespace is not None else md_in.get("namespace", "")) if rt.namespaced else ""
        if rt.namespaced and not ns:
            ns = "default"
        if rt.namespaced and md_in.get("namespace") and md_in["namespace"] != ns:
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        want_rv = md_in.get("resourceVersion") or None
        for _attempt in range(8):
            entry = self.entry(rt.key, ns, name)
            if entry is None:
                raise not_found(rt, name)
            old = entry.obj
            if want_rv is not None and want_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if want_rv is None and not rt.unconditional_update and subresource != "scale":
                raise invalid(
                    rt,
                    name,
                    [
                        (
                            "metadata.resourceVersion",
                            "FieldValueInvalid",
                            "Invalid value: 0x0: must be specified for an update",
                        )
                    ],
                )
            new = deep_copy(obj)
            result = await self._update_with(
                rt,
                old,
                new,
                subresource,
                dry_run=dry_run,
                user=user,
                admit=admit,
                version=version,
                options=options,
            )
            if result is not None:
                return result
            if want_rv is not None:
                raise conflict(rt, name)
        raise conflict(rt, name)

    async def _update_with(
        self,
        rt: ResourceType,
        old: JsonObj,
        new: JsonObj,
        subresource: str | None,
        *,
        dry_run: bool,
        user: JsonObj | None,
        admit: bool,
        version: str | None,
        options: JsonObj | None,
    ) -> JsonObj | None:
        """Apply `new` over `old`; None when `old` changed while admission was awaited (caller retries)."""
        old_md = old["metadata"]
        old_rv = old_md["resourceVersion"]
        name = old_md["name"]
        ns = old_md.get("namespace", "")
        if subresource == "status" and rt.has_status:
            status = new.get("status")
            new = deep_copy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        else:
            if subresource is None and rt.status_subresource:
                if "status" in old:
                    new["status"] = deep_copy(old["status"])
                else:
                    new.pop("status", None)
            self._prepare_common(rt, new, version)
            md = new["metadata"]
            if md.get("uid") and md["uid"] != old_md["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {md['uid']}, UID in object meta: "
                    f"{old_md['uid']}",
                )
            for k in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
            ):
                if k in old_md:
                    md[k] = old_md[k]
                else:
                    md.pop(k, None)
            if rt.namespaced:
                md["namespace"] = ns
            else:
                md.pop("namespace", None)
        new["apiVersion"] = rt.api_version(version or old.get("apiVersion", "").rpartition("/")[2] or None)
        new["kind"] = rt.kind
        new["metadata"]["resourceVersion"] = old_rv
        user = user or REQUEST_USER.get()
        self.hooks.run_defaulters(rt.key, "UPDATE", old, new, subresource)
        if subresource is None or (subresource == "status" and rt.crd):
            self._schema_check(rt, new, version)
        warnings: builtins.list[str] = []
        active = admit and self.admission is not None and self.admission.active()
        if active:
            assert self.admission is not None
            new, warnings = await self.admission.mutate(
                rt,
                "UPDATE",
                new,
                old,
                subresource,
                namespace=ns or None,
                name=name,
                dry_run=dry_run,
                user=user,
                options=options,
            )
            new.setdefault("metadata", {})
            for k in ("uid", "creationTimestamp", "name", "resourceVersion"):
                if k in old_md:
                    new["metadata"][k] = old_md[k]
            if rt.namespaced:
                new["metadata"]["namespace"] = ns
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io" and subresource is None:
            self._validate_crd(rt, new)
        self.hooks.run_validators(rt.key, "UPDATE", old, new, subresource)
        if active:
            assert self.admission is not None
            warnings += await self.admission.validate(
                rt,
                "UPDATE",
                new,
                old,
                subresource,
                namespace=ns or None,
                name=name,
                dry_run=dry_run,
                user=user,
                options=options,
            )
            cur = self.entry(rt.key, ns, name)
            if cur is None:
                raise not_found(rt, name)
            if cur.obj["metadata"]["resourceVersion"] != old_rv:
                return None
        # A binding sets spec.nodeName outside the pod update strategy: kube-apiserver does not bump
        # generation for it (the scheduler's bind is not a spec change the kubelet must observe).
        if rt.generation and subresource != "binding" and _spec_changed(rt, old, new):
            new["metadata"]["generation"] = int(old_md.get("generation") or 0) + 1
        _add_warnings(warnings)
        if _same_object(old, new):
            return old
        if dry_run:
            return new
        md = new["metadata"]
        if (
            md.get("deletionTimestamp")
            and not md.get("finalizers")
            and not md.get("deletionGracePeriodSeconds")
        ):
            new = self._commit(rt, "MODIFIED", new, old).obj
            await self._remove(rt, new)
            return new
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._crd_accepted(new)
        new = self._commit(rt, "MODIFIED", new, old).obj
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._register_crd(new)
        if rt.key == "namespaces" and md.get("deletionTimestamp"):
            await self._maybe_finish_namespace(md["name"])
        return new

    # ------------------------------------------------------------------ patch

    async def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        user: JsonObj | None = None,
        admit: bool = True,
        version: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        options: JsonObj | None = None,
    ) -> JsonObj:
        """PATCH with `json`, `merge`, `strategic` or `apply` semantics; retried on internal conflicts."""
        rt = self.resource_type(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        if patch_type == "strategic" and not rt.strategic_merge:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        if patch_type == "apply" and not field_manager:
            raise ApiError(400, "BadRequest", "PATCH /apply requires fieldManager")
        for _attempt in range(8):
            entry = self.entry(rt.key, ns, name)
            if entry is None:
                if patch_type == "apply" and subresource is None:
                    if not isinstance(body, dict):
                        raise ApiError(400, "BadRequest", "apply patch body must be an object")
                    obj = deep_copy(body)
                    obj.setdefault("metadata", {})["name"] = name
                    return await self.create(
                        resource,
                        obj,
                        admit=admit,
                        dry_run=dry_run,
                        user=user,
                        version=version,
                        namespace=ns or None,
                        options=options,
                    )
                raise not_found(rt, name)
            old = entry.obj
            new = patching.apply_patch(patch_type, old, body, rt)
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "the patch produced a non-object document")
            md = new.get("metadata") or {}
            patch_rv = md.get("resourceVersion")
            if patch_rv and patch_rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if md.get("name", name) != name:
                raise invalid(
                    rt,
                    name,
                    [
                        (
                            "metadata.name",
                            "FieldValueInvalid",
                            f'Invalid value: "{md.get("name")}": field is immutable',
                        )
                    ],
                )
            result = await self._update_with(
                rt,
                old,
                new,
                subresource,
                dry_run=dry_run,
                user=user,
                admit=admit,
                version=version,
                options=options,
            )
            if result is not None:
                return result
        raise conflict(rt, name)

    # ------------------------------------------------------------------ delete

    async def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_s: int | None = None,
        propagation: str | None = None,
        preconditions: JsonObj | None = None,
        dry_run: bool = False,
        user: JsonObj | None = None,
        admit: bool = True,
        options: JsonObj | None = None,
    ) -> JsonObj | None:
        rt = self.resource_type(resource)
        ns = (namespace or "default") if rt.namespaced else ""
        entry = self.entry(rt.key, ns, name)
        if entry is None:
            raise not_found(rt, name)
        obj = entry.obj
        md = obj["metadata"]
        if preconditions:
            if preconditions.get("uid") and preconditions["uid"] != md["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                    f"UID in object meta: {md['uid']}",
                )
            if (
                preconditions.get("resourceVersion")
                and preconditions["resourceVersion"] != md["resourceVersion"]
            ):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions['resourceVersion']}, ResourceVersion in object meta: "
                    f"{md['resourceVersion']}",
                )
        self.hooks.run_validators(rt.key, "DELETE", obj, obj, None)
        if admit and self.admission is not None and self.admission.active():
            await self.admission.validate(
                rt,
                "DELETE",
                None,
                obj,
                None,
                namespace=ns or None,
                name=name,
                dry_run=dry_run,
                user=user or REQUEST_USER.get(),
                options=options,
            )
            cur = self.entry(rt.key, ns, name)
            if cur is None:
                raise not_found(rt, name)
            obj = cur.obj
            md = obj["metadata"]
        if dry_run:
            return obj
        if propagation == "Orphan":
            await self._orphan(md["uid"])
        if propagation == "Foreground" and rt.key != "namespaces" and self._live_dependents(md["uid"]):
            return await self._delete_foreground(rt, obj)
        grace = self._grace(rt, obj, grace_period_s)
        if rt.key == "namespaces":
            return await self._delete_namespace(obj)
        if grace > 0 or md.get("finalizers"):
            if md.get("deletionTimestamp"):
                cur_grace = int(md.get("deletionGracePeriodSeconds") or 0)
                if grace > 0 and grace >= cur_grace:
                    return obj
                if grace == 0 and md.get("finalizers"):
                    return obj
            new = deep_copy(obj)
            nmd = new["metadata"]
            if grace > 0:
                nmd["deletionTimestamp"] = rfc3339(self.clock.now() + grace)
                nmd["deletionGracePeriodSeconds"] = grace
            else:
                nmd.setdefault("deletionTimestamp", rfc3339(self.clock.now()))
                nmd["deletionGracePeriodSeconds"] = 0
            if rt.generation:
                nmd["generation"] = int(nmd.get("generation") or 0) + 1
            new = self._commit(rt, "MODIFIED", new, obj).obj
            if grace == 0 and not nmd.get("finalizers"):
                await self._remove(rt, new)
            return new
        return await self._remove(rt, obj)

    def _live_dependents(self, uid: str) -> builtins.list[tuple[str, str, str]]:
        return [d for d in self.dependents(uid) if self.entry(*d) is not None]

    async def _delete_foreground(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        """Foreground cascade: the owner stays (finalizer `foregroundDeletion`) until no dependent is left."""
        md = obj["metadata"]
        new = deep_copy(obj)
        nmd = new["metadata"]
        finalizers = list(nmd.get("finalizers") or [])
        if "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        nmd["finalizers"] = finalizers
        if not md.get("deletionTimestamp"):
            nmd["deletionTimestamp"] = rfc3339(self.clock.now())
            nmd["deletionGracePeriodSeconds"] = 0
            if rt.generation:
                nmd["generation"] = int(nmd.get("generation") or 0) + 1
        if not _same_object(obj, new):
            new = self._commit(rt, "MODIFIED", new, obj).obj
        for key, ns, name in self._live_dependents(md["uid"]):
            e = self.entry(key, ns, name)
            if e is None or e.obj["metadata"].get("deletionTimestamp"):
                continue
            with contextlib.suppress(ApiError):
                await self.delete(key, ns or None, name, propagation="Foreground", admit=False)
        await self._finish_foreground(rt, md.get("namespace", ""), md["name"])
        cur = self.entry(rt.key, md.get("namespace", ""), md["name"])
        return cur.obj if cur is not None else new

    async def _finish_foreground(self, rt: ResourceType, ns: str, name: str) -> None:
        """Drop `foregroundDeletion` once no dependent is left; remove the owner if nothing else holds it."""
        e = self.entry(rt.key, ns, name)
        if e is None:
            return
        md = e.obj["metadata"]
        if "foregroundDeletion" not in (md.get("finalizers") or []) or self._live_dependents(md["uid"]):
            return
        new = deep_copy(e.obj)
        rest = [f for f in new["metadata"]["finalizers"] if f != "foregroundDeletion"]
        if rest:
            new["metadata"]["finalizers"] = rest
        else:
            new["metadata"].pop("finalizers", None)
        new = self._commit(rt, "MODIFIED", new, e.obj).obj
        if not rest:
            await self._remove(rt, new)

    async def _release_foreground_owners(self, obj: JsonObj) -> None:
        md = obj["metadata"]
        for ref in md.get("ownerReferences") or []:
            owner_rt = self.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
            if owner_rt is None:
                continue
            ns = md.get("namespace", "") if owner_rt.namespaced else ""
            owner = self.entry(owner_rt.key, ns, ref.get("name", ""))
            if owner is not None and owner.obj["metadata"].get("uid") == ref.get("uid"):
                await self._finish_foreground(owner_rt, ns, ref.get("name", ""))

    def _grace(self, rt: ResourceType, obj: JsonObj, requested: int | None) -> int:
        if rt.key != "pods":
            return 0
        spec = obj.get("spec") or {}
        if not spec.get("nodeName"):
            return 0
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is None:
            requested = spec.get("terminationGracePeriodSeconds", 30)
            if requested is None:
                requested = 30
        return max(0, int(requested))

    async def _remove(self, rt: ResourceType, obj: JsonObj) -> JsonObj:
        """Remove the object for good, then collect its dependents (background propagation)."""
        md = obj["metadata"]
        ns = md.get("namespace", "")
        cur = self.entry(rt.key, ns, md["name"])
        if cur is None:
            return obj
        final = self._commit(rt, "DELETED", deep_copy(cur.obj), cur.obj).obj
        if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            await self._unregister_crd(final)
        await self._collect(md["uid"])
        await self._release_foreground_owners(final)
        if ns and rt.namespaced:
            nsobj = self.get("namespaces", None, ns)
            if nsobj is not None and nsobj["metadata"].get("deletionTimestamp"):
                await self._maybe_finish_namespace(ns)
        return final

    async def _collect(self, owner_uid: str) -> None:
        for key, ns, name in self.dependents(owner_uid):
            e = self.entry(key, ns, name)
            if e is None:
                continue
            refs = e.obj["metadata"].get("ownerReferences") or []
            alive = [r for r in refs if r.get("uid") != owner_uid and self._uid_alive(r)]
            if alive:
                new = deep_copy(e.obj)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
                self._commit(self.resource_type(key), "MODIFIED", new, e.obj)
                continue
            if e.obj["metadata"].get("deletionTimestamp"):
                continue
            try:
                await self.delete(key, ns or None, name, admit=False)
            except ApiError:
                continue

    def _uid_alive(self, ref: JsonObj) -> bool:
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        rt = self.registry.by_kind(api_version, kind)
        if rt is None:
            return False
        bucket = self._objects.get(rt.key, {})
        for inner in bucket.values():
            e = inner.get(ref.get("name", ""))
            if e is not None and e.obj["metadata"]["uid"] == ref.get("uid"):
                return True
        return False

    async def _orphan(self, owner_uid: str) -> None:
        for key, ns, name in self.dependents(owner_uid):
            e = self.entry(key, ns, name)
            if e is None:
                continue
            new = deep_copy(e.obj)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._commit(self.resource_type(key), "MODIFIED", new, e.obj)

    async def _delete_namespace(self, obj: JsonObj) -> JsonObj:
        name = obj["metadata"]["name"]
        rt = self.resource_type("namespaces")
        if not obj["metadata"].get("deletionTimestamp"):
            new = deep_copy(obj)
            new["metadata"]["deletionTimestamp"] = rfc3339(self.clock.now())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["status"] = {"phase": "Terminating"}
            self._commit(rt, "MODIFIED", new, obj)
            obj = new
        for key, bucket in list(self._objects.items()):
            krt = self.registry.get(key)
            if krt is None or not krt.namespaced:
                continue
            for n in list(bucket.get(name, {})):
                try:
                    await self.delete(key, name, n, admit=False)
                except ApiError:
                    continue
        await self._maybe_finish_namespace(name)
        return self.get("namespaces", None, name) or obj

    async def _maybe_finish_namespace(self, name: str) -> None:
        for key, bucket in self._objects.items():
            if key != "namespaces" and bucket.get(name):
                return
        ns = self.entry("namespaces", None, name)
        if ns is not None and ns.obj["metadata"].get("deletionTimestamp"):
            await self._remove(self.resource_type("namespaces"), ns.obj)

    # ------------------------------------------------------------------ CRDs

    def _validate_crd(self, rt: ResourceType, crd: JsonObj) -> None:
        spec = crd.get("spec") or {}
        name = crd["metadata"].get("name", "")
        names = spec.get("names") or {}
        errs: builtins.list[tuple[str, str, str]] = []
        if not spec.get("group"):
            errs.append(("spec.group", "FieldValueRequired", "Required value"))
        if not names.get("plural"):
            errs.append(("spec.names.plural", "FieldValueRequired", "Required value"))
        if not names.get("kind"):
            errs.append(("spec.names.kind", "FieldValueRequired", "Required value"))
        if spec.get("group") and names.get("plural") and name != f"{names['plural']}.{spec['group']}":
            errs.append(
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                )
            )
        versions = spec.get("versions") or []
        if not versions:
            errs.append(
                (
                    "spec.versions",
                    "FieldValueRequired",
                    "Required value: must have exactly one version marked as storage version",
                )
            )
        elif sum(1 for v in versions if v.get("storage")) != 1:
            errs.append(
                (
                    "spec.versions",
                    "FieldValueInvalid",
                    "Invalid value: must have exactly one version marked as storage version",
                )
            )
        if errs:
            raise invalid(rt, name, errs)

    def _crd_accepted(self, crd: JsonObj) -> None:
        names = dict(crd["spec"]["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        now = rfc3339(self.clock.now())
        crd["status"] = {
            "acceptedNames": names,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
            "storedVersions": [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")],
        }

    def _register_crd(self, crd: JsonObj) -> None:
        rt = crd_resource_type(crd)
        self.registry.add(rt)
        for cb in self.crd_listeners:
            res = cb(rt, rt.key)
            if asyncio.iscoroutine(res):
                self._spawn(res)

    async def _unregister_crd(self, crd: JsonObj) -> None:
        spec = crd["spec"]
        key = f"{spec['names']['plural']}.{spec['group']}"
        rt = self.registry.get(key)
        if rt is None:
            return
        bucket = self._objects.get(key, {})
        for inner in list(bucket.values()):
            for name in list(inner):
                e = inner.get(name)
                if e is not None:
                    self._commit(rt, "DELETED", deep_copy(e.obj), e.obj)
        self._objects.pop(key, None)
        self.registry.remove(key)
        for w in list(self.watchers.get(key, ())):
            w.queue.put_nowait(None)
        for cb in self.crd_listeners:
            res = cb(None, key)
            if asyncio.iscoroutine(res):
                self._spawn(res)

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._pending.add(t)
        t.add_done_callback(self._pending.discard)

    # ------------------------------------------------------------------ watching

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

    def remove_watcher(self, w: Watcher) -> None:
        s = self.watchers.get(w.key)
        if s is not None:
            s.discard(w)

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

    async def settle(self) -> None:
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)


# Admission warnings of the current request; the HTTP layer sets a list and turns it into Warning headers.
WARNINGS: ContextVar[builtins.list[str] | None] = ContextVar("sim_admission_warnings", default=None)


# Who is writing: HTTP requests set the client's identity; in-process writes (controllers, node agent)
# default to the controller manager's, as kube-apiserver's admission sees them.
REQUEST_USER: ContextVar[JsonObj] = ContextVar("sim_request_user", default=CONTROLLER_USER)

# The request's fieldValidation directive (Strict, Warn, Ignore); the HTTP layer sets it per request.
FIELD_VALIDATION: ContextVar[str] = ContextVar("sim_field_validation", default="Ignore")


def _add_warnings(warnings: builtins.list[str]) -> None:
    sink = WARNINGS.get()
    if sink is not None and warnings:
        sink.extend(w for w in warnings if w not in sink)


def _spec_changed(rt: ResourceType, old: JsonObj, new: JsonObj) -> bool:
    skip = {"metadata", "status"} if rt.status_subresource else {"metadata"}
    keys = (set(old) | set(new)) - skip - {"apiVersion", "kind"}
    if any(old.get(k) != new.get(k) for k in keys):
        return True
    return bool(new["metadata"].get("deletionTimestamp")) and not old["metadata"].get("deletionTimestamp")


def _same_object(old: JsonObj, new: JsonObj) -> bool:
    if old.keys() != new.keys():
        return False
    for k, v in new.items():
        if k == "metadata":
            omd = old["metadata"]
            if omd.keys() != v.keys():
                return False
            if any(omd[mk] != mv for mk, mv in v.items() if mk != "resourceVersion"):
                return False
        elif old[k] != v:
            return False
    return True
