"""Short form of leader faults: a stopped and a killed updater leader; never two actors (audit log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.faults.leaders import LEASE_PATH, LeaderResult, judge, leader_failover_scenario
from vpa.sim.apiserver.server import AuditRecord

pytestmark = pytest.mark.faults


async def test_stopped_then_killed_leader_never_gives_two_actors(tmp_path: Path) -> None:
    result = await leader_failover_scenario(tmp_path, rounds=1)
    assert result.writes_without_lease == [], result
    assert result.holder_changes == 2, result
    assert result.writer_changes <= result.holder_changes, result
    assert len(result.actor_writes) == 2, result  # both replicas acted, one after the other


def test_the_judge_sees_a_write_by_a_replica_that_lost_the_lease() -> None:
    lease, pods = LEASE_PATH, "/api/v1/namespaces/default/pods/web-1/eviction"
    audit = [
        AuditRecord(1.0, "PUT", lease, 200, "a"),
        AuditRecord(1.5, "POST", pods, 201, "a"),
        AuditRecord(2.0, "PUT", lease, 200, "b"),
        AuditRecord(2.5, "POST", pods, 201, "b"),
        AuditRecord(2.6, "POST", pods, 201, "a"),  # a resumed and acted without the Lease
    ]
    result = LeaderResult()
    judge(audit, result)
    assert result.writes_without_lease == [f"POST {pods} by a"]
    assert (result.holder_changes, result.writer_changes) == (1, 2)
    assert result.timeline == [
        (0.0, "Lease held by a until 0.00 (1 writes)"), (1.0, "Lease held by b until 1.00 (1 writes)")]
