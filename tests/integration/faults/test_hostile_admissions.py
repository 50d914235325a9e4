"""Short form of hostile admissions: distinct large pods keep RSS flat; absurd quantities never leak out."""

from __future__ import annotations

import pytest

from tests.integration.faults.hostile_admissions import hostile_admissions_scenario

pytestmark = pytest.mark.faults
MIB = 1024 * 1024


async def test_distinct_large_pods_and_absurd_quantities() -> None:
    # 300 pods of 256 KiB (75 MiB of distinct containers) plus 1,000 fuzzed reviews.
    result = await hostile_admissions_scenario(large_pods=300, pod_bytes=256 * 1024, fuzzed=1000)
    assert result.sent == 1300
    assert set(result.statuses) <= {200, 400}, result.statuses
    assert result.pods_denied == 0
    assert result.invalid_values == []
    assert result.rss_growth < 40 * MIB, f"RSS grew by {result.rss_growth / MIB:.0f} MiB"
