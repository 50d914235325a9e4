"""The benchmarks' shared helpers: the event loop they run `vpa run`'s code on and the steal they report."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from benchmarks import run_loop, steal_share


def test_benchmarks_run_the_components_on_the_loop_vpa_run_uses() -> None:
    async def which() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    assert issubclass(run_loop(which()), uvloop.Loop)


@pytest.mark.parametrize(
    ("start", "end", "seconds", "cpus", "expected"),
    [
        (10.0, 10.5, 10.0, 2, "0.50 s (2.5% of 2 CPUs)"),
        (3.0, 3.0, 4.0, 1, "0.00 s (0.0% of 1 CPUs)"),
        (None, 1.0, 4.0, 2, "not reported"),  # a kernel without a steal counter
        (1.0, None, 4.0, 2, "not reported"),
        (1.0, 2.0, 0.0, 2, "not reported"),  # an empty window has no share
    ],
)
def test_a_windows_steal_is_given_as_seconds_and_a_share_of_the_cpus(
    monkeypatch: pytest.MonkeyPatch, start: float | None, end: float | None, seconds: float, cpus: int,
    expected: str,
) -> None:
    monkeypatch.setattr("benchmarks.os.cpu_count", lambda: cpus)
    assert steal_share(start, end, seconds) == expected
