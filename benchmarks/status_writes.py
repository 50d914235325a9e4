"""Benchmark: VPA status writes per steady recommender loop by `--bounds-write-tolerance`, mature histories.

`python -m benchmarks.status_writes [--vpas 1000] [--days 2] [--loops 30] [--tolerances 0,0.01,0.05]`

The recommender of `benchmarks.recommender_loop` (N VPAs of one single-container pod, usage on a daily sine),
fed `--days` of history with one sample a minute, as metrics-server gives, so the bounds' confidence is that
of a VPA running for that long. Then `--loops` loops a minute apart, per tolerance, each on a fresh
recommender. Unlike `recommender_loop`'s counting sink, a status written here goes back into the VPA view
the recommender reads next loop, as the watch cache would bring it back, so a status is written only when
it differs from the last one written. Reported per tolerance: status writes per loop, the loops' targets
changed, and the largest gap between a bound shown (written) and the bound computed at the end.

Counts, not times: what it leaves out is the API. Each write saved is one PATCH of a custom resource's
status; on the real control plane that costs kube-apiserver about 2 ms of CPU alone
(`benchmarks.control_plane`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from typing import Any

from benchmarks import recommender_loop, run_loop
from vpa.model.settings import RecommenderSettings
from vpa.model.vpa import Recommendation, VpaStatus

MINUTE = 60.0


class WritingBack(recommender_loop.Sink):
    """Counts writes and puts each status written back into the view the recommender reads."""

    def __init__(self) -> None:
        super().__init__()
        self.versions = 0
        self._index: dict[tuple[str, str], int] = {}

    async def write(self, *args: Any) -> None:
        await super().write(*args)
        if len(args) != 3:
            return
        namespace, name, status = args
        assert isinstance(status, VpaStatus)
        items = self.vpas.items
        if len(self._index) != len(items):  # built once: `build` sets the views after this sink exists
            self._index = {(view.namespace, view.name): i for i, view in enumerate(items)}
        index = self._index[(namespace, name)]
        self.versions += 1
        items[index] = dataclasses.replace(items[index], status=status, resource_version=str(self.versions))


def _bound_gap(shown: Recommendation | None, computed: Recommendation) -> float:
    """The largest relative gap between a bound shown and the same bound computed."""
    worst = 0.0
    for now in computed.containers:
        was = shown.for_container(now.container_name) if shown is not None else None
        if was is None:
            return math.inf
        for old, new in ((was.lower_bound, now.lower_bound), (was.upper_bound, now.upper_bound)):
            for a, b in ((old.cpu_millicores, new.cpu_millicores), (old.memory_bytes, new.memory_bytes)):
                if a is not None and b is not None and a:
                    worst = max(worst, abs(b - a) / a)
    return worst


async def one(vpas: int, days: float, loops: int, tolerance: float) -> tuple[list[int], int, float, float]:
    sink = WritingBack()
    settings = dataclasses.replace(RecommenderSettings(), bounds_write_tolerance=tolerance)
    setup = recommender_loop.build(vpas, 1, 100, settings=settings, sink=sink)
    await setup.recommender.run_once()
    started = time.perf_counter()
    recommender_loop.feed_history(setup, MINUTE, days=days)
    fed_s = time.perf_counter() - started
    await setup.recommender.run_once()  # every VPA's first status with that history
    writes, targets = [], 0
    for _ in range(loops):
        setup.clock.advance(MINUTE)
        before = sink.statuses
        report = await setup.recommender.run_once()
        writes.append(sink.statuses - before)
        targets += report.target_changes
    gap = 0.0
    for view in sink.vpas.items:
        computed = setup.recommender.core.recommend(view.namespace, view.name)
        gap = max(gap, _bound_gap(view.status.recommendation, computed))
    return writes, targets, gap, fed_s


async def run(vpas: int, days: float, loops: int, tolerances: list[float]) -> int:
    print(f"status_writes: {vpas} VPAs × 1 container, {days:g} days of history at one sample a minute, "
          f"{loops} loops a minute apart per tolerance")
    print("  leaves out: the API (counts only; a write is one status PATCH, about 2 ms of kube-apiserver "
          "CPU on the real control plane)")
    print(f"{'tolerance':>10}{'writes/loop':>13}{'min':>6}{'max':>6}{'targets changed':>17}"
          f"{'largest bound gap':>19}")
    for tolerance in tolerances:
        writes, targets, gap, fed_s = await one(vpas, days, loops, tolerance)
        print(f"{tolerance:>10g}{sum(writes) / len(writes):>13.1f}{min(writes):>6}{max(writes):>6}"
              f"{targets:>17}{gap * 100:>18.2f}%   (history fed in {fed_s:.0f} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.status_writes", description=__doc__)
    parser.add_argument("--vpas", type=int, default=1000)
    parser.add_argument("--days", type=float, default=2.0, help="history at one sample a minute")
    parser.add_argument("--loops", type=int, default=30)
    parser.add_argument("--tolerances", default="0,0.01,0.05",
                        help="comma-separated --bounds-write-tolerance values")
    args = parser.parse_args(argv)
    return run_loop(run(args.vpas, args.days, args.loops,
                           [float(t) for t in args.tolerances.split(",")]))


if __name__ == "__main__":
    raise SystemExit(main())
