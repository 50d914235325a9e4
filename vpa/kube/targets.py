"""Resolving a VPA's `targetRef` to a pod selector, with upstream's top-most-controller check.

Owns: `TargetResolver` — the selector of a well-known controller (Deployment, ReplicaSet, StatefulSet,
DaemonSet, ReplicationController, Job: `spec.selector`; CronJob: the job template's labels) or of any
resource with a `scale` subresource (`status.selector`, found through API discovery); the walk up the
controller ownerReferences (through well-known or scalable kinds, detecting cycles, never through a Node)
that decides whether the target is the top-most controller; the ConfigUnsupported messages upstream
writes; and the caching that keeps this cheap for 10,000 VPAs.

Refresh policy (upstream reads well-known kinds from informers and caches scale lookups for 10 min):
- Well-known kinds: one paged LIST per kind (only kinds some VPA or owner chain needs), kept as a trimmed
  snapshot (selector, controller owner) and re-listed when older than `workload_refresh_s` (5 min). An
  object missing from the snapshot is fetched on its own (so a VPA created right after its Deployment
  resolves at once); a 404 is remembered for `missing_retry_s` (1 min) before asking again.
- Scalable (custom) kinds: scale subresource and object fetched per target, kept for `scalable_refresh_s`
  (10 min, upstream's scale-cache freshness); errors are retried after `missing_retry_s`.
- Discovery of a group/version is kept for `discovery_refresh_s` (5 min, upstream resets its RESTMapper
  cache every 5 min).
- Entries not asked for during `lifetime_s` (1 h) are dropped.
So a Deployment's changed selector is seen within 5 min, a custom resource's within 10 min.

Must not: write anything, decide conditions beyond the message text, or crash on a malformed or missing
object (every failure becomes an unsupported-config `Resolution`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from vpa.kube.client import ApiError, KubeClient, api_path
from vpa.kube.converting import ConversionError, selector_from_scale, selector_from_workload
from vpa.kube.paging import PagedList
from vpa.model.clock import Clock
from vpa.model.selector import Selector
from vpa.model.vpa import TargetRef

log = structlog.get_logger(__name__)

WELL_KNOWN: Final[Mapping[str, tuple[str, str, str]]] = {
    "Deployment": ("apps", "v1", "deployments"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "ReplicationController": ("", "v1", "replicationcontrollers"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
}
_MAX_CHAIN: Final = 32


@dataclass(frozen=True, slots=True)
class Resolution:
    """A VPA target's selector, or why there is none (`unsupported`: the ConfigUnsupported message)."""

    selector: Selector | None
    unsupported: str | None = None

    @property
    def ok(self) -> bool:
        return self.unsupported is None and self.selector is not None


@dataclass(frozen=True, slots=True)
class _Ref:
    api_version: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.api_version}.{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class _Node:
    """What the walk needs of one controller: its selector (or why it has none) and its controller owner."""

    selector: Selector | None
    selector_error: str | None
    owner: _Ref | None


class _Missing(Exception):
    """The object does not exist."""


class _NotControllerKind(Exception):
    """Neither a well-known kind nor a resource with a scale subresource."""


def _owner_of(obj: Mapping[str, Any]) -> _Ref | None:
    metadata = obj.get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, Mapping) else None
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return _Ref(str(owner.get("apiVersion") or ""), str(owner.get("kind") or ""),
                        str(owner.get("name") or ""))
    return None


def _workload_node(kind: str, obj: Mapping[str, Any]) -> _Node:
    try:
        selector: Selector | None = selector_from_workload({"kind": kind, "spec": obj.get("spec")})
        error = None
    except ConversionError as err:
        selector, error = None, str(err)
    return _Node(selector, error, _owner_of(obj))


@dataclass(slots=True)
class _Snapshot:
    listed_at: float
    nodes: dict[tuple[str, str], _Node] = field(default_factory=dict)


@dataclass(slots=True)
class _Entry:
    """A cached single-object answer: a node, or the failure to get one (`error`, `missing`)."""

    fetched_at: float
    used_at: float
    node: _Node | None = None
    missing: bool = False
    error: str | None = None


class TargetResolver:
    """targetRef → `Resolution`, cached as described in the module docstring. One per recommender."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        namespace: str | None = None,
        workload_refresh_s: float = 300.0,
        scalable_refresh_s: float = 600.0,
        missing_retry_s: float = 60.0,
        discovery_refresh_s: float = 300.0,
        lifetime_s: float = 3600.0,
    ) -> None:
        self._client = client
        self._clock = clock
        self._namespace = namespace or None
        self.workload_refresh_s = workload_refresh_s
        self.scalable_refresh_s = scalable_refresh_s
        self.missing_retry_s = missing_retry_s
        self.discovery_refresh_s = discovery_refresh_s
        self.lifetime_s = lifetime_s
        self._snapshots: dict[str, _Snapshot] = {}
        self._snapshot_locks: dict[str, asyncio.Lock] = {}
        self._entries: dict[tuple[str, str, str, str], _Entry] = {}
        self._discovery: dict[str, tuple[float, dict[str, tuple[str, bool]]]] = {}
        self.requests = 0  # GET/LIST requests made, for tests and the benchmark

    # ------------------------------------------------------------------------------------------ API

    async def resolve(self, namespace: str, target: TargetRef | None) -> Resolution:
        """The selector for a VPA target, or a ConfigUnsupported message. Never raises for API errors."""
        if target is None:
            return Resolution(None, "Cannot read targetRef. Reason: the VPA has no targetRef")
        ref = _Ref(target.api_version, target.kind, target.name)
        try:
            node = await self._node(namespace, ref)
        except _Missing as err:
            return Resolution(None, f"Cannot read targetRef. Reason: {err}")
        except _NotControllerKind as err:
            return Resolution(None, f"Cannot read targetRef. Reason: {err}")
        except ApiError as err:
            return Resolution(None, f"Cannot read targetRef. Reason: {err}")
        if node.selector is None:
            reason = node.selector_error or "no selector"
            return Resolution(None, f"Cannot read targetRef. Reason: {reason}")
        try:
            top = await self._top_most(namespace, ref, node)
        except (ApiError, _Missing, ValueError) as err:
            detail = str(err) or type(err).__name__
            return Resolution(None, f"Error checking if target {ref} is a topmost well-known or scalable "
                                    f"controller: {detail}")
        if top != ref:
            return Resolution(None, f"The target {ref} has a parent controller but it should point to a "
                                    "topmost well-known or scalable controller")
        return Resolution(node.selector)

    def forget_unused(self) -> None:
        """Drop single-object entries nobody asked for during `lifetime_s` (deleted VPAs' targets)."""
        now = self._clock.now()
        for key in [k for k, e in self._entries.items() if now - e.used_at >= self.lifetime_s]:
            del self._entries[key]

    # ------------------------------------------------------------------------------------ walking

    async def _top_most(self, namespace: str, ref: _Ref, node: _Node) -> _Ref:
        """The top-most well-known or scalable controller above (and including) `ref`."""
        top = ref
        visited = {(ref.kind, ref.name)}
        owner = node.owner
        for _ in range(_MAX_CHAIN):
            if owner is None or owner.kind == "Node":
                return top
            if (owner.kind, owner.name) in visited:
                raise ValueError("Cycle detected in ownership chain")
            visited.add((owner.kind, owner.name))
            try:
                parent = await self._node(namespace, owner)
            except _NotControllerKind:
                # An owner we cannot treat as a controller (no scale subresource) ends the walk.
                return top
            top = owner
            owner = parent.owner
        raise ValueError("ownership chain too long")

    async def _node(self, namespace: str, ref: _Ref) -> _Node:
        if ref.kind in WELL_KNOWN:
            return await self._well_known(namespace, ref)
        return await self._scalable(namespace, ref)

    # ----------------------------------------------------------------------------- well-known kinds

    async def _well_known(self, namespace: str, ref: _Ref) -> _Node:
        snapshot = await self._snapshot(ref.kind)
        node = snapshot.nodes.get((namespace, ref.name))
        if node is not None:
            return node
        # Not in the snapshot: created since, or really missing. Ask for this one object.
        key = (namespace, "", ref.kind, ref.name)
        now = self._clock.now()
        entry = self._entries.get(key)
        if entry is not None and now - entry.fetched_at < (
                self.missing_retry_s if entry.missing else self.workload_refresh_s):
            entry.used_at = now
            return self._from_entry(entry, namespace, ref)
        group, version, plural = WELL_KNOWN[ref.kind]
        entry = _Entry(now, now)
        try:
            self.requests += 1
            obj = await self._client.get(api_path(group, version, plural, namespace=namespace, name=ref.name))
            entry.node = _workload_node(ref.kind, obj)
        except ApiError as err:
            if not err.is_not_found:
                raise
            entry.missing = True
        self._entries[key] = entry
        return self._from_entry(entry, namespace, ref)

    async def _snapshot(self, kind: str) -> _Snapshot:
        now = self._clock.now()
        snapshot = self._snapshots.get(kind)
        if snapshot is not None and now - snapshot.listed_at < self.workload_refresh_s:
            return snapshot
        lock = self._snapshot_locks.setdefault(kind, asyncio.Lock())
        async with lock:
            snapshot = self._snapshots.get(kind)
            if snapshot is not None and self._clock.now() - snapshot.listed_at < self.workload_refresh_s:
                return snapshot
            try:
                snapshot = await self._list(kind)
            except ApiError as err:
                if snapshot is None:
                    raise
                # Keep serving the old snapshot; single objects are still fetched on a miss.
                log.warning("recommender_target_list_failed", kind=kind, error=str(err))
                snapshot.listed_at = self._clock.now() - self.workload_refresh_s + self.missing_retry_s
                return snapshot
            self._snapshots[kind] = snapshot
            # The fresh snapshot supersedes single-object answers of this kind.
            for key in [k for k in self._entries if k[1] == "" and k[2] == kind]:
                del self._entries[key]
            return snapshot

    async def _list(self, kind: str) -> _Snapshot:
        group, version, plural = WELL_KNOWN[kind]
        snapshot = _Snapshot(self._clock.now())
        # Parsed and converted an item at a time, paced: the recommender's first loop shares the event loop,
        # and a page parsed and converted in one go would hold it for the whole page.
        pages = PagedList(self._client, api_path(group, version, plural, namespace=self._namespace))
        try:
            async with contextlib.aclosing(pages.items()) as items:
                async for obj in items:
                    if not isinstance(obj, Mapping):
                        continue
                    metadata = obj.get("metadata")
                    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str):
                        continue
                    snapshot.nodes[(str(metadata.get("namespace") or ""), metadata["name"])] = (
                        _workload_node(kind, obj))
        finally:
            self.requests += pages.requests
        return snapshot

    # ------------------------------------------------------------------------------ scalable kinds

    async def _scalable(self, namespace: str, ref: _Ref) -> _Node:
        key = (namespace, ref.api_version, ref.kind, ref.name)
        now = self._clock.now()
        entry = self._entries.get(key)
        if entry is not None and now - entry.fetched_at < (
                self.scalable_refresh_s if entry.node is not None else self.missing_retry_s):
            entry.used_at = now
            return self._from_entry(entry, namespace, ref)
        plural, scalable = await self._discover(ref)
        if not scalable:
            raise _NotControllerKind(f"{ref.kind} ({ref.api_version}) is neither a well-known controller "
                                     "nor a resource with a scale subresource")
        group, _, version = ref.api_version.rpartition("/")
        entry = _Entry(now, now)
        try:
            self.requests += 2
            obj = await self._client.get(api_path(group, version, plural, namespace=namespace, name=ref.name))
            scale = await self._client.get(
                api_path(group, version, plural, namespace=namespace, name=ref.name, subresource="scale"))
            try:
                entry.node = _Node(selector_from_scale(scale), None, _owner_of(obj))
            except ConversionError as err:
                entry.node = _Node(None, f"Resource {namespace}/{ref.name} has an empty selector"
                                   if err.field == "status.selector" else str(err), _owner_of(obj))
        except ApiError as err:
            if err.is_not_found:
                entry.missing = True
            else:
                entry.error = str(err)
        self._entries[key] = entry
        return self._from_entry(entry, namespace, ref)

    async def _discover(self, ref: _Ref) -> tuple[str, bool]:
        """(plural, has a scale subresource) of a kind in its group/version, from API discovery."""
        group, slash, version = ref.api_version.rpartition("/")
        if not slash and not ref.api_version:
            raise _NotControllerKind(f"{ref.kind} has no apiVersion")
        now = self._clock.now()
        cached = self._discovery.get(ref.api_version)
        if cached is None or now - cached[0] >= self.discovery_refresh_s:
            path = f"/apis/{ref.api_version}" if group else f"/api/{version}"
            kinds: dict[str, tuple[str, bool]] = {}
            try:
                self.requests += 1
                document = await self._client.get(path)
            except ApiError as err:
                if not err.is_not_found:
                    raise
                document = {}
            resources = document.get("resources") or []
            names = {r.get("name") for r in resources if isinstance(r, Mapping)}
            for resource in resources:
                name = resource.get("name") if isinstance(resource, Mapping) else None
                if isinstance(name, str) and "/" not in name:
                    kinds[str(resource.get("kind"))] = (name, f"{name}/scale" in names)
            cached = (now, kinds)
            self._discovery[ref.api_version] = cached
        found = cached[1].get(ref.kind)
        if found is None:
            raise _NotControllerKind(f"no resource of kind {ref.kind} in {ref.api_version}")
        return found

    @staticmethod
    def _from_entry(entry: _Entry, namespace: str, ref: _Ref) -> _Node:
        if entry.missing:
            raise _Missing(f"{ref.kind} {namespace}/{ref.name} does not exist")
        if entry.node is None:
            raise ApiError(0, "Error", entry.error or "unknown error")
        return entry.node
