"""What the admission path needs from workloads: a pod's top-most controller and a VPA target's selector.

Owns: `AdmissionTargets`: a pod's owners and a target's selector answered from the process's watch caches
of the well-known controllers (`ControllerCaches`, shared with the updater, as upstream's admission
controller answers from its informers) when they hold the object, and otherwise from two small read-through
caches over the API (a ReplicaSet created a moment ago may reach its first pod's review before its watch
event; without the shared caches, every answer comes from these):
- **owners**: `(namespace, kind, name)` of a well-known controller → its own controller owner (or none).
  A pod owned by a ReplicaSet owned by a Deployment resolves to the Deployment; the walk stops at a kind
  that is not well known (a custom controller is its own top: we do not follow scale subresources up).
  When reading a ReplicaSet fails (API error or timeout — not a 404), the Deployment is inferred from the
  `pod-template-hash` label convention (`<deployment>-<hash>`), so an API hiccup does not drop the
  recommendation; a 404 means "no such ReplicaSet" and the ReplicaSet counts as the top.
- **selectors**: a VPA's target → its pod selector (well-known kinds: `spec.selector`; others: the
  `scale` subresource, plural guessed as lowercase kind + "s"). Unknown selector → None (the VPA is
  skipped, as upstream does).
Entries are fresh for `ttl_s`; a stale entry is still answered at once while one background read
refreshes it (stale-while-revalidate), so only the first pod of a workload ever waits for the API, and
that wait is bounded by `read_timeout_s`. Misses and errors are cached for `negative_ttl_s`.
Freshness follows the injected clock; the read deadline follows the wall clock (it bounds a network call
inside an admission request, whose own timeout is real time): under `--clock=sim` at a high time scale a
virtual 2 s is a few real milliseconds, and every read would time out.

The caches live on the admission path's loop (the webhook's own thread). Served from there, the reads go
through a client of that loop (`open_own_client`: the process's configuration on a connection pool,
limiter and real-time clock of its own), so the first pod of a workload never waits for the main loop,
busy with a recommender loop or a relist, to carry its reads.
Reading the top-most well-known owner also fills in its selector (the VPA targeting that owner needs it
next), so a Deployment's first pod costs two reads (ReplicaSet, Deployment), not three; and the two are
made at once, the Deployment named by the pod's `pod-template-hash` convention read beside its ReplicaSet,
whose owner reference still decides (a wrong guess costs one read, cached as missing). Entries not asked
for during `unused_s` (1 h) are dropped, swept at most every `sweep_s` (10 min): every rollout brings a new
ReplicaSet, and a webhook that runs for months must not keep them all.

Must not: write anything, raise into the admission handler (every failure is a cached "unknown"), or hold
raw objects beyond the trimmed values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

import structlog

from vpa.kube.client import ApiError, KubeClient, NotFound, api_path
from vpa.kube.controllers import ControllerView
from vpa.kube.converting import ConversionError, selector_from_scale, selector_from_workload
from vpa.kube.leasing import DeadlineExceeded, call_with_deadline
from vpa.logic.matching import controller_key
from vpa.model.clock import Clock, RealClock
from vpa.model.pod import PodView
from vpa.model.selector import Selector
from vpa.model.vpa import TargetRef

log = structlog.get_logger(__name__)

WELL_KNOWN: Final = {
    "Deployment": ("apps", "v1", "deployments"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "ReplicationController": ("", "v1", "replicationcontrollers"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
}
POD_TEMPLATE_HASH: Final = "pod-template-hash"
UNUSED_S: Final = 3600.0
SWEEP_S: Final = 600.0
_MAX_DEPTH: Final = 8

V = TypeVar("V")
Ref = tuple[str, str, str]  # (namespace, kind, name)


class KnownControllers(Protocol):
    """What is asked of the shared controller caches (`ControllerCaches`): one object by kind and name."""

    def get(self, namespace: str, kind: str, name: str) -> ControllerView | None: ...


class _Unavailable(Exception):
    """The API could not tell (error other than 404, or timeout)."""


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    fetched: float  # clock.monotonic()
    ttl_s: float
    used: float  # clock.monotonic() of the last `get` that answered it


class _ReadThrough(Generic[V]):
    """Cache with single-flight loads, stale-while-revalidate, and entries unused for `unused_s` dropped."""

    def __init__(self, clock: Clock, name: str, *, unused_s: float = UNUSED_S, sweep_s: float = SWEEP_S,
                 ) -> None:
        self._clock = clock
        self.name = name
        self.unused_s = unused_s
        self.sweep_s = sweep_s
        self._entries: dict[Ref, _Entry[V]] = {}
        self._inflight: dict[Ref, asyncio.Future[V]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._swept = clock.monotonic()
        self.loads = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Ref) -> bool:
        return key in self._entries or key in self._inflight

    def peek(self, key: Ref) -> V | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    async def get(self, key: Ref, load: Callable[[], Awaitable[tuple[V, float]]]) -> V:
        now = self._clock.monotonic()
        if now - self._swept >= self.sweep_s:
            self._sweep(now)
        entry = self._entries.get(key)
        if entry is not None:
            entry.used = now
            if now - entry.fetched > entry.ttl_s and key not in self._inflight:
                self._in_background(key, load)
            return entry.value
        future = self._inflight.get(key)
        if future is not None:
            return await asyncio.shield(future)
        return await self._load_value(key, load)

    def prefetch(self, key: Ref, load: Callable[[], Awaitable[tuple[V, float]]]) -> None:
        """Start loading `key` now, unless it is known or already being loaded: a later `get` waits for
        this load instead of starting its own."""
        if key not in self:
            self._in_background(key, load)

    def _in_background(self, key: Ref, load: Callable[[], Awaitable[tuple[V, float]]]) -> None:
        task = asyncio.ensure_future(self._load(key, load))
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # a failed load is an uncached answer: whoever waited for it saw the error

    async def _load(self, key: Ref, load: Callable[[], Awaitable[tuple[V, float]]]) -> None:
        await self._load_value(key, load)

    async def _load_value(self, key: Ref, load: Callable[[], Awaitable[tuple[V, float]]]) -> V:
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            self.loads += 1
            value, ttl_s = await load()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters get it through shield; nobody else must warn
            raise
        else:
            self.put(key, value, ttl_s)
            future.set_result(value)
            return value
        finally:
            self._inflight.pop(key, None)

    def put(self, key: Ref, value: V, ttl_s: float) -> None:
        """Remember `value` as if it had just been loaded (a read made for another cache had it)."""
        now = self._clock.monotonic()
        self._entries[key] = _Entry(value, now, ttl_s, now)

    def _sweep(self, now: float) -> None:
        self._swept = now
        for key in [key for key, entry in self._entries.items() if now - entry.used > self.unused_s]:
            del self._entries[key]

    def close(self) -> None:
        for task in list(self._background):
            task.cancel()


class AdmissionTargets:
    """Top-most controllers of pods and selectors of VPA targets, cached (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        ttl_s: float = 300.0,
        negative_ttl_s: float = 30.0,
        read_timeout_s: float = 2.0,
        deadline_clock: Clock | None = None,
        known: KnownControllers | None = None,
    ) -> None:
        self._client = client
        # Read from the webhook's thread while the main loop applies watch events: single dict lookups only.
        self._known = known
        self._clock = clock
        self._deadline_clock: Clock = deadline_clock if deadline_clock is not None else RealClock()
        self.ttl_s = ttl_s
        self.negative_ttl_s = negative_ttl_s
        self.read_timeout_s = read_timeout_s
        # owner cache: ref → controller owner ref (None: it is the top) — _Unavailable is not cached here
        self._owners: _ReadThrough[Ref | None] = _ReadThrough(clock, "owners")
        self._selectors: _ReadThrough[Selector | None] = _ReadThrough(clock, "selectors")
        self._own_client: KubeClient | None = None
        self.known_answers = 0  # lookups the shared watch caches answered

    def open_own_client(self) -> None:
        """Read through a client of the running loop from now on; call it on the loop the admission path
        serves from when that is not the given client's (the webhook's thread), and `aclose()` there."""
        if self._own_client is None:
            self._own_client = self._client.on_own_pool(RealClock())

    def close(self) -> None:
        self._owners.close()
        self._selectors.close()

    async def aclose(self) -> None:
        """`close()`, and the loop's own client closed."""
        self.close()
        client, self._own_client = self._own_client, None
        if client is not None:
            await client.close()

    async def _read(self, path: str) -> dict[str, object]:
        client = self._own_client or self._client
        try:
            read = client.get(path, max_retries=1)
            return await call_with_deadline(self._deadline_clock, self.read_timeout_s, read)
        except DeadlineExceeded as err:
            raise _Unavailable(f"GET {path}: no answer within {self.read_timeout_s} s") from err

    # ------------------------------------------------------------------------------------ owners

    async def _load_owner(self, ref: Ref) -> tuple[Ref | None, float]:
        namespace, kind, name = ref
        group, version, plural = WELL_KNOWN[kind]
        try:
            obj = await self._read(api_path(group, version, plural, namespace=namespace, name=name))
        except NotFound:
            return None, self.negative_ttl_s
        except ApiError as err:
            raise _Unavailable(str(err)) from err
        metadata = obj.get("metadata")
        owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
        for owner in owners if isinstance(owners, list) else []:
            if isinstance(owner, dict) and owner.get("controller") is True:
                owner_kind, owner_name = owner.get("kind"), owner.get("name")
                if isinstance(owner_kind, str) and isinstance(owner_name, str) and owner_kind and owner_name:
                    return (namespace, owner_kind, owner_name), self.ttl_s
        # The top of the chain: the one a VPA may target (upstream refuses a target that has a controller).
        if self._selectors.peek(ref) is None:
            self._selectors.put(ref, *self._selector_of(kind, obj))
        return None, self.ttl_s

    async def top_most(self, pod: PodView) -> str | None:
        """The `namespace/kind/name` key of the pod's top-most controller; None when it has no controller."""
        if pod.owner is None:
            return None
        ref: Ref = (pod.namespace, pod.owner.kind, pod.owner.name)
        seen = {ref}
        # A Deployment's first pod: its ReplicaSet's owner is read first, then that owner. The Deployment
        # the pod's labels name is read beside the ReplicaSet instead, one round trip instead of two; the
        # ReplicaSet's own owner reference still decides (a wrong guess costs a read, cached as missing).
        guessed = self._inferred_parent(pod, ref)
        if (guessed is not None and self._cached(ref) is None and self._cached(guessed) is None
                and ref not in self._owners):
            self._owners.prefetch(guessed, lambda: self._load_owner(guessed))
        for _ in range(_MAX_DEPTH):
            if ref[1] not in WELL_KNOWN:
                break
            view = self._cached(ref)
            if view is not None:
                parent = None if view.owner_kind is None or view.owner_name is None else (
                    ref[0], view.owner_kind, view.owner_name)
                self.known_answers += 1
            else:
                parent = await self._read_through_owner(pod, ref)
            if parent is None or parent in seen:
                break
            seen.add(parent)
            ref = parent
        return controller_key(*ref)

    def _cached(self, ref: Ref) -> ControllerView | None:
        """The shared watch caches' view of a well-known controller; None when they do not hold it."""
        return None if self._known is None else self._known.get(*ref)

    async def _read_through_owner(self, pod: PodView, ref: Ref) -> Ref | None:
        try:
            return await self._owners.get(ref, lambda: self._load_owner(ref))
        except _Unavailable as err:
            parent = self._inferred_parent(pod, ref)
            log.warning(
                "could not read the pod's controller; inferring its owner",
                controller="/".join(ref),
                inferred="/".join(parent) if parent else None,
                error=str(err),
            )
        return parent

    @staticmethod
    def _inferred_parent(pod: PodView, ref: Ref) -> Ref | None:
        """`<deployment>-<pod-template-hash>` → the Deployment (the Deployment controller's naming)."""
        namespace, kind, name = ref
        template_hash = pod.labels.get(POD_TEMPLATE_HASH)
        if kind == "ReplicaSet" and template_hash and name.endswith("-" + template_hash):
            deployment = name[: -len(template_hash) - 1]
            if deployment:
                return namespace, "Deployment", deployment
        return None

    # --------------------------------------------------------------------------------- selectors

    async def _load_selector(self, ref: Ref, api_version: str) -> tuple[Selector | None, float]:
        namespace, kind, name = ref
        try:
            if kind in WELL_KNOWN:
                group, version, plural = WELL_KNOWN[kind]
                return self._selector_of(
                    kind, await self._read(api_path(group, version, plural, namespace=namespace, name=name)))
            group, _, version = api_version.rpartition("/")
            path = api_path(
                group, version, kind.lower() + "s", namespace=namespace, name=name, subresource="scale"
            )
            return selector_from_scale(await self._read(path)), self.ttl_s
        except (ApiError, _Unavailable, ConversionError) as err:
            log.debug("no selector for a VPA target", target="/".join(ref), error=str(err))
            return None, self.negative_ttl_s

    def _selector_of(self, kind: str, obj: dict[str, object]) -> tuple[Selector | None, float]:
        """A well-known workload's selector, and how long to keep it."""
        obj.setdefault("kind", kind)
        try:
            return selector_from_workload(obj), self.ttl_s
        except ConversionError as err:
            log.debug("no selector for a VPA target", kind=kind, error=str(err))
            return None, self.negative_ttl_s

    async def selector(self, namespace: str, target: TargetRef) -> Selector | None:
        ref: Ref = (namespace, target.kind, target.name)
        view = self._cached(ref) if target.kind in WELL_KNOWN else None
        if view is not None:
            self.known_answers += 1
            return view.selector
        return await self._selectors.get(ref, lambda: self._load_selector(ref, target.api_version))

    @property
    def api_loads(self) -> int:
        return self._owners.loads + self._selectors.loads
