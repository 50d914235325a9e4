"""Benchmark: raw pod JSON bytes → trimmed `PodView`s, time and retained memory per cached pod.

Run: `python -m benchmarks.pod_views [--pods N] [--chunk N]`.

Pods come from `tests.builders.make_replica_pod` (the realistic ~8 KiB pods `make_pods` builds, spread
over 50 namespaces × 10 Deployments, 100 replicas each). They are built in chunks and kept only as orjson
bytes (about 400 MB for 50,000), never all as dicts. Two passes over the bytes, each with its own
`Interner`, keeping the views as a watch cache would (a dict `namespace/name → PodView`):

1. timed: `orjson.loads(bytes)` then `pod_from_dict` for one pod at a time, as a watch stream or a
   streamed LIST delivers them (no tracing, so the time is honest; the garbage collector runs as usual);
2. traced: the same under `tracemalloc`; retained memory = traced bytes still allocated once the raw
   bytes and dicts are gone (views + cache dict + interner tables) divided by the pod count.

Target (DESIGN.md §10): ≤ 2 KiB per cached pod; initial LIST + parse of 50,000 pods ≤ 15 s.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Iterator

import orjson

from tests.builders import make_replica_pod
from vpa.kube.converting import Interner, pod_from_dict
from vpa.model.pod import PodView


def _chunks(total: int, chunk: int) -> Iterator[list[bytes]]:
    """Pods as JSON bytes, `chunk` at a time, so the builder dicts never all exist at once."""
    for start in range(0, total, chunk):
        yield [orjson.dumps(make_replica_pod(index)) for index in range(start, min(total, start + chunk))]


def run(total: int, chunk: int) -> dict[str, float]:
    # Pre-serialise once; both passes read the same bytes.
    raw_chunks = list(_chunks(total, chunk))
    raw_bytes = sum(len(b) for c in raw_chunks for b in c)

    # Pass 1: time.
    interner = Interner()
    cache: dict[str, PodView] = {}
    parse_s = convert_s = 0.0
    clock = time.perf_counter
    for raw_chunk in raw_chunks:
        for raw in raw_chunk:
            t0 = clock()
            obj = orjson.loads(raw)
            t1 = clock()
            view = pod_from_dict(obj, interner=interner)
            cache[view.key] = view
            parse_s += t1 - t0
            convert_s += clock() - t1
    del obj
    assert len(cache) == total, f"expected {total} distinct pods, cached {len(cache)}"
    del cache, interner
    gc.collect()

    # Pass 2: retained memory.
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    interner = Interner()
    cache = {}
    for raw_chunk in raw_chunks:
        for raw in raw_chunk:
            view = pod_from_dict(orjson.loads(raw), interner=interner)
            cache[view.key] = view
    del view
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()
    assert len(cache) == total
    return {
        "pods": total,
        "raw_kib_per_pod": raw_bytes / total / 1024,
        "parse_s": parse_s,
        "convert_s": convert_s,
        "total_s": parse_s + convert_s,
        "us_per_pod": (parse_s + convert_s) / total * 1e6,
        "retained_bytes_per_pod": retained / total,
        "interner_entries": len(interner),
    }


TARGET_BYTES_PER_POD = 2048
TARGET_TOTAL_S = 15.0


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit status 1 when a target is missed (the `python -m benchmarks` contract)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.pod_views", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--chunk", type=int, default=5_000)
    args = parser.parse_args(argv)
    result = run(args.pods, args.chunk)
    print(f"{'metric':<34}{'value':>14}{'target':>14}")
    rows = [
        ("pods", f"{result['pods']:,.0f}", ""),
        ("raw JSON per pod (KiB)", f"{result['raw_kib_per_pod']:.2f}", ""),
        ("orjson.loads total (s)", f"{result['parse_s']:.2f}", ""),
        ("pod_from_dict total (s)", f"{result['convert_s']:.2f}", ""),
        ("parse + convert total (s)", f"{result['total_s']:.2f}", f"≤ {TARGET_TOTAL_S:g}"),
        ("per pod (µs)", f"{result['us_per_pod']:.1f}", ""),
        (
            "retained per cached pod (bytes)",
            f"{result['retained_bytes_per_pod']:.0f}",
            f"≤ {TARGET_BYTES_PER_POD}",
        ),
        ("interner entries", f"{result['interner_entries']:,.0f}", ""),
    ]
    for name, value, target in rows:
        print(f"{name:<34}{value:>14}{target:>14}")
    missed = result["retained_bytes_per_pod"] > TARGET_BYTES_PER_POD or result["total_s"] > TARGET_TOTAL_S
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
