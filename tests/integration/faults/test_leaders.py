"""Short form of leader faults: a stopped and a killed updater leader; never two actors (audit log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.faults.leaders import (
    LEASE_PATH,
    LeaderResult,
    judge,
    leader_events,
    leader_failover_scenario,
)
from vpa.sim.apiserver.server import AuditRecord

pytestmark = pytest.mark.faults


async def test_stopped_then_killed_leader_never_gives_two_actors(tmp_path: Path) -> None:
    result = await leader_failover_scenario(tmp_path, rounds=1)
    assert result.writes_without_lease == [], result
    assert result.holder_changes == 2, result
    assert result.writer_changes <= result.holder_changes, result
    assert len(result.actor_writes) == 2, result  # both replicas acted, one after the other
    led = {event.split(":")[0] for event in result.replica_events if "leader_election_change" in event}
    assert led == {"replica-a", "replica-b"}, result  # each says so in its own log, which a failure shows


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


def test_a_replicas_leader_election_lines_are_kept_for_the_message(tmp_path: Path) -> None:
    log = tmp_path / "replica-a.log"
    log.write_text("\n".join([
        '{"event": "leader_election_change", "leading": true, "timestamp": "t1"}',
        '{"event": "updater_loop_done", "timestamp": "t2"}',
        "Traceback (most recent call last):",
        '{"event": "leader_election_renew_deadline_passed", "timestamp": "t3"}',
        '{"event": "leader_election_lost", "holder": "replica-b", "timestamp": "t4"}',
    ]))
    assert leader_events(log, "replica-a") == [
        "replica-a: leader_election_change timestamp=t1 leading=True",
        "replica-a: leader_election_renew_deadline_passed timestamp=t3",
        "replica-a: leader_election_lost timestamp=t4 holder=replica-b",
    ]
    assert leader_events(tmp_path / "missing.log", "replica-b") == []
