"""Evaluation: recommendation quality of every built-in recommender (`vpa replay --evaluate`'s numbers).

Run: `python -m benchmarks.recommender_quality [--trace PATH] [--vms N] [--every SECONDS] [--closed-loop]
[--html PATH] [--synthetic-only] [--sweep]`. Two parts (`--sweep` instead runs only `moving-window`
parameter variants on the trace's tuning split, to show the slack/OOM trade-off around its defaults):

- the development half of the Bitbrains "Rnd" trace, read from `../shared/traces/bitbrains_rnd_dev.parquet`
  next to the repository (or `--trace`), converted in memory as `benchmarks.replay_bitbrains` does; skipped
  with one line when the file is absent (it is never copied into the repository);
- five synthetic scenarios generated here with a fixed seed (steady, daily cycle, slow leak, rare bursts,
  step change; 4 containers each, 14 days at 5-minute samples).

For each, every built-in recommender is replayed with recomputation every `--every` (default 5 min, the
trace's sample interval, so that `moving-window` can follow usage; `--every 3600` gives the hourly
numbers) and scored by `vpa.replay.scoring` (docs/quality.md defines the numbers). The target of
issue 16 is checked on the trace for `cost-aware` and `moving-window`: at least 30% less mean memory
relative slack than `default`, no more OOM proxies per key-day, CPU throttling proxies per key-day no
worse. The trace's numbers are also printed per split of the VMs (id ≡ 1 mod 4: where the parameters
were chosen; id ≡ 3 mod 4: held out). Beside it, the slack of clairvoyant limits
(each day's or hour's actual peak, so no OOM proxy at all): the floor under any recommender's slack at
zero overruns.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Final

from benchmarks.replay_bitbrains import DEFAULT_TRACE, load
from vpa.logic.recommender.cost_aware import BUILTIN_RECOMMENDERS
from vpa.logic.recommender.estimation import PercentilePodRecommender, PodRecommender, per_pod_minimum
from vpa.logic.recommender.moving_window import MovingWindowConfig, MovingWindowPodRecommender
from vpa.logic.recommender.recommending import RecommenderConfig
from vpa.model.vpa import DEFAULT_RECOMMENDER_NAME, RAISE_ON_OVERRUN_RECOMMENDER_NAME
from vpa.replay.evaluating import Evaluation, RecommenderEvaluation, evaluate, evaluate_one, render_html
from vpa.replay.scoring import DAY_S, KeyScore, p95
from vpa.replay.traces import Trace

_GIB = 2**30
STEP_S = 300


def _scenario(name: str, rng: random.Random, minute: float) -> tuple[float, float]:
    """(CPU cores, memory bytes) of one synthetic container `minute` minutes into the trace."""
    day = minute / 1440
    cycle = math.sin(2 * math.pi * day)
    if name == "steady":
        return 0.5 + rng.gauss(0, 0.05), _GIB * (1 + rng.gauss(0, 0.02))
    if name == "daily":
        return max(0.05, 1 + 0.6 * cycle + rng.gauss(0, 0.1)), _GIB * (1.5 + 0.5 * cycle + rng.gauss(0, 0.03))
    if name == "leak":  # memory grows 8% a day until a restart every 5 days
        return 0.3 + rng.gauss(0, 0.03), _GIB * (1 + 0.08 * (day % 5) + rng.gauss(0, 0.01))
    if name == "bursty":  # rare short bursts to 3x
        burst = rng.random() < 0.01
        return (0.4 + (1.0 if burst else 0.0) + rng.gauss(0, 0.04),
                _GIB * ((2.5 if burst else 1.0) + rng.gauss(0, 0.02)))
    if name == "step":  # doubles after a week
        factor = 2.0 if day >= 7 else 1.0
        return factor * (0.4 + rng.gauss(0, 0.04)), factor * _GIB * (1 + rng.gauss(0, 0.02))
    raise ValueError(name)


SCENARIOS = ("steady", "daily", "leak", "bursty", "step")


def synthetic_trace(scenario: str, containers: int = 4, days: int = 14, seed: int = 16) -> Trace:
    rng = random.Random(f"{seed}-{scenario}")
    trace = Trace([], [], [], [], [])
    start = 1_700_000_000.0
    for step in range(days * 86_400 // STEP_S):
        for index in range(containers):
            cpu, memory = _scenario(scenario, rng, step * STEP_S / 60 + index * 137)
            trace.timestamps.append(start + step * STEP_S)
            trace.containers.append(f"{scenario}-{index}")
            trace.cpu_cores.append(max(0.001, cpu))
            trace.memory_bytes.append(max(1, int(memory)))
            trace.oom.append(False)
    return trace


def _row(label: str, name: str, result: Evaluation, index: int) -> str:
    s = result.recommenders[index].summary
    return (f"  {label:<12}{name:<14}{s.days:>8}{s.memory_slack or 0:>10.3f}{s.memory_mean_slack or 0:>7.3f}"
            f"{s.oom_proxies_per_day:>9.3f}"
            f"{s.oom_day_share:>9.3f}{s.cpu_slack or 0:>10.3f}{s.throttle_proxies_per_day:>10.3f}"
            f"{s.throttle_day_share:>9.3f}{s.updates:>9}")


HEADER = (f"  {'trace':<12}{'recommender':<14}{'key-days':>8}{'mem slack':>10}{'mean':>7}{'OOM/day':>9}"
          f"{'OOM days':>9}"
          f"{'cpu slack':>10}{'thr/day':>10}{'thr days':>9}{'updates':>9}")


def clairvoyant_slack(trace: Trace, floor_bytes: int) -> dict[str, float]:
    """Autopilot's memory slack of limits that know the future, over every key-day with usage: the day's
    own peak held all day (no OOM proxy at all), with and without the per-pod floor, and each hour's own
    peak held for that hour. What no recommender that only sees the past can beat at zero overruns."""
    days: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for ts, key, memory in zip(trace.timestamps, trace.containers, trace.memory_bytes, strict=True):
        if memory is not None:
            days.setdefault((key, int(ts // DAY_S)), []).append((ts, memory))
    sums = {"day peak": 0.0, "day peak, floor": 0.0, "hour peak, floor": 0.0}
    count = 0
    for rows in days.values():
        usage = [float(memory) for _, memory in rows]
        peak = max(usage)
        if peak <= 0:
            continue
        count += 1
        high = p95(usage)
        sums["day peak"] += (peak - high) / peak
        floored = max(peak, floor_bytes)
        sums["day peak, floor"] += (floored - high) / floored
        hourly: dict[int, int] = {}
        for ts, memory in rows:
            hour = int(ts // 3600)
            hourly[hour] = max(hourly.get(hour, 0), memory)
        mean_limit = sum(max(floor_bytes, hourly[int(ts // 3600)]) for ts, _ in rows) / len(rows)
        sums["hour peak, floor"] += (mean_limit - high) / mean_limit
    return {label: total / max(1, count) for label, total in sums.items()}


def split_numbers(result: Evaluation, index: int, part: int) -> tuple[int, float, float, float, int]:
    """(key-days, memory slack, OOM proxies / key-day, throttling / key-day, updates) over the VMs whose
    id is `part` modulo 4 (the trace holds odd ids only: 1 is the tuning split, 3 the report split),
    each key's means weighted by its scored days."""
    keys = [k for k in result.recommenders[index].keys
            if k.key.startswith("vm") and k.key[2:].isdigit() and int(k.key[2:]) % 4 == part]
    days = sum(k.days for k in keys) or 1
    slack = sum((k.memory_slack or 0.0) * k.days for k in keys) / days
    return (days, slack, sum(k.oom_proxies for k in keys) / days,
            sum(k.throttle_proxies for k in keys) / days, sum(k.updates for k in keys))


def check_target(result: Evaluation, candidate: str = "moving-window") -> list[str]:
    """Issue 16's target for `candidate` against `default`; empty when met."""
    by_name = {rec.name: rec.summary for rec in result.recommenders}
    base, other = by_name["default"], by_name[candidate]
    misses = []
    if base.memory_slack and other.memory_slack is not None:
        cut = 1 - other.memory_slack / base.memory_slack
        if cut < 0.30:
            misses.append(f"memory slack {-cut:+.1%} vs default (target: -30% or less)")
    if other.oom_proxies_per_day > base.oom_proxies_per_day:
        misses.append(f"OOM proxies per key-day {other.oom_proxies_per_day:.3f} > "
                      f"{base.oom_proxies_per_day:.3f}")
    if other.throttle_proxies_per_day > base.throttle_proxies_per_day:
        misses.append(f"throttling proxies per key-day {other.throttle_proxies_per_day:.3f} > "
                      f"{base.throttle_proxies_per_day:.3f}")
    return misses


SWEEP: dict[str, MovingWindowConfig] = {
    "chosen": MovingWindowConfig(),
    "margins 1.0": MovingWindowConfig(min_margin=1.0, daily_margin=1.0, level_margin=1.0),
    "margins 1.0, q .95": MovingWindowConfig(min_margin=1.0, max_margin=1.5, margin_quantile=0.95,
                                             daily_margin=1.0, level_margin=1.0, level_quantile=0.95),
    "decrease any time": MovingWindowConfig(decrease_interval_s=300.0),
}
"""`moving-window` parameter variants for `--sweep`: the slack/OOM trade-off around the chosen point."""


def select_split(trace: Trace, part: int) -> Trace:
    """The rows of the VMs whose id is `part` modulo 4."""
    keep = [i for i, key in enumerate(trace.containers) if int(key[2:]) % 4 == part]
    return Trace([trace.timestamps[i] for i in keep], [trace.containers[i] for i in keep],
                 [trace.cpu_cores[i] for i in keep], [trace.memory_bytes[i] for i in keep],
                 [trace.oom[i] for i in keep])


def sweep(trace: Trace, config: RecommenderConfig, every: float) -> None:
    """Upstream's and each `SWEEP` variant on the tuning split (id ≡ 1 mod 4) only."""
    tune = select_split(trace, 1)
    print(f"  sweep on the tuning split ({len(set(tune.containers))} VMs):")
    print(f"  {'variant':<22}{'key-days':>8}{'mem slack':>10}{'OOM/day':>9}{'thr/day':>9}{'updates':>9}")
    runs: list[tuple[str, PodRecommender]] = [("default", PercentilePodRecommender(config.estimation))]
    runs += [(label, MovingWindowPodRecommender(config.estimation, window))
             for label, window in SWEEP.items()]
    for label, algorithm in runs:
        s = evaluate_one(tune, label, config, every, plot_keys=0, algorithm=algorithm).summary
        print(f"  {label:<22}{s.days:>8}{s.memory_slack or 0:>10.3f}{s.oom_proxies_per_day:>9.3f}"
              f"{s.throttle_proxies_per_day:>9.3f}{s.updates:>9}", flush=True)


def select_keys(trace: Trace, keep: set[str]) -> Trace:
    """The rows of the keys in `keep`, in the same order."""
    rows = [i for i, key in enumerate(trace.containers) if key in keep]
    return Trace([trace.timestamps[i] for i in rows], [trace.containers[i] for i in rows],
                 [trace.cpu_cores[i] for i in rows], [trace.memory_bytes[i] for i in rows],
                 [trace.oom[i] for i in rows])


def index_split(trace: Trace) -> tuple[set[str], set[str]]:
    """(tuning, held out): the VMs at even and at odd positions in the trace's VM order (by id). The
    parameters of `oom-averse` and `raise-on-overrun` were chosen on the first part only."""
    vms = sorted(set(trace.containers), key=lambda key: int(key[2:]))
    return set(vms[0::2]), set(vms[1::2])


def applied_numbers(keys: list[KeyScore]) -> dict[str, float]:
    """The issue-44 measures over `keys` (a part of the VMs), from the per-key scores."""
    days = sum(k.days for k in keys) or 1
    return {"held": sum(k.memory_held_gib_h for k in keys), "overruns": sum(k.memory_overruns for k in keys),
            "runs": sum(k.memory_runs for k in keys), "run_days": sum(k.memory_run_days for k in keys) / days,
            "changes": sum(k.changes for k in keys) / days, "days": days}


ISSUE_44: Final = (
    # (measure, open-loop bound, closed-loop bound) as a ratio to default's
    ("held", 1.0, 1.0), ("overruns", 0.5, 0.6), ("runs", 0.8, 0.9), ("run_days", 1.2, 1.2),
)


def check_issue_44(base: dict[str, float], other: dict[str, float], closed: bool) -> list[str]:
    """Issue 44's targets for a recommender against `default` (both scored on what is applied)."""
    misses = []
    for measure, open_bound, closed_bound in ISSUE_44:
        bound = closed_bound if closed else open_bound
        ratio = other[measure] / base[measure] if base[measure] else math.inf
        if ratio > bound:
            misses.append(f"{measure} {ratio:.3f}× default's (at most {bound}×)")
    if other["changes"] > 1.0:
        misses.append(f"{other['changes']:.3f} applied changes per VM-day (at most 1)")
    return misses


def _applied_row(label: str, name: str, numbers: dict[str, float], base: dict[str, float]) -> str:
    def ratio(measure: str) -> str:
        return f"{numbers[measure] / base[measure]:.3f}" if base[measure] else "-"

    return (f"  {label:<16}{name:<14}{numbers['days']:>8.0f}{numbers['held']:>12.0f}{ratio('held'):>7}"
            f"{numbers['overruns']:>9.0f}{ratio('overruns'):>7}{numbers['runs']:>8.0f}{ratio('runs'):>7}"
            f"{numbers['run_days']:>9.3f}{ratio('run_days'):>7}{numbers['changes']:>9.3f}")


APPLIED_HEADER: Final = (f"  {'part':<16}{'recommender':<14}{'VM-days':>8}{'held GiB·h':>12}{'×def':>7}"
                         f"{'overruns':>9}{'×def':>7}{'runs':>8}{'×def':>7}{'run days':>9}{'×def':>7}"
                         f"{'chg/day':>9}")


def applied_report(trace: Trace, names: tuple[str, ...], config: RecommenderConfig, every: float,
                   closed: bool, html: Path | None) -> int:
    """Issue 44's numbers: every recommender on what the updater applies, overall and per part of the
    VMs, the wall time of each, and the targets checked for each against `default` (the first name). 1
    when `raise-on-overrun` misses a target overall."""
    loop = "closed" if closed else "open"
    results: list[RecommenderEvaluation] = []
    for name in names:
        started = time.perf_counter()
        results.append(evaluate_one(trace, name, config, every, closed))
        print(f"  {loop} loop: {name}: {time.perf_counter() - started:.0f} s wall", flush=True)
    evaluation = Evaluation(every, closed, results)
    tune, held_out = index_split(trace)
    print(f"  {loop} loop, recomputed every {every:g} s, scored on what the updater applies:")
    print(APPLIED_HEADER)
    status = 0
    for label, part in (("all", None), ("tuning (even)", tune), ("held out (odd)", held_out)):
        numbers = {rec.name: applied_numbers([k for k in rec.keys if part is None or k.key in part])
                   for rec in results}
        base = numbers["default"]
        for name in names:
            print(_applied_row(label, name, numbers[name], base))
        for name in names[1:]:
            misses = check_issue_44(base, numbers[name], closed)
            if name == RAISE_ON_OVERRUN_RECOMMENDER_NAME and label == "all":
                status |= bool(misses)
            print(f"  {label}: issue 44 targets for {name} ({loop} loop): "
                  + ("met" if not misses else "missed: " + "; ".join(misses)))
    for rec in results:
        s = rec.summary
        print(f"  {loop} {rec.name}: memory slack {s.memory_applied_slack or 0:.3f}, overruns/VM-day "
              f"{s.memory_overruns_per_day:.3f}, runs/VM-day {s.memory_runs_per_day:.3f}, "
              f"CPU throttled/VM-day {s.cpu_overruns_per_day:.3f}, throttled runs/VM-day "
              f"{s.cpu_runs_per_day:.3f}, CPU days {s.cpu_run_day_share:.3f}, CPU slack "
              f"{s.cpu_applied_slack or 0:.3f}; legacy: Autopilot slack {s.memory_slack or 0:.3f}, "
              f"above target/day {s.oom_proxies_per_day:.3f}")
    if html is not None:
        title = f"vpa recommendation quality: Bitbrains Rnd (dev), {loop} loop"
        html.write_text(render_html(evaluation, title))
    return status


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recommender_quality")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--vms", type=int, default=None, help="only the first N VMs of the trace")
    parser.add_argument("--every", type=float, default=None, help="recomputation interval, seconds "
                        "(default 300; 3600 with --loop)")
    parser.add_argument("--closed-loop", action="store_true")
    parser.add_argument("--html", type=Path, default=None, help="write the trace's HTML report here")
    parser.add_argument("--synthetic-only", action="store_true")
    parser.add_argument("--sweep", action="store_true",
                        help="only: moving-window parameter variants on the trace's tuning split")
    parser.add_argument("--loop", choices=("open", "closed", "both"), default=None,
                        help="only: issue 44's numbers on the trace (what the updater applies), hourly "
                             "unless --every is given, in this loop or both; --html is written per loop")
    parser.add_argument("--recommenders", default=None,
                        help="with --loop: only these built-in recommenders (comma-separated; default is "
                             "always evaluated first)")
    args = parser.parse_args(argv)
    args.every_given = args.every is not None
    if args.every is None:
        args.every = 300.0
    if args.loop is not None:
        names = BUILTIN_RECOMMENDERS
        if args.recommenders:
            wanted = [name for name in args.recommenders.split(",") if name]
            unknown = [name for name in wanted if name not in BUILTIN_RECOMMENDERS]
            if unknown:
                print(f"--recommenders: unknown recommender {unknown[0]!r} "
                      f"(built-in: {', '.join(BUILTIN_RECOMMENDERS)})", file=sys.stderr)
                return 2
            names = (DEFAULT_RECOMMENDER_NAME,
                     *(name for name in wanted if name != DEFAULT_RECOMMENDER_NAME))
        if not args.trace.is_file():
            print(f"  bitbrains: trace not found at {args.trace}; skipped")
            return 0
        started = time.perf_counter()
        trace, _ = load(args.trace, args.vms)
        print(f"  bitbrains: {len(set(trace.containers))} VMs, {len(trace)} rows read and converted in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        every = args.every if args.every_given else 3600.0
        status = 0
        for closed in ((False, True) if args.loop == "both" else (args.loop == "closed",)):
            html = None
            if args.html is not None:
                suffix = f"-{'closed' if closed else 'open'}{args.html.suffix}"
                html = args.html.with_name(args.html.stem + suffix)
            status |= applied_report(trace, names, RecommenderConfig(), every, closed, html)
        return status
    if args.sweep:
        if not args.trace.is_file():
            print(f"  bitbrains: trace not found at {args.trace}; skipped")
            return 0
        sweep(load(args.trace, args.vms)[0], RecommenderConfig(), args.every)
        return 0
    config = RecommenderConfig()
    names = BUILTIN_RECOMMENDERS  # default first
    print(f"recommendation quality (recomputed every {args.every:g} s"
          f"{', closed loop' if args.closed_loop else ''}; recommenders: {', '.join(names)})")
    print(HEADER)
    print(f"  splits: {'split':<16}{'recommender':<14}{'key-days':>8}{'mem slack':>10}{'OOM/day':>9}"
          f"{'thr/day':>10}{'updates':>9}")
    status = 0
    if not args.synthetic_only:
        if not args.trace.is_file():
            print(f"  bitbrains: trace not found at {args.trace}; skipped")
        else:
            started = time.perf_counter()
            trace, _ = load(args.trace, args.vms)
            result = evaluate(trace, names, config, args.every, args.closed_loop)
            for index, name in enumerate(names):
                print(_row("bitbrains", name, result, index))
            for part, label in ((1, "tune (id%4=1)"), (3, "report (id%4=3)")):
                for index, name in enumerate(names):
                    days, slack, ooms, throttles, updates = split_numbers(result, index, part)
                    print(f"  {label:<16}{name:<14}{days:>8}{slack:>10.3f}{ooms:>9.3f}{throttles:>10.3f}"
                          f"{updates:>9}")
            elapsed = time.perf_counter() - started
            for candidate in names[1:]:
                misses = check_target(result, candidate)
                if candidate == "moving-window":
                    status |= bool(misses)
                print(f"  bitbrains: {len(set(trace.containers))} VMs, {elapsed:.0f} s; "
                      f"target for {candidate} "
                      + ("met" if not misses else "missed: " + "; ".join(misses)))
            floor = per_pod_minimum(config.estimation, 1).memory_bytes or 0
            bounds = clairvoyant_slack(trace, floor)
            print("  bitbrains: memory slack of clairvoyant limits (zero OOM proxies): "
                  + ", ".join(f"{label} {value:.3f}" for label, value in bounds.items()))
            if args.html is not None:
                args.html.write_text(render_html(result, "vpa recommendation quality: Bitbrains Rnd (dev)"))
    for scenario in SCENARIOS:
        result = evaluate(synthetic_trace(scenario), names, config, args.every, args.closed_loop)
        for index, name in enumerate(names):
            print(_row(scenario, name, result, index))
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
