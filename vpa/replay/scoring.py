"""Scoring a recommender over time against the usage that followed (`vpa replay --evaluate`).

Owns: `Scorer` — per trace key, two sets of measures over every usage sample after the first
recommendation.

What is applied (the measures that count; `apply` gives each change point, `vpa.replay.applying` decides
them): the requests in force, memory request = memory limit (one provisioned size), CPU request. Per
key-day: memory held (request × the time since the key's previous sample, at most `MAX_STEP_S`), the
time average of `(request − usage)⁺ / request` (clipped slack), overrun samples (usage above the applied
memory limit; CPU: above the applied request, a throttling proxy), overrun runs (consecutive overrun
samples of a key under one applied value count once, on the day the run starts), and applied changes
(every change point after the first application).

Legacy, against the latest target whether or not the updater would apply it (kept so that earlier
numbers can be compared): the limits in effect (the last recommendation's target: memory target as
the memory limit, CPU target as the CPU request) and, for every later usage sample: relative slack
`(mean limit − p95 usage) / mean limit` over each day's samples (Autopilot's per-day relative slack,
negative on a day whose 95th-percentile usage exceeds the limit) and the time average of
`(limit − usage)⁺ / limit` ("mean slack", never negative), OOM proxies
(memory usage above the memory limit), CPU throttling proxies (CPU usage above the CPU target), the
recommendation changes that would trigger an update (upstream's updater rule: the request in effect
outside the new `[lowerBound, upperBound]`, after which the target becomes the request), and the time
from a key's first sample to its first recommendation; `summarize` turns that into per-key and overall
numbers.

Must not: replay, read files, read the clock, or format output — `vpa.replay.evaluating` does those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final, NamedTuple

DAY_S: Final = 86_400.0
MAX_STEP_S: Final = 3600.0
"""A sample holds the applied request for the time since the key's previous sample, at most this long
(the trace's gaps, a day at each month's end in Bitbrains, are not counted as held)."""
GIB: Final = float(2**30)


@dataclass(slots=True)
class _Day:
    memory_samples: int = 0
    memory_slack: float = 0.0
    memory_limit_sum: float = 0.0
    memory_usage: list[float] = field(default_factory=list)
    cpu_limit_sum: float = 0.0
    cpu_usage: list[float] = field(default_factory=list)
    oom_proxies: int = 0
    cpu_samples: int = 0
    cpu_slack: float = 0.0
    throttle_proxies: int = 0
    # what is applied
    applied_samples: int = 0
    memory_held: float = 0.0
    """Byte-seconds."""
    memory_applied_samples: int = 0
    memory_applied_slack: float = 0.0
    memory_overruns: int = 0
    memory_runs: int = 0
    cpu_held: float = 0.0
    """Core-seconds."""
    cpu_applied_samples: int = 0
    cpu_applied_slack: float = 0.0
    cpu_overruns: int = 0
    cpu_runs: int = 0
    changes: int = 0


class Observed(NamedTuple):
    """What one sample was: above the latest target (legacy OOM proxy), above the applied memory limit,
    and the first sample of an overrun run."""

    above_target: bool
    overrun: bool
    run_start: bool


NOT_OBSERVED: Final = Observed(False, False, False)


@dataclass(slots=True)
class _Key:
    first_sample: float
    first_recommendation: float | None = None
    cpu_millicores: int | None = None
    memory_bytes: int | None = None
    request_cpu_millicores: int | None = None
    request_memory_bytes: int | None = None
    updates: int = 0
    days: dict[int, _Day] = field(default_factory=dict)
    applied_cpu: int | None = None
    applied_memory: int | None = None
    applied: list[tuple[float, int | None, int | None]] = field(default_factory=list)
    """Change points: (time, memory bytes, CPU millicores); the first is the first application."""
    previous_sample: float | None = None
    memory_run: bool = False
    cpu_run: bool = False


@dataclass(frozen=True, slots=True)
class KeyScore:
    """One key's numbers; slack means are over its scored days (None when none was scored)."""

    key: str
    days: int
    memory_slack: float | None
    cpu_slack: float | None
    memory_mean_slack: float | None
    cpu_mean_slack: float | None
    oom_proxies: int
    oom_days: int
    throttle_proxies: int
    throttle_days: int
    updates: int
    time_to_first_s: float | None
    # what is applied
    memory_held_gib_h: float = 0.0
    memory_applied_slack: float | None = None
    memory_overruns: int = 0
    memory_runs: int = 0
    memory_run_days: int = 0
    cpu_held_core_h: float = 0.0
    cpu_applied_slack: float | None = None
    cpu_overruns: int = 0
    cpu_runs: int = 0
    cpu_run_days: int = 0
    changes: int = 0
    applied: tuple[tuple[float, int | None, int | None], ...] = ()
    """Change points (time, memory bytes, CPU millicores)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """Overall numbers: means over all scored key-days (each day weighs the same)."""

    keys: int
    days: int
    memory_slack: float | None
    cpu_slack: float | None
    memory_mean_slack: float | None
    cpu_mean_slack: float | None
    oom_proxies_per_day: float
    oom_day_share: float
    throttle_proxies_per_day: float
    throttle_day_share: float
    updates: int
    mean_time_to_first_s: float | None
    # what is applied
    memory_held_gib_h: float = 0.0
    memory_applied_slack: float | None = None
    memory_overruns: int = 0
    memory_overruns_per_day: float = 0.0
    memory_runs: int = 0
    memory_runs_per_day: float = 0.0
    memory_run_day_share: float = 0.0
    cpu_held_core_h: float = 0.0
    cpu_applied_slack: float | None = None
    cpu_overruns: int = 0
    cpu_overruns_per_day: float = 0.0
    cpu_runs: int = 0
    cpu_runs_per_day: float = 0.0
    cpu_run_day_share: float = 0.0
    changes: int = 0
    changes_per_day: float = 0.0


class Scorer:
    """Accumulates the scores; call `observe` for each sample and `recommend` at each recomputation."""

    def __init__(self) -> None:
        self._keys: dict[str, _Key] = {}

    def observe(self, key: str, timestamp: float, cpu_cores: float | None,
                memory_bytes: int | None) -> Observed:
        """Score one usage sample against the latest target and against the applied requests."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(first_sample=timestamp)
        if state.first_recommendation is None:
            state.previous_sample = timestamp
            return NOT_OBSERVED
        day = state.days.get(int(timestamp // DAY_S))
        if day is None:
            day = state.days[int(timestamp // DAY_S)] = _Day()
        above_target = False
        limit = state.memory_bytes
        if memory_bytes is not None and limit:
            day.memory_samples += 1
            day.memory_slack += max(0, limit - memory_bytes) / limit
            day.memory_limit_sum += limit
            day.memory_usage.append(float(memory_bytes))
            if memory_bytes > limit:
                day.oom_proxies += 1
                above_target = True
        cpu_target = state.cpu_millicores
        if cpu_cores is not None and cpu_target:
            target = cpu_target / 1000
            day.cpu_samples += 1
            day.cpu_slack += max(0.0, target - cpu_cores) / target
            day.cpu_limit_sum += target
            day.cpu_usage.append(cpu_cores)
            if cpu_cores > target:
                day.throttle_proxies += 1
        overrun = run_start = False
        if state.applied:
            previous = state.previous_sample
            step = 0.0 if previous is None else min(MAX_STEP_S, max(0.0, timestamp - previous))
            day.applied_samples += 1
            request = state.applied_memory
            if request:
                day.memory_held += request * step
                if memory_bytes is not None:
                    day.memory_applied_samples += 1
                    day.memory_applied_slack += max(0, request - memory_bytes) / request
                    if memory_bytes > request:
                        day.memory_overruns += 1
                        overrun = True
                        if not state.memory_run:
                            day.memory_runs += 1
                            run_start = state.memory_run = True
                    else:
                        state.memory_run = False
            cpu_request = state.applied_cpu
            if cpu_request:
                cores = cpu_request / 1000
                day.cpu_held += cores * step
                if cpu_cores is not None:
                    day.cpu_applied_samples += 1
                    day.cpu_applied_slack += max(0.0, cores - cpu_cores) / cores
                    if cpu_cores > cores:
                        day.cpu_overruns += 1
                        if not state.cpu_run:
                            day.cpu_runs += 1
                            state.cpu_run = True
                    else:
                        state.cpu_run = False
        state.previous_sample = timestamp
        return Observed(above_target, overrun, run_start)

    def apply(self, key: str, timestamp: float, cpu_millicores: int | None, memory_bytes: int | None) -> None:
        """The updater puts these requests on the pod at `timestamp` (the first call: the first
        application; every later one: an applied change, counted on its day). A run under the old value
        ends: an overrun under the new one is a new run."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(first_sample=timestamp)
        if state.applied:
            day = state.days.get(int(timestamp // DAY_S))
            if day is None:
                day = state.days[int(timestamp // DAY_S)] = _Day()
            day.changes += 1
        state.applied.append((timestamp, memory_bytes, cpu_millicores))
        if memory_bytes != state.applied_memory:
            state.memory_run = False
        if cpu_millicores != state.applied_cpu:
            state.cpu_run = False
        state.applied_cpu, state.applied_memory = cpu_millicores, memory_bytes

    def recommend(self, key: str, timestamp: float, target: tuple[int | None, int | None],
                  lower: tuple[int | None, int | None], upper: tuple[int | None, int | None]) -> None:
        """A recomputation at `timestamp`: (CPU millicores, memory bytes) target and bounds."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(first_sample=timestamp)
        if target == (None, None):
            return
        if state.first_recommendation is None:
            state.first_recommendation = timestamp
            state.request_cpu_millicores, state.request_memory_bytes = target
        elif (_outside(state.request_cpu_millicores, lower[0], upper[0])
              or _outside(state.request_memory_bytes, lower[1], upper[1])):
            state.updates += 1
            state.request_cpu_millicores, state.request_memory_bytes = target
        state.cpu_millicores, state.memory_bytes = target

    def scores(self) -> list[KeyScore]:
        result = []
        for key in sorted(self._keys):
            state = self._keys[key]
            days = list(state.days.values())
            result.append(KeyScore(
                key=key,
                days=sum(1 for d in days if d.memory_samples or d.cpu_samples),
                memory_slack=_mean([_relative_slack(d.memory_limit_sum, d.memory_usage) for d in days]),
                cpu_slack=_mean([_relative_slack(d.cpu_limit_sum, d.cpu_usage) for d in days]),
                memory_mean_slack=_mean([d.memory_slack / d.memory_samples if d.memory_samples else None
                                         for d in days]),
                cpu_mean_slack=_mean([d.cpu_slack / d.cpu_samples if d.cpu_samples else None for d in days]),
                oom_proxies=sum(d.oom_proxies for d in days),
                oom_days=sum(1 for d in days if d.oom_proxies),
                throttle_proxies=sum(d.throttle_proxies for d in days),
                throttle_days=sum(1 for d in days if d.throttle_proxies),
                updates=state.updates,
                time_to_first_s=(None if state.first_recommendation is None
                                 else state.first_recommendation - state.first_sample),
                **_applied_numbers(days)._asdict(),
                applied=tuple(state.applied),
            ))
        return result

    def summary(self) -> Summary:
        return summarize(self.scores(), self._all_days())

    def _all_days(self) -> list[_Day]:
        return [day for state in self._keys.values() for day in state.days.values()]


class _AppliedNumbers(NamedTuple):
    memory_held_gib_h: float
    memory_applied_slack: float | None
    memory_overruns: int
    memory_runs: int
    memory_run_days: int
    cpu_held_core_h: float
    cpu_applied_slack: float | None
    cpu_overruns: int
    cpu_runs: int
    cpu_run_days: int
    changes: int


def _applied_numbers(days: list[_Day]) -> _AppliedNumbers:
    """The measures of what is applied over `days` (one key's or every key's)."""
    return _AppliedNumbers(
        memory_held_gib_h=sum(d.memory_held for d in days) / GIB / 3600,
        memory_applied_slack=_mean([d.memory_applied_slack / d.memory_applied_samples
                                    if d.memory_applied_samples else None for d in days]),
        memory_overruns=sum(d.memory_overruns for d in days),
        memory_runs=sum(d.memory_runs for d in days),
        memory_run_days=sum(1 for d in days if d.memory_runs),
        cpu_held_core_h=sum(d.cpu_held for d in days) / 3600,
        cpu_applied_slack=_mean([d.cpu_applied_slack / d.cpu_applied_samples
                                 if d.cpu_applied_samples else None for d in days]),
        cpu_overruns=sum(d.cpu_overruns for d in days),
        cpu_runs=sum(d.cpu_runs for d in days),
        cpu_run_days=sum(1 for d in days if d.cpu_runs),
        changes=sum(d.changes for d in days),
    )


def _outside(request: int | None, lower: int | None, upper: int | None) -> bool:
    if request is None:
        return False
    return (lower is not None and request < lower) or (upper is not None and request > upper)


def p95(values: list[float]) -> float:
    """The 95th percentile as the smallest value with at least 95% of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _relative_slack(limit_sum: float, usage: list[float]) -> float | None:
    if not usage:
        return None
    mean_limit = limit_sum / len(usage)
    return (mean_limit - p95(usage)) / mean_limit


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize(scores: list[KeyScore], days: list[_Day]) -> Summary:
    """Overall means over key-days: slack per scored day, proxies per day with any sample scored."""
    scored = [d for d in days if d.memory_samples or d.cpu_samples]
    count = max(1, len(scored))
    applied = _applied_numbers(days)
    memory_overruns, memory_runs = applied.memory_overruns, applied.memory_runs
    cpu_overruns, cpu_runs, changes = applied.cpu_overruns, applied.cpu_runs, applied.changes
    firsts = [s.time_to_first_s for s in scores if s.time_to_first_s is not None]
    return Summary(
        keys=len(scores),
        days=len(scored),
        memory_slack=_mean([_relative_slack(d.memory_limit_sum, d.memory_usage) for d in days]),
        cpu_slack=_mean([_relative_slack(d.cpu_limit_sum, d.cpu_usage) for d in days]),
        memory_mean_slack=_mean([d.memory_slack / d.memory_samples if d.memory_samples else None
                                 for d in days]),
        cpu_mean_slack=_mean([d.cpu_slack / d.cpu_samples if d.cpu_samples else None for d in days]),
        oom_proxies_per_day=sum(d.oom_proxies for d in scored) / count,
        oom_day_share=sum(1 for d in scored if d.oom_proxies) / count,
        throttle_proxies_per_day=sum(d.throttle_proxies for d in scored) / count,
        throttle_day_share=sum(1 for d in scored if d.throttle_proxies) / count,
        updates=sum(s.updates for s in scores),
        mean_time_to_first_s=sum(firsts) / len(firsts) if firsts else None,
        memory_held_gib_h=applied.memory_held_gib_h,
        memory_applied_slack=applied.memory_applied_slack,
        memory_overruns=memory_overruns,
        memory_overruns_per_day=memory_overruns / count,
        memory_runs=memory_runs,
        memory_runs_per_day=memory_runs / count,
        memory_run_day_share=sum(1 for d in scored if d.memory_runs) / count,
        cpu_held_core_h=applied.cpu_held_core_h,
        cpu_applied_slack=applied.cpu_applied_slack,
        cpu_overruns=cpu_overruns,
        cpu_overruns_per_day=cpu_overruns / count,
        cpu_runs=cpu_runs,
        cpu_runs_per_day=cpu_runs / count,
        cpu_run_day_share=sum(1 for d in scored if d.cpu_runs) / count,
        changes=changes,
        changes_per_day=changes / count,
    )
