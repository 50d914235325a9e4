"""Leases: leader election, the admission controller's status lease, and reading a lease's freshness.

Owns: `LeaderElector`, a client-go-compatible election on a `coordination.k8s.io/v1` Lease (holderIdentity,
acquireTime, renewTime, leaseDurationSeconds, leaseTransitions; optimistic concurrency through
resourceVersion, so a 409 means another candidate won the race). A leader renews every retry period and
every API call is cut off by a deadline on the injected clock, so a leader that cannot renew within its
renew deadline stops acting (its work is cancelled, `is_leader` turns false) before the lease can expire on
other candidates' clocks. On shutdown it releases the lease (empty holder, `leaseDurationSeconds=1`, as
client-go's ReleaseOnCancel does) so a successor takes over at once. Also `StatusLeaseRenewer` (the
`vpa-admission-controller` lease renewed every `--status-lease-update-interval`) and `LeaseFreshness` (the
updater's "is the admission controller alive?" check).

Must not: decide what to do with leadership (the caller's coroutine does the work), exit the process, or
trust other machines' clocks for expiry: like client-go, a lease held by someone else expires
`leaseDurationSeconds` after *we* last saw it change.
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import structlog

from vpa.aio.cancelling import cancel_and_wait
from vpa.kube.client import ApiError, Conflict, KubeClient, NotFound, api_path
from vpa.model.clock import Clock

R = TypeVar("R")
JsonObj = dict[str, Any]

log = structlog.get_logger(__name__)

LEASE_GROUP = "coordination.k8s.io"
LEASE_VERSION = "v1"
# client-go's wait.JitterUntil factor for the acquire loop.
_JITTER_FACTOR = 1.2
# Real time an API call of the status lease is always allowed, however fast a virtual clock runs.
API_CALL_MIN_WALL_S = 5.0


class DeadlineExceeded(Exception):
    """An API call did not finish before its deadline on the injected clock."""


async def call_with_deadline(clock: Clock, timeout_s: float, coro: Coroutine[Any, Any, R], *,
                             min_wall_s: float = 0.0) -> R:
    """Await `coro`, cancelling it if `timeout_s` passes on `clock` first (virtual clocks included).

    `min_wall_s`: never cut the call off before this much real time either. For deadlines that only keep a
    loop from hanging (not the lease-safety bounds of leader election): on a virtual clock running hundreds
    of times faster than real time, `timeout_s` is a few milliseconds of real time, less than an API call
    takes."""
    if timeout_s <= 0:
        coro.close()
        raise DeadlineExceeded(f"no time left ({timeout_s:.3f} s)")
    work: asyncio.Task[R] = asyncio.ensure_future(coro)
    timer = asyncio.ensure_future(_both(clock.sleep(timeout_s), asyncio.sleep(min_wall_s)) if min_wall_s > 0
                                  else clock.sleep(timeout_s))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait((work, timer))
    if work.cancelled() or not work.done():
        raise DeadlineExceeded(f"API call exceeded {timeout_s:.3f} s")
    return work.result()


async def _both(first: Coroutine[Any, Any, None], second: Coroutine[Any, Any, None]) -> None:
    await asyncio.gather(first, second)


def format_micro_time(unix_s: float) -> str:
    """A `metav1.MicroTime` string: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(unix_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> float | None:
    """Unix seconds from a `Time`/`MicroTime` string (`...Z` or with an offset); None if absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def default_identity() -> str:
    """`<hostname>_<uuid>`, as upstream's leader election uses."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def lease_path(namespace: str, name: str | None = None) -> str:
    return api_path(LEASE_GROUP, LEASE_VERSION, "leases", namespace=namespace, name=name)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    lease_duration_s: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @staticmethod
    def from_lease(lease: JsonObj) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return LeaseRecord(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_s=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> JsonObj:
        spec: JsonObj = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_s,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


class LeaderElector:
    """Run a coroutine only while this process holds the Lease `namespace/name`.

    `await elector.run(lead)` campaigns until it acquires the lease, starts `lead()`, renews every
    `retry_period_s`, and returns once leadership is lost (after cancelling `lead`) so the caller can exit
    (upstream's behaviour) or campaign again; `run_forever(lead)` re-campaigns by itself. If `lead` returns
    or raises, the lease is released and `run` returns or re-raises. Cancelling `run` cancels `lead` and
    releases the lease.
    """

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        name: str,
        namespace: str,
        identity: str | None = None,
        lease_duration_s: float = 15.0,
        renew_deadline_s: float = 10.0,
        retry_period_s: float = 2.0,
        attempt_timeout_s: float | None = None,
        release_on_cancel: bool = True,
        on_change: Callable[[bool], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not lease_duration_s > renew_deadline_s:
            raise ValueError("lease duration must be greater than the renew deadline")
        if not renew_deadline_s > _JITTER_FACTOR * retry_period_s:
            raise ValueError(f"renew deadline must be greater than {_JITTER_FACTOR} x the retry period")
        if retry_period_s <= 0:
            raise ValueError("retry period must be positive")
        self._client = client
        self._clock = clock
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self._attempt_timeout_s = attempt_timeout_s if attempt_timeout_s is not None else renew_deadline_s / 2
        self._release_on_cancel = release_on_cancel
        self._on_change = on_change
        self._rng = rng or random.Random()
        self._is_leader = False
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0  # clock.monotonic() when the observed record last changed
        self._last_renew = 0.0  # clock.monotonic() when the last successful renewal was *sent*
        # True while a write that would make us the holder is sent but unanswered: if the campaign is
        # cancelled then, the server may have granted the lease without our seeing it.
        self._write_unanswered = False
        self.transitions_seen = 0  # times this elector became leader

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def last_renewed_monotonic(self) -> float:
        """`clock.monotonic()` when the last successful acquire/renew request was sent."""
        return self._last_renew

    @property
    def leader_identity(self) -> str:
        """The holder we last observed ("" when free or unknown)."""
        return self._observed.holder if self._observed else ""

    def _set_leader(self, value: bool) -> None:
        if value == self._is_leader:
            return
        self._is_leader = value
        if value:
            self.transitions_seen += 1
        log.info(
            "leader_election_change",
            lease=f"{self.namespace}/{self.name}",
            identity=self.identity,
            leading=value,
        )
        if self._on_change is not None:
            self._on_change(value)

    # --------------------------------------------------------------------------------- the protocol

    async def try_acquire_or_renew(self) -> bool:
        """One GET (+ CREATE or PUT) attempt; True if we hold the lease afterwards. Unbounded: wrap it."""
        now_s = self._clock.now()
        sent_at = self._clock.monotonic()
        path = lease_path(self.namespace, self.name)
        try:
            _, lease = await self._client.request_json("GET", path, max_retries=0)
        except NotFound:
            record = LeaseRecord(
                holder=self.identity,
                lease_duration_s=round(self.lease_duration_s),
                acquire_time=format_micro_time(now_s),
                renew_time=format_micro_time(now_s),
                transitions=0,
            )
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": record.to_spec(),
            }
            self._write_unanswered = True
            try:
                await self._client.request_json(
                    "POST", lease_path(self.namespace), body=body, max_retries=0, idempotent=False
                )
            except Conflict:
                self._write_unanswered = False
                return False  # someone created it first
            self._write_unanswered = False  # (left set on cancellation or an error: the outcome is unknown)
            self._observe(record, sent_at)
            self._last_renew = sent_at
            return True

        old = LeaseRecord.from_lease(lease)
        if old != self._observed:
            self._observe(old, self._clock.monotonic())
        if old.holder and old.holder != self.identity:
            duration = old.lease_duration_s or round(self.lease_duration_s)
            if self._observed_at + duration > self._clock.monotonic():
                return False  # held by someone else and not expired by our observation
        ours = old.holder == self.identity
        record = LeaseRecord(
            holder=self.identity,
            lease_duration_s=round(self.lease_duration_s),
            acquire_time=old.acquire_time if ours and old.acquire_time else format_micro_time(now_s),
            renew_time=format_micro_time(now_s),
            transitions=old.transitions if ours else old.transitions + 1,
        )
        lease["spec"] = {**(lease.get("spec") or {}), **record.to_spec()}
        self._write_unanswered = True
        try:
            # PUT carries metadata.resourceVersion from the GET: a concurrent writer makes this a 409.
            await self._client.request_json("PUT", path, body=lease, max_retries=0)
        except Conflict:
            self._write_unanswered = False
            return False
        self._write_unanswered = False
        self._observe(record, sent_at)
        self._last_renew = sent_at
        return True

    def _observe(self, record: LeaseRecord, at: float) -> None:
        self._observed = record
        self._observed_at = at

    async def _attempt(self, timeout_s: float) -> bool:
        try:
            return await call_with_deadline(self._clock, timeout_s, self.try_acquire_or_renew())
        except (ApiError, DeadlineExceeded) as exc:
            log.info(
                "leader_election_attempt_failed",
                lease=f"{self.namespace}/{self.name}",
                identity=self.identity,
                error=f"{type(exc).__name__}: {exc}",
            )
            return False

    async def acquire(self) -> None:
        """Campaign until this candidate holds the lease."""
        while True:
            if await self._attempt(self._attempt_timeout_s):
                self._set_leader(True)
                return
            jitter = 1.0 + _JITTER_FACTOR * self._rng.random()
            await self._clock.sleep(self.retry_period_s * jitter)

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; return when renewal failed for a whole renew deadline (or we lost)."""
        while True:
            await self._clock.sleep(self.retry_period_s)
            deadline = self._last_renew + self.renew_deadline_s
            while True:
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    log.warning(
                        "leader_election_renew_deadline_passed",
                        lease=f"{self.namespace}/{self.name}",
                        identity=self.identity,
                    )
                    return
                if await self._attempt(min(remaining, self._attempt_timeout_s)):
                    break
                if self._observed is not None and self._observed.holder not in ("", self.identity):
                    log.warning(
                        "leader_election_lost",
                        lease=f"{self.namespace}/{self.name}",
                        identity=self.identity,
                        holder=self._observed.holder,
                    )
                    return
                await self._clock.sleep(
                    max(0.0, min(self.retry_period_s, deadline - self._clock.monotonic()))
                )

    async def release(self, *, unconfirmed: bool = False) -> bool:
        """Give the lease up if we hold it: empty holder and a 1 s duration so others take it at once.

        `unconfirmed`: we may hold it without having seen the grant (a campaign write went unanswered), so
        ask the server rather than trust what we last observed."""
        if not unconfirmed and (self._observed is None or self._observed.holder != self.identity):
            return False
        path = lease_path(self.namespace, self.name)
        now_s = self._clock.now()

        async def _do() -> None:
            _, lease = await self._client.request_json("GET", path, max_retries=0)
            current = LeaseRecord.from_lease(lease)
            if current.holder != self.identity:
                return
            record = LeaseRecord(
                holder="",
                lease_duration_s=1,
                acquire_time=format_micro_time(now_s),
                renew_time=format_micro_time(now_s),
                transitions=current.transitions,
            )
            lease["spec"] = {**(lease.get("spec") or {}), **record.to_spec()}
            await self._client.request_json("PUT", path, body=lease, max_retries=0)
            self._observe(record, self._clock.monotonic())

        try:
            await call_with_deadline(self._clock, self._attempt_timeout_s, _do())
        except (ApiError, DeadlineExceeded) as exc:
            log.warning(
                "leader_election_release_failed",
                lease=f"{self.namespace}/{self.name}",
                identity=self.identity,
                error=f"{type(exc).__name__}: {exc}",
            )
            return False
        log.info("leader_election_released", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        return True

    # ------------------------------------------------------------------------------------ running

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Campaign, run `lead()` while leading; return when leadership is lost. See the class docstring."""
        try:
            await self.acquire()
        except asyncio.CancelledError:
            # Cancelled mid-campaign we may hold the lease all the same: a write sent but unanswered, or a
            # write answered in the very iteration the cancellation arrived (its result then never reaches
            # us, but `_observed` has it). `release` asks the server in the first case and checks what we
            # observed in the second.
            if self._release_on_cancel:
                unconfirmed, self._write_unanswered = self._write_unanswered, False
                await self.release(unconfirmed=unconfirmed)
            raise
        lead_task = asyncio.ensure_future(lead())
        renew_task = asyncio.ensure_future(self._renew_until_lost())
        lost = False
        try:
            await asyncio.wait({lead_task, renew_task}, return_when=asyncio.FIRST_COMPLETED)
            lost = renew_task.done()
        finally:
            # Stop acting first, then stop renewing, then hand the lease on.
            self._set_leader(False)
            await cancel_and_wait((lead_task, renew_task))
            if not lost and self._release_on_cancel:
                await self.release()
        if lead_task.done() and not lead_task.cancelled() and not lost:
            error = lead_task.exception()
            if error is not None:
                raise error

    async def run_forever(self, lead: Callable[[], Awaitable[None]]) -> None:
        """`run(lead)` again and again: after losing the lease, campaign anew."""
        while True:
            await self.run(lead)
            await self._clock.sleep(self.retry_period_s)


class StatusLeaseRenewer:
    """Keeps the admission controller's status Lease fresh (upstream `pkg/admission-controller/.../lease`).

    Every `interval_s`: GET; NotFound → CREATE with `holderIdentity` and `leaseDurationSeconds = interval`;
    otherwise set `renewTime = now` and `holderIdentity` and UPDATE. Conflict/AlreadyExists are ignored
    (several replicas renew the same lease); each round is bounded by the interval.
    """

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        namespace: str,
        name: str = "vpa-admission-controller",
        holder_identity: str | None = None,
        interval_s: float = 10.0,
    ) -> None:
        self._client = client
        self._clock = clock
        self.namespace = namespace
        self.name = name
        self.holder_identity = holder_identity or socket.gethostname()
        self.interval_s = interval_s
        self.renewals = 0
        self.failures = 0

    async def _renew(self) -> None:
        now = format_micro_time(self._clock.now())
        path = lease_path(self.namespace, self.name)
        try:
            _, lease = await self._client.request_json("GET", path, max_retries=3)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.holder_identity,
                    "leaseDurationSeconds": max(1, round(self.interval_s)),
                    "acquireTime": now,
                    "renewTime": now,
                },
            }
            await self._client.request_json(
                "POST", lease_path(self.namespace), body=body, max_retries=3, idempotent=False
            )
            return
        spec = lease.setdefault("spec", {})
        spec["renewTime"] = now
        spec["holderIdentity"] = self.holder_identity
        await self._client.request_json("PUT", path, body=lease, max_retries=3)

    async def renew_once(self) -> bool:
        """One round; True when the lease was written (or another replica won a harmless race)."""
        try:
            await call_with_deadline(self._clock, self.interval_s, self._renew(),
                                     min_wall_s=API_CALL_MIN_WALL_S)
        except Conflict:
            self.renewals += 1
            return True
        except (ApiError, DeadlineExceeded) as exc:
            self.failures += 1
            log.warning(
                "status_lease_renew_failed",
                lease=f"{self.namespace}/{self.name}",
                error=f"{type(exc).__name__}: {exc}",
            )
            return False
        self.renewals += 1
        return True

    async def run(self) -> None:
        while True:
            await self.renew_once()
            await self._clock.sleep(self.interval_s)


STATUS_ERROR: Final = "error"
"""`LeaseFreshness.problem()`: the status lease could not be read or does not exist."""
STATUS_INVALID: Final = "invalid"
"""`LeaseFreshness.problem()`: the status lease is older than the timeout."""


class LeaseFreshness:
    """Whether a Lease was created or renewed within `timeout_s` (the updater's admission check)."""

    def __init__(
        self,
        client: KubeClient,
        clock: Clock,
        *,
        namespace: str,
        name: str = "vpa-admission-controller",
        timeout_s: float = 60.0,
        request_timeout_s: float = 10.0,
    ) -> None:
        self._client = client
        self._clock = clock
        self.namespace = namespace
        self.name = name
        self.timeout_s = timeout_s
        self._request_timeout_s = request_timeout_s

    async def last_renewal(self) -> float | None:
        """Unix seconds of the last renewal (or creation); None if the lease does not exist."""
        try:
            _, lease = await call_with_deadline(
                self._clock,
                self._request_timeout_s,
                self._client.request_json("GET", lease_path(self.namespace, self.name), max_retries=1),
                min_wall_s=API_CALL_MIN_WALL_S,
            )
        except NotFound:
            return None
        spec = lease.get("spec") or {}
        for value in (spec.get("renewTime"), (lease.get("metadata") or {}).get("creationTimestamp")):
            parsed = parse_time(value)
            if parsed is not None:
                return parsed
        return None

    async def problem(self) -> str | None:
        """None when the lease was created or renewed less than the timeout ago; else why the updater must
        skip its loop, as upstream 1.8.1 labels `vpa_updater_admission_controller_status_invalid_total`:
        `error` (the lease could not be read, or does not exist: upstream's GET fails then too) or `invalid`
        (it is too old). Read failures are logged."""
        try:
            renewed = await self.last_renewal()
        except (ApiError, DeadlineExceeded) as exc:
            log.warning(
                "status_lease_read_failed",
                lease=f"{self.namespace}/{self.name}",
                error=f"{type(exc).__name__}: {exc}",
            )
            return STATUS_ERROR
        if renewed is None:
            return STATUS_ERROR
        return None if self._clock.now() - renewed < self.timeout_s else STATUS_INVALID

    async def is_fresh(self) -> bool:
        """True when renewed less than the timeout ago. Missing lease or API failure count as stale."""
        return await self.problem() is None
