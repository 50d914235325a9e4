"""Benchmark: one PodMetrics LIST parsed and converted by `PodMetricsReader.read`, and the event loop.

`python -m benchmarks.metrics_read [--pods 10000] [--containers-per-pod 5]`

A `metrics.k8s.io/v1beta1` PodMetricsList as metrics-server writes it (`--pods` pods × 5 containers) is served
from memory by a stub client in 64 KiB chunks, so the numbers are the reader's own: parse, conversion to
`PodUsage`, and
freeing. The runtime's GC policy (`vpa.aio.heap`) runs as in `vpa run`. A 1 ms ticker measures the longest
event-loop stall during the read (DESIGN §6 budget: 20 ms). For comparison, the same body parsed in one
`orjson.loads` call (what the reader did before it parsed item by item).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from benchmarks import LoopTicker, run_loop
from vpa.aio.heap import HeapKeeper
from vpa.kube.metricsreading import PodMetricsReader

TARGET_STALL_MS = 20.0


def _body(pods: int, per_pod: int) -> bytes:
    items = [
        {
            "metadata": {
                "name": f"app-{i}-7d9f8b6c4-x2k9p",
                "namespace": f"team-{i // 100}",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": f"app-{i}", "pod-template-hash": "7d9f8b6c4"},
            },
            "timestamp": "2026-01-01T00:00:00Z",
            "window": "30.007s",
            "containers": [
                {"name": f"c{j}", "usage": {"cpu": f"{1000 + 37 * i + j}n", "memory": f"{20000 + i}Ki"}}
                for j in range(per_pod)
            ],
        }
        for i in range(pods)
    ]
    return orjson.dumps({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                         "metadata": {}, "items": items})


class _StubClient:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def get_chunks(self, path: str, **_: Any) -> AsyncIterator[bytes]:
        """The body in 64 KiB chunks, as a socket hands it over, a chunk per event-loop turn."""
        for start in range(0, len(self.body), 65536):
            yield self.body[start:start + 65536]
            await asyncio.sleep(0)


async def _run(pods: int, per_pod: int) -> int:
    body = _body(pods, per_pod)
    gc.collect()
    gc.freeze()
    keeper = asyncio.create_task(HeapKeeper(interval_s=1e9).run())
    reader = PodMetricsReader(_StubClient(body))  # type: ignore[arg-type]
    rows = []
    for _ in range(3):
        ticker = LoopTicker()
        ticker.start()
        await asyncio.sleep(0.01)
        started = time.perf_counter()
        read = await reader.read()
        seconds = time.perf_counter() - started
        stall = await ticker.stop()
        assert len(read.pods) == pods
        assert not read.malformed
        del read
        rows.append((seconds, stall))
    started = time.perf_counter()
    document = orjson.loads(body)
    whole = time.perf_counter() - started
    del document
    keeper.cancel()
    await asyncio.gather(keeper, return_exceptions=True)

    print(f"PodMetrics read: {pods} pods × {per_pod} containers, {len(body) / 2**20:.1f} MiB body")
    print(f"{'run':<6}{'read s':>9}  longest stall")
    for index, (seconds, stall) in enumerate(rows, 1):
        print(f"{index:<6}{seconds:>9.3f}  {stall.describe()}")
    print(f"for comparison, orjson.loads of the whole body in one call: {whole * 1000:.1f} ms")
    longest_ms = max(stall.seconds for _, stall in rows) * 1000
    ok = longest_ms <= TARGET_STALL_MS
    verdict = "met" if ok else "MISSED"
    print(f"longest stall {longest_ms:.1f} ms (target <= {TARGET_STALL_MS:g} ms): {verdict}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_read", description=__doc__)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--containers-per-pod", type=int, default=5)
    args = parser.parse_args(argv)
    return run_loop(_run(args.pods, args.containers_per_pod))


if __name__ == "__main__":
    sys.exit(main())
