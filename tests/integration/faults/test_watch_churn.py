"""Short form of watch faults: drops and 410s under churn; the cache ends equal to the server."""

from __future__ import annotations

import pytest

from tests.integration.faults.watch_churn import watch_churn_scenario

pytestmark = pytest.mark.faults


async def test_drops_and_410s_with_churn_end_with_the_cache_equal_to_the_server() -> None:
    result = await watch_churn_scenario(rounds=30, gone_every=5)
    assert result.drops == 30
    assert result.gones >= 6
    assert result.relists >= 6
    assert result.cache_equals_server, result
    assert result.duplicate_events == 0
