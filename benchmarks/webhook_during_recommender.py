"""Benchmark: the admission webhook's latency while the recommender loop runs in the same process.

`python -m benchmarks.webhook_during_recommender [--vpas 10000] [--duration 10]`

DESIGN §6: the webhook shares the process with the recommender (it serves from its own event loop
thread, `vpa.components.webhook.loop_thread`, and competes with the recommender's loop for the GIL), so the
recommender's CPU work must never hold the interpreter long; the budget is a webhook p99 within 20 ms while a
50,000-container loop runs. Set-up, in one process as `vpa run`:
- the webhook of `benchmarks.webhook_throughput` (a `Runtime` with the real `AdmissionController`, 10,000
  VPAs in its cache, HTTPS on 127.0.0.1), which also installs the runtime's GC policy (`vpa.aio.heap`);
- the recommender of `benchmarks.recommender_loop` (`--vpas` VPAs × 5 containers with a day of history,
  in-memory inputs and sinks, so every loop recomputes and "writes" every status and checkpoint).
`wrk` at concurrency 1 (one thread, keep-alive, 127.0.0.1) sends the pod review for `--duration` seconds
twice: with the recommender idle, then while `run_once` runs back to back (the virtual clock a minute
further each time). wrk's client is closed-loop: the faster the answers, the more reviews it sends (the
`reviews` column) and the more CPU the webhook takes from the loop. Skips with one line when `wrk` is not
installed.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import quiet_logs, recommender_loop, run_loop, webhook_throughput

TARGET_P99_MS = 20.0
_PERCENTILE = re.compile(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s)\s*$", re.M)
_MAX = re.compile(r"^\s*Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", re.M)
_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
_REQUESTS = re.compile(r"^\s*(\d+) requests in", re.M)


def _latencies(text: str) -> dict[str, float]:
    """p50, p99 and max in ms from wrk's --latency output."""
    out = {f"p{m.group(1)}": float(m.group(2)) * _UNIT_MS[m.group(3)] for m in _PERCENTILE.finditer(text)}
    top = _MAX.search(text)
    if top is None or set(out) != {"p50", "p99"}:
        raise RuntimeError(f"cannot read wrk's latencies:\n{text}")
    out["max"] = float(top.group(1)) * _UNIT_MS[top.group(2)]
    served = _REQUESTS.search(text)
    out["reviews"] = float(served.group(1)) if served else 0.0
    return out


async def _run(vpas: int, duration_s: float) -> int:
    quiet_logs()
    body = webhook_throughput._review()
    with tempfile.TemporaryDirectory(prefix="vpa-bench-") as tmp:
        directory = Path(tmp)
        webhook_throughput._write_certs(directory)
        script = webhook_throughput.write_wrk_script(directory, body)
        async with webhook_throughput.serving_webhook(directory, body) as controller:
            setup = recommender_loop.build(vpas, 5, 100)
            await setup.recommender.run_once()  # adds every pod
            fed_s = recommender_loop.feed_history(setup, 1800.0)
            print(f"recommender: {vpas} VPAs, {vpas * 5} containers, a day of history fed in {fed_s:.1f} s")

            _, _, idle_text = await webhook_throughput._wrk(controller.port, 1, duration_s, script)
            idle = _latencies(idle_text)

            loops: list[float] = []

            async def loop_back_to_back() -> None:
                while True:
                    setup.clock.advance(60)
                    started = time.perf_counter()
                    await setup.recommender.run_once()
                    loops.append(time.perf_counter() - started)

            looping = asyncio.create_task(loop_back_to_back())
            try:
                await asyncio.sleep(0.5)  # into the first loop's work
                _, _, busy_text = await webhook_throughput._wrk(controller.port, 1, duration_s, script)
            finally:
                looping.cancel()
                await asyncio.gather(looping, return_exceptions=True)
            busy = _latencies(busy_text)

    print(f"wrk -t1 -c1, {duration_s:g} s per run, HTTPS keep-alive, {len(body)} B pod review")
    print("  leaves out: the recommender's API traffic (in-memory sinks, ready-built metrics) and any "
          "relist; with both, over HTTPS: `python -m benchmarks.run_scale`")
    print(f"{'recommender':<22}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'reviews':>9}")
    for label, row in (("idle", idle), (f"looping ({len(loops)} loops done)", busy)):
        print(f"{label:<22}{row['p50']:>9.2f}{row['p99']:>9.2f}{row['max']:>9.2f}{row['reviews']:>9.0f}")
    if loops:
        print(f"recommender loop seconds while serving: {', '.join(f'{s:.2f}' for s in loops)}")
    ok = busy["p99"] <= TARGET_P99_MS
    print(f"webhook p99 while the loop runs {busy['p99']:.2f} ms (target <= {TARGET_P99_MS:g} ms): "
          + ("met" if ok else "MISSED"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.webhook_during_recommender",
                                     description=__doc__)
    parser.add_argument("--vpas", type=int, default=10_000, help="recommender VPAs (× 5 containers)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run (default 10)")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("webhook_during_recommender: skipped, wrk is not installed (apt-get install -y wrk)")
        return 0
    return run_loop(_run(args.vpas, args.duration))


if __name__ == "__main__":
    sys.exit(main())
