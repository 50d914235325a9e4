"""Leader election with two candidates, the status-lease renewer and the freshness reader, on the simulator.

Each candidate has its own client with its own User-Agent so faults can target one of them. Time is a
`VirtualClock` running 10x real time: upstream's 15 s / 10 s / 2 s take 1.5 s / 1 s / 0.2 s of wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from vpa.kube.client import KubeClient
from vpa.kube.leasing import (
    STATUS_ERROR,
    STATUS_INVALID,
    LeaderElector,
    LeaseFreshness,
    StatusLeaseRenewer,
    lease_path,
    parse_time,
)
from vpa.model.clock import VirtualClock
from vpa.sim import SimCluster

from .helpers import eventually, new_client

NAMESPACE = "kube-system"
LEASE = "vpa-updater"


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=1, behaviour=False) as c:
        if c.store.get("namespaces", None, NAMESPACE) is None:
            await c.store.create(
                "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            )
        yield c


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(time_scale=10.0)


@dataclass
class Candidate:
    name: str
    client: KubeClient
    elector: LeaderElector
    clock: VirtualClock
    working: bool = False
    started_at: list[float] = field(default_factory=list)
    stopped_at: list[float] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        self.working = True
        self.started_at.append(self.clock.now())
        try:
            await asyncio.Event().wait()
        finally:
            self.working = False
            self.stopped_at.append(self.clock.now())

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.lead))

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


@contextlib.asynccontextmanager
async def candidates(cluster: SimCluster, clock: VirtualClock, *names: str) -> AsyncIterator[list[Candidate]]:
    made: list[Candidate] = []
    try:
        for name in names:
            client = await new_client(cluster, clock, user_agent=f"vpa-test/{name}")
            elector = LeaderElector(
                client, clock, name=LEASE, namespace=NAMESPACE, identity=f"host-{name}_uuid"
            )
            made.append(Candidate(name, client, elector, clock))
        yield made
    finally:
        for candidate in made:
            await candidate.stop()
            await candidate.client.close()


def lease_spec(cluster: SimCluster) -> dict[str, object]:
    lease = cluster.store.get("leases.coordination.k8s.io", NAMESPACE, LEASE)
    assert lease is not None
    spec: dict[str, object] = lease["spec"]
    return spec


async def test_exactly_one_of_two_leads(cluster: SimCluster, clock: VirtualClock) -> None:
    async with candidates(cluster, clock, "a", "b") as (a, b):
        a.start()
        b.start()
        await eventually(lambda: a.working or b.working, what="a leader")
        leader, other = (a, b) if a.working else (b, a)
        # Over 30 s of virtual time (many renewals), leadership never doubles up and never moves.
        end = clock.now() + 30
        while clock.now() < end:
            assert leader.working
            assert leader.elector.is_leader
            assert not other.working
            assert not other.elector.is_leader
            await asyncio.sleep(0.02)
        spec = lease_spec(cluster)
        assert spec["holderIdentity"] == leader.elector.identity
        assert spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        renew = parse_time(spec["renewTime"])
        acquire = parse_time(spec["acquireTime"])
        assert renew is not None
        assert acquire is not None
        assert acquire < renew <= clock.now()
        assert clock.now() - renew < 2 * leader.elector.retry_period_s + 1  # renewed every retry period
        assert other.elector.leader_identity == leader.elector.identity


async def test_cancelled_leader_releases_and_the_other_takes_over(
    cluster: SimCluster, clock: VirtualClock
) -> None:
    async with candidates(cluster, clock, "a", "b") as (a, b):
        a.start()
        await eventually(lambda: a.working, what="a to lead")
        b.start()
        await asyncio.sleep(0.3)  # b campaigns a few times and sees a holding the lease
        assert not b.working
        cancelled_at = clock.now()
        await a.stop()
        assert not a.working
        assert not a.elector.is_leader
        spec = lease_spec(cluster)
        assert spec["holderIdentity"] in ("", b.elector.identity)
        await eventually(lambda: b.working, timeout_s=5, what="b to lead")
        # Released, so b did not wait out the 15 s lease: one retry period (+ jitter, ≤ 4.4 s) is enough.
        assert b.started_at[0] - cancelled_at < 15.0
        spec = lease_spec(cluster)
        assert spec["holderIdentity"] == b.elector.identity
        assert spec["leaseTransitions"] == 1


async def test_released_lease_shape(cluster: SimCluster, clock: VirtualClock) -> None:
    async with candidates(cluster, clock, "a") as (a,):
        a.start()
        await eventually(lambda: a.working)
        await a.stop()
        spec = lease_spec(cluster)
        assert spec["holderIdentity"] == ""
        assert spec["leaseDurationSeconds"] == 1


async def test_hung_leader_stops_before_its_lease_expires(cluster: SimCluster, clock: VirtualClock) -> None:
    async with candidates(cluster, clock, "a", "b") as (a, b):
        a.start()
        await eventually(lambda: a.working, what="a to lead")
        b.start()
        await asyncio.sleep(0.3)
        # From now on every API call of a's hangs (an hour of real latency: a partition).
        hang = cluster.faults.inject(
            verb="*",
            resource="leases.coordination.k8s.io",
            code=None,
            latency_s=3600,
            user_agent="vpa-test/a",
        )
        assert not b.working
        await eventually(lambda: not a.working, timeout_s=10, what="a to stop acting")
        await eventually(lambda: b.working, timeout_s=10, what="b to take over")
        assert hang.hits >= 1
        last_renew = a.elector.last_renewed_monotonic  # VirtualClock: monotonic() == now()
        a_stopped = a.stopped_at[0]
        b_started = b.started_at[0]
        # a gave up by its renew deadline (10 s) after its last good renewal; b took over only after a
        # whole lease duration (15 s) without a renewal: never two leaders at once.
        # (The slack over 10 s is event-loop latency on a busy machine, at 10x time.)
        assert a_stopped <= last_renew + 10.0 + 2.5
        assert a_stopped < last_renew + 15.0
        assert b_started >= last_renew + 15.0
        assert a_stopped < b_started
        assert not a.elector.is_leader
        # a's run() returned (leadership lost), so the caller may exit or campaign again.
        assert a.task is not None
        await asyncio.wait_for(a.task, 5)


async def test_conflicts_on_create_and_update_are_lost_races(
    cluster: SimCluster, clock: VirtualClock
) -> None:
    async with candidates(cluster, clock, "a", "b") as (a, b):
        # Both see no lease and both try to create it: exactly one wins, the other gets a 409.
        results = await asyncio.gather(a.elector.try_acquire_or_renew(), b.elector.try_acquire_or_renew())
        assert sorted(results) == [False, True]
        winner = a if results[0] else b
        assert lease_spec(cluster)["holderIdentity"] == winner.elector.identity
        # A 409 on the winner's renewal (someone wrote in between) is "not renewed", not an error...
        conflict = cluster.faults.inject(
            verb="update",
            resource="leases.coordination.k8s.io",
            code=409,
            count=1,
            user_agent=f"vpa-test/{winner.name}",
        )
        assert await winner.elector.try_acquire_or_renew() is False
        assert conflict.hits == 1
        # ...and the next renewal succeeds.
        assert await winner.elector.try_acquire_or_renew() is True
        # The loser, racing on the same resourceVersion after a release, gets a real 409 or a held lease.
        assert await winner.elector.release()
        results = await asyncio.gather(a.elector.try_acquire_or_renew(), b.elector.try_acquire_or_renew())
        assert sorted(results) == [False, True]
        assert lease_spec(cluster)["leaseTransitions"] == 1


async def test_lost_race_while_leading_stops_the_leader(cluster: SimCluster, clock: VirtualClock) -> None:
    async with candidates(cluster, clock, "a") as (a,):
        a.start()
        await eventually(lambda: a.working)
        # Another holder writes the lease behind a's back (as after a long partition).
        lease = cluster.store.get("leases.coordination.k8s.io", NAMESPACE, LEASE)
        assert lease is not None
        lease = {**lease, "spec": {**lease["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 15}}
        await cluster.store.update("leases.coordination.k8s.io", lease)
        await eventually(lambda: not a.working, timeout_s=5, what="a to notice")
        assert a.task is not None
        await asyncio.wait_for(a.task, 5)
        assert lease_spec(cluster)["holderIdentity"] == "intruder"  # a did not release someone else's lease


def test_timing_parameters_are_validated() -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, VirtualClock(), name="x", namespace="y", lease_duration_s=10, renew_deadline_s=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LeaderElector(None, VirtualClock(), name="x", namespace="y", renew_deadline_s=2, retry_period_s=2)  # type: ignore[arg-type]


async def test_status_lease_renewer_and_freshness(cluster: SimCluster, clock: VirtualClock) -> None:
    frozen = VirtualClock()
    client = await new_client(cluster, frozen)
    async with client:
        fresh = LeaseFreshness(
            client, frozen, namespace=NAMESPACE, name="vpa-admission-controller", timeout_s=60
        )
        assert await fresh.is_fresh() is False  # no lease yet
        assert await fresh.problem() == STATUS_ERROR  # upstream's GET fails: counted as "error"
        renewer = StatusLeaseRenewer(
            client, frozen, namespace=NAMESPACE, holder_identity="webhook-pod-1", interval_s=10
        )
        assert await renewer.renew_once()
        lease = cluster.store.get("leases.coordination.k8s.io", NAMESPACE, "vpa-admission-controller")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "webhook-pod-1"
        assert lease["spec"]["leaseDurationSeconds"] == 10
        assert parse_time(lease["spec"]["renewTime"]) == pytest.approx(frozen.now(), abs=1e-3)
        assert await fresh.is_fresh()
        frozen.advance(59.9)
        assert await fresh.problem() is None
        frozen.advance(0.1)
        assert await fresh.problem() == STATUS_INVALID  # exactly the timeout old: stale, as upstream
        frozen.advance(1)
        assert await fresh.is_fresh() is False
        assert await renewer.renew_once()  # the update path
        lease = cluster.store.get("leases.coordination.k8s.io", NAMESPACE, "vpa-admission-controller")
        assert lease is not None
        assert parse_time(lease["spec"]["renewTime"]) == pytest.approx(frozen.now(), abs=1e-3)
        assert await fresh.is_fresh()
    # A failing API counts as stale for the reader and as a failure for the renewer, never a crash. (Time
    # must flow here: the client backs off between retries.)
    cluster.faults.inject(verb="*", resource="leases.coordination.k8s.io", code=500)
    client = await new_client(cluster, clock)
    async with client:
        fresh = LeaseFreshness(
            client, clock, namespace=NAMESPACE, name="vpa-admission-controller", timeout_s=60
        )
        renewer = StatusLeaseRenewer(client, clock, namespace=NAMESPACE, holder_identity="webhook-pod-1")
        assert await fresh.is_fresh() is False
        assert await renewer.renew_once() is False
        assert renewer.failures == 1
        assert client.retries >= 2


async def test_renewer_runs_on_its_interval(cluster: SimCluster, clock: VirtualClock) -> None:
    client = await new_client(cluster, clock)
    async with client:
        renewer = StatusLeaseRenewer(client, clock, namespace=NAMESPACE, holder_identity="w", interval_s=10)
        task = asyncio.create_task(renewer.run())
        try:
            await eventually(lambda: renewer.renewals >= 3, timeout_s=10, what="three renewals")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    path = lease_path(NAMESPACE, "vpa-admission-controller")
    assert path == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vpa-admission-controller"


async def test_lead_that_fails_releases_the_lease_and_reraises(
    cluster: SimCluster, clock: VirtualClock
) -> None:
    async with candidates(cluster, clock, "a") as (a,):

        async def crash() -> None:
            await clock.sleep(5)
            raise RuntimeError("the leader's loop crashed")

        with pytest.raises(RuntimeError, match="crashed"):
            await asyncio.wait_for(a.elector.run(crash), 10)
        assert not a.elector.is_leader
        assert lease_spec(cluster)["holderIdentity"] == ""

        async def finish() -> None:
            await clock.sleep(1)

        await asyncio.wait_for(a.elector.run(finish), 10)
        assert lease_spec(cluster)["holderIdentity"] == ""
        assert a.elector.transitions_seen == 2


class _AnswerLost:
    """A client whose lease writes reach the server but whose answers never come back (the process is
    stopped while the API server has already granted the lease)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self.written = asyncio.Event()

    async def request_json(self, method: str, path: str, **kwargs: object) -> object:
        answer = await self._client.request_json(method, path, **kwargs)  # type: ignore[arg-type]
        if method in ("POST", "PUT"):
            self.written.set()
            await asyncio.Event().wait()
        return answer


@pytest.mark.parametrize("existing", [False, True], ids=["create", "update"])
async def test_campaign_cancelled_after_an_unanswered_grant_releases(
    cluster: SimCluster, clock: VirtualClock, existing: bool
) -> None:
    async with candidates(cluster, clock, "a", "b") as (a, b):
        if existing:  # b held it and released it: a's grant is an update of the Lease
            b.start()
            await eventually(lambda: b.working, what="b to lead")
            await b.stop()
        lossy = _AnswerLost(a.client)
        a.elector._client = lossy  # type: ignore[assignment]
        a.start()
        await asyncio.wait_for(lossy.written.wait(), 10)
        assert lease_spec(cluster)["holderIdentity"] == a.elector.identity  # granted, unseen by a
        lossy.written.clear()
        a.elector._client = a.client
        await a.stop()
        assert not a.elector.is_leader
        assert lease_spec(cluster)["holderIdentity"] == ""


class _CancelledAsAnswered:
    """A client that cancels the campaigning task in the very iteration its lease write is answered: the
    grant completes, but the task wakes to its cancellation instead of the result (a SIGTERM that lands
    just as the API server answers)."""

    def __init__(self, client: KubeClient, candidate: Candidate) -> None:
        self._client = client
        self._candidate = candidate
        self.cancelled = False

    async def request_json(self, method: str, path: str, **kwargs: object) -> object:
        answer = await self._client.request_json(method, path, **kwargs)  # type: ignore[arg-type]
        if method in ("POST", "PUT") and not self.cancelled:
            assert self._candidate.task is not None
            self._candidate.task.cancel()
            self.cancelled = True
        return answer


async def test_campaign_cancelled_as_its_grant_is_answered_releases(
    cluster: SimCluster, clock: VirtualClock
) -> None:
    async with candidates(cluster, clock, "a") as (a,):
        a.elector._client = _CancelledAsAnswered(a.client, a)  # type: ignore[assignment]
        a.start()
        assert a.task is not None
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(a.task, 10)
        assert a.task.cancelled()
        assert not a.elector.is_leader
        assert a.started_at == []  # never led
        assert lease_spec(cluster)["holderIdentity"] == ""  # the grant it never saw is handed back
