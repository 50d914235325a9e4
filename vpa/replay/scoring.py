"""Scoring a recommender over time against the usage that followed (`vpa replay --evaluate`).

Owns: `Scorer` — per trace key, the limits in effect (the last recommendation's target: memory target as
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
from typing import Final

DAY_S: Final = 86_400.0


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


class Scorer:
    """Accumulates the scores; call `observe` for each sample and `recommend` at each recomputation."""

    def __init__(self) -> None:
        self._keys: dict[str, _Key] = {}

    def observe(self, key: str, timestamp: float, cpu_cores: float | None, memory_bytes: int | None) -> bool:
        """Score one usage sample against the limits in effect; True when it is an OOM proxy."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key(first_sample=timestamp)
        if state.first_recommendation is None:
            return False
        day = state.days.get(int(timestamp // DAY_S))
        if day is None:
            day = state.days[int(timestamp // DAY_S)] = _Day()
        oom = False
        limit = state.memory_bytes
        if memory_bytes is not None and limit:
            day.memory_samples += 1
            day.memory_slack += max(0, limit - memory_bytes) / limit
            day.memory_limit_sum += limit
            day.memory_usage.append(float(memory_bytes))
            if memory_bytes > limit:
                day.oom_proxies += 1
                oom = True
        cpu_target = state.cpu_millicores
        if cpu_cores is not None and cpu_target:
            target = cpu_target / 1000
            day.cpu_samples += 1
            day.cpu_slack += max(0.0, target - cpu_cores) / target
            day.cpu_limit_sum += target
            day.cpu_usage.append(cpu_cores)
            if cpu_cores > target:
                day.throttle_proxies += 1
        return oom

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
            ))
        return result

    def summary(self) -> Summary:
        return summarize(self.scores(), self._all_days())

    def _all_days(self) -> list[_Day]:
        return [day for state in self._keys.values() for day in state.days.values()]


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
    )
