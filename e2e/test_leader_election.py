"""Two updater replicas with leader election: one holds Lease `vpa-updater`; kill it, the other takes over.

The replicas follow the wall clock here (leases are about real time: a killed leader's Lease expires after
`--leader-elect-lease-duration` of real time), with short lease settings so the failover takes seconds.
"""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.conftest import Cluster, VpaProcess, VpaRunFactory

LEASE = "vpa-updater"
LEASE_DURATION_S = 4.0
RETRY_PERIOD_S = 0.5
ELECTION_FLAGS = [
    f"--leader-elect-lease-duration={LEASE_DURATION_S:g}s",
    "--leader-elect-renew-deadline=3s",
    f"--leader-elect-retry-period={int(RETRY_PERIOD_S * 1000)}ms",
]


def _lease(cluster: Cluster) -> dict[str, Any] | None:
    result = cluster.kubectl("get", "lease", LEASE, "-n", "kube-system", "-o", "json", check=False)
    if result.returncode != 0:
        return None
    lease: dict[str, Any] = json.loads(result.stdout)
    return lease


def _holder(cluster: Cluster) -> str | None:
    lease = _lease(cluster)
    holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
    return str(holder) if holder else None


def _leaders(replicas: list[VpaProcess]) -> list[VpaProcess]:
    return [r for r in replicas if r.alive() and r.leading(LEASE)]


def test_one_updater_leads_and_the_other_takes_over(sim: Cluster, vpa_run: VpaRunFactory) -> None:
    sim.require_sim("starts and kills updater replicas")
    replicas = [vpa_run(["updater"], leader_elect=True, clock="real", extra=ELECTION_FLAGS) for _ in range(2)]
    first_holder = sim.wait_for("a holder of Lease vpa-updater", lambda: _holder(sim))
    leaders = sim.wait_for("one replica leading", lambda: _leaders(replicas) or None)
    assert len(leaders) == 1, "both replicas report holding the lease"
    leader = leaders[0]
    follower = next(r for r in replicas if r is not leader)

    # Several renew periods later, still exactly one leader and the same holder.
    time.sleep(3 * RETRY_PERIOD_S + 1)
    assert _leaders(replicas) == [leader]
    assert _holder(sim) == first_holder

    leader.kill()  # SIGKILL: no graceful release, the Lease has to expire
    killed_at = time.monotonic()
    new_holder = sim.wait_for(
        "another holder of Lease vpa-updater",
        lambda: (h := _holder(sim)) is not None and h != first_holder and h,
        timeout_s=LEASE_DURATION_S * 4,
    )
    took = time.monotonic() - killed_at
    sim.wait_for("the follower leading", lambda: follower.leading(LEASE))
    assert new_holder
    # Within the lease duration (plus a retry period and kubectl's own polling latency).
    assert took <= LEASE_DURATION_S + RETRY_PERIOD_S + 1.5, f"failover took {took:.1f} s"
    lease = _lease(sim)
    assert lease is not None
    assert lease["spec"].get("leaseTransitions", 0) >= 1
