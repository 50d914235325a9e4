"""Run every benchmark (or the ones named): `python -m benchmarks [name ...]`.

Each entry of `BENCHMARKS` names a module with `main(argv) -> int`; add yours there. The runner prints each
benchmark's table and exits non-zero if any missed its target. Not part of CI's pass/fail.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS: dict[str, str] = {
    "cpu_floor": "benchmarks.cpu_floor",
    "sim_list": "benchmarks.sim_list",
    "sim_scale": "benchmarks.sim_scale",
    "watch_cache": "benchmarks.watch_cache",
    "pod_views": "benchmarks.pod_views",
    "recommender_estimation": "benchmarks.recommender_estimation",
    "replay_throughput": "benchmarks.replay_throughput",
    "recommender_quality": "benchmarks.recommender_quality",
    "updater_decisions": "benchmarks.updater_decisions",
    "recommender_loop": "benchmarks.recommender_loop",
    "status_writes": "benchmarks.status_writes",
    "metrics_read": "benchmarks.metrics_read",
    "webhook_throughput": "benchmarks.webhook_throughput",
    "webhook_during_recommender": "benchmarks.webhook_during_recommender",
    "updater_inplace_e2e": "benchmarks.updater_inplace_e2e",
    "recommendation_metrics": "benchmarks.recommendation_metrics",
    "reactive_inplace": "benchmarks.reactive_inplace",
    "control_plane": "benchmarks.control_plane",
    "kubelets": "benchmarks.kubelets",
    "faults": "benchmarks.faults",
    "run_scale": "benchmarks.run_scale",
    "client_request": "benchmarks.client_request",
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        module = importlib.import_module(BENCHMARKS[name])
        status |= int(module.main([]))
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
