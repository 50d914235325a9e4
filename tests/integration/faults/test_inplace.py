"""Short form of InPlace under infeasible and deferred resizes with churn: zero evictions."""

from __future__ import annotations

import pytest

from tests.integration.faults.inplace import inplace_scenario

pytestmark = pytest.mark.faults


async def test_in_place_never_evicts_under_infeasible_and_deferred_resizes() -> None:
    result = await inplace_scenario(loops=12)
    assert result.evictions_seen_by_server == 0
    assert result.evictions_reported == 0
    assert result.resizes_seen_by_server >= 3
    assert result.pending_reasons == {"Infeasible", "Deferred"}, result
