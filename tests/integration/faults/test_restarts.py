"""Short form of kill -9 restarts: a restart mid memory window changes no target by more than 1%."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.faults.restarts import kill_restart_scenario

pytestmark = pytest.mark.faults


async def test_kill_9_restart_six_hours_into_the_window_keeps_cpu_and_memory_targets(tmp_path: Path) -> None:
    result = await kill_restart_scenario(tmp_path, hours=6, step_s=3600)
    assert set(result.after) == set(result.before)
    assert len(result.before) == 3
    worst = result.worst_change()
    assert worst["cpu"] <= 0.01, (worst, result.before, result.after)
    assert worst["memory"] <= 0.01, (worst, result.before, result.after)
