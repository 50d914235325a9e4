"""Leader stop and kill with two updater replicas: never two actors, judged from the server's writes.

`leader_failover_scenario` runs two `vpa run --components=updater --leader-elect=true` child processes
(wall clock, short lease settings) against an in-process `SimCluster` whose audit log records every write
with the bearer token of the client that made it (each replica gets its own token). Workloads under
`Recreate` VPAs whose recommendation no pod matches keep the leader evicting. The leader is first stopped
(SIGSTOP, until the other has taken over, then SIGCONT: it must notice it lost the Lease without acting),
then the new leader is killed (SIGKILL). From the audit log: every action (a write other than the Lease's
and other than an Event, which only reports an action and which a replica resumed after SIGSTOP may still
flush) must come from the replica whose Lease write (acquire or renew) is the latest before it, and the
actors must change no more often than the Lease holder did.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.integration.components.test_updater_support import container, deployment, rec, vpa
from vpa.sim import SimCluster
from vpa.sim.apiserver.server import AuditRecord

LEASES = "leases.coordination.k8s.io"
VPAS = "verticalpodautoscalers.autoscaling.k8s.io"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vpa-updater"
LEASE_DURATION_S = 2.0
FLAGS = [
    "--components=updater", "--leader-elect=true", f"--leader-elect-lease-duration={LEASE_DURATION_S:g}s",
    "--leader-elect-renew-deadline=1500ms", "--leader-elect-retry-period=250ms", "--updater-interval=1s",
    "--address=127.0.0.1:0", "--log-format=json",
]  # fmt: skip


@dataclass
class LeaderResult:
    actor_writes: dict[str, int] = field(default_factory=dict)
    writer_changes: int = 0
    holder_changes: int = 0
    writes_without_lease: list[str] = field(default_factory=list)
    failover_s: list[float] = field(default_factory=list)
    timeline: list[tuple[float, str]] = field(default_factory=list)
    """What a failed assertion needs to be read: each signal sent and each run of Lease writes by one holder,
    in order, at seconds since `started`."""
    started: float = 0.0
    """When the replicas were started (wall clock, as the audit log's times); 0: the first write's time."""
    replica_events: list[str] = field(default_factory=list)
    """Each replica's own account of its leadership (`leader_election_*` log lines, `leader_events`), in
    the order each logged them: why a Lease changed hands when the timeline shows more changes than
    signals."""

    def signalled(self, what: str, token: str) -> None:
        self.timeline.append((round(time.time() - self.started, 2), f"{what} {token}"))


def leader_events(log: Path, token: str) -> list[str]:
    """The `leader_election_*` lines of one replica's JSON log, as `token: event key=value ...` (lines that
    are not JSON, or of other events, are skipped; a missing log gives none)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or not str(record.get("event", "")).startswith("leader_election_"):
            continue
        detail = " ".join(f"{key}={record[key]}" for key in ("timestamp", "leading", "holder", "error")
                          if key in record)
        events.append(f"{token}: {record['event']} {detail}".rstrip())
    return events


def _kubeconfig(source: Path, target: Path, token: str) -> Path:
    config = yaml.safe_load(source.read_text())
    for user in config["users"]:
        user["user"]["token"] = token
    target.write_text(yaml.safe_dump(config))
    return target


async def _spawn(kubeconfig: Path, log: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"NAMESPACE": "kube-system"}
    with open(log, "ab") as out:  # noqa: ASYNC230 - opened once, handed to the child
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vpa.cli", "run", f"--kubeconfig={kubeconfig}", *FLAGS,
            stdout=out, stderr=out, env=env,
        )  # fmt: skip


def _lease_writes(audit: list[AuditRecord]) -> list[AuditRecord]:
    """Successful acquisitions and renewals of Lease vpa-updater (a create is a POST to the collection)."""
    return [
        r
        for r in audit
        if r.status < 300
        and (
            (r.path == LEASE_PATH and r.method in ("PUT", "PATCH"))
            or (r.path == LEASE_PATH.rsplit("/", 1)[0] and r.method == "POST")
        )
    ]


def _holder(cluster: SimCluster) -> str | None:
    lease = cluster.store.get(LEASES, "kube-system", "vpa-updater") or {}
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return str(holder) if holder else None


async def _admission_controller_alive(cluster: SimCluster) -> None:
    """Renew the admission controller's status Lease (the updater evicts only while it is fresh)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = cluster.store.get(LEASES, "kube-system", "vpa-admission-controller")
    if lease is None:
        await cluster.store.create(LEASES, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "vpa-admission-controller", "namespace": "kube-system"},
            "spec": {"holderIdentity": "test", "leaseDurationSeconds": 10, "renewTime": now},
        })  # fmt: skip
        return
    lease["spec"]["renewTime"] = now
    await cluster.store.update(LEASES, lease)


async def _keep_busy(cluster: SimCluster, seconds: float) -> None:
    """Let real time pass while the cluster's virtual time moves, so evicted pods come back."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await _admission_controller_alive(cluster)
        await cluster.advance(5)
        await asyncio.sleep(0.25)


async def _new_holder(cluster: SimCluster, old: str | None, timeout_s: float) -> tuple[str, float]:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        holder = _holder(cluster)
        if holder and holder != old:
            return holder, time.monotonic() - started
        await _admission_controller_alive(cluster)
        await cluster.advance(5)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no new holder of Lease vpa-updater after {timeout_s} s (still {old})")


def judge(audit: list[AuditRecord], result: LeaderResult) -> None:
    """Every non-Lease write must come from the client that last wrote the Lease successfully."""
    leases = _lease_writes(audit)
    holders = [r.token for r in leases]
    result.holder_changes = sum(1 for a, b in itertools.pairwise(holders) if a != b)
    started = result.started or (audit[0].time if audit else 0.0)
    for token, run in itertools.groupby(leases, key=lambda r: r.token):
        writes = list(run)
        until = f"until {writes[-1].time - started:.2f} ({len(writes)} writes)"
        result.timeline.append((round(writes[0].time - started, 2), f"Lease held by {token} {until}"))
    result.timeline.sort()
    writers: list[str] = []
    for record in audit:
        if "/leases" in record.path or record.path.endswith("/events") or record.status >= 300:
            continue  # Events only report actions: a replica resumed after SIGSTOP may still flush some
        result.actor_writes[record.token] = result.actor_writes.get(record.token, 0) + 1
        before = [r for r in leases if r.time <= record.time]
        if not before or before[-1].token != record.token:
            result.writes_without_lease.append(f"{record.method} {record.path} by {record.token}")
        if not writers or writers[-1] != record.token:
            writers.append(record.token)
    result.writer_changes = len(writers) - 1


async def leader_failover_scenario(tmp: Path, *, rounds: int = 1, busy_s: float = 2.0) -> LeaderResult:
    result = LeaderResult()
    async with SimCluster(nodes=2, node_cpu="8", node_memory="32Gi") as cluster:
        for name in ("web", "api"):
            await cluster.store.create("deployments.apps", deployment(name, 3, container("app", cpu="100m")))
            body = vpa(name, name, "Recreate")
            far = rec(cpu="900m", memory="900Mi", lower=("900m", "900Mi"), upper=("900m", "900Mi"))
            await cluster.store.create(VPAS, body)
            await cluster.store.patch(
                VPAS, "default", name, "merge",
                {"status": {"recommendation": {"containerRecommendations": [far]}}}, subresource="status",
            )  # fmt: skip
        await cluster.settle()
        cluster.server.audit = []
        result.started = time.time()
        procs = {
            token: await _spawn(
                _kubeconfig(cluster.kubeconfig_path, tmp / f"{token}.kubeconfig", token), tmp / f"{token}.log"
            )
            for token in ("replica-a", "replica-b")
        }
        try:
            holder, _ = await _new_holder(cluster, None, 30)
            for _ in range(rounds):
                await _keep_busy(cluster, busy_s)
                leader = _lease_writes(cluster.server.audit)[-1].token
                # Stop the leader until the other one has taken over, then let it run again.
                result.signalled("SIGSTOP", leader)
                procs[leader].send_signal(signal.SIGSTOP)
                holder, took = await _new_holder(cluster, holder, LEASE_DURATION_S * 5)
                result.failover_s.append(took)
                await _keep_busy(cluster, busy_s)
                result.signalled("SIGCONT", leader)
                procs[leader].send_signal(signal.SIGCONT)
                await _keep_busy(cluster, busy_s)
                # Kill the new leader; the resumed one must take over.
                leader = _lease_writes(cluster.server.audit)[-1].token
                result.signalled("SIGKILL", leader)
                procs[leader].send_signal(signal.SIGKILL)
                await procs[leader].wait()
                holder, took = await _new_holder(cluster, holder, LEASE_DURATION_S * 5)
                result.failover_s.append(took)
                await _keep_busy(cluster, busy_s)
                procs[leader] = await _spawn(tmp / f"{leader}.kubeconfig", tmp / f"{leader}.log")
        finally:
            for proc in procs.values():
                if proc.returncode is None:
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
        judge(cluster.server.audit, result)
        for token in procs:
            result.replica_events += leader_events(tmp / f"{token}.log", token)
    return result
